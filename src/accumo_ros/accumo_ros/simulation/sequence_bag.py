# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Write a synthetic sequence as a rosbag2 bag with standard messages, and read it back.

Topics (all stamps are the sensor time, starting at ``BAG_START_NS``):

=============================  ============================  ============================
topic                          type                          content
=============================  ============================  ============================
``/camera/image_raw``          ``sensor_msgs/Image``         ``rgb8``, frame
                                                             ``camera_optical_frame``
``/camera/depth/image_raw``    ``sensor_msgs/Image``         ``32FC1`` metres (REP 118)
``/camera/camera_info``        ``sensor_msgs/CameraInfo``    pinhole, no distortion
``/imu/data``                  ``sensor_msgs/Imu``           ``base_link``; no orientation
                                                             (covariance[0] = -1, REP 145)
``/ground_truth/odom``         ``nav_msgs/Odometry``         ``world`` → ``base_link``;
                                                             twist in ``base_link``
``/tf_static``                 ``tf2_msgs/TFMessage``        ``base_link`` →
                                                             ``camera_optical_frame``
=============================  ============================  ============================

The generator's settings and the measured category figures go into the bag's metadata
(``custom_data``, shown by ``ros2 bag info``) under ``accumo.*`` keys. Bags are MCAP by
default, with zstd message compression (``ros2 bag play`` decompresses it transparently).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import yaml
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode
from rosbags.typesys import Stores, get_typestore

from accumo_ros.geometry import T_BODY_OPTICAL, make_poses, quaternions_xyzw, rotations_from_xyzw
from accumo_ros.simulation.imu import ImuNoise, ImuSeries
from accumo_ros.simulation.scene import RenderedFrame, Scene
from accumo_ros.simulation.sequence import SequenceConfig, SyntheticFrame, SyntheticSequence
from accumo_ros.simulation.trajectory import TrajectoryState
from edge_offload.camera_model import PinholeCamera
from edge_offload.image_convert import ImageFormatError, image_fields, imgmsg_to_cv2
from edge_offload.stamps import stamp_ns

TYPESTORE = get_typestore(Stores.ROS2_KILTED)
BAG_START_NS = 1_700_000_000_000_000_000
IMAGE_TOPIC = '/camera/image_raw'
DEPTH_TOPIC = '/camera/depth/image_raw'
CAMERA_INFO_TOPIC = '/camera/camera_info'
IMU_TOPIC = '/imu/data'
GROUND_TRUTH_TOPIC = '/ground_truth/odom'
TF_STATIC_TOPIC = '/tf_static'
WORLD_FRAME = 'world'
BODY_FRAME = 'base_link'
OPTICAL_FRAME = 'camera_optical_frame'
METADATA_PREFIX = 'accumo.'

_IMAGE = 'sensor_msgs/msg/Image'
_INFO = 'sensor_msgs/msg/CameraInfo'
_IMU = 'sensor_msgs/msg/Imu'
_ODOM = 'nav_msgs/msg/Odometry'
_TF = 'tf2_msgs/msg/TFMessage'


class SequenceBagError(ValueError):
    """A bag is not a readable AccuMO sequence."""


def _stamp(seconds: float):  # noqa: ANN202 - a rosbags message class
    total = BAG_START_NS + int(round(seconds * 1e9))
    sec, nanosec = divmod(total, 10**9)
    return TYPESTORE.types['builtin_interfaces/msg/Time'](sec=sec, nanosec=nanosec)


def _header(seconds: float, frame_id: str):  # noqa: ANN202
    return TYPESTORE.types['std_msgs/msg/Header'](stamp=_stamp(seconds), frame_id=frame_id)


def _vector(values: np.ndarray):  # noqa: ANN202
    x, y, z = (float(v) for v in values)
    return TYPESTORE.types['geometry_msgs/msg/Vector3'](x=x, y=y, z=z)


def _quaternion(rotation: np.ndarray):  # noqa: ANN202
    x, y, z, w = (float(v) for v in quaternions_xyzw(rotation[None, :3, :3])[0])
    return TYPESTORE.types['geometry_msgs/msg/Quaternion'](x=x, y=y, z=z, w=w)


def _pixels(message: object, topic: str) -> np.ndarray:
    try:
        return imgmsg_to_cv2(message)
    except ImageFormatError as error:
        raise SequenceBagError(f'{topic}: {error}') from None


def _image(seconds: float, pixels: np.ndarray, encoding: str):  # noqa: ANN202
    fields = image_fields(pixels, encoding)
    # rosbags holds uint8[] fields as NumPy arrays.
    fields['data'] = np.frombuffer(fields['data'], np.uint8)
    return TYPESTORE.types[_IMAGE](header=_header(seconds, OPTICAL_FRAME), **fields)


def _camera_info(seconds: float, intrinsics: PinholeCamera):  # noqa: ANN202
    k = intrinsics.matrix
    projection = np.zeros((3, 4))
    projection[:, :3] = k
    return TYPESTORE.types[_INFO](
        header=_header(seconds, OPTICAL_FRAME),
        height=intrinsics.height,
        width=intrinsics.width,
        distortion_model='plumb_bob',
        d=np.zeros(5),
        k=k.reshape(-1),
        r=np.eye(3).reshape(-1),
        p=projection.reshape(-1),
        binning_x=0,
        binning_y=0,
        roi=TYPESTORE.types['sensor_msgs/msg/RegionOfInterest'](
            x_offset=0, y_offset=0, height=0, width=0, do_rectify=False
        ),
    )


def _imu(seconds: float, gyro: np.ndarray, accel: np.ndarray, config: SequenceConfig):  # noqa: ANN202
    noise = config.imu_noise
    orientation_covariance = np.zeros(9)
    orientation_covariance[0] = -1.0  # REP 145: no orientation estimate
    gyro_variance = noise.gyro_noise_density**2 * config.imu_rate_hz
    accel_variance = noise.accel_noise_density**2 * config.imu_rate_hz
    return TYPESTORE.types[_IMU](
        header=_header(seconds, BODY_FRAME),
        orientation=TYPESTORE.types['geometry_msgs/msg/Quaternion'](x=0.0, y=0.0, z=0.0, w=1.0),
        orientation_covariance=orientation_covariance,
        angular_velocity=_vector(gyro),
        angular_velocity_covariance=(np.eye(3) * gyro_variance).reshape(-1),
        linear_acceleration=_vector(accel),
        linear_acceleration_covariance=(np.eye(3) * accel_variance).reshape(-1),
    )


def _odometry(  # noqa: ANN202
    seconds: float, pose: np.ndarray, velocity_world: np.ndarray, rate_body: np.ndarray
):
    types = TYPESTORE.types
    translation = pose[:3, 3]
    point = types['geometry_msgs/msg/Point'](
        x=float(translation[0]), y=float(translation[1]), z=float(translation[2])
    )
    return types[
        _ODOM
    ](
        header=_header(seconds, WORLD_FRAME),
        child_frame_id=BODY_FRAME,
        pose=types['geometry_msgs/msg/PoseWithCovariance'](
            pose=types['geometry_msgs/msg/Pose'](position=point, orientation=_quaternion(pose)),
            covariance=np.zeros(36),  # ground truth
        ),
        twist=types['geometry_msgs/msg/TwistWithCovariance'](
            twist=types['geometry_msgs/msg/Twist'](
                linear=_vector(pose[:3, :3].T @ velocity_world), angular=_vector(rate_body)
            ),
            covariance=np.zeros(36),
        ),
    )


def _tf_static():  # noqa: ANN202
    types = TYPESTORE.types
    transform = types['geometry_msgs/msg/TransformStamped'](
        header=_header(0.0, BODY_FRAME),
        child_frame_id=OPTICAL_FRAME,
        transform=types['geometry_msgs/msg/Transform'](
            translation=_vector(T_BODY_OPTICAL[:3, 3]),
            rotation=_quaternion(T_BODY_OPTICAL),
        ),
    )
    return types[_TF](transforms=[transform])


def config_to_metadata(config: SequenceConfig) -> dict[str, str]:
    """Flatten the generator settings to ``accumo.*`` strings (JSON for the noise)."""
    values = asdict(config)
    values['imu_noise'] = json.dumps(values['imu_noise'], sort_keys=True)
    return {f'{METADATA_PREFIX}{key}': str(value) for key, value in values.items()}


def config_from_metadata(metadata: dict[str, str]) -> SequenceConfig:
    """Return the generator settings a bag was written with (:func:`config_to_metadata`)."""
    defaults = SequenceConfig()
    values: dict[str, object] = {}
    for item in fields(SequenceConfig):
        text = metadata.get(f'{METADATA_PREFIX}{item.name}')
        if text is None:
            raise SequenceBagError(f'the bag metadata has no {METADATA_PREFIX}{item.name}')
        if item.name == 'imu_noise':
            values[item.name] = ImuNoise(**json.loads(text))
        else:
            values[item.name] = type(getattr(defaults, item.name))(text)
    return SequenceConfig(**values)


def turn_on_biases(sequence: LoadedSequence) -> tuple[np.ndarray, np.ndarray]:
    """Return the IMU's true ``(gyro, accel)`` biases at its first sample (body frame).

    Ground truth for the evaluation, regenerated from the bag's generator settings and
    seed (the bag stores only the measurements): what an IMU calibration on the robot
    would estimate. Raises :class:`SequenceBagError` when the regenerated IMU is not the
    bag's (a bag from another generator version or recorded elsewhere).
    """
    imu = SyntheticSequence(config_from_metadata(sequence.metadata)).imu
    if imu.linear_acceleration.shape != sequence.linear_acceleration.shape or not (
        np.allclose(imu.linear_acceleration, sequence.linear_acceleration, atol=1e-6)
        and np.allclose(imu.angular_velocity, sequence.angular_velocity, atol=1e-6)
    ):
        raise SequenceBagError(
            "the bag's IMU is not what its generator settings give: its biases are unknown"
        )
    return imu.gyro_bias[0].copy(), imu.accel_bias[0].copy()


@dataclass(frozen=True)
class BagSummary:
    """What was written, with the measured category figures."""

    path: Path
    frames: int
    imu_samples: int
    mean_angular_speed: float  # rad/s, ground truth
    mean_dynamic_share: float  # fraction of pixels showing moving boxes
    min_depth_m: float
    max_depth_m: float


_CONNECTIONS = (
    (IMAGE_TOPIC, _IMAGE),
    (DEPTH_TOPIC, _IMAGE),
    (CAMERA_INFO_TOPIC, _INFO),
    (IMU_TOPIC, _IMU),
    (GROUND_TRUTH_TOPIC, _ODOM),
    (TF_STATIC_TOPIC, _TF),
)


class _BagWriter:
    """An open ``Writer`` with a connection per topic; logs each message at its sensor time."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        self.connections = {
            topic: writer.add_connection(topic, msgtype, typestore=TYPESTORE)
            for topic, msgtype in _CONNECTIONS
        }

    def write(self, topic: str, seconds: float, message: object, msgtype: str) -> None:
        """Serialise ``message`` and log it on ``topic`` at ``seconds`` after the bag start."""
        log_ns = BAG_START_NS + int(round(seconds * 1e9))
        self.writer.write(
            self.connections[topic], log_ns, TYPESTORE.serialize_cdr(message, msgtype)
        )


def _write_imu_sample(bag: _BagWriter, imu: ImuSeries, index: int, config: SequenceConfig) -> None:
    t = float(imu.times[index])
    message = _imu(t, imu.angular_velocity[index], imu.linear_acceleration[index], config)
    bag.write(IMU_TOPIC, t, message, _IMU)


def _write_frame(
    bag: _BagWriter, frame: SyntheticFrame, config: SequenceConfig, truth: TrajectoryState
) -> None:
    """Write one frame's image, depth, camera info and ground-truth odometry."""
    t = frame.time_s
    rendered = frame.rendered
    bag.write(IMAGE_TOPIC, t, _image(t, rendered.rgb, 'rgb8'), _IMAGE)
    bag.write(DEPTH_TOPIC, t, _image(t, rendered.depth, '32FC1'), _IMAGE)
    bag.write(CAMERA_INFO_TOPIC, t, _camera_info(t, config.intrinsics), _INFO)
    i = frame.index
    bag.write(
        GROUND_TRUTH_TOPIC,
        t,
        _odometry(t, frame.pose, truth.velocity_world[i], truth.angular_velocity_body[i]),
        _ODOM,
    )


@dataclass
class _FrameFigures:
    """The category figures measured on the rendered frames as they are written."""

    dynamic_shares: list[float] = field(default_factory=list)
    depth_range: list[float] = field(default_factory=lambda: [np.inf, 0.0])

    def add(self, rendered: RenderedFrame, scene: Scene) -> None:
        """Measure one rendered frame."""
        self.dynamic_shares.append(float(rendered.dynamic_mask(scene).mean()))
        self.depth_range = [
            min(self.depth_range[0], float(rendered.depth.min())),
            max(self.depth_range[1], float(rendered.depth.max())),
        ]


def _summary_metadata(config: SequenceConfig, summary: BagSummary) -> dict[str, str]:
    """Return the bag's ``custom_data``: generator settings and measured figures."""
    metadata = config_to_metadata(config)
    metadata[f'{METADATA_PREFIX}mean_angular_speed_rad_s'] = f'{summary.mean_angular_speed:.4f}'
    metadata[f'{METADATA_PREFIX}mean_dynamic_share'] = f'{summary.mean_dynamic_share:.4f}'
    return metadata


def write_sequence_bag(
    sequence: SyntheticSequence,
    path: Path | str,
    *,
    storage: StoragePlugin = StoragePlugin.MCAP,
    compress: bool = True,
    progress: Callable[[int], None] | None = None,
) -> BagSummary:
    """Render ``sequence`` and write it to a new bag folder ``path``.

    ``progress`` is called with 1 after each frame (a tqdm ``update``).
    """
    path = Path(path)
    config = sequence.config
    writer = Writer(path, version=9, storage_plugin=storage)
    if compress:
        writer.set_compression(CompressionMode.MESSAGE, CompressionFormat.ZSTD)
    figures = _FrameFigures()
    with writer:
        bag = _BagWriter(writer)
        bag.write(TF_STATIC_TOPIC, 0.0, _tf_static(), _TF)
        imu = sequence.imu
        next_imu = 0
        for frame in sequence.frames():
            # IMU samples up to this frame's time go first, as a driver would log them.
            while next_imu < len(imu) and imu.times[next_imu] <= frame.time_s + 1e-9:
                _write_imu_sample(bag, imu, next_imu, config)
                next_imu += 1
            _write_frame(bag, frame, config, sequence.ground_truth)
            figures.add(frame.rendered, sequence.scene)
            if progress is not None:
                progress(1)
        while next_imu < len(imu):
            _write_imu_sample(bag, imu, next_imu, config)
            next_imu += 1
        summary = BagSummary(
            path=path,
            frames=len(figures.dynamic_shares),
            imu_samples=len(imu),
            mean_angular_speed=sequence.mean_angular_speed(),
            mean_dynamic_share=float(np.mean(figures.dynamic_shares)),
            min_depth_m=figures.depth_range[0],
            max_depth_m=figures.depth_range[1],
        )
        for key, value in _summary_metadata(config, summary).items():
            writer.set_custom_data(key, value)
    return summary


@dataclass
class LoadedSequence:
    """A sequence bag in memory (frames optionally subsampled)."""

    metadata: dict[str, str]
    intrinsics: PinholeCamera
    frame_times: np.ndarray  # (N,) s since the bag start
    rgb: np.ndarray  # (N, H, W, 3) uint8
    depth: np.ndarray  # (N, H, W) float32 m
    poses: np.ndarray  # (M, 4, 4) T_world_body ground truth
    pose_times: np.ndarray  # (M,) s
    velocities_world: np.ndarray  # (M, 3) m/s ground truth
    imu_times: np.ndarray  # (K,) s
    angular_velocity: np.ndarray  # (K, 3)
    linear_acceleration: np.ndarray  # (K, 3)

    @property
    def category(self) -> str:
        """The category label written by the generator."""
        return self.metadata.get(f'{METADATA_PREFIX}category', '')

    def frame_poses(self) -> np.ndarray:
        """Ground-truth poses at the frame times (the generator writes one per frame)."""
        index = np.searchsorted(self.pose_times, self.frame_times - 1e-6)
        if np.any(np.abs(self.pose_times[index] - self.frame_times) > 1e-6):
            raise SequenceBagError('ground truth is missing at some frame times')
        return self.poses[index]


def _seconds(stamp) -> float:  # noqa: ANN001 - a rosbags message class
    return (stamp_ns(stamp) - BAG_START_NS) / 1e9


def iter_messages(path: Path | str, topics: set[str]) -> Iterator[tuple[str, object]]:
    """Yield ``(topic, message)`` of ``topics`` from a bag, in log order."""
    with Reader(path) as reader:
        connections = [c for c in reader.connections if c.topic in topics]
        for connection, _, raw in reader.messages(connections=connections):
            yield connection.topic, TYPESTORE.deserialize_cdr(raw, connection.msgtype)


def read_sequence_bag(
    path: Path | str, *, every: int = 1, max_frames: int | None = None
) -> LoadedSequence:
    """Load a sequence bag written by :func:`write_sequence_bag` (every ``every``-th frame)."""
    path = Path(path)
    try:
        with Reader(path) as reader:
            present = {connection.topic for connection in reader.connections}
        # rosbags' Reader does not expose custom_data; metadata.yaml is rosbag2's own file.
        info = yaml.safe_load((path / 'metadata.yaml').read_text())
        metadata = {
            str(key): str(value)
            for key, value in (
                info['rosbag2_bagfile_information'].get('custom_data') or {}
            ).items()
        }
    except Exception as error:  # rosbags raises several unrelated types for a bad bag
        raise SequenceBagError(f'cannot open bag {path}: {error}') from error
    needed = {IMAGE_TOPIC, DEPTH_TOPIC, CAMERA_INFO_TOPIC, IMU_TOPIC, GROUND_TRUTH_TOPIC}
    if missing := needed - present:
        raise SequenceBagError(f'bag {path} is not an AccuMO sequence: no {sorted(missing)}')
    rgb, depth, frame_times, poses, pose_times, velocities = [], [], [], [], [], []
    imu_times, gyro, accel = [], [], []
    intrinsics = None
    image_index = depth_index = 0
    for topic, message in iter_messages(path, needed):
        if topic == IMAGE_TOPIC:
            keep = image_index % every == 0 and (max_frames is None or len(rgb) < max_frames)
            image_index += 1
            if keep:
                if message.encoding != 'rgb8':
                    raise SequenceBagError(f'{IMAGE_TOPIC}: expected rgb8, got {message.encoding}')
                rgb.append(_pixels(message, IMAGE_TOPIC))
                frame_times.append(_seconds(message.header.stamp))
        elif topic == DEPTH_TOPIC:
            keep = depth_index % every == 0 and (max_frames is None or len(depth) < max_frames)
            depth_index += 1
            if keep:
                if message.encoding != '32FC1':
                    raise SequenceBagError(
                        f'{DEPTH_TOPIC}: expected 32FC1, got {message.encoding}'
                    )
                depth.append(_pixels(message, DEPTH_TOPIC))
        elif topic == CAMERA_INFO_TOPIC and intrinsics is None:
            intrinsics = PinholeCamera.from_k(message.k, message.width, message.height)
        elif topic == IMU_TOPIC:
            imu_times.append(_seconds(message.header.stamp))
            gyro.append([message.angular_velocity.x, message.angular_velocity.y,
                         message.angular_velocity.z])  # fmt: skip
            accel.append([message.linear_acceleration.x, message.linear_acceleration.y,
                          message.linear_acceleration.z])  # fmt: skip
        elif topic == GROUND_TRUTH_TOPIC:
            pose = message.pose.pose
            q = pose.orientation
            rotation = rotations_from_xyzw(np.array([[q.x, q.y, q.z, q.w]]))[0]
            position = np.array([pose.position.x, pose.position.y, pose.position.z])
            poses.append(make_poses(rotation, position))
            pose_times.append(_seconds(message.header.stamp))
            linear = message.twist.twist.linear  # in base_link (REP 105 child frame)
            velocities.append(rotation @ np.array([linear.x, linear.y, linear.z]))
    if intrinsics is None or not rgb or len(rgb) != len(depth):
        raise SequenceBagError(f'bag {path}: images, depth and camera info do not match')
    return LoadedSequence(
        metadata=metadata,
        intrinsics=intrinsics,
        frame_times=np.array(frame_times),
        rgb=np.stack(rgb),
        depth=np.stack(depth),
        poses=np.stack(poses),
        pose_times=np.array(pose_times),
        velocities_world=np.array(velocities),
        imu_times=np.array(imu_times),
        angular_velocity=np.array(gyro),
        linear_acceleration=np.array(accel),
    )


def generate_sequence_bag(config: SequenceConfig, path: Path | str, **kwargs) -> BagSummary:  # noqa: ANN003
    """Build the sequence of ``config`` and write it (see :func:`write_sequence_bag`)."""
    return write_sequence_bag(SyntheticSequence(config), path, **kwargs)
