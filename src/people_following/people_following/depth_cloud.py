# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""A depth map as ``sensor_msgs/PointCloud2`` for RViz (x, y, z float32 in the optical frame).

Pixel ``(row v, column u)`` with depth ``Z`` back-projects to ``X = (u - cx) Z / fx``,
``Y = (v - cy) Z / fy`` with ``K``'s ``cx``, ``cy`` in the CameraInfo convention (the
centre of the top-left pixel is 0). Invalid depths (0, NaN, inf, outside the range) are
left out, so the cloud is dense. ``stride`` keeps every n-th row and column: a 416x128 map
at stride 2 is 13 k points, enough to see the scene in RViz at a fraction of the bytes.

The message is the layout ``sensor_msgs_py.point_cloud2.create_cloud_xyz32`` builds (three
FLOAT32 fields at offsets 0, 4, 8, ``point_step`` 12, one row); it is built with numpy here
because the PyPI ROS wheels ship no ``sensor_msgs_py``, and the tests check the two agree
where it is installed.
"""

from __future__ import annotations

import numpy as np
from sensor_msgs.msg import PointCloud2, PointField
from std_msgs.msg import Header

from edge_offload.camera_model import PinholeCamera

XYZ_FIELDS = (
    PointField(name='x', offset=0, datatype=PointField.FLOAT32, count=1),
    PointField(name='y', offset=4, datatype=PointField.FLOAT32, count=1),
    PointField(name='z', offset=8, datatype=PointField.FLOAT32, count=1),
)
POINT_STEP = 12


def depth_to_points(
    depth: np.ndarray,
    camera: PinholeCamera,
    *,
    stride: int = 1,
    min_depth_m: float = 0.0,
    max_depth_m: float = np.inf,
) -> np.ndarray:
    """Return the (N, 3) float32 points of the valid pixels of ``depth`` (m, optical frame).

    ``camera`` is the depth image's; every ``stride``-th row and column is used.
    """
    depth = np.asarray(depth)
    if depth.ndim != 2:
        raise ValueError(f'depth must be a 2-D image, got shape {depth.shape}')
    if depth.shape != (camera.height, camera.width):
        raise ValueError(
            f'depth is {depth.shape[1]}x{depth.shape[0]}, '
            f'its camera {camera.width}x{camera.height}'
        )
    rays = camera.pixel_rays(stride)
    z = depth[::stride, ::stride].astype(np.float64)
    valid = np.isfinite(z) & (z > 0.0) & (z >= min_depth_m) & (z <= max_depth_m)
    return (rays[valid] * z[valid, None]).astype(np.float32)


def points_to_cloud(points: np.ndarray, header: Header) -> PointCloud2:
    """Return ``points`` (N, 3) as an unorganised, dense xyz32 ``PointCloud2``."""
    points = np.ascontiguousarray(points, dtype=np.float32)
    if points.ndim != 2 or points.shape[1] != 3:
        raise ValueError(f'points must be (N, 3), got shape {points.shape}')
    return PointCloud2(
        header=header,
        height=1,
        width=points.shape[0],
        fields=list(XYZ_FIELDS),
        is_bigendian=False,
        point_step=POINT_STEP,
        row_step=POINT_STEP * points.shape[0],
        data=points.tobytes(),
        is_dense=True,
    )
