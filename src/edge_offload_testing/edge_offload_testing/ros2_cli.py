# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Run ``ros2 launch`` and the ``ros2`` command line as a user does, for system tests.

They need the ROS 2 command line: a ROS 2 installation, or the overlay that ``make test``
builds from ``../shared/ros2-launch`` where that folder exists. Where it is missing, the
tests skip with the reason; with ``EDGE_OFFLOAD_REQUIRE_ROS2_CLI=1`` (``make test`` sets it
when it built the overlay) they fail instead, so a broken set-up cannot pass as a skip.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REQUIRE_ENV = 'EDGE_OFFLOAD_REQUIRE_ROS2_CLI'
# ros2 launch sends SIGTERM this long after its SIGINT, then SIGKILL.
LAUNCH_SIGTERM_TIMEOUT_S = 5.0
_LAUNCH_LOG_LINE = re.compile(
    r'^(?P<time>\d+\.\d+) \[(?P<level>\w+)\] \[(?P<name>[^\]]+)\]: (?P<text>.*)$'
)


def ros2_cli_missing() -> str:
    """Return why ``ros2 launch`` and ``launch_test`` cannot run here ('' when they can)."""
    if shutil.which('ros2') is None or shutil.which('launch_test') is None:
        return (
            'the ros2 command and launch_test are not installed (a ROS 2 distribution, or '
            'the overlay make test builds from ../shared/ros2-launch)'
        )
    for module in ('launch', 'launch_ros', 'launch_testing', 'ros2cli'):
        if importlib.util.find_spec(module) is None:
            return f'the Python package {module} is not importable (source its setup file)'
    return ''


def _ros2() -> str:
    path = shutil.which('ros2')
    if path is None:
        raise FileNotFoundError('the ros2 command is not on PATH')
    return path


def require_ros2_cli() -> None:
    """Skip the calling test, with the reason, where the ROS 2 command line is missing.

    With ``EDGE_OFFLOAD_REQUIRE_ROS2_CLI=1`` the test fails instead of skipping.
    """
    reason = ros2_cli_missing()
    if not reason:
        return
    if os.environ.get(REQUIRE_ENV) == '1':
        pytest.fail(f'{reason}; {REQUIRE_ENV}=1 says it must be here', pytrace=False)
    pytest.skip(reason)


def run_ros2(*arguments: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess:
    """Run ``ros2 ARGUMENTS`` to the end and return it (stdout and stderr together)."""
    return subprocess.run(
        [_ros2(), *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def run_ros2_for(seconds: float, *arguments: str) -> str:
    """Run ``ros2 ARGUMENTS`` for ``seconds``, then Ctrl-C it; return what it printed."""
    process = subprocess.Popen(
        [_ros2(), *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_prepare_child(None),
    )
    try:
        output, _ = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
        try:
            output, _ = process.communicate(timeout=10.0)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
    return output


@dataclass(frozen=True)
class LaunchEvent:
    """A line of ``launch.log`` about one process: started, finished or died, or a signal."""

    time: float
    process: str
    kind: str  # 'started', 'exited' or 'signal'
    pid: int | None = None
    exit_code: int | None = None
    text: str = ''


def _prepare_child(cpus: frozenset[int] | None) -> Callable[[], None]:
    def prepare() -> None:
        # A background job of a non-interactive shell inherits SIGINT ignored; ros2 launch
        # must hear Ctrl-C, as it does in a terminal.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if cpus:
            os.sched_setaffinity(0, cpus)

    return prepare


class Ros2Launch:
    """``ros2 launch ARGUMENTS`` in a process group of its own, as in a terminal."""

    def __init__(
        self,
        arguments: list[str],
        directory: Path,
        name: str = 'launch',
        cpus: frozenset[int] | None = None,
    ) -> None:
        """Start it; output goes to ``directory/<name>.out``, ROS logs under ``<name>_log``.

        ``cpus`` pins the launch and its nodes to those CPUs: two launches on disjoint CPUs
        stand for two machines (the robot and the edge server) on one host.
        """
        directory.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.arguments = list(arguments)
        self.output_path = directory / f'{name}.out'
        self.log_dir = directory / f'{name}_log'
        environment = dict(os.environ, ROS_LOG_DIR=str(self.log_dir), PYTHONUNBUFFERED='1')
        self.interrupted_at: float | None = None
        # How long ros2 launch itself took to end after interrupt().
        self.exited_after_s: float | None = None
        with self.output_path.open('wb') as output:
            self.process = subprocess.Popen(
                [_ros2(), 'launch', *arguments],
                stdout=output,
                stderr=subprocess.STDOUT,
                env=environment,
                start_new_session=True,
                preexec_fn=_prepare_child(cpus),
            )

    def output(self) -> str:
        """Return what the launch printed so far."""
        return self.output_path.read_text(errors='replace')

    def wait_for_output(self, pattern: str, timeout_s: float) -> re.Match | None:
        """Wait until the output matches ``pattern`` (a regex); None on timeout or exit."""
        deadline = time.monotonic() + timeout_s
        regex = re.compile(pattern, re.MULTILINE)
        while time.monotonic() < deadline:
            match = regex.search(self.output())
            if match or self.process.poll() is not None:
                return match
            time.sleep(0.2)
        return None

    def interrupt(self, timeout_s: float = 3 * LAUNCH_SIGTERM_TIMEOUT_S) -> int:
        """Press Ctrl-C: SIGINT to the whole process group; return the launch's exit code.

        The launch is killed (and -9 returned) if it has not ended after ``timeout_s``.
        """
        if self.process.poll() is None:
            self.interrupted_at = time.time()
            os.killpg(self.process.pid, signal.SIGINT)
        try:
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            code = -9
        if self.interrupted_at is not None:
            self.exited_after_s = time.time() - self.interrupted_at
        return code

    def kill(self) -> None:
        """SIGKILL everything left in the launch's session."""
        for pid in [self.process.pid, *self.processes_left()]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass

    def processes_left(self) -> list[int]:
        """Return the pids still running in the launch's session (its nodes included)."""
        session = self.process.pid
        left = []
        for stat in Path('/proc').glob('[0-9]*/stat'):
            try:
                fields = stat.read_text().rsplit(')', 1)[1].split()
            except (OSError, IndexError):
                continue
            # After ") ": state, ppid, pgrp, session.
            if int(fields[3]) == session and fields[0] != 'Z':
                left.append(int(stat.parent.name))
        return left

    def launch_log(self) -> str:
        """Return launch's own log file (``launch.log``, with wall-clock times)."""
        logs = sorted(self.log_dir.glob('*/launch.log'))
        return logs[-1].read_text(errors='replace') if logs else ''

    def events(self) -> list[LaunchEvent]:
        """Return the processes' start, exit and signal events from ``launch.log``."""
        events = []
        for line in self.launch_log().splitlines():
            match = _LAUNCH_LOG_LINE.match(line)
            if match is None:
                continue
            when, process, text = float(match['time']), match['name'], match['text']
            if started := re.match(r'process started with pid \[(\d+)\]', text):
                events.append(LaunchEvent(when, process, 'started', int(started[1])))
            elif finished := re.match(r'process has finished cleanly \[pid (\d+)\]', text):
                events.append(LaunchEvent(when, process, 'exited', int(finished[1]), 0))
            elif died := re.match(r'process has died \[pid (\d+), exit code (-?\d+)', text):
                events.append(LaunchEvent(when, process, 'exited', int(died[1]), int(died[2])))
            elif text.startswith('sending signal'):
                events.append(LaunchEvent(when, process, 'signal', text=text))
        return events

    def pid_of(self, process_prefix: str) -> int:
        """Return the pid of the newest start of the process named ``<prefix>-N``."""
        started = [
            event
            for event in self.events()
            if event.kind == 'started' and event.process.rsplit('-', 1)[0] == process_prefix
        ]
        if not started:
            raise LookupError(f'{process_prefix} has not started:\n{self.launch_log()}')
        return started[-1].pid

    def close(self) -> None:
        """Interrupt the launch if it still runs, and kill what is left."""
        if self.process.poll() is None:
            self.interrupt()
        if self.processes_left():
            self.kill()
