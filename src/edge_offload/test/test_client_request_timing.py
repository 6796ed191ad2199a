# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``EdgeClient.set_request_timing`` over real sockets: limits chosen, round trips measured.

A server mode that answers after ``sleep_s`` stands in for a server slower than the
client's limit. The reply to a call the client gave up on still comes (the server does
not know the client gave up) and is measured as late; the next call gets a limit that
fits. Explicit limits still apply; cancelled calls and error replies are not measured.
"""

from __future__ import annotations

import threading
import time

import pytest

from edge_offload import server as server_module
from edge_offload.client import ClientConfig, EdgeClient
from edge_offload.errors import DeadlineMissedError, OffloadCancelledError, ServerRejectedError
from edge_offload.modes.base import ServerCall, ServerMode, ServerReply
from edge_offload.request_timeout import RequestTimeouts
from edge_offload.server import EdgeServer, ServerConfig
from edge_offload_testing import make_test_keys

WAIT_S = 10.0
MODEL = 'slow_model'
MODE = 'slow'


class SlowServerMode(ServerMode):
    """``infer`` answers after ``sleep_s``; ``hold`` waits for the test's release."""

    name = MODE
    release = threading.Event()

    def handle(self, state: object, call: ServerCall) -> ServerReply:
        """Sleep or hold, then echo the call's fields."""
        if call.op == 'hold':
            self.release.wait(WAIT_S)
        else:
            time.sleep(float(call.fields.get('sleep_s', 0.0)))
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
        lambda name: SlowServerMode if name == MODE else original(name),
    )
    SlowServerMode.release = threading.Event()
    running = EdgeServer(
        ServerConfig(
            endpoint='tcp://127.0.0.1:0',
            models=['tiny_cnn'],
            modes=['probe', MODE],
            secret_key_file=str(keys.server_secret),
            authorized_clients_dir=str(keys.authorized_clients_dir),
            worker_threads=4,
        )
    )
    running.start()
    try:
        yield running
    finally:
        SlowServerMode.release.set()
        running.stop()


@pytest.fixture
def client(keys, server):
    config = ClientConfig(
        endpoint=server.endpoint,
        secret_key_file=str(keys.robot_secret),
        server_public_key_file=str(keys.server_public),
        request_timeout_s=0.1,
    )
    with EdgeClient(config) as connected:
        assert connected.wait_connected(WAIT_S), connected.state_reason
        yield connected


def _wait_for(condition, timeout_s: float = WAIT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def test_late_reply_is_measured_and_the_next_call_waits_long_enough(client):
    timeouts = RequestTimeouts(0.1, 30.0, factor=2.0)
    client.set_request_timing(timeouts)
    fields = {'model': MODEL, 'sleep_s': 0.3}

    started = time.monotonic()
    with pytest.raises(DeadlineMissedError, match='0.100 s'):
        client.call(MODE, 'infer', fields)
    assert time.monotonic() - started < 0.28, 'the first call must use the floor (0.1 s)'
    # The server answers anyway, after the client gave up: that answer is measured.
    assert _wait_for(lambda: timeouts.estimate(MODEL, MODE).samples == 1)
    assert timeouts.late_replies == 1
    measured = timeouts.estimate(MODEL, MODE)
    assert 0.3 <= measured.quantile_s < 2.0
    assert measured.limit_s == pytest.approx(2.0 * measured.quantile_s)

    reply = client.call(MODE, 'infer', fields)  # limit ~0.6 s now: answered
    assert reply.fields['model'] == MODEL
    assert timeouts.estimate(MODEL, MODE).samples == 2
    assert timeouts.late_replies == 1

    # An explicit limit is kept as given.
    started = time.monotonic()
    with pytest.raises(DeadlineMissedError, match='0.050 s'):
        client.call(MODE, 'infer', fields, timeout_s=0.05)
    assert time.monotonic() - started < 0.25
    # ... and its late reply is measured like any other.
    assert _wait_for(lambda: timeouts.estimate(MODEL, MODE).samples == 3)
    assert timeouts.late_replies == 2

    # Without timing: request_timeout_s again.
    client.set_request_timing(None)
    with pytest.raises(DeadlineMissedError, match='0.100 s'):
        client.call(MODE, 'infer', fields)


def test_cancelled_calls_and_error_replies_are_not_measured(client):
    timeouts = RequestTimeouts(5.0, 30.0)
    client.set_request_timing(timeouts)
    future = client.submit(MODE, 'hold', {'model': MODEL})
    time.sleep(0.1)
    assert future.cancel()
    with pytest.raises(OffloadCancelledError):
        future.result(timeout=WAIT_S)
    SlowServerMode.release.set()  # its reply now comes, and is dropped
    with pytest.raises(ServerRejectedError):
        client.call('probe', 'teleport', {'model': MODEL})
    # A later, slower call: its reply comes after the held one's, which was dropped.
    client.call(MODE, 'infer', {'model': 'other', 'sleep_s': 0.3})
    assert _wait_for(lambda: timeouts.estimate('other', MODE).samples == 1)
    assert timeouts.estimate(MODEL, MODE).samples == 0
    assert timeouts.estimate(MODEL, 'probe:teleport').samples == 0
    assert timeouts.late_replies == 0
    assert client.pending_calls == 0
