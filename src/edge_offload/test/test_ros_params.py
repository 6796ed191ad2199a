# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Declaring and reading node parameters from ParamSpec lists."""

from __future__ import annotations

import rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter

from edge_offload.ros_params import ParamSpec, declare_parameters, parameter_values
from edge_offload_testing import reserve_domain_id

SPECS = [
    ParamSpec('paths', [], 'A string array that is empty unless set.'),
    ParamSpec('rate', 2.0, 'A bounded float.', 0.5, 10.0),
    ParamSpec('name', 'x', 'A string.'),
]


def _values(overrides: list[Parameter]) -> dict:
    with reserve_domain_id() as domain_id:
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=domain_id)
        try:
            node = Node('params_probe', context=context, parameter_overrides=overrides)
            declare_parameters(node, SPECS)
            values = parameter_values(node, SPECS)
            node.destroy_node()
            return values
        finally:
            rclpy.shutdown(context=context)


def test_an_unset_string_array_reads_as_empty():
    assert _values([]) == {'paths': [], 'rate': 2.0, 'name': 'x'}


def test_set_values_are_read_back_as_plain_lists():
    values = _values(
        [Parameter('paths', Parameter.Type.STRING_ARRAY, ['a.yaml', 'b.yaml']),
         Parameter('rate', Parameter.Type.DOUBLE, 4.0)]
    )  # fmt: skip
    assert values == {'paths': ['a.yaml', 'b.yaml'], 'rate': 4.0, 'name': 'x'}
