# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The ``arise_fleet`` node: parameters, refusals of bad settings, its lifecycle on Ray.

A bad setting is refused before Ray starts. One test runs a server on an embedded Ray
through configure, activate, deactivate and cleanup, twice in one process. The node under
``ros2 launch`` (robots, Ctrl-C) is tested in ``system_tests/test/test_ros2_launch_system.py``.
"""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from lifecycle_msgs.msg import State
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.node import Node
from rclpy.parameter import Parameter

from arise_ros import fleet_node
from arise_ros.fleet_node import PARAMETERS, RAY_STOP_BUDGET_S, AriseFleetNode
from arise_ros.latency_profile import BatchLatencyProfile, save_profile
from arise_ros.ray_fleet import FleetConfig, FleetManager
from edge_offload.keys import ensure_keys
from edge_offload.ros_node_main import WATCHDOG_S
from edge_offload_testing import free_tcp_port, spin_until

_SERVER = {
    'models': ['accumo_depth'],
    'modes': ['arise', 'probe'],
    'diagnostics_period_s': 0.5,
    'arise': {'max_batch': 4},
}


# A status the node publishes from the server's Ray actor.
_SERVER_STATUS = 'arise_fleet: arise_server_0: arise fleet'


def _params_file(tmp_path: Path, server: dict) -> Path:
    path = tmp_path / 'servers.yaml'
    path.write_text(yaml.safe_dump({'edge_server': {'ros__parameters': server}}))
    return path


def _node(ros_context, **values) -> AriseFleetNode:  # noqa: ANN001
    return AriseFleetNode(
        context=ros_context,
        parameter_overrides=[Parameter(name, value=value) for name, value in values.items()],
    )


def test_every_parameter_is_declared_with_a_description(ros_context):
    node = _node(ros_context)
    try:
        for spec in PARAMETERS:
            descriptor = node.describe_parameter(spec.name)
            assert descriptor.description, spec.name
        assert node.describe_parameter('autostart').read_only
        assert node.describe_parameter('servers').integer_range[0].from_value == 1
        assert node.describe_parameter('port').integer_range[0].to_value == 65534
        assert node.get_name() == 'arise_fleet'
    finally:
        node.destroy_node()


@pytest.mark.parametrize(
    ('case', 'expected'),
    [
        ('no parameter file', 'server_params_file is not set'),
        ('no arise mode', "must serve the 'arise' mode"),
        ('unknown server parameter', 'unknown edge server parameters'),
        ('no keys', 'server.key_secret'),
        ('port leaves no room', 'leaves no room'),
    ],
)
def test_configure_refuses_a_bad_setting_before_ray_starts(
    ros_context, tmp_path, monkeypatch, case, expected
):
    keys = tmp_path / 'keys'
    ensure_keys(keys, ['robot_0'])
    server = dict(_SERVER)
    values = {'keys_dir': str(keys), 'servers': 2}
    if case == 'no arise mode':
        server['modes'] = ['probe']
    elif case == 'unknown server parameter':
        server['max_robots'] = 3
    elif case == 'no keys':
        values['keys_dir'] = str(tmp_path / 'empty')
    elif case == 'port leaves no room':
        values['port'] = 65534
    if case != 'no parameter file':
        values['server_params_file'] = str(_params_file(tmp_path, server))
    errors: list[str] = []
    node = _node(ros_context, **values)
    monkeypatch.setattr(node, 'get_logger', lambda: _Recorder(errors))
    children = {process.pid for process in psutil.Process().children(recursive=True)}
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        assert node._state_machine.current_state[0] == State.PRIMARY_STATE_UNCONFIGURED
        assert node._manager is None
        assert len(errors) == 1, errors
        assert errors[0].startswith('configure failed: '), errors
        assert expected in errors[0], errors
        started = {process.pid for process in psutil.Process().children(recursive=True)}
        assert started <= children, 'a process was started for a refused configuration'
    finally:
        node.destroy_node()


class _Recorder:
    def __init__(self, errors: list[str]) -> None:
        self._errors = errors

    def error(self, text: str) -> None:
        self._errors.append(text)

    def info(self, text: str) -> None:
        pass


def test_the_ray_stop_fits_in_the_shutdown_watchdog():
    # From the stop signal: the spin loop sees it (0.1 s), the diagnostics thread ends
    # (at most one round of replica_diagnostics), then Ray's bounded stop; rclpy's own
    # shutdown needs the rest before run_lifecycle_node's watchdog cuts the clean-up.
    refresher = fleet_node._REPLICA_TIMEOUT_S + 0.1
    assert 0.1 + refresher + RAY_STOP_BUDGET_S + 0.3 <= WATCHDOG_S


def test_a_manager_that_never_started_stops_and_answers_nothing(tmp_path):
    keys = tmp_path / 'keys'
    files = ensure_keys(keys, [])
    config = FleetConfig(
        server_parameters={'models': ['accumo_depth'], 'modes': ['arise']},
        secret_key_file=files['server_secret'],
        authorized_clients_dir=files['authorized'],
    )
    manager = FleetManager(config, keys)
    assert manager.replica_diagnostics(0.1) == {}
    assert manager.front_door_diagnostics() == []
    manager.stop(timeout_s=0.5)
    manager.stop()


def test_the_node_publishes_the_servers_statuses_and_stops_ray_at_cleanup_twice(
    ros_context, tmp_path
):
    # One server on an embedded Ray: activate publishes its statuses (fetched through Ray),
    # deactivate stops publishing, cleanup stops Ray and leaves none of its processes, and
    # the node configures again in the same process.
    keys = tmp_path / 'keys'
    ensure_keys(keys, ['robot_0'])
    profile = tmp_path / 'profile.yaml'
    save_profile(BatchLatencyProfile('accumo_depth', {1: 0.05, 2: 0.08}, 'test'), profile)
    server = dict(_SERVER, arise={'max_batch': 2, 'profile_file': str(profile)})
    node = _node(
        ros_context,
        server_params_file=str(_params_file(tmp_path, server)),
        keys_dir=str(keys),
        servers=1,
        port=free_tcp_port(),
        diagnostics_period_s=0.2,
    )
    probe = Node('probe', context=ros_context)
    names: list[set[str]] = []
    probe.create_subscription(
        DiagnosticArray,
        '/diagnostics',
        lambda message: names.append({status.name for status in message.status}),
        10,
    )
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    executor.add_node(probe)
    try:
        for _ in range(2):
            names.clear()
            assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
            ray = {process.pid for process in psutil.Process().children(recursive=True)}
            assert ray, 'no Ray process after configure'
            assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
            assert spin_until(executor, lambda: any(_SERVER_STATUS in n for n in names), 60.0)
            assert {'arise_fleet: ray fleet', 'arise_fleet: fleet'} <= names[-1]
            assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
            spin_until(executor, lambda: False, 0.5)
            names.clear()
            spin_until(executor, lambda: False, 0.6)
            assert names == [], 'published while inactive'
            started = time.monotonic()
            assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
            assert time.monotonic() - started < RAY_STOP_BUDGET_S + 0.5
            _, alive = psutil.wait_procs(
                [psutil.Process(pid) for pid in ray if psutil.pid_exists(pid)], timeout=5.0
            )
            assert not alive, f"Ray's processes left running: {alive}"
    finally:
        node.release()
        executor.shutdown()
        probe.destroy_node()
        node.destroy_node()
