# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""A robot always gets back to offloading once its edge server can serve it (issue 30).

System tests: a real headless edge server process and a real robot process (a small
``EdgeClient`` loop that offloads tiny_cnn and prints one line per call with a monotonic
timestamp). The robot is stalled (SIGSTOP/SIGCONT) for 1 to 20 s, refused by a full
server until a slot frees, and sees its server killed and restarted on the same port, or
restarts itself while its old session still holds a full server's slot. Each time it
must offload again, and keep offloading, within 2 s of the server being able to serve it.
The recovery times are printed (``pytest -s`` shows them).

Socket tests with a scripted ROUTER peer check the client side alone: HELLO carries the
instance token, and the client says HELLO again on the same connection after a refusal
or a liveness loss, and replaces a connection whose server never answers.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import zmq

from edge_offload import protocol
from edge_offload.client import ClientConfig, ConnectionState, EdgeClient
from edge_offload.keys import generate_key_pair
from edge_offload_testing import HeadlessServer, make_test_keys

pytestmark = pytest.mark.timeout(240)

RECOVERY_LIMIT_S = 2.0
STEADY_S = 1.0  # offloading again means a run of successful calls this long, no failure
START_S = 90.0  # a process importing torch on a loaded two-core machine

# The robot: offload tiny_cnn in a loop; one line per call and per state change.
ROBOT = r"""
import sys, threading, time
import torch
from edge_offload.client import ClientConfig, EdgeClient
from edge_offload.errors import (OffloadError)

endpoint, secret_key_file, server_key_file = sys.argv[1:4]
lock = threading.Lock()


def say(*words):
    with lock:
        print(f'{time.monotonic():.6f}', *words, flush=True)


image = {'image': torch.rand(1, 3, 64, 64)}
config = ClientConfig(
    endpoint=endpoint,
    client_name='robot',
    secret_key_file=secret_key_file,
    server_public_key_file=server_key_file,
)
client = EdgeClient(config)
client.add_state_listener(lambda state, reason: say('state', state.value, reason))
say('started', client.instance)
while True:
    try:
        client.call('nnto', 'infer', {'model': 'tiny_cnn'}, image, timeout_s=1.0)
    except OffloadError as error:
        say('failed', type(error).__name__, str(error).replace('\n', ' '))
        time.sleep(0.05)
    else:
        say('offloaded')
        time.sleep(0.02)
"""


class Robot:
    """The robot process; its lines are parsed as they come."""

    def __init__(self, endpoint: str, secret_key_file: Path, server_key_file: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, '-c', ROBOT, endpoint, str(secret_key_file), str(server_key_file)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[tuple[float, str, str]] = []
        self.raw: list[str] = []
        self._changed = threading.Condition()
        threading.Thread(target=self._read, name='robot-lines', daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            found = re.match(r'(\d+\.\d+) (\w+) ?(.*)', line.rstrip())
            with self._changed:
                self.raw.append(line.rstrip())
                if found:
                    self.lines.append((float(found[1]), found[2], found[3]))
                self._changed.notify_all()

    def wait_for(self, predicate, timeout_s: float, what: str):
        """Wait until ``predicate(lines)`` returns something true; return it."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                result = predicate(self.lines)
                if result:
                    return result
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    tail = '\n'.join(self.raw[-30:])
                    pytest.fail(f'robot: no {what} within {timeout_s:.0f} s; its output:\n{tail}')
                self._changed.wait(min(remaining, 0.5))

    def recovered_at(self, since: float, timeout_s: float) -> float:
        """Return when the first run of offloaded calls after ``since`` began.

        A run is consecutive successful calls over at least STEADY_S, no failure between.
        """

        def steady(lines):
            start = None
            for stamp, kind, _ in lines:
                if stamp < since:
                    continue
                if kind == 'failed':
                    start = None
                elif kind == 'offloaded':
                    start = stamp if start is None else start
                    if stamp - start >= STEADY_S:
                        return start
            return None

        return self.wait_for(steady, timeout_s, 'steady offloading')

    def failed_since(self, since: float, text: str = '') -> bool:
        return any(
            kind == 'failed' and stamp >= since and text in rest
            for stamp, kind, rest in self.lines
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)  # a stopped robot cannot die
            self.process.kill()
        self.process.wait(timeout=10.0)


def _report(scenario: str, recovery_s: float) -> None:
    print(f'\nrecovery [{scenario}]: {recovery_s:.3f} s', flush=True)  # noqa: T201


@pytest.fixture(scope='module')
def keys(tmp_path_factory):
    directory = tmp_path_factory.mktemp('recovery') / 'keys'
    keys = make_test_keys(directory)
    # A second authorised robot, to hold a full server's slot.
    public, _ = generate_key_pair(directory / 'other', 'other')
    shutil.copy(public, keys.authorized_clients_dir / public.name)
    return keys


@pytest.fixture
def other_secret(keys) -> Path:
    return keys.robot_secret.parent / 'other' / 'other.key_secret'


@pytest.fixture(scope='module')
def server(keys):
    running = HeadlessServer(keys, ['tiny_cnn'])
    yield running
    running.stop()


@pytest.fixture
def robots(keys):
    started: list[Robot] = []

    def start(port: int) -> Robot:
        robot = Robot(f'tcp://127.0.0.1:{port}', keys.robot_secret, keys.server_public)
        started.append(robot)
        return robot

    yield start
    for robot in started:
        robot.stop()


@pytest.fixture
def servers(keys):
    started: list[HeadlessServer] = []

    def start(*arguments: str) -> HeadlessServer:
        running = HeadlessServer(keys, ['tiny_cnn'], *arguments)
        started.append(running)
        return running

    yield start
    for running in started:
        if running.process.poll() is None:
            running.stop()


@pytest.mark.parametrize('stall_s', [1.0, 3.0, 4.0, 6.0, 20.0])
def test_robot_offloads_again_after_a_stall(server, robots, stall_s):
    """Stall across the liveness (3 s), heartbeat (5 s) and session (10 s) timeouts.

    The server is able to serve the robot again the moment it resumes.
    """
    robot = robots(server.port)
    robot.recovered_at(0.0, START_S)
    os.kill(robot.process.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    time.sleep(stall_s)
    resumed = time.monotonic()  # before the signal: the robot may run before kill returns
    os.kill(robot.process.pid, signal.SIGCONT)
    recovery_s = robot.recovered_at(resumed, RECOVERY_LIMIT_S + STEADY_S + 5.0) - resumed
    during = [line for line in robot.lines if stopped + 0.1 < line[0] < resumed]
    assert not during, f'robot ran while stopped ({stopped:.3f} to {resumed:.3f}): {during}'

    _report(f'stall {stall_s:.0f} s', recovery_s)
    assert recovery_s <= RECOVERY_LIMIT_S


def test_robot_refused_by_a_full_server_gets_the_freed_slot(keys, other_secret, servers, robots):
    running = servers('--max-clients', '1')
    holder = EdgeClient(
        ClientConfig(
            endpoint=f'tcp://127.0.0.1:{running.port}',
            client_name='holder',
            secret_key_file=str(other_secret),
            server_public_key_file=str(keys.server_public),
        )
    )
    try:
        assert holder.wait_connected(10.0), holder.state_reason
        robot = robots(running.port)
        robot.wait_for(lambda _: robot.failed_since(0.0, 'server full'), START_S, 'refusal')
        # HELLOs went at about 0, 0.6 and 1.6 s after the first refusal, 1 s apart from
        # then on (the backoff's cap): the slot frees just after one, the worst case.
        time.sleep(2.7)
        assert not any(kind == 'offloaded' for _, kind, _ in robot.lines)
    finally:
        holder.close()  # says BYE: the server frees the slot now
    freed = time.monotonic()
    recovery_s = robot.recovered_at(freed, RECOVERY_LIMIT_S + STEADY_S + 5.0) - freed
    _report('server_full, then a slot freed', recovery_s)
    assert recovery_s <= RECOVERY_LIMIT_S


def test_robot_offloads_again_after_its_server_restarts(servers, robots):
    first = servers()
    robot = robots(first.port)
    robot.recovered_at(0.0, START_S)
    first.process.kill()  # kill -9: no goodbye, sessions lost
    first.process.wait()
    killed = time.monotonic()
    robot.wait_for(lambda _: robot.failed_since(killed), 10.0, 'failure after the kill')
    servers('--endpoint', f'tcp://127.0.0.1:{first.port}')
    listening = time.monotonic()  # the new server printed its listening line
    recovery_s = max(0.0, robot.recovered_at(killed, START_S) - listening)
    _report('server killed and restarted', recovery_s)
    assert recovery_s <= RECOVERY_LIMIT_S


def test_restarted_robot_gets_in_when_its_stale_session_leaves_a_full_server(servers, robots):
    """The old process's session holds the only slot until it is stale.

    The server lets a new session of the same robot key take over a session that has been
    silent for ``stale_session_s`` (2 s by default): the restarted robot keeps saying
    hello and gets in within that time plus the 2 s limit, not after the 10 s session
    timeout.
    """
    running = servers('--max-clients', '1')
    old = robots(running.port)
    old.recovered_at(0.0, START_S)
    old.process.kill()  # its session stays behind on the server
    old.process.wait()
    killed = time.monotonic()
    new = robots(running.port)
    recovered = new.recovered_at(killed, START_S)
    stale_session_s = 2.0
    _report('robot restarted on a full server (from the kill)', recovered - killed)
    assert recovered - killed <= stale_session_s + RECOVERY_LIMIT_S


# ---------------------------------------------------------------------------------------
# The client alone, against a scripted ROUTER peer.


class ScriptedServer:
    """A ROUTER socket that answers the client's messages as a test tells it to."""

    def __init__(self) -> None:
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.ROUTER)
        self.socket.linger = 0
        port = self.socket.bind_to_random_port('tcp://127.0.0.1')
        self.endpoint = f'tcp://127.0.0.1:{port}'

    def receive(self, kind: str, timeout_s: float) -> tuple[bytes, protocol.Message, float]:
        """Return the next message of type ``kind`` (others are dropped)."""
        deadline = time.monotonic() + timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            if self.socket.poll(int(remaining * 1000) + 1):
                identity, *frames = self.socket.recv_multipart()
                message = protocol.decode(frames)
                if message.type == kind:
                    return identity, message, time.monotonic()
        pytest.fail(f'no {kind} within {timeout_s} s')

    def send(self, identity: bytes, message: protocol.Message) -> None:
        self.socket.send_multipart([identity, *protocol.encode(message)])

    def welcome(self, identity: bytes) -> None:
        self.send(identity, protocol.Message(protocol.WELCOME, 0, {'server_id': 'scripted'}))

    def close(self) -> None:
        self.socket.close(linger=0)
        self.context.term()


@pytest.fixture
def scripted():
    peer = ScriptedServer()
    yield peer
    peer.close()


def _plain_client(endpoint: str, **overrides) -> EdgeClient:
    values = {'endpoint': endpoint, 'security': 'plaintext', 'allow_plaintext': True}
    values.update(overrides)
    return EdgeClient(ClientConfig(**values))


def test_hello_carries_a_per_client_instance_and_is_repeated_after_server_full(scripted):
    with _plain_client(scripted.endpoint, client_name='r1', hello_retry_s=0.3) as client:
        identity, hello, _ = scripted.receive(protocol.HELLO, 5.0)
        assert hello.fields['client_name'] == 'r1'
        assert hello.fields['pid'] == os.getpid()
        assert re.fullmatch(r'[0-9a-f]{16}', hello.fields['instance'])
        assert hello.fields['instance'] == client.instance
        refused = time.monotonic()
        scripted.send(identity, protocol.error_message(0, protocol.E_SERVER_FULL, 'full'))
        # The connection stays; HELLO comes again on it, from the same client instance.
        again, hello, received = scripted.receive(protocol.HELLO, 2.0)
        assert again == identity
        assert hello.fields['instance'] == client.instance
        assert received - refused <= 1.0 + 0.3
        assert client.state is ConnectionState.DISCONNECTED
        assert 'full' in client.state_reason
        scripted.welcome(identity)
        assert client.wait_connected(2.0)
        with _plain_client(scripted.endpoint) as other:
            assert other.instance != client.instance


def test_liveness_loss_on_a_live_connection_says_hello_again(scripted):
    with _plain_client(scripted.endpoint, liveness_timeout_s=0.6) as client:
        identity, _, _ = scripted.receive(protocol.HELLO, 5.0)
        scripted.welcome(identity)
        assert client.wait_connected(2.0)
        # Silence: PINGs go unanswered, the connection itself stays up.
        again, hello, _ = scripted.receive(protocol.HELLO, 3.0)
        assert client.state is not ConnectionState.CONNECTED
        assert 'silent' in client.state_reason
        assert again == identity  # no new transport was needed
        scripted.welcome(again)
        assert client.wait_connected(2.0)


def test_a_connection_whose_server_never_answers_hello_is_replaced(scripted):
    with _plain_client(scripted.endpoint, liveness_timeout_s=0.5, hello_retry_s=0.2) as client:
        first, _, started = scripted.receive(protocol.HELLO, 5.0)
        while True:
            identity, _, received = scripted.receive(protocol.HELLO, 5.0)
            if identity != first:
                break
        # max(liveness timeout, two HELLO intervals at their 1 s cap), then a reconnect.
        assert 1.9 <= received - started <= 2.0 + 1.5
        scripted.welcome(identity)
        assert client.wait_connected(2.0)
