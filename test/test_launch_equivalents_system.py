# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The launch files' graphs, started as processes: what the launch tests check, everywhere.

``launch`` and ``launch_testing`` are not installable from PyPI, so the launch tests
(``src/bringup/test/test_*_launch.py``) run only on a ROS 2 install. These tests start the
nodes that each launch file declares (read from the file itself, so a node added there is
started here too) as separate processes, with the launch file's parameter file and the
overrides its default arguments give, lifecycle nodes configured and activated at start-up
as the launch file's event handlers do, and check the same behaviour with the same
:class:`bringup.graph_checks.GraphWatcher`.
"""

from __future__ import annotations

import socket
import sys
from importlib.metadata import entry_points
from pathlib import Path

from lifecycle_msgs.srv import GetState
from rclpy.node import Node

from bringup.graph_checks import GraphWatcher, launch_file_nodes, loopback_params_file
from edge_offload.testing import free_tcp_port, spin_until

ROOT = Path(__file__).resolve().parents[1]
LIFECYCLE = {'offload_bridge', 'edge_server'}


def _module(executable: str) -> str:
    (entry,) = entry_points(group='console_scripts', name=executable)
    return entry.value.split(':')[0]


def _command(executable: str, name: str, params_file: Path, **overrides: object) -> list[str]:
    command = [sys.executable, '-m', _module(executable), '--ros-args']
    command += ['--params-file', str(params_file), '-r', f'__node:={name}']
    if name in LIFECYCLE:
        overrides['autostart'] = True  # the launch file's configure-then-activate
    for key, value in overrides.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        command += ['-p', f'{key}:={text}']
    return command


def test_kapao_tracking_graph_detects_tracks_and_holds_still(
    ros_context, ros_executor, ros_processes, tmp_path
):
    declared = launch_file_nodes(ROOT / 'launch' / 'kapao_tracking.launch.py')
    names = {name for _, _, name in declared}
    assert names == {
        'sensor_source', 'offload_bridge', 'people_detection', 'tracking_monitor',
        'accumo_scheduler', 'people_tracker', 'follower', 'bag_recorder', 'edge_server',
        'rviz2',
    }  # fmt: skip
    params = loopback_params_file(
        ROOT / 'config' / 'kapao_tracking.yaml', tmp_path, free_tcp_port()
    )
    bag = tmp_path / 'run'
    # The launch file's arguments: start_edge_server:=true source:=synthetic
    # record_bag:=<bag>; the rest at their defaults (follow, depth_source accumo, mode nnto).
    overrides = {
        'sensor_source': {'source': 'synthetic'},
        'bag_recorder': {'output_dir': bag, 'metrics_file': f'{bag}.metrics.json'},
    }
    processes = {}
    for _, executable, name in declared:
        if name == 'rviz2':
            continue  # a GUI, not part of the behaviour
        command = _command(executable, name, params, **overrides.get(name, {}))
        processes[name] = ros_processes.start(command, name=name)

    node = Node('kapao_tracking_graph_test', context=ros_context)
    watcher = GraphWatcher(node)
    ros_executor.add_node(node)
    exited = lambda: [n for n, p in processes.items() if p.poll() is not None]  # noqa: E731
    spin_until(ros_executor, lambda: not watcher.missing() or exited(), timeout_s=240.0)
    ok = not watcher.missing()
    logs = '\n'.join(f'--- {n}\n{ros_processes.output(p)[-1500:]}' for n, p in processes.items())
    assert ok, f'missing: {watcher.missing()}; exited: {exited()}\n{logs}'
    # Synthetic frames hold nobody to follow: the robot must not move.
    assert watcher.robot_stayed_still()
    assert watcher.states[-1] in ('no_target', 'detector_down', 'target_stale')

    exit_codes = ros_processes.stop_all()
    assert exit_codes == dict.fromkeys(processes, 0), f'{exit_codes}\n{logs}'
    assert (bag / 'metadata.yaml').is_file()
    assert (tmp_path / 'run.metrics.json').is_file()


def test_edge_server_launch_serves_authenticated_robots(
    ros_context, ros_executor, ros_processes, tmp_path
):
    declared = launch_file_nodes(ROOT / 'launch' / 'edge_server.launch.py')
    assert [name for _, _, name in declared] == ['edge_server']
    port = free_tcp_port()
    params = loopback_params_file(ROOT / 'config' / 'edge_server.yaml', tmp_path, port)
    ((_, executable, name),) = declared
    server = ros_processes.start(
        _command(executable, name, params, endpoint=f'tcp://127.0.0.1:{port}'), name=name
    )
    node = Node('edge_server_launch_test', context=ros_context)
    ros_executor.add_node(node)
    client = node.create_client(GetState, '/edge_server/get_state')

    def active() -> bool:
        if not client.service_is_ready():
            return False
        future = client.call_async(GetState.Request())
        spin_until(ros_executor, future.done, timeout_s=5.0)
        return future.done() and future.result().current_state.label == 'active'

    assert spin_until(ros_executor, active, timeout_s=120.0), ros_processes.output(server)
    with socket.create_connection(('127.0.0.1', port), timeout=5.0):
        pass  # bound and listening
    assert ros_processes.stop_all() == {name: 0}, ros_processes.output(server)
