# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Connections that never log in cannot lock real robots out of the edge server.

3,000 idle TCP connections (no ZMTP greeting, no CURVE handshake) used to hold one file
descriptor each for ZeroMQ's default 30 s handshake limit and exhausted a 256-descriptor
limit. The server now raises its soft open-file limit to the hard one and closes a
connection that has not finished the handshake after ``handshake_timeout_s``.
"""

from __future__ import annotations

import os
import resource
import socket
import time

import torch

from edge_offload.client import ClientConfig, EdgeClient
from edge_offload_testing import make_test_keys, start_headless_server

IDLE_CONNECTIONS = 3000


def _fd_count(pid: int) -> int:
    return len(os.listdir(f'/proc/{pid}/fd'))


def test_idle_prelogin_connections_do_not_lock_out_a_robot(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = IDLE_CONNECTIONS + 512
    assert hard == resource.RLIM_INFINITY or hard >= needed, f'hard fd limit {hard} too low'
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, needed), hard))
    keys = make_test_keys(tmp_path / 'keys')
    server, endpoint = start_headless_server(
        keys, ['tiny_cnn'], '--handshake-timeout-s', '1.0', open_files_soft_limit=256
    )
    idle: list[socket.socket] = []
    try:
        port = int(endpoint.rsplit(':', 1)[1])
        baseline_fds = _fd_count(server.pid)
        for _ in range(IDLE_CONNECTIONS):
            idle.append(socket.create_connection(('127.0.0.1', port), timeout=10.0))
        started = time.monotonic()
        config = ClientConfig(
            endpoint=endpoint,
            secret_key_file=str(keys.robot_secret),
            server_public_key_file=str(keys.server_public),
        )
        with EdgeClient(config) as robot:
            assert robot.wait_connected(30.0), robot.state_reason
            connected_after_s = time.monotonic() - started
            reply = robot.call(
                'nnto', 'infer', {'model': 'tiny_cnn'}, {'image': torch.rand(1, 3, 64, 64)}
            )
            assert set(reply.tensors) == {'features'}
            # The idle connections are closed by the server, so its descriptors come back.
            deadline = time.monotonic() + 15.0
            while _fd_count(server.pid) > baseline_fds + 32 and time.monotonic() < deadline:
                time.sleep(0.2)
            fds_after = _fd_count(server.pid)
        print(  # noqa: T201 - the figures for the closing note
            f'{IDLE_CONNECTIONS} idle connections: robot connected after '
            f'{connected_after_s:.2f} s; '
            f'server fds {baseline_fds} before, {fds_after} after the handshake timeout'
        )
        assert fds_after <= baseline_fds + 32
        assert server.poll() is None
    finally:
        for connection in idle:
            connection.close()
        server.terminate()
        server.wait(timeout=10.0)
