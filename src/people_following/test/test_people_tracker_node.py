# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The people_tracker node's message conversions.

The node's behaviour is tested over DDS in test/test_follow_closed_loop_system.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from nav_msgs.msg import Odometry
from scipy.spatial.transform import Rotation
from std_msgs.msg import Header
from visualization_msgs.msg import Marker

from edge_offload.image_convert import ImageFormatError, cv2_to_imgmsg
from offload_interfaces.msg import Keypoint2D, Person
from people_following.follow_simulation import CAMERA_POSITION_M, CAMERA_RPY_RAD, T_BASE_OPTICAL
from people_following.people_tracker_node import (
    PoseBuffer,
    StampedBuffer,
    depth_in_metres,
    person_keypoints,
    t_base_optical,
    t_odom_base,
    track_markers,
)
from people_following.person_tracker import Track


def test_camera_mounting_parameters_give_the_simulated_camera_pose():
    # The simulation builds its camera pose by hand; the parameters must say the same.
    transform = t_base_optical(list(CAMERA_POSITION_M), list(CAMERA_RPY_RAD))
    np.testing.assert_allclose(transform, T_BASE_OPTICAL, atol=1e-12)
    # Level camera: the optical z axis is the base's x axis (forward).
    level = t_base_optical([0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    np.testing.assert_allclose(level[:3, 2], [1.0, 0.0, 0.0], atol=1e-12)
    with pytest.raises(ValueError, match='3 values'):
        t_base_optical([0.0, 0.0], [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match='finite'):
        t_base_optical([0.0, math.nan, 0.0], [0.0, 0.0, 0.0])


def test_odometry_pose_becomes_a_transform_and_bad_poses_are_refused():
    odometry = Odometry()
    odometry.pose.pose.position.x = 2.0
    odometry.pose.pose.orientation.z = math.sin(math.pi / 4)
    odometry.pose.pose.orientation.w = math.cos(math.pi / 4)  # 90° left
    transform = t_odom_base(odometry)
    np.testing.assert_allclose(transform[:3, 3], [2.0, 0.0, 0.0])
    np.testing.assert_allclose(transform[:3, 0], [0.0, 1.0, 0.0], atol=1e-12)
    odometry.pose.pose.orientation.w = odometry.pose.pose.orientation.z = 0.0
    with pytest.raises(ValueError, match='zero quaternion'):
        t_odom_base(odometry)
    odometry.pose.pose.orientation.w = 1.0
    odometry.pose.pose.position.y = math.inf
    with pytest.raises(ValueError, match='not finite'):
        t_odom_base(odometry)


def test_keypoints_by_id_and_absent_ones_zero():
    person = Person(
        keypoints=[
            Keypoint2D(id=Keypoint2D.LEFT_HIP, x_px=10.0, y_px=20.0, score=0.8),
            Keypoint2D(id=Keypoint2D.NOSE, x_px=1.0, y_px=2.0, score=0.5),
        ]
    )
    keypoints = person_keypoints(person)
    assert keypoints.shape == (17, 3)
    np.testing.assert_allclose(keypoints[Keypoint2D.LEFT_HIP], [10.0, 20.0, 0.8], rtol=1e-6)
    np.testing.assert_allclose(keypoints[Keypoint2D.NOSE], [1.0, 2.0, 0.5])
    assert np.count_nonzero(keypoints[:, 2]) == 2
    with pytest.raises(ValueError, match='not a COCO keypoint'):
        person_keypoints(Person(keypoints=[Keypoint2D(id=17)]))


def test_depth_encodings():
    metres = np.array([[1.5, 0.0]], dtype=np.float32)
    np.testing.assert_array_equal(depth_in_metres(cv2_to_imgmsg(metres, '32FC1')), metres)
    millimetres = np.array([[1500, 0]], dtype=np.uint16)
    np.testing.assert_allclose(depth_in_metres(cv2_to_imgmsg(millimetres, '16UC1')), metres)
    with pytest.raises(ImageFormatError, match='32FC1'):
        depth_in_metres(cv2_to_imgmsg(np.zeros((2, 2, 3), np.uint8), 'rgb8'))


def test_stamped_buffer_finds_the_nearest_within_tolerance_and_is_bounded():
    buffer = StampedBuffer(3)
    assert buffer.latest_stamp is None
    assert buffer.nearest(1.0, 1.0) is None
    for stamp in (1.0, 1.1, 1.2, 1.3):
        buffer.add(stamp, f'at {stamp}')
    assert buffer.latest_stamp == 1.3
    assert buffer.nearest(1.19, 0.02) == 'at 1.2'
    assert buffer.nearest(1.25, 0.02) is None
    assert buffer.nearest(1.0, 0.02) is None  # the oldest went first
    # The stream has moved past a stamp once an item newer than stamp + tolerance is here.
    assert buffer.passed(1.25, 0.02)
    assert not buffer.passed(1.29, 0.02)
    buffer.add(1.0, 'late')  # back in time: ignored, the stream order is kept
    assert buffer.latest_stamp == 1.3
    assert buffer.nearest(1.0, 0.02) is None


def _pose(x: float, yaw: float) -> np.ndarray:
    pose = np.eye(4)
    pose[:3, :3] = Rotation.from_euler('z', yaw).as_matrix()
    pose[0, 3] = x
    return pose


def test_poses_are_the_nearest_or_interpolated_between_close_neighbours():
    buffer = PoseBuffer(10)
    buffer.add(1.0, _pose(0.0, 0.0))
    buffer.add(1.1, _pose(1.0, 0.2))
    buffer.add(2.0, _pose(5.0, 0.0))
    np.testing.assert_array_equal(buffer.at(1.005, 0.01, 0.25), _pose(0.0, 0.0))
    middle = buffer.at(1.075, 0.01, 0.25)  # three quarters of the way
    np.testing.assert_allclose(middle, _pose(0.75, 0.15), atol=1e-12)
    assert buffer.at(1.5, 0.01, 0.25) is None  # neighbours 0.9 s apart: too far to trust
    assert buffer.at(2.5, 0.01, 0.25) is None  # nothing after it
    assert buffer.at(0.5, 0.01, 0.25) is None  # nothing before it


def _track(track_id: int, x: float) -> Track:
    return Track(
        track_id=track_id,
        position=np.array([x, 0.0]),
        velocity=np.array([0.3, 0.4]),
        position_covariance=np.eye(2),
        velocity_covariance=np.eye(2),
        confirmed=True,
        hits=3,
        time_since_update_s=0.0,
        z=1.2,
    )


def test_markers_clear_old_tracks_and_mark_the_target():
    markers = track_markers([_track(4, 2.0), _track(7, 3.0)], 7, Header(frame_id='odom'), 0.5)
    first, *rest = markers.markers
    assert first.action == Marker.DELETEALL
    assert [m.id for m in rest] == [8, 9, 14, 15]
    labels = [m.text for m in rest if m.type == Marker.TEXT_VIEW_FACING]
    assert labels == ['#4 0.5 m/s', 'target #7 0.5 m/s']
    bodies = [m for m in rest if m.type == Marker.CYLINDER]
    assert bodies[1].color.g > bodies[1].color.b  # the target is green
    assert bodies[0].pose.position.x == 2.0
    assert all(m.header.frame_id == 'odom' for m in rest)
