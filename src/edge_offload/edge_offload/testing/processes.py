# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Start ROS processes for a test and always stop them afterwards.

Each process writes stdout and stderr to a log file, so a failing test can show what
the process said; teardown sends SIGINT (a clean rclpy shutdown), then SIGKILL after
a grace period.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

_GRACE_PERIOD_S = 5.0


class ProcessGroup:
    """Processes started by one test, stopped together."""

    def __init__(self, log_dir: Path) -> None:
        self._log_dir = log_dir
        self._processes: list[tuple[subprocess.Popen, Path]] = []

    def start(self, args: Sequence[str], *, name: str) -> subprocess.Popen:
        """Start ``args`` with the test's environment; output goes to ``<name>.log``."""
        log_path = self._log_dir / f'{name}.log'
        with log_path.open('wb') as log_file:
            process = subprocess.Popen(
                list(args),
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=dict(os.environ),
                start_new_session=True,
            )
        self._processes.append((process, log_path))
        return process

    def output(self, process: subprocess.Popen) -> str:
        """Return what ``process`` has printed so far."""
        for candidate, log_path in self._processes:
            if candidate is process:
                return log_path.read_text(errors='replace')
        raise KeyError('process was not started by this group')

    def stop_all(self) -> dict[str, int]:
        """Stop every process (SIGINT, then SIGKILL) and return their exit codes by log name."""
        for process, _ in self._processes:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        exit_codes = {}
        for process, log_path in self._processes:
            try:
                process.wait(timeout=_GRACE_PERIOD_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            exit_codes[log_path.stem] = process.returncode
        return exit_codes
