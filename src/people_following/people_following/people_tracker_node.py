# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``people_tracker``: people keypoints + depth + odometry -> tracks and the target to follow.

Wraps :class:`people_following.person_localizer.PersonLocalizer` and
:class:`people_following.person_tracker.PersonTracker` (seed 001 §VI: keypoints -> depth -> Kalman
filter). Subscribes

* ``people`` (``PersonArray``, reliable): keypoints per person, stamped with the capture time
  of the image, in the camera's optical frame (the detection node's output);
* ``camera_info`` (``CameraInfo``, sensor QoS): the intrinsics of that image;
* the depth image, by ``depth_source``:

  - ``accumo``: ``depth`` (32FC1, metres, reliable), the AccuMO scheduler's map for the same
    camera image (same stamp, same size and intrinsics as ``camera_info``);
  - ``rgbd``: ``depth_camera/image`` (32FC1 metres or 16UC1 millimetres, sensor QoS) and
    ``depth_camera/camera_info``: an RGB-D driver's depth registered to the colour camera
    (e.g. RealSense ``aligned_depth_to_color``; remap the two topics);

* ``odometry`` (``nav_msgs/Odometry``, reliable): the robot base's pose in ``odom_frame``.

The camera's mounting on the base is ``camera_position_m`` and ``camera_rpy_rad`` (of the
REP-103 camera body frame, x forward; the optical frame is rotated from it as usual). Where
``tf2_ros`` is installed, that mounting is also broadcast as a static transform, so RViz can
place the camera's images and clouds.

Each ``people`` message is matched to the depth image nearest its stamp (within
``sync_tolerance_s``) and to the robot pose at its stamp (the nearest odometry within that
tolerance, else interpolated between poses at most ``odometry_max_gap_s`` apart, for wheel
odometry at its own rate). Results that arrive before their depth or odometry wait, in
stamp order, in a bounded queue (the oldest goes first). A result is dropped, counted and
logged once a stream has moved past its stamp without a match (each stream arrives in
order: a lost depth image costs one result, not the ones behind it) or after
``sync_timeout_s`` of waiting (a stream that stopped). Each
person is localized, moved to the odometry frame and fed to the tracker; then it publishes

* ``tracks`` (``PersonArray``, ``odom_frame``, reliable): confirmed tracks, ``track_id`` set,
  ``has_position`` true, ``position_m`` the filtered position, ``score`` 1 for the target;
* ``target`` (``geometry_msgs/PointStamped``, ``odom_frame``, reliable): the target's position,
  stamped with the time of its *last detection* (not the current time: a coasting track must
  look as old as it is, so the follower stops when the person is lost);
* ``target/velocity`` (``geometry_msgs/Vector3Stamped``, same frame and stamp as ``target``):
  the target's filtered ground velocity, for the follower's feed-forward;
* ``tracks/markers`` (``MarkerArray``): a cylinder and a label per track, the target green;
* ``depth/points`` (``PointCloud2``, the depth image's frame) at most ``cloud_rate_hz``.

A model whose weights are not trained (``model_is_trained`` false) gives no target unless
``follow_untrained_models`` is set: random detections must not drive a robot. Malformed input
(bad keypoints, encodings, sizes) is counted and logged, never acted on; the node keeps
going. The work per message is a few milliseconds of numpy, done in the callbacks (one
mutually exclusive group, so no locks).
"""

from __future__ import annotations

import collections
import math
import sys
from dataclasses import fields

import numpy as np
from geometry_msgs.msg import Point, PointStamped, TransformStamped, Vector3, Vector3Stamped
from nav_msgs.msg import Odometry
from rclpy.duration import Duration as RclpyDuration
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.time import Time
from scipy.spatial.transform import Rotation, Slerp
from sensor_msgs.msg import CameraInfo, Image, PointCloud2
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from edge_offload.camera_model import PinholeCamera
from edge_offload.diagnostics import (
    OK,
    WARN,
    create_diagnostics_publisher,
    diagnostic_array,
    diagnostic_status,
)
from edge_offload.image_convert import ImageFormatError, imgmsg_to_cv2
from edge_offload.ros_node_main import run_node
from edge_offload.ros_params import ParamSpec, declare_parameters, parameter_values
from edge_offload.sensor_qos import sensor_qos
from edge_offload.stamps import stamp_seconds
from offload_interfaces.msg import Person, PersonArray
from people_following.depth_cloud import depth_to_points, points_to_cloud
from people_following.person_localizer import (
    COCO_KEYPOINT_COUNT,
    LocalizerConfig,
    PersonLocalizer,
)
from people_following.person_tracker import PersonTracker, Track, TrackerConfig

try:  # TF is optional: the PyPI ROS wheels here have no tf2_ros.
    from tf2_ros import StaticTransformBroadcaster
except ImportError:  # pragma: no cover - depends on the installation
    StaticTransformBroadcaster = None

DEPTH_SOURCES = ('accumo', 'rgbd')
# Optical axes (x right, y down, z forward) in the REP-103 camera body frame (x forward).
R_BODY_OPTICAL = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
MARKER_NAMESPACE = 'tracks'
_LOCALIZER_DEFAULTS = LocalizerConfig()
_TRACKER_DEFAULTS = TrackerConfig()

PARAMETERS = (
    ParamSpec('depth_source', 'accumo', f'Depth image: one of {", ".join(DEPTH_SOURCES)}.'),
    ParamSpec('odom_frame', 'odom', 'Frame of the odometry, the tracks and the target.'),
    ParamSpec('base_frame', 'base_link', 'Frame of the robot base (the odometry child).'),
    ParamSpec(
        'camera_position_m',
        [0.1, 0.0, 0.5],
        'Camera position in the base frame (x forward, y left, z up; m).',
    ),
    ParamSpec(
        'camera_rpy_rad',
        [0.0, 0.0, 0.0],
        'Camera body orientation in the base frame (roll, pitch, yaw; REP-103, rad). '
        'Negative pitch looks up.',
    ),
    ParamSpec(
        'sync_tolerance_s',
        0.02,
        'Largest stamp difference between a people result and its depth image / odometry (s).',
        0.0,
        1.0,
    ),
    ParamSpec(
        'sync_timeout_s',
        0.5,
        'A result waits at most this long for its depth and odometry, then is dropped (s).',
        0.01,
        10.0,
    ),
    ParamSpec(
        'odometry_max_gap_s',
        0.25,
        'Odometry poses at most this far apart are interpolated to a result stamp (s).',
        0.0,
        10.0,
    ),
    ParamSpec(
        'reliable_sensor_qos',
        False,
        'Subscribe camera_info and the RGB-D topics reliably (replays); default: sensor QoS.',
    ),
    ParamSpec('buffer_size', 30, 'Depth images and odometry poses kept for matching.', 2, 1000),
    ParamSpec('pending_size', 10, 'Results waiting for their depth or odometry.', 1, 1000),
    ParamSpec(
        'follow_untrained_models',
        False,
        'Pick a target from a model with random weights (latency experiments only).',
    ),
    ParamSpec('diagnostics_period_s', 1.0, 'Period of /diagnostics messages (s).', 0.1, 60.0),
    ParamSpec('marker_lifetime_s', 0.5, 'Lifetime of the track markers (s).', 0.0, 60.0),
    ParamSpec('cloud_stride', 4, 'Point cloud: every n-th depth row and column (0 = off).', 0, 64),
    ParamSpec('cloud_rate_hz', 2.0, 'Point cloud: largest publishing rate (Hz).', 0.01, 100.0),
    ParamSpec('cloud_max_depth_m', 8.0, 'Point cloud: farthest depth kept (m).', 0.1, 100.0),
    # The localizer's and tracker's tuning, under their field names.
    ParamSpec(
        'min_keypoint_score',
        _LOCALIZER_DEFAULTS.min_keypoint_score,
        'Keypoints with a lower score are not used.',
        0.01,
        1.0,
    ),
    ParamSpec(
        'min_depth_m', _LOCALIZER_DEFAULTS.min_depth_m, 'Nearest valid depth (m).', 0.01, 100.0
    ),
    ParamSpec(
        'max_depth_m', _LOCALIZER_DEFAULTS.max_depth_m, 'Farthest valid depth (m).', 0.1, 100.0
    ),
    ParamSpec(
        'depth_noise_const_m',
        _LOCALIZER_DEFAULTS.depth_noise_const_m,
        'Depth noise sigma = a + b*Z^2: a (m).',
        1e-4,
        10.0,
    ),
    ParamSpec(
        'depth_noise_quad_per_m',
        _LOCALIZER_DEFAULTS.depth_noise_quad_per_m,
        'Depth noise sigma = a + b*Z^2: b (1/m).',
        0.0,
        10.0,
    ),
    ParamSpec(
        'body_centre_offset_m',
        _LOCALIZER_DEFAULTS.body_centre_offset_m,
        'From the torso surface to the body axis (m).',
        0.0,
        1.0,
    ),
    ParamSpec(
        'accel_sigma', _TRACKER_DEFAULTS.accel_sigma, 'Walker acceleration noise.', 0.01, 100.0
    ),
    ParamSpec(
        'gate_probability',
        _TRACKER_DEFAULTS.gate_probability,
        'Chi-square gate probability.',
        0.5,
        0.999999,
    ),
    ParamSpec('confirm_hits', _TRACKER_DEFAULTS.confirm_hits, 'Detections to confirm.', 1, 100),
    ParamSpec(
        'max_age_s', _TRACKER_DEFAULTS.max_age_s, 'A lost track lives this long (s).', 0.01, 60.0
    ),
    ParamSpec('max_tracks', _TRACKER_DEFAULTS.max_tracks, 'Most tracks kept.', 1, 1000),
    ParamSpec(
        'max_target_distance_m',
        _TRACKER_DEFAULTS.max_target_distance_m,
        'Farthest person picked as a new target (m).',
        0.1,
        100.0,
    ),
)

_PARAMETER_NAMES = {spec.name for spec in PARAMETERS}
_LOCALIZER_FIELDS = tuple(f.name for f in fields(LocalizerConfig) if f.name in _PARAMETER_NAMES)
_TRACKER_FIELDS = tuple(f.name for f in fields(TrackerConfig) if f.name in _PARAMETER_NAMES)


def t_base_optical(position_m: list[float], rpy_rad: list[float]) -> np.ndarray:
    """Return the 4×4 pose of the camera's optical frame in the base frame."""
    if len(position_m) != 3 or len(rpy_rad) != 3:
        raise ValueError('camera_position_m and camera_rpy_rad need 3 values each')
    if not np.all(np.isfinite([*position_m, *rpy_rad])):
        raise ValueError('camera_position_m and camera_rpy_rad must be finite')
    transform = np.eye(4)
    # URDF/REP-103 rpy: fixed axes x, y, z (scipy's lower-case 'xyz').
    transform[:3, :3] = Rotation.from_euler('xyz', rpy_rad).as_matrix() @ R_BODY_OPTICAL
    transform[:3, 3] = position_m
    return transform


def t_odom_base(odometry: Odometry) -> np.ndarray:
    """Return the 4×4 pose of the base in the odometry frame; ``ValueError`` if not a pose."""
    q = odometry.pose.pose.orientation
    quaternion = np.array([q.x, q.y, q.z, q.w])
    p = odometry.pose.pose.position
    position = np.array([p.x, p.y, p.z])
    if not (np.all(np.isfinite(quaternion)) and np.all(np.isfinite(position))):
        raise ValueError('odometry pose is not finite')
    if np.linalg.norm(quaternion) < 1e-9:
        raise ValueError('odometry orientation is a zero quaternion')
    transform = np.eye(4)
    transform[:3, :3] = Rotation.from_quat(quaternion).as_matrix()
    transform[:3, 3] = position
    return transform


def person_keypoints(person: Person) -> np.ndarray:
    """Return a ``Person``'s keypoints as a (17, 3) ``[x_px, y_px, score]`` array (0 = absent)."""
    keypoints = np.zeros((COCO_KEYPOINT_COUNT, 3))
    for keypoint in person.keypoints:
        if keypoint.id >= COCO_KEYPOINT_COUNT:
            raise ValueError(f'keypoint id {keypoint.id} is not a COCO keypoint')
        keypoints[keypoint.id] = (keypoint.x_px, keypoint.y_px, keypoint.score)
    return keypoints


def depth_in_metres(image: Image) -> np.ndarray:
    """Return a depth image in metres (float32, 0 or NaN = no data); 32FC1 m or 16UC1 mm."""
    if image.encoding == '32FC1':
        return np.asarray(imgmsg_to_cv2(image), dtype=np.float32)
    if image.encoding == '16UC1':
        return imgmsg_to_cv2(image).astype(np.float32) / 1000.0
    raise ImageFormatError(f'depth encoding {image.encoding!r}: expected 32FC1 (m) or 16UC1 (mm)')


class StampedBuffer:
    """The last ``size`` items by stamp, looked up by the nearest stamp.

    Each input stream arrives in stamp order (one driver or node publishes it), so once an
    item newer than ``stamp + tolerance`` is here, no match for ``stamp`` will come.
    """

    def __init__(self, size: int) -> None:
        """Keep at most ``size`` items (the oldest go first)."""
        self._items: collections.deque[tuple[float, object]] = collections.deque(maxlen=size)

    def add(self, stamp: float, item: object) -> None:
        """Add ``item`` taken at ``stamp`` (s); a stamp older than the newest is ignored."""
        if self._items and stamp < self._items[-1][0]:
            return  # streams arrive in stamp order; this one came back in time
        self._items.append((stamp, item))

    @property
    def latest_stamp(self) -> float | None:
        """Return the newest stamp held, or None."""
        return self._items[-1][0] if self._items else None

    def nearest(self, stamp: float, tolerance: float) -> object | None:
        """Return the item nearest ``stamp`` if within ``tolerance`` (s), else None."""
        best = min(self._items, key=lambda entry: abs(entry[0] - stamp), default=None)
        if best is None or abs(best[0] - stamp) > tolerance:
            return None
        return best[1]

    def passed(self, stamp: float, tolerance: float) -> bool:
        """Return whether the stream has moved past ``stamp`` (no match can come any more)."""
        latest = self.latest_stamp
        return latest is not None and latest > stamp + tolerance


class PoseBuffer(StampedBuffer):
    """Odometry poses (4×4), looked up at a stamp: the nearest, else interpolated."""

    def at(self, stamp: float, tolerance: float, max_gap: float) -> np.ndarray | None:
        """Return the pose at ``stamp``.

        The nearest pose within ``tolerance`` (AccuMO's odometry has the camera's stamps),
        else the interpolation between the poses just before and after ``stamp`` if they
        are at most ``max_gap`` apart (wheel odometry at its own rate): linear in position,
        spherical in rotation. None when neither exists.
        """
        nearest = self.nearest(stamp, tolerance)
        if nearest is not None:
            return nearest
        before = max((e for e in self._items if e[0] <= stamp), key=lambda e: e[0], default=None)
        after = min((e for e in self._items if e[0] >= stamp), key=lambda e: e[0], default=None)
        if before is None or after is None or after[0] - before[0] > max_gap:
            return None
        (t0, pose0), (t1, pose1) = before, after
        fraction = (stamp - t0) / (t1 - t0)
        rotations = Rotation.from_matrix(np.stack([pose0[:3, :3], pose1[:3, :3]]))
        pose = np.eye(4)
        pose[:3, :3] = Slerp([0.0, 1.0], rotations)(fraction).as_matrix()
        pose[:3, 3] = (1.0 - fraction) * pose0[:3, 3] + fraction * pose1[:3, 3]
        return pose


def track_markers(
    tracks: list[Track], target_id: int | None, header: Header, lifetime_s: float
) -> MarkerArray:
    """Return a cylinder (body) and a label per track; the target is green, others blue."""
    lifetime = RclpyDuration(seconds=lifetime_s).to_msg()
    markers = MarkerArray()
    markers.markers.append(Marker(header=header, ns=MARKER_NAMESPACE, action=Marker.DELETEALL))
    for track in tracks:
        is_target = track.track_id == target_id
        colour = (
            ColorRGBA(r=0.1, g=0.9, b=0.2, a=0.8)
            if is_target
            else ColorRGBA(r=0.2, g=0.4, b=1.0, a=0.6)
        )
        x, y = (float(v) for v in track.position)
        body = Marker(header=header, ns=MARKER_NAMESPACE, id=2 * track.track_id)
        body.type = Marker.CYLINDER
        body.pose.position = Point(x=x, y=y, z=0.85)
        body.pose.orientation.w = 1.0
        body.scale.x = body.scale.y = 0.4
        body.scale.z = 1.7
        body.color = colour
        body.lifetime = lifetime
        label = Marker(header=header, ns=MARKER_NAMESPACE, id=2 * track.track_id + 1)
        label.type = Marker.TEXT_VIEW_FACING
        label.pose.position = Point(x=x, y=y, z=1.9)
        label.pose.orientation.w = 1.0
        label.scale.z = 0.2
        label.color = colour
        label.lifetime = lifetime
        speed = float(np.linalg.norm(track.velocity))
        label.text = f'{"target " if is_target else ""}#{track.track_id} {speed:.1f} m/s'
        markers.markers += [body, label]
    return markers


class PeopleTrackerNode(Node):
    """Thin ROS wrapper of the person localizer and tracker (see the module docstring)."""

    def __init__(self, **kwargs) -> None:  # noqa: ANN003 - rclpy Node options
        super().__init__('people_tracker', **kwargs)
        declare_parameters(self, PARAMETERS)
        self._config = config = parameter_values(self, PARAMETERS)
        if config['depth_source'] not in DEPTH_SOURCES:
            raise ValueError(
                f'depth_source {config["depth_source"]!r} is not one of {DEPTH_SOURCES}'
            )
        try:
            self._localizer = PersonLocalizer(
                LocalizerConfig(**{name: config[name] for name in _LOCALIZER_FIELDS})
            )
            self._tracker = PersonTracker(
                TrackerConfig(**{name: config[name] for name in _TRACKER_FIELDS})
            )
            self._t_base_optical = t_base_optical(
                config['camera_position_m'], config['camera_rpy_rad']
            )
        except ValueError as error:
            raise ValueError(f'bad tracker configuration: {error}') from error
        self.counts: collections.Counter[str] = collections.Counter()
        self._rgb_camera: PinholeCamera | None = None
        self._depth_camera: PinholeCamera | None = None
        self._depth = StampedBuffer(config['buffer_size'])
        self._odometry = PoseBuffer(config['buffer_size'])
        self._pending: collections.deque[tuple[float, PersonArray]] = collections.deque()
        self._last_cloud_s = -math.inf

        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        camera_qos = sensor_qos(reliable=config['reliable_sensor_qos'])
        self.create_subscription(PersonArray, 'people', self._on_people, reliable)
        self.create_subscription(CameraInfo, 'camera_info', self._on_camera_info, camera_qos)
        self.create_subscription(Odometry, 'odometry', self._on_odometry, reliable)
        if config['depth_source'] == 'accumo':
            self.create_subscription(Image, 'depth', self._on_depth, reliable)
            depth_topic = 'depth'
        else:
            self.create_subscription(Image, 'depth_camera/image', self._on_depth, camera_qos)
            self.create_subscription(
                CameraInfo, 'depth_camera/camera_info', self._on_depth_camera_info, camera_qos
            )
            depth_topic = 'depth_camera/image'
        self._tracks_pub = self.create_publisher(PersonArray, 'tracks', reliable)
        self._target_pub = self.create_publisher(PointStamped, 'target', reliable)
        self._velocity_pub = self.create_publisher(Vector3Stamped, 'target/velocity', reliable)
        self._markers_pub = self.create_publisher(MarkerArray, 'tracks/markers', reliable)
        self._cloud_pub = self.create_publisher(PointCloud2, 'depth/points', 2)
        self._static_tf = (
            StaticTransformBroadcaster(self) if StaticTransformBroadcaster is not None else None
        )
        self._camera_frame: str | None = None
        self._target_id: int | None = None
        self._diagnostics_pub = create_diagnostics_publisher(self)
        self.create_timer(config['diagnostics_period_s'], self._publish_diagnostics)
        self.get_logger().info(
            f'tracking people with depth from {config["depth_source"]} '
            f'({self.resolve_topic_name(depth_topic)}) in frame {config["odom_frame"]}'
            + ('' if self._static_tf else '; tf2_ros not installed: no static camera TF')
        )

    @property
    def depth_source(self) -> str:
        """Return where the depth comes from: ``accumo`` or ``rgbd``."""
        return self._config['depth_source']

    # -- inputs -------------------------------------------------------------------------------

    def _on_camera_info(self, message: CameraInfo) -> None:
        self._rgb_camera = self._intrinsics(message, 'camera_info', self._rgb_camera)

    def _on_depth_camera_info(self, message: CameraInfo) -> None:
        self._depth_camera = self._intrinsics(message, 'depth_camera/camera_info', None)

    def _intrinsics(
        self, message: CameraInfo, topic: str, current: PinholeCamera | None
    ) -> PinholeCamera | None:
        try:
            return PinholeCamera.from_k(message.k, message.width, message.height)
        except ValueError as error:
            self.counts['bad_camera_info'] += 1
            self.get_logger().error(f'unusable {topic}: {error}', throttle_duration_sec=5.0)
            return current

    def _on_odometry(self, message: Odometry) -> None:
        frame = message.header.frame_id
        if frame and frame != self._config['odom_frame']:
            self.counts['odometry_wrong_frame'] += 1
            self.get_logger().error(
                f'odometry in frame {frame!r}, expected {self._config["odom_frame"]!r}: ignored',
                throttle_duration_sec=5.0,
            )
            return
        try:
            pose = t_odom_base(message)
        except ValueError as error:
            self.counts['bad_odometry'] += 1
            self.get_logger().error(f'odometry ignored: {error}', throttle_duration_sec=5.0)
            return
        self._odometry.add(stamp_seconds(message.header.stamp), pose)
        self._drain_pending()

    def _on_depth(self, message: Image) -> None:
        try:
            depth = depth_in_metres(message)
        except ImageFormatError as error:
            self.counts['bad_depth'] += 1
            self.get_logger().error(f'depth image ignored: {error}', throttle_duration_sec=5.0)
            return
        stamp = stamp_seconds(message.header.stamp)
        self._depth.add(stamp, depth)
        self._publish_cloud(message.header, depth)
        self._drain_pending()

    def _on_people(self, message: PersonArray) -> None:
        if len(self._pending) == self._config['pending_size']:
            self.counts['dropped_queue_full'] += 1
            self._pending.popleft()
        self._pending.append((self._now(), message))
        self._drain_pending()

    # -- matching -----------------------------------------------------------------------------

    def _drain_pending(self) -> None:
        """Process waiting results in stamp order while their depth and odometry are here."""
        tolerance = self._config['sync_tolerance_s']
        while self._pending:
            arrived_s, people = self._pending[0]
            stamp = stamp_seconds(people.header.stamp)
            depth = self._depth.nearest(stamp, tolerance)
            pose = self._odometry.at(stamp, tolerance, self._config['odometry_max_gap_s'])
            if depth is not None and pose is not None:
                self._pending.popleft()
                self._process(people, stamp, depth, pose)
                continue
            missing = [
                name
                for name, item, stream in (
                    ('depth', depth, self._depth),
                    ('odometry', pose, self._odometry),
                )
                if item is None and (stream.passed(stamp, tolerance) or self._waited(arrived_s))
            ]
            if len(missing) < (depth is None) + (pose is None):
                return  # what is missing may still come
            self.counts['dropped_no_' + '_'.join(missing)] += 1
            self.get_logger().warning(
                f'people at {stamp:.3f} s dropped: no {" and ".join(missing)} for that stamp '
                f'(within {tolerance} s)',
                throttle_duration_sec=5.0,
            )
            self._pending.popleft()

    def _waited(self, arrived_s: float) -> bool:
        """Return whether a result has waited longer than ``sync_timeout_s`` since arrival."""
        # By arrival, so that replays with old stamps work; arrival 0 is before a simulated
        # clock started.
        return arrived_s > 0.0 and self._now() - arrived_s > self._config['sync_timeout_s']

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    # -- processing ---------------------------------------------------------------------------

    def _process(
        self, people: PersonArray, stamp: float, depth: np.ndarray, t_odom_base_: np.ndarray
    ) -> None:
        rgb_camera = self._rgb_camera
        if rgb_camera is None:
            self.counts['dropped_no_camera_info'] += 1
            self.get_logger().warning('no camera_info yet: people not localized', once=True)
            return
        depth_camera = self._depth_camera_for(depth)
        if depth_camera is None:
            return
        tracker_time = self._tracker.time
        if tracker_time is not None and stamp < tracker_time:
            self.counts['dropped_out_of_order'] += 1
            return
        self._announce_camera_frame(people.header.frame_id)
        t_odom_optical = t_odom_base_ @ self._t_base_optical
        detections = []
        for person in people.people:
            try:
                localization = self._localizer.localize(
                    person_keypoints(person), depth, rgb_camera, depth_camera
                )
            except ValueError as error:
                self.counts['bad_person'] += 1
                self.get_logger().warning(f'person ignored: {error}', throttle_duration_sec=5.0)
                continue
            if not localization.ok:
                self.counts[f'not_localized_{localization.failure}'] += 1
                continue
            odom = self._localizer.to_odom(localization.location, t_odom_optical)
            detections.append(odom.detection())
        self.counts['frames'] += 1
        self.counts['people_localized'] += len(detections)
        tracks = self._tracker.update(stamp, detections, t_odom_base_[:2, 3])
        may_target = people.model_is_trained or self._config['follow_untrained_models']
        if not may_target:
            self.get_logger().warning(
                f'model {people.model_name!r} is untrained: tracks published, no target',
                once=True,
            )
        target = self._tracker.target if may_target else None
        self._log_target_change(target)
        self._publish(people.header.stamp, tracks, target)

    def _log_target_change(self, target: Track | None) -> None:
        target_id = None if target is None else target.track_id
        if target_id == self._target_id:
            return
        if target_id is None:
            self.get_logger().warning(f'target track #{self._target_id} lost')
        else:
            x, y = (float(v) for v in target.position)
            self.get_logger().info(f'target: track #{target_id} at ({x:.2f}, {y:.2f}) m')
        self._target_id = target_id

    def _publish_diagnostics(self) -> None:
        values = dict(self.counts)
        values.update(
            tracks=len(self._tracker.confirmed_tracks),
            target_id=self._target_id if self._target_id is not None else 'none',
            waiting=len(self._pending),
        )
        dropped = sum(n for key, n in self.counts.items() if key.startswith(('dropped', 'bad')))
        status = diagnostic_status(
            f'{self.get_name()}: people tracker',
            WARN if dropped else OK,
            f'{dropped} inputs dropped or refused' if dropped else 'ok',
            values,
        )
        self._diagnostics_pub.publish(diagnostic_array(self, [status]))

    @property
    def _depth_intrinsics(self) -> PinholeCamera | None:
        """Return the depth image's intrinsics: AccuMO's map is computed from the camera image."""
        return self._depth_camera if self.depth_source == 'rgbd' else self._rgb_camera

    def _depth_camera_for(self, depth: np.ndarray) -> PinholeCamera | None:
        camera = self._depth_intrinsics
        if camera is None:
            self.counts['dropped_no_depth_camera_info'] += 1
            self.get_logger().warning('no depth_camera/camera_info yet', once=True)
            return None
        if depth.shape != (camera.height, camera.width):
            self.counts['dropped_depth_size'] += 1
            self.get_logger().error(
                f'depth image is {depth.shape[1]}x{depth.shape[0]} but its camera info says '
                f'{camera.width}x{camera.height}',
                throttle_duration_sec=5.0,
            )
            return None
        return camera

    def _announce_camera_frame(self, frame_id: str) -> None:
        """Broadcast the camera mounting once per optical frame name (where TF exists)."""
        if self._static_tf is None or not frame_id or frame_id == self._camera_frame:
            return
        self._camera_frame = frame_id
        transform = TransformStamped()
        transform.header.stamp = self.get_clock().now().to_msg()
        transform.header.frame_id = self._config['base_frame']
        transform.child_frame_id = frame_id
        t = self._t_base_optical
        translation, rotation = transform.transform.translation, transform.transform.rotation
        translation.x, translation.y, translation.z = (float(v) for v in t[:3, 3])
        rotation.x, rotation.y, rotation.z, rotation.w = (
            float(v) for v in Rotation.from_matrix(t[:3, :3]).as_quat()
        )
        self._static_tf.sendTransform(transform)

    # -- outputs ------------------------------------------------------------------------------

    def _publish(self, stamp, tracks: list[Track], target: Track | None) -> None:  # noqa: ANN001
        header = Header(stamp=stamp, frame_id=self._config['odom_frame'])
        message = PersonArray(header=header, model_name='people_tracker', model_is_trained=True)
        target_id = target.track_id if target is not None else None
        for track in tracks:
            if not track.confirmed:
                continue
            person = Person(track_id=track.track_id, has_position=True)
            person.score = 1.0 if track.track_id == target_id else 0.5
            x, y = (float(v) for v in track.position)
            person.position_m = Point(x=x, y=y, z=float(track.z or 0.0))
            message.people.append(person)
        self._tracks_pub.publish(message)
        confirmed = [track for track in tracks if track.confirmed]
        self._markers_pub.publish(
            track_markers(confirmed, target_id, header, self._config['marker_lifetime_s'])
        )
        if target is None:
            return
        last_seen = Time.from_msg(stamp) - RclpyDuration(
            nanoseconds=int(round(target.time_since_update_s * 1e9))
        )
        point = PointStamped()
        point.header = Header(stamp=last_seen.to_msg(), frame_id=self._config['odom_frame'])
        x, y = (float(v) for v in target.position)
        point.point = Point(x=x, y=y, z=float(target.z or 0.0))
        vx, vy = (float(v) for v in target.velocity)
        # Before the point: the follower pairs them by stamp when the point arrives.
        self._velocity_pub.publish(Vector3Stamped(header=point.header, vector=Vector3(x=vx, y=vy)))
        self._target_pub.publish(point)

    def _publish_cloud(self, header: Header, depth: np.ndarray) -> None:
        stride = self._config['cloud_stride']
        if stride == 0 or self._cloud_pub.get_subscription_count() == 0:
            return
        now = self._now()
        if now - self._last_cloud_s < 1.0 / self._config['cloud_rate_hz']:
            return
        camera = self._depth_intrinsics
        if camera is None or depth.shape != (camera.height, camera.width):
            return
        self._last_cloud_s = now
        points = depth_to_points(
            depth,
            camera,
            stride=stride,
            min_depth_m=self._config['min_depth_m'],
            max_depth_m=self._config['cloud_max_depth_m'],
        )
        self._cloud_pub.publish(points_to_cloud(points, header))


def main(args: list[str] | None = None) -> int:
    """Run the tracker until shutdown; exit code 1 on a bad configuration."""
    return run_node(PeopleTrackerNode, 'people_tracker', args)


if __name__ == '__main__':
    sys.exit(main())
