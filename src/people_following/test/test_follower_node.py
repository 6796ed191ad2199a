# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The follower node's placement of the odometry-frame target in the robot base frame."""

from __future__ import annotations

import math

import numpy as np
import pytest
from nav_msgs.msg import Odometry

from people_following.follower_node import base_axes_from_odometry, base_from_odometry


def _odometry(x: float, y: float, yaw: float, scale: float = 1.0) -> Odometry:
    odometry = Odometry()
    odometry.pose.pose.position.x, odometry.pose.pose.position.y = x, y
    # A quaternion about z; ``scale`` checks that an unnormalised one is normalised.
    odometry.pose.pose.orientation.z = scale * math.sin(yaw / 2)
    odometry.pose.pose.orientation.w = scale * math.cos(yaw / 2)
    return odometry


def test_a_target_ahead_of_a_turned_robot_is_ahead_in_the_base_frame():
    # The robot at (1, 2) facing +y (yaw 90°); the person 3 m further along +y and 1 m to
    # its right (+x in odom): 3 m ahead and 1 m to the right (y = -1) in the base frame.
    point = base_from_odometry(np.array([2.0, 5.0, 0.0]), _odometry(1.0, 2.0, math.pi / 2, 2.0))
    np.testing.assert_allclose(point, [3.0, -1.0, 0.0], atol=1e-12)


def test_a_velocity_is_rotated_into_the_base_axes_but_not_moved():
    # Walking along +y in odom, seen from a robot facing +y: straight ahead, wherever it is.
    velocity = base_axes_from_odometry(
        np.array([0.0, 0.5, 0.0]), _odometry(7.0, -3.0, math.pi / 2)
    )
    np.testing.assert_allclose(velocity, [0.5, 0.0, 0.0], atol=1e-12)


def test_a_zero_quaternion_is_refused():
    with pytest.raises(ValueError, match='quaternion'):
        base_from_odometry(np.zeros(3), _odometry(0.0, 0.0, 0.0, scale=0.0))
