# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The bridge's server time limit and torch thread parameters, on a node in this process.

No edge server runs: configure connects in the background, which is all these need.
"""

from __future__ import annotations

import logging

import pytest
import torch
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.parameter import Parameter

from edge_offload.offload_bridge_node import PARAMETERS, OffloadBridgeNode
from edge_offload_testing import free_tcp_port


def _bridge(context, **values) -> OffloadBridgeNode:
    overrides = {
        'server_endpoint': f'tcp://127.0.0.1:{free_tcp_port()}',
        'security': 'plaintext',
        'allow_plaintext': True,
        'models': ['tiny_cnn'],
        **values,
    }
    return OffloadBridgeNode(
        context=context,
        parameter_overrides=[Parameter(name, value=value) for name, value in overrides.items()],
    )


# The node routes these loggers to itself (no propagation): undone after each test, so
# later tests in this process see their records (caplog) again.
_FORWARDED = ('edge_offload', 'edge_offload.api', 'edge_offload.client', 'edge_offload.keys')


@pytest.fixture(autouse=True)
def restore_python_logging():
    saved = {
        name: (list(logger.handlers), logger.level, logger.propagate)
        for name in _FORWARDED
        for logger in (logging.getLogger(name),)
    }
    yield
    for name, (handlers, level, propagate) in saved.items():
        logger = logging.getLogger(name)
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate


@pytest.fixture
def restore_torch_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_parameters_are_declared_with_documented_defaults():
    specs = {spec.name: spec for spec in PARAMETERS}
    assert specs['request_timeout_factor'].default == 2.0
    assert specs['max_request_timeout_s'].default == 30.0
    assert specs['torch_threads'].default == 0
    assert 'floor' in specs['request_timeout_s'].description
    assert (specs['request_timeout_factor'].min_value, specs['torch_threads'].min_value) == (
        1.0,
        0,
    )


def test_max_below_the_floor_is_refused(ros_context):
    node = _bridge(ros_context, request_timeout_s=2.0)
    try:
        (refused,) = node.set_parameters([Parameter('max_request_timeout_s', value=1.0)])
        assert not refused.successful
        assert 'max_request_timeout_s' in refused.reason
        (refused,) = node.set_parameters([Parameter('request_timeout_s', value=60.0)])
        assert not refused.successful
        # Both at once are checked together.
        results = node.set_parameters_atomically(
            [
                Parameter('request_timeout_s', value=40.0),
                Parameter('max_request_timeout_s', value=50.0),
            ]
        )
        assert results.successful, results.reason
        (factor_refused,) = node.set_parameters([Parameter('request_timeout_factor', value=0.5)])
        assert not factor_refused.successful  # below the declared range
    finally:
        node.destroy_node()


def test_configure_fails_for_max_below_the_floor(ros_context):
    node = _bridge(ros_context, request_timeout_s=5.0, max_request_timeout_s=1.0)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
    finally:
        node.release()
        node.destroy_node()


def test_configure_sets_torch_threads_and_reports_the_limits(ros_context, restore_torch_threads):
    default_threads = torch.get_num_threads()
    node = _bridge(ros_context, request_timeout_s=0.5, torch_threads=1)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert torch.get_num_threads() == 1
        values = {
            item.key: item.value for status in node._diagnostics().status for item in status.values
        }
        assert values['request_timeout_s.tiny_cnn.nnto'] == '0.500'  # nothing measured yet
        assert values['late_replies_measured'] == '0'
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
        # torch_threads 0: torch's own default again.
        node.set_parameters([Parameter('torch_threads', value=0)])
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert torch.get_num_threads() == default_threads
    finally:
        node.release()
        node.destroy_node()
