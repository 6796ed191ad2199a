# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Stamps of the sensor_source node: release times by default, deterministic on request.

A video file, an image folder and the synthetic pattern have no capture clock. With
``start_time_s`` 0 every frame (and synthetic IMU sample) is stamped with the wall clock
when it is published, so the latency measured downstream is what a robot's camera would
give: not shifted by the wait for subscribers, strictly increasing. With ``start_time_s``
the stamps are the start plus the position in the source, as before.
"""

from __future__ import annotations

import time

import numpy as np
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, Image, Imu

from edge_offload_testing import spin_until
from people_following.sensor_source_node import SensorSourceNode

RELIABLE_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=200,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=qos_profile_sensor_data.durability,
)
# A frame's stamp is taken right before publishing: it typically arrives in this process
# within this. Checked on the median: one message delivered late on a loaded machine
# (75 ms seen in CI) says nothing about stamping, and a stamp from when the file opened
# would be off by the whole wait for the subscriber (0.5-1 s) on every frame.
MAX_TRANSPORT_NS = 50_000_000


def _stamped_at_publication(delays: list[int]) -> bool:
    return all(delay >= 0 for delay in delays) and np.median(delays) < MAX_TRANSPORT_NS


def _stamp_ns(message) -> int:  # noqa: ANN001 - any message with a header
    return message.header.stamp.sec * 10**9 + message.header.stamp.nanosec


def _source(ros_context, **parameters: object) -> SensorSourceNode:  # noqa: ANN001
    overrides = [Parameter(name, value=value) for name, value in parameters.items()]
    return SensorSourceNode(context=ros_context, parameter_overrides=overrides)


class _Listener:
    """image_raw, camera_info and imu as they arrive, with the wall clock at arrival."""

    def __init__(self, ros_context) -> None:  # noqa: ANN001
        self.node = Node('stamp_listener', context=ros_context)
        self.received: dict[str, list[tuple[int, object]]] = {
            'image_raw': [],
            'camera_info': [],
            'imu': [],
        }
        for kind, topic in ((Image, 'image_raw'), (CameraInfo, 'camera_info'), (Imu, 'imu')):
            self.node.create_subscription(
                kind,
                topic,
                lambda message, topic=topic: self.received[topic].append(
                    (time.time_ns(), message)
                ),
                RELIABLE_QOS,
            )

    def stamps(self, topic: str) -> list[int]:
        return [_stamp_ns(message) for _, message in self.received[topic]]

    def delays_ns(self, topic: str) -> list[int]:
        return [arrival - _stamp_ns(message) for arrival, message in self.received[topic]]


def test_video_frames_are_stamped_when_published_not_when_the_file_opened(
    ros_context, ros_executor
):
    frames = 8
    source = _source(
        ros_context,
        source='video',
        uri='asset:media/opencv/vtest.avi',
        rate_mode='realtime',
        max_frames=frames,
        wait_for_subscribers=1,
        reliable_sensor_qos=True,
    )
    listener = None
    try:
        ros_executor.add_node(source)
        opened_ns = time.time_ns()
        # Nobody listens yet: the source holds its first frame.
        spin_until(ros_executor, lambda: False, timeout_s=1.0)
        listener = _Listener(ros_context)
        ros_executor.add_node(listener.node)
        subscribed_ns = time.time_ns()
        received = listener.received
        assert spin_until(
            ros_executor,
            lambda: (
                len(received['image_raw']) >= frames and len(received['camera_info']) >= frames
            ),
            timeout_s=30.0,
        ), {topic: len(messages) for topic, messages in received.items()}
        assert spin_until(ros_executor, source.finished.is_set, timeout_s=10.0)
    finally:
        if listener is not None:
            listener.node.destroy_node()
        source.destroy_node()

    stamps = listener.stamps('image_raw')
    assert len(stamps) == frames
    assert all(b > a for a, b in zip(stamps, stamps[1:], strict=False)), stamps
    # Stamped when published, after the wait for the subscriber: a stamp from the file's
    # open time plus its position would be before the listener was there.
    assert stamps[0] >= subscribed_ns > opened_ns + 900_000_000
    delays = listener.delays_ns('image_raw')
    assert _stamped_at_publication(delays), delays
    # Pacing still follows the file's timeline (10 fps).
    period_s = np.median(np.diff(stamps)) / 1e9
    assert 0.08 < period_s < 0.12, period_s
    images = [message for _, message in received['image_raw']]
    infos = [message for _, message in received['camera_info']]
    for image, info in zip(images, infos, strict=True):
        assert info.header == image.header


def test_synthetic_frames_and_imu_share_the_release_clock(ros_context, ros_executor):
    source = _source(
        ros_context,
        source='synthetic',
        width=64,
        height=48,
        fps=20.0,
        imu_rate_hz=100.0,
        rate_mode='realtime',
        max_frames=6,
        wait_for_subscribers=1,
        reliable_sensor_qos=True,
    )
    listener = _Listener(ros_context)
    try:
        ros_executor.add_node(source)
        ros_executor.add_node(listener.node)
        assert spin_until(ros_executor, source.finished.is_set, timeout_s=30.0)
        spin_until(ros_executor, lambda: False, timeout_s=0.2)
    finally:
        listener.node.destroy_node()
        source.destroy_node()
    frames, imus = listener.stamps('image_raw'), listener.stamps('imu')
    assert len(frames) == 6
    assert len(imus) >= 20
    for stamps in (frames, imus):
        assert all(b > a for a, b in zip(stamps, stamps[1:], strict=False))
    for topic in ('image_raw', 'imu'):
        delays = listener.delays_ns(topic)
        assert _stamped_at_publication(delays), (topic, delays)
    # Both streams keep the source's timeline on the one clock: 5 IMU samples per frame
    # period, interleaved with the frames.
    assert 0.04 < np.median(np.diff(frames)) / 1e9 < 0.06
    assert 0.008 < np.median(np.diff(imus)) / 1e9 < 0.012
    pairs = zip(frames, frames[1:], strict=False)
    between = [sum(a < stamp < b for stamp in imus) for a, b in pairs]
    assert all(4 <= count <= 6 for count in between), between


def test_an_explicit_start_time_gives_deterministic_stamps(ros_context, ros_executor):
    start_s, fps, imu_hz = 1_700_000_000.0, 25.0, 100.0
    source = _source(
        ros_context,
        source='synthetic',
        width=64,
        height=48,
        fps=fps,
        imu_rate_hz=imu_hz,
        start_time_s=start_s,
        rate_mode='fixed',
        rate_hz=100.0,
        max_frames=5,
        wait_for_subscribers=1,
        reliable_sensor_qos=True,
    )
    listener = _Listener(ros_context)
    try:
        ros_executor.add_node(source)
        ros_executor.add_node(listener.node)
        assert spin_until(ros_executor, source.finished.is_set, timeout_s=30.0)
        spin_until(ros_executor, lambda: False, timeout_s=0.2)
    finally:
        listener.node.destroy_node()
        source.destroy_node()
    start_ns = round(start_s * 1e9)
    assert listener.stamps('image_raw') == [start_ns + round(k * 1e9 / fps) for k in range(5)]
    imus = listener.stamps('imu')
    assert imus == [start_ns + round(k * 1e9 / imu_hz) for k in range(len(imus))]
