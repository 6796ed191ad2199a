# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The parameters each node of a graph runs with: its parameter file plus the given arguments.

One rule for ``kapao_tracking.launch.py``, ``edge_server.launch.py`` and the in-process
runner ``kapao_tracking``: the parameter file holds every parameter, and a launch argument
(or runner option) overrides the parameters it names only when it is given. An argument left
at its empty default leaves the file's value alone, so editing the YAML always takes
effect. Plain Python (no ``launch``, no ``rclpy``): the launch files, the runner and the
unit tests share it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from edge_offload.parameter_files import (
    ParameterFileError,
    load_parameter_file,
    node_parameters,
)

__all__ = [
    'GRAPH_NODES',
    'LIFECYCLE_NODES',
    'GraphArguments',
    'ParameterFileError',
    'fully_qualified_name',
    'graph_parameters',
    'load_parameter_file',
    'parse_flag',
    'write_parameter_file',
]
# Nodes that are ROS lifecycle nodes (configure and activate themselves with ``autostart``).
LIFECYCLE_NODES = frozenset({'offload_bridge', 'edge_server'})


def parse_flag(text: str, name: str) -> bool | None:
    """Return a launch-style boolean argument ('' = not given), raising on anything else."""
    value = text.strip().lower()
    if value == '':
        return None
    if value in ('true', '1'):
        return True
    if value in ('false', '0'):
        return False
    raise ValueError(f"argument {name} is {text!r}; it must be true, false, 1, 0 or ''")


@dataclass(frozen=True)
class GraphArguments:
    """The people-tracking graph's launch arguments that set parameters; '' = not given."""

    source: str = ''
    uri: str = ''
    mode: str = ''
    model: str = ''
    server_endpoint: str = ''
    record_path: str = ''
    depth_source: str = ''
    record_bag: str = ''
    use_sim_time: bool | None = None
    autostart: bool | None = None


# What each graph argument sets: (node, parameter).
_DIRECT_TARGETS = {
    'source': (('sensor_source', 'source'),),
    'uri': (('sensor_source', 'uri'),),
    'mode': (('offload_bridge', 'mode'),),
    'model': (('people_detection', 'model'),),
    # A local edge server listens where the bridge connects.
    'server_endpoint': (('offload_bridge', 'server_endpoint'), ('edge_server', 'endpoint')),
    'record_path': (('tracking_monitor', 'record_path'),),
    'depth_source': (('people_tracker', 'depth_source'),),
}
GRAPH_NODES = (
    'sensor_source',
    'offload_bridge',
    'people_detection',
    'tracking_monitor',
    'accumo_scheduler',
    'people_tracker',
    'follower',
    'bag_recorder',
    'edge_server',
)


def graph_parameters(
    sections: Mapping[str, Mapping[str, Any]],
    arguments: GraphArguments,
    nodes: tuple[str, ...] = GRAPH_NODES,
) -> dict[str, dict[str, Any]]:
    """Return each node's parameters: the file's, with the given arguments applied.

    A given ``model`` is also added to the models the bridge builds (local fallback) and
    the edge server loads, so a people model named on the command line is served.
    """
    parameters = {node: node_parameters(sections, node) for node in nodes}

    def put(node: str, name: str, value: Any) -> None:
        if node in parameters:
            parameters[node][name] = value

    for argument, targets in _DIRECT_TARGETS.items():
        value = getattr(arguments, argument)
        if value != '':
            for node, name in targets:
                put(node, name, value)
    if arguments.model:
        for node in ('offload_bridge', 'edge_server'):
            if node in parameters:
                models = list(parameters[node].get('models', []))
                if arguments.model not in models:
                    parameters[node]['models'] = [arguments.model, *models]
    if arguments.record_bag:
        put('bag_recorder', 'output_dir', arguments.record_bag)
        put('bag_recorder', 'metrics_file', f'{arguments.record_bag}.metrics.json')
    if arguments.use_sim_time is not None:
        for node in parameters:
            parameters[node]['use_sim_time'] = arguments.use_sim_time
    if arguments.autostart is not None:
        for node in LIFECYCLE_NODES.intersection(parameters):
            parameters[node]['autostart'] = arguments.autostart
    return parameters


def fully_qualified_name(node: str, namespace: str = '') -> str:
    """Return ``/namespace/node`` (``/node`` in the root namespace)."""
    parts = [part for part in namespace.strip('/').split('/') if part]
    return '/' + '/'.join([*parts, node])


def write_parameter_file(
    parameters: Mapping[str, Mapping[str, Any]], path: str | Path, namespace: str = ''
) -> Path:
    """Write ``parameters`` as a ROS 2 parameter file keyed by fully qualified node names."""
    document = {
        fully_qualified_name(node, namespace): {'ros__parameters': dict(values)}
        for node, values in parameters.items()
    }
    path = Path(path)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path
