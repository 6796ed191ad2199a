# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Run the suite's nodes as child processes on one machine, and always stop them.

For tools that evaluate a whole graph locally (``accumo_evaluate_e2e``) and for the
system tests. Each process writes stdout and stderr to a log file, so a failure can show
what the process said; ``stop_all`` sends SIGINT (a clean rclpy shutdown), then SIGKILL
after a grace period.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from edge_offload.keys import ensure_loopback_keys

_GRACE_PERIOD_S = 5.0


class ProcessGroup:
    """Processes started together, stopped together."""

    def __init__(self, log_dir: Path) -> None:
        self._log_dir = log_dir
        self._processes: list[tuple[subprocess.Popen, Path]] = []

    def start(self, args: Sequence[str], *, name: str) -> subprocess.Popen:
        """Start ``args`` with this environment; output goes to ``<log_dir>/<name>.log``."""
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


class NodeKeys(Protocol):
    """The key files an edge server node and a bridge node on one machine need."""

    server_secret: Path
    server_public: Path
    authorized_clients_dir: Path
    robot_secret: Path


@dataclass(frozen=True)
class LoopbackKeys:
    """A server key pair and one authorised robot's, for a graph on one machine."""

    server_secret: Path
    server_public: Path
    authorized_clients_dir: Path
    robot_secret: Path


def loopback_keys(directory: Path) -> LoopbackKeys:
    """Create (if missing) server and robot keys in ``directory``; authorise the robot."""
    files = ensure_loopback_keys(directory)
    return LoopbackKeys(
        server_secret=Path(files['server_secret']),
        server_public=Path(files['server_public']),
        authorized_clients_dir=Path(files['authorized']),
        robot_secret=Path(files['robot_secret']),
    )


def free_tcp_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def node_command(module: str, **parameters: object) -> list[str]:
    """Return ``python -m module --ros-args -p name:=value ...`` for a node's module."""
    return [sys.executable, '-m', module, *_ros_parameters(parameters)]


def _ros_parameters(parameters: dict[str, object]) -> list[str]:
    arguments = ['--ros-args']
    for name, value in parameters.items():
        if isinstance(value, list | tuple):
            value = '[' + ','.join(str(item) for item in value) + ']'
        elif isinstance(value, bool):
            value = str(value).lower()
        arguments += ['-p', f'{name}:={value}']
    return arguments


def edge_server_node_command(
    port: int, keys: NodeKeys, models: list[str], **parameters: object
) -> list[str]:
    """Return the command line of an autostarting ``edge_server`` node on ``port``."""
    values = {
        'autostart': True,
        'endpoint': f'tcp://127.0.0.1:{port}',
        'secret_key_file': keys.server_secret,
        'authorized_clients_dir': keys.authorized_clients_dir,
        'models': models,
        **parameters,
    }
    return node_command('edge_offload.edge_server_node', **values)


def offload_bridge_node_command(
    port: int, keys: NodeKeys, models: list[str], **parameters: object
) -> list[str]:
    """Return the command line of an autostarting ``offload_bridge`` node for ``port``."""
    values = {
        'autostart': True,
        'server_endpoint': f'tcp://127.0.0.1:{port}',
        'secret_key_file': keys.robot_secret,
        'server_public_key_file': keys.server_public,
        'models': models,
        **parameters,
    }
    return node_command('edge_offload.offload_bridge_node', **values)
