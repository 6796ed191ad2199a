# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``accumo_scheduler``: depth and odometry on the robot, offloads chosen by AccuMO's MPC.

Subscribes ``image_raw`` (rgb8/bgr8), ``camera_info`` and ``imu`` (sensor QoS) and
``link_state`` (the bridge's); keeps at most one offload outstanding through the bridge's
``offload`` action (models ``accumo_depth``, ``accumo_odometry``, ``accumo_depth_odometry``);
publishes every frame

* ``depth`` (``sensor_msgs/Image`` 32FC1, metres): the warped server map or the lite net;
* ``odometry`` (``nav_msgs/Odometry``, ``odom_frame`` -> ``base_frame``) and, where
  ``tf2_ros`` is installed, the same transform on TF;
* ``accumo/decision`` (``offload_interfaces/TaskDecision``): the task offloaded (or none),
  the drop-rate estimates, latencies in frames, staleness and the MPC's cost and time;
* ``/diagnostics`` every ``diagnostics_period_s``: ``accumo_scheduler: offloading`` (WARN
  while failed offloads keep the robot on its local algorithms, with the reason) and
  ``accumo_scheduler: odometry`` (WARN when no VO pose was fused for ``odometry_stale_s`` of
  camera time: the pose is IMU dead reckoning; or when no IMU sample came), with their
  counters.

The robot side is :class:`accumo_ros.scheduler.pipeline.AccumoPipeline`; this node only moves
messages. Callbacks queue work (frames: bounded, oldest dropped; IMU: bounded) for one
worker thread that owns the pipeline, so no callback blocks. A failed offload (server
down, deadline, bridge fallback) sends the robot to its local algorithms for
``server_retry_s``, logged and counted in the decision's ``offloaded_task_index``.
"""

from __future__ import annotations

import collections
import math
import queue
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np
from geometry_msgs.msg import TransformStamped
from nav_msgs.msg import Odometry
from rclpy.action import ActionClient
from rclpy.duration import Duration
from rclpy.exceptions import ParameterException
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from scipy.spatial.transform import Rotation
from sensor_msgs.msg import CameraInfo, Image, Imu

from accumo_ros.models import (
    alternatives_output,
    rotation_prior_input,
    translation_prior_input,
)
from accumo_ros.scheduler.mpc import MpcScheduler, TaskSpec, weighted_sum
from accumo_ros.scheduler.offload_latency import OffloadLatencyEstimator, OffloadSample
from accumo_ros.scheduler.offload_policies import MpcPolicy, make_policy
from accumo_ros.scheduler.pipeline import (
    DEPTH,
    LITE_DROP_OFFSET,
    LITE_DROP_SLOPE,
    ODOMETRY,
    TASK_NAMES,
    TRACKER_MODELS,
    TRACKER_OFFLOAD_OFFSET,
    TRACKER_OFFLOAD_SLOPE,
    AccumoPipeline,
    Decision,
    PipelineConfig,
)
from accumo_ros.tasks.depth_nets import load_depth_net
from accumo_ros.tasks.imu_filter import (
    DEFAULT_LEVEL_GROUND,
    DEFAULT_ROBUST_DISTANCE_SQ,
    ImuCalibration,
    LevelGroundPrior,
)
from accumo_ros.tasks.odometry_model import OdometryModelSet
from edge_offload.camera_model import PinholeCamera
from edge_offload.diagnostics import (
    OK,
    WARN,
    create_diagnostics_publisher,
    diagnostic_array,
    diagnostic_status,
)
from edge_offload.image_convert import ImageFormatError, cv2_to_imgmsg, imgmsg_to_cv2
from edge_offload.ros_node_main import run_node
from edge_offload.ros_params import ParamSpec, declare_parameters, parameter_values
from edge_offload.sensor_qos import RELIABLE_SENSOR_QOS_DESCRIPTION, sensor_qos
from edge_offload.stamps import stamp_seconds
from edge_offload.tensor_blob import TensorBlobError, from_tensor_blob, to_tensor_blob
from offload_interfaces.action import Offload
from offload_interfaces.msg import LinkState, TaskDecision

try:  # TF is optional: the PyPI ROS wheels here have no tf2_ros.
    from tf2_ros import TransformBroadcaster
except ImportError:  # pragma: no cover - depends on the installation
    TransformBroadcaster = None

# Without a calibration the filters assume zero biases with the datasheet's turn-on sigmas.
_UNCALIBRATED = ImuCalibration.uncalibrated()
PARAMETERS = (
    ParamSpec(
        'policy', 'accumo', 'Offload policy: accumo, la, rr, wrr:X:Y (depth:odometry), aao.'
    ),
    ParamSpec('depth_weight', 1.0, 'Weight of depth AbsRel in the merged accuracy.', 0.0, 1e6),
    ParamSpec(
        'odometry_weight', 1.0, 'Weight of odometry t_err in the merged accuracy.', 0.0, 1e6
    ),
    ParamSpec(
        'horizon',
        30,
        'MPC horizon in frames (shortened where its plans would exceed 2048).',
        1,
        120,
    ),
    ParamSpec(
        'depth_stride_limit',
        25,
        'Most frames between depth offloads at the *_latency_frames below (scaled with the '
        'round-robin period when measured latencies differ); 0 = none.',
        0,
        10000,
    ),
    ParamSpec(
        'odometry_stride_limit',
        26,
        'Most frames between odometry offloads (scaled as depth_stride_limit, and at most '
        "the odometry accuracy model's stride_limit); 0 = none.",
        0,
        10000,
    ),
    ParamSpec('max_in_a_row', 0, 'Most offloads of one task in a row; 0 = no cap.', 0, 100),
    ParamSpec('use_local_algorithm', True, 'Depth: switch to the lite net when it is better.'),
    ParamSpec('fps', 60.0, 'Camera frame rate: turns latencies into frames.', 1.0, 1000.0),
    ParamSpec('depth_latency_frames', 5, 'Depth offload latency before any is measured.', 1, 600),
    ParamSpec(
        'odometry_latency_frames', 4, 'Odometry offload latency before any is measured.', 1, 600
    ),
    ParamSpec(
        'lite_drop_slope',
        LITE_DROP_SLOPE,
        'Lite-net drop = slope * AbsRel(lite vs server) - offset (fitted on a calibration set).',
        1e-6,
        100.0,
    ),
    ParamSpec('lite_drop_offset', LITE_DROP_OFFSET, 'See lite_drop_slope.', -10.0, 10.0),
    ParamSpec(
        'tracker_model',
        'flow',
        f'Depth tracker accuracy model, one of {TRACKER_MODELS}: the DIS flow every few frames '
        "(the dissertation's) or the tracked map against each depth result.",
    ),
    ParamSpec(
        'tracker_offload_slope',
        TRACKER_OFFLOAD_SLOPE,
        "'offload' tracker drop = slope * AbsRel(tracked vs server) - offset (fitted on a "
        'calibration set).',
        1e-6,
        100.0,
    ),
    ParamSpec(
        'tracker_offload_offset', TRACKER_OFFLOAD_OFFSET, 'See tracker_offload_slope.', -10.0, 10.0
    ),
    ParamSpec(
        'odometry_robust_distance_sq',
        DEFAULT_ROBUST_DISTANCE_SQ,
        'Odometry filter: a VO pose inside the gate but beyond this squared Mahalanobis '
        'distance is fused with proportionally less weight; 0 = off.',
        0.0,
        1000.0,
    ),
    ParamSpec(
        'level_ground_tilt_sigma_deg',
        math.degrees(DEFAULT_LEVEL_GROUND.tilt_sigma_rad),
        'Odometry filter: the robot drives on a level floor, its roll and pitch within this '
        '(deg) and its vertical speed within level_ground_vertical_speed_sigma; 0 = off (a '
        'robot that leaves the plane).',
        0.0,
        90.0,
    ),
    ParamSpec(
        'level_ground_vertical_speed_sigma',
        DEFAULT_LEVEL_GROUND.vertical_speed_sigma,
        'See level_ground_tilt_sigma_deg (m/s).',
        1e-3,
        100.0,
    ),
    ParamSpec(
        'imu_gyro_bias',
        [0.0, 0.0, 0.0],
        "The IMU's gyro bias as calibrated on the robot (rad/s, x y z of the IMU frame); the "
        'odometry filters start from it.',
    ),
    ParamSpec(
        'imu_gyro_bias_sigma',
        _UNCALIBRATED.gyro_bias_sigma,
        'How well imu_gyro_bias is known (rad/s, 1 sigma). The default, the datasheet turn-on '
        'offset (0.5 deg/s), is an uncalibrated IMU; a calibration leaves about 0.05 deg/s.',
        1e-9,
        10.0,
    ),
    ParamSpec(
        'imu_accel_bias',
        [0.0, 0.0, 0.0],
        "The IMU's accelerometer bias as calibrated on the robot (m/s², x y z of the IMU "
        'frame); the odometry filters start from it.',
    ),
    ParamSpec(
        'imu_accel_bias_sigma',
        _UNCALIBRATED.accel_bias_sigma,
        'How well imu_accel_bias is known (m/s², 1 sigma). The default, the datasheet turn-on '
        'offset (20 mg), is an uncalibrated IMU; a calibration leaves a few mg. Where VO fails '
        'for seconds, the filter dead-reckons on this bias.',
        1e-9,
        100.0,
    ),
    ParamSpec(
        'odometry_models',
        [],
        'Odometry accuracy model YAMLs, each measured at one latency; the one measured nearest '
        'the odometry latency in use applies ([] = the packaged ones, 4 and 14 frames; fit one '
        'for another link with accumo_odometry_eval --fit --latency N).',
    ),
    ParamSpec('offload_mode', 'nnto', "Mode requested from the bridge ('' = its default)."),
    ParamSpec('deadline_s', 1.0, 'Time allowed per offload; later counts as failed.', 0.01, 60.0),
    ParamSpec(
        'server_retry_s', 2.0, 'After a failed offload, local algorithms only this long.', 0.0, 600
    ),
    ParamSpec('frame_queue_size', 2, 'Frames waiting for the worker; oldest dropped.', 1, 64),
    ParamSpec('imu_queue_size', 2000, 'IMU samples waiting for the worker.', 10, 100000),
    ParamSpec('diagnostics_period_s', 1.0, 'Period of /diagnostics.', 0.05, 60.0),
    ParamSpec(
        'odometry_stale_s',
        3.0,
        'Camera time without a fused VO pose after which /diagnostics warns that the odometry '
        'is IMU dead reckoning.',
        0.1,
        600.0,
    ),
    ParamSpec('odom_frame', 'odom', 'Frame of the odometry pose.'),
    ParamSpec('base_frame', 'base_link', 'Body frame the odometry tracks.'),
    ParamSpec('reliable_sensor_qos', False, RELIABLE_SENSOR_QOS_DESCRIPTION),
)
MODELS = {(DEPTH,): 'accumo_depth', (ODOMETRY,): 'accumo_odometry'}
BOTH_MODEL = 'accumo_depth_odometry'


@dataclass(frozen=True)
class OdometryHealth:
    """The odometry filter's state as ``/diagnostics`` reports it (camera time)."""

    seconds_running: float  # since the first frame
    seconds_since_pose: float | None  # since the last fused VO pose (None: none yet)
    position_sigma_m: float  # the largest standard deviation of the position
    recoveries: int  # times the filter reopened its velocity after refusing poses
    imu_samples: int  # IMU samples fed to the filter so far


def offloading_status(
    counts: dict[str, int], server_down_s: float, last_failure: str, policy: str
) -> tuple[bytes, str]:
    """Return the level and message of ``accumo_scheduler: offloading``."""
    if server_down_s > 0.0:
        return WARN, (
            f'offloads failing ({last_failure}): local algorithms for {server_down_s:.1f} s more'
        )
    if counts.get('frames_processed', 0) == 0:
        return OK, 'waiting for camera frames'
    return OK, f'{policy}: {counts.get("offloads_done", 0)} offloads done'


def odometry_status(health: OdometryHealth | None, stale_s: float) -> tuple[bytes, str]:
    """Return the level and message of ``accumo_scheduler: odometry``."""
    if health is None:
        return OK, 'waiting for camera frames'
    if health.imu_samples == 0:
        # Without IMU the filter does not move, and VO poses fail its gate.
        return WARN, 'no IMU samples on imu: the odometry pose cannot move'
    since = health.seconds_since_pose
    if since is None:
        if health.seconds_running > stale_s:
            return WARN, (
                f'no VO pose fused in {health.seconds_running:.1f} s: IMU dead reckoning '
                f'(position sigma {health.position_sigma_m:.2f} m)'
            )
        return OK, 'no VO pose fused yet'
    if since > stale_s:
        return WARN, (
            f'no VO pose fused for {since:.1f} s: IMU dead reckoning '
            f'(position sigma {health.position_sigma_m:.2f} m)'
        )
    return OK, f'VO pose fused {since:.1f} s ago'


@dataclass
class _Result:
    frame: int
    tasks: tuple[int, ...]
    outputs: dict[str, np.ndarray] | None  # None: failed
    reason: str
    latency_s: float
    bytes_up: int = 0
    bytes_down: int = 0
    server_s: float = 0.0


class AccumoSchedulerNode(Node):
    """Run AccuMO's depth and odometry tasks on camera and IMU, offloading via the bridge."""

    def __init__(self, **kwargs) -> None:  # noqa: ANN003 - rclpy Node options
        super().__init__('accumo_scheduler', **kwargs)
        declare_parameters(self, PARAMETERS)
        self._config = config = parameter_values(self, PARAMETERS)
        weights = (config['depth_weight'], config['odometry_weight'])
        if sum(weights) <= 0.0:
            raise ValueError('depth_weight and odometry_weight must not both be 0')
        self._latency_defaults = (
            config['depth_latency_frames'],
            config['odometry_latency_frames'],
        )
        tasks = [
            TaskSpec(name, latency, limit or None)
            for name, latency, limit in zip(
                TASK_NAMES,
                self._latency_defaults,
                (config['depth_stride_limit'], config['odometry_stride_limit']),
                strict=True,
            )
        ]
        scheduler = MpcScheduler(
            tasks, config['horizon'], weighted_sum(weights), config['max_in_a_row'] or None
        )
        self._policy = make_policy(config['policy'], len(TASK_NAMES), scheduler)
        # Built here so that a bad value fails the start-up, not the first frame.
        self._pipeline_config = PipelineConfig(
            use_local_algorithm=config['use_local_algorithm'],
            lite_drop_slope=config['lite_drop_slope'],
            lite_drop_offset=config['lite_drop_offset'],
            tracker_model=config['tracker_model'],
            tracker_offload_slope=config['tracker_offload_slope'],
            tracker_offload_offset=config['tracker_offload_offset'],
            fps=config['fps'],
            odometry_robust_distance_sq=config['odometry_robust_distance_sq'] or None,
            level_ground=(
                LevelGroundPrior(
                    math.radians(config['level_ground_tilt_sigma_deg']),
                    config['level_ground_vertical_speed_sigma'],
                    1.0 / config['fps'],
                )
                if config['level_ground_tilt_sigma_deg'] > 0.0
                else None
            ),
            imu_calibration=ImuCalibration(
                config['imu_gyro_bias'],
                config['imu_accel_bias'],
                config['imu_gyro_bias_sigma'],
                config['imu_accel_bias_sigma'],
            ),
        )
        self._lite = load_depth_net('lite')
        self._odometry_models = OdometryModelSet.load(config['odometry_models'] or None)
        self._latencies = OffloadLatencyEstimator(self._latency_defaults, config['fps'])
        self._pipeline: AccumoPipeline | None = None  # built on the first camera_info
        self._intrinsics: PinholeCamera | None = None

        self._frames: collections.deque[Image] = collections.deque(
            maxlen=config['frame_queue_size']
        )
        self._imu: collections.deque[tuple[float, np.ndarray, np.ndarray]] = collections.deque(
            maxlen=config['imu_queue_size']
        )
        self._results: queue.SimpleQueue[_Result] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.counts: collections.Counter[str] = collections.Counter()
        self._frame_index = 0
        self._server_down_until = 0.0
        self._last_imu_time = -math.inf
        self._last_failure = ''
        # Camera times for /diagnostics; written by the worker only.
        self._first_frame_time: float | None = None
        self._frame_time = 0.0
        self._last_pose_time: float | None = None
        self._odometry_health: OdometryHealth | None = None

        self._client = ActionClient(self, Offload, 'offload')
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self._depth_pub = self.create_publisher(Image, 'depth', reliable)
        self._odometry_pub = self.create_publisher(Odometry, 'odometry', reliable)
        self._decision_pub = self.create_publisher(TaskDecision, 'accumo/decision', reliable)
        self._tf = TransformBroadcaster(self) if TransformBroadcaster is not None else None
        self._diagnostics_pub = create_diagnostics_publisher(self)
        self.create_timer(config['diagnostics_period_s'], self._publish_diagnostics)
        qos = sensor_qos(config['reliable_sensor_qos'])
        # IMU comes at several hundred Hz: a deeper history than the camera's.
        imu_qos = QoSProfile(
            depth=200,
            history=qos.history,
            reliability=qos.reliability,
            durability=qos.durability,
        )
        self.create_subscription(Image, 'image_raw', self._on_image, qos)
        self.create_subscription(CameraInfo, 'camera_info', self._on_camera_info, qos)
        self.create_subscription(Imu, 'imu', self._on_imu, imu_qos)
        self.create_subscription(LinkState, 'link_state', self._on_link_state, reliable)
        self._worker = threading.Thread(target=self._work, name='accumo_worker', daemon=True)
        self._worker.start()
        self.get_logger().info(
            f'AccuMO scheduler: policy {self._policy.name}, weights depth:odometry '
            f'{weights[0]:g}:{weights[1]:g}, horizon {config["horizon"]}, '
            f'local algorithm {"on" if config["use_local_algorithm"] else "off"}'
            + ('' if self._tf else '; tf2_ros not installed: no TF, odometry topic only')
        )

    # --- callbacks (executor thread): queue and return ------------------------------------

    def _on_camera_info(self, message: CameraInfo) -> None:
        if self._intrinsics is None and message.width > 0 and message.k[0] > 0:
            self._intrinsics = PinholeCamera.from_k(message.k, message.width, message.height)
            self._wake.set()

    def _on_image(self, message: Image) -> None:
        with self._lock:
            if len(self._frames) == self._frames.maxlen:
                self.counts['frames_dropped'] += 1
            self._frames.append(message)
        self._wake.set()

    def _on_imu(self, message: Imu) -> None:
        t = stamp_seconds(message.header.stamp)
        gyro = np.array(
            [message.angular_velocity.x, message.angular_velocity.y, message.angular_velocity.z]
        )
        accel = np.array(
            [
                message.linear_acceleration.x,
                message.linear_acceleration.y,
                message.linear_acceleration.z,
            ]
        )
        if not (np.all(np.isfinite(gyro)) and np.all(np.isfinite(accel))):
            self.counts['imu_rejected'] += 1
            self.get_logger().warning('IMU sample with NaN/inf dropped', throttle_duration_sec=5)
            return
        with self._lock:
            if len(self._imu) == self._imu.maxlen:
                self.counts['imu_dropped'] += 1
            self._imu.append((t, gyro, accel))

    def _on_link_state(self, message: LinkState) -> None:
        if message.connected:
            self._latencies.update_link(
                message.uplink_bandwidth_bps, message.downlink_bandwidth_bps, message.rtt_s
            )

    # --- worker thread --------------------------------------------------------------------

    def _work(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(0.1)
            self._wake.clear()
            try:
                self._drain()
            except Exception as error:  # noqa: BLE001 - keep the robot running, say why
                if self._stop.is_set():
                    # Shutdown destroyed the publishers under a frame that outlived the
                    # worker's join: that frame is abandoned, nothing failed.
                    self.get_logger().debug(f'frame abandoned at shutdown: {error!r}')
                    return
                self.counts['worker_errors'] += 1
                self.get_logger().error(f'frame processing failed: {error!r}')

    def _drain(self) -> None:
        while True:
            if self._intrinsics is None:
                # Frames wait (the bounded queue drops the oldest) until the calibration comes.
                if self._frames:
                    self.get_logger().warning(
                        'no camera_info yet: frames wait', throttle_duration_sec=5.0
                    )
                return
            with self._lock:
                if not self._frames:
                    return
                image = self._frames.popleft()
            self._process(image)

    def _ensure_pipeline(self) -> AccumoPipeline:
        if self._pipeline is None:
            self._pipeline = AccumoPipeline(
                self._intrinsics,
                self._policy,
                lambda _frame, rgb: self._lite.predict(rgb),
                self._odometry_models,
                config=self._pipeline_config,
                latency_frames=self._latency_defaults,
            )
        return self._pipeline

    def _process(self, image: Image) -> None:
        try:
            rgb = imgmsg_to_cv2(image, 'rgb8')
        except (ImageFormatError, ValueError) as error:
            self.counts['frames_rejected'] += 1
            self.get_logger().warning(f'frame rejected: {error}', throttle_duration_sec=5.0)
            return
        intrinsics = self._intrinsics
        if rgb.shape[:2] != (intrinsics.height, intrinsics.width):
            self.counts['frames_rejected'] += 1
            self.get_logger().warning(
                f'frame is {rgb.shape[1]}x{rgb.shape[0]}, camera_info says '
                f'{intrinsics.width}x{intrinsics.height}: rejected',
                throttle_duration_sec=5.0,
            )
            return
        pipeline = self._ensure_pipeline()
        frame_time = stamp_seconds(image.header.stamp)
        self._frame_time = frame_time
        if self._first_frame_time is None:
            self._first_frame_time = frame_time
        self._feed_imu(pipeline, frame_time)
        self._apply_results(pipeline)
        frame = self._frame_index
        self._frame_index += 1
        pipeline.begin_frame(frame, frame_time, rgb)
        decision = None
        if not pipeline.outstanding:
            if time.monotonic() < self._server_down_until:
                self.counts['frames_local_server_down'] += 1
            else:
                model = pipeline.odometry_model
                pipeline.set_latency_frames(self._latencies.frames())
                if pipeline.odometry_model is not model:
                    self.get_logger().info(
                        f'odometry latency now {pipeline.latency_frames[ODOMETRY]} frames: '
                        'using the odometry accuracy model measured at '
                        f'{pipeline.odometry_model.latency_frames}'
                    )
                decision = pipeline.decide()
                if pipeline.outstanding:
                    self._send(pipeline, image, rgb, frame, pipeline.outstanding)
        warp_failures = pipeline.warp_failures
        choice = pipeline.select_depth()
        depth = pipeline.render_depth(choice)
        if pipeline.warp_failures > warp_failures:
            self.counts['frames_warp_left_view'] += 1
            self.get_logger().warning(
                'the last server depth map warps out of view: lite depth net instead',
                throttle_duration_sec=5.0,
            )
        pipeline.update_accuracy_models()
        pipeline.end_frame()
        self._publish(image, depth, pipeline, decision, choice.source)
        self._odometry_health = self._health(pipeline, frame_time)
        self.counts['frames_processed'] += 1

    def _health(self, pipeline: AccumoPipeline, frame_time: float) -> OdometryHealth:
        filter_ = pipeline.fusion.filter
        position_variance = np.linalg.eigvalsh(filter_.pose_covariance[:3, :3]).max()
        return OdometryHealth(
            seconds_running=frame_time - self._first_frame_time,
            seconds_since_pose=(
                None if self._last_pose_time is None else frame_time - self._last_pose_time
            ),
            position_sigma_m=float(math.sqrt(max(position_variance, 0.0))),
            recoveries=filter_.recovered_count,
            imu_samples=self.counts['imu_fed'],
        )

    def _feed_imu(self, pipeline: AccumoPipeline, frame_time: float) -> None:
        while True:
            with self._lock:
                if not self._imu or self._imu[0][0] > frame_time + 1e-6:
                    return
                t, gyro, accel = self._imu.popleft()
            if t <= self._last_imu_time:
                self.counts['imu_out_of_order'] += 1
                continue
            self._last_imu_time = t
            pipeline.add_imu(t, gyro, accel)
            self.counts['imu_fed'] += 1

    # --- offloads -------------------------------------------------------------------------

    def _send(
        self,
        pipeline: AccumoPipeline,
        image: Image,
        rgb: np.ndarray,
        frame: int,
        tasks: tuple[int, ...],
    ) -> None:
        goal = Offload.Goal()
        goal.header = image.header
        goal.mode = self._config['offload_mode']
        deadline = self._config['deadline_s']
        goal.deadline = Duration(seconds=deadline).to_msg()
        if ODOMETRY in tasks:
            _, _, first_rgb = pipeline.odometry_pair(frame)
            intrinsics = self._intrinsics
            goal.model = BOTH_MODEL if DEPTH in tasks else MODELS[(ODOMETRY,)]
            goal.images = [cv2_to_imgmsg(first_rgb, 'rgb8'), image_as_rgb(image, rgb)]
            goal.image_input_names = ['image_1', 'image_2']
            goal.inputs = [
                to_tensor_blob(
                    'intrinsics',
                    np.array(
                        [intrinsics.fx, intrinsics.fy, intrinsics.cx, intrinsics.cy],
                        dtype=np.float32,
                    ),
                ),
                to_tensor_blob(
                    'rotation_prior', rotation_prior_input(pipeline.odometry_rotation_prior(frame))
                ),
                to_tensor_blob(
                    'translation_prior',
                    translation_prior_input(
                        *(pipeline.odometry_translation_prior(frame) or (None,))
                    ),
                ),
            ]
        else:
            goal.model = MODELS[(DEPTH,)]
            goal.images = [image_as_rgb(image, rgb)]
            goal.image_input_names = ['image']
        if not self._client.server_is_ready():
            self._results.put(_Result(frame, tasks, None, 'offload bridge not available', 0.0))
            return
        sent = time.monotonic()
        self.counts['offloads_sent'] += 1
        future = self._client.send_goal_async(goal)
        future.add_done_callback(lambda done: self._on_goal_response(done, frame, tasks, sent))

    def _on_goal_response(self, future, frame: int, tasks: tuple[int, ...], sent: float) -> None:  # noqa: ANN001
        handle = future.result()
        if handle is None or not handle.accepted:
            self._fail(frame, tasks, sent, 'goal rejected by the offload bridge')
            return
        handle.get_result_async().add_done_callback(
            lambda done: self._on_result(done, frame, tasks, sent)
        )

    def _on_result(self, future, frame: int, tasks: tuple[int, ...], sent: float) -> None:  # noqa: ANN001
        response = future.result()
        result = None if response is None else response.result
        latency = time.monotonic() - sent
        if result is None or result.error_code != Offload.Result.ERROR_NONE:
            reason = 'no result' if result is None else result.error_message
            self._fail(frame, tasks, sent, reason)
            return
        try:
            outputs = {blob.name: from_tensor_blob(blob) for blob in result.outputs}
        except TensorBlobError as error:
            self._fail(frame, tasks, sent, f'malformed result: {error}')
            return
        stats = result.stats
        self._results.put(
            _Result(
                frame,
                tasks,
                outputs,
                result.fallback_reason if result.fell_back else '',
                latency,
                stats.bytes_up,
                stats.bytes_down,
                stats.server_compute_time_s,
            )
        )
        self._wake.set()

    def _fail(self, frame: int, tasks: tuple[int, ...], sent: float, reason: str) -> None:
        self._results.put(_Result(frame, tasks, None, reason, time.monotonic() - sent))
        self._wake.set()

    def _apply_results(self, pipeline: AccumoPipeline) -> None:
        while True:
            try:
                result = self._results.get_nowait()
            except queue.Empty:
                return
            if result.outputs is None or result.reason:
                # Failed, or the bridge ran the server model on the robot: the server is
                # not usable now; local algorithms until server_retry_s has passed.
                self.counts['offloads_failed'] += 1
                self._last_failure = result.reason
                self._server_down_until = time.monotonic() + self._config['server_retry_s']
                self.get_logger().warning(
                    f'offload of frame {result.frame} for '
                    f'{"+".join(TASK_NAMES[t] for t in result.tasks)} failed ({result.reason}); '
                    f'local algorithms for {self._config["server_retry_s"]:g} s',
                    throttle_duration_sec=2.0,
                )
                if result.outputs is None:
                    for task in result.tasks:
                        pipeline.offload_failed(task, result.frame)
                    continue
            try:
                self._apply_outputs(pipeline, result)
            except (KeyError, ValueError) as error:
                self.counts['offloads_failed'] += 1
                self.get_logger().error(f'unusable offload result: {error}')
                for task in result.tasks:
                    if task in pipeline.outstanding:
                        pipeline.offload_failed(task, result.frame)

    def _apply_outputs(self, pipeline: AccumoPipeline, result: _Result) -> None:
        outputs = result.outputs
        if DEPTH in result.tasks:
            depth = np.asarray(outputs['depth'], dtype=np.float32)
            shape = (self._intrinsics.height, self._intrinsics.width)
            if depth.shape != shape or not np.all(np.isfinite(depth)):
                raise ValueError(f'depth result of shape {depth.shape}, expected {shape}')
            pipeline.depth_result(result.frame, depth)
        if ODOMETRY in result.tasks:
            pose = np.asarray(outputs['relative_pose'], dtype=np.float64).reshape(4, 4)
            covariance = np.asarray(outputs['covariance'], dtype=np.float64).reshape(6, 6)
            ok = bool(np.asarray(outputs['ok']).reshape(()))
            inliers = int(np.asarray(outputs['inliers']).reshape(()))
            alternatives = alternatives_output(
                outputs['alternative_poses'], outputs['alternative_covariances']
            )
            fused = pipeline.odometry_result(
                result.frame, pose if ok else None, covariance, inliers, alternatives
            )
            if not ok:
                self.counts['vo_pairs_failed'] += 1
            elif fused:
                self.counts['vo_poses_fused'] += 1
                self._last_pose_time = self._frame_time
            else:
                self.counts['vo_poses_refused'] += 1
        for task in result.tasks:
            self._latencies.record(
                task,
                OffloadSample(
                    result.latency_s, result.bytes_up, result.bytes_down, result.server_s
                ),
            )
        self.counts['offloads_done'] += 1

    # --- outputs --------------------------------------------------------------------------

    def _publish(
        self,
        image: Image,
        depth: np.ndarray,
        pipeline: AccumoPipeline,
        decision: Decision | None,
        depth_source: str,
    ) -> None:
        depth_message = cv2_to_imgmsg(np.ascontiguousarray(depth, dtype=np.float32), '32FC1')
        depth_message.header = image.header
        self._depth_pub.publish(depth_message)

        pose = pipeline.pose
        odometry = Odometry()
        odometry.header.stamp = image.header.stamp
        odometry.header.frame_id = self._config['odom_frame']
        odometry.child_frame_id = self._config['base_frame']
        position = pose[:3, 3]
        quaternion = Rotation.from_matrix(pose[:3, :3]).as_quat()  # x, y, z, w
        p, q = odometry.pose.pose.position, odometry.pose.pose.orientation
        p.x, p.y, p.z = (float(v) for v in position)
        q.x, q.y, q.z, q.w = (float(v) for v in quaternion)
        covariance = pipeline.fusion.filter.pose_covariance
        odometry.pose.covariance = [float(v) for v in np.asarray(covariance).reshape(-1)[:36]]
        velocity_body = pose[:3, :3].T @ pipeline.velocity
        t = odometry.twist.twist.linear
        t.x, t.y, t.z = (float(v) for v in velocity_body)
        self._odometry_pub.publish(odometry)
        if self._tf is not None:
            transform = TransformStamped()
            transform.header = odometry.header
            transform.child_frame_id = odometry.child_frame_id
            tr = transform.transform.translation
            tr.x, tr.y, tr.z = p.x, p.y, p.z
            transform.transform.rotation = q
            self._tf.sendTransform(transform)

        message = TaskDecision()
        message.header = image.header
        message.frame_index = pipeline.frame
        message.task_names = list(TASK_NAMES)
        estimates = decision.estimates if decision else pipeline.model_estimates()
        message.offloaded_task_index = TaskDecision.NO_OFFLOAD
        if decision is not None and decision.tasks:
            # Several tasks at once (AAO) are reported as the first.
            message.offloaded_task_index = decision.tasks[0]
        message.drop_rate_per_frame = [float(e.drop_rate) for e in estimates]
        message.local_algorithm_drop = [float(e.local_drop) for e in estimates]
        staleness = pipeline.staleness()
        message.staleness_frames = [0 if s is None else min(int(s), 2**32 - 1) for s in staleness]
        message.predicted_drop = [
            float(e.drop(s if s is not None else 0))
            for e, s in zip(estimates, staleness, strict=True)
        ]
        message.use_local_algorithm = [depth_source != 'tracker', False]
        message.latency_frames = [int(v) for v in pipeline.latency_frames]
        # The horizon in use: shortened where the latencies would make too many plans.
        policy = pipeline.policy
        horizon = policy.scheduler.horizon if isinstance(policy, MpcPolicy) else 0
        message.horizon_frames = int(horizon or self._config['horizon'])
        if decision is not None:
            message.predicted_objective = float(
                decision.predicted_objective if math.isfinite(decision.predicted_objective) else 0
            )
            message.solve_time_s = float(decision.solve_time_s)
        self._decision_pub.publish(message)

    def _publish_diagnostics(self) -> None:
        counts = dict(self.counts)
        server_down_s = max(0.0, self._server_down_until - time.monotonic())
        level, message = offloading_status(
            counts, server_down_s, self._last_failure, self._policy.name
        )
        offloading = {
            key: counts.get(key, 0)
            for key in (
                'offloads_sent',
                'offloads_done',
                'offloads_failed',
                'frames_processed',
                'frames_dropped',
                'frames_rejected',
                'frames_local_server_down',
                'imu_dropped',
                'imu_rejected',
                'worker_errors',
            )
        }
        offloading['last_failure'] = self._last_failure
        health = self._odometry_health
        odometry_level, odometry_message = odometry_status(
            health, self._config['odometry_stale_s']
        )
        odometry = {
            key: counts.get(key, 0)
            for key in ('vo_poses_fused', 'vo_poses_refused', 'vo_pairs_failed')
        }
        if health is not None:
            odometry['imu_samples'] = health.imu_samples
            odometry['filter_recoveries'] = health.recoveries
            odometry['position_sigma_m'] = f'{health.position_sigma_m:.3f}'
            since = health.seconds_since_pose
            odometry['seconds_since_vo_pose'] = '' if since is None else f'{since:.2f}'
        self._diagnostics_pub.publish(
            diagnostic_array(
                self,
                [
                    diagnostic_status('accumo_scheduler: offloading', level, message, offloading),
                    diagnostic_status(
                        'accumo_scheduler: odometry', odometry_level, odometry_message, odometry
                    ),
                ],
            )
        )

    def destroy_node(self) -> None:
        """Stop the worker, then destroy the node."""
        if hasattr(self, '_worker'):  # not when the configuration was rejected
            self._stop.set()
            self._wake.set()
            self._worker.join(timeout=0.5)
        super().destroy_node()


def image_as_rgb(image: Image, rgb: np.ndarray) -> Image:
    """Return ``image`` itself if it is rgb8, else an rgb8 copy of ``rgb`` with its header."""
    if image.encoding == 'rgb8':
        return image
    message = cv2_to_imgmsg(rgb, 'rgb8')
    message.header = image.header
    return message


def main(args: list[str] | None = None) -> int:
    """Run the scheduler node until shutdown; exit code 1 on a bad configuration."""
    return run_node(
        AccumoSchedulerNode,
        'accumo_scheduler',
        args,
        configuration_errors=(ValueError, ParameterException, FileNotFoundError),
    )


if __name__ == '__main__':
    sys.exit(main())
