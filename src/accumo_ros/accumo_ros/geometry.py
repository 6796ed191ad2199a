# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Frames, poses and the pinhole camera shared by the AccuMO data, trackers and metrics.

Conventions (REP 103 / REP 105):

* **world**: x, y horizontal, z up; gravity is ``(0, 0, -9.81)`` m/s².
* **body** (``base_link``, also the IMU frame): x forward, y left, z up (FLU).
* **optical** (``camera_optical_frame``): x right, y down, z forward. The camera sits at the
  body origin, so the two differ only by :data:`R_BODY_OPTICAL`.
* A pose is a 4×4 homogeneous matrix ``T_a_b`` that maps points in frame b to frame a;
  arrays of poses have shape (N, 4, 4).
* Depth is metric z in the optical frame (not range along the ray), as in ``sensor_msgs``
  depth images.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation

GRAVITY_WORLD = np.array([0.0, 0.0, -9.81])
# Columns: the optical x (right), y (down) and z (forward) axes written in the body frame.
R_BODY_OPTICAL = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
T_BODY_OPTICAL = np.eye(4)
T_BODY_OPTICAL[:3, :3] = R_BODY_OPTICAL


def make_poses(rotations: np.ndarray, translations: np.ndarray) -> np.ndarray:
    """Stack rotations (..., 3, 3) and translations (..., 3) into poses (..., 4, 4)."""
    rotations = np.asarray(rotations, dtype=np.float64)
    translations = np.asarray(translations, dtype=np.float64)
    poses = np.zeros(rotations.shape[:-2] + (4, 4))
    poses[..., :3, :3] = rotations
    poses[..., :3, 3] = translations
    poses[..., 3, 3] = 1.0
    return poses


def invert_poses(poses: np.ndarray) -> np.ndarray:
    """Invert rigid poses (..., 4, 4) exactly (transpose the rotation)."""
    rotations = np.swapaxes(poses[..., :3, :3], -1, -2)
    translations = -np.einsum('...ij,...j->...i', rotations, poses[..., :3, 3])
    return make_poses(rotations, translations)


def relative_poses(poses_from: np.ndarray, poses_to: np.ndarray) -> np.ndarray:
    """Return ``inv(T_from) @ T_to``: the pose of each ``to`` frame in its ``from`` frame."""
    return invert_poses(poses_from) @ poses_to


def rotation_angles(rotations: np.ndarray) -> np.ndarray:
    """Rotation angle in radians of each rotation matrix (..., 3, 3), in [0, pi].

    atan2 of sine and cosine stays accurate near 0 and pi, where arccos of the trace loses
    half the digits.
    """
    cosine = 0.5 * (np.trace(rotations, axis1=-2, axis2=-1) - 1.0)
    skew = rotations - np.swapaxes(rotations, -1, -2)
    sine = 0.5 * np.linalg.norm(
        np.stack([skew[..., 2, 1], skew[..., 0, 2], skew[..., 1, 0]], axis=-1), axis=-1
    )
    return np.arctan2(sine, cosine)


def euler_zyx_matrices(yaw: np.ndarray, pitch: np.ndarray, roll: np.ndarray) -> np.ndarray:
    """Body-to-world rotations R = Rz(yaw) Ry(pitch) Rx(roll), shape (N, 3, 3)."""
    angles = np.stack(np.broadcast_arrays(yaw, pitch, roll), axis=-1).reshape(-1, 3)
    return Rotation.from_euler('ZYX', angles).as_matrix()


def euler_zyx_rates_to_body(
    pitch: np.ndarray,
    roll: np.ndarray,
    yaw_rate: np.ndarray,
    pitch_rate: np.ndarray,
    roll_rate: np.ndarray,
) -> np.ndarray:
    """Body angular velocity (N, 3) in rad/s from Z-Y-X Euler angle rates."""
    sin_p, cos_p = np.sin(pitch), np.cos(pitch)
    sin_r, cos_r = np.sin(roll), np.cos(roll)
    return np.stack(
        [
            roll_rate - yaw_rate * sin_p,
            pitch_rate * cos_r + yaw_rate * cos_p * sin_r,
            -pitch_rate * sin_r + yaw_rate * cos_p * cos_r,
        ],
        axis=-1,
    )


def quaternions_xyzw(rotations: np.ndarray) -> np.ndarray:
    """Quaternions (N, 4) in ROS order (x, y, z, w) of rotation matrices (N, 3, 3)."""
    return Rotation.from_matrix(rotations).as_quat()


def rotations_from_xyzw(quaternions: np.ndarray) -> np.ndarray:
    """Rotation matrices (N, 3, 3) of quaternions (N, 4) in ROS order (x, y, z, w)."""
    return Rotation.from_quat(quaternions).as_matrix()


def transform_points(pose: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Apply one pose (4, 4) to points (..., 3)."""
    return points @ pose[:3, :3].T + pose[:3, 3]
