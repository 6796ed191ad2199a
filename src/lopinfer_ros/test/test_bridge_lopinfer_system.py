# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The bridge node runs ``lopinfer`` against the edge server node, configured by ROS params.

Separate processes over DDS and TCP. The mode's options are bridge parameters named
``lopinfer.<option>`` (with descriptions and ranges); the bridge passes them to the mode,
which then runs the plan table found in ``lopinfer.plan_dir``.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from rcl_interfaces.msg import Log, ParameterType, ParameterValue
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.srv import DescribeParameters, SetParameters
from rclpy.action import ActionClient
from rclpy.node import Node

from edge_offload.models import load_model
from edge_offload.tensor_blob import from_tensor_blob, to_tensor_blob
from edge_offload_testing import (
    edge_server_node_command,
    free_tcp_port,
    make_test_keys,
    offload_bridge_node_command,
    prime_action_client,
    spin_until,
)
from lopinfer_ros.graph import capture
from lopinfer_ros.locality import analyse
from lopinfer_ros.modes import LopInferMode, make_plan_table
from offload_interfaces.action import Offload

MODEL = 'tiny_cnn'


def _call(executor, client, request, timeout_s: float = 10.0):
    assert spin_until(executor, client.service_is_ready, timeout_s=timeout_s)
    future = client.call_async(request)
    assert spin_until(executor, future.done, timeout_s=timeout_s)
    return future.result()


def _offload(executor, client: ActionClient, image: np.ndarray) -> Offload.Result:
    goal = Offload.Goal(model=MODEL, inputs=[to_tensor_blob('image', image)])
    sent = client.send_goal_async(goal)
    assert spin_until(executor, sent.done, timeout_s=30.0)
    handle = sent.result()
    assert handle.accepted
    result = handle.get_result_async()
    assert spin_until(executor, result.done, timeout_s=60.0)
    return result.result().result


def _save_plan_table(plan_dir, image: np.ndarray, device_factor: float) -> None:
    """Plan ``MODEL`` for ``image`` (one bucket, 8 MB/s) into ``plan_dir``, as the mode reads."""
    model = load_model(MODEL)
    inputs = [torch.from_numpy(image)]
    graph = capture(model.module, inputs)
    table = make_plan_table(
        MODEL, graph, analyse(graph), inputs, device_factor=device_factor, workers=1, buckets=[8]
    )
    mode = LopInferMode.__new__(LopInferMode)
    mode.options = {'plan_dir': str(plan_dir)}
    path = mode.table_path(MODEL, graph)
    path.parent.mkdir(parents=True)
    table.save(path)


def _offload_once_connected(ros_executor, client, image: np.ndarray, timeout_s: float = 30.0):
    """Offload ``image`` until a goal no longer falls back (the bridge has connected)."""
    deadline = time.monotonic() + timeout_s
    result = _offload(ros_executor, client, image)
    while result.fell_back and time.monotonic() < deadline:
        time.sleep(0.2)
        result = _offload(ros_executor, client, image)
    return result


def _start_server_and_bridge(ros_processes, tmp_path, **lopinfer_options):
    """Start the edge server and a lopinfer bridge with ``lopinfer.<option>`` parameters."""
    keys = make_test_keys(tmp_path / 'keys')
    port = free_tcp_port()
    ros_processes.start(
        edge_server_node_command(port, keys, [MODEL], modes=['nnto', 'lopinfer']),
        name='edge_server',
    )
    return ros_processes.start(
        offload_bridge_node_command(
            port,
            keys,
            [MODEL],
            mode='lopinfer',
            fallback_to_local=True,
            **{f'lopinfer.{name}': value for name, value in lopinfer_options.items()},
        ),
        name='offload_bridge',
    )


@pytest.mark.parametrize('plan_kind', ['server_only', 'lopinfer'])
def test_bridge_runs_lopinfer_with_its_ros_parameters(
    tmp_path, ros_context, ros_executor, ros_processes, plan_kind
):
    model = load_model(MODEL)
    rng = np.random.default_rng(0)
    images = [rng.random((1, 3, 64, 64), dtype=np.float32) for _ in range(3)]
    _save_plan_table(tmp_path / 'plans', images[0], device_factor=3.0)
    bridge = _start_server_and_bridge(
        ros_processes,
        tmp_path,
        plan_dir=str(tmp_path / 'plans'),
        device_factor=3.0,
        fixed_bandwidth_bytes_per_s=8e6,
        plan_kind=plan_kind,
    )
    node = Node('lopinfer_bridge_test', context=ros_context)
    ros_executor.add_node(node)
    client = ActionClient(node, Offload, 'offload')
    assert spin_until(ros_executor, client.server_is_ready, timeout_s=30.0), (
        'bridge action server never appeared:\n' + ros_processes.output(bridge)
    )
    prime_action_client(
        ros_executor,
        client,
        Offload.Goal(model=MODEL, inputs=[to_tensor_blob('image', images[0])]),
    )

    described = _call(
        ros_executor,
        node.create_client(DescribeParameters, '/offload_bridge/describe_parameters'),
        DescribeParameters.Request(names=['lopinfer.device_factor', 'layer_split.plan_dir']),
    ).descriptors
    assert 'slowdown' in described[0].description
    assert described[0].floating_point_range[0].from_value == 1.0
    assert 'layer_split mode' in described[1].description
    refused = _call(
        ros_executor,
        node.create_client(SetParameters, '/offload_bridge/set_parameters'),
        SetParameters.Request(
            parameters=[
                ParameterMsg(
                    name='lopinfer.device_factor',
                    value=ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=0.5),
                )
            ]
        ),
    ).results[0]
    assert not refused.successful  # below the declared range

    result = _offload_once_connected(ros_executor, client, images[0])
    assert not result.fell_back, result.fallback_reason + ros_processes.output(bridge)
    for image in images:
        result = _offload(ros_executor, client, image)
        assert not result.fell_back, result.fallback_reason
        assert result.mode_used == 'lopinfer'
        expected = model({'image': torch.from_numpy(image)})['features']
        got = torch.from_numpy(from_tensor_blob(result.outputs[0]))
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
        if plan_kind == 'server_only':
            assert result.stats.bytes_up >= image.nbytes
    # The executor's suspended wait still holds the client's handle; destroying it
    # under that wait deadlocked the executor's shutdown once. Shut down first.
    ros_executor.shutdown()
    client.destroy()
    node.destroy_node()


def test_plugin_warnings_reach_rosout(tmp_path, ros_context, ros_executor, ros_processes):
    """A plug-in logs through its mode context: its warning is on ``/rosout``, by the bridge."""
    image = np.random.default_rng(1).random((1, 3, 64, 64), dtype=np.float32)
    # Planned for a device 3x slower than this one; the bridge is told 2x.
    _save_plan_table(tmp_path / 'plans', image, device_factor=3.0)

    node = Node('rosout_listener', context=ros_context)
    ros_executor.add_node(node)
    logs: list[Log] = []
    node.create_subscription(Log, '/rosout', logs.append, 100)

    bridge = _start_server_and_bridge(
        ros_processes, tmp_path, plan_dir=str(tmp_path / 'plans'), device_factor=2.0
    )
    client = ActionClient(node, Offload, 'offload')
    assert spin_until(ros_executor, client.server_is_ready, timeout_s=30.0), (
        'bridge action server never appeared:\n' + ros_processes.output(bridge)
    )
    # The mode (and its plan-table check) runs only once the bridge has connected.
    result = _offload_once_connected(ros_executor, client, image)
    assert not result.fell_back, result.fallback_reason + ros_processes.output(bridge)

    def warned() -> bool:
        return any(
            log.name == 'offload_bridge'
            and log.level == Log.WARN
            and 'was planned for device factor 3.0, the mode runs 2.0' in log.msg
            for log in logs
        )

    assert spin_until(ros_executor, warned, timeout_s=20.0), (
        'no plan-table warning on /rosout; it had:\n'
        + '\n'.join(f'{log.name}: {log.msg}' for log in logs)
        + ros_processes.output(bridge)
    )
    ros_executor.shutdown()
    client.destroy()
    node.destroy_node()
