# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The options of the ``lopinfer`` and ``layer_split`` modes (``<mode>.<option>`` parameters)."""

from __future__ import annotations

import math
from typing import Any

from edge_offload.modes.base import (
    ModeOption,
)

OPTION_SPECS: tuple[ModeOption, ...] = (
    ModeOption(
        'device_factor',
        1.0,
        'Emulated robot slowdown: each robot operator is followed by (factor - 1) x its '
        'time; plans are made for it (1: the real robot, no emulation)',
        1.0,
        1000.0,
    ),
    ModeOption(
        'server_speedup',
        1.0,
        'Server compute speed relative to the profile taken on the robot (planning only)',
        0.001,
        1000.0,
    ),
    ModeOption(
        'plan_dir',
        '~/.cache/edge_offload/lopinfer_plans',
        'Directory of plan tables (<model>_<graph hash>.json); built there when missing',
    ),
    ModeOption(
        'fixed_bandwidth_bytes_per_s',
        0.0,
        'Plan for this bandwidth (bytes/s) instead of the link monitor estimate; 0: measured',
        0.0,
        1e12,
    ),
    ModeOption(
        'default_bandwidth_bytes_per_s',
        10e6,
        'Bandwidth (bytes/s) assumed until the link monitor has an estimate',
        1.0,
        1e12,
    ),
    ModeOption(
        'network_attribute',
        '',
        'Split only this submodule and run the rest on the robot; empty: the whole model '
        '(KAPAO splits whole: its NMS is an opaque node that runs on one side)',
    ),
    ModeOption('planner_workers', 2, 'Processes that build a missing plan table', 1, 64),
    ModeOption(
        'plan_kind',
        '',
        'Run another column of the plan table (device_only, server_only, layer_split, '
        "lopinfer); empty: the mode's own",
    ),
    ModeOption('max_pushes_in_flight', 2, 'Robot slice messages awaiting an answer', 1, 64),
)
DEFAULT_OPTIONS: dict[str, Any] = {option.name: option.default for option in OPTION_SPECS}


def validate_options(mode: str, given: dict[str, Any]) -> dict[str, Any]:
    """Return the defaults updated with ``given``; raises ValueError for a bad option."""
    specs = {option.name: option for option in OPTION_SPECS}
    options = dict(DEFAULT_OPTIONS)
    for name, value in given.items():
        spec = specs.get(name)
        if spec is None:
            raise ValueError(f'{mode}: unknown option {name!r}; known: {sorted(specs)}')
        try:
            value = type(spec.default)(value)
        except (TypeError, ValueError) as error:
            raise ValueError(f'{mode}: option {name} = {value!r}: {error}') from error
        low = -math.inf if spec.min_value is None else spec.min_value
        high = math.inf if spec.max_value is None else spec.max_value
        if isinstance(value, (int, float)) and not low <= value <= high:
            raise ValueError(f'{mode}: option {name} = {value} is outside [{low}, {high}]')
        options[name] = value
    return options
