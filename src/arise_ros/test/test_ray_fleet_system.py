# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The ARISE fleet on Ray as a user runs it: ``arise_fleet``, robots, a server killed.

``arise_fleet`` starts an embedded Ray instance, two ARISE servers as Ray actors and the
load-balancing front door. Three emulated robots know only the front door. One server's
process is SIGKILLed under load: its robots run locally, ask the front door and join the
other server, and Ray starts the killed server again on its endpoint. Ray listens on
loopback only, and Ctrl-C stops everything, Ray's own processes included.
"""

import json
import signal
import subprocess
import sys
import time

import psutil
import yaml

from arise_ros.latency_profile import BatchLatencyProfile, save_profile
from edge_offload.keys import ensure_keys
from edge_offload_testing import free_tcp_port

LOOPBACK = {'127.0.0.1', '::1', '::ffff:127.0.0.1'}
ROBOTS = ('robot_0', 'robot_1', 'robot_2')


def _listeners(root: psutil.Process) -> dict[int, set[str]]:
    """Return the listening TCP ports (port -> addresses) of ``root`` and its descendants."""
    ports: dict[int, set[str]] = {}
    for process in [root, *root.children(recursive=True)]:
        try:
            connections = process.net_connections(kind='inet')
        except psutil.Error:
            continue  # gone meanwhile
        for connection in connections:
            if connection.status == psutil.CONN_LISTEN:
                ports.setdefault(connection.laddr.port, set()).add(connection.laddr.ip)
    return ports


def _owner(root: psutil.Process, port: int) -> int | None:
    for process in root.children(recursive=True):
        try:
            if any(
                c.status == psutil.CONN_LISTEN and c.laddr.port == port
                for c in process.net_connections(kind='inet')
            ):
                return process.pid
        except psutil.Error:
            continue
    return None


def _wait(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def _free_port_block(size: int) -> int:
    for _ in range(50):
        port = free_tcp_port()
        if port + size < 65535 and all(
            not any(c.laddr.port == port + i for c in psutil.net_connections(kind='tcp'))
            for i in range(size)
        ):
            return port
    raise RuntimeError(f'no {size} free consecutive ports')


def test_ray_supervised_servers_lose_no_robot_when_one_is_killed(tmp_path):
    keys = tmp_path / 'keys'
    files = ensure_keys(keys, list(ROBOTS))
    profile = tmp_path / 'profile.yaml'
    # A fixed profile, slower than this CPU, as a GPU server's measured one is loaded.
    save_profile(
        BatchLatencyProfile('accumo_depth', {n: 0.04 + 0.03 * n for n in range(1, 5)}, 'test'),
        profile,
    )
    params = tmp_path / 'fleet.yaml'
    params.write_text(
        yaml.safe_dump(
            {
                'edge_server': {
                    'ros__parameters': {
                        'models': ['accumo_depth'],
                        'modes': ['arise'],
                        'arise': {'max_batch': 4, 'profile_file': str(profile)},
                    }
                }
            }
        )
    )
    port = _free_port_block(3)
    fleet = subprocess.Popen(
        [
            *(sys.executable, '-m', 'arise_ros.ray_fleet', '--params-file', str(params)),
            *('--servers', '2', '--port', str(port), '--keys-dir', str(keys)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    robots: dict[str, subprocess.Popen] = {}
    try:
        line = ''
        deadline = time.monotonic() + 120.0
        while 'front door' not in line and time.monotonic() < deadline:
            line = fleet.stdout.readline()
            assert line or fleet.poll() is None, 'arise_fleet ended before it was ready'
        assert 'server(s) ready' in line, line
        manager = psutil.Process(fleet.pid)
        listeners = _listeners(manager)
        assert {port, port + 1, port + 2} <= set(listeners), listeners
        exposed = {p: ips for p, ips in listeners.items() if not ips <= LOOPBACK}
        assert not exposed, f'listening beyond loopback: {exposed}'

        for name in ROBOTS:
            robots[name] = subprocess.Popen(
                [
                    *(sys.executable, '-m', 'arise_ros.emulated_robot', '--name', name),
                    *('--fleet-endpoint', f'tcp://127.0.0.1:{port}'),
                    *('--secret-key-file', files[f'{name}_secret']),
                    *('--server-public-key-file', files['server_public']),
                    *('--fps', '20', '--sla', '0.04', '--rate', '0.004', '--duration-s', '12'),
                    *('--summary', str(tmp_path / f'{name}.json')),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        time.sleep(5.0)  # the robots are placed, admitted and offload
        killed = _owner(manager, port + 1)
        assert killed is not None
        killed_at = time.monotonic()
        psutil.Process(killed).kill()
        # Ray starts the server again, in a new process, on the same endpoint.
        assert _wait(lambda: _owner(manager, port + 1) not in (None, killed), 30.0)
        print(f'killed server listening again after {time.monotonic() - killed_at:.2f} s')  # noqa: T201
        outputs = {name: robot.communicate(timeout=120)[0] for name, robot in robots.items()}
    finally:
        for robot in robots.values():
            robot.kill()
        descendants = psutil.Process(fleet.pid).children(recursive=True)
        fleet.send_signal(signal.SIGINT)
        try:
            tail = fleet.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            fleet.kill()
            tail = fleet.communicate()[0]
    assert fleet.returncode == 0, tail[-3000:]
    _, alive = psutil.wait_procs(descendants, timeout=10)
    assert not alive, f"Ray's processes left running: {[p.pid for p in alive]}"

    moved = 0
    for name in ROBOTS:
        summary = json.loads((tmp_path / f'{name}.json').read_text())
        statuses = [status for _, status in summary['statuses']]
        assert 'admitted' in statuses, f'{name}: {summary}\n{outputs[name]}'
        assert summary['server_results'] > 0, summary
        # a result every frame: tracked from the server's or the local model's
        assert summary['longest_gap_s'] < 2.0, summary
        lost = 'connection to the edge server lost'
        assert all(lost in failure for failure in summary['failures']), summary
        if 'lost' in statuses:
            moved += 1
            lost_at = next(t for t, status in summary['statuses'] if status == 'lost')
            back_at = [t for t, status in summary['statuses'] if status == 'admitted'][-1]
            print(  # noqa: T201 - the figures of the run
                f'{name}: admitted elsewhere {back_at - lost_at:.3f} s after the loss; '
                f'longest gap {summary["longest_gap_s"]} s'
            )
            assert 'admitted' in statuses[statuses.index('lost') :], summary
            assert len(summary['results_by_endpoint']) == 2, summary
    # the front door spreads three robots over two servers: the killed one held some
    assert moved >= 1
