# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Helpers for tests of the offload substrate: keys, in-process servers, process memory."""

from __future__ import annotations

import collections
import re
import resource
import select
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edge_offload.keys import AUTHORIZED_CLIENTS_SUBDIR, generate_key_pair

if TYPE_CHECKING:
    from edge_offload.client import EdgeClient
    from edge_offload.server import EdgeServer


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


def authorize_robot(keys: KeySet, name: str) -> Path:
    """Create another robot key pair beside ``keys`` and authorise it; return its secret."""
    public, secret = generate_key_pair(keys.server_secret.parent / 'robots' / name, name)
    (keys.authorized_clients_dir / public.name).write_bytes(public.read_bytes())
    return secret


def loopback_edge_server(keys: KeySet, **overrides: Any) -> EdgeServer:
    """Return an ``EdgeServer`` (not started) on a free loopback port with ``keys``."""
    from edge_offload.server import EdgeServer, ServerConfig  # torch: only when used

    values: dict[str, Any] = {
        'endpoint': 'tcp://127.0.0.1:0',
        'models': ['tiny_cnn'],
        'secret_key_file': str(keys.server_secret),
        'authorized_clients_dir': str(keys.authorized_clients_dir),
    }
    values.update(overrides)
    return EdgeServer(ServerConfig(**values))


def edge_client_for(
    keys: KeySet, endpoint: str, secret: Path | None = None, **overrides: Any
) -> EdgeClient:
    """Return an ``EdgeClient`` of the robot in ``keys`` (or ``secret``) to ``endpoint``."""
    from edge_offload.client import ClientConfig, EdgeClient  # torch: only when used

    values: dict[str, Any] = {
        'endpoint': endpoint,
        'secret_key_file': str(secret or keys.robot_secret),
        'server_public_key_file': str(keys.server_public),
    }
    values.update(overrides)
    return EdgeClient(ClientConfig(**values))


def resident_memory_bytes(pid: int) -> int:
    """Return the resident set size of process ``pid`` (Linux /proc)."""
    for line in Path(f'/proc/{pid}/status').read_text().splitlines():
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f'no VmRSS for process {pid}')


def start_headless_server(
    keys: KeySet,
    models: list[str],
    *arguments: str,
    timeout_s: float = 60.0,
    open_files_soft_limit: int | None = None,
) -> tuple[subprocess.Popen, str]:
    """Start ``edge_offload_server`` on a free loopback port; return it and its endpoint.

    Its log goes to the process's stdout pipe after the first line, which names the
    bound endpoint. ``open_files_soft_limit`` starts it with that soft RLIMIT_NOFILE (the
    hard limit unchanged), as a small default limit on a robot's or a server's OS would.
    """
    command = [
        sys.executable,
        '-m',
        'edge_offload.server',
        '--endpoint',
        'tcp://127.0.0.1:0',
        '--models',
        ','.join(models),
        '--secret-key-file',
        str(keys.server_secret),
        '--authorized-clients-dir',
        str(keys.authorized_clients_dir),
        *arguments,
    ]
    return _start_announcing(
        command,
        r'listening on (tcp://\S+)',
        'edge_offload_server',
        timeout_s,
        preexec_fn=None if open_files_soft_limit is None else _soft_nofile(open_files_soft_limit),
    )


def _soft_nofile(limit: int) -> Callable[[], None]:
    def apply() -> None:
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))

    return apply


def _start_announcing(
    command: list[str],
    pattern: str,
    what: str,
    timeout_s: float,
    preexec_fn: Callable[[], None] | None = None,
) -> tuple[subprocess.Popen, str]:
    """Start ``command``; return it and the group of ``pattern`` in its first output line.

    Its later output stays in the process's stdout pipe.
    """
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        preexec_fn=preexec_fn,  # noqa: PLW1509 - sets an rlimit only, before exec
    )
    ready, _, _ = select.select([process.stdout], [], [], timeout_s)
    line = process.stdout.readline() if ready else ''
    found = re.search(pattern, line)
    if not found:
        process.kill()
        process.wait()
        raise RuntimeError(f'{what} did not start: {line!r}')
    return process, found.group(1)


def start_link_emulator_process(
    upstream_port: int,
    rtt_s: float,
    rate_bps: float = 0.0,
    *,
    trace: Path | None = None,
    timeout_s: float = 30.0,
) -> tuple[subprocess.Popen, int]:
    """Start ``python -m edge_offload.link_emulator_cli`` to 127.0.0.1:``upstream_port``.

    A constant ``rate_bps`` both ways, or the mahimahi ``trace`` both ways, and ``rtt_s``.
    In its own process the relay does not compete for the measuring process's
    interpreter lock, as a real link would not. Returns the process and its port.
    """
    if trace is not None:
        shaping = ['--uplink-trace', str(trace), '--downlink-trace', str(trace)]
    else:
        rate = str(rate_bps / 1e6)
        shaping = ['--uplink-mbps', rate, '--downlink-mbps', rate]
    process, port = _start_announcing(
        [
            sys.executable,
            '-m',
            'edge_offload.link_emulator_cli',
            '--upstream',
            f'127.0.0.1:{upstream_port}',
            '--rtt-ms',
            str(rtt_s * 1e3),
            *shaping,
            '--log-level',
            'WARNING',
        ],
        r'listening on 127\.0\.0\.1:(\d+)',
        'link_emulator',
        timeout_s,
    )
    return process, int(port)


class HeadlessServer:
    """``edge_offload_server`` in its own process; its log is drained into a ring."""

    def __init__(self, keys: KeySet, models: list[str], *arguments: str) -> None:
        self.process, endpoint = start_headless_server(keys, models, *arguments)
        self.port = int(endpoint.rsplit(':', 1)[1])
        self.log: collections.deque[str] = collections.deque(maxlen=50)
        threading.Thread(target=self._read, name='server-log', daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.log.append(line.rstrip())

    def stop(self) -> None:
        """Terminate the server (kill it after 10 s)."""
        self.process.terminate()
        try:
            self.process.wait(timeout=10.0)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
