# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO's depth task on the device: the warping tracker and its two accuracy models.

Pure numpy, scipy and OpenCV; no ROS. Conventions are :mod:`accumo_ros.geometry`'s: optical
frame x right, y down, z forward; depth is the optical z in metres; ``T_a_b`` maps points in
frame b to frame a.

**Local tracker** (dissertation §2.4, warping): the last server depth map D_1 (frame 1, the
last offloaded frame) is back-projected with the intrinsics, moved by the camera motion
``T_2_1`` (optical frame 1 → optical frame 2, see :func:`optical_relative_pose`) and
projected into frame 2. Each point is splatted to its nearest pixel with a z-buffer (the
nearest point wins), and pixels no point landed on (holes: disocclusions, the image border,
cracks where a surface is magnified) take the value of the nearest filled pixel. The result
is D'_2 (:func:`warp_depth`); :func:`warp_image` moves RGB_1 the same way.

**Tracker accuracy model** (novel in AccuMO): warping assumes a static scene, so it fails on
moving objects. RGB_1 warped to RGB'_2 differs from the real RGB_2 exactly there; the
optical flow F from RGB'_2 to RGB_2 (DIS here, FlowNet2S in the dissertation) says where
each pixel of RGB'_2 really is in frame 2. Moving D'_2's pixels by F gives D''_2, and
``AbsRel(D'_2 vs D''_2)`` estimates the warping error ``AbsRel(D'_2 vs D_2)``. Assuming the
error grows linearly with the stride, the drop rate is ``r = error / stride``
(:class:`DepthTrackerAccuracyModel`).

**Tracker accuracy model, measured at each depth result** (:func:`offload_tracker_drop_rate`,
this project's): the flow cannot see an object's own motion, and on unseen rooms the flow
model ran at 0.6× the true drop at the strides of a 16 Mbit/s link. When the server map of a
newly offloaded frame arrives, the tracker's map *of that same frame* (the previous server
map warped to it, kept when the frame was offloaded) is compared with it:
``slope · AbsRel(tracked vs server) - offset`` over the stride between the two offloaded
frames. The server map stands in for ground truth, so the line is fitted on a calibration
set (the offset is about the server net's own error counted twice). It needs no flow, but
only updates when a depth result arrives.

**Local-algorithm accuracy model** (:func:`lite_model_drop`): the lite model's AbsRel
against the server depth of the same offloaded frame, minus the server DNN's own average
AbsRel, so that it is a drop relative to the server like the tracker's. The two nets' errors
are correlated (they miss the same things), so that difference overstates how far the lite
net is from the server net where both are poor; :func:`fit_lite_drop` fits a slope and
offset on training data instead (the release's rule is slope 1, offset 0.04).

**Local selector** (:func:`select_local_depth`, :class:`LocalDepthSelector`): use the lite
model when ``r × stride ≥ d``, else the tracker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

import cv2
import numpy as np
from scipy import ndimage

from accumo_ros.geometry import T_BODY_OPTICAL, invert_poses
from accumo_ros.metrics import depth_errors
from edge_offload.camera_model import PinholeCamera

# The release's accuracy-model settings (§2.4 [R]).
DEFAULT_MIN_STRIDE = 6
DEFAULT_INITIAL_DROP_RATE = 0.02
DEFAULT_SERVER_MEAN_ABS_REL = 0.04
# AbsRel validity of the release: 0 < depth < 80 m (metrics.depth_errors' default range).
DEFAULT_MIN_DEPTH = 1e-3
DEFAULT_MAX_DEPTH = 80.0

TRACKER = 'tracker'
LOCAL_ALGORITHM = 'local_algorithm'
LocalChoice = Literal['tracker', 'local_algorithm']


# --- Poses ------------------------------------------------------------------------------------


def optical_relative_pose(T_world_body_1: np.ndarray, T_world_body_2: np.ndarray) -> np.ndarray:  # noqa: N803
    """Return ``T_2_1``: the pose that maps optical-frame-1 points to optical frame 2.

    ``T_world_body_k`` is the body pose (FLU, camera at the body origin) of frame k, as in
    :class:`accumo_ros.simulation.sequence.SyntheticSequence`; the optical frames are
    ``T_world_body_k @ T_BODY_OPTICAL``, so ``T_2_1 = inv(T_world_optical_2) @
    T_world_optical_1``. This is the argument :func:`warp_depth` takes.
    """
    optical_1 = np.asarray(T_world_body_1, dtype=np.float64) @ T_BODY_OPTICAL
    optical_2 = np.asarray(T_world_body_2, dtype=np.float64) @ T_BODY_OPTICAL
    return invert_poses(optical_2) @ optical_1


def optical_pose_change(T_body1_body2: np.ndarray) -> np.ndarray:  # noqa: N803
    """Return ``T_2_1`` (optical) from the body motion ``T_body1_body2`` between the frames.

    ``T_body1_body2`` is the pose of body frame 2 in body frame 1, i.e.
    ``geometry.relative_poses(pose_at_offload, pose_now)`` of the IMU-only filter (the
    release's ``poseRelative(current, lastDepthOffload)``).
    """
    motion = np.asarray(T_body1_body2, dtype=np.float64)
    return invert_poses(T_BODY_OPTICAL) @ invert_poses(motion) @ T_BODY_OPTICAL


# --- Forward warping --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ForwardWarp:
    """Where each pixel of the target image takes its value from in the source image.

    ``source`` (H, W) holds flat indices into the source image (row * W + column): the
    z-buffer winner for pixels a point landed on, the nearest such pixel's winner for the
    others; it is -1 everywhere when no point landed at all. ``holes`` (H, W) is true where
    no point landed (the values there are nearest-filled). ``depth`` is the splatted depth
    in the target frame (NaN everywhere when no point landed).
    """

    source: np.ndarray
    holes: np.ndarray
    depth: np.ndarray

    def apply(self, image: np.ndarray) -> np.ndarray:
        """Move a source-frame image (H, W) or (H, W, C) the same way as the depth."""
        image = np.asarray(image)
        if image.shape[:2] != self.source.shape:
            raise ValueError(
                f'image has shape {image.shape}, the warp is {self.source.shape} pixels'
            )
        flat = image.reshape((-1,) + image.shape[2:])
        if self.holes.all():
            # Nothing landed: a blank (zero) image rather than values from nowhere.
            return np.zeros_like(image)
        return flat[self.source.reshape(-1)].reshape(image.shape)


def _splat(
    columns: np.ndarray, rows: np.ndarray, z: np.ndarray, height: int, width: int
) -> np.ndarray:
    """Z-buffer the points (N,) at sub-pixel ``columns``, ``rows`` onto a height×width grid.

    Each point goes to its nearest pixel; where several land on one pixel the one with the
    smallest z wins. Points with a non-finite position or z <= 0 are dropped. Returns the
    winner's point index per pixel (H*W,), -1 where none landed.
    """
    with np.errstate(invalid='ignore'):
        # floor(x + 0.5) rounds halves up, consistently for both axes (np.round would round
        # halves to even and split a regular grid unevenly).
        column = np.floor(columns + 0.5)
        row = np.floor(rows + 0.5)
        ok = (
            np.isfinite(z)
            & (z > 0.0)
            & (column >= 0)
            & (column < width)
            & (row >= 0)
            & (row < height)
        )
    points = np.flatnonzero(ok)
    target = row[ok].astype(np.int64) * width + column[ok].astype(np.int64)
    depth = z[ok]
    # np.minimum.at is unbuffered (repeated targets all count) and, since NumPy 1.25, fast.
    nearest = np.full(height * width, np.inf)
    np.minimum.at(nearest, target, depth)
    # Several points may tie at the nearest z; the highest point index wins, so the result
    # does not depend on the order in which fancy assignment writes duplicates.
    is_winner = depth == nearest[target]
    winner = np.full(height * width, -1, dtype=np.int64)
    np.maximum.at(winner, target[is_winner], points[is_winner])
    return winner


def _fill_nearest(winner: np.ndarray, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Give holes (-1) the value of the nearest non-hole pixel; return (filled, holes)."""
    grid = winner.reshape(height, width)
    holes = grid < 0
    if not holes.any() or holes.all():
        return grid.copy(), holes
    # The Euclidean distance transform of the hole mask finds, for every pixel, the nearest
    # pixel that is not a hole (ties broken by scipy's scan order).
    nearest_row, nearest_column = ndimage.distance_transform_edt(
        holes, return_distances=False, return_indices=True
    )
    return grid[nearest_row, nearest_column], holes


@lru_cache(maxsize=8)
def _pixel_rays(intrinsics: PinholeCamera) -> np.ndarray:
    """Return ``intrinsics.pixel_rays()`` flattened to (H*W, 3), cached and read-only."""
    # Building the ray grid costs about as much as the splat itself; a tracker warps with
    # the same camera every frame.
    rays = intrinsics.pixel_rays().reshape(-1, 3)
    rays.flags.writeable = False
    return rays


def _check_depth(depth: np.ndarray, intrinsics: PinholeCamera, name: str) -> np.ndarray:
    depth = np.asarray(depth)
    expected = (intrinsics.height, intrinsics.width)
    if depth.shape != expected:
        raise ValueError(f'{name} has shape {depth.shape}, the camera is {expected} (H, W)')
    if not np.issubdtype(depth.dtype, np.floating):
        raise ValueError(f'{name} must be a float depth map in metres, got {depth.dtype}')
    return depth


def _check_pose(pose: np.ndarray) -> np.ndarray:
    pose = np.asarray(pose, dtype=np.float64)
    if pose.shape != (4, 4) or not np.all(np.isfinite(pose)):
        raise ValueError(f'T_2_1 must be a finite 4×4 pose, got shape {pose.shape}')
    return pose


def forward_warp(depth_1: np.ndarray, intrinsics: PinholeCamera, T_2_1: np.ndarray) -> ForwardWarp:  # noqa: N803
    """Warp the depth map of frame 1 into frame 2 and keep the pixel correspondence.

    ``depth_1`` (H, W) is metric optical z (pixels that are not finite and positive are
    skipped); ``T_2_1`` maps optical-frame-1 points to optical frame 2
    (:func:`optical_relative_pose`). Points are splatted to their nearest pixel with a
    z-buffer and holes are filled from the nearest filled pixel. The result's ``depth`` has
    ``depth_1``'s float dtype.
    """
    depth_1 = _check_depth(depth_1, intrinsics, 'depth_1')
    pose = _check_pose(T_2_1)
    height, width = depth_1.shape
    flat = depth_1.reshape(-1).astype(np.float64)
    with np.errstate(invalid='ignore'):
        valid = np.isfinite(flat) & (flat > 0.0)
    # PinholeCamera.back_project with cached rays; invalid depth is zeroed here (so no inf * 0
    # warnings) and its points dropped below (0 * ray would be a point at the camera).
    points = _pixel_rays(intrinsics) * np.where(valid, flat, 0.0)[:, None]
    points = points @ pose[:3, :3].T + pose[:3, 3]
    z = np.where(valid, points[:, 2], np.nan)
    points[:, 2] = z
    pixels, _ = intrinsics.project(points)
    columns, rows = pixels[:, 0], pixels[:, 1]
    winner = _splat(columns, rows, z, height, width)
    source, holes = _fill_nearest(winner, height, width)
    if holes.all():
        warped = np.full((height, width), np.nan, dtype=depth_1.dtype)
    else:
        warped = z[source].astype(depth_1.dtype)
    return ForwardWarp(source=source, holes=holes, depth=warped)


def warp_depth(
    depth: np.ndarray,
    intrinsics: PinholeCamera,
    T_2_1: np.ndarray,  # noqa: N803
    *,
    return_holes: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Return D'_2: the depth map of frame 1 warped into frame 2 (AccuMO's depth tracker).

    Back-project ``depth`` (H, W, optical z in metres) with ``intrinsics``, transform by
    ``T_2_1`` (optical frame 1 → optical frame 2), project, splat each point to its nearest
    pixel keeping the nearest point (z-buffer), and fill the pixels no point landed on from
    the nearest filled pixel. The values are the points' z in frame 2. With
    ``return_holes``, also return the (H, W) mask of the filled pixels. If no point lands in
    the image the map is all NaN (and all holes).
    """
    warp = forward_warp(depth, intrinsics, T_2_1)
    return (warp.depth, warp.holes) if return_holes else warp.depth


def warp_image(
    image: np.ndarray,
    depth_1: np.ndarray,
    intrinsics: PinholeCamera,
    T_2_1: np.ndarray,  # noqa: N803
    *,
    return_holes: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Warp frame 1's image (H, W) or (H, W, C) into frame 2 with frame 1's depth.

    The same z-buffer and nearest fill as :func:`warp_depth`, so pixel p of the result shows
    the frame-1 pixel whose depth :func:`warp_depth` puts at p.
    """
    warp = forward_warp(depth_1, intrinsics, T_2_1)
    warped = warp.apply(image)
    return (warped, warp.holes) if return_holes else warped


def move_by_flow(
    depth: np.ndarray, flow: np.ndarray, *, return_holes: bool = False
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Move each pixel p of ``depth`` (H, W) to ``p + flow[p]`` (D'_2 → D''_2).

    ``flow`` (H, W, 2) is (dx, dy) in pixels from ``depth``'s image to the target image, as
    OpenCV's ``calc(I0, I1)`` returns for I0 = the image aligned with ``depth``. Values keep
    their depth (only positions change); the nearest pixel, a z-buffer for collisions and a
    nearest fill of holes, as in :func:`warp_depth`. Non-finite or non-positive depth is not
    moved (and ends up filled).
    """
    depth = np.asarray(depth)
    flow = np.asarray(flow)
    if depth.ndim != 2 or flow.shape != depth.shape + (2,):
        raise ValueError(f'need depth (H, W) and flow (H, W, 2), got {depth.shape}, {flow.shape}')
    height, width = depth.shape
    rows, columns = np.mgrid[0:height, 0:width]
    z = depth.reshape(-1).astype(np.float64)
    winner = _splat(
        (columns + flow[..., 0]).reshape(-1), (rows + flow[..., 1]).reshape(-1), z, height, width
    )
    source, holes = _fill_nearest(winner, height, width)
    moved = (
        np.full(depth.shape, np.nan, dtype=depth.dtype)
        if holes.all()
        else depth.reshape(-1)[source]
    )
    return (moved, holes) if return_holes else moved


# --- Tracker accuracy model -------------------------------------------------------------------


def _grey(image: np.ndarray, name: str) -> np.ndarray:
    image = np.asarray(image)
    if image.dtype != np.uint8:
        raise ValueError(f'{name} must be an 8-bit image, got {image.dtype}')
    if image.ndim == 2:
        return np.ascontiguousarray(image)
    if image.ndim == 3 and image.shape[2] == 3:
        return cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2GRAY)
    raise ValueError(f'{name} must be (H, W) grey or (H, W, 3) RGB, got {image.shape}')


def dis_flow(
    image_from: np.ndarray,
    image_to: np.ndarray,
    *,
    preset: int = cv2.DISOPTICAL_FLOW_PRESET_MEDIUM,
    dis: cv2.DISOpticalFlow | None = None,
) -> np.ndarray:
    """DIS optical flow (H, W, 2) from ``image_from`` to ``image_to`` (uint8 RGB or grey).

    ``image_from(p) ≈ image_to(p + flow(p))``. Pass ``dis`` to reuse an instance (creating
    one costs more than a small image's flow); ``preset`` is used otherwise.
    """
    grey_from = _grey(image_from, 'image_from')
    grey_to = _grey(image_to, 'image_to')
    if grey_from.shape != grey_to.shape:
        raise ValueError(f'images differ in size: {grey_from.shape} and {grey_to.shape}')
    if dis is None:
        dis = cv2.DISOpticalFlow_create(preset)
    return dis.calc(grey_from, grey_to, None)


@dataclass(frozen=True, eq=False)
class TrackerErrorEstimate:
    """One run of the tracker accuracy model.

    ``error`` = AbsRel(D'_2 vs D''_2), ``drop_rate`` = ``error / stride``. The intermediate
    images are kept for inspection: ``warped_depth`` D'_2, ``moved_depth`` D''_2,
    ``warped_rgb`` RGB'_2, ``flow`` F (RGB'_2 → RGB_2) and ``holes`` (D'_2's filled pixels).
    """

    error: float
    stride: int
    drop_rate: float
    warped_depth: np.ndarray
    moved_depth: np.ndarray
    warped_rgb: np.ndarray
    flow: np.ndarray
    holes: np.ndarray


def _check_stride(stride: int) -> int:
    if isinstance(stride, bool) or not isinstance(stride, int | np.integer) or stride < 1:
        raise ValueError(f'stride must be a positive number of frames, got {stride!r}')
    return int(stride)


def estimate_tracker_error(
    rgb_1: np.ndarray,
    depth_1: np.ndarray,
    rgb_2: np.ndarray,
    intrinsics: PinholeCamera,
    T_2_1: np.ndarray,  # noqa: N803
    stride: int,
    *,
    preset: int = cv2.DISOPTICAL_FLOW_PRESET_MEDIUM,
    dis: cv2.DISOpticalFlow | None = None,
    min_depth: float = DEFAULT_MIN_DEPTH,
    max_depth: float = DEFAULT_MAX_DEPTH,
) -> TrackerErrorEstimate:
    """Estimate the warping error of the depth tracker from frame 1 to frame 2.

    ``rgb_1`` and ``depth_1`` are the last offloaded frame and its server depth, ``rgb_2``
    the current frame (uint8 RGB or grey, the camera's size), ``T_2_1`` the optical pose
    change (frame 1 → frame 2) and ``stride`` the frames between them. Warps RGB_1 and D_1
    to frame 2 with one z-buffer, computes the DIS flow F from RGB'_2 to RGB_2, moves D'_2's
    pixels by F (:func:`move_by_flow`) and returns AbsRel(D'_2 vs D''_2) over the pixels
    where D''_2 is in ``(min_depth, max_depth]``, and that divided by ``stride``.
    """
    stride = _check_stride(stride)
    depth_1 = _check_depth(depth_1, intrinsics, 'depth_1')
    shape = (intrinsics.height, intrinsics.width)
    for name, image in (('rgb_1', rgb_1), ('rgb_2', rgb_2)):
        if np.shape(image)[:2] != shape:
            raise ValueError(f'{name} has shape {np.shape(image)}, the camera is {shape} (H, W)')
    warp = forward_warp(depth_1, intrinsics, T_2_1)
    if warp.holes.all():
        raise ValueError('no point of depth_1 lands in frame 2: nothing to compare')
    warped_rgb = warp.apply(rgb_1)
    flow = dis_flow(warped_rgb, rgb_2, preset=preset, dis=dis)
    moved = move_by_flow(warp.depth, flow)
    # D''_2 (the flow-corrected map) plays the ground truth, D'_2 the prediction.
    error = depth_errors(warp.depth, moved, min_depth=min_depth, max_depth=max_depth).abs_rel
    return TrackerErrorEstimate(
        error=error,
        stride=stride,
        drop_rate=error / stride,
        warped_depth=warp.depth,
        moved_depth=moved,
        warped_rgb=warped_rgb,
        flow=flow,
        holes=warp.holes,
    )


@dataclass
class DepthTrackerAccuracyModel:
    """The depth tracker's accuracy model with the release's schedule and state.

    :attr:`drop_rate` starts at ``initial_drop_rate`` (the release's 0.02 AbsRel per frame)
    and is replaced by each :meth:`update` that runs; :meth:`update` only runs when the
    stride since the last depth offload is at least ``min_stride`` (6 in the release),
    because the error of short strides is too small to measure against the flow's noise.
    One DIS instance (``preset``) is reused across calls, so an instance is not thread-safe.
    """

    intrinsics: PinholeCamera
    min_stride: int = DEFAULT_MIN_STRIDE
    initial_drop_rate: float = DEFAULT_INITIAL_DROP_RATE
    preset: int = cv2.DISOPTICAL_FLOW_PRESET_MEDIUM
    min_depth: float = DEFAULT_MIN_DEPTH
    max_depth: float = DEFAULT_MAX_DEPTH
    drop_rate: float = field(init=False)
    last: TrackerErrorEstimate | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        _check_stride(self.min_stride)
        if not math.isfinite(self.initial_drop_rate) or self.initial_drop_rate < 0.0:
            raise ValueError(f'initial drop rate must be >= 0, got {self.initial_drop_rate}')
        self.drop_rate = float(self.initial_drop_rate)
        self._dis = cv2.DISOpticalFlow_create(self.preset)

    def estimate(
        self,
        rgb_1: np.ndarray,
        depth_1: np.ndarray,
        rgb_2: np.ndarray,
        T_2_1: np.ndarray,  # noqa: N803
        stride: int,
    ) -> TrackerErrorEstimate:
        """Run :func:`estimate_tracker_error` without changing the state (any stride >= 1)."""
        return estimate_tracker_error(
            rgb_1,
            depth_1,
            rgb_2,
            self.intrinsics,
            T_2_1,
            stride,
            dis=self._dis,
            min_depth=self.min_depth,
            max_depth=self.max_depth,
        )

    def update(
        self,
        rgb_1: np.ndarray,
        depth_1: np.ndarray,
        rgb_2: np.ndarray,
        T_2_1: np.ndarray,  # noqa: N803
        stride: int,
    ) -> TrackerErrorEstimate | None:
        """Estimate and adopt a new drop rate if ``stride >= min_stride``; else return None."""
        if _check_stride(stride) < self.min_stride:
            return None
        estimate = self.estimate(rgb_1, depth_1, rgb_2, T_2_1, stride)
        self.drop_rate = estimate.drop_rate
        self.last = estimate
        return estimate

    def reset(self) -> None:
        """Return to the initial drop rate (a new sequence)."""
        self.drop_rate = float(self.initial_drop_rate)
        self.last = None


# --- Local algorithm and selector -------------------------------------------------------------


def lite_model_drop(
    lite_depth: np.ndarray,
    server_depth: np.ndarray,
    offset: float = DEFAULT_SERVER_MEAN_ABS_REL,
    *,
    slope: float = 1.0,
    min_depth: float = DEFAULT_MIN_DEPTH,
    max_depth: float = DEFAULT_MAX_DEPTH,
) -> float:
    """Return d: the lite model's accuracy drop relative to the server DNN.

    ``slope · AbsRel(lite_depth vs server_depth) - offset``, both maps of the same
    (offloaded) frame and shape; the server map is the pseudo ground truth, valid in
    ``(min_depth, max_depth]``. The release uses slope 1 and offset 0.04 (the server DNN's
    average AbsRel); :func:`fit_lite_drop` fits both on training data. The result may be
    negative (the lite model is then preferred at any stride).
    """
    if not math.isfinite(offset):
        raise ValueError(f'offset must be finite, got {offset}')
    if not (math.isfinite(slope) and slope > 0.0):
        raise ValueError(f'slope must be finite and positive, got {slope}')
    errors = depth_errors(lite_depth, server_depth, min_depth=min_depth, max_depth=max_depth)
    return slope * errors.abs_rel - offset


def offload_tracker_drop_rate(
    tracked_depth: np.ndarray,
    server_depth: np.ndarray,
    stride: int,
    *,
    slope: float,
    offset: float,
    min_depth: float = DEFAULT_MIN_DEPTH,
    max_depth: float = DEFAULT_MAX_DEPTH,
) -> float:
    """Return the tracker's drop rate measured on an offloaded frame (>= 0).

    ``tracked_depth`` is the tracker's map of the offloaded frame (the server map of the
    frame ``stride`` frames before it, warped), ``server_depth`` the server's map of the
    same frame, the pseudo ground truth over its pixels in ``(min_depth, max_depth]``. A
    pixel the warp left without depth (NaN) counts as 100 % off. Returns
    ``max(0, slope · AbsRel - offset) / stride``.
    """
    stride = _check_stride(stride)
    if not (math.isfinite(slope) and slope > 0.0) or not math.isfinite(offset):
        raise ValueError(f'need a finite positive slope and finite offset, got {slope}, {offset}')
    tracked = np.asarray(tracked_depth, dtype=np.float64)
    server = np.asarray(server_depth, dtype=np.float64)
    if tracked.shape != server.shape:
        raise ValueError(f'tracked map {tracked.shape} and server map {server.shape} differ')
    with np.errstate(invalid='ignore'):
        valid = np.isfinite(server) & (server > min_depth) & (server <= max_depth)
    if not valid.any():
        raise ValueError('the server map has no valid pixel')
    reference = server[valid]
    predicted = np.nan_to_num(tracked[valid], nan=0.0, posinf=0.0, neginf=0.0)
    abs_rel = float(np.mean(np.abs(predicted - reference) / reference))
    return max(0.0, slope * abs_rel - offset) / stride


def fit_lite_drop(abs_rel_vs_server: np.ndarray, true_drop: np.ndarray) -> tuple[float, float]:
    """Least-squares ``true_drop ≈ slope · abs_rel_vs_server - offset``; return (slope, offset).

    ``abs_rel_vs_server[i]`` is AbsRel(lite vs server) on frame i, ``true_drop[i]`` is
    AbsRel(lite vs ground truth) - AbsRel(server vs ground truth) on the same frame. Least
    squares, because the scheduler's cost is a mean AbsRel.
    """
    x = np.asarray(abs_rel_vs_server, dtype=np.float64).reshape(-1)
    y = np.asarray(true_drop, dtype=np.float64).reshape(-1)
    if x.shape != y.shape or x.size < 2:
        raise ValueError(f'need two or more pairs of equal length, got {x.shape}, {y.shape}')
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError('the pairs must be finite')
    if np.ptp(x) == 0.0:
        raise ValueError('AbsRel vs the server is constant: the slope is undetermined')
    slope, intercept = np.polyfit(x, y, 1)
    if not slope > 0.0:
        raise ValueError(f'the fitted slope is {slope:.3g}: the lite drop does not follow AbsRel')
    return float(slope), float(-intercept)


def select_local_depth(drop_rate: float, stride: int, lite_drop: float) -> LocalChoice:
    """Pick ``'local_algorithm'`` when ``drop_rate × stride >= lite_drop``, else ``'tracker'``.

    ``stride`` is the frames since the last depth offload whose result is in use;
    ``lite_drop`` may be ``math.inf`` (no lite estimate yet, or no lite model).
    """
    stride = _check_stride(stride)
    if not math.isfinite(drop_rate) or drop_rate < 0.0:
        raise ValueError(f'drop rate must be finite and >= 0, got {drop_rate}')
    if math.isnan(lite_drop):
        raise ValueError('lite drop is NaN')
    return LOCAL_ALGORITHM if drop_rate * stride >= lite_drop else TRACKER


@dataclass
class LocalDepthSelector:
    """The depth task's per-frame choice between the tracker and the lite model.

    Holds the latest estimates (the tracker's drop rate ``drop_rate``, the lite model's drop
    ``lite_drop``, infinite until the first estimate) and applies
    :func:`select_local_depth`.
    """

    drop_rate: float = DEFAULT_INITIAL_DROP_RATE
    lite_drop: float = math.inf

    def select(self, stride: int) -> LocalChoice:
        """Choose for a frame ``stride`` frames after the last depth offload in use."""
        return select_local_depth(self.drop_rate, stride, self.lite_drop)
