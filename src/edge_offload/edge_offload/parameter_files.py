# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Read ROS 2 parameter files (YAML) without rclpy: the runner, launch files and tools.

rcl reads these files for a node; this module reads them for code that must know the
values before any node exists (which nodes a launch starts, the headless edge server).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

# Section of a parameter file that applies to every node.
WILDCARD = '/**'


class ParameterFileError(ValueError):
    """A parameter file that cannot be read or does not have the expected layout."""


def load_parameter_file(path: str | Path) -> dict[str, dict[str, Any]]:
    """Return the ``ros__parameters`` of each section of a ROS 2 parameter file.

    Sections are keyed by bare node name (``sensor_source``, also for ``/sensor_source`` or
    ``/ns/sensor_source``) and ``/**`` for the wildcard section. Raises ParameterFileError
    with the file's name when it is missing or malformed.
    """
    path = Path(path).expanduser()
    try:
        document = yaml.safe_load(path.read_text())
    except OSError as error:
        raise ParameterFileError(f'parameter file {path}: {error.strerror}') from None
    except yaml.YAMLError as error:
        raise ParameterFileError(f'parameter file {path} is not valid YAML: {error}') from None
    if not isinstance(document, dict):
        raise ParameterFileError(f'parameter file {path} has no node sections')
    sections: dict[str, dict[str, Any]] = {}
    for key, section in document.items():
        params = section.get('ros__parameters') if isinstance(section, dict) else None
        if not isinstance(params, dict):
            raise ParameterFileError(
                f'parameter file {path}: section {key!r} has no ros__parameters mapping'
            )
        name = WILDCARD if str(key).strip() in ('/**', '**') else str(key).rstrip('/')
        name = name if name == WILDCARD else name.split('/')[-1]
        sections.setdefault(name, {}).update(params)
    return sections


def node_parameters(sections: Mapping[str, Mapping[str, Any]], node: str) -> dict[str, Any]:
    """Return ``node``'s parameters: the wildcard section, then the node's own section."""
    merged = copy.deepcopy(dict(sections.get(WILDCARD, {})))
    merged.update(copy.deepcopy(dict(sections.get(node, {}))))
    return merged


# Nodes of the suite that are ROS lifecycle nodes (``autostart`` configures and activates them).
LIFECYCLE_NODES = frozenset({'offload_bridge', 'edge_server'})


def run_arguments(nodes: str) -> tuple[tuple[str, str, str], ...]:
    """Return (name, default, description) of the arguments every launch of the suite has.

    ``nodes`` names what they set ("every node", "the server"). Data, not launch actions:
    the launch files declare them and the in-process runner parses them.
    """
    return (
        ('namespace', '', f'Namespace of {nodes}'),
        (
            'use_sim_time',
            '',
            f"true: {nodes} follow /clock (bag replays); '' = the parameter file's value",
        ),
        (
            'autostart',
            'true',
            'Lifecycle nodes configure and activate themselves at start and after a respawn; '
            'false leaves them unconfigured for a lifecycle manager',
        ),
        ('log_level', 'info', f'Log level of {nodes}'),
    )


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


def apply_run_flags(
    parameters: dict[str, dict[str, Any]], use_sim_time: bool | None, autostart: bool | None
) -> None:
    """Set ``use_sim_time`` on every node and ``autostart`` on the lifecycle nodes, when given."""
    if use_sim_time is not None:
        for values in parameters.values():
            values['use_sim_time'] = use_sim_time
    if autostart is not None:
        for node in LIFECYCLE_NODES.intersection(parameters):
            parameters[node]['autostart'] = autostart


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
    path.write_text(yaml.dump(document, Dumper=_NoAliasDumper, sort_keys=False))
    return path


class _NoAliasDumper(yaml.SafeDumper):
    """Write a value shared by several nodes in full each time: rcl refuses YAML aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True
