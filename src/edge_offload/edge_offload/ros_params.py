# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Declare a node's parameters from one table: default, description, range, read-only.

Each entry becomes ``declare_parameter(name, default, ParameterDescriptor(...))`` with
the description and (for numbers) the allowed range, so ``ros2 param describe`` shows
them and rclpy rejects out-of-range values before the node sees them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import ParameterUninitializedException
from rclpy.node import Node
from rclpy.parameter import Parameter


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: name, default, what it means, and its allowed range."""

    name: str
    default: Any
    description: str
    min_value: float | None = None
    max_value: float | None = None
    read_only: bool = False


def declare_parameters(node: Node, specs: Sequence[ParamSpec]) -> None:
    """Declare every parameter in ``specs`` on ``node``."""
    for spec in specs:
        descriptor = ParameterDescriptor(description=spec.description, read_only=spec.read_only)
        if spec.min_value is not None or spec.max_value is not None:
            if isinstance(spec.default, bool):
                raise TypeError(f'{spec.name}: a boolean parameter has no range')
            if isinstance(spec.default, int):
                descriptor.integer_range = [
                    IntegerRange(
                        from_value=int(spec.min_value if spec.min_value is not None else -(2**62)),
                        to_value=int(spec.max_value if spec.max_value is not None else 2**62),
                        step=0,
                    )
                ]
            else:
                descriptor.floating_point_range = [
                    FloatingPointRange(
                        from_value=float(
                            spec.min_value if spec.min_value is not None else -1.0e300
                        ),
                        to_value=float(spec.max_value if spec.max_value is not None else 1.0e300),
                        step=0.0,
                    )
                ]
        if isinstance(spec.default, list) and not spec.default:
            node.declare_parameter(spec.name, Parameter.Type.STRING_ARRAY, descriptor)
        else:
            node.declare_parameter(spec.name, spec.default, descriptor)


def parameter_values(node: Node, specs: Sequence[ParamSpec]) -> dict[str, Any]:
    """Return the current value of every parameter in ``specs``."""
    values = {}
    for spec in specs:
        try:
            value = node.get_parameter(spec.name).value
        except ParameterUninitializedException:
            # A string array declared by type only and not set: rclpy has no empty default.
            if not isinstance(spec.default, list):
                raise
            value = None
        if value is None and isinstance(spec.default, list):
            value = []
        values[spec.name] = list(value) if isinstance(value, list | tuple) else value
    return values


def mode_option_parameters(
    modes: Iterable[str], load_class: Callable[[str], type], label: str
) -> tuple[ParamSpec, ...]:
    """Return a ``<mode>.<option>`` parameter for each option of each of ``modes``.

    ``load_class(name)`` returns the mode's class (its ``option_specs``); ``label`` says
    which half the descriptions are of ('mode', 'server mode'). A plug-in that fails to load
    is logged and skipped: it must not stop the node.
    """
    specs = []
    for name in modes:
        try:
            options = load_class(name).option_specs
        except Exception as error:  # noqa: BLE001 - a broken plug-in must not stop the node
            logging.getLogger('edge_offload').warning(
                '%s %s: options not declared: %s', label, name, error
            )
            continue
        specs.extend(
            ParamSpec(
                f'{name}.{option.name}',
                option.default,
                f'{name} {label}: {option.description}',
                option.min_value,
                option.max_value,
            )
            for option in options
        )
    return tuple(specs)
