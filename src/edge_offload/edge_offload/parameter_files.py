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
