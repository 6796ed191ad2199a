# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Depth maps become xyz32 point clouds in the optical frame."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from std_msgs.msg import Header

from edge_offload.camera_model import PinholeCamera
from people_following.depth_cloud import depth_to_points, points_to_cloud

CAMERA = PinholeCamera(fx=100.0, fy=50.0, cx=3.5, cy=1.5, width=8, height=4)


def test_a_plane_at_two_metres_back_projects_through_the_camera_matrix():
    depth = np.full((4, 8), 2.0, dtype=np.float32)
    points = depth_to_points(depth, CAMERA)
    assert points.shape == (32, 3)
    assert points.dtype == np.float32
    np.testing.assert_allclose(points[:, 2], 2.0)
    # Row-major: pixel (v=0, u=0) first, then (0, 1)...; X = (u - cx) Z / fx.
    np.testing.assert_allclose(points[0], [(0 - 3.5) * 2 / 100, (0 - 1.5) * 2 / 50, 2.0])
    np.testing.assert_allclose(points[9], [(1 - 3.5) * 2 / 100, (1 - 1.5) * 2 / 50, 2.0])


def test_invalid_and_out_of_range_depths_are_left_out_and_stride_thins():
    depth = np.full((4, 8), 3.0, dtype=np.float32)
    depth[0, 0], depth[1, 1], depth[2, 2], depth[3, 3] = 0.0, np.nan, np.inf, 20.0
    assert len(depth_to_points(depth, CAMERA)) == 29  # 20 m is valid without a range
    assert len(depth_to_points(depth, CAMERA, max_depth_m=10.0)) == 28
    # Stride 2 keeps rows 0, 2 and columns 0, 2, 4, 6: 8 pixels, two of them invalid.
    assert len(depth_to_points(depth, CAMERA, stride=2)) == 6


def test_the_cloud_message_has_the_xyz32_layout_and_the_points():
    points = depth_to_points(np.full((4, 8), 1.5, dtype=np.float32), CAMERA)
    cloud = points_to_cloud(points, Header(frame_id='camera_optical_frame'))
    assert [f.name for f in cloud.fields] == ['x', 'y', 'z']
    assert [f.offset for f in cloud.fields] == [0, 4, 8]
    assert (cloud.height, cloud.width, cloud.point_step, cloud.row_step) == (1, 32, 12, 384)
    assert cloud.is_dense
    assert cloud.header.frame_id == 'camera_optical_frame'
    decoded = np.frombuffer(bytes(cloud.data), dtype=np.float32).reshape(-1, 3)
    np.testing.assert_array_equal(decoded, points)
    if importlib.util.find_spec('sensor_msgs_py') is not None:
        # Where ROS's own builder is installed, the same message.
        from sensor_msgs_py.point_cloud2 import create_cloud_xyz32

        reference = create_cloud_xyz32(cloud.header, points.tolist())
        assert bytes(reference.data) == bytes(cloud.data)
        assert reference.point_step == cloud.point_step


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match='2-D'):
        depth_to_points(np.zeros((2, 2, 1)), CAMERA)
    with pytest.raises(ValueError, match='its camera 8x4'):
        depth_to_points(np.zeros((2, 2)), CAMERA)
    with pytest.raises(ValueError, match='stride'):
        depth_to_points(np.zeros((4, 8)), CAMERA, stride=0)
    with pytest.raises(ValueError, match='points must be'):
        points_to_cloud(np.zeros((3, 2)), Header())
