# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""A status line per second for the people-tracking graph, and an optional video recording.

Subscribes ``people`` (PersonArray), ``camera_info`` (CameraInfo: one per frame captured,
with the frame's header; small, so counting frames costs nothing), ``link_state``
(LinkState) and, when recording, ``people/annotated`` (Image). Every ``report_period_s``
it logs the result rate and the latency from capture stamp to result (``now -
header.stamp``, p50/p95 over the period), the results, frames captured and frames without
a result so far (captured - results, at least 0), the offloading mode, the link state and
the number of people; :meth:`TrackingMonitorNode.final_report` says the same for the whole
run. ``camera_info`` is subscribed with the sensor QoS of ``reliable_sensor_qos`` (set it
as the source's for exact counts). Annotated frames go to a video file through a bounded
queue and a writer thread, so encoding never blocks the executor.
"""

from __future__ import annotations

import collections
import math
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
from rclpy.node import Node
from rclpy.time import Time
from sensor_msgs.msg import CameraInfo, Image

from edge_offload.image_convert import ImageFormatError, imgmsg_to_cv2
from edge_offload.ros_node_main import run_node
from edge_offload.ros_params import ParamSpec, declare_parameters, parameter_values
from edge_offload.sensor_qos import RELIABLE_SENSOR_QOS_DESCRIPTION, sensor_qos
from offload_interfaces.msg import LinkState, PersonArray

PARAMETERS = (
    ParamSpec('report_period_s', 1.0, 'Period of the status line.', 0.1, 3600.0),
    ParamSpec('record_path', '', "Video file for the annotated frames; '' = no recording."),
    ParamSpec('record_fps', 10.0, 'Frame rate written into the video file.', 0.1, 240.0),
    ParamSpec('record_queue_size', 32, 'Frames waiting for the video writer.', 1, 1024),
    ParamSpec(
        'reliable_sensor_qos',
        False,
        'QoS of camera_info, which counts the frames captured: ' + RELIABLE_SENSOR_QOS_DESCRIPTION,
    ),
)


@dataclass
class Summary:
    """Totals over a whole run, for the final report."""

    results: int = 0
    # camera_info messages: one per frame the source published.
    frames_captured: int = 0
    people: int = 0
    latencies_s: list[float] = field(default_factory=list)
    modes: collections.Counter = field(default_factory=collections.Counter)
    frames_recorded: int = 0
    # Queued when the monitor had to close before they could be written.
    frames_not_recorded: int = 0
    first_result_s: float | None = None
    last_result_s: float | None = None

    def fps(self) -> float:
        """Mean result rate between the first and the last result."""
        if self.first_result_s is None or self.last_result_s is None or self.results < 2:
            return 0.0
        return (self.results - 1) / max(self.last_result_s - self.first_result_s, 1e-9)

    def frames_without_result(self) -> int:
        """Frames captured that have no result (yet): dropped or still on their way."""
        return max(0, self.frames_captured - self.results)


def _percentile_ms(values: list[float], q: float) -> str:
    return f'{np.percentile(values, q) * 1e3:.0f}' if values else '-'


def _rate(bps: float) -> str:
    return 'n/a' if math.isnan(bps) else f'{bps / 1e6:.1f} Mbit/s'


class TrackingMonitorNode(Node):
    """Log the graph's throughput and latency each period; record annotated frames."""

    def __init__(self, **kwargs) -> None:  # noqa: ANN003 - rclpy Node options
        super().__init__('tracking_monitor', **kwargs)
        declare_parameters(self, PARAMETERS)
        self._config = parameter_values(self, PARAMETERS)
        self.summary = Summary()
        self._period_latencies: list[float] = []
        self._period_results = 0
        self._last_people = 0
        self._last_mode = '-'
        self._link: LinkState | None = None
        self._period_start = time.monotonic()
        self._record_queue: queue.Queue[np.ndarray | None] = queue.Queue(
            self._config['record_queue_size']
        )
        self._writer_thread: threading.Thread | None = None
        # Set by close(): queued frames after this instant are dropped, so the file is
        # finalized in time.
        self._close_deadline: float | None = None
        self.people_subscription = self.create_subscription(
            PersonArray, 'people', self._on_people, 10
        )
        self.create_subscription(LinkState, 'link_state', self._on_link_state, 10)
        self.create_subscription(
            CameraInfo,
            'camera_info',
            self._on_camera_info,
            sensor_qos(self._config['reliable_sensor_qos']),
        )
        if self._config['record_path']:
            self.create_subscription(
                Image,
                'people/annotated',
                self._on_annotated,
                sensor_qos(self._config['reliable_sensor_qos']),
            )
            self._writer_thread = threading.Thread(
                target=self._write_video, name='video_writer', daemon=True
            )
            self._writer_thread.start()
        self.create_timer(self._config['report_period_s'], self._report)

    def _on_people(self, message: PersonArray) -> None:
        now = time.monotonic()
        latency_s = (self.get_clock().now() - Time.from_msg(message.header.stamp)).nanoseconds
        latency_s *= 1e-9
        self._period_latencies.append(latency_s)
        self._period_results += 1
        self._last_people = len(message.people)
        self._last_mode = message.offload_mode
        summary = self.summary
        summary.results += 1
        summary.people += len(message.people)
        summary.latencies_s.append(latency_s)
        summary.modes[message.offload_mode] += 1
        summary.first_result_s = summary.first_result_s or now
        summary.last_result_s = now

    def _on_camera_info(self, message: CameraInfo) -> None:
        self.summary.frames_captured += 1

    def _on_link_state(self, message: LinkState) -> None:
        self._link = message

    def _on_annotated(self, message: Image) -> None:
        try:
            frame = imgmsg_to_cv2(message, 'bgr8')
        except ImageFormatError as error:
            self.get_logger().warning(f'cannot record frame: {error}', throttle_duration_sec=5.0)
            return
        try:
            self._record_queue.put_nowait(frame)
        except queue.Full:
            self.get_logger().warning(
                'video writer is behind; frame not recorded', throttle_duration_sec=5.0
            )

    def _write_video(self) -> None:
        writer = None
        path = Path(self._config['record_path']).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            while (frame := self._record_queue.get()) is not None:
                deadline = self._close_deadline
                if deadline is not None and time.monotonic() > deadline:
                    self.summary.frames_not_recorded += 1
                    continue
                if writer is None:
                    height, width = frame.shape[:2]
                    fourcc = cv2.VideoWriter_fourcc(*'mp4v')
                    writer = cv2.VideoWriter(
                        str(path), fourcc, self._config['record_fps'], (width, height)
                    )
                    if not writer.isOpened():
                        self.get_logger().error(f'cannot write video {path}')
                        return
                writer.write(frame)
                self.summary.frames_recorded += 1
        finally:
            if writer is not None:
                writer.release()

    def _report(self) -> None:
        elapsed = max(time.monotonic() - self._period_start, 1e-9)
        self._period_start = time.monotonic()
        link = self._link
        if link is None:
            link_text = 'link ?'
        elif not link.connected:
            link_text = 'link DOWN'
        else:
            link_text = f'link up {_rate(link.uplink_bandwidth_bps)} rtt {link.rtt_s * 1e3:.1f} ms'
        summary = self.summary
        self.get_logger().info(
            f'fps {self._period_results / elapsed:4.1f} | latency p50 '
            f'{_percentile_ms(self._period_latencies, 50)} ms p95 '
            f'{_percentile_ms(self._period_latencies, 95)} ms | results {summary.results} of '
            f'{summary.frames_captured} frames, {summary.frames_without_result()} dropped | '
            f'mode {self._last_mode} | {link_text} | people {self._last_people}'
        )
        self._period_latencies = []
        self._period_results = 0

    def close(self, timeout_s: float = 30.0) -> None:
        """Finish the video: write the queued frames for up to ``timeout_s``, drop the rest."""
        if self._writer_thread is not None:
            self._close_deadline = time.monotonic() + timeout_s
            self._record_queue.put(None)
            self._writer_thread.join(timeout=timeout_s + 1.0)
            self._writer_thread = None
            if self.summary.frames_not_recorded:
                self.get_logger().warning(
                    f'{self.summary.frames_not_recorded} queued frames not recorded at close'
                )

    def final_report(self) -> str:
        """Return a one-line summary of the whole run."""
        summary = self.summary
        modes = ', '.join(f'{mode} {count}' for mode, count in summary.modes.most_common())
        return (
            f'{summary.results} results of {summary.frames_captured} frames captured '
            f'({summary.frames_without_result()} dropped: no result) at {summary.fps():.1f} fps, '
            f'capture-to-result latency p50 {_percentile_ms(summary.latencies_s, 50)} ms p95 '
            f'{_percentile_ms(summary.latencies_s, 95)} ms, modes: {modes or "-"}, '
            f'{summary.people} people in total, {summary.frames_recorded} frames recorded'
        )


# A stopped node finishes its video within this (ros_node_main.SHUTDOWN_BUDGET_S).
_CLOSE_ON_SIGNAL_S = 0.8


def main(args: list[str] | None = None) -> int:
    """Run the monitor until shutdown; exit code 1 on a bad configuration."""

    def release(node: TrackingMonitorNode) -> None:
        node.close(timeout_s=_CLOSE_ON_SIGNAL_S)
        node.get_logger().info(node.final_report())

    return run_node(TrackingMonitorNode, 'tracking_monitor', args, release=release)


if __name__ == '__main__':
    sys.exit(main())
