# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The robot side of AccuMO for depth and odometry (spec §2.3 data flow), without ROS.

One :class:`AccumoPipeline` per camera. The scheduler node and the evaluator drive the
same object, in this order for each camera frame ``f``:

1. :meth:`~AccumoPipeline.add_imu` for every IMU sample up to the frame's time;
2. :meth:`~AccumoPipeline.depth_result` / :meth:`~AccumoPipeline.odometry_result` /
   :meth:`~AccumoPipeline.offload_failed` for offloads whose results arrived;
3. :meth:`~AccumoPipeline.begin_frame`, then, when no offload is outstanding,
   :meth:`~AccumoPipeline.decide` (the policy picks the tasks, the odometry filter is
   snapshotted) and the caller uploads the frame;
4. :meth:`~AccumoPipeline.select_depth` (tracker or lite model), :meth:`render_depth` for
   the map, :attr:`~AccumoPipeline.pose` for the odometry;
5. :meth:`~AccumoPipeline.update_accuracy_models`, then
   :meth:`~AccumoPipeline.end_frame` (the VO keyframe moves on after a turn).

Tasks: 0 = depth (server depth net; tracker = warping the last server map with the pose
change since its frame, integrated from the IMU (see :class:`ImuPoseChange`); local
algorithm = the lite depth net), 1 = odometry (server
frame-pair VO against a keyframe; tracker and local algorithm = the error-state Kalman
filter fusing VO poses late by rollback, the keyframe's pose kept as a stochastic clone).
Accuracy estimates: depth ``r`` from the optical-flow tracker model, depth ``d`` from lite
vs server on the latest offloaded frame, odometry ``r`` from the angular-speed quantile
regression; odometry has no separate local-algorithm cap (``d = ∞``).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from accumo_ros.scheduler.mpc import AccuracyEstimate
from accumo_ros.scheduler.offload_policies import MpcPolicy, OffloadPolicy
from accumo_ros.simulation.imu import ImuNoise
from accumo_ros.tasks.depth_tracking import (
    DEFAULT_INITIAL_DROP_RATE,
    DEFAULT_MIN_STRIDE,
    LOCAL_ALGORITHM,
    TRACKER,
    DepthTrackerAccuracyModel,
    lite_model_drop,
    offload_tracker_drop_rate,
    optical_relative_pose,
    select_local_depth,
    warp_depth,
)
from accumo_ros.tasks.imu_filter import (
    DEFAULT_LEVEL_GROUND,
    DEFAULT_ROBUST_DISTANCE_SQ,
    DelayedPoseFusion,
    ErrorStateKalmanFilter,
    ImuCalibration,
    LevelGroundPrior,
    gyro_rotation,
)
from accumo_ros.tasks.odometry_model import (
    OdometryAccuracyModel,
    OdometryModelSet,
    window_angular_speed,
)
from accumo_ros.tasks.visual_odometry import KeyframePolicy, VoConfig
from edge_offload.camera_model import PinholeCamera

DEPTH = 0
ODOMETRY = 1
TASK_NAMES = ('depth', 'odometry')
# Before any server depth map exists there is nothing to track: every policy uses the lite net.
NO_SERVER_DEPTH = 'no_server_depth'
# The lite-net drop line fitted on the calibration set (see PipelineConfig).
LITE_DROP_SLOPE = 0.625
LITE_DROP_OFFSET = 0.0097
# The tracker model measured on each depth result (see PipelineConfig.tracker_model).
TRACKER_MODELS = ('offload', 'flow')
TRACKER_OFFLOAD_SLOPE = 0.834
TRACKER_OFFLOAD_OFFSET = 0.0284

# Raw gyro samples kept for the VO pairs' rotation priors: 8 s at 1 kHz, 40 s at 200 Hz.
GYRO_LOG_SAMPLES = 8192

LiteDepth = Callable[[int, np.ndarray], np.ndarray]  # (frame, rgb) -> depth in metres
AccuracySource = Callable[['AccumoPipeline', int], Sequence[AccuracyEstimate]]


@dataclass(frozen=True)
class PipelineConfig:
    """Settings of the robot-side tasks (defaults: the release's, §2.4 [R])."""

    use_local_algorithm: bool = True  # depth: switch to the lite net when it is better
    # Lite-net drop d = slope · AbsRel(lite vs server) - offset. The release uses slope 1 and
    # offset 0.04 (the server net's mean AbsRel); that overstates d where both nets are poor,
    # so the lite net was picked too rarely. These are the least-squares line on a
    # calibration set the nets never saw (accumo_generate --seed 2 --holdout none; on their
    # own train split the server net is too good); benchmarks/accumo_drop_models_heldout.py
    # --fit-dataset prints the fit and its held-out error.
    lite_drop_slope: float = LITE_DROP_SLOPE
    lite_drop_offset: float = LITE_DROP_OFFSET
    initial_depth_drop_rate: float = DEFAULT_INITIAL_DROP_RATE
    tracker_min_stride: int = DEFAULT_MIN_STRIDE
    # The depth tracker's accuracy model. 'flow': the dissertation's DIS-flow model, every
    # tracker_model_period frames. 'offload': on each depth result, the tracker's map of the
    # offloaded frame against the server's (offload_tracker_drop_rate; the line
    # tracker_offload_slope · AbsRel - tracker_offload_offset is fitted on the calibration
    # set). 'offload' ranks the true drop better and is not biased low at 30-60 frame
    # strides (the flow misses objects' own motion), but it measures at the stride between
    # two depth offloads and the true drop is convex in the stride, so it overstates the
    # drop of shorter strides and the selector leaves the tracker early. On test4 at
    # 16 Mbit/s it made RR + LA 1-3.5 % worse and AccuMO -2.6 % to +12.7 % depending on
    # the weight (docs/results.md): not a consistent gain, hence not the default.
    tracker_model: str = 'flow'
    tracker_offload_slope: float = TRACKER_OFFLOAD_SLOPE
    tracker_offload_offset: float = TRACKER_OFFLOAD_OFFSET
    # The flow-based tracker model is slow (66 ms on the phone): it runs at most once every
    # this many frames, as the release's "only when not busy".
    tracker_model_period: int = 4
    fps: float = 60.0
    # VO pairs measure from a keyframe (see KeyframePolicy); max_frames=0: frame to frame.
    keyframes: KeyframePolicy = field(default_factory=KeyframePolicy)
    # The odometry filter's robust weight and level-ground prior (imu_filter's module
    # docstring; None: off). Not the IMU-only filter: it dead-reckons by definition.
    odometry_robust_distance_sq: float | None = DEFAULT_ROBUST_DISTANCE_SQ
    level_ground: LevelGroundPrior | None = DEFAULT_LEVEL_GROUND
    # The IMU's biases as calibrated on the robot (both filters start from them); None:
    # uncalibrated, zero biases with the noise model's turn-on sigmas.
    imu_calibration: ImuCalibration | None = None

    def __post_init__(self) -> None:
        if self.tracker_model_period < 1:
            raise ValueError('tracker_model_period must be >= 1')
        if not self.fps > 0.0:
            raise ValueError(f'fps must be positive, got {self.fps}')
        if not (self.lite_drop_slope > 0.0 and math.isfinite(self.lite_drop_slope)):
            raise ValueError('lite_drop_slope must be finite and positive')
        if not math.isfinite(self.lite_drop_offset):
            raise ValueError('lite_drop_offset must be finite')
        if self.tracker_model not in TRACKER_MODELS:
            raise ValueError(
                f'tracker_model must be one of {TRACKER_MODELS}, got {self.tracker_model!r}'
            )
        if not (self.tracker_offload_slope > 0.0 and math.isfinite(self.tracker_offload_slope)):
            raise ValueError('tracker_offload_slope must be finite and positive')
        if not math.isfinite(self.tracker_offload_offset):
            raise ValueError('tracker_offload_offset must be finite')
        robust = self.odometry_robust_distance_sq
        if robust is not None and not (robust > 0.0 and math.isfinite(robust)):
            raise ValueError(f'odometry_robust_distance_sq must be positive, got {robust}')


@dataclass(frozen=True)
class DepthChoice:
    """Where the depth of a frame comes from."""

    source: str  # TRACKER, LOCAL_ALGORITHM or NO_SERVER_DEPTH
    base_frame: int | None  # the offloaded frame whose server map is warped (tracker)
    stride: int | None  # frames since that offloaded frame


@dataclass(frozen=True)
class Decision:
    """What the policy chose for a frame, with what it knew (for TaskDecision)."""

    frame: int
    tasks: tuple[int, ...]  # offloaded for; () = none
    estimates: tuple[AccuracyEstimate, ...]
    latency_frames: tuple[int, ...]
    staleness: tuple[int | None, ...]
    predicted_objective: float  # the MPC's cost (nan for the baselines)
    solve_time_s: float


# The VO settings the robot's translation prior is gated with (the server uses its own).
VO_CONFIG = VoConfig()


@dataclass
class _PendingOdometry:
    first: int  # the keyframe: the VO pair is (first, second)
    second: int
    first_rgb: np.ndarray
    second_rgb: np.ndarray
    first_time: float
    second_time: float
    # The filter's predicted position of the second frame in the first and the VO gate
    # around it (None: no clone).
    translation_prior: tuple[np.ndarray, float] | None = None


class ImuPoseChange:
    """The IMU-integrated pose change since a depth offload, for warping its server map.

    The release warps with an IMU-only filter's pose change. Uncorrected, that filter's
    velocity drifts without bound: on the generated sequences its 12-frame translation is
    off by 0.5 m after 7 s and 1.5 m after 19 s (true motion ~0.2 m), so after a few seconds
    the tracker warps with noise, and a warp can leave nothing in view. This integrator
    starts from the fused (IMU + VO) filter's state at the offloaded frame and integrates
    the IMU alone from there, so the drift only spans one stride (mean error 0.07 m over 12
    frames on high/high, 0.03 m on low/low).
    """

    def __init__(self, fused: ErrorStateKalmanFilter, t: float | None) -> None:
        self.filter = fused.copy()
        if self.filter.has_clone:
            self.filter.drop_clone()  # the VO keyframe clone plays no part in the warp
        self.start_pose = self.filter.pose
        self._time = t

    def add_imu(self, t: float, gyro: np.ndarray, accel: np.ndarray) -> None:
        dt = 0.0 if self._time is None else t - self._time
        self.filter.predict(gyro, accel, dt)
        self._time = t

    def pose_change(self) -> np.ndarray:
        """T_2_1 from the optical frame at the offload to the current frame's."""
        return optical_relative_pose(self.start_pose, self.filter.pose)


@dataclass(frozen=True)
class _PendingDepth:
    """What a depth result will be combined with, kept when its frame is offloaded."""

    rgb: np.ndarray
    warp: ImuPoseChange  # the pose change from the offloaded frame on
    # The tracker's map of the offloaded frame and the frame it was warped from (None when
    # no server map was in use): the 'offload' tracker model compares it with the result.
    tracked: tuple[int, np.ndarray] | None


@dataclass
class _DepthState:
    frame: int | None = None  # offloaded frame of the server map in use
    server_depth: np.ndarray | None = None
    rgb: np.ndarray | None = None
    warp: ImuPoseChange | None = None  # the pose change since that frame
    lite_drop: float = math.inf
    last_model_frame: int | None = None
    pending: dict[int, _PendingDepth] = field(default_factory=dict)
    # The current frame's warped map: (frame, base frame, map), computed once per frame.
    warped: tuple[int, int, np.ndarray] | None = None


class AccumoPipeline:
    """Depth and odometry tracking with offloads chosen by an :class:`OffloadPolicy`."""

    def __init__(
        self,
        intrinsics: PinholeCamera,
        policy: OffloadPolicy,
        lite_depth: LiteDepth,
        odometry_model: OdometryAccuracyModel | OdometryModelSet,
        *,
        initial_pose: np.ndarray | None = None,
        initial_velocity: np.ndarray | None = None,
        noise: ImuNoise | None = None,
        config: PipelineConfig | None = None,
        latency_frames: Sequence[int] = (5, 4),
        accuracy_source: AccuracySource | None = None,
    ) -> None:
        self.intrinsics = intrinsics
        self.policy = policy
        self.lite_depth = lite_depth
        # The odometry model in use follows the odometry latency (see set_latency_frames).
        self.odometry_models = (
            odometry_model
            if isinstance(odometry_model, OdometryModelSet)
            else OdometryModelSet([odometry_model])
        )
        self.config = config or PipelineConfig()
        # Replaces the accuracy models' estimates (the evaluator's oracle); None = the models.
        self.accuracy_source = accuracy_source
        noise = noise or ImuNoise()
        calibration = self.config.imu_calibration or ImuCalibration.uncalibrated(noise)
        self.imu_only = DelayedPoseFusion(
            ErrorStateKalmanFilter(
                initial_pose, initial_velocity, noise, **calibration.filter_keywords()
            )
        )
        self.fusion = DelayedPoseFusion(
            ErrorStateKalmanFilter(
                initial_pose,
                initial_velocity,
                noise,
                **calibration.filter_keywords(),
                robust_distance_sq=self.config.odometry_robust_distance_sq,
                ground_prior=self.config.level_ground,
            )
        )
        self.tracker_model = DepthTrackerAccuracyModel(
            intrinsics,
            min_stride=self.config.tracker_min_stride,
            initial_drop_rate=self.config.initial_depth_drop_rate,
        )
        self.latency_frames = tuple(int(v) for v in latency_frames)
        self.odometry_model = self.odometry_models.select(self.latency_frames[ODOMETRY])
        self.frame: int | None = None  # the frame being processed
        self.frame_time: float | None = None
        self.rgb: np.ndarray | None = None
        self._depth = _DepthState()
        self._odometry_last: int | None = None  # latest odometry offload whose pose arrived
        # The first frame of the next VO pair; the filter's clone is its pose.
        self._keyframe: int | None = None
        self._keyframe_rgb: np.ndarray | None = None
        self._keyframe_time = math.nan
        self._gyro_log: deque[tuple[float, np.ndarray]] = deque(maxlen=GYRO_LOG_SAMPLES)
        self._odometry_pending: dict[int, _PendingOdometry] = {}
        self._rotations: deque[np.ndarray] = deque(
            # The angular speed is the odometry model's feature: over the model's window.
            maxlen=self.odometry_models.max_window_frames + 1
        )
        self.outstanding: tuple[int, ...] = ()  # tasks of the offload in flight
        self.last_decision: Decision | None = None
        self.tracker_failures = 0  # tracker-model runs without any overlap
        self.keyframe_turns = 0  # keyframes moved on between offloads by a turn
        self._after_weak_pair = False  # the latest VO pair failed, was refused or matched few
        self.warp_failures = 0  # frames switched to the lite net because nothing landed

    # --- inputs ---------------------------------------------------------------------------

    def add_imu(self, t: float, gyro: np.ndarray, accel: np.ndarray) -> None:
        """Predict the filters with one IMU sample (times strictly increasing)."""
        self.imu_only.add_imu(t, gyro, accel)
        self.fusion.add_imu(t, gyro, accel)
        self._gyro_log.append((float(t), np.asarray(gyro, dtype=np.float64)))
        # At most one in use and one per depth offload in flight.
        if self._depth.warp is not None:
            self._depth.warp.add_imu(t, gyro, accel)
        for pending in self._depth.pending.values():
            pending.warp.add_imu(t, gyro, accel)

    def begin_frame(self, frame: int, t: float, rgb: np.ndarray) -> None:
        """Start processing camera frame ``frame`` (increasing) taken at ``t``."""
        if self.frame is not None and frame <= self.frame:
            raise ValueError(f'frame {frame} is not after the previous frame {self.frame}')
        self.frame, self.frame_time, self.rgb = int(frame), float(t), rgb
        self._rotations.append(self.imu_only.filter.pose[:3, :3].copy())

    def end_frame(self) -> None:
        """Finish the current frame: it becomes the VO keyframe after a turn.

        Once the robot has turned too far since the keyframe after a weak pair
        (:meth:`KeyframePolicy.turned_too_far`), the next pair measures from this frame.
        After the offload decision, so that a pair never starts and ends at one frame; only
        while no VO pair is in flight, as a pending pair measures from the filter's clone,
        which this replaces. The IMU must not have been fed past the frame's time.
        """
        if self._odometry_pending:
            return
        filter_ = self.fusion.filter
        turned = filter_.rotation_since_clone()
        if not self.config.keyframes.turned_too_far(turned, self._after_weak_pair):
            return
        filter_.clone_pose()
        self._keyframe, self._keyframe_rgb = self.frame, self.rgb
        self._keyframe_time = self.frame_time
        self.keyframe_turns += 1

    @property
    def last_offloads(self) -> tuple[int | None, int | None]:
        """Per task, the latest offloaded frame whose result has arrived."""
        return (self._depth.frame, self._odometry_last)

    @property
    def pose(self) -> np.ndarray:
        """The odometry: T_world_body of the fused filter at the latest IMU sample."""
        return self.fusion.filter.pose

    @property
    def velocity(self) -> np.ndarray:
        """World-frame velocity of the fused filter."""
        return self.fusion.filter.velocity

    # --- accuracy estimates ---------------------------------------------------------------

    def model_estimates(self) -> tuple[AccuracyEstimate, AccuracyEstimate]:
        """Return the accuracy models' latest estimates (depth, odometry)."""
        depth = AccuracyEstimate(
            self.tracker_model.drop_rate,
            max(self._depth.lite_drop, 0.0) if self.config.use_local_algorithm else math.inf,
        )
        rotations = self._rotations
        if len(rotations) >= 2:
            span = min(len(rotations) - 1, self.odometry_model.window_frames)
            speed = window_angular_speed(
                rotations[-1 - span], rotations[-1], span / self.config.fps
            )
        else:
            speed = 0.0
        odometry = AccuracyEstimate(
            self.odometry_model.drop_rate(speed), free_stride=self.odometry_model.base_stride
        )
        return depth, odometry

    def estimates(self) -> tuple[AccuracyEstimate, ...]:
        """Return the estimates the scheduler uses (the models', or the accuracy source's)."""
        if self.accuracy_source is not None and self.frame is not None:
            return tuple(self.accuracy_source(self, self.frame))
        return self.model_estimates()

    def staleness(self) -> tuple[int | None, ...]:
        """Frames since each task's latest usable offload (None before the first)."""
        return tuple(
            None if last is None or self.frame is None else self.frame - last
            for last in self.last_offloads
        )

    # --- offloading -----------------------------------------------------------------------

    def set_latency_frames(self, latency_frames: Sequence[int]) -> None:
        """Use new per-task offload latencies (frames) from the next decision on."""
        latencies = tuple(max(1, int(v)) for v in latency_frames)
        if len(latencies) != len(TASK_NAMES):
            raise ValueError(f'need {len(TASK_NAMES)} latencies, got {len(latencies)}')
        self.latency_frames = latencies
        self.odometry_model = self.odometry_models.select(latencies[ODOMETRY])

    def decide(self) -> Decision:
        """Ask the policy for the current frame; the caller must then upload it.

        Call only when no offload is outstanding. For an odometry offload the fused
        filter's state is snapshotted now (the IMU must be fed up to the frame's time).
        """
        if self.frame is None:
            raise RuntimeError('decide() before begin_frame()')
        if self.outstanding:
            raise RuntimeError(f'an offload for tasks {self.outstanding} is outstanding')
        policy = self.policy
        if isinstance(policy, MpcPolicy):
            scheduler = policy.scheduler
            # The odometry model in use bounds the stride the plans may reach.
            current = scheduler.with_latencies(
                self.latency_frames, (None, self.odometry_model.stride_limit)
            )
            if current.tasks != scheduler.tasks:
                policy.scheduler = current
        estimates = self.estimates()
        start = time.perf_counter()
        tasks = tuple(policy.choose(self.frame, self.last_offloads, estimates))
        solve_time = time.perf_counter() - start
        objective = math.nan
        if isinstance(policy, MpcPolicy) and policy.last_decision is not None:
            objective = policy.last_decision.cost
        self.outstanding = tuple(task for task in tasks if self._start_offload(task))
        self.last_decision = Decision(
            self.frame,
            tasks,
            tuple(estimates),
            self.latency_frames,
            self.staleness(),
            objective,
            solve_time,
        )
        return self.last_decision

    def odometry_pair(self, frame: int) -> tuple[int, int, np.ndarray]:
        """(first, second, first frame's RGB) of the VO pair of odometry offload ``frame``."""
        pending = self._odometry_pending[frame]
        return pending.first, pending.second, pending.first_rgb

    def odometry_rotation_prior(self, frame: int) -> np.ndarray | None:
        """R_body(first)_body(second) of offload ``frame``'s VO pair, from the raw gyro.

        The server's VO takes it as its rotation prior (consensus on the translation
        alone, :mod:`accumo_ros.tasks.visual_odometry`): raw rates, as the evaluator's
        :class:`~accumo_ros.tools.odometry_eval.VoCache` integrates them. None when the
        gyro log no longer reaches back to the pair's first frame, or is empty.
        """
        pending = self._odometry_pending[frame]
        log = self._gyro_log
        if not log or (len(log) == log.maxlen and log[0][0] > pending.first_time):
            return None
        times = np.fromiter((t for t, _ in log), dtype=np.float64, count=len(log))
        rates = np.stack([rate for _, rate in log])
        return gyro_rotation(times, rates, pending.first_time, pending.second_time)

    def odometry_translation_prior(self, frame: int) -> tuple[np.ndarray, float] | None:
        """Return the filter's predicted position of the pair's second frame in its first.

        ``(position, gate)``, taken when offload ``frame`` was decided (IMU and the poses
        fused so far); the gate (m) widens with the prediction's uncertainty. The server's
        VO takes the consensus near it, so a box driving ahead of the robot, which says
        "standing still", loses to the room (:mod:`accumo_ros.tasks.visual_odometry`).
        """
        return self._odometry_pending[frame].translation_prior

    def _start_offload(self, task: int) -> bool:
        """Prepare ``task``'s offload of the current frame; False if it needs no upload."""
        frame = self.frame
        if task == DEPTH:
            # Keep what the result will be combined with: the frame, and the pose change
            # from it on.
            integrator = ImuPoseChange(self.fusion.filter, self.fusion.time)
            tracked = None
            base = self._depth.frame
            if self.config.tracker_model == 'offload' and base is not None and base < frame:
                tracked = (base, self.warped_depth())
            self._depth.pending[frame] = _PendingDepth(self.rgb, integrator, tracked)
        elif task == ODOMETRY:
            if self._keyframe is None:
                # The first frame of a VO chain has nothing to pair with: no upload, the
                # filter clones its pose here and the next offload pairs with it.
                self.fusion.filter.clone_pose()
                self._keyframe = self._odometry_last = frame
                self._keyframe_rgb, self._keyframe_time = self.rgb, self.frame_time
                return False
            self.fusion.snapshot(frame, None)
            self._odometry_pending[frame] = _PendingOdometry(
                self._keyframe,
                frame,
                self._keyframe_rgb,
                self.rgb,
                self._keyframe_time,
                self.frame_time,
                VO_CONFIG.translation_prior_of(self.fusion.filter),
            )
        else:
            raise ValueError(f'unknown task {task}')
        return True

    def depth_result(self, frame: int, server_depth: np.ndarray) -> None:
        """Take the server depth map of offloaded frame ``frame``."""
        pending = self._depth.pending.pop(frame)
        self._finish(DEPTH)
        if pending.tracked is not None:
            self._measure_tracker(frame, *pending.tracked, server_depth)
        state = self._depth
        state.frame, state.server_depth, state.rgb = frame, server_depth, pending.rgb
        state.warp, state.warped = pending.warp, None
        if self.config.use_local_algorithm:
            lite = self.lite_depth(frame, pending.rgb)
            state.lite_drop = lite_model_drop(
                lite, server_depth, self.config.lite_drop_offset, slope=self.config.lite_drop_slope
            )

    def _measure_tracker(
        self, frame: int, base_frame: int, tracked: np.ndarray, server_depth: np.ndarray
    ) -> bool:
        """Adopt the 'offload' tracker model's rate measured on ``frame``; True if it ran."""
        stride = frame - base_frame
        if stride < self.config.tracker_min_stride:
            return False  # too short to measure against the two server maps' own differences
        try:
            rate = offload_tracker_drop_rate(
                tracked,
                server_depth,
                stride,
                slope=self.config.tracker_offload_slope,
                offset=self.config.tracker_offload_offset,
            )
        except ValueError:
            rate = 1.0 / stride  # nothing to compare: as if every pixel were 100 % off
            self.tracker_failures += 1
        self.tracker_model.drop_rate = rate
        return True

    def odometry_result(
        self,
        frame: int,
        relative_pose: np.ndarray | None,
        covariance: np.ndarray | None,
        inliers: int = 0,
        alternatives: Sequence[tuple[np.ndarray, np.ndarray]] = (),
    ) -> bool:
        """Fuse the server VO of odometry offload ``frame`` (None: no pose for the pair).

        ``inliers`` (the VO's) decides with the keyframe's age whether the keyframe stays.
        ``alternatives``: the VO's other ``(relative_pose, covariance)`` for the pair; the
        filter fuses whichever agrees best with its prediction.
        Returns True when the pose was fused (False: failed or gated).
        """
        pending = self._odometry_pending.pop(frame)
        self._finish(ODOMETRY)
        keep = relative_pose is not None and self.config.keyframes.keep(
            pending.first, frame, inliers
        )
        # A failed pair restarts the chain here; a kept keyframe stays the clone.
        fused = self.fusion.fuse_relative(
            frame, relative_pose, covariance, keep_clone=keep, alternatives=alternatives
        )
        if not keep:
            self._keyframe, self._keyframe_rgb = frame, pending.second_rgb
            self._keyframe_time = pending.second_time
        if relative_pose is not None:
            self._odometry_last = frame
        self._after_weak_pair = self.config.keyframes.weak_pair(fused, inliers)
        return fused

    def offload_failed(self, task: int, frame: int) -> None:
        """Record that the offload of ``frame`` for ``task`` brought no result (server down)."""
        self._finish(task)
        if task == DEPTH:
            self._depth.pending.pop(frame, None)
            return
        pending = self._odometry_pending.pop(frame, None)
        if pending is not None and frame in self.fusion.outstanding:
            # Restart the VO chain at this frame: the next pair starts from here.
            self.fusion.fuse_relative(frame, None, None)
            self._keyframe, self._keyframe_rgb = frame, pending.second_rgb
            self._keyframe_time = pending.second_time

    def _finish(self, task: int) -> None:
        self.outstanding = tuple(t for t in self.outstanding if t != task)

    # --- per-frame outputs ----------------------------------------------------------------

    def select_depth(self) -> DepthChoice:
        """Choose the tracker or the lite net for the current frame (the local selector)."""
        state = self._depth
        if state.frame is None:
            return DepthChoice(NO_SERVER_DEPTH, None, None)
        stride = self.frame - state.frame
        if self.config.use_local_algorithm and stride > 0:
            estimate = self.estimates()[DEPTH]
            source = select_local_depth(estimate.drop_rate, stride, estimate.local_drop)
            if source == TRACKER and np.isnan(self.warped_depth()).all():
                # Nothing of the server map lands in view (a large turn): the lite net.
                source = LOCAL_ALGORITHM
                self.warp_failures += 1
        else:
            source = TRACKER
        return DepthChoice(source, state.frame if source == TRACKER else None, stride)

    def warp_pose(self) -> np.ndarray:
        """T_2_1 from the optical frame of the server map in use to the current frame's."""
        return self._depth.warp.pose_change()

    def warped_depth(self) -> np.ndarray:
        """Return the server map in use warped to the current frame (all NaN if none lands)."""
        state = self._depth
        if state.warped is None or state.warped[:2] != (self.frame, state.frame):
            depth = warp_depth(state.server_depth, self.intrinsics, self.warp_pose())
            state.warped = (self.frame, state.frame, depth)
        return state.warped[2]

    def render_depth(self, choice: DepthChoice) -> np.ndarray:
        """Return the depth map (metres) of the current frame for ``choice``.

        A tracker map is all NaN (REP 117: no valid depth) when none of the server map lands
        in view and the lite net is off.
        """
        if choice.source == TRACKER:
            if choice.stride == 0:
                return self._depth.server_depth
            return self.warped_depth()
        return self.lite_depth(self.frame, self.rgb)

    def update_accuracy_models(self) -> bool:
        """Run the flow tracker model when it is due; True if it ran.

        The 'offload' tracker model runs on depth results instead (never here).
        """
        state = self._depth
        if state.frame is None or self.config.tracker_model != 'flow':
            return False
        stride = self.frame - state.frame
        due = state.last_model_frame is None or (
            self.frame - state.last_model_frame >= self.config.tracker_model_period
        )
        if stride < self.config.tracker_min_stride or not due:
            return False
        state.last_model_frame = self.frame
        try:
            estimate = self.tracker_estimate(state.frame, self.frame)
        except ValueError:
            # Nothing of the server map lands in view any more (a large turn): warping is
            # useless, as if every pixel were 100 % off.
            estimate = 1.0 / stride
            self.tracker_failures += 1
        self.tracker_model.drop_rate = estimate
        return True

    def tracker_estimate(self, base_frame: int, frame: int) -> float:
        """Return the tracker model's drop rate from ``base_frame`` to the current ``frame``."""
        state = self._depth
        estimate = self.tracker_model.estimate(
            state.rgb, state.server_depth, self.rgb, self.warp_pose(), frame - base_frame
        )
        return estimate.drop_rate
