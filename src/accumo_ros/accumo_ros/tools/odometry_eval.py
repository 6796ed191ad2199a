# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
r"""``accumo_odometry_eval``: odometry accuracy on a generated data set.

Two jobs, both on sequences written by ``accumo_generate``:

1. **Accuracy table** (held-out split): KITTI t_err and r_err, with segment lengths scaled
   to the sequences (:func:`accumo_ros.metrics.kitti_segment_lengths`), of

   * *server VO*: frame-pair visual odometry (:mod:`accumo_ros.tasks.visual_odometry`) on every
     ``--stride``-th frame, chained, scored on those frames;
   * *Kalman only*: the error-state filter on the IMU alone (the odometry local algorithm),
     scored on every frame;
   * *Kalman + VO*: the same filter fusing each VO pose ``--latency`` frames after its
     frame by rollback and stochastic cloning (the odometry tracker), every frame. VO
     pairs measure from a keyframe (``--keyframe-frames``, ``--keyframe-inliers``,
     ``--keyframe-turn-deg``; see
     :class:`accumo_ros.tasks.visual_odometry.KeyframePolicy`).

2. **Accuracy model** (``--fit``): for every 32-frame window of every train sequence, the
   drop in t_err (frame-level proxy) of offloading at stride 8 inside the window instead of
   4, against the window's angular speed from the IMU-only filter; the 95th-percentile
   regression of one on the other (:mod:`accumo_ros.tasks.odometry_model`) is written to
   ``--model``. The same measurement on the held-out split gives the correlation of the
   model's bound with the true drop, and how many true drops lie under the bound.
   ``--fit-dataset`` fits on another set's train split: the depth nets were trained on the
   default set's train split, where the server depth (so the VO) is better than on the robot.

The VO's metric scale comes from a depth map of the first frame of each pair: ``--depth
gt`` is the ground truth (the geometry alone), ``--depth server`` the trained server depth
net (what the robot gets). The filter starts from the true pose and velocity, with the
datasheet IMU noise of the data set (BMI263) and zero initial bias estimates.

    accumo_odometry_eval --dataset results/accumo_dataset --fit \
        --model src/accumo_ros/accumo_ros/weights/odometry_accuracy.yaml
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import pearsonr, spearmanr

from accumo_ros.metrics import SegmentErrors, kitti_errors, segment_errors
from accumo_ros.simulation.dataset import SequenceEntry, load_index, split_paths
from accumo_ros.simulation.imu import STANDARD_GRAVITY, ImuNoise
from accumo_ros.simulation.sequence_bag import LoadedSequence, read_sequence_bag, turn_on_biases
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
    quantile_regression,
    window_angular_speed,
)
from accumo_ros.tasks.visual_odometry import (
    FramePairOdometry,
    KeyframePolicy,
    VoConfig,
    VoResult,
)

DepthSource = Callable[[LoadedSequence, int], np.ndarray]
# Segment starts every this many frames (the KITTI devkit's step is 10 frames at 10 Hz; at
# 60 FPS a start every 6 frames keeps the same time spacing).
SEGMENT_STEP = 6
# VO priors: none (PnP), the gyro's rotation, and that with the filter's translation.
VO_PRIORS = ('none', 'gyro', 'motion')
# Random stream of the emulated IMU calibration's error (apart from the generator's).
CALIBRATION_STREAM = 7


def vo_prior_flags(vo_prior: str) -> dict[str, bool]:
    """Return ``--vo-prior``'s :class:`VoCache` flags: ``gyro_prior``, ``translation_prior``."""
    if vo_prior not in VO_PRIORS:
        raise ValueError(f'unknown VO prior {vo_prior!r}; one of {", ".join(VO_PRIORS)}')
    return {'gyro_prior': vo_prior != 'none', 'translation_prior': vo_prior == 'motion'}


def imu_noise_of(sequence: LoadedSequence) -> ImuNoise:
    """Return the IMU noise model the sequence was generated with (its bag metadata)."""
    text = sequence.metadata.get('accumo.imu_noise')
    return ImuNoise(**json.loads(text)) if text else ImuNoise()


def emulated_calibration(
    sequence: LoadedSequence, accel_residual: float, gyro_residual: float
) -> ImuCalibration:
    """Return an IMU calibration of ``sequence`` as a robot would have measured it.

    The generator's true turn-on biases (:func:`turn_on_biases`) plus a calibration error
    drawn per axis with the residual sigmas (m/s², rad/s; seeded by the sequence's seed,
    so every scheduler of a run sees the same calibration), which the filter is told.
    """
    gyro_bias, accel_bias = turn_on_biases(sequence)
    seed = int(sequence.metadata.get('accumo.seed', '0'))
    rng = np.random.default_rng([seed, CALIBRATION_STREAM])
    return ImuCalibration(
        tuple(gyro_bias + rng.normal(0.0, gyro_residual, 3)),
        tuple(accel_bias + rng.normal(0.0, accel_residual, 3)),
        gyro_residual,
        accel_residual,
    )


def parse_calibration_residual(text: str) -> tuple[float, float] | None:
    """``--imu-calibration``: ``none`` or ``ACCEL_MG:GYRO_DEG_S`` -> (m/s², rad/s) or None."""
    if text == 'none':
        return None
    try:
        accel_mg, gyro_deg_s = (float(part) for part in text.split(':'))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected 'none' or ACCEL_MG:GYRO_DEG_S (e.g. 3:0.05), got {text!r}"
        ) from None
    if not (accel_mg > 0.0 and gyro_deg_s > 0.0):
        raise argparse.ArgumentTypeError(f'both residuals must be positive, got {text!r}')
    return accel_mg * 1e-3 * STANDARD_GRAVITY, math.radians(gyro_deg_s)


def add_imu_calibration_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--imu-calibration``: the evaluators' emulated IMU calibration."""
    parser.add_argument(
        '--imu-calibration',
        type=parse_calibration_residual,
        default=None,
        metavar='ACCEL_MG:GYRO_DEG_S',
        help="'none' (the default: the filter starts at zero biases with the datasheet's "
        'turn-on sigmas) or a calibrated IMU: the filter starts at the true turn-on biases '
        'plus an error drawn with these residual sigmas, and is told them (e.g. 3:0.05).',
    )


class VoCache:
    """Server VO of frame pairs, computed once per pair.

    With ``gyro_prior`` (the default, as the scheduler node sends it) each pair gets the
    rotation the gyro integrated between its frames (raw rates, bias unknown) as its
    rotation prior; without, PnP's own RANSAC finds the rotation. With
    ``translation_prior`` as well, a pair also takes the translation its caller's filter
    predicts (:meth:`__call__`), as the scheduler node sends it; results are kept per
    prediction.
    """

    def __init__(
        self,
        sequence: LoadedSequence,
        depth_of: DepthSource,
        gyro_prior: bool = True,
        config: VoConfig | None = None,
        translation_prior: bool = False,
    ) -> None:
        self.sequence = sequence
        self.depth_of = depth_of
        self.gyro_prior = gyro_prior
        # Whether pairs take the translation a caller's filter predicts (with the gyro's).
        self.translation_prior = translation_prior and gyro_prior
        self.config = config or VoConfig()
        self._odometry = FramePairOdometry(sequence.intrinsics, self.config)
        self._results: dict[tuple[int, int], VoResult] = {}

    def __call__(
        self,
        first: int,
        second: int,
        translation_prior: tuple[np.ndarray, float] | None = None,
    ) -> VoResult:
        """Return the VO estimate of frame ``second`` relative to frame ``first``.

        ``translation_prior``: ``(position of second in first, gate)`` as a filter predicts
        it (:meth:`VoConfig.translation_prior_of`); used only if the cache was made with
        ``translation_prior``.
        """
        position, gate = None, None
        key: tuple = (first, second)
        if self.translation_prior and translation_prior is not None:
            position = np.asarray(translation_prior[0], dtype=np.float64)
            gate = float(translation_prior[1])
            key = (first, second, position.tobytes(), gate)
        if key not in self._results:
            s = self.sequence
            self._results[key] = self._odometry.estimate(
                s.rgb[first],
                s.rgb[second],
                self.depth_of(s, first),
                rotation_prior=self.rotation_prior(first, second),
                translation_prior=position,
                translation_gate_m=gate,
            )
        return self._results[key]

    def rotation_prior(self, first: int, second: int) -> np.ndarray | None:
        """Return the pair's rotation prior, R_body(first)_body(second) (None without)."""
        if not self.gyro_prior:
            return None
        s, times = self.sequence, self.sequence.frame_times
        return gyro_rotation(
            s.imu_times, s.angular_velocity, float(times[first]), float(times[second])
        )


class FusedOdometryRun:
    """The odometry tracker on a sequence: the ESKF fusing server VO poses late.

    Frames are processed in order by :meth:`run_to`. At an offloaded frame the filter state
    is snapshotted; ``latency`` frames later the VO pose of the pair (previous offloaded
    frame, this frame) is fused by rollback. ``copy.deepcopy`` of a run at a frame boundary
    continues the same history under another schedule.
    """

    def __init__(
        self,
        sequence: LoadedSequence,
        vo: VoCache | None,
        offloads: Sequence[int],
        latency: int,
        noise: ImuNoise,
        keyframes: KeyframePolicy | None = None,
        *,
        robust_distance_sq: float | None = DEFAULT_ROBUST_DISTANCE_SQ,
        level_ground: LevelGroundPrior | None = DEFAULT_LEVEL_GROUND,
        imu_calibration: ImuCalibration | None = None,
    ) -> None:
        self.sequence = sequence
        self.vo = vo
        self.latency = latency
        self.keyframes = keyframes
        # Every pair's VO result, in arrival order: (first, second, result).
        self.pair_results: list[tuple[int, int, VoResult]] = []
        truth = sequence.frame_poses()
        self.filter = ErrorStateKalmanFilter(
            truth[0],
            sequence.velocities_world[0],
            noise,
            robust_distance_sq=robust_distance_sq,
            ground_prior=level_ground,
            **(imu_calibration or ImuCalibration.uncalibrated(noise)).filter_keywords(),
        )
        self.fusion = DelayedPoseFusion(self.filter)
        self.poses = np.empty_like(truth)
        self.frame = 0  # the next frame to process
        self._imu = 0  # the next IMU sample to feed
        self._previous_offload: int | None = None  # the first frame of the next pair
        self._clone_frame: int | None = None
        self.keyframe_turns = 0  # keyframes moved on between offloads by a turn
        self._after_weak_pair = False  # the latest VO pair failed, was refused or matched few
        # arrival frame -> (first, second, the filter's translation prior or None)
        self._arrivals: dict[int, tuple[int, int, tuple[np.ndarray, float] | None]] = {}
        self.set_offloads(offloads)

    def fork(self) -> FusedOdometryRun:
        """Return an independent copy of the run (sharing the sequence and the VO cache)."""
        other = copy.copy(self)
        other.fusion = copy.deepcopy(self.fusion)
        other.filter = other.fusion.filter
        other.poses = self.poses.copy()
        other._arrivals = dict(self._arrivals)
        other.pair_results = list(self.pair_results)
        return other

    def set_offloads(self, offloads: Sequence[int]) -> None:
        """Use ``offloads`` (frame numbers) from the current frame on."""
        self.offloads = frozenset(int(f) for f in offloads if f >= self.frame)

    def run_to(self, stop_frame: int) -> None:
        """Process frames up to ``stop_frame`` (exclusive)."""
        s = self.sequence
        frame_times = s.frame_times
        stop_frame = min(stop_frame, len(frame_times))
        while self.frame < stop_frame:
            frame_time = frame_times[self.frame]
            # Feed the IMU samples up to and including the frame's time.
            while self._imu < len(s.imu_times) and s.imu_times[self._imu] <= frame_time + 1e-9:
                k = self._imu
                self.fusion.add_imu(
                    s.imu_times[k], s.angular_velocity[k], s.linear_acceleration[k]
                )
                self._imu += 1
            self._handle_frame(self.frame, float(frame_time))
            self._move_keyframe_after_turn(self.frame)
            self.poses[self.frame] = self.filter.pose
            self.frame += 1

    def _handle_frame(self, frame: int, frame_time: float) -> None:
        if frame in self._arrivals:
            first, second, predicted = self._arrivals.pop(frame)
            if first != self._clone_frame:
                # An earlier pair failed meanwhile and restarted the chain: this pair
                # measures from a frame the filter no longer holds.
                self.fusion.discard(second)
                self._offload(frame, frame_time)
                return
            result = self.vo(first, second, predicted)
            self.pair_results.append((first, second, result))
            # A failed pair restarts the chain at its second frame.
            # Pairs already sent from a keyframe that moves on are discarded on arrival.
            keep = (
                result.ok
                and self.keyframes is not None
                and self.keyframes.keep(first, second, result.inliers)
            )
            fused = self.fusion.fuse_relative(
                second,
                result.relative_pose if result.ok else None,
                result.covariance,
                keep_clone=keep,
                alternatives=result.alternative_poses,
            )
            if self.keyframes is not None:
                self._after_weak_pair = self.keyframes.weak_pair(fused, result.inliers)
            if not keep:
                self._clone_frame = second
                if self.keyframes is not None:
                    self._previous_offload = second
        self._offload(frame, frame_time)

    def _move_keyframe_after_turn(self, frame: int) -> None:
        """As the pipeline: a keyframe the robot has turned too far from moves to ``frame``."""
        # No clone yet gives no rotation; an offload at ``frame`` leaves its pair in flight.
        if (
            self.keyframes is None
            or self._arrivals
            or not self.keyframes.turned_too_far(
                self.filter.rotation_since_clone(), self._after_weak_pair
            )
        ):
            return
        self.filter.clone_pose()
        self._clone_frame = self._previous_offload = frame
        self.keyframe_turns += 1

    def _offload(self, frame: int, frame_time: float) -> None:
        if self.vo is None or frame not in self.offloads:
            return
        if self._previous_offload is None:
            self.filter.clone_pose()  # the first offloaded frame: nothing to pair with yet
            self._clone_frame = frame
            self._previous_offload = frame
            return
        # The filter's predicted translation over the pair, as the scheduler node sends it.
        predicted = None
        if self.vo.translation_prior and self._clone_frame == self._previous_offload:
            predicted = self.vo.config.translation_prior_of(self.filter)
        self.fusion.snapshot(frame, frame_time)
        self._arrivals[frame + self.latency] = (self._previous_offload, frame, predicted)
        if self.keyframes is None:
            self._previous_offload = frame


def periodic_offloads(
    frames: int, stride: int, window: tuple[int, int] | None = None, raised: int = 8
) -> list[int]:
    """Offload every ``stride`` frames, every ``raised`` inside ``window`` = [start, end)."""
    offloads = []
    frame = 0
    while frame < frames:
        offloads.append(frame)
        inside = window is not None and window[0] <= frame < window[1]
        frame += raised if inside else stride
    return offloads


def imu_only_rotations(sequence: LoadedSequence, noise: ImuNoise) -> np.ndarray:
    """Body-to-world rotations of the IMU-only filter at every frame (N, 3, 3).

    As the pipeline's IMU-only filter: no level-ground prior.
    """
    run = FusedOdometryRun(sequence, None, (), 0, noise, level_ground=None)
    run.run_to(len(sequence.frame_times))
    return run.poses[:, :3, :3]


@dataclass(frozen=True)
class SequenceAccuracy:
    """t_err (fractions) and r_err (deg/m) of the three estimates on one sequence."""

    name: str
    category: str
    vo_t_err: float
    kalman_t_err: float
    fused_t_err: float
    vo_r_err: float
    kalman_r_err: float
    fused_r_err: float
    vo_failures: int
    vo_pairs: int
    fused_rejected: int


def sequence_accuracy(
    sequence: LoadedSequence,
    name: str,
    depth_of: DepthSource,
    stride: int,
    latency: int,
    keyframes: KeyframePolicy | None = None,
    gyro_prior: bool = True,
    vo_config: VoConfig | None = None,
    translation_prior: bool = False,
) -> SequenceAccuracy:
    """Score server VO, the IMU-only filter and the fused filter on one sequence.

    ``translation_prior`` (with ``gyro_prior``): each VO pair also gets the fused filter's
    predicted translation, as the scheduler node sends it. The chained VO is then the
    chain of the pairs a frame-to-frame fused run got from the server (its prior comes from
    the IMU and the earlier pairs), so it still scores the server's poses alone.
    """
    truth = sequence.frame_poses()
    noise = imu_noise_of(sequence)
    vo = VoCache(sequence, depth_of, gyro_prior, vo_config, translation_prior)
    offloads = periodic_offloads(len(truth), stride)
    translation_prior = vo.translation_prior
    pairs: dict[tuple[int, int], VoResult] = {}
    if translation_prior:
        guided = FusedOdometryRun(sequence, vo, offloads, latency, noise, None)
        guided.run_to(len(truth))
        pairs = {(first, second): result for first, second, result in guided.pair_results}
    chain = [truth[0]]
    failures = 0
    for first, second in zip(offloads[:-1], offloads[1:], strict=True):
        result = pairs.get((first, second)) if translation_prior else vo(first, second)
        if result is None:  # the run had not got the pair back by the end
            result = VoResult(False, np.eye(4), np.eye(6), 0, 0, 'not sent')
        failures += not result.ok
        # A failed pair keeps the last pose: VO alone has nothing else to go on.
        chain.append(chain[-1] @ (result.relative_pose if result.ok else np.eye(4)))
    vo_errors = kitti_errors(truth[offloads], np.stack(chain), step=1)
    kalman_only = FusedOdometryRun(sequence, None, (), latency, noise)
    kalman_only.run_to(len(truth))
    kalman_errors = kitti_errors(truth, kalman_only.poses, step=SEGMENT_STEP)
    fused = FusedOdometryRun(sequence, vo, offloads, latency, noise, keyframes)
    fused.run_to(len(truth))
    fused_errors = kitti_errors(truth, fused.poses, step=SEGMENT_STEP)
    return SequenceAccuracy(
        name=name,
        category=sequence.category,
        vo_t_err=vo_errors.t_err,
        kalman_t_err=kalman_errors.t_err,
        fused_t_err=fused_errors.t_err,
        vo_r_err=vo_errors.r_err,
        kalman_r_err=kalman_errors.r_err,
        fused_r_err=fused_errors.r_err,
        vo_failures=failures,
        vo_pairs=len(offloads) - 1,
        fused_rejected=fused.filter.rejected_count,
    )


def window_drops(
    sequence: LoadedSequence,
    depth_of: DepthSource,
    *,
    window_frames: int = 32,
    base_stride: int = 4,
    raised_stride: int = 8,
    latency: int = 4,
    window_starts: list[int] | None = None,
    keyframes: KeyframePolicy | None = None,
    gyro_prior: bool = True,
    translation_prior: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Return (angular speed rad/s, t_err drop) of raising the stride in each window.

    ``window_starts``, when given, receives the first frame of each returned window.

    Windows are consecutive ``window_frames`` blocks, from the second on (the filter
    settles in the first), up to the last one that a scored segment can still cover. The
    drop is the mean t_err over the segments covering the window with the raised stride
    there minus the same segments' with the base stride (the spec's frame-level proxy).
    """
    truth = sequence.frame_poses()
    frames = len(truth)
    noise = imu_noise_of(sequence)
    vo = VoCache(sequence, depth_of, gyro_prior, translation_prior=translation_prior)
    fps = 1.0 / float(np.median(np.diff(sequence.frame_times)))
    rotations = imu_only_rotations(sequence, noise)

    baseline = FusedOdometryRun(
        sequence, vo, periodic_offloads(frames, base_stride), latency, noise, keyframes
    )
    starts = list(range(window_frames, frames - window_frames, window_frames))
    speeds, drops = [], []
    saved: dict[int, FusedOdometryRun] = {}
    for start in starts:
        baseline.run_to(start)
        saved[start] = baseline.fork()
    baseline.run_to(frames)
    base_segments = segment_errors(truth, baseline.poses, step=SEGMENT_STEP)
    for start in starts:
        end = start + window_frames
        covering = base_segments.covering(np.arange(start, end))
        if not covering.any():
            continue
        run = saved.pop(start)
        run.set_offloads(periodic_offloads(frames, base_stride, (start, end), raised_stride))
        # Every covering segment ends by the last covering one's last frame.
        run.run_to(int(base_segments.last_frame[covering].max()) + 1)
        poses = baseline.poses.copy()
        poses[start : run.frame] = run.poses[start : run.frame]
        raised_segments: SegmentErrors = segment_errors(truth, poses, step=SEGMENT_STEP)
        drop = raised_segments.summary(covering).t_err - base_segments.summary(covering).t_err
        speeds.append(window_angular_speed(rotations[start], rotations[end], window_frames / fps))
        drops.append(drop)
        if window_starts is not None:
            window_starts.append(start)
    return np.array(speeds), np.array(drops)


def depth_source(kind: str) -> DepthSource:
    """Return a source of ground-truth depth (``gt``) or of the server depth net (``server``)."""
    if kind == 'gt':
        return lambda sequence, index: sequence.depth[index]
    if kind != 'server':
        raise ValueError(f'unknown depth source {kind!r}; use gt or server')
    from accumo_ros.tasks.depth_nets import load_depth_net

    net = load_depth_net('server')
    return lambda sequence, index: net.predict(sequence.rgb[index])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='accumo_odometry_eval',
        description='Odometry accuracy on a generated data set; fits the odometry accuracy model.',
    )
    parser.add_argument('--dataset', type=Path, required=True, help='accumo_generate folder.')
    parser.add_argument('--depth', choices=('gt', 'server'), default='server', help='VO depth.')
    parser.add_argument('--stride', type=int, default=8, help='Frames between VO offloads.')
    parser.add_argument('--latency', type=int, default=4, help='Frames until a pose is back.')
    parser.add_argument(
        '--keyframe-frames',
        type=int,
        default=KeyframePolicy().max_frames,
        help='Keyframe age (frames) at which VO pairs move to a new keyframe; 0 = frame to frame.',
    )
    parser.add_argument(
        '--keyframe-inliers',
        type=int,
        default=KeyframePolicy().min_inliers,
        help='Fewer VO inliers than this move the keyframe on.',
    )
    parser.add_argument(
        '--keyframe-turn-deg',
        type=float,
        default=math.degrees(KeyframePolicy().max_rotation_rad),
        help='After a weak pair, a turn of this many degrees moves the keyframe on between '
        'offloads; 0: never.',
    )
    parser.add_argument('--fit', action='store_true', help='Fit and check the accuracy model.')
    parser.add_argument(
        '--fit-dataset',
        type=Path,
        help="Fit on the train split of this set instead of --dataset's (one the depth nets "
        'never saw, so the server depth is as good as on the robot).',
    )
    parser.add_argument('--model', type=Path, help='Where --fit writes the model (YAML).')
    parser.add_argument('--quantile', type=float, default=0.95, help='Regression quantile.')
    parser.add_argument(
        '--base-stride',
        type=int,
        default=OdometryAccuracyModel.base_stride,
        help='Offload stride outside the window and the one compared against (frames).',
    )
    parser.add_argument(
        '--raised-stride',
        type=int,
        default=OdometryAccuracyModel.raised_stride,
        help='Offload stride inside the window (frames).',
    )
    parser.add_argument(
        '--stride-limit',
        type=int,
        default=None,
        help='With --fit: the longest stride the model covers, written into it; the scheduler '
        'plans no longer odometry stride (>= --raised-stride; default: none).',
    )
    parser.add_argument(
        '--window-frames',
        type=int,
        default=OdometryAccuracyModel.window_frames,
        help='Window over which the stride is raised and the angular speed measured.',
    )
    parser.add_argument('--sequences', type=int, help='Use only the first N of each split.')
    parser.add_argument(
        '--split',
        choices=('heldout', 'train', 'all'),
        default='heldout',
        help="Sequences of the accuracy table ('all' for a test set made with --holdout none).",
    )
    add_vo_prior_argument(parser)
    parser.add_argument(
        '--vo-alternatives',
        type=int,
        default=VoConfig().prior_alternatives,
        help='With the gyro prior: further consensus sets VO returns for the filter '
        '(accuracy table only; 0: none).',
    )
    parser.add_argument(
        '--output', type=Path, default=Path('results/accumo/odometry_eval.json'), help='Report.'
    )
    return parser


def add_vo_prior_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--vo-prior`` (:data:`VO_PRIORS`): the evaluators' choice of VO prior."""
    parser.add_argument(
        '--vo-prior',
        choices=VO_PRIORS,
        default='motion',
        help="VO's prior: the gyro's rotation over each pair and the robot filter's "
        'predicted translation (motion, the default, as the scheduler node sends them), '
        'the rotation alone (gyro) or none (PnP RANSAC).',
    )


def _correlation(function: Callable, x: np.ndarray, y: np.ndarray) -> float:
    """Return the correlation ``function`` gives, or NaN when an input is constant."""
    if x.size < 2 or np.ptp(x) == 0.0 or np.ptp(y) == 0.0:
        return float('nan')
    return float(function(x, y)[0])


def _collect_drops(
    paths: Sequence[Path],
    depth_of: DepthSource,
    latency: int,
    keyframes: KeyframePolicy,
    args: argparse.Namespace,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    speeds, drops, names = [], [], []
    for path in paths:
        started = time.monotonic()
        w, d = window_drops(
            read_sequence_bag(path),
            depth_of,
            window_frames=args.window_frames,
            base_stride=args.base_stride,
            raised_stride=args.raised_stride,
            latency=latency,
            keyframes=keyframes,
            **vo_prior_flags(args.vo_prior),
        )
        speeds.append(w)
        drops.append(d)
        names += [path.name] * len(w)
        print(f'  {path.name}: {len(w)} windows in {time.monotonic() - started:.0f} s')
    return np.concatenate(speeds), np.concatenate(drops), names


def _argument_error(args: argparse.Namespace) -> str | None:
    """Return what is wrong with the arguments, or None."""
    if args.stride < 1 or not 0 <= args.latency < args.stride:
        return 'need 0 <= --latency < --stride'
    if args.vo_alternatives < 0:
        return 'need --vo-alternatives >= 0'
    if args.fit and args.model is None:
        return '--fit needs --model'
    if args.fit and not (
        1 <= args.base_stride < args.raised_stride <= args.window_frames
        and args.latency <= args.base_stride
    ):
        return (
            'need 1 <= --base-stride < --raised-stride <= --window-frames '
            'and --latency <= --base-stride'
        )
    if args.stride_limit is not None and args.stride_limit < args.raised_stride:
        return 'need --stride-limit >= --raised-stride'
    return None


def main(argv: list[str] | None = None) -> int:
    """Print the accuracy table (and fit the model); exit code 2 on bad arguments."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    error = _argument_error(args)
    if error is not None:
        print(f'odometry_eval: {error}', file=sys.stderr)
        return 2
    try:
        entries = {entry.name: entry for entry in load_index(args.dataset)}
        heldout = _evaluated_paths(args.dataset, args.split)[: args.sequences]
        fit_dataset = args.fit_dataset or args.dataset
        train = split_paths(fit_dataset, 'train')[: args.sequences]
        fit_entries = {entry.name: entry for entry in load_index(fit_dataset)}
    except (OSError, ValueError) as error:
        print(f'odometry_eval: {error}', file=sys.stderr)
        return 2
    try:
        keyframes = KeyframePolicy(
            args.keyframe_frames, args.keyframe_inliers, math.radians(args.keyframe_turn_deg)
        )
    except ValueError as error:
        print(f'odometry_eval: {error}', file=sys.stderr)
        return 2
    depth_of = depth_source(args.depth)
    command = shlex.join(['accumo_odometry_eval', *argv])
    print(
        f'Odometry on the {args.split} split of {args.dataset}: VO every {args.stride} '
        f'frames (60 FPS), poses fused {args.latency} frames late, VO depth: {args.depth}, '
        f'rotation prior: {args.vo_prior} ({args.vo_alternatives} alternatives); '
        f'keyframes: {keyframes}; IMU noise from each bag (BMI263 datasheet)'
    )
    rows, means = _accuracy_table(heldout, depth_of, args, keyframes)
    report: dict[str, object] = {
        'command': command,
        'accuracy': [row.__dict__ for row in rows],
        'mean': means,
    }

    if args.fit:
        report.update(
            _fit_model(
                args,
                depth_of,
                keyframes,
                command,
                {'train': train, 'heldout': heldout},
                {'train': fit_entries, 'heldout': entries},
            )
        )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2))
    print(f'report -> {args.output}')
    return 0


def _evaluated_paths(dataset: Path, split: str) -> list[Path]:
    """Return the bag folders of ``split`` (``all``: every sequence of the set)."""
    if split == 'all':
        return [*split_paths(dataset, 'train'), *split_paths(dataset, 'heldout')]
    return split_paths(dataset, split)


def _accuracy_table(
    heldout: list[Path],
    depth_of: Callable,
    args: argparse.Namespace,
    keyframes: KeyframePolicy,
) -> tuple[list, dict[str, float]]:
    """Print each held-out sequence's odometry errors and the means; return both."""
    header = f'{"sequence":<13}{"category":<10}{"VO t_err%":>10}{"KF t_err%":>10}'
    header += f'{"KF+VO t_err%":>13}{"VO r°/m":>8}{"KF r°/m":>8}{"KF+VO r":>8}{"VO fail":>8}'
    print(header)
    rows = []
    for path in heldout:
        accuracy = sequence_accuracy(
            read_sequence_bag(path),
            path.name,
            depth_of,
            args.stride,
            args.latency,
            keyframes,
            vo_config=VoConfig(prior_alternatives=args.vo_alternatives),
            **vo_prior_flags(args.vo_prior),
        )
        rows.append(accuracy)
        print(
            f'{accuracy.name:<13}{accuracy.category:<10}{100 * accuracy.vo_t_err:>10.2f}'
            f'{100 * accuracy.kalman_t_err:>10.1f}{100 * accuracy.fused_t_err:>13.2f}'
            f'{accuracy.vo_r_err:>8.3f}{accuracy.kalman_r_err:>8.3f}{accuracy.fused_r_err:>8.3f}'
            f'{accuracy.vo_failures:>4d}/{accuracy.vo_pairs}'
        )
    means = {
        key: float(np.mean([getattr(row, key) for row in rows]))
        for key in ('vo_t_err', 'kalman_t_err', 'fused_t_err')
    }
    print(
        f'{"mean":<23}{100 * means["vo_t_err"]:>10.2f}{100 * means["kalman_t_err"]:>10.1f}'
        f'{100 * means["fused_t_err"]:>13.2f}'
    )
    return rows, means


def _fit_figures(
    model: OdometryAccuracyModel,
    train: tuple[np.ndarray, np.ndarray],
    heldout: tuple[np.ndarray, np.ndarray],
) -> tuple[dict, dict]:
    """Return how the model's bound holds on the train windows and on the held-out ones."""
    speeds, drops = train
    test_speeds, test_drops = heldout
    bound = model.drop_bound(test_speeds)
    check = {
        'windows': int(test_drops.size),
        'pearson_bound_vs_drop': _correlation(pearsonr, bound, test_drops),
        'spearman_speed_vs_drop': _correlation(spearmanr, test_speeds, test_drops),
        'share_under_bound': float(np.mean(test_drops <= bound)),
        'mean_drop': float(np.mean(test_drops)),
        'share_positive_drop': float(np.mean(test_drops > 0.0)),
    }
    fit = {
        'windows': int(drops.size),
        'mean_drop': float(np.mean(drops)),
        'share_under_bound': float(np.mean(drops <= model.drop_bound(speeds))),
    }
    return fit, check


def _fit_model(
    args: argparse.Namespace,
    depth_of: Callable,
    keyframes: KeyframePolicy,
    command: str,
    paths: dict[str, list[Path]],
    entries: dict[str, dict[str, SequenceEntry]],
) -> dict[str, object]:
    """Fit the odometry accuracy model on the train split, check it on the held-out one.

    Saves the model to ``args.model`` and returns the report's ``model`` and ``windows``.
    """
    train, heldout = paths['train'], paths['heldout']
    report: dict[str, object] = {}
    print(
        f'\nAccuracy model: t_err drop of stride {args.raised_stride} instead of '
        f'{args.base_stride} over a {args.window_frames}-frame window, poses '
        f'{args.latency} frames late'
    )
    print(f'train split of {args.fit_dataset or args.dataset}:')
    speeds, drops, names = _collect_drops(train, depth_of, args.latency, keyframes, args)
    intercept, slope = quantile_regression(speeds, drops, args.quantile)
    model = OdometryAccuracyModel(
        intercept,
        slope,
        quantile=args.quantile,
        window_frames=args.window_frames,
        base_stride=args.base_stride,
        raised_stride=args.raised_stride,
        latency_frames=args.latency,
        stride_limit=args.stride_limit,
    )
    print('held-out split:')
    test_speeds, test_drops, test_names = _collect_drops(
        heldout, depth_of, args.latency, keyframes, args
    )
    fit, check = _fit_figures(model, (speeds, drops), (test_speeds, test_drops))
    print(
        f'fit on {fit["windows"]} train windows: drop <= {intercept:+.5f} {slope:+.5f} * '
        f'omega (rad/s) at q={args.quantile}; under the bound: '
        f'{100 * fit["share_under_bound"]:.1f} %'
    )
    print(
        f'held-out, {check["windows"]} windows: Pearson(bound, drop) '
        f'{check["pearson_bound_vs_drop"]:.3f}, Spearman(omega, drop) '
        f'{check["spearman_speed_vs_drop"]:.3f}, under the bound '
        f'{100 * check["share_under_bound"]:.1f} %, mean drop '
        f'{100 * check["mean_drop"]:+.3f} pp, positive in '
        f'{100 * check["share_positive_drop"]:.0f} %'
    )
    model.save(
        args.model,
        command=command,
        dataset_seeds={
            'train': [entries['train'][p.name].seed for p in train],
            'heldout': [entries['heldout'][p.name].seed for p in heldout],
        },
        vo_depth=args.depth,
        keyframes={'max_frames': keyframes.max_frames, 'min_inliers': keyframes.min_inliers},
        train=fit,
        heldout=check,
    )
    report['model'] = {'intercept': intercept, 'slope': slope, 'train': fit, 'heldout': check}
    # The windows themselves, so that other quantiles or model forms can be fitted
    # without measuring the drops again (about 20 minutes).
    report['windows'] = {
        split: {'sequence': n, 'angular_speed': w.tolist(), 'drop': d.tolist()}
        for split, n, w, d in (
            ('train', names, speeds, drops),
            ('heldout', test_names, test_speeds, test_drops),
        )
    }
    print(f'model -> {args.model}')
    return report


if __name__ == '__main__':
    sys.exit(main())
