# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The scheduler node's /diagnostics levels and messages (pure functions, no ROS graph)."""

from __future__ import annotations

from accumo_ros.scheduler_node import OdometryHealth, odometry_status, offloading_status
from edge_offload.diagnostics import OK, WARN


def _health(running: float, since: float | None) -> OdometryHealth:
    return OdometryHealth(
        seconds_running=running,
        seconds_since_pose=since,
        position_sigma_m=0.4,
        recoveries=0,
        imu_samples=200,
    )


def test_offloading_warns_while_failures_keep_the_robot_local() -> None:
    level, message = offloading_status({'frames_processed': 10}, 1.5, 'deadline exceeded', 'rr')
    assert level == WARN
    assert 'deadline exceeded' in message
    assert 'local algorithms for 1.5 s' in message
    level, message = offloading_status(
        {'frames_processed': 10, 'offloads_done': 4}, 0.0, 'deadline exceeded', 'accumo'
    )
    assert (level, message) == (OK, 'accumo: 4 offloads done')
    assert offloading_status({}, 0.0, '', 'accumo') == (OK, 'waiting for camera frames')


def test_odometry_warns_after_the_stale_time_without_a_fused_pose() -> None:
    assert odometry_status(None, 3.0) == (OK, 'waiting for camera frames')
    assert odometry_status(_health(2.0, None), 3.0) == (OK, 'no VO pose fused yet')
    level, message = odometry_status(_health(4.0, None), 3.0)
    assert level == WARN
    assert message == 'no VO pose fused in 4.0 s: IMU dead reckoning (position sigma 0.40 m)'
    assert odometry_status(_health(60.0, 1.25), 3.0) == (OK, 'VO pose fused 1.2 s ago')
    level, message = odometry_status(_health(60.0, 3.5), 3.0)
    assert level == WARN
    assert message.startswith('no VO pose fused for 3.5 s: IMU dead reckoning')


def test_odometry_without_imu_says_so_first() -> None:
    health = OdometryHealth(
        seconds_running=20.0,
        seconds_since_pose=None,
        position_sigma_m=0.01,
        recoveries=0,
        imu_samples=0,
    )
    level, message = odometry_status(health, 3.0)
    assert level == WARN
    assert message == 'no IMU samples on imu: the odometry pose cannot move'
