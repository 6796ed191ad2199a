# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The sensor_source node as a process: bag replay, synthetic pacing, start-up errors.

* A bag replayed with ``rate_mode: max`` and reliable sensor QoS arrives complete: every
  image with the bag's header stamp and pixels, a camera_info with the same header, every
  IMU sample; the process then exits 0 by itself.
* A missing file or an invalid parameter: exit code 1, one error line, no traceback.
* The synthetic source with ``rate_mode: fixed`` publishes frames until stopped, and a
  SIGINT ends it cleanly (exit code 0).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore
from sensor_msgs.msg import CameraInfo, Image, Imu

from edge_offload_testing import node_command, spin_until, wait_for_publishers

TYPESTORE = get_typestore(Stores.ROS2_KILTED)
FRAMES = 6
IMU_PER_FRAME = 4
START_NS = 1_700_000_000 * 10**9
PERIOD_NS = 40_000_000
K = [300.0, 0.0, 7.5, 0.0, 300.0, 5.5, 0.0, 0.0, 1.0]
# Sensor-data QoS (best effort, volatile) with room for a replay burst.
SENSOR_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=200,
    reliability=qos_profile_sensor_data.reliability,
    durability=qos_profile_sensor_data.durability,
)
# What a lossless replay is checked with: best effort may drop a full-speed burst.
RELIABLE_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=200,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=qos_profile_sensor_data.durability,
)


def _command(**parameters: object) -> list[str]:
    return node_command('people_following.sensor_source_node', **parameters)


def _pixels(index: int) -> np.ndarray:
    return np.random.default_rng(index).integers(0, 256, (12, 16, 3), dtype=np.uint8)


def _write_bag(path: Path) -> None:
    types = TYPESTORE.types

    def header(stamp_ns: int):
        sec, nanosec = divmod(stamp_ns, 10**9)
        stamp = types['builtin_interfaces/msg/Time'](sec=sec, nanosec=nanosec)
        return types['std_msgs/msg/Header'](stamp=stamp, frame_id='recorded')

    vector = types['geometry_msgs/msg/Vector3']
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        image_c = writer.add_connection('/cam/image', 'sensor_msgs/msg/Image', typestore=TYPESTORE)
        info_c = writer.add_connection(
            '/cam/info', 'sensor_msgs/msg/CameraInfo', typestore=TYPESTORE
        )
        imu_c = writer.add_connection('/imu', 'sensor_msgs/msg/Imu', typestore=TYPESTORE)
        for index in range(FRAMES):
            stamp = START_NS + index * PERIOD_NS
            for sub in range(IMU_PER_FRAME):
                imu_stamp = stamp + sub * PERIOD_NS // IMU_PER_FRAME
                imu = types['sensor_msgs/msg/Imu'](
                    header=header(imu_stamp),
                    orientation=types['geometry_msgs/msg/Quaternion'](x=0.0, y=0.0, z=0.0, w=1.0),
                    orientation_covariance=np.zeros(9),
                    angular_velocity=vector(x=0.0, y=0.0, z=0.25),
                    angular_velocity_covariance=np.zeros(9),
                    linear_acceleration=vector(x=0.0, y=0.0, z=9.8),
                    linear_acceleration_covariance=np.zeros(9),
                )
                writer.write(imu_c, imu_stamp, TYPESTORE.serialize_cdr(imu, imu.__msgtype__))
            pixels = _pixels(index)
            image = types['sensor_msgs/msg/Image'](
                header=header(stamp),
                height=12,
                width=16,
                encoding='rgb8',
                is_bigendian=0,
                step=48,
                data=pixels.reshape(-1),
            )
            info = types['sensor_msgs/msg/CameraInfo'](
                header=header(stamp),
                height=12,
                width=16,
                distortion_model='plumb_bob',
                d=np.zeros(5),
                k=np.array(K),
                r=np.eye(3).reshape(-1),
                p=np.array([300.0, 0.0, 7.5, 0.0, 0.0, 300.0, 5.5, 0.0, 0.0, 0.0, 1.0, 0.0]),
                binning_x=0,
                binning_y=0,
                roi=types['sensor_msgs/msg/RegionOfInterest'](
                    x_offset=0, y_offset=0, height=0, width=0, do_rectify=False
                ),
            )
            writer.write(info_c, stamp + 1, TYPESTORE.serialize_cdr(info, info.__msgtype__))
            writer.write(image_c, stamp + 1, TYPESTORE.serialize_cdr(image, image.__msgtype__))


def _stamp_ns(message) -> int:
    return message.header.stamp.sec * 10**9 + message.header.stamp.nanosec


def _listen(ros_context, ros_executor, qos: QoSProfile):
    """Yield a node with subscriptions to image_raw, camera_info and imu."""
    node = Node('sensor_source_listener', context=ros_context)
    ros_executor.add_node(node)
    received = {'image_raw': [], 'camera_info': [], 'imu': []}
    subscriptions = [
        node.create_subscription(kind, topic, received[topic].append, qos)
        for kind, topic in ((Image, 'image_raw'), (CameraInfo, 'camera_info'), (Imu, 'imu'))
    ]
    yield node, received, subscriptions
    node.destroy_node()


@pytest.fixture
def listener(ros_context, ros_executor):
    """Listen with the sensor-data profile (best effort), as a live consumer does."""
    yield from _listen(ros_context, ros_executor, SENSOR_QOS)


@pytest.fixture
def reliable_listener(ros_context, ros_executor):
    """Listen reliably, for lossless replays (reliable_sensor_qos on the source)."""
    yield from _listen(ros_context, ros_executor, RELIABLE_QOS)


def _start_replay(tmp_path, listener, ros_executor, ros_processes, **parameters):
    """Start a paused full-speed replay of a test bag; un-pause it once the graph is matched."""
    bag = tmp_path / 'bag'
    _write_bag(bag)
    node, _, subscriptions = listener
    process = ros_processes.start(
        _command(
            source='bag',
            uri=bag,
            bag_image_topic='/cam/image',
            bag_camera_info_topic='/cam/info',
            bag_imu_topic='/imu',
            rate_mode='max',
            reliable_sensor_qos=True,
            # A replay at full speed is over before discovery would finish: the node waits
            # until it sees our subscriptions, and starts paused until we see its publishers.
            wait_for_subscribers=1,
            paused=True,
            **parameters,
        ),
        name='sensor_source',
    )
    for subscription in subscriptions:
        assert wait_for_publishers(ros_executor, subscription, timeout_s=30.0), (
            f'no publisher for {subscription.topic_name}:\n' + ros_processes.output(process)
        )
    client = AsyncParameterClient(node, 'sensor_source')
    assert spin_until(ros_executor, client.services_are_ready, timeout_s=30.0)
    future = client.set_parameters([Parameter('paused', value=False)])
    assert spin_until(ros_executor, future.done, timeout_s=10.0)
    assert future.result().results[0].successful
    return process


def test_bag_replay_publishes_every_message_then_exits_0(
    tmp_path, reliable_listener, ros_executor, ros_processes
):
    listener = reliable_listener
    _, received, _ = listener
    process = _start_replay(
        tmp_path,
        listener,
        ros_executor,
        ros_processes,
        frame_id='test_optical',
        imu_frame_id='test_imu',
    )

    def complete() -> bool:
        return (
            len(received['image_raw']) >= FRAMES
            and len(received['camera_info']) >= FRAMES
            and len(received['imu']) >= FRAMES * IMU_PER_FRAME
        )

    assert spin_until(ros_executor, complete, timeout_s=30.0), (
        f'received {[len(messages) for messages in received.values()]}:\n'
        + ros_processes.output(process)
    )
    assert process.wait(timeout=15.0) == 0, ros_processes.output(process)
    output = ros_processes.output(process)
    assert f'end of source: published {FRAMES} frames and {FRAMES * IMU_PER_FRAME} IMU' in output

    images, infos, imus = received['image_raw'], received['camera_info'], received['imu']
    assert [_stamp_ns(image) for image in images] == [
        START_NS + index * PERIOD_NS for index in range(FRAMES)
    ]
    for index, (image, info) in enumerate(zip(images, infos, strict=True)):
        assert image.header.frame_id == 'test_optical'
        assert image.encoding == 'rgb8'
        assert (image.height, image.width, image.step) == (12, 16, 48)
        pixels = np.frombuffer(bytes(image.data), np.uint8).reshape(12, 16, 3)
        np.testing.assert_array_equal(pixels, _pixels(index))
        assert info.header == image.header
        assert list(info.k) == K
        assert (info.width, info.height) == (16, 12)
    assert [_stamp_ns(imu) for imu in imus] == [
        START_NS + index * PERIOD_NS // IMU_PER_FRAME for index in range(FRAMES * IMU_PER_FRAME)
    ]
    assert all(imu.header.frame_id == 'test_imu' for imu in imus)
    assert imus[0].angular_velocity.z == 0.25
    assert imus[0].linear_acceleration.z == 9.8


def test_looping_replay_keeps_stamps_increasing_until_max_frames(
    tmp_path, reliable_listener, ros_executor, ros_processes
):
    listener = reliable_listener
    _, received, _ = listener
    frames = FRAMES + 3
    process = _start_replay(
        tmp_path, listener, ros_executor, ros_processes, loop=True, max_frames=frames
    )
    assert spin_until(ros_executor, lambda: len(received['image_raw']) >= frames, 30.0), (
        ros_processes.output(process)
    )
    assert process.wait(timeout=15.0) == 0, ros_processes.output(process)
    assert f'max_frames ({frames}) reached' in ros_processes.output(process)
    images = received['image_raw']
    # The second pass goes on one frame period after the first pass's last frame.
    assert [_stamp_ns(image) for image in images] == [
        START_NS + index * PERIOD_NS for index in range(frames)
    ]
    for index, image in enumerate(images):
        pixels = np.frombuffer(bytes(image.data), np.uint8).reshape(12, 16, 3)
        np.testing.assert_array_equal(pixels, _pixels(index % FRAMES))
    imu_stamps = [_stamp_ns(imu) for imu in received['imu']]
    assert imu_stamps == sorted(set(imu_stamps))


@pytest.mark.parametrize(
    ('parameters', 'expected'),
    [
        ({'source': 'video', 'uri': '/nonexistent/clip_1234.avi'}, '/nonexistent/clip_1234.avi'),
        ({'source': 'lidar'}, "parameter source is 'lidar'"),
    ],
)
def test_startup_error_is_one_line_and_exit_code_1(ros_domain_id, parameters, expected):
    result = subprocess.run(
        _command(**parameters), capture_output=True, text=True, timeout=60.0, check=False
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    errors = [line for line in output.splitlines() if '[ERROR]' in line]
    assert len(errors) == 1, output
    assert expected in errors[0]
    assert 'Traceback' not in result.stderr


def test_synthetic_fixed_rate_publishes_until_stopped(listener, ros_executor, ros_processes):
    _, received, _ = listener
    fps = 25.0
    process = ros_processes.start(
        _command(
            source='synthetic',
            width=64,
            height=48,
            fps=fps,
            imu_rate_hz=50.0,
            rate_mode='fixed',
            rate_hz=20.0,
            output_encoding='bgr8',
        ),
        name='sensor_source',
    )
    assert spin_until(ros_executor, lambda: len(received['image_raw']) >= 5, timeout_s=30.0), (
        ros_processes.output(process)
    )
    images = received['image_raw']
    assert images[0].encoding == 'bgr8'
    assert (images[0].width, images[0].height) == (64, 48)
    # Stamps are the source's clock (1 / fps apart), whatever the publishing rate.
    stamps = [_stamp_ns(image) for image in images]
    assert all(round((b - a) * fps / 1e9) >= 1 for a, b in zip(stamps, stamps[1:], strict=False))
    # Each camera_info carries its frame's stamp. Best effort may lose either of a pair
    # (CI once got a first camera_info whose image was lost), so compare the stamps both got.
    info_stamps = {_stamp_ns(info) for info in received['camera_info']}
    assert info_stamps & set(stamps), (sorted(info_stamps)[:5], stamps[:5])
    assert received['imu'], 'no synthetic IMU samples'
    assert process.poll() is None
    codes = ros_processes.stop_all()
    assert codes['sensor_source'] == 0, ros_processes.output(process)
    assert 'stopped: published' in ros_processes.output(process)
