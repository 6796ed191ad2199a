# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``kapao_tracking.launch.py`` and the ``kapao_tracking`` runner run one graph definition.

The launch file is evaluated with the real ``launch`` tooling (its OpaqueFunction run in a
LaunchContext, the parameter file it would write captured); the runner's plan comes from
its own command line. For the same arguments both start the same executables of the same
packages with the same parameters and remappings.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from edge_offload.parameter_files import write_parameter_file
from people_following import graph_runner
from people_following.graph import ARGUMENTS

LAUNCH_FILE = Path(__file__).resolve().parents[3] / 'src' / 'bringup' / 'launch'
LAUNCH_FILE /= 'kapao_tracking.launch.py'
CASES = {
    'defaults': {},
    'detection only, local server, bag': {
        'follow': 'false',
        'start_edge_server': 'true',
        'record_bag': 'run_bag',
        'server_endpoint': 'tcp://127.0.0.1:6001',
    },
    'rgbd with robot odometry, every frame': {
        'depth_source': 'rgbd',
        'odometry_topic': '/odom',
        'cmd_vel_topic': '/robot/cmd_vel',
        'rate_mode': 'every_frame',
        'use_sim_time': 'true',
        'model': 'kapao_s',
    },
}


def _launch_module():
    pytest.importorskip('launch')
    pytest.importorskip('launch_ros')
    spec = importlib.util.spec_from_file_location('kapao_tracking_launch', LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _launched(given: dict[str, str], tmp_path: Path, monkeypatch) -> tuple[list, dict]:
    """Return ((package, executable, remappings) per node, parameters) the launch file makes."""
    from launch import LaunchContext
    from launch.actions import DeclareLaunchArgument
    from launch_ros.actions import Node

    module = _launch_module()
    written: dict[str, dict] = {}

    def write(parameters: dict, file_name: str, namespace: str) -> Path:
        written.update(parameters)
        return write_parameter_file(parameters, tmp_path / file_name, namespace)

    monkeypatch.setattr(module, 'write_launch_parameters', write)
    context = LaunchContext()
    for entity in module.generate_launch_description().entities:
        if isinstance(entity, DeclareLaunchArgument):
            default = entity.default_value[0].perform(context) if entity.default_value else ''
            context.launch_configurations[entity.name] = default
    context.launch_configurations.update(given)
    nodes = []
    for action in module._graph(context):  # noqa: SLF001 - the OpaqueFunction's body
        if isinstance(action, Node):
            # What ros2 launch does before it starts the process.
            action._perform_substitutions(context)  # noqa: SLF001
            remappings = sorted(action.expanded_remapping_rules or [])
            nodes.append((action.node_package, action.node_executable, remappings))
    return nodes, written


def test_the_launch_file_declares_exactly_the_graphs_arguments():
    from launch.actions import DeclareLaunchArgument

    module = _launch_module()
    declared = {
        entity.name: entity.description
        for entity in module.generate_launch_description().entities
        if isinstance(entity, DeclareLaunchArgument)
    }
    assert declared == {argument.name: argument.description for argument in ARGUMENTS}
    options = {action.dest for action in graph_runner.build_parser()._actions}  # noqa: SLF001
    assert set(declared) <= options


@pytest.mark.parametrize('given', CASES.values(), ids=CASES.keys())
def test_launch_file_and_runner_start_the_same_nodes_with_the_same_parameters(
    given, tmp_path, monkeypatch
):
    launched, launched_parameters = _launched(given, tmp_path, monkeypatch)
    argv = [f'{name}:={value}' for name, value in given.items()]
    plan = graph_runner.runner_plan(graph_runner.build_parser().parse_args(argv), keys={})
    remappings = sorted(plan.remappings)
    assert sorted(launched) == sorted((node.package, node.name, remappings) for node in plan.nodes)
    assert launched_parameters == plan.parameters
