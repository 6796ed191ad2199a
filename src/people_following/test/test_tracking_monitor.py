# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The tracking monitor counts frames captured (camera_info) against results (people).

Its final report and status line say: results, frames captured, frames without a result
(captured - results, never below 0), the result rate and the capture-to-result latency.
"""

from __future__ import annotations

import time

from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo
from std_msgs.msg import Header

from edge_offload.sensor_qos import sensor_qos
from edge_offload_testing import spin_until, wait_for_subscribers
from offload_interfaces.msg import PersonArray
from people_following.tracking_monitor_node import Summary, TrackingMonitorNode


def _header(stamp_ns: int) -> Header:
    header = Header(frame_id='camera_optical_frame')
    header.stamp.sec, header.stamp.nanosec = divmod(stamp_ns, 10**9)
    return header


def test_frames_without_a_result_are_never_negative():
    summary = Summary(results=5, frames_captured=3)
    assert summary.frames_without_result() == 0
    summary.frames_captured = 8
    assert summary.frames_without_result() == 3


def test_monitor_reports_results_frames_captured_dropped_and_latency(ros_context, ros_executor):
    monitor = TrackingMonitorNode(
        context=ros_context,
        parameter_overrides=[
            Parameter('reliable_sensor_qos', value=True),
            Parameter('report_period_s', value=0.2),
        ],
    )
    test = Node('tracking_monitor_test', context=ros_context)
    try:
        ros_executor.add_node(monitor)
        ros_executor.add_node(test)
        info_pub = test.create_publisher(CameraInfo, 'camera_info', sensor_qos(True))
        people_pub = test.create_publisher(
            PersonArray, 'people', QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        )
        assert wait_for_subscribers(ros_executor, info_pub)
        assert wait_for_subscribers(ros_executor, people_pub)
        stamps = []
        for _ in range(4):
            stamp = time.time_ns()
            stamps.append(stamp)
            info_pub.publish(CameraInfo(header=_header(stamp)))
            spin_until(ros_executor, lambda: False, timeout_s=0.02)
        # Three of the four frames get a result, 50 ms after capture.
        for stamp in stamps[:3]:
            while time.time_ns() < stamp + 50_000_000:
                ros_executor.spin_once(timeout_sec=0.005)
            people_pub.publish(PersonArray(header=_header(stamp), offload_mode='local'))
        summary = monitor.summary
        assert spin_until(
            ros_executor,
            lambda: summary.results == 3 and summary.frames_captured == 4,
            timeout_s=10.0,
        ), (summary.results, summary.frames_captured)
        # A status line or two with the counts.
        spin_until(ros_executor, lambda: False, timeout_s=0.5)
        report = monitor.final_report()
    finally:
        test.destroy_node()
        monitor.close()
        monitor.destroy_node()
    assert summary.frames_without_result() == 1
    assert all(0.05 <= latency < 0.2 for latency in summary.latencies_s), summary.latencies_s
    assert report.startswith('3 results of 4 frames captured (1 dropped: no result) at ')
    assert 'capture-to-result latency p50 ' in report
    assert 'modes: local 3' in report
