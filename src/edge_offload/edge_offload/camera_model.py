# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The workspace's one pinhole camera model (``sensor_msgs/CameraInfo``, no distortion).

Pixel conventions
-----------------
``sensor_msgs/CameraInfo`` (and OpenCV, and ``image_geometry``) put the *centre* of the
top-left pixel at ``u = 0``: ``u = fx·X/Z + cx``. :meth:`PinholeCamera.project`,
:meth:`PinholeCamera.back_project` and :meth:`PinholeCamera.pixel_rays` speak that one.
``offload_interfaces/Keypoint2D`` (a model's keypoints and boxes) puts the *corner* of the
top-left pixel at 0, so a pixel's centre is at ``(c + 0.5, r + 0.5)``;
:meth:`PinholeCamera.pixel` and :meth:`PinholeCamera.ray` speak that one and apply the half
pixel. Nothing else in the workspace converts between the two.

Plain numpy, no ROS: algorithms, nodes and the AccuMO data share it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from edge_offload.value_checks import check_int, check_real


@dataclass(frozen=True)
class PinholeCamera:
    """A distortion-free pinhole camera: ``fx``, ``fy``, ``cx``, ``cy`` in pixels, image size.

    Checked on construction: ``ValueError`` names what is wrong.
    """

    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int

    def __post_init__(self) -> None:
        for name in ('fx', 'fy'):
            value = check_real(name, getattr(self, name))
            if value <= 0.0:
                raise ValueError(
                    f'{name} must be positive, got {value!r} (an all-zero K is an '
                    'uncalibrated camera)'
                )
            object.__setattr__(self, name, value)
        for name in ('cx', 'cy'):
            object.__setattr__(self, name, check_real(name, getattr(self, name)))
        for name in ('width', 'height'):
            object.__setattr__(self, name, check_int(f'image {name}', getattr(self, name), 1))

    # -- construction --------------------------------------------------------------------

    @classmethod
    def from_k(cls, k: ArrayLike, width: int, height: int) -> PinholeCamera:
        """Read a ``CameraInfo`` K (3×3, or its 9 values row-major) and the image size.

        K must be a pinhole matrix ``[[fx, 0, cx], [0, fy, cy], [0, 0, 1]]``: a skew, or
        another last row, is refused rather than ignored.
        """
        matrix = np.array(k, dtype=np.float64)
        if matrix.shape == (9,):
            matrix = matrix.reshape(3, 3)
        if matrix.shape != (3, 3):
            raise ValueError(f'K must be 3x3 or 9 values, got shape {np.shape(k)}')
        if not np.all(np.isfinite(matrix)):
            raise ValueError(f'K must be finite, got {matrix.tolist()}')
        if not matrix.any():
            raise ValueError('K is all zeros: the camera is uncalibrated')
        if not np.array_equal(matrix[2], [0.0, 0.0, 1.0]):
            raise ValueError(f'K must end with the row [0, 0, 1], got {matrix[2].tolist()}')
        if matrix[0, 1] != 0.0 or matrix[1, 0] != 0.0:
            raise ValueError(f'K must have no skew (K[0][1] = K[1][0] = 0), got {matrix.tolist()}')
        return cls(
            fx=float(matrix[0, 0]),
            fy=float(matrix[1, 1]),
            cx=float(matrix[0, 2]),
            cy=float(matrix[1, 2]),
            width=width,
            height=height,
        )

    @classmethod
    def from_camera_info(cls, info: Any) -> PinholeCamera:
        """Read a ``sensor_msgs/CameraInfo`` (rclpy's or rosbags'); ValueError if unusable."""
        return cls.from_k(info.k, int(info.width), int(info.height))

    @classmethod
    def from_fov(cls, width: int, height: int, horizontal_fov_deg: float) -> PinholeCamera:
        """Square pixels, principal point at the image centre, the given horizontal FOV."""
        focal = 0.5 * width / math.tan(math.radians(horizontal_fov_deg) / 2.0)
        return cls(focal, focal, (width - 1) / 2.0, (height - 1) / 2.0, width, height)

    @property
    def matrix(self) -> np.ndarray:
        """Return K, the 3×3 camera matrix (CameraInfo convention)."""
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])

    def scaled(self, width: int, height: int) -> PinholeCamera:
        """Return the same camera resampled to ``width``×``height`` (pixel centres kept)."""
        sx, sy = width / self.width, height / self.height
        return PinholeCamera(
            self.fx * sx,
            self.fy * sy,
            (self.cx + 0.5) * sx - 0.5,
            (self.cy + 0.5) * sy - 0.5,
            width,
            height,
        )

    # -- CameraInfo convention (pixel centres at integers) -------------------------------

    def project(self, points: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Return pixel coordinates (..., 2) and z (...) of optical-frame points (..., 3).

        Points with z <= 0 get NaN pixel coordinates.
        """
        points = np.asarray(points, dtype=np.float64)
        z = points[..., 2]
        with np.errstate(divide='ignore', invalid='ignore'):
            u = np.where(z > 0, self.fx * points[..., 0] / z + self.cx, np.nan)
            v = np.where(z > 0, self.fy * points[..., 1] / z + self.cy, np.nan)
        return np.stack([u, v], axis=-1), z

    def back_project_pixels(self, pixels: ArrayLike, depth: ArrayLike) -> np.ndarray:
        """Return the points (..., 3) of pixels (..., 2) at metric z-depths (...)."""
        pixels = np.asarray(pixels, dtype=np.float64)
        depth = np.asarray(depth, dtype=np.float64)
        return np.stack(
            [
                (pixels[..., 0] - self.cx) / self.fx * depth,
                (pixels[..., 1] - self.cy) / self.fy * depth,
                depth,
            ],
            axis=-1,
        )

    def pixel_rays(self, stride: int = 1) -> np.ndarray:
        """Return rays (H', W', 3) with z = 1 through every ``stride``-th pixel centre."""
        if stride < 1:
            raise ValueError(f'stride must be at least 1, got {stride}')
        u, v = np.meshgrid(np.arange(0, self.width, stride), np.arange(0, self.height, stride))
        return np.stack(
            [(u - self.cx) / self.fx, (v - self.cy) / self.fy, np.ones(u.shape)], axis=-1
        )

    def back_project(self, depth: np.ndarray) -> np.ndarray:
        """Return points (H, W, 3) in the optical frame from a metric z-depth map (H, W)."""
        if depth.shape != (self.height, self.width):
            raise ValueError(
                f'depth is {depth.shape[::-1]} (width, height), the camera '
                f'{(self.width, self.height)}'
            )
        return self.pixel_rays() * depth[..., None]

    # -- Keypoint2D convention (pixel corners at integers) -------------------------------

    def pixel(self, points: ArrayLike) -> np.ndarray:
        """Return the ``Keypoint2D`` pixel coordinates (..., 2) of optical-frame points (..., 3).

        Points at or behind the camera (``Z <= 0``) get NaN.
        """
        centres, _ = self.project(points)
        return centres + 0.5

    def ray(self, pixels: ArrayLike) -> np.ndarray:
        """Return the viewing rays (..., 3), scaled to ``Z = 1``, of ``Keypoint2D`` pixels."""
        pixels = np.asarray(pixels, dtype=np.float64)
        u = pixels[..., 0] - 0.5
        v = pixels[..., 1] - 0.5
        return np.stack([(u - self.cx) / self.fx, (v - self.cy) / self.fy, np.ones(u.shape)], -1)

    def contains(self, pixels: ArrayLike) -> np.ndarray:
        """Whether ``Keypoint2D`` pixels (..., 2) lie in the image (its border included)."""
        pixels = np.asarray(pixels, dtype=np.float64)
        x, y = pixels[..., 0], pixels[..., 1]
        return (x >= 0.0) & (x <= self.width) & (y >= 0.0) & (y <= self.height)
