# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""people_detection does not wait for ever on a goal the bridge will never answer.

A bridge killed with a goal in flight never sends its result; the bridge that ros2 launch
respawns does not know the goal. Detection abandons it after ``goal_timeout_s``, counts it
in ``/diagnostics`` and carries on with the next frame.
"""

from __future__ import annotations

import threading

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.action import ActionServer, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import Image

from edge_offload.image_convert import cv2_to_imgmsg
from edge_offload_testing import spin_until
from offload_interfaces.action import Offload
from people_following.people_detection_node import PeopleDetectionNode


class _SilentBridge(Node):
    """An ``offload`` action server that accepts every goal and never finishes one."""

    def __init__(self, context) -> None:  # noqa: ANN001 - rclpy Context
        super().__init__('silent_bridge', context=context)
        self.goals: list[Offload.Goal] = []
        self.release = threading.Event()
        self._server = ActionServer(
            self,
            Offload,
            'offload',
            execute_callback=self._execute,
            goal_callback=self._accept,
            callback_group=ReentrantCallbackGroup(),
        )

    def _accept(self, goal: Offload.Goal) -> GoalResponse:
        self.goals.append(goal)
        return GoalResponse.ACCEPT

    def _execute(self, goal_handle) -> Offload.Result:  # noqa: ANN001
        # Holds every goal until the test ends: a bridge that died says nothing either.
        self.release.wait()
        goal_handle.abort()
        return Offload.Result()


def test_unanswered_goal_is_abandoned_and_the_next_frame_is_sent(ros_context):
    executor = MultiThreadedExecutor(num_threads=8, context=ros_context)
    bridge = _SilentBridge(ros_context)
    detection = PeopleDetectionNode(
        context=ros_context,
        parameter_overrides=[
            Parameter('goal_timeout_s', value=0.5),
            Parameter('max_in_flight', value=1),
            Parameter('diagnostics_period_s', value=0.2),
        ],
    )
    probe = Node('probe', context=ros_context)
    statuses: list[dict[str, str]] = []
    probe.create_subscription(
        DiagnosticArray,
        '/diagnostics',
        lambda message: statuses.extend(
            {value.key: value.value for value in status.values}
            for status in message.status
            if 'people detection' in status.name
        ),
        10,
    )
    images = probe.create_publisher(Image, 'image_raw', 10)
    for node in (bridge, detection, probe):
        executor.add_node(node)
    frame = cv2_to_imgmsg(np.zeros((48, 64, 3), np.uint8), 'bgr8')

    def publish_and_check() -> bool:
        images.publish(frame)
        return len(bridge.goals) >= 3

    try:
        assert spin_until(executor, publish_and_check, timeout_s=30.0), (
            f'the bridge got {len(bridge.goals)} goals; detection kept waiting on the first'
        )
        assert spin_until(
            executor,
            lambda: any(int(s.get('goals_abandoned', 0)) >= 2 for s in statuses),
            timeout_s=10.0,
        ), f'diagnostics: {statuses[-1:] or "none"}'
    finally:
        bridge.release.set()
        # Let the held goals finish before the executor goes (no coroutine left unawaited).
        spin_until(executor, lambda: False, timeout_s=1.0)
        executor.shutdown(timeout_sec=5.0)
        for node in (probe, detection, bridge):
            node.destroy_node()
