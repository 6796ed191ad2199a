# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The ``lopinfer`` and ``layer_split`` modes: the classes edge_offload's plug-in groups load.

Only the registered names: the robot half is :mod:`lopinfer_ros.robot`, the server half
:mod:`lopinfer_ros.server`, the options :mod:`lopinfer_ros.options`. Both
halves of a mode share one name; ``layer_split`` runs the same runtime with the table's
best layer partition (DSCCS-style) instead of its LOP plan.
"""

from __future__ import annotations

from lopinfer_ros.options import DEFAULT_OPTIONS, OPTION_SPECS, validate_options
from lopinfer_ros.robot import LopInferRobot, make_plan_table
from lopinfer_ros.server import LopInferServer

__all__ = [
    'DEFAULT_OPTIONS',
    'OPTION_SPECS',
    'LayerSplitMode',
    'LayerSplitServerMode',
    'LopInferMode',
    'LopInferServerMode',
    'make_plan_table',
    'validate_options',
]


class LopInferMode(LopInferRobot):
    """Robot half of ``lopinfer`` (entry point ``edge_offload.modes``)."""

    name = 'lopinfer'
    plan_kind = 'lopinfer'
    option_specs = OPTION_SPECS


class LayerSplitMode(LopInferMode):
    """Robot half of ``layer_split``: the bucket's best layer partition."""

    name = 'layer_split'
    plan_kind = 'layer_split'


class LopInferServerMode(LopInferServer):
    """Server half of ``lopinfer`` (entry point ``edge_offload.server_modes``)."""

    name = 'lopinfer'


class LayerSplitServerMode(LopInferServerMode):
    """Server half of ``layer_split`` (the same runtime; the robot's plans differ)."""

    name = 'layer_split'
