# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``EdgeClient.submit`` and ``CallFuture`` over real sockets: many calls in flight."""

from __future__ import annotations

import logging
import queue
import threading

import pytest
import torch

from edge_offload import protocol
from edge_offload import server as server_module
from edge_offload.client import CallFuture, ClientConfig, EdgeClient
from edge_offload.errors import (
    DeadlineMissedError,
    ErrorCode,
    OffloadCancelledError,
    OffloadError,
    ServerRejectedError,
    ServerUnavailableError,
)
from edge_offload.modes.base import ServerCall, ServerMode, ServerReply
from edge_offload.server import EdgeServer, ServerConfig
from edge_offload_testing import make_test_keys

WAIT_S = 10.0


class HoldServerMode(ServerMode):
    """Answer ``hold`` only once the test releases it (a worker waits meanwhile)."""

    name = 'hold'
    release = threading.Event()

    def handle(self, state: object, call: ServerCall) -> ServerReply:
        """Wait for the release, then echo the call's fields."""
        self.release.wait(WAIT_S)
        return ServerReply(fields=dict(call.fields))


@pytest.fixture
def keys(tmp_path):
    return make_test_keys(tmp_path / 'keys')


@pytest.fixture
def server(keys, monkeypatch):
    original = server_module.load_server_mode_class
    monkeypatch.setattr(
        server_module,
        'load_server_mode_class',
        lambda name: HoldServerMode if name == 'hold' else original(name),
    )
    HoldServerMode.release = threading.Event()
    config = ServerConfig(
        endpoint='tcp://127.0.0.1:0',
        models=['tiny_cnn'],
        modes=['probe', 'hold'],
        secret_key_file=str(keys.server_secret),
        authorized_clients_dir=str(keys.authorized_clients_dir),
        max_inflight_per_client=64,
        max_inflight_per_key=64,
        worker_threads=4,
    )
    running = EdgeServer(config)
    running.start()
    try:
        yield running
    finally:
        HoldServerMode.release.set()  # free the workers, or stop waits for them
        running.stop()


def _client(keys, endpoint, **overrides) -> EdgeClient:
    values = {
        'endpoint': endpoint,
        'secret_key_file': str(keys.robot_secret),
        'server_public_key_file': str(keys.server_public),
    }
    values.update(overrides)
    return EdgeClient(ClientConfig(**values))


@pytest.fixture
def client(keys, server):
    with _client(keys, server.endpoint) as connected:
        assert connected.wait_connected(WAIT_S), connected.state_reason
        yield connected


def _wait_done(future: CallFuture) -> None:
    finished = threading.Event()
    future.add_done_callback(lambda _: finished.set())
    assert finished.wait(WAIT_S), 'the call never completed'


def test_submit_many_calls_and_collect_replies_as_they_complete(client):
    completed: queue.Queue[CallFuture] = queue.Queue()
    slices = [torch.full((4, 8), float(index)) for index in range(24)]
    futures = [
        client.submit('probe', 'echo', {'index': index}, {'slice': piece})
        for index, piece in enumerate(slices)
    ]
    assert len({future.request_id for future in futures}) == len(futures)
    for future in futures:
        future.add_done_callback(completed.put)
    seen = [completed.get(timeout=WAIT_S) for _ in futures]
    assert sorted(id(future) for future in seen) == sorted(id(future) for future in futures)
    for future in seen:
        reply = future.result(timeout=0)
        index = reply.fields['index']
        assert torch.equal(reply.tensors['slice'], slices[index])
        assert reply.bytes_up > 0
        assert reply.bytes_down > 0
    assert client.pending_calls == 0


def test_result_raises_server_rejected_for_an_error_reply(client):
    future = client.submit('probe', 'teleport')
    with pytest.raises(ServerRejectedError) as raised:
        future.result(timeout=WAIT_S)
    assert raised.value.wire_code == protocol.E_BAD_REQUEST
    assert future.done()
    unknown = client.submit('no_such_mode', 'echo')
    with pytest.raises(ServerRejectedError) as raised:
        unknown.result(timeout=WAIT_S)
    assert raised.value.wire_code == protocol.E_UNKNOWN_MODE


def test_deadline_expires_for_a_call_nobody_waits_on(client):
    future = client.submit('hold', 'wait', timeout_s=0.2)
    assert client.pending_calls == 1
    _wait_done(future)  # completed by the client's own timer, not by a waiting caller
    assert client.pending_calls == 0
    with pytest.raises(DeadlineMissedError):
        future.result()
    HoldServerMode.release.set()  # the late reply is dropped; the client still works
    assert client.call('probe', 'echo', {'ok': True}).fields == {'ok': True}


def test_result_timeout_leaves_the_call_pending(client):
    future = client.submit('hold', 'wait', {'n': 1})
    with pytest.raises(TimeoutError):
        future.result(timeout=0.05)
    assert not future.done()
    HoldServerMode.release.set()
    assert future.result(timeout=WAIT_S).fields == {'n': 1}


def test_cancel_forgets_the_call(client):
    future = client.submit('hold', 'wait')
    calls = []
    future.add_done_callback(calls.append)
    assert future.cancel()
    assert future.done()
    assert calls == [future]  # ran once, on the cancelling thread
    assert client.pending_calls == 0
    with pytest.raises(OffloadCancelledError):
        future.result()
    assert not future.cancel()  # already completed
    assert calls == [future]
    HoldServerMode.release.set()
    assert client.call('probe', 'echo', {'after': 1}).fields == {'after': 1}


def test_done_callbacks_run_once_and_their_errors_are_logged(client, caplog):
    counts = {'first': 0, 'late': 0}
    threads = []

    def first(future: CallFuture) -> None:
        counts['first'] += 1
        threads.append(threading.current_thread())

    def broken(future: CallFuture) -> None:
        raise RuntimeError('callback bug')

    future = client.submit('hold', 'wait')
    after_broken = threading.Event()
    future.add_done_callback(first)
    future.add_done_callback(broken)
    future.add_done_callback(lambda _: after_broken.set())  # callbacks run in order
    with caplog.at_level(logging.ERROR, logger='edge_offload.client'):
        HoldServerMode.release.set()
        future.result(timeout=WAIT_S)
        assert after_broken.wait(WAIT_S)
    assert counts['first'] == 1
    assert threads[0] is not threading.current_thread()  # the client's I/O thread
    assert 'callback bug' in caplog.text

    def late(done: CallFuture) -> None:
        counts['late'] += 1
        threads.append(threading.current_thread())

    future.add_done_callback(late)  # already done: runs at once, here
    assert counts == {'first': 1, 'late': 1}
    assert threads[1] is threading.current_thread()
    assert not future.cancel()
    assert counts == {'first': 1, 'late': 1}


def test_call_still_works_with_deadline_and_cancel_event(client):
    handed_off = threading.Event()
    reply = client.call('probe', 'echo', {'a': 1}, {'x': torch.ones(3)}, handed_off=handed_off)
    assert handed_off.is_set()
    assert reply.fields == {'a': 1}
    assert torch.equal(reply.tensors['x'], torch.ones(3))
    with pytest.raises(DeadlineMissedError):
        client.call('hold', 'wait', timeout_s=0.1)
    assert client.pending_calls == 0
    cancel = threading.Event()
    timer = threading.Timer(0.1, cancel.set)
    timer.start()
    handed_off = threading.Event()
    with pytest.raises(OffloadCancelledError):
        client.call('hold', 'wait', cancel=cancel, handed_off=handed_off)
    timer.join()
    assert handed_off.is_set()
    assert client.pending_calls == 0
    with pytest.raises(ServerRejectedError):
        client.call('probe', 'teleport')


def test_submit_refuses_at_once_what_call_refuses(keys, server):
    with _client(keys, server.endpoint, max_pending_calls=2, max_message_bytes=16 * 1024) as robot:
        assert robot.wait_connected(WAIT_S)
        handed_off = threading.Event()
        with pytest.raises(OffloadError) as raised:
            robot.submit('probe', 'echo', {}, {'big': torch.zeros(8192)}, handed_off=handed_off)
        assert raised.value.code == ErrorCode.INPUT_TOO_LARGE
        assert handed_off.is_set()
        held = [robot.submit('hold', 'wait') for _ in range(2)]
        with pytest.raises(OffloadError) as raised:
            robot.submit('hold', 'wait')
        assert raised.value.code == ErrorCode.QUEUE_FULL
        robot.close()  # fails what is pending; nothing more is accepted
        for future in held:
            with pytest.raises(ServerUnavailableError):
                future.result(timeout=WAIT_S)
        assert robot.pending_calls == 0
        with pytest.raises(ServerUnavailableError):
            robot.submit('probe', 'echo')


def test_submit_without_a_server_fails_at_once(keys, server):
    endpoint = server.endpoint
    server.stop()
    with _client(keys, endpoint) as robot:
        with pytest.raises(ServerUnavailableError):
            robot.submit('probe', 'echo')
        assert robot.pending_calls == 0
