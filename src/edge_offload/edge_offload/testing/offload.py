# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Helpers for tests of the offload substrate: keys, free ports, process memory."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from edge_offload.keys import AUTHORIZED_CLIENTS_SUBDIR, generate_key_pair


@dataclass(frozen=True)
class KeySet:
    """Key files of one server, one authorised robot and one intruder (not authorised)."""

    server_secret: Path
    server_public: Path
    authorized_clients_dir: Path
    robot_secret: Path
    intruder_secret: Path


def make_test_keys(directory: Path) -> KeySet:
    """Create server, robot and intruder key pairs in ``directory``; authorise the robot."""
    server_public, server_secret = generate_key_pair(directory, 'server')
    robot_public, robot_secret = generate_key_pair(directory, 'robot')
    _, intruder_secret = generate_key_pair(directory / 'intruder', 'intruder')
    authorized = directory / AUTHORIZED_CLIENTS_SUBDIR
    authorized.mkdir()
    (authorized / robot_public.name).write_bytes(robot_public.read_bytes())
    return KeySet(server_secret, server_public, authorized, robot_secret, intruder_secret)


def free_tcp_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def resident_memory_bytes(pid: int) -> int:
    """Return the resident set size of process ``pid`` (Linux /proc)."""
    for line in Path(f'/proc/{pid}/status').read_text().splitlines():
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f'no VmRSS for process {pid}')
