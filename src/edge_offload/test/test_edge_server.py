# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Edge server and client over real sockets: authentication, sessions, limits, errors."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from edge_offload import protocol
from edge_offload.api import Offloader, OffloaderConfig
from edge_offload.client import ClientConfig, ConnectionState, EdgeClient
from edge_offload.errors import (
    DeadlineMissedError,
    ErrorCode,
    OffloadError,
    ServerRejectedError,
    ServerUnavailableError,
)
from edge_offload.keys import KeyFileError
from edge_offload.models import load_model
from edge_offload.server import ServerConfig
from edge_offload_testing import edge_client_for, loopback_edge_server, make_test_keys

IMAGE = {'image': torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))}


@pytest.fixture
def keys(tmp_path):
    return make_test_keys(tmp_path / 'keys')


_server = loopback_edge_server
_client = edge_client_for


@pytest.fixture
def server(keys):
    with _server(keys) as running:
        yield running


def test_authorised_robot_gets_a_session_and_correct_outputs(keys, server):
    with _client(keys, server.endpoint) as client:
        assert client.wait_connected(5.0), client.state_reason
        assert client.server_info['models'] == ['tiny_cnn']
        handed_off = threading.Event()
        reply = client.call('nnto', 'infer', {'model': 'tiny_cnn'}, IMAGE, handed_off=handed_off)
    assert handed_off.is_set()  # set once the request was passed to the socket
    expected = load_model('tiny_cnn')(IMAGE)['features']
    assert torch.equal(reply.tensors['features'], expected)
    assert reply.bytes_up > IMAGE['image'].numel() * 4
    assert reply.compute_time_s > 0
    stats = server.stats()
    assert stats.requests_total == 1
    assert stats.models['tiny_cnn'].count == 1


def test_unauthorised_robot_is_refused(keys, server):
    with _client(keys, server.endpoint, secret=keys.intruder_secret) as intruder:
        assert not intruder.wait_connected(2.0)
        assert intruder.state is ConnectionState.UNAUTHENTICATED
        assert 'not authorised' in intruder.state_reason
        with pytest.raises(ServerUnavailableError):
            intruder.call('nnto', 'infer', {'model': 'tiny_cnn'}, IMAGE)
    assert server.stats().auth_failures_total >= 1
    assert server.stats().sessions == 0


def test_plaintext_robot_is_refused_by_a_curve_server(keys, server):
    config = ClientConfig(endpoint=server.endpoint, security='plaintext', allow_plaintext=True)
    with EdgeClient(config) as robot:
        assert not robot.wait_connected(2.0)
        assert robot.state is not ConnectionState.CONNECTED
    assert server.stats().sessions == 0


def test_robot_that_expects_another_server_key_is_refused(keys, server, tmp_path):
    other = make_test_keys(tmp_path / 'other')
    config = ClientConfig(
        endpoint=server.endpoint,
        secret_key_file=str(keys.robot_secret),
        server_public_key_file=str(other.server_public),
    )
    with EdgeClient(config) as robot:
        assert not robot.wait_connected(2.0)
    assert server.stats().sessions == 0


def test_plaintext_needs_explicit_permission(keys):
    with pytest.raises(ValueError, match='allow_plaintext'):
        ServerConfig(security='plaintext').validate()
    with pytest.raises(ValueError, match='allow_plaintext'):
        ClientConfig(security='plaintext').validate()


def test_missing_keys_and_unknown_models_fail_at_construction(keys, tmp_path):
    with pytest.raises(KeyFileError, match='edge_offload_keygen'):
        _server(keys, secret_key_file=str(tmp_path / 'absent.key_secret'))
    with pytest.raises(KeyFileError, match='authorised'):
        _server(keys, authorized_clients_dir=str(tmp_path))
    with pytest.raises(KeyError, match='no_such_model'):
        _server(keys, models=['no_such_model'])


def test_server_errors_reach_the_client_with_codes(keys, server):
    with _client(keys, server.endpoint) as client:
        assert client.wait_connected(5.0)
        with pytest.raises(ServerRejectedError) as raised:
            client.call('nnto', 'infer', {'model': 'resnet18'}, IMAGE)
        assert raised.value.wire_code == protocol.E_UNKNOWN_MODEL
        assert raised.value.code == ErrorCode.UNKNOWN_MODEL
        with pytest.raises(ServerRejectedError) as raised:
            client.call('nnto', 'infer', {'model': 'tiny_cnn'}, {'image': torch.zeros(1, 3, 8, 8)})
        assert raised.value.code == ErrorCode.INVALID_INPUT
        with pytest.raises(ServerRejectedError) as raised:
            client.call('teleport', 'infer', {}, {})
        assert raised.value.wire_code == protocol.E_UNKNOWN_MODE
        # The session survives every error.
        assert client.call('nnto', 'infer', {'model': 'tiny_cnn'}, IMAGE).tensors


def test_oversized_request_is_refused_before_sending(keys, server):
    with _client(keys, server.endpoint, max_message_bytes=16 * 1024) as client:
        assert client.wait_connected(5.0)
        handed_off = threading.Event()
        with pytest.raises(OffloadError) as raised:
            client.call('nnto', 'infer', {'model': 'tiny_cnn'}, IMAGE, handed_off=handed_off)
        assert raised.value.code == ErrorCode.INPUT_TOO_LARGE
        assert handed_off.is_set()  # a refused request sets it too: nobody waits forever


def test_oversized_message_is_dropped_by_the_server(keys):
    with _server(keys, max_message_bytes=64 * 1024) as server:
        with _client(keys, server.endpoint) as client:
            assert client.wait_connected(5.0)
            # 98 KB: the server's socket drops it (and the connection) unread.
            oversized = {'image': torch.rand(2, 3, 64, 64)}
            with pytest.raises((ServerUnavailableError, DeadlineMissedError)):
                client.call('nnto', 'infer', {'model': 'tiny_cnn'}, oversized, timeout_s=2.0)
            # The client reconnects by itself; requests under the limit still work.
            assert client.wait_connected(10.0)
            reply = client.call('nnto', 'infer', {'model': 'tiny_cnn'}, IMAGE, timeout_s=5.0)
            assert reply.tensors['features'].shape == (1, 16)


def test_max_clients_and_in_flight_limits(keys):
    with _server(
        keys, max_clients=1, max_inflight_per_client=1, worker_threads=1, max_batch_per_call=64
    ) as server:
        first = _client(keys, server.endpoint, client_name='first')
        assert first.wait_connected(5.0)
        # Only once the first robot holds the one slot: the second must be refused.
        second = _client(keys, server.endpoint, client_name='second')
        try:
            assert not second.wait_connected(2.0)
            assert 'server full' in second.state_reason
            big = {'image': torch.rand(64, 3, 64, 64)}
            errors = []

            def call() -> None:
                try:
                    first.call('nnto', 'infer', {'model': 'tiny_cnn'}, big)
                except ServerUnavailableError as error:
                    errors.append(error)

            threads = [threading.Thread(target=call) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=30.0)
            assert errors, 'no request was refused as busy'
            assert all('busy' in str(error) for error in errors)
            assert server.stats().rejected_total >= len(errors) + 1
        finally:
            first.close()
            second.close()


def test_offloader_falls_back_and_comes_back(keys):
    server = _server(keys)
    endpoint = server.start()
    config = OffloaderConfig(
        mode='nnto',
        client=ClientConfig(
            endpoint=endpoint,
            secret_key_file=str(keys.robot_secret),
            server_public_key_file=str(keys.server_public),
        ),
    )
    with Offloader(config) as offloader:
        assert offloader.client.wait_connected(5.0)
        offloaded = offloader.infer('tiny_cnn', IMAGE)
        assert offloaded.mode_used == 'nnto'
        assert not offloaded.fell_back
        server.stop()
        started = time.monotonic()
        fallback = offloader.infer('tiny_cnn', IMAGE)
        assert time.monotonic() - started < 1.0
        assert fallback.fell_back
        assert fallback.mode_used == 'local'
        assert 'edge server' in fallback.fallback_reason
        assert torch.equal(fallback.outputs['features'], offloaded.outputs['features'])
        assert offloader.status().fallbacks == 1
        restarted = _server(keys, endpoint=endpoint)
        restarted.start()
        try:
            assert offloader.client.wait_connected(10.0)
            assert offloader.infer('tiny_cnn', IMAGE).mode_used == 'nnto'
        finally:
            restarted.stop()
        config.fallback_to_local = False
        offloader.client.close()
        with pytest.raises(OffloadError) as raised:
            offloader.infer('tiny_cnn', IMAGE)
        assert raised.value.code == ErrorCode.SERVER_UNAVAILABLE


def test_model_the_server_lacks_runs_locally_and_is_reported_once(keys, caplog):
    # The robot builds resnet18 too, but this server serves only tiny_cnn: every request
    # runs on the robot at once, without a round trip, and the log says so once.
    with _server(keys) as server:
        config = OffloaderConfig(
            mode='nnto',
            local_models=['tiny_cnn', 'resnet18'],
            client=ClientConfig(
                endpoint=server.endpoint,
                secret_key_file=str(keys.robot_secret),
                server_public_key_file=str(keys.server_public),
            ),
        )
        with Offloader(config) as offloader:
            assert offloader.client.wait_connected(5.0), offloader.client.state_reason
            with caplog.at_level('WARNING', logger='edge_offload'):
                image = {'image': torch.rand(1, 3, 224, 224)}
                outcomes = [offloader.infer('resnet18', image) for _ in range(5)]
                served = offloader.infer('tiny_cnn', IMAGE)
        requests_seen = server.stats().requests_total
    assert [outcome.mode_used for outcome in outcomes] == ['local'] * 5
    assert all(outcome.fell_back for outcome in outcomes)
    reason = outcomes[0].fallback_reason
    assert "does not serve model 'resnet18'" in reason, reason
    assert 'tiny_cnn' in reason, reason
    assert served.mode_used == 'nnto', served.fallback_reason
    assert requests_seen == 1, f'the server saw {requests_seen} requests, expected 1'
    said = [record for record in caplog.records if 'resnet18' in record.getMessage()]
    assert len(said) == 1, [record.getMessage() for record in said]
    assert said[0].levelname == 'ERROR'
    assert "server's models parameter" in said[0].getMessage()


def test_offloader_refuses_bad_requests_without_contacting_the_server():
    with Offloader(OffloaderConfig(mode='local')) as offloader:
        with pytest.raises(OffloadError) as raised:
            offloader.infer('no_such_model', IMAGE)
        assert raised.value.code == ErrorCode.UNKNOWN_MODEL
        with pytest.raises(OffloadError) as raised:
            offloader.infer('tiny_cnn', {'picture': IMAGE['image']})
        assert raised.value.code == ErrorCode.INVALID_INPUT
        with pytest.raises(OffloadError) as raised:
            offloader.infer('tiny_cnn', IMAGE, mode='teleport')
        assert raised.value.code == ErrorCode.INVALID_INPUT
        with pytest.raises(DeadlineMissedError):
            offloader.infer('tiny_cnn', IMAGE, deadline=time.monotonic() - 1.0)
        outcome = offloader.infer('tiny_cnn', IMAGE)
        assert outcome.mode_used == 'local'
        assert not outcome.fell_back
        nnto = offloader.infer('tiny_cnn', IMAGE, mode='nnto')
        assert nnto.fell_back
        assert nnto.fallback_reason == 'no edge server configured'
