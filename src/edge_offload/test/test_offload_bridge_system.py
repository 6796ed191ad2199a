# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Edge server, offload bridge and a client node in separate processes, over DDS and TCP.

* 50 goals in ``nnto`` give the same outputs as the model run locally.
* Killing the edge server mid-stream: every goal still gets a result (local fallback),
  the first fallback result arrives within 1 s of the kill, and after a restart the
  bridge offloads again by itself.
* The mode switches at run time; an unknown mode is refused; LinkState comes at >= 2 Hz.
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest
import torch
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
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
from offload_interfaces.action import Offload
from offload_interfaces.msg import LinkState

MODEL = 'tiny_cnn'


class GoalStream:
    """Send goals without waiting; collect each result with its arrival time."""

    def __init__(self, executor, client: ActionClient) -> None:
        self.executor = executor
        self.client = client
        self.sent_at: dict[int, float] = {}
        self.results: dict[int, tuple[float, Offload.Result]] = {}
        self.rejected: list[int] = []

    def send(self, index: int, image: np.ndarray) -> None:
        goal = Offload.Goal(model=MODEL, inputs=[to_tensor_blob('image', image)])
        self.sent_at[index] = time.monotonic()
        future = self.client.send_goal_async(goal)
        future.add_done_callback(lambda done: self._accepted(index, done.result()))

    def _accepted(self, index: int, goal_handle) -> None:
        if not goal_handle.accepted:
            self.rejected.append(index)
            return
        future = goal_handle.get_result_async()
        future.add_done_callback(
            lambda done: self.results.__setitem__(index, (time.monotonic(), done.result().result))
        )

    def outstanding(self) -> int:
        return len(self.sent_at) - len(self.results) - len(self.rejected)

    def spin(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=min(0.005, max(0.0, end - time.monotonic())))


def _priming_goal() -> Offload.Goal:
    image = np.zeros((1, 3, 64, 64), dtype=np.float32)
    return Offload.Goal(model=MODEL, inputs=[to_tensor_blob('image', image)])


def _server_command(port: int, keys) -> list[str]:
    return edge_server_node_command(port, keys, [MODEL])


@pytest.fixture
def system(tmp_path, ros_context, ros_executor, ros_processes):
    """Start edge server and bridge; yield (stream, node, port, keys, server process)."""
    keys = make_test_keys(tmp_path / 'keys')
    port = free_tcp_port()
    server = ros_processes.start(_server_command(port, keys), name='edge_server')
    bridge = ros_processes.start(
        offload_bridge_node_command(port, keys, [MODEL], parallel_goals=2, max_queued_goals=64),
        name='offload_bridge',
    )
    node = Node('offload_system_test', context=ros_context)
    ros_executor.add_node(node)
    client = ActionClient(node, Offload, 'offload')
    assert spin_until(ros_executor, client.server_is_ready, timeout_s=30.0), (
        'bridge action server never appeared:\n' + ros_processes.output(bridge)
    )
    prime_action_client(ros_executor, client, _priming_goal())
    stream = GoalStream(ros_executor, client)
    yield stream, node, port, keys, server
    # The executor's suspended wait still holds the client's handle; destroying it
    # under that wait deadlocked the executor's shutdown once. Shut down first.
    ros_executor.shutdown()
    client.destroy()
    node.destroy_node()


def _images(count: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.random((1, 3, 64, 64), dtype=np.float32) for _ in range(count)]


def _wait_offloading(stream: GoalStream, image: np.ndarray, timeout_s: float) -> bool:
    """Send a goal every 50 ms until one is served by nnto (the bridge connected)."""
    deadline = time.monotonic() + timeout_s
    index = 10_000 + len(stream.sent_at)
    while time.monotonic() < deadline:
        stream.send(index, image)
        end = time.monotonic() + 0.05
        while time.monotonic() < end:
            stream.spin(0.01)
            done = stream.results.get(index)
            if done is not None and done[1].mode_used == 'nnto' and not done[1].fell_back:
                return True
        index += 1
    return False


def test_nnto_results_equal_local_and_mode_switches(system):
    stream, node, _, _, _ = system
    warm_up = _images(1, seed=99)[0]
    assert _wait_offloading(stream, warm_up, timeout_s=20.0), 'bridge never offloaded'
    stream.spin(1.0)  # let the warm-up goals finish
    stream.results.clear()
    stream.sent_at.clear()

    images = _images(50)
    for index, image in enumerate(images):
        while stream.outstanding() >= 4:
            stream.spin(0.005)
        stream.send(index, image)
    deadline = time.monotonic() + 60.0
    while len(stream.results) < 50 and time.monotonic() < deadline:
        stream.spin(0.05)

    assert not stream.rejected
    assert len(stream.results) == 50
    model = load_model(MODEL)
    for index, image in enumerate(images):
        result = stream.results[index][1]
        assert result.error_code == Offload.Result.ERROR_NONE, result.error_message
        assert result.mode_used == 'nnto'
        assert not result.fell_back
        assert result.stats.round_trips == 1
        assert result.stats.bytes_up > image.nbytes
        (output,) = result.outputs
        expected = model({'image': torch.from_numpy(image)})['features']
        torch.testing.assert_close(torch.from_numpy(from_tensor_blob(output)), expected)

    # Run-time switch to local: results come from the robot, not as a fallback.
    parameters = node.create_client(SetParameters, '/offload_bridge/set_parameters')
    assert spin_until(stream.executor, parameters.service_is_ready, timeout_s=10.0)

    def set_mode(mode: str):
        request = SetParameters.Request(
            parameters=[
                ParameterMsg(
                    name='mode',
                    value=ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=mode),
                )
            ]
        )
        future = parameters.call_async(request)
        assert spin_until(stream.executor, future.done, timeout_s=10.0)
        return future.result().results[0]

    refused = set_mode('teleport')
    assert not refused.successful
    assert 'teleport' in refused.reason
    assert set_mode('local').successful
    stream.send(100, images[0])
    assert spin_until(stream.executor, lambda: 100 in stream.results, timeout_s=10.0)
    local_result = stream.results[100][1]
    assert local_result.mode_used == 'local'
    assert not local_result.fell_back
    assert local_result.stats.bytes_up == 0

    # LinkState at >= 2 Hz.
    stamps = []
    node.create_subscription(LinkState, '/link_state', lambda msg: stamps.append(msg), 10)
    assert spin_until(stream.executor, lambda: len(stamps) >= 2, timeout_s=10.0)
    first = time.monotonic()
    count_before = len(stamps)
    stream.spin(2.0)
    rate = (len(stamps) - count_before) / (time.monotonic() - first)
    assert rate >= 2.0
    assert stamps[-1].connected
    assert stamps[-1].rtt_s > 0


def test_server_killed_and_restarted(system, ros_processes):
    stream, _, port, keys, server = system
    images = _images(8, seed=1)
    assert _wait_offloading(stream, images[0], timeout_s=20.0), 'bridge never offloaded'
    stream.results.clear()
    stream.sent_at.clear()

    period_s = 0.05
    index = 0

    def send_for(seconds: float, until=None) -> None:
        nonlocal index
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            stream.send(index, images[index % len(images)])
            index += 1
            stream.spin(period_s)
            if until is not None and until():
                return

    send_for(1.0)
    os.killpg(server.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    server.wait(timeout=10.0)
    send_for(2.0)
    ros_processes.start(_server_command(port, keys), name='edge_server_restarted')
    restarted_at = time.monotonic()

    def offloading_again() -> bool:
        return any(
            result.mode_used == 'nnto' and not result.fell_back and arrived > restarted_at
            for arrived, result in stream.results.values()
        )

    send_for(30.0, until=offloading_again)
    deadline = time.monotonic() + 30.0
    while stream.outstanding() and time.monotonic() < deadline:
        stream.spin(0.05)

    assert not stream.rejected
    assert len(stream.results) == len(stream.sent_at), 'some goals got no result'
    for _, result in stream.results.values():
        assert result.error_code == Offload.Result.ERROR_NONE, result.error_message
    fallbacks = sorted(arrived for arrived, result in stream.results.values() if result.fell_back)
    assert fallbacks, 'no goal fell back while the server was dead'
    assert fallbacks[0] - killed_at < 1.0
    assert all(
        result.mode_used == 'local' and result.fallback_reason
        for _, result in stream.results.values()
        if result.fell_back
    )
    assert offloading_again(), 'the bridge did not go back to nnto after the restart'
