# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Accuracy metrics of AccuMO: monocular depth errors and visual-odometry trajectory errors.

Pure numpy (and scipy for one rotation angle); no ROS. Conventions:

* Poses are float64 arrays (N, 4, 4) of homogeneous SE(3) matrices ``T_world_body``.
* Depth maps are float arrays in metres of any shape; ground truth that is 0, NaN or
  outside ``(min_depth, max_depth]`` is invalid.

Metrics:

* :func:`depth_errors`: the Eigen et al. (NeurIPS 2014) set: AbsRel, SqRel, RMSE, RMSE log
  and the δ < 1.25, 1.25², 1.25³ accuracies.
* :func:`kitti_errors` / :func:`segment_errors`: a port of ``calcSequenceErrors`` of the KITTI
  odometry devkit (``evaluate_odometry.cpp``): relative errors over path segments of fixed
  length, translation as a fraction of the length and rotation in deg/m.
* :func:`ate` and :func:`rpe`: absolute trajectory error after Umeyama alignment and
  relative pose error, with the definitions of ``evo`` (APE ``translation_part`` RMSE; RPE
  with ``delta`` in frames, ``translation_part`` and ``rotation_angle_deg`` RMSE).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.spatial.transform import Rotation

from accumo_ros.geometry import invert_poses, rotation_angles

# KITTI odometry's segment lengths in metres (evaluate_odometry.cpp, `lengths`).
KITTI_SEGMENT_LENGTHS = (100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0, 800.0)


# --- Depth ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DepthErrors:
    """Eigen et al. depth errors over the valid pixels of one or more depth maps.

    ``abs_rel``, ``sq_rel`` and the δ accuracies are ratios; ``rmse`` is in metres,
    ``rmse_log`` in natural-log units.
    """

    abs_rel: float
    sq_rel: float
    rmse: float
    rmse_log: float
    delta1: float
    delta2: float
    delta3: float
    valid_pixels: int


def depth_errors(
    predicted: np.ndarray,
    ground_truth: np.ndarray,
    *,
    min_depth: float = 1e-3,
    max_depth: float = 80.0,
    mask: np.ndarray | None = None,
) -> DepthErrors:
    """Compare a predicted depth map with the ground truth over the valid pixels.

    A pixel is valid where the ground truth is finite and in ``(min_depth, max_depth]``, the
    prediction is finite and positive, and ``mask`` (a boolean array of the same shape, if
    given) is true. Predictions are not clipped. With p the prediction and g the ground truth:
    AbsRel = mean(|p - g| / g), SqRel = mean((p - g)² / g), RMSE = sqrt(mean((p - g)²)),
    RMSE log = sqrt(mean((ln p - ln g)²)), δk = fraction with max(p / g, g / p) < 1.25**k.

    Raises ValueError when the shapes differ or no pixel is valid.
    """
    predicted = np.asarray(predicted, dtype=np.float64)
    ground_truth = np.asarray(ground_truth, dtype=np.float64)
    if predicted.shape != ground_truth.shape:
        raise ValueError(
            f'predicted depth has shape {predicted.shape}, ground truth {ground_truth.shape}'
        )
    if not 0.0 <= min_depth < max_depth:
        raise ValueError(f'need 0 <= min_depth < max_depth, got {min_depth}, {max_depth}')
    with np.errstate(invalid='ignore'):
        valid = (
            np.isfinite(ground_truth)
            & (ground_truth > min_depth)
            & (ground_truth <= max_depth)
            & np.isfinite(predicted)
            & (predicted > 0.0)
        )
    if mask is not None:
        mask = np.asarray(mask)
        if mask.shape != ground_truth.shape:
            raise ValueError(f'mask has shape {mask.shape}, depth maps {ground_truth.shape}')
        if mask.dtype != np.bool_:
            raise ValueError(f'mask must be boolean, got {mask.dtype}')
        valid &= mask
    count = int(np.count_nonzero(valid))
    if count == 0:
        raise ValueError(
            f'no valid pixel: ground truth must be finite and in ({min_depth}, {max_depth}] m '
            'and the prediction finite and positive (and the mask true)'
        )
    p = predicted[valid]
    g = ground_truth[valid]
    difference = p - g
    ratio = np.maximum(p / g, g / p)
    return DepthErrors(
        abs_rel=float(np.mean(np.abs(difference) / g)),
        sq_rel=float(np.mean(difference**2 / g)),
        rmse=float(np.sqrt(np.mean(difference**2))),
        rmse_log=float(np.sqrt(np.mean((np.log(p) - np.log(g)) ** 2))),
        delta1=float(np.mean(ratio < 1.25)),
        delta2=float(np.mean(ratio < 1.25**2)),
        delta3=float(np.mean(ratio < 1.25**3)),
        valid_pixels=count,
    )


# --- KITTI odometry ---------------------------------------------------------------------------


def kitti_segment_lengths(path_length_m: float, *, count: int = 8) -> tuple[float, ...]:
    """Return the segment lengths (m) for the KITTI errors of a path this long.

    KITTI evaluates drives of several km on segments of 100, 200, ..., 800 m; those are
    returned when the path is at least 800 m long. A shorter path (AccuMO's indoor and
    synthetic sequences are tens of metres) would fit none of them, so the lengths are scaled
    to the path instead: ``k * path_length_m / (count + 2)`` for k = 1..count, i.e. 10 %,
    20 %, ..., 80 % of the path with the default count. The shortest segments then start
    from almost every sampled frame, and even the longest still fits from the first ~20 % of
    the path, so every length contributes several segments, while no segment is so short
    that its error is dominated by a single frame's noise. ``count`` only applies to the
    scaled case.
    """
    if not np.isfinite(path_length_m) or path_length_m <= 0.0:
        raise ValueError(f'path length must be positive and finite, got {path_length_m}')
    if count < 1:
        raise ValueError(f'count must be at least 1, got {count}')
    if path_length_m >= KITTI_SEGMENT_LENGTHS[-1]:
        return KITTI_SEGMENT_LENGTHS
    return tuple(k * path_length_m / (count + 2) for k in range(1, count + 1))


@dataclass(frozen=True)
class KittiErrors:
    """KITTI odometry errors averaged over all segments.

    ``t_err`` is the translation error as a fraction of the segment length (0.038 is the
    3.8 % of the KITTI leaderboard), ``r_err`` the rotation error in deg/m, ``segments`` the
    number of (start frame, length) pairs averaged and ``lengths`` the segment lengths used.
    """

    t_err: float
    r_err: float
    segments: int
    lengths: tuple[float, ...]


@dataclass(frozen=True, eq=False)
class SegmentErrors:
    """Per-segment KITTI errors, in the devkit's order (start frame, then length).

    Each segment runs from ``first_frame`` to ``last_frame`` (inclusive); ``length`` is its
    nominal length in metres, ``t_err`` its translation error as a fraction of ``length``
    and ``r_err`` its rotation error in deg/m.
    """

    first_frame: np.ndarray
    last_frame: np.ndarray
    length: np.ndarray
    t_err: np.ndarray
    r_err: np.ndarray
    lengths: tuple[float, ...]

    def __len__(self) -> int:
        """Return the number of segments."""
        return int(self.first_frame.size)

    def covering(self, frames: np.ndarray | list[int]) -> np.ndarray:
        """Boolean mask of the segments that contain at least one of ``frames``."""
        frames = np.asarray(frames, dtype=np.int64).reshape(-1)
        inside = (self.first_frame[:, None] <= frames) & (frames <= self.last_frame[:, None])
        return inside.any(axis=1)

    def summary(self, selected: np.ndarray | None = None) -> KittiErrors:
        """Average the errors of all segments, or of those where ``selected`` is true.

        This is the frame-level proxy of AccuMO when ``selected`` is :meth:`covering`'s mask.
        Raises ValueError when no segment is selected.
        """
        if selected is None:
            selected = np.ones(len(self), dtype=bool)
        selected = np.asarray(selected, dtype=bool)
        if selected.shape != self.first_frame.shape:
            raise ValueError(f'selection has shape {selected.shape}, expected ({len(self)},)')
        if not selected.any():
            raise ValueError('no segment selected')
        return KittiErrors(
            t_err=float(np.mean(self.t_err[selected])),
            r_err=float(np.mean(self.r_err[selected])),
            segments=int(np.count_nonzero(selected)),
            lengths=self.lengths,
        )


def path_length(poses: np.ndarray) -> float:
    """Length in metres of the polyline through the positions of ``poses`` (N, 4, 4)."""
    poses = _check_poses(poses, 'poses')
    return float(_distances(poses)[-1])


def segment_errors(
    gt_poses: np.ndarray,
    est_poses: np.ndarray,
    *,
    segment_lengths: tuple[float, ...] | list[float] | None = None,
    step: int = 10,
) -> SegmentErrors:
    """Return the KITTI errors of every segment, as the devkit's ``calcSequenceErrors``.

    Distances are accumulated along the ground-truth positions. For each start frame in
    ``range(0, N, step)`` and each length, the segment ends at the first frame whose distance
    exceeds the start's by more than the length (segments that run past the end are
    skipped). With ``E = inv(inv(est[f]) @ est[l]) @ (inv(gt[f]) @ gt[l])``, the translation
    error is ``|t(E)| / length`` and the rotation error ``angle(E) / length``, the angle being
    the devkit's ``acos(clip((trace(R) - 1) / 2, -1, 1))`` (reported in degrees).
    ``segment_lengths=None`` uses :func:`kitti_segment_lengths` of the ground-truth path
    length. Raises ValueError when no segment fits.
    """
    gt_poses = _check_poses(gt_poses, 'gt_poses')
    est_poses = _check_poses(est_poses, 'est_poses')
    _check_same_length(gt_poses, est_poses)
    if step < 1:
        raise ValueError(f'step must be at least 1, got {step}')
    distances = _distances(gt_poses)
    if segment_lengths is None:
        if distances[-1] <= 0.0:
            raise ValueError('the ground-truth path has zero length: no segment fits')
        segment_lengths = kitti_segment_lengths(float(distances[-1]))
    lengths = tuple(float(length) for length in segment_lengths)
    if not lengths or min(lengths) <= 0.0:
        raise ValueError(f'segment lengths must be positive, got {lengths}')

    count = gt_poses.shape[0]
    starts = np.arange(0, count, step)
    length_array = np.asarray(lengths)
    # (start, length) grid in the devkit's loop order: start frames outside, lengths inside.
    firsts = np.repeat(starts, length_array.size)
    segment_length = np.tile(length_array, starts.size)
    # The first frame i with distances[i] > distances[first] + length (devkit: strictly).
    lasts = np.searchsorted(distances, distances[firsts] + segment_length, side='right')
    fits = lasts < count
    if not fits.any():
        raise ValueError(
            f'no segment of {lengths} m fits in the {distances[-1]:.3f} m ground-truth path'
        )
    firsts, lasts, segment_length = firsts[fits], lasts[fits], segment_length[fits]

    gt_delta = invert_poses(gt_poses[firsts]) @ gt_poses[lasts]
    est_delta = invert_poses(est_poses[firsts]) @ est_poses[lasts]
    error = invert_poses(est_delta) @ gt_delta
    translation = np.linalg.norm(error[:, :3, 3], axis=-1)
    rotation = rotation_angles(error[:, :3, :3])
    return SegmentErrors(
        first_frame=firsts,
        last_frame=lasts,
        length=segment_length,
        t_err=translation / segment_length,
        r_err=np.degrees(rotation) / segment_length,
        lengths=lengths,
    )


def kitti_errors(
    gt_poses: np.ndarray,
    est_poses: np.ndarray,
    *,
    segment_lengths: tuple[float, ...] | list[float] | None = None,
    step: int = 10,
) -> KittiErrors:
    """Return the KITTI odometry errors averaged over all segments (see :func:`segment_errors`).

    ``t_err`` is a fraction (multiply by 100 for the leaderboard's %), ``r_err`` is in deg/m.
    """
    return segment_errors(
        gt_poses, est_poses, segment_lengths=segment_lengths, step=step
    ).summary()


# --- ATE / RPE (evo's definitions) ------------------------------------------------------------


def umeyama(
    source: np.ndarray, target: np.ndarray, *, with_scale: bool = False
) -> tuple[np.ndarray, np.ndarray, float]:
    """Least-squares similarity that maps points ``source`` onto ``target`` (both (N, 3)).

    Returns ``(R, t, s)`` minimising ``sum |target_i - (s R source_i + t)|²`` (Umeyama,
    IEEE PAMI 1991, eqs. 34-43); ``s`` is 1 unless ``with_scale``. Raises ValueError when the
    points are too degenerate (all on one point) for a unique rotation.
    """
    source = np.asarray(source, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    if source.shape != target.shape or source.ndim != 2:
        raise ValueError(f'need two (N, m) point sets, got {source.shape} and {target.shape}')
    count, dimension = source.shape
    mean_source = source.mean(axis=0)
    mean_target = target.mean(axis=0)
    centred_source = source - mean_source
    centred_target = target - mean_target
    variance_source = float(np.sum(centred_source**2)) / count
    covariance = centred_target.T @ centred_source / count
    u, d, vt = np.linalg.svd(covariance)
    if np.count_nonzero(d > np.finfo(d.dtype).eps) < dimension - 1:
        raise ValueError('degenerate point sets: Umeyama alignment is not unique')
    sign = np.eye(dimension)
    if np.linalg.det(u) * np.linalg.det(vt) < 0.0:
        sign[-1, -1] = -1.0
    rotation = u @ sign @ vt
    scale = float(np.trace(np.diag(d) @ sign)) / variance_source if with_scale else 1.0
    translation = mean_target - scale * rotation @ mean_source
    return rotation, translation, scale


def ate(
    gt_poses: np.ndarray,
    est_poses: np.ndarray,
    *,
    align: Literal['se3', 'sim3', 'none'] = 'se3',
) -> float:
    """Absolute trajectory error: RMSE in metres of the position differences after alignment.

    The estimate is aligned to the ground truth with :func:`umeyama` on the positions: a rigid
    motion (``'se3'``), a similarity (``'sim3'``, for monocular estimates with unknown scale)
    or nothing (``'none'``). Equal to evo's APE ``translation_part`` RMSE after ``align``.
    """
    gt_poses = _check_poses(gt_poses, 'gt_poses')
    est_poses = _check_poses(est_poses, 'est_poses')
    _check_same_length(gt_poses, est_poses)
    gt_positions = gt_poses[:, :3, 3]
    est_positions = est_poses[:, :3, 3]
    if align in ('se3', 'sim3'):
        rotation, translation, scale = umeyama(
            est_positions, gt_positions, with_scale=align == 'sim3'
        )
        est_positions = scale * est_positions @ rotation.T + translation
    elif align != 'none':
        raise ValueError(f"align must be 'se3', 'sim3' or 'none', got {align!r}")
    errors = np.linalg.norm(est_positions - gt_positions, axis=-1)
    return float(np.sqrt(np.mean(errors**2)))


def rpe(
    gt_poses: np.ndarray,
    est_poses: np.ndarray,
    *,
    delta: int = 1,
    all_pairs: bool = False,
) -> tuple[float, float]:
    """Relative pose error: (translation RMSE in m, rotation RMSE in deg) over ``delta`` frames.

    ``E_i = inv(inv(gt_i) @ gt_j) @ (inv(est_i) @ est_j)`` with ``j = i + delta``. As evo's
    default (``all_pairs=False``) the pairs are consecutive, ``i = 0, delta, 2 delta, ...``;
    ``all_pairs=True`` uses every ``i`` (the same for ``delta=1``). The rotation error is the
    angle of E's rotation via its quaternion, as evo's ``rotation_angle_deg``: unlike the
    trace formula, it stays accurate for the small angles of near-identity errors when the
    rotations are not exactly orthonormal (files that print 9 digits).
    """
    gt_poses = _check_poses(gt_poses, 'gt_poses')
    est_poses = _check_poses(est_poses, 'est_poses')
    _check_same_length(gt_poses, est_poses)
    if delta < 1:
        raise ValueError(f'delta must be at least 1 frame, got {delta}')
    count = gt_poses.shape[0]
    firsts = np.arange(0, count - delta) if all_pairs else np.arange(0, count, delta)[:-1]
    if firsts.size == 0:
        raise ValueError(f'{count} poses have no pair {delta} frames apart')
    lasts = firsts + delta
    gt_delta = invert_poses(gt_poses[firsts]) @ gt_poses[lasts]
    est_delta = invert_poses(est_poses[firsts]) @ est_poses[lasts]
    error = invert_poses(gt_delta) @ est_delta
    translation = np.linalg.norm(error[:, :3, 3], axis=-1)
    rotation = np.degrees(Rotation.from_matrix(error[:, :3, :3]).magnitude())
    return float(np.sqrt(np.mean(translation**2))), float(np.sqrt(np.mean(rotation**2)))


# --- Helpers ----------------------------------------------------------------------------------


def _check_poses(poses: np.ndarray, name: str) -> np.ndarray:
    poses = np.asarray(poses, dtype=np.float64)
    if poses.ndim != 3 or poses.shape[1:] != (4, 4) or poses.shape[0] == 0:
        raise ValueError(f'{name} must have shape (N, 4, 4) with N > 0, got {poses.shape}')
    return poses


def _check_same_length(gt_poses: np.ndarray, est_poses: np.ndarray) -> None:
    if gt_poses.shape[0] != est_poses.shape[0]:
        raise ValueError(
            f'{gt_poses.shape[0]} ground-truth poses but {est_poses.shape[0]} estimated; '
            'associate the trajectories first'
        )


def _distances(poses: np.ndarray) -> np.ndarray:
    """Cumulative distance along the positions, starting at 0 (devkit trajectoryDistances)."""
    steps = np.linalg.norm(np.diff(poses[:, :3, 3], axis=0), axis=-1)
    return np.concatenate([[0.0], np.cumsum(steps)])
