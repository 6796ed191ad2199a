# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Localize people in 3-D from their 2-D keypoints and a depth image.

A pose model gives 17 COCO keypoints per person in the RGB image; a depth image (from an
RGB-D sensor or a depth network) gives metric depth. This module turns the two into one
3-D point per person with its covariance, first in the camera's optical frame (z forward, x
right, y down) and then in the odometry frame, where
:class:`people_following.person_tracker.Detection` takes the ground-plane part. It is plain Python
(numpy): a ROS node wraps it and matches images, depth and camera infos.

Pixel conventions
-----------------
Keypoints follow ``offload_interfaces/Keypoint2D``: x to the right, y down, origin at the
*corner* of the top-left pixel, so the centre of pixel (row ``r``, column ``c``) is at
``(c + 0.5, r + 0.5)``. The intrinsics follow ``sensor_msgs/CameraInfo`` (and OpenCV, and
``people_following.camera_info_file``): the pinhole model ``u = fx·X/Z + cx`` puts the *centre* of
the top-left pixel at ``u = 0``. So ``x_px = u + 0.5`` and ``y_px = v + 0.5``; every
conversion goes through :meth:`PinholeCamera.pixel` and :meth:`PinholeCamera.ray`,
which apply that half pixel, and nothing else touches raw pixel coordinates. The depth pixel
that contains the corner-origin point ``(x, y)`` is row ``floor(y)``, column ``floor(x)``.

The depth image must be registered to the RGB camera (same optical centre and axes, as an
RGB-D driver's depth aligned to colour, or a depth network run on the RGB image), but may
have another pixel grid: another resolution, aspect ratio or crop (a depth network's
416×128 maps for a 640×480 camera). Each image has its own :class:`PinholeCamera`, and a
keypoint moves into the depth image along its viewing ray: ``ray`` with the RGB intrinsics,
then ``pixel`` with the depth intrinsics. Assuming equal sizes, or scaling by the size ratio,
would be wrong for a crop and off by the half pixel for a resize.

Method
------
1. Keypoints: the torso (shoulders and hips) with a score of at least
   ``min_keypoint_score`` and inside the RGB image (a model extrapolates keypoints beyond the
   border; they are guesses). The torso is the most rigid and most central part of the body
   and the least likely to be occluded by the person's own limbs or to stick out of the
   silhouette as arms do. With fewer than ``min_torso_keypoints`` of them (a close person's
   shoulders are above the image, a far one's may be missed), all keypoints that pass are
   used instead.
2. Depth of each keypoint: the median of the valid depths (finite, within ``[min_depth_m,
   max_depth_m]``; 0 and NaN are the usual "no data") in a window of ``2·h + 1`` depth pixels
   around it, ``h = window_half_size_px``. The median ignores holes and a few pixels of the
   background where the keypoint is near the silhouette's edge.
3. Depth of the person: keypoints still land on the background (a shoulder at the
   silhouette's edge, a depth map whose edges are blurred or misregistered) or, more rarely,
   on something in front. The reference is the *lower* median of the keypoint depths (for an
   even count, the smaller of the two middle values): the background is behind the person, so
   a foreground bias survives up to half the keypoints reading the background, which the
   ordinary median of two or four values does not (it averages the person and the wall). The
   keypoints within ``inlier_tolerance_m`` of the reference (the depth extent of a torso) are
   the inliers; the person's depth ``Z`` is their median. Fewer than ``min_valid_keypoints``
   inliers is a failure, not a guess.
4. Image point: the mean pixel of *all* the keypoints of step 1, whether or not their depth
   was usable. A keypoint whose depth reads the wall or a hole was still found on the person,
   and dropping it would move the centre towards the other side of the body (by up to half a
   torso width when a shoulder is dropped).
5. Back-projection of the image point at depth ``Z``: ``P = Z·ray(pixel)``.

The point is on the visible surface of the torso, not inside the body. The tracker should
follow one body point whatever the view, so :meth:`PersonLocalizer.to_odom` moves it
``body_centre_offset_m`` further from the camera, horizontally (it needs gravity, hence the
odometry frame): about half a torso's depth.

Uncertainty
-----------
The point depends on three numbers: the image point ``(u, v)`` and the depth ``Z``. They are
taken as independent, with

* ``σ_u = σ_v = pixel_sigma_px`` (RGB pixels): where on the body the keypoints' mean falls
  (keypoint error of the pose model, the body's pose) rather than a sensor noise, so it is not
  divided by the number of keypoints;
* ``σ_Z² = (a + b·Z²)² + (1.4826·MAD)²``: a sensor model, ``a = depth_noise_const_m``,
  ``b = depth_noise_quad_per_m`` (the error of stereo and structured light grows with
  ``Z²``, since disparity is ``∝ 1/Z``; for a depth network, where it is closer to
  ``∝ Z``, ``b`` can be fitted over the working range), plus the spread of the inlier depths
  (``MAD``, the median absolute deviation from ``Z``, scaled to a standard deviation). The
  spread measures how well the keypoints agree on one depth (body shape, misregistration,
  depth-map noise that is correlated across a window and so does not average out); it is
  not divided by the count either, since which surface point "is" the person is ambiguous by
  that much.

The covariance in the optical frame is ``Σ = J·diag(σ_u², σ_v², σ_Z²)·Jᵀ`` with the
Jacobian of ``P = (Z·(u - cx)/fx, Z·(v - cy)/fy, Z)``::

    J = [[Z/fx, 0,    (u - cx)/fx],
         [0,    Z/fy, (v - cy)/fy],
         [0,    0,    1          ]]

so the lateral spread grows as ``Z`` and the depth spread as ``Z²``. It is the linearized
(first-order) propagation, exact for the lateral terms and good while ``σ_Z ≪ Z``.

Frames
------
:meth:`PersonLocalizer.to_odom` takes ``T_odom_optical`` (4×4, the pose of the optical frame
in the odometry frame, as tf2 gives it for ``lookup_transform('odom', optical_frame_id,
stamp)``), checks that it is a rigid transform, and returns ``p = R·P + t``, ``R·Σ·Rᵀ``, and
the ground-plane part the tracker takes: ``(x, y)`` with its 2×2 covariance (the marginal of
the 3-D one) and the height ``z``. The odometry frame has z up (REP 103 / REP 105).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from numpy.typing import ArrayLike

from edge_offload.camera_model import PinholeCamera
from edge_offload.value_checks import check_int, check_positive
from people_following.person_tracker import Detection

COCO_KEYPOINT_COUNT = 17
LEFT_SHOULDER, RIGHT_SHOULDER, LEFT_HIP, RIGHT_HIP = 5, 6, 11, 12
TORSO_KEYPOINTS = (LEFT_SHOULDER, RIGHT_SHOULDER, LEFT_HIP, RIGHT_HIP)
_TORSO_MASK = np.isin(np.arange(COCO_KEYPOINT_COUNT), TORSO_KEYPOINTS)
# MAD × 1.4826 is the standard deviation of a normal distribution with that MAD.
_MAD_TO_SIGMA = 1.4826
# Tolerance of the rigid-transform check: a rotation from a float32 quaternion is orthonormal
# to about 1e-7; anything worse is a wrong matrix, not rounding.
_RIGID_ATOL = 1e-5
# Relative tolerance of the symmetry check on a given covariance.
_SYMMETRY_RTOL = 1e-9


@dataclass(frozen=True)
class LocalizerConfig:
    """Tuning of :class:`PersonLocalizer` (meaning in the module docstring)."""

    # Keypoints with a lower score are not used; in (0, 1] since 0 means "not found".
    min_keypoint_score: float = 0.3
    # Torso keypoints (that pass the score) needed to use the torso alone.
    min_torso_keypoints: int = 2
    # Keypoints whose depths agree that a person needs, or there is no position.
    min_valid_keypoints: int = 2
    # Half-size of the depth window around a keypoint, in depth pixels (0: one pixel).
    window_half_size_px: int = 2
    # Depth readings outside this range are invalid (m).
    min_depth_m: float = 0.2
    max_depth_m: float = 10.0
    # Keypoint depths farther than this from the reference are outliers (m): a torso's depth.
    inlier_tolerance_m: float = 0.3
    # Depth noise σ = a + b·Z² (m): a = 2 cm, b = 0.01 /m gives 6 cm at 2 m and 18 cm at 4 m,
    # a stereo RGB-D sensor's order; a depth network's error is larger.
    depth_noise_const_m: float = 0.02
    depth_noise_quad_per_m: float = 0.01
    # Standard deviation of the image point (RGB pixels, per axis).
    pixel_sigma_px: float = 3.0
    # Distance from the torso's visible surface to the body's vertical axis (m, horizontal);
    # applied by to_odom. About half a torso's depth.
    body_centre_offset_m: float = 0.1

    def __post_init__(self) -> None:
        score = check_positive('min_keypoint_score', self.min_keypoint_score)
        if score > 1.0:
            raise ValueError(f'min_keypoint_score must be in (0, 1], got {score!r}')
        check_int('min_torso_keypoints', self.min_torso_keypoints, 1)
        check_int('min_valid_keypoints', self.min_valid_keypoints, 1)
        check_int('window_half_size_px', self.window_half_size_px, 0)
        min_depth = check_positive('min_depth_m', self.min_depth_m)
        max_depth = check_positive('max_depth_m', self.max_depth_m)
        if max_depth <= min_depth:
            raise ValueError(
                f'max_depth_m ({max_depth!r}) must be more than min_depth_m ({min_depth!r})'
            )
        check_positive('inlier_tolerance_m', self.inlier_tolerance_m)
        # a > 0 keeps the covariance positive definite when the keypoints agree exactly.
        check_positive('depth_noise_const_m', self.depth_noise_const_m)
        check_positive('depth_noise_quad_per_m', self.depth_noise_quad_per_m, allow_zero=True)
        check_positive('pixel_sigma_px', self.pixel_sigma_px)
        check_positive('body_centre_offset_m', self.body_centre_offset_m, allow_zero=True)


def _check_covariance(name: str, covariance: ArrayLike, size: int) -> np.ndarray:
    covariance = np.array(covariance, dtype=np.float64)
    if covariance.shape != (size, size):
        raise ValueError(f'{name} must be {size}x{size}, got shape {covariance.shape}')
    if not np.all(np.isfinite(covariance)):
        raise ValueError(f'{name} must be finite, got {covariance.tolist()}')
    if np.max(np.abs(covariance - covariance.T)) > _SYMMETRY_RTOL * np.max(np.abs(covariance)):
        raise ValueError(f'{name} must be symmetric, got {covariance.tolist()}')
    covariance = 0.5 * (covariance + covariance.T)
    try:
        np.linalg.cholesky(covariance)
    except np.linalg.LinAlgError:
        raise ValueError(f'{name} must be positive definite, got {covariance.tolist()}') from None
    return covariance


def _readonly(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


# eq=False: == on ndarray fields would raise; the identity is the useful equality.
@dataclass(frozen=True, eq=False)
class PersonLocation:
    """One person in the camera's optical frame (m): z forward, x right, y down.

    ``point`` is on the torso's visible surface, ``covariance`` its 3×3 covariance (m²).
    ``pixel`` is the image point (``Keypoint2D`` convention, RGB image). ``keypoint_ids``
    are the keypoints whose mean is ``pixel`` and ``keypoint_depths_m`` their depths (NaN
    where there was none); ``depth_keypoint_ids`` are those whose depths agreed and gave
    ``point[2]``. Checked on construction; arrays are stored as read-only copies.
    """

    point: np.ndarray
    covariance: np.ndarray
    pixel: np.ndarray
    keypoint_ids: tuple[int, ...]
    keypoint_depths_m: tuple[float, ...]
    depth_keypoint_ids: tuple[int, ...]

    def __post_init__(self) -> None:
        point = np.array(self.point, dtype=np.float64)
        if point.shape != (3,) or not np.all(np.isfinite(point)):
            raise ValueError(f'point must be 3 finite values, got {self.point!r}')
        if point[2] <= 0.0:
            raise ValueError(f'point must be in front of the camera (z > 0), got {point.tolist()}')
        covariance = _check_covariance('covariance', self.covariance, 3)
        pixel = np.array(self.pixel, dtype=np.float64)
        if pixel.shape != (2,) or not np.all(np.isfinite(pixel)):
            raise ValueError(f'pixel must be 2 finite values, got {self.pixel!r}')
        ids = tuple(int(i) for i in self.keypoint_ids)
        depth_ids = tuple(int(i) for i in self.depth_keypoint_ids)
        if any(not 0 <= i < COCO_KEYPOINT_COUNT for i in ids):
            raise ValueError(f'keypoint_ids must be COCO indices 0..16, got {ids}')
        if not set(depth_ids) <= set(ids):
            raise ValueError(f'depth_keypoint_ids {depth_ids} must be among keypoint_ids {ids}')
        depths = tuple(float(d) for d in self.keypoint_depths_m)
        if len(depths) != len(ids):
            raise ValueError(
                f'keypoint_depths_m must have one value per keypoint id ({len(ids)}), '
                f'got {len(depths)}'
            )
        object.__setattr__(self, 'point', _readonly(point))
        object.__setattr__(self, 'covariance', _readonly(covariance))
        object.__setattr__(self, 'pixel', _readonly(pixel))
        object.__setattr__(self, 'keypoint_ids', ids)
        object.__setattr__(self, 'keypoint_depths_m', depths)
        object.__setattr__(self, 'depth_keypoint_ids', depth_ids)

    @property
    def depth_m(self) -> float:
        """The person's depth ``Z`` (m, along the optical axis)."""
        return float(self.point[2])

    @property
    def keypoint_count(self) -> int:
        """The number of keypoints used for the image point."""
        return len(self.keypoint_ids)


class LocalizationFailure(StrEnum):
    """Why a person has no position; the values are the strings a node reports."""

    NO_KEYPOINTS = 'no_keypoints'  # no keypoint with the score, inside the image
    NO_DEPTH = 'no_depth'  # too few keypoints with a valid depth
    INCONSISTENT_DEPTH = 'inconsistent_depth'  # too few keypoint depths agree


@dataclass(frozen=True)
class Localization:
    """The outcome for one person: a ``location``, or ``None`` with a ``failure`` and ``reason``.

    ``reason`` is a sentence for logs ('' on success).
    """

    location: PersonLocation | None
    failure: LocalizationFailure | None = None
    reason: str = ''

    def __post_init__(self) -> None:
        if (self.location is None) == (self.failure is None):
            raise ValueError('a localization has either a location or a failure, not both')

    @property
    def ok(self) -> bool:
        """Whether the person was localized."""
        return self.location is not None


# eq=False: == on ndarray fields would raise; the identity is the useful equality.
@dataclass(frozen=True, eq=False)
class OdomLocation:
    """One person in the odometry frame (m, z up): the 3-D point and the tracker's part.

    ``position`` (3) and ``covariance`` (3×3) include the body-centre offset;
    ``ground_position`` (x, y) and ``ground_covariance`` (2×2) are their ground-plane part
    and ``height`` the z of ``position``.
    """

    position: np.ndarray
    covariance: np.ndarray
    ground_position: np.ndarray
    ground_covariance: np.ndarray
    height: float

    def detection(self) -> Detection:
        """Return the :class:`people_following.person_tracker.Detection` of this location."""
        return Detection(self.ground_position, self.ground_covariance, z=self.height)


def check_rigid_transform(matrix: ArrayLike, name: str = 'T_odom_optical') -> np.ndarray:
    """Return ``matrix`` as a 4×4 float array if it is a rigid transform, else ``ValueError``.

    Rigid: finite, last row ``[0, 0, 0, 1]``, a rotation block with ``RᵀR = I`` and
    ``det R = +1`` (to 1e-5: no scale, shear or reflection).
    """
    transform = np.array(matrix, dtype=np.float64)
    if transform.shape != (4, 4):
        raise ValueError(f'{name} must be 4x4, got shape {np.shape(matrix)}')
    if not np.all(np.isfinite(transform)):
        raise ValueError(f'{name} must be finite, got {transform.tolist()}')
    if not np.allclose(transform[3], [0.0, 0.0, 0.0, 1.0], rtol=0.0, atol=_RIGID_ATOL):
        raise ValueError(f'{name} must end with the row [0, 0, 0, 1], got {transform[3].tolist()}')
    rotation = transform[:3, :3]
    if not np.allclose(rotation.T @ rotation, np.eye(3), rtol=0.0, atol=_RIGID_ATOL):
        raise ValueError(f'{name} rotation block is not orthonormal: {rotation.tolist()}')
    if np.linalg.det(rotation) < 0.0:
        raise ValueError(f'{name} rotation block is a reflection (det < 0): {rotation.tolist()}')
    return transform


class PersonLocalizer:
    """Keypoints and depth in, one 3-D position per person out (see the module docstring)."""

    def __init__(self, config: LocalizerConfig | None = None) -> None:
        """Use ``config``, or :class:`LocalizerConfig`'s defaults."""
        self.config = LocalizerConfig() if config is None else config

    def localize(
        self,
        keypoints: ArrayLike,
        depth: ArrayLike,
        rgb_camera: PinholeCamera,
        depth_camera: PinholeCamera,
    ) -> Localization:
        """Localize one person in the optical frame.

        ``keypoints`` is (17, 3) ``[x_px, y_px, score]`` in COCO order, in the RGB image
        (``Keypoint2D`` convention); ``depth`` the depth image (m, float, ``depth_camera``'s
        height × width), registered to the RGB camera. A person that cannot be localized is a
        :class:`Localization` with a failure, never an exception; input that is malformed
        (shapes, non-finite keypoints with a score, scores outside [0, 1], a non-float depth
        image) raises ``ValueError`` and the wrong types ``TypeError``.
        """
        cfg = self.config
        for name, camera in (('rgb_camera', rgb_camera), ('depth_camera', depth_camera)):
            if not isinstance(camera, PinholeCamera):
                raise TypeError(f'{name} must be PinholeCamera, got {type(camera).__name__}')
        points = _check_keypoints(keypoints)
        depth = _check_depth(depth, depth_camera)

        pixels, scores = points[:, :2], points[:, 2]
        found = (scores >= cfg.min_keypoint_score) & rgb_camera.contains(pixels)
        torso = found & _TORSO_MASK
        selected = torso if np.count_nonzero(torso) >= cfg.min_torso_keypoints else found
        ids = np.flatnonzero(selected)
        if ids.size == 0:
            return Localization(
                None,
                LocalizationFailure.NO_KEYPOINTS,
                f'no keypoint inside the image has a score of at least {cfg.min_keypoint_score}',
            )

        # Along each keypoint's viewing ray into the depth image's pixel grid.
        depth_pixels = depth_camera.pixel(rgb_camera.ray(pixels[ids]))
        depths = np.array([self._window_depth(depth, p) for p in depth_pixels])
        has_depth = np.isfinite(depths)
        if np.count_nonzero(has_depth) < cfg.min_valid_keypoints:
            return Localization(
                None,
                LocalizationFailure.NO_DEPTH,
                f'{np.count_nonzero(has_depth)} of keypoints {ids.tolist()} have a valid depth, '
                f'{cfg.min_valid_keypoints} needed',
            )
        valid = np.sort(depths[has_depth])
        reference = valid[(valid.size - 1) // 2]  # the lower median: foreground bias
        with np.errstate(invalid='ignore'):
            inliers = has_depth & (np.abs(depths - reference) <= cfg.inlier_tolerance_m)
        if np.count_nonzero(inliers) < cfg.min_valid_keypoints:
            return Localization(
                None,
                LocalizationFailure.INCONSISTENT_DEPTH,
                f'{np.count_nonzero(inliers)} of keypoint depths {np.round(valid, 3).tolist()} '
                f'm are within {cfg.inlier_tolerance_m} m of {reference:.3f} m, '
                f'{cfg.min_valid_keypoints} needed',
            )
        z = float(np.median(depths[inliers]))
        mad = float(np.median(np.abs(depths[inliers] - z)))
        pixel = pixels[ids].mean(axis=0)
        point = z * rgb_camera.ray(pixel)
        location = PersonLocation(
            point=point,
            covariance=self._covariance(point, rgb_camera, mad),
            pixel=pixel,
            keypoint_ids=tuple(ids.tolist()),
            keypoint_depths_m=tuple(depths.tolist()),
            depth_keypoint_ids=tuple(ids[inliers].tolist()),
        )
        return Localization(location)

    def to_odom(self, location: PersonLocation, t_odom_optical: ArrayLike) -> OdomLocation:
        """Return ``location`` in the odometry frame, moved to the body's axis.

        ``t_odom_optical`` is the 4×4 pose of the optical frame in the odometry frame (z
        up); ``ValueError`` if it is not rigid. The point is moved ``body_centre_offset_m``
        horizontally away from the camera and its covariance propagated through that move.
        """
        if not isinstance(location, PersonLocation):
            raise TypeError(f'location must be PersonLocation, got {type(location).__name__}')
        transform = check_rigid_transform(t_odom_optical)
        rotation, camera = transform[:3, :3], transform[:3, 3]
        position = rotation @ location.point + camera
        covariance = rotation @ location.covariance @ rotation.T
        offset = self.config.body_centre_offset_m
        away = position[:2] - camera[:2]
        horizontal_range = float(np.linalg.norm(away))
        # Straight above or below the camera there is no "away"; a person is never there.
        if offset > 0.0 and horizontal_range > 1e-6:
            direction = away / horizontal_range
            position[:2] += offset * direction
            # d(p + offset·(p - c)/|p - c|)/dp = I + offset/|p - c|·(I - d·dᵀ), on x and y.
            jacobian = np.eye(3)
            jacobian[:2, :2] += (
                offset / horizontal_range * (np.eye(2) - np.outer(direction, direction))
            )
            covariance = jacobian @ covariance @ jacobian.T
        covariance = 0.5 * (covariance + covariance.T)
        return OdomLocation(
            position=_readonly(position),
            covariance=_readonly(covariance),
            ground_position=_readonly(position[:2].copy()),
            ground_covariance=_readonly(covariance[:2, :2].copy()),
            height=float(position[2]),
        )

    # -- steps ------------------------------------------------------------------------------

    def _window_depth(self, depth: np.ndarray, depth_pixel: np.ndarray) -> float:
        """Return the median valid depth around a ``Keypoint2D`` pixel, NaN if there is none."""
        if not np.all(np.isfinite(depth_pixel)):
            return math.nan
        height, width = depth.shape
        # The pixel that contains the point (corner-origin coordinates: floor).
        column, row = math.floor(depth_pixel[0]), math.floor(depth_pixel[1])
        if not (0 <= column < width and 0 <= row < height):
            return math.nan  # outside the depth image (a crop)
        h = self.config.window_half_size_px
        window = depth[max(0, row - h) : row + h + 1, max(0, column - h) : column + h + 1]
        with np.errstate(invalid='ignore'):
            valid = window[
                np.isfinite(window)
                & (window >= self.config.min_depth_m)
                & (window <= self.config.max_depth_m)
            ]
        return float(np.median(valid)) if valid.size else math.nan

    def _covariance(self, point: np.ndarray, camera: PinholeCamera, mad: float) -> np.ndarray:
        cfg = self.config
        z = point[2]
        sensor_sigma = cfg.depth_noise_const_m + cfg.depth_noise_quad_per_m * z * z
        depth_var = sensor_sigma**2 + (_MAD_TO_SIGMA * mad) ** 2
        pixel_var = cfg.pixel_sigma_px**2
        # Columns: d/du, d/dv, d/dZ of P = (Z·(u - cx)/fx, Z·(v - cy)/fy, Z); (u - cx)/fx = X/Z.
        jacobian = np.array(
            [
                [z / camera.fx, 0.0, point[0] / z],
                [0.0, z / camera.fy, point[1] / z],
                [0.0, 0.0, 1.0],
            ]
        )
        covariance = jacobian @ np.diag([pixel_var, pixel_var, depth_var]) @ jacobian.T
        return 0.5 * (covariance + covariance.T)


def _check_keypoints(keypoints: ArrayLike) -> np.ndarray:
    try:
        points = np.array(keypoints, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError('keypoints must be a (17, 3) array of numbers') from None
    if points.shape != (COCO_KEYPOINT_COUNT, 3):
        raise ValueError(
            f'keypoints must be ({COCO_KEYPOINT_COUNT}, 3) [x_px, y_px, score], '
            f'got shape {points.shape}'
        )
    scores = points[:, 2]
    if not np.all(np.isfinite(scores)) or np.any((scores < 0.0) | (scores > 1.0)):
        raise ValueError(f'keypoint scores must be in [0, 1], got {scores.tolist()}')
    bad = np.flatnonzero((scores > 0.0) & ~np.all(np.isfinite(points[:, :2]), axis=1))
    if bad.size:
        raise ValueError(f'keypoints {bad.tolist()} have a score but non-finite coordinates')
    return points


def _check_depth(depth: ArrayLike, camera: PinholeCamera) -> np.ndarray:
    image = np.asarray(depth)
    if image.ndim != 2:
        raise ValueError(f'depth must be a 2-D image, got shape {image.shape}')
    if not np.issubdtype(image.dtype, np.floating):
        # A 16UC1 image is in millimetres: scaling it is the caller's, not a silent guess.
        raise ValueError(f'depth must be float metres, got dtype {image.dtype}')
    if image.shape != (camera.height, camera.width):
        raise ValueError(
            f'depth image is {image.shape[1]}x{image.shape[0]}, its intrinsics say '
            f'{camera.width}x{camera.height}'
        )
    return image
