# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""One rule for launch files and the runner: arguments not given leave the parameter file alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bringup.graph_parameters import (
    GRAPH_NODES,
    GraphArguments,
    ParameterFileError,
    fully_qualified_name,
    graph_parameters,
    load_parameter_file,
    parse_flag,
    write_parameter_file,
)

CONFIG = Path(__file__).resolve().parents[1] / 'config'


@pytest.fixture
def sections() -> dict:
    return load_parameter_file(CONFIG / 'kapao_tracking.yaml')


def test_arguments_not_given_leave_every_value_of_the_file(sections):
    parameters = graph_parameters(sections, GraphArguments())
    assert set(parameters) == set(GRAPH_NODES)
    for node in GRAPH_NODES:
        assert parameters[node] == sections[node], node


def test_an_edited_file_takes_effect_when_no_argument_is_given(tmp_path):
    document = yaml.safe_load((CONFIG / 'kapao_tracking.yaml').read_text())
    document['offload_bridge']['ros__parameters']['server_endpoint'] = 'tcp://edge:6000'
    document['sensor_source']['ros__parameters']['uri'] = 'asset:media/opencv/vtest.avi'
    edited = tmp_path / 'edited.yaml'
    edited.write_text(yaml.safe_dump(document))
    parameters = graph_parameters(load_parameter_file(edited), GraphArguments())
    assert parameters['offload_bridge']['server_endpoint'] == 'tcp://edge:6000'
    assert parameters['sensor_source']['uri'] == 'asset:media/opencv/vtest.avi'


def test_given_arguments_override_the_parameters_they_name(sections):
    parameters = graph_parameters(
        sections,
        GraphArguments(
            source='video',
            uri='/data/walk.mp4',
            mode='lopinfer',
            server_endpoint='tcp://10.0.0.2:5555',
            record_path='/data/out.mp4',
            depth_source='rgbd',
            record_bag='/data/run1',
            use_sim_time=True,
            autostart=True,
        ),
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
    parameters = graph_parameters(sections, GraphArguments(model='kapao_s'))
    assert parameters['people_detection']['model'] == 'kapao_s'
    for node in ('offload_bridge', 'edge_server'):
        models = parameters[node]['models']
        assert models == ['kapao_s', *sections[node]['models']], f'{node}: {models}'
    # Naming a model the file already lists does not list it twice.
    again = graph_parameters(sections, GraphArguments(model='blazepose_people'))
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
    parameters = graph_parameters(load_parameter_file(path), GraphArguments(), ('follower',))
    assert parameters == {'follower': {'use_sim_time': True, 'max_linear': 0.3}}


def test_written_file_is_keyed_by_fully_qualified_names(tmp_path, sections):
    parameters = graph_parameters(sections, GraphArguments(), ('follower', 'edge_server'))
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


def test_the_runner_follows_the_same_rule(sections):
    from bringup import graph_runner

    parser = graph_runner.build_parser()
    untouched = graph_runner._runner_parameters(parser.parse_args([]), sections, keys={})
    for node in GRAPH_NODES:
        assert untouched[node] == sections[node], node
    given = graph_runner._runner_parameters(
        parser.parse_args(['--server-endpoint', 'tcp://edge:6000', '--uri', 'asset:x.avi']),
        sections,
        keys={},
    )
    assert given['offload_bridge']['server_endpoint'] == 'tcp://edge:6000'
    assert given['edge_server']['endpoint'] == 'tcp://edge:6000'
    assert given['sensor_source']['uri'] == 'asset:x.avi'
    assert given['follower'] == sections['follower']
