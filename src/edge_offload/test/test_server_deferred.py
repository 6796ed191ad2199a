# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Server modes that defer their reply to a ``concurrent.futures.Future``."""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import time
from collections.abc import Callable

import pytest
import torch

from edge_offload import protocol
from edge_offload import server as server_module
from edge_offload.client import ClientConfig, EdgeClient
from edge_offload.errors import ErrorCode, ServerRejectedError, ServerUnavailableError
from edge_offload.modes.base import ServerCall, ServerMode, ServerReply
from edge_offload.server import EdgeServer, ServerConfig
from edge_offload_testing import make_test_keys

WAIT_S = 10.0
Deferred = tuple[ServerCall, concurrent.futures.Future]


class DeferredServerMode(ServerMode):
    """``pull`` answers with a future the test completes; ``echo`` answers at once."""

    name = 'deferred'

    def __init__(self, context) -> None:
        super().__init__(context)
        self.pulls: queue.Queue[Deferred] = queue.Queue()

    def handle(
        self, state: object, call: ServerCall
    ) -> ServerReply | concurrent.futures.Future[ServerReply]:
        """Defer ``pull``; echo anything else."""
        if call.op == 'pull':
            future: concurrent.futures.Future[ServerReply] = concurrent.futures.Future()
            self.pulls.put((call, future))
            return future
        return ServerReply(fields=dict(call.fields), tensors=call.tensors)


@pytest.fixture
def keys(tmp_path):
    return make_test_keys(tmp_path / 'keys')


@pytest.fixture
def make_server(keys, monkeypatch) -> Callable[..., EdgeServer]:
    original = server_module.load_server_mode_class
    monkeypatch.setattr(
        server_module,
        'load_server_mode_class',
        lambda name: DeferredServerMode if name == 'deferred' else original(name),
    )
    started: list[EdgeServer] = []

    def make(**overrides) -> EdgeServer:
        values = {
            'endpoint': 'tcp://127.0.0.1:0',
            'models': ['tiny_cnn'],
            'modes': ['deferred'],
            'secret_key_file': str(keys.server_secret),
            'authorized_clients_dir': str(keys.authorized_clients_dir),
        }
        values.update(overrides)
        running = EdgeServer(ServerConfig(**values))
        running.start()
        started.append(running)
        return running

    yield make
    for running in started:
        running.stop()


def _client(keys, server: EdgeServer) -> EdgeClient:
    client = EdgeClient(
        ClientConfig(
            endpoint=server.endpoint,
            secret_key_file=str(keys.robot_secret),
            server_public_key_file=str(keys.server_public),
        )
    )
    assert client.wait_connected(WAIT_S), client.state_reason
    return client


def _next_pull(server: EdgeServer) -> Deferred:
    return server._modes['deferred'].pulls.get(timeout=WAIT_S)


def _complete_later(action: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=action)
    thread.start()
    return thread


def _eventually(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_deferred_reply_arrives_while_the_worker_serves_others(keys, make_server):
    server = make_server(worker_threads=1)
    with _client(keys, server) as client:
        pull = client.submit('deferred', 'pull', {'step': 3})
        call, future = _next_pull(server)
        assert call.fields == {'step': 3}
        # The only worker is free: another call is served while the pull is outstanding.
        echo = client.call('deferred', 'echo', {'n': 1}, {'x': torch.ones(2)}, timeout_s=5.0)
        assert echo.fields == {'n': 1}
        assert not pull.done()
        assert server.stats().inflight == 1
        data = torch.arange(6.0)
        reply = ServerReply(
            fields={'step': 3}, tensors={'data': data}, compute_time_s=0.01, model='tiny_cnn'
        )
        _complete_later(lambda: future.set_result(reply)).join()
        answer = pull.result(timeout=WAIT_S)
        assert answer.fields == {'step': 3}
        assert torch.equal(answer.tensors['data'], data)
        assert answer.compute_time_s == pytest.approx(0.01)
        stats = server.stats()
        assert stats.inflight == 0
        assert stats.models['tiny_cnn'].count == 1


def test_a_deferred_protocol_error_reaches_the_client_with_its_code(keys, make_server):
    server = make_server()
    with _client(keys, server) as client:
        rejected = client.submit('deferred', 'pull')
        _, future = _next_pull(server)
        error = protocol.ProtocolError(protocol.E_INVALID_INPUT, 'slice out of range')
        _complete_later(lambda: future.set_exception(error)).join()
        with pytest.raises(ServerRejectedError) as raised:
            rejected.result(timeout=WAIT_S)
        assert raised.value.wire_code == protocol.E_INVALID_INPUT
        assert raised.value.code == ErrorCode.INVALID_INPUT
        assert 'slice out of range' in str(raised.value)
        failed = client.submit('deferred', 'pull')
        _, future = _next_pull(server)
        _complete_later(lambda: future.set_exception(ValueError('mode bug'))).join()
        with pytest.raises(ServerRejectedError) as raised:
            failed.result(timeout=WAIT_S)
        assert raised.value.wire_code == protocol.E_INTERNAL
        stats = server.stats()
        assert stats.errors_total == 2
        assert stats.inflight == 0


def test_closing_the_session_cancels_the_pending_future(keys, make_server):
    server = make_server()
    client = _client(keys, server)
    client.submit('deferred', 'pull')
    _, future = _next_pull(server)
    assert server.stats().inflight == 1
    client.close()  # says bye: the server closes the session
    assert _eventually(future.cancelled)
    stats = server.stats()
    assert stats.sessions == 0
    assert stats.inflight == 0


def test_a_result_after_the_session_closed_is_dropped(keys, make_server):
    server = make_server()
    client = _client(keys, server)
    client.submit('deferred', 'pull')
    _, future = _next_pull(server)
    assert future.set_running_or_notify_cancel()  # now the server cannot cancel it
    client.close()
    assert _eventually(lambda: server.stats().sessions == 0)
    assert not future.cancelled()
    future.set_result(ServerReply(fields={'late': True}))  # dropped, nothing raised
    assert not server._outbox
    with _client(keys, server) as again:
        assert again.call('deferred', 'echo', {'ok': 1}).fields == {'ok': 1}
    assert server.stats().inflight == 0


def test_an_expired_session_and_a_stopping_server_cancel_pending_futures(keys, make_server):
    server = make_server()
    with _client(keys, server) as client:
        client.submit('deferred', 'pull')
        _, expiring = _next_pull(server)
        # Every session now counts as silent; an outstanding deferred call does not keep it.
        server.config.session_timeout_s = -60.0
        server._expire_sessions()
        server.config.session_timeout_s = 10.0
        assert expiring.cancelled()
    other = make_server()
    with _client(keys, other) as client:
        client.submit('deferred', 'pull')
        _, stopping = _next_pull(other)
        other.stop()
        assert stopping.cancelled()


def test_deferred_calls_count_against_max_inflight(keys, make_server):
    server = make_server(max_inflight_per_client=1, worker_threads=1)
    with _client(keys, server) as client:
        pull = client.submit('deferred', 'pull')
        _, future = _next_pull(server)
        with pytest.raises(ServerUnavailableError, match='busy'):
            client.call('deferred', 'echo', {'n': 1})
        _complete_later(lambda: future.set_result(ServerReply(fields={'done': 1}))).join()
        assert pull.result(timeout=WAIT_S).fields == {'done': 1}
        assert client.call('deferred', 'echo', {'n': 2}).fields == {'n': 2}
