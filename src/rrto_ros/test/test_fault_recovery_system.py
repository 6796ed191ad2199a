# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The bridge's per_op and rrto modes survive their edge server dying (issue 31, faults).

System tests: a real headless edge server process and a real robot process (a small loop
that offloads tiny_cnn through ``edge_offload.api.Offloader`` in the mode under test, a
request every 50 ms with a fresh deterministic input and a 0.5 s deadline, and prints one
line per answer with a monotonic timestamp: which mode answered, whether the answer is
bit-equal to the model run locally in that process, and its round trips). The server is
killed (kill -9) and a new one started on the same endpoint 2 s later, stopped for 10 s
(SIGSTOP, SIGCONT), or restarted gracefully (SIGTERM or SIGINT, then a new one). Each
time every request must be answered, bit-equal to local; the first local fallback must
come within 1 s of the fault, and no answer more than 1 s after the one before while the
server is away; offloading must resume within 2 s of the server being able
to answer again (the SIGCONT, or a new server both listening and logging that its per_op
and rrto halves loaded PyTorch's meta kernels, which it does in a thread after its start,
about a second), and rrto must replay (one round trip per inference) again within 10 s.
``pytest -s`` prints the measured times.

The robot's 0.5 s deadline is what bounds the wait for a stopped server: the bridge's
goals carry one (``Offload.deadline``). Without one, a request to a server that stopped
answering waits for the client's liveness timeout (``liveness_timeout_s``, 3 s).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

import pytest

# The test folder is not a package: the helper sits beside this file.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fault_timeline import (  # noqa: E402
    Answer,
    FaultMetrics,
    first_fallback_after,
    format_table,
    longest_gap,
    measure,
    offloaded,
    replayed,
    resumed_at,
    runs,
)

from edge_offload_testing import free_tcp_port, make_test_keys  # noqa: E402

FIRST_ANSWER_LIMIT_S = 1.0  # from the fault to the robot's first local answer
RESUME_LIMIT_S = 2.0  # from the server being able to answer to steady offloading
REPLAY_LIMIT_S = 10.0  # from the server being able to answer to steady rrto replay
STEADY_S = 1.0  # "resumed": offloaded answers over this long with no fallback between
RESTART_DELAY_S = 2.0  # kill -9, then a new server after this long
STALL_S = 10.0  # SIGSTOP for this long
DEADLINE_S = 0.5  # each of the robot's requests
PERIOD_S = 0.05
START_S = 90.0  # a process importing torch on a loaded two-core machine

# The robot: offload tiny_cnn through the Offloader in a loop; one line per answer.
ROBOT = r"""
import sys, threading, time
import torch
from edge_offload.api import Offloader, OffloaderConfig
from edge_offload.client import ClientConfig

torch.set_num_threads(1)
endpoint, secret_key_file, server_key_file, mode = sys.argv[1:5]
deadline_s, period_s = float(sys.argv[5]), float(sys.argv[6])
lock = threading.Lock()


def say(*words):
    with lock:
        print(f'{time.monotonic():.6f}', *words, flush=True)


client = ClientConfig(
    endpoint=endpoint,
    client_name='robot',
    secret_key_file=secret_key_file,
    server_public_key_file=server_key_file,
)
offloader = Offloader(OffloaderConfig(mode=mode, client=client))
offloader.client.add_state_listener(lambda state, reason: say('state', state.value, reason))
offloader.warm_up(['tiny_cnn'])
model = offloader.models.get('tiny_cnn')
say('started', mode)
index = 0
while True:
    inputs = {'image': torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(index))}
    expected = model(inputs)['features']  # the local reference, outside any session
    begun = time.monotonic()
    try:
        outcome = offloader.infer('tiny_cnn', inputs, deadline=begun + deadline_s)
    except Exception as error:
        say('error', index, type(error).__name__, str(error).replace('\n', ' '))
    else:
        equal = int(torch.equal(outcome.outputs['features'], expected))
        trips = '-' if outcome.fell_back else outcome.stats.round_trips
        reason = outcome.fallback_reason.replace('\n', ' ')
        say('answer', index, outcome.mode_used, int(outcome.fell_back), equal, trips, reason)
    index += 1
    time.sleep(max(0.0, begun + period_s - time.monotonic()))
"""

LINE = re.compile(r'(\d+\.\d+) (\w+) ?(.*)')


class Robot:
    """The robot process; its lines are parsed as they come."""

    def __init__(self, endpoint: str, keys, mode: str) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable, '-c', ROBOT, endpoint, str(keys.robot_secret),
                str(keys.server_public), mode, str(DEADLINE_S), str(PERIOD_S),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        self.answers: list[Answer] = []
        self.modes: list[str] = []  # the mode that answered, per answer
        self.errors: list[str] = []  # exceptions that reached the robot's loop
        self.raw: list[str] = []
        self._changed = threading.Condition()
        threading.Thread(target=self._read, name='robot-lines', daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            found = LINE.match(line.rstrip())
            with self._changed:
                self.raw.append(line.rstrip())
                if found and found[2] == 'answer':
                    _, mode, fell_back, equal, trips, *_ = found[3].split(' ')
                    self.answers.append(
                        Answer(
                            float(found[1]),
                            fell_back == '0',
                            equal == '1',
                            None if trips == '-' else int(trips),
                        )
                    )
                    self.modes.append(mode)
                elif found and found[2] == 'error':
                    self.errors.append(line.rstrip())
                self._changed.notify_all()

    def wait_for(self, predicate, timeout_s: float, what: str):
        """Wait until ``predicate(answers)`` returns something not None; return it."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                result = predicate(self.answers)
                if result is not None:
                    return result
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    pytest.fail(f'robot: no {what} within {timeout_s:.0f} s\n{self.tail()}')
                self._changed.wait(min(remaining, 0.5))

    def snapshot(self) -> tuple[list[Answer], list[str], list[str]]:
        """Return the answers, the modes that gave them and the errors, so far."""
        with self._changed:
            return list(self.answers), list(self.modes), list(self.errors)

    def tail(self) -> str:
        with self._changed:
            return 'its last lines:\n' + '\n'.join(self.raw[-60:])

    def save(self, path: Path, fault_t: float, back_t: float) -> None:
        """Write every line the robot printed, with the fault's instants, to ``path``."""
        with self._changed:
            lines = list(self.raw)
        path.write_text(f'fault {fault_t:.6f}\nback {back_t:.6f}\n' + '\n'.join(lines) + '\n')

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10.0)


class Server:
    """``edge_offload_server`` serving tiny_cnn with per_op and rrto on a given port."""

    def __init__(self, keys, port: int) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable, '-m', 'edge_offload.server',
                '--endpoint', f'tcp://127.0.0.1:{port}',
                '--models', 'tiny_cnn', '--modes', 'per_op,rrto', '--torch-threads', '1',
                '--secret-key-file', str(keys.server_secret),
                '--authorized-clients-dir', str(keys.authorized_clients_dir),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        self.log: deque[str] = deque(maxlen=40)
        self.listening_at: float | None = None
        self.ready_at: float | None = None
        self._serving = threading.Event()
        threading.Thread(target=self._read, name='server-log', daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            if self.listening_at is None and line.startswith('edge_server listening on'):
                self.listening_at = time.monotonic()
            if self.ready_at is None and 'per_op and rrto ready' in line:
                self.ready_at = time.monotonic()
            if self.listening_at is not None and self.ready_at is not None:
                self._serving.set()
            self.log.append(line.rstrip())
        self._serving.set()  # it exited

    def wait_serving(self, timeout_s: float = START_S) -> float:
        """Return when the server could answer per_op and rrto: listening, kernels loaded.

        It listens (and serves nnto) while it loads PyTorch's meta kernels in a thread;
        a per_op request meanwhile waits for them (about a second after a start).
        """
        self._serving.wait(timeout_s)
        if self.listening_at is None or self.ready_at is None:
            log = '\n'.join(self.log)
            pytest.fail(f'the edge server did not start within {timeout_s:.0f} s:\n{log}')
        return max(self.listening_at, self.ready_at)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)  # a stopped process cannot exit
            self.process.terminate()
            try:
                self.process.wait(timeout=10.0)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process.wait(timeout=10.0)


@pytest.fixture(scope='module')
def keys(tmp_path_factory):
    return make_test_keys(tmp_path_factory.mktemp('faults') / 'keys')


@pytest.fixture(scope='module')
def table():
    rows: list[tuple[str, FaultMetrics]] = []
    yield rows
    if rows:
        print('\n\nbridge modes, server faults:\n' + format_table(rows), flush=True)  # noqa: T201


@pytest.fixture
def processes(keys):
    started: list[Robot | Server] = []

    def start(kind, *arguments):
        process = kind(*arguments)
        started.append(process)
        return process

    yield start
    for process in reversed(started):
        process.stop()


def _serving_again(server: Server) -> float:
    back_t = server.wait_serving()
    print(  # noqa: T201 - the figure of the run
        f'\nnew server: per_op ready {server.ready_at - server.listening_at:+.3f} s '
        'after its listening line',
        flush=True,
    )
    return back_t


def _fault(name: str, server: Server, start_server) -> tuple[float, float]:
    """Do fault ``name`` to ``server``; return when, and when a server could answer again."""
    if name == 'kill':
        fault_t = time.monotonic()  # before the signal: the robot may see it before we go on
        server.process.kill()
        server.process.wait()
        time.sleep(max(0.0, RESTART_DELAY_S - (time.monotonic() - fault_t)))
        return fault_t, _serving_again(start_server())
    if name == 'stop':
        fault_t = time.monotonic()
        os.kill(server.process.pid, signal.SIGSTOP)
        time.sleep(STALL_S)
        back_t = time.monotonic()
        os.kill(server.process.pid, signal.SIGCONT)
        return fault_t, back_t
    signum = {'sigterm': signal.SIGTERM, 'sigint': signal.SIGINT}[name]
    fault_t = time.monotonic()
    server.process.send_signal(signum)
    try:
        server.process.wait(timeout=10.0)
    except subprocess.TimeoutExpired:
        pytest.fail(
            f'the edge server did not stop within 10 s of {name}:\n' + '\n'.join(server.log)
        )
    # A server stopped while a worker is inside a torch operator used to abort ("terminate
    # called without an active exception", -6): EdgeServer.stop now waits for the call.
    assert server.process.returncode == 0, (
        f'the edge server exited with {server.process.returncode} on {name}:\n'
        + '\n'.join(server.log)
    )
    return fault_t, _serving_again(start_server())


SCENARIOS = [
    ('per_op', 'kill'),
    ('per_op', 'stop'),
    ('per_op', 'sigterm'),
    ('rrto', 'kill'),
    ('rrto', 'stop'),
    ('rrto', 'sigint'),
]


@pytest.mark.timeout(150)
@pytest.mark.parametrize(('mode', 'fault'), SCENARIOS, ids=[f'{m}-{f}' for m, f in SCENARIOS])
def test_mode_offloads_again_after_a_server_fault(keys, processes, table, tmp_path, mode, fault):
    port = free_tcp_port()
    endpoint = f'tcp://127.0.0.1:{port}'
    server = processes(Server, keys, port)
    robot = processes(Robot, endpoint, keys, mode)  # starts beside the server
    server.wait_serving()
    steady = replayed if mode == 'rrto' else offloaded
    robot.wait_for(
        lambda got: resumed_at(got, 0.0, STEADY_S, steady), START_S, 'steady offloading'
    )

    fault_t, back_t = _fault(fault, server, lambda: processes(Server, keys, port))
    # Waits a few seconds past the limits: a late recovery fails below, with its time.
    first = robot.wait_for(
        lambda got: first_fallback_after(got, fault_t), 10.0, 'local answer after the fault'
    )
    robot.wait_for(
        lambda got: resumed_at(got, first, STEADY_S),
        back_t + RESUME_LIMIT_S + STEADY_S + 5.0 - time.monotonic(),
        'offloading again',
    )
    if mode == 'rrto':
        robot.wait_for(
            lambda got: resumed_at(got, first, STEADY_S, replayed),
            back_t + REPLAY_LIMIT_S + STEADY_S + 5.0 - time.monotonic(),
            'replay again',
        )

    answers, modes, errors = robot.snapshot()
    robot.save(tmp_path / 'robot.log', fault_t, back_t)
    metrics = measure(answers, fault_t, back_t, STEADY_S)
    scenario = f'{mode}, {fault}'
    table.append((scenario, metrics))
    print(f'\n{scenario}:\n{format_table([(scenario, metrics)])}', flush=True)  # noqa: T201
    context = (
        f'{scenario}: fault at {fault_t:.3f}, server back at {back_t:.3f}; '
        f"fallbacks after the fault: {_runs_text(answers, fault_t)}; the robot's lines are "
        f'in {tmp_path / "robot.log"}\n{robot.tail()}'
    )
    assert not errors, f'{scenario}: requests raised instead of being answered: {errors}'
    assert robot.process.poll() is None, context
    unequal = [
        (answer.t, used) for answer, used in zip(answers, modes, strict=True) if not answer.equal
    ]
    assert not unequal, f'answers not bit-equal to local (t, mode): {unequal}; {context}'
    assert set(modes) <= {mode, 'local'}, f'{scenario}: answered by {sorted(set(modes))}'
    assert metrics.first_fallback_s <= FIRST_ANSWER_LIMIT_S, (
        f'first local answer {metrics.first_fallback_s:.3f} s after the fault '
        f'(limit {FIRST_ANSWER_LIMIT_S} s); {context}'
    )
    gap_s = longest_gap(answers, fault_t, back_t)
    assert gap_s <= FIRST_ANSWER_LIMIT_S, (
        f'the robot went {gap_s:.3f} s without an answer while the server was down '
        f'(limit {FIRST_ANSWER_LIMIT_S} s); {context}'
    )
    assert metrics.resumed_s <= RESUME_LIMIT_S, (
        f'offloading resumed {metrics.resumed_s:.3f} s after the server could answer '
        f'(limit {RESUME_LIMIT_S} s); {context}'
    )
    if mode == 'rrto':
        assert metrics.replay_resumed_s <= REPLAY_LIMIT_S, (
            f'replay resumed {metrics.replay_resumed_s:.3f} s after the server could answer '
            f'(limit {REPLAY_LIMIT_S} s); {context}'
        )


def _runs_text(answers: list[Answer], since: float) -> str:
    found = runs(answers, lambda answer: not answer.offloaded, since)
    return ', '.join(f'{run.start:.3f}..{run.end:.3f} ({run.count})' for run in found) or 'none'


# ---------------------------------------------------------------------------------------
# The mode alone, in this process: a session does not outlive its connection.


@pytest.mark.timeout(60)
@pytest.mark.parametrize('mode', ['per_op', 'rrto'])
def test_a_lost_connection_ends_the_session_before_the_next_request(keys, mode):
    """A server restarted between two requests: the next one starts afresh, offloaded.

    The old session's values (its cached parameters, rrto's sequence) died with the old
    server; using it would fail the first request after the reconnect.
    """
    import torch

    from edge_offload.api import Offloader, OffloaderConfig
    from edge_offload.client import ClientConfig, ConnectionState
    from edge_offload_testing import loopback_edge_server

    endpoint = f'tcp://127.0.0.1:{free_tcp_port()}'
    client = ClientConfig(
        endpoint=endpoint,
        secret_key_file=str(keys.robot_secret),
        server_public_key_file=str(keys.server_public),
    )
    frame = {'image': torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(7))}
    server = loopback_edge_server(keys, endpoint=endpoint, modes=[mode])
    server.start()
    try:
        with Offloader(OffloaderConfig(mode=mode, client=client)) as offloader:
            assert offloader.client.wait_connected(30.0), offloader.client.state_reason
            expected = offloader.models.get('tiny_cnn')(frame)['features']
            first = offloader.infer('tiny_cnn', frame)
            again = offloader.infer('tiny_cnn', frame)
            lost = threading.Event()
            offloader.client.add_state_listener(
                lambda state, _: lost.set() if state is not ConnectionState.CONNECTED else None
            )
            server.stop()
            assert lost.wait(10.0), 'the robot did not see its server go'
            server = loopback_edge_server(keys, endpoint=endpoint, modes=[mode])
            server.start()
            assert offloader.client.wait_connected(30.0), offloader.client.state_reason
            after = offloader.infer('tiny_cnn', frame)
    finally:
        server.stop()
    for outcome in (first, again, after):
        assert not outcome.fell_back, outcome.fallback_reason
        assert torch.equal(outcome.outputs['features'], expected)
    # A fresh session: a reset and the parameters again, as the first request.
    assert again.stats.round_trips < first.stats.round_trips
    assert after.stats.round_trips == first.stats.round_trips
    assert after.stats.bytes_up == first.stats.bytes_up


# ---------------------------------------------------------------------------------------
# fault_timeline, on made-up timelines.


def _timeline(spec: str, start: float = 0.0, step: float = 0.1) -> list[tuple]:
    """One answer per character, ``step`` apart: o offloaded, r replayed, l local, x unequal."""
    kinds = {
        'o': (True, True, 20),
        'r': (True, True, 1),
        'l': (False, True, None),
        'x': (True, False, 20),
    }
    return [(start + i * step, *kinds[c]) for i, c in enumerate(spec)]


def test_timeline_resumption_needs_a_steady_run():
    # Fault at 1.0 (index 10): fallbacks, one offloaded answer, a fallback, then steady.
    records = _timeline('oooooooooo' + 'llll' + 'o' + 'l' + 'oooooooooooooooooooooooo')
    assert first_fallback_after(records, 1.0) == pytest.approx(1.0)
    assert resumed_at(records, 1.0) == pytest.approx(1.6)
    assert resumed_at(records, 1.0, steady_s=3.0) is None
    metrics = measure(records, fault_t=1.0, back_t=1.45)
    assert metrics.first_fallback_s == pytest.approx(0.0)
    assert metrics.resumed_s == pytest.approx(0.15)
    assert metrics.fallbacks == 5
    assert metrics.answers == 30
    assert metrics.unequal == 0
    assert metrics.replay_resumed_s is None
    assert [run.count for run in runs(records, offloaded)] == [10, 1, 24]


def test_timeline_replay_gaps_and_table():
    records = _timeline('rrrrr' + 'lll' + 'oooo' + 'rrrrrrrrrrrrrrr' + 'x', start=10.0)
    metrics = measure(records, fault_t=10.45, back_t=10.7)
    assert metrics.first_fallback_s == pytest.approx(0.05)
    assert metrics.resumed_s == pytest.approx(0.1)  # from the first offloaded answer, 10.8
    assert metrics.replay_resumed_s == pytest.approx(0.5)  # replays from 11.2
    assert metrics.unequal == 1
    assert metrics.longest_gap_s == pytest.approx(0.1)
    assert longest_gap(records, 10.0, 13.0) == pytest.approx(13.0 - 12.7)  # 28 answers
    # Answers out of order come back sorted; the offloaded run before the fault is skipped.
    assert resumed_at(list(reversed(records)), 10.45, steady_s=0.5) == pytest.approx(10.8)
    text = format_table([('rrto, kill', metrics)])
    assert 'rrto, kill' in text
    assert '0.500' in text
