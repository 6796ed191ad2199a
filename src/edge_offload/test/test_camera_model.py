# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The one pinhole model: CameraInfo and Keypoint2D conventions half a pixel apart."""

from __future__ import annotations

import numpy as np
import pytest
from sensor_msgs.msg import CameraInfo

from edge_offload.camera_model import PinholeCamera

CAMERA = PinholeCamera(fx=500.0, fy=400.0, cx=319.5, cy=239.5, width=640, height=480)


def test_keypoint_pixels_are_camera_info_pixels_plus_half_a_pixel():
    points = np.array([[0.0, 0.0, 2.0], [0.4, -0.3, 4.0], [1.0, 1.0, -1.0]])
    centres, z = CAMERA.project(points)
    np.testing.assert_allclose(centres[0], [319.5, 239.5])
    np.testing.assert_allclose(z, points[:, 2])
    assert np.isnan(centres[2]).all()  # behind the camera
    np.testing.assert_allclose(CAMERA.pixel(points[:2]), centres[:2] + 0.5)
    # ray() inverts pixel() up to the depth.
    rays = CAMERA.ray(CAMERA.pixel(points[:2]))
    np.testing.assert_allclose(rays * points[:2, 2:], points[:2])
    assert CAMERA.contains([[0.0, 0.0], [640.0, 480.0]]).all()
    assert not CAMERA.contains([[-0.1, 10.0]]).any()


def test_back_projection_goes_through_every_pixel_centre():
    depth = np.full((480, 640), 3.0)
    points = CAMERA.back_project(depth)
    centres, _ = CAMERA.project(points)
    u, v = np.meshgrid(np.arange(640), np.arange(480))
    np.testing.assert_allclose(centres[..., 0], u, atol=1e-9)
    np.testing.assert_allclose(centres[..., 1], v, atol=1e-9)
    assert CAMERA.pixel_rays(stride=4).shape == (120, 160, 3)
    with pytest.raises(ValueError, match='the camera'):
        CAMERA.back_project(np.ones((48, 64)))


def test_scaling_keeps_the_image_corners_and_the_field_of_view():
    half = CAMERA.scaled(320, 240)
    # The corner of the image stays the corner: pixel -0.5 maps to -0.5.
    assert (half.cx + 0.5) * 2 == pytest.approx(CAMERA.cx + 0.5)
    assert half.fx == pytest.approx(250.0)
    wide = PinholeCamera.from_fov(640, 480, 90.0)
    assert wide.fx == pytest.approx(320.0)
    assert (wide.cx, wide.cy) == (319.5, 239.5)


def test_camera_info_is_read_and_bad_matrices_are_refused():
    info = CameraInfo(width=640, height=480, k=[500.0, 0, 319.5, 0, 400.0, 239.5, 0, 0, 1])
    assert PinholeCamera.from_camera_info(info) == CAMERA
    np.testing.assert_array_equal(CAMERA.matrix, np.reshape(info.k, (3, 3)))
    with pytest.raises(ValueError, match='uncalibrated'):
        PinholeCamera.from_camera_info(CameraInfo(width=640, height=480))
    with pytest.raises(ValueError, match='skew'):
        PinholeCamera.from_k([500.0, 1.0, 319.5, 0, 400.0, 239.5, 0, 0, 1], 640, 480)
    with pytest.raises(ValueError, match='fy must be positive'):
        PinholeCamera(fx=1.0, fy=-1.0, cx=0.0, cy=0.0, width=1, height=1)
    with pytest.raises(ValueError, match='width'):
        PinholeCamera(fx=1.0, fy=1.0, cx=0.0, cy=0.0, width=0, height=1)


def test_pixels_at_depths_back_project_to_the_points_that_project_there():
    points = np.array([[0.3, -0.2, 2.0], [-1.0, 0.5, 5.0]])
    centres, z = CAMERA.project(points)
    np.testing.assert_allclose(CAMERA.back_project_pixels(centres, z), points)
