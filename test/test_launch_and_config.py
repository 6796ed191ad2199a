# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Launch files and parameter files agree with the nodes they configure.

``launch`` is not installable here, so launch files are checked statically: every
argument has a description and every config file they name exists. Parameter files must
name exactly the parameters the nodes declare, with values the nodes accept.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from edge_offload import edge_server_node, offload_bridge_node
from edge_offload.client import ClientConfig
from edge_offload.server import NODE_ONLY_PARAMETERS, ServerConfig, load_params_file

ROOT = Path(__file__).resolve().parents[1]
LAUNCH_FILES = sorted((ROOT / 'launch').glob('*.launch.py'))


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda path: path.name)
def test_launch_arguments_are_described_and_configs_exist(path):
    tree = ast.parse(path.read_text())
    arguments = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, 'id', '') == 'DeclareLaunchArgument'
    ]
    assert arguments, f'{path.name} declares no arguments'
    for call in arguments:
        keywords = {keyword.arg: keyword.value for keyword in call.keywords}
        assert 'description' in keywords, ast.unparse(call)
        assert ast.literal_eval(keywords['description']).strip()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and str(node.value).endswith('.yaml'):
            assert (ROOT / 'config' / node.value).is_file(), node.value


def _declared(specs) -> set[str]:
    return {spec.name for spec in specs} - {'autostart'}


def test_edge_server_yaml_matches_the_node_and_validates():
    params = load_params_file(ROOT / 'config' / 'edge_server.yaml', 'edge_server')
    assert set(params) == _declared(edge_server_node.PARAMETERS)
    values = {key: value for key, value in params.items() if key not in NODE_ONLY_PARAMETERS}
    ServerConfig.from_mapping(values).validate()


def test_offload_bridge_yaml_matches_the_node_and_validates():
    document = yaml.safe_load((ROOT / 'config' / 'offload_bridge.yaml').read_text())
    params = document['offload_bridge']['ros__parameters']
    assert set(params) == _declared(offload_bridge_node.PARAMETERS)
    ClientConfig(
        endpoint=params['server_endpoint'],
        security=params['security'],
        allow_plaintext=params['allow_plaintext'],
        max_message_bytes=params['max_message_bytes'],
    ).validate()
