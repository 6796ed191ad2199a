# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Parameter files and the RViz view agree with the nodes they configure.

Parameter files must name exactly the parameters the nodes declare, with values the nodes
accept. The launch files themselves run under the real launch tooling in
``test_launch_files.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from edge_offload import edge_server_node, offload_bridge_node
from edge_offload.client import ClientConfig
from edge_offload.server import NODE_ONLY_PARAMETERS, ServerConfig, load_params_file

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / 'src' / 'bringup'


def _declared(specs) -> set[str]:
    return {spec.name for spec in specs} - {'autostart'}


@pytest.mark.parametrize('name', ['edge_server.yaml', 'arise_fleet.yaml'])
def test_edge_server_yaml_matches_the_node_and_validates(name):
    params = load_params_file(PACKAGE / 'config' / name, 'edge_server')
    mode_options = edge_server_node.server_mode_option_parameters()
    assert {'arise.max_batch', 'arise.policy'} <= _declared(mode_options)
    assert set(params) == _declared(edge_server_node.PARAMETERS) | _declared(mode_options)
    for spec in mode_options:
        assert type(params[spec.name]) is type(spec.default), spec.name
    values = {key: value for key, value in params.items() if key not in NODE_ONLY_PARAMETERS}
    config = ServerConfig.from_mapping(values)
    config.validate()
    # Only a served mode's options reach it.
    assert set(config.mode_options) <= set(config.modes)


def _flatten(params: dict, prefix: str = '') -> dict:
    flat = {}
    for key, value in params.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f'{prefix}{key}.'))
        else:
            flat[f'{prefix}{key}'] = value
    return flat


def test_offload_bridge_yaml_matches_the_node_and_validates():
    document = yaml.safe_load((PACKAGE / 'config' / 'offload_bridge.yaml').read_text())
    params = _flatten(document['offload_bridge']['ros__parameters'])
    mode_options = offload_bridge_node.mode_option_parameters()
    assert {'lopinfer.device_factor', 'layer_split.plan_dir'} <= _declared(mode_options)
    assert set(params) == _declared(offload_bridge_node.PARAMETERS) | _declared(mode_options)
    for spec in mode_options:
        assert type(params[spec.name]) is type(spec.default), spec.name
    ClientConfig(
        endpoint=params['server_endpoint'],
        security=params['security'],
        allow_plaintext=params['allow_plaintext'],
        max_message_bytes=params['max_message_bytes'],
    ).validate()


def test_kapao_tracking_yaml_names_exactly_the_parameters_of_each_node():
    from accumo_ros import scheduler_node
    from people_following import (
        bag_recorder_node,
        follower_node,
        people_detection_node,
        people_tracker_node,
        sensor_source_node,
        tracking_monitor_node,
    )

    document = yaml.safe_load((PACKAGE / 'config' / 'kapao_tracking.yaml').read_text())
    nodes = {
        'sensor_source': sensor_source_node.PARAMETERS,
        'offload_bridge': offload_bridge_node.PARAMETERS,
        'people_detection': people_detection_node.PARAMETERS,
        'tracking_monitor': tracking_monitor_node.PARAMETERS,
        'edge_server': edge_server_node.PARAMETERS,
        'accumo_scheduler': scheduler_node.PARAMETERS,
        'people_tracker': people_tracker_node.PARAMETERS,
        'follower': follower_node.PARAMETERS,
        'bag_recorder': bag_recorder_node.PARAMETERS,
    }
    assert set(document) == set(nodes)
    for name, specs in nodes.items():
        params = document[name]['ros__parameters']
        assert set(params) == _declared(specs), name
        defaults = {spec.name: spec.default for spec in specs}
        for key, value in params.items():
            # The file's values have the declared types (rclpy refuses 10 for a double).
            assert type(value) is type(defaults[key]) or (
                isinstance(defaults[key], list) and isinstance(value, list)
            ), f'{name}.{key}: {value!r}'
    server = {
        key: value
        for key, value in document['edge_server']['ros__parameters'].items()
        if key not in NODE_ONLY_PARAMETERS
    }
    ServerConfig.from_mapping(server).validate()
    # The bridge preloads the model the detection node asks for (local fallback).
    model = document['people_detection']['ros__parameters']['model']
    assert model in document['offload_bridge']['ros__parameters']['models']
    assert model in document['edge_server']['ros__parameters']['models']
    # ... and the scheduler's models, offloaded and run locally on failure.
    accumo_models = {'accumo_depth', 'accumo_odometry', 'accumo_depth_odometry'}
    assert accumo_models <= set(document['offload_bridge']['ros__parameters']['models'])
    assert accumo_models <= set(document['edge_server']['ros__parameters']['models'])
    # The recorder's default topics are the documented run topics.
    topics = document['bag_recorder']['ros__parameters']['topics']
    assert topics == [f'{name.lstrip("/")}:{kind}' for name, kind in bag_recorder_node.RUN_TOPICS]
    # The graph's shared settings agree between the nodes that use them.
    tracker = document['people_tracker']['ros__parameters']
    scheduler = document['accumo_scheduler']['ros__parameters']
    assert tracker['odom_frame'] == scheduler['odom_frame']
    assert tracker['base_frame'] == scheduler['base_frame']


def test_accumo_scheduler_yaml_names_exactly_the_parameters_of_the_node():
    from accumo_ros import scheduler_node

    document = yaml.safe_load((PACKAGE / 'config' / 'accumo_scheduler.yaml').read_text())
    params = document['accumo_scheduler']['ros__parameters']
    assert set(params) == _declared(scheduler_node.PARAMETERS)
    defaults = {spec.name: spec.default for spec in scheduler_node.PARAMETERS}
    for key, value in params.items():
        assert type(value) is type(defaults[key]), key
    # The fitted accuracy-model constants live in the code; the YAML must not shadow a
    # refit with stale numbers.
    for key in ('lite_drop_slope', 'lite_drop_offset'):
        assert params[key] == defaults[key], key


def _published_topics() -> set[str]:
    """Return the topic names of every ``create_publisher(Type, 'name', ...)`` in src/."""
    topics = set()
    for path in (ROOT / 'src').glob('*/*/*.py'):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, 'attr', '') == 'create_publisher'
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
            ):
                topics.add('/' + node.args[1].value.lstrip('/'))
    return topics


def test_rviz_config_shows_topics_the_nodes_publish_in_the_odometry_frame():
    document = yaml.safe_load((PACKAGE / 'rviz' / 'kapao_tracking.rviz').read_text())
    manager = document['Visualization Manager']
    assert manager['Global Options']['Fixed Frame'] == 'odom'
    topics = {display['Topic']['Value'] for display in manager['Displays'] if 'Topic' in display}
    expected = {
        '/people/annotated',
        '/people/markers',
        '/tracks/markers',
        '/target',
        '/odometry',
        '/depth',
        '/depth/points',
    }
    assert topics == expected
    assert topics <= _published_topics()


def test_the_edge_servers_default_file_serves_what_a_default_robot_asks_for():
    # edge_server.launch.py on the edge machine and kapao_tracking.launch.py on the robot,
    # each with its default file: every model the robot may offload is served, in its mode.
    robot = load_params_file(PACKAGE / 'config' / 'kapao_tracking.yaml', 'offload_bridge')
    detection = load_params_file(PACKAGE / 'config' / 'kapao_tracking.yaml', 'people_detection')
    edge = load_params_file(PACKAGE / 'config' / 'edge_server.yaml', 'edge_server')
    asked = {detection['model'], *robot['models']}
    missing = asked - set(edge['models'])
    assert not missing, f'edge_server.yaml lacks {sorted(missing)}; it serves {edge["models"]}'
    assert robot['mode'] in edge['modes'], f'robot mode {robot["mode"]}, edge {edge["modes"]}'
