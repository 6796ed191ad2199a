# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The edge server under hostile or greedy robots: limits per key, fairness, no lost reply.

Each test runs a real ``EdgeServer`` (CURVE, loopback) in this process and talks to it
with real ``EdgeClient``s or raw DEALER sockets holding an authorised key, the strongest
attacker short of a stolen server key.
"""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest
import torch
import zmq

from edge_offload import protocol
from edge_offload.errors import ServerRejectedError, ServerUnavailableError
from edge_offload.keys import load_public_key, load_secret_key_pair
from edge_offload.modes.base import ServerCall, ServerMode, ServerReply
from edge_offload.server import EdgeServer
from edge_offload_testing import (
    authorize_robot,
    edge_client_for,
    loopback_edge_server,
    make_test_keys,
)

IMAGE = {'image': torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))}


@pytest.fixture
def keys(tmp_path):
    return make_test_keys(tmp_path / 'keys')


def _server(keys, **overrides) -> EdgeServer:
    return loopback_edge_server(keys, **{'modes': ['nnto', 'probe'], **overrides})


_client = edge_client_for


class RawRobot:
    """A DEALER socket with an authorised key that speaks the protocol by hand."""

    def __init__(self, keys, endpoint, secret=None, **options) -> None:
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.DEALER)
        self.socket.linger = 0
        for name, value in options.items():
            setattr(self.socket, name, value)
        pair = load_secret_key_pair(secret or keys.robot_secret)
        self.socket.curve_secretkey = pair.secret
        self.socket.curve_publickey = pair.public
        self.socket.curve_serverkey = load_public_key(keys.server_public)
        self.socket.connect(endpoint)

    def send(self, message: protocol.Message) -> None:
        self.socket.send_multipart(protocol.encode(message))

    def receive(self, timeout_s: float = 5.0) -> protocol.Message:
        if not self.socket.poll(int(timeout_s * 1000)):
            raise TimeoutError('no message from the server')
        return protocol.decode(self.socket.recv_multipart())

    def hello(self, **fields) -> protocol.Message:
        self.send(protocol.Message(protocol.HELLO, 0, {'client_name': 'raw', **fields}))
        return self.receive()

    def close(self) -> None:
        self.socket.close(linger=0)
        self.context.term()


class GatedMode(ServerMode):
    """A server mode whose calls run until the test opens the gate."""

    name = 'gated'

    def __init__(self, context) -> None:
        super().__init__(context)
        self.gate = threading.Event()
        self.running = 0
        self.lock = threading.Lock()

    def handle(self, state: object, call: ServerCall) -> ServerReply:
        with self.lock:
            self.running += 1
        try:
            self.gate.wait(30.0)
        finally:
            with self.lock:
                self.running -= 1
        return ServerReply(fields={'op': call.op})


def test_an_exception_while_handling_a_message_is_answered_and_serving_goes_on(
    keys, monkeypatch, caplog
):
    with _server(keys) as server, _client(keys, server.endpoint) as client:
        assert client.wait_connected(5.0)
        original = EdgeServer._on_call
        calls = []

        def broken_once(self, session, message, received):
            calls.append(message.request_id)
            if len(calls) == 1:
                raise TypeError("unhashable type: 'list'")
            return original(self, session, message, received)

        monkeypatch.setattr(EdgeServer, '_on_call', broken_once)
        with caplog.at_level(logging.ERROR, logger='edge_offload.server'):
            with pytest.raises(ServerRejectedError) as refused:
                client.call('nnto', 'infer', {'model': 'tiny_cnn'}, IMAGE)
        assert refused.value.wire_code == protocol.E_INVALID_INPUT
        assert 'unhashable' in str(refused.value)
        assert 'handling a message failed' in caplog.text
        assert server.serving
        reply = client.call('nnto', 'infer', {'model': 'tiny_cnn'}, IMAGE)
        assert set(reply.tensors) == {'features'}


def test_serving_is_false_once_the_loop_dies_and_restart_serves_again(keys, monkeypatch):
    server = _server(keys)
    server.start()
    try:

        def always_failing(self, poller):
            raise RuntimeError('poller broke')

        monkeypatch.setattr(EdgeServer, '_serve_once', always_failing)
        deadline = time.monotonic() + 10.0
        while server.serving and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not server.serving
        assert 'poller broke' in server.failure
        monkeypatch.undo()
        server.restart()
        assert server.serving
        assert server.failure is None
        with _client(keys, server.endpoint) as client:
            assert client.wait_connected(5.0)
            client.call('nnto', 'infer', {'model': 'tiny_cnn'}, IMAGE)
    finally:
        server.stop()
    assert not server.serving


def test_one_robot_key_cannot_take_every_session(keys):
    other_key = authorize_robot(keys, 'other')
    with _server(keys, max_clients=4, max_sessions_per_key=2) as server:
        robots = [RawRobot(keys, server.endpoint) for _ in range(3)]
        other = RawRobot(keys, server.endpoint, secret=other_key)
        try:
            answers = [robot.hello() for robot in robots]
            assert [answer.type for answer in answers[:2]] == [protocol.WELCOME] * 2
            assert answers[2].type == protocol.ERROR
            assert answers[2].fields['code'] == protocol.E_SERVER_FULL
            assert '2 sessions of this robot key' in answers[2].fields['message']
            assert other.hello().type == protocol.WELCOME
        finally:
            for robot in [*robots, other]:
                robot.close()


def test_a_restarted_robot_takes_over_its_silent_session_on_a_full_server(keys):
    with _server(keys, max_clients=1, stale_session_s=0.3) as server:
        old = RawRobot(keys, server.endpoint)
        new = RawRobot(keys, server.endpoint)
        try:
            first = old.hello(instance='aaaa')
            assert first.type == protocol.WELCOME
            # Still fresh: the slot is not taken from a robot that is alive.
            refused = new.hello(instance='bbbb')
            assert refused.fields['code'] == protocol.E_SERVER_FULL
            time.sleep(0.4)  # the old session falls silent past stale_session_s
            taken = new.hello(instance='bbbb')
            assert taken.type == protocol.WELCOME
            assert taken.fields['session_id'] != first.fields['session_id']
            assert server.stats().sessions == 1
        finally:
            old.close()
            new.close()


def test_the_same_client_instance_on_a_new_connection_keeps_its_session(keys):
    with _server(keys, max_clients=1) as server:
        before = RawRobot(keys, server.endpoint)
        after = RawRobot(keys, server.endpoint)
        try:
            first = before.hello(instance='0123456789abcdef')
            again = after.hello(instance='0123456789abcdef')
            assert again.type == protocol.WELCOME
            assert again.fields['session_id'] == first.fields['session_id']
            assert server.stats().sessions == 1
        finally:
            before.close()
            after.close()


def test_a_batch_over_the_limit_is_refused_before_it_runs(keys):
    with _server(keys, max_batch_per_call=4) as server, _client(keys, server.endpoint) as client:
        assert client.wait_connected(5.0)
        with pytest.raises(ServerRejectedError) as refused:
            client.call(
                'nnto', 'infer', {'model': 'tiny_cnn'}, {'image': torch.rand(8, 3, 64, 64)}
            )
        assert refused.value.wire_code == protocol.E_TOO_LARGE
        assert 'max_batch_per_call 4' in str(refused.value)
        assert server.stats().requests_total == 0
        client.call('nnto', 'infer', {'model': 'tiny_cnn'}, {'image': torch.rand(4, 3, 64, 64)})


def test_a_robot_over_its_byte_rate_is_answered_busy(keys):
    # 49 kB images; a 200 kB bucket refilled at 10 kB/s lets four through, then refuses.
    limits = {'max_message_bytes': 200_000, 'max_bytes_per_s_per_key': 10_000.0}
    with _server(keys, **limits) as server, _client(keys, server.endpoint) as client:
        assert client.wait_connected(5.0)
        outcomes = []
        for _ in range(6):
            try:
                client.call('nnto', 'infer', {'model': 'tiny_cnn'}, IMAGE)
                outcomes.append('answer')
            except ServerUnavailableError as error:
                outcomes.append('busy' if 'max_bytes_per_s_per_key' in str(error) else str(error))
        assert outcomes[:4] == ['answer'] * 4
        assert outcomes[-1] == 'busy'


def test_a_heavy_robot_cannot_hold_every_worker(keys):
    light_key = authorize_robot(keys, 'light')
    with _server(keys, worker_threads=2, max_inflight_per_client=4) as server:
        gated = server._modes['gated'] = GatedMode(server._modes['nnto'].context)
        heavy = _client(keys, server.endpoint, client_name='heavy')
        light = _client(keys, server.endpoint, secret=light_key, client_name='light')
        try:
            assert heavy.wait_connected(5.0)
            assert light.wait_connected(5.0)
            held = [heavy.submit('gated', f'h{index}', timeout_s=30.0) for index in range(4)]
            deadline = time.monotonic() + 5.0
            while gated.running < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            # The heavy robot's four calls hold one worker; the other is the light robot's.
            reply = light.call('nnto', 'infer', {'model': 'tiny_cnn'}, IMAGE, timeout_s=10.0)
            assert set(reply.tensors) == {'features'}
            assert gated.running == 1
            assert not any(future.done() for future in held)
            gated.gate.set()
            assert [future.result(10.0).fields['op'] for future in held] == [
                'h0',
                'h1',
                'h2',
                'h3',
            ]
        finally:
            gated.gate.set()
            heavy.close()
            light.close()


def test_a_slow_reader_gets_every_reply(keys):
    with _server(keys, max_pending_replies_per_client=100_000) as server:
        robot = RawRobot(keys, server.endpoint, rcvhwm=1, rcvbuf=4096)
        try:
            assert robot.hello().type == protocol.WELCOME
            count = 3000
            for request_id in range(1, count + 1):
                robot.send(protocol.Message(protocol.PING, request_id))
            time.sleep(0.5)  # not reading: the server must hold the replies, not drop them
            answered = [robot.receive().request_id for _ in range(count)]
            assert answered == list(range(1, count + 1))
            assert server.stats().replies_undelivered_total == 0
        finally:
            robot.close()


def test_a_robot_that_never_reads_loses_its_session_and_the_drop_is_counted(keys, caplog):
    image = {'image': torch.rand(1, 3, 128, 128)}
    with _server(
        keys, max_pending_replies_per_client=8, max_inflight_per_client=64, max_inflight_per_key=64
    ) as server:
        robot = RawRobot(keys, server.endpoint, rcvhwm=1, rcvbuf=4096)
        try:
            assert robot.hello().type == protocol.WELCOME
            call = protocol.Message(
                protocol.CALL, 0, {'mode': 'probe', 'op': 'echo', 'args': {}}, image
            )
            with caplog.at_level(logging.WARNING, logger='edge_offload.server'):
                deadline = time.monotonic() + 20.0
                request_id = 0
                while server.stats().sessions and time.monotonic() < deadline:
                    request_id += 1
                    call.request_id = request_id
                    robot.send(call)
                    time.sleep(0.002)
            stats = server.stats()
            assert stats.sessions == 0
            assert stats.replies_undelivered_total > 0
            assert 'did not read its replies' in caplog.text
        finally:
            robot.close()


def test_an_idle_connection_is_closed_after_the_handshake_timeout(keys, caplog):
    with _server(keys, handshake_timeout_s=0.3) as server:
        host, port = server.endpoint.rsplit('/', 1)[1].split(':')
        with caplog.at_level(logging.INFO, logger='edge_offload.server'):
            with socket.create_connection((host, int(port)), timeout=5.0) as idle:
                idle.settimeout(5.0)
                started = time.monotonic()
                received = b''
                try:  # ZMTP greeting bytes come first; then the server hangs up
                    while chunk := idle.recv(4096):
                        received += chunk
                except ConnectionResetError:
                    pass
                waited = time.monotonic() - started
            deadline = time.monotonic() + 2.0
            while 'before finishing the security handshake' not in caplog.text:
                assert time.monotonic() < deadline, caplog.text
                time.sleep(0.05)
        assert waited < 4.0
        assert 'wrong server key' not in caplog.text
