# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""One rule for launch files and the runner: arguments not given leave the parameter file alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from edge_offload.parameter_files import (
    ParameterFileError,
    fully_qualified_name,
    load_parameter_file,
    parse_flag,
    write_parameter_file,
)
from people_following.graph import NODE_NAMES, graph_parameters, plan_graph

CONFIG = Path(__file__).resolve().parents[2] / 'bringup' / 'config'


@pytest.fixture
def sections() -> dict:
    return load_parameter_file(CONFIG / 'kapao_tracking.yaml')


def test_arguments_not_given_leave_every_value_of_the_file(sections):
    parameters = graph_parameters(sections, {})
    assert set(parameters) == set(NODE_NAMES)
    for node in NODE_NAMES:
        assert parameters[node] == sections[node], node


def test_an_edited_file_takes_effect_when_no_argument_is_given(tmp_path):
    document = yaml.safe_load((CONFIG / 'kapao_tracking.yaml').read_text())
    document['offload_bridge']['ros__parameters']['server_endpoint'] = 'tcp://edge:6000'
    document['sensor_source']['ros__parameters']['uri'] = 'asset:media/opencv/vtest.avi'
    edited = tmp_path / 'edited.yaml'
    edited.write_text(yaml.safe_dump(document))
    parameters = graph_parameters(load_parameter_file(edited), {})
    assert parameters['offload_bridge']['server_endpoint'] == 'tcp://edge:6000'
    assert parameters['sensor_source']['uri'] == 'asset:media/opencv/vtest.avi'


def test_given_arguments_override_the_parameters_they_name(sections):
    parameters = graph_parameters(
        sections,
        {
            'source': 'video',
            'uri': '/data/walk.mp4',
            'mode': 'lopinfer',
            'server_endpoint': 'tcp://10.0.0.2:5555',
            'record_path': '/data/out.mp4',
            'depth_source': 'rgbd',
            'record_bag': '/data/run1',
            'use_sim_time': 'true',
            'autostart': 'True',
        },
    )
    assert parameters['sensor_source']['source'] == 'video'
    assert parameters['sensor_source']['uri'] == '/data/walk.mp4'
    assert parameters['offload_bridge']['mode'] == 'lopinfer'
    assert parameters['offload_bridge']['server_endpoint'] == 'tcp://10.0.0.2:5555'
    assert parameters['edge_server']['endpoint'] == 'tcp://10.0.0.2:5555'
    assert parameters['tracking_monitor']['record_path'] == '/data/out.mp4'
    assert parameters['people_tracker']['depth_source'] == 'rgbd'
    assert parameters['bag_recorder']['output_dir'] == '/data/run1'
    assert parameters['bag_recorder']['metrics_file'] == '/data/run1.metrics.json'
    assert all(values['use_sim_time'] is True for values in parameters.values())
    assert parameters['offload_bridge']['autostart'] is True
    assert parameters['edge_server']['autostart'] is True
    assert 'autostart' not in parameters['sensor_source']
    # Everything no argument names is the file's.
    assert parameters['follower'] == {**sections['follower'], 'use_sim_time': True}


def test_a_given_model_is_detected_built_and_served(sections):
    parameters = graph_parameters(sections, {'model': 'kapao_s'})
    assert parameters['people_detection']['model'] == 'kapao_s'
    for node in ('offload_bridge', 'edge_server'):
        models = parameters[node]['models']
        assert models == ['kapao_s', *sections[node]['models']], f'{node}: {models}'
    # Naming a model the file already lists does not list it twice.
    again = graph_parameters(sections, {'model': 'blazepose_people'})
    assert again['offload_bridge']['models'] == sections['offload_bridge']['models']


def test_wildcard_and_namespaced_sections_apply(tmp_path):
    path = tmp_path / 'params.yaml'
    path.write_text(
        yaml.safe_dump(
            {
                '/**': {'ros__parameters': {'use_sim_time': True}},
                '/robot1/follower': {'ros__parameters': {'max_linear': 0.3}},
            }
        )
    )
    parameters = graph_parameters(load_parameter_file(path), {}, ('follower',))
    assert parameters == {'follower': {'use_sim_time': True, 'max_linear': 0.3}}


def test_written_file_is_keyed_by_fully_qualified_names(tmp_path, sections):
    parameters = graph_parameters(sections, {}, ('follower', 'edge_server'))
    path = write_parameter_file(parameters, tmp_path / 'out.yaml', namespace='/robot1/')
    document = yaml.safe_load(path.read_text())
    assert list(document) == ['/robot1/follower', '/robot1/edge_server']
    assert document['/robot1/follower']['ros__parameters'] == sections['follower']
    assert fully_qualified_name('follower') == '/follower'
    assert fully_qualified_name('follower', 'a/b') == '/a/b/follower'


@pytest.mark.parametrize(
    ('content', 'message'),
    [
        (None, 'No such file'),
        ('a: [1, 2', 'not valid YAML'),
        ('- 1\n- 2\n', 'no node sections'),
        ('follower:\n  max_linear: 1.0\n', "section 'follower' has no ros__parameters"),
    ],
)
def test_bad_parameter_files_are_named_in_the_error(tmp_path, content, message):
    path = tmp_path / 'params.yaml'
    if content is not None:
        path.write_text(content)
    with pytest.raises(ParameterFileError, match=message) as raised:
        load_parameter_file(path)
    assert str(path) in str(raised.value)


def test_flags_parse_like_launch_conditions():
    assert parse_flag('', 'x') is None
    assert parse_flag('True', 'x') is True
    assert parse_flag('1', 'x') is True
    assert parse_flag('false', 'x') is False
    assert parse_flag('0', 'x') is False
    with pytest.raises(ValueError, match='argument x is'):
        parse_flag('yes', 'x')


def test_the_plan_starts_the_launch_files_default_graph():
    plan = plan_graph({})
    assert [node.name for node in plan.nodes] == [
        'offload_bridge',
        'people_detection',
        'tracking_monitor',
        'people_tracker',
        'accumo_scheduler',
        'follower',
        'sensor_source',
    ]
    assert plan.remappings == ()
    assert (plan.namespace, plan.log_level, plan.rviz) == ('', 'info', False)
    lean = plan_graph({'follow': 'false', 'start_edge_server': 'true', 'record_bag': 'run_bag'})
    assert [node.name for node in lean.nodes] == [
        'edge_server',
        'offload_bridge',
        'people_detection',
        'tracking_monitor',
        'bag_recorder',
        'sensor_source',
    ]
    rgbd = plan_graph({'depth_source': 'rgbd', 'odometry_topic': '/odom'})
    assert 'accumo_scheduler' not in {node.name for node in rgbd.nodes}
    assert rgbd.remappings == (('odometry', '/odom'),)


@pytest.mark.parametrize(
    ('given', 'message'),
    [
        ({'sauce': 'video'}, r"unknown argument\(s\) \['sauce'\]"),
        ({'source': 'webcam'}, "argument source is 'webcam'"),
        ({'follow': 'yes'}, 'argument follow is'),
        ({'params_file': '/nonexistent/params.yaml'}, 'No such file'),
    ],
)
def test_bad_arguments_are_named(given, message):
    with pytest.raises(ValueError, match=message):
        plan_graph(given)


def test_the_runner_follows_the_same_rule(sections):
    from people_following import graph_runner

    parser = graph_runner.build_parser()
    untouched = graph_runner.runner_plan(parser.parse_args([]), keys={})
    for node in untouched.nodes:
        # autostart:=true is the launch file's default too: lifecycle nodes start serving.
        expected = {**sections[node.name], **({'autostart': True} if node.lifecycle else {})}
        assert untouched.parameters[node.name] == expected, node.name
    given = graph_runner.runner_plan(
        parser.parse_args(
            ['--server-endpoint', 'tcp://edge:6000', 'uri:=asset:x.avi', '--start-edge-server']
        ),
        keys={},
    )
    assert given.parameters['offload_bridge']['server_endpoint'] == 'tcp://edge:6000'
    assert given.parameters['edge_server']['endpoint'] == 'tcp://edge:6000'
    assert given.parameters['sensor_source']['uri'] == 'asset:x.avi'
    assert given.parameters['follower'] == sections['follower']
    # The old option name still works.
    old = graph_runner.runner_plan(parser.parse_args(['--record', 'out.mp4']), keys={})
    assert old.parameters['tracking_monitor']['record_path'] == 'out.mp4'
    with pytest.raises(ValueError, match='not NAME:=VALUE'):
        graph_runner.runner_plan(parser.parse_args(['source=video']), keys={})
