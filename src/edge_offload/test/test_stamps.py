# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Stamps convert exactly as rclpy's own Time does, for rclpy and rosbags messages alike."""

from __future__ import annotations

import random

from builtin_interfaces.msg import Time as TimeMsg
from rclpy.duration import Duration
from rclpy.time import Time
from rosbags.typesys import Stores, get_typestore

from edge_offload.stamps import NS_PER_S, stamp_ns, stamp_seconds


def test_stamps_equal_rclpy_time_for_ros_and_rosbags_messages():
    rng = random.Random(7)
    bag_time = get_typestore(Stores.ROS2_HUMBLE).types['builtin_interfaces/msg/Time']
    for _ in range(200):
        sec, nanosec = rng.randrange(0, 2**31), rng.randrange(0, NS_PER_S)
        expected = Time.from_msg(TimeMsg(sec=sec, nanosec=nanosec)).nanoseconds
        assert stamp_ns(TimeMsg(sec=sec, nanosec=nanosec)) == expected
        assert stamp_ns(bag_time(sec=sec, nanosec=nanosec)) == expected
        assert stamp_seconds(TimeMsg(sec=sec, nanosec=nanosec)) == expected / NS_PER_S


def test_durations_built_by_rclpy_read_back():
    for seconds in (0.0, 0.25, 1.5, 12.000000001):
        message = Duration(seconds=seconds).to_msg()
        assert abs(stamp_seconds(message) - seconds) < 1e-9
