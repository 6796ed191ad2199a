# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The ``Offload`` action works across processes: goal, feedback, result and cancel."""

import sys
from pathlib import Path

import numpy as np
import pytest
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient
from rclpy.node import Node

from edge_offload.tensor_blob import from_tensor_blob, to_tensor_blob
from edge_offload_testing import prime_action_client, spin_until
from offload_interfaces.action import Offload

FIXTURES = Path(__file__).parent / 'fixtures'
FEEDBACK_TOPIC = '/offload/_action/feedback'


@pytest.fixture
def offload_client(ros_context, ros_executor, ros_processes):
    """Start the echo server in its own process; yield a connected action client."""
    server = ros_processes.start(
        [sys.executable, str(FIXTURES / 'echo_offload_server.py')], name='echo_server'
    )
    node = Node('offload_test_client', context=ros_context)
    ros_executor.add_node(node)
    client = ActionClient(node, Offload, 'offload')
    # server_is_ready covers the action's services; feedback is a topic, discovered on its
    # own. Waiting for its publisher keeps early feedback from going to an unmatched reader.
    assert spin_until(
        ros_executor,
        lambda: client.server_is_ready() and node.count_publishers(FEEDBACK_TOPIC) > 0,
        timeout_s=20.0,
    ), 'action server never appeared:\n' + ros_processes.output(server)
    prime_action_client(ros_executor, client, Offload.Goal(model='echo'))
    yield client
    # The executor's suspended wait still holds the client's handle; destroying it
    # under that wait deadlocked the executor's shutdown once. Shut down first.
    ros_executor.shutdown()
    client.destroy()
    node.destroy_node()


def _send(executor, client, goal, feedback):
    goal_future = client.send_goal_async(goal, feedback_callback=feedback.append)
    assert spin_until(executor, goal_future.done, timeout_s=10.0), 'goal was not answered'
    goal_handle = goal_future.result()
    assert goal_handle.accepted
    return goal_handle


def test_round_trip_returns_outputs_feedback_and_stats(offload_client, ros_executor):
    image = np.arange(2 * 3 * 8 * 8, dtype=np.float32).reshape(2, 3, 8, 8)
    mask = np.array([[True, False], [False, True]])
    goal = Offload.Goal(model='echo')
    goal.inputs = [to_tensor_blob('image', image), to_tensor_blob('mask', mask)]
    feedback = []

    goal_handle = _send(ros_executor, offload_client, goal, feedback)
    # rclpy's client drops feedback that it processes after the goal's result, so take
    # every stage first and only then ask for the result (the server keeps it).
    assert spin_until(ros_executor, lambda: len(feedback) >= 4, timeout_s=10.0), feedback
    result_future = goal_handle.get_result_async()
    assert spin_until(ros_executor, result_future.done, timeout_s=10.0)

    response = result_future.result()
    assert response.status == GoalStatus.STATUS_SUCCEEDED
    result = response.result
    assert result.error_code == Offload.Result.ERROR_NONE
    assert [tensor.name for tensor in result.outputs] == ['echo/image', 'echo/mask']
    np.testing.assert_array_equal(from_tensor_blob(result.outputs[0]), image)
    np.testing.assert_array_equal(from_tensor_blob(result.outputs[1]), mask)
    assert result.stats.bytes_up == image.nbytes + mask.nbytes
    assert result.stats.round_trips == 1
    stages = [message.feedback.stage for message in feedback]
    assert stages == sorted(stages), 'stages must arrive in order'
    assert stages[0] == Offload.Feedback.STAGE_QUEUED
    assert Offload.Feedback.STAGE_SERVER_COMPUTE in stages


def test_cancel_stops_a_running_goal(offload_client, ros_executor):
    feedback = []
    goal_handle = _send(ros_executor, offload_client, Offload.Goal(model='hold'), feedback)
    # Cancel only once the goal is demonstrably running on the server.
    assert spin_until(ros_executor, lambda: len(feedback) >= 2, timeout_s=10.0)

    cancel_future = goal_handle.cancel_goal_async()
    assert spin_until(ros_executor, cancel_future.done, timeout_s=10.0)
    assert len(cancel_future.result().goals_canceling) == 1
    result_future = goal_handle.get_result_async()
    assert spin_until(ros_executor, result_future.done, timeout_s=10.0)

    response = result_future.result()
    assert response.status == GoalStatus.STATUS_CANCELED
    assert response.result.error_code == Offload.Result.ERROR_CANCELED


def test_deadline_and_unknown_model_are_reported(offload_client, ros_executor):
    held = Offload.Goal(model='hold')
    held.deadline.nanosec = 200_000_000
    unknown = Offload.Goal(model='no_such_model')

    handles = [_send(ros_executor, offload_client, goal, []) for goal in (held, unknown)]
    futures = [handle.get_result_async() for handle in handles]
    assert spin_until(ros_executor, lambda: all(f.done() for f in futures), timeout_s=10.0)

    held_response, unknown_response = (future.result() for future in futures)
    assert held_response.status == GoalStatus.STATUS_ABORTED
    assert held_response.result.error_code == Offload.Result.ERROR_DEADLINE_EXCEEDED
    assert unknown_response.status == GoalStatus.STATUS_ABORTED
    assert unknown_response.result.error_code == Offload.Result.ERROR_UNKNOWN_MODEL
    assert 'no_such_model' in unknown_response.result.error_message
