# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Message stamps as numbers: the one place the workspace converts them.

``builtin_interfaces/Time`` and ``Duration`` from rclpy and the same types read by
``rosbags`` (no ROS needed) alike: anything with ``sec`` and ``nanosec``. The values equal
rclpy's ``Time.from_msg(stamp).nanoseconds`` (tested); rclpy's own class refuses the
rosbags types. To build a ``Duration`` message in a node use rclpy's
``Duration(seconds=...).to_msg()``.
"""

from __future__ import annotations

from typing import Protocol

NS_PER_S = 1_000_000_000


class Stamp(Protocol):
    """A ``builtin_interfaces/Time`` or ``Duration``, from rclpy or rosbags."""

    sec: int
    nanosec: int


def stamp_ns(stamp: Stamp) -> int:
    """Return a stamp as integer nanoseconds (exact)."""
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def stamp_seconds(stamp: Stamp) -> float:
    """Return a stamp as float seconds."""
    return stamp_ns(stamp) / NS_PER_S
