# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Frame-pair visual odometry with depth for scale, on synthetic frames with ground truth."""

from __future__ import annotations

import numpy as np
import pytest

from accumo_ros.geometry import relative_poses, rotation_angles
from accumo_ros.simulation.sequence import SequenceConfig, SyntheticSequence
from accumo_ros.tasks.visual_odometry import FramePairOdometry, KeyframePolicy


@pytest.fixture(scope='module')
def sequence() -> SyntheticSequence:
    return SyntheticSequence(SequenceConfig(duration_s=3.0, category='low_high'))


def _errors(sequence, odometry, first, stride, depth_scale=1.0):
    a, b = sequence.frame(first), sequence.frame(first + stride)
    result = odometry.estimate(a.rendered.rgb, b.rendered.rgb, a.rendered.depth * depth_scale)
    truth = relative_poses(a.pose[None], b.pose[None])[0]
    error = np.linalg.inv(result.relative_pose) @ truth
    return result, truth, np.linalg.norm(error[:3, 3]), np.degrees(rotation_angles(error[:3, :3]))


@pytest.mark.parametrize('stride', [4, 12])
def test_relative_pose_matches_ground_truth(sequence, stride):
    odometry = FramePairOdometry(sequence.config.intrinsics)
    translation_errors, rotation_errors = [], []
    for first in range(0, 150, 30):
        result, truth, translation_error, rotation_error = _errors(
            sequence, odometry, first, stride
        )
        assert result.ok, result.reason
        assert result.inliers >= 25
        translation_errors.append(translation_error)
        rotation_errors.append(rotation_error)
    assert np.median(translation_errors) < 0.04  # metres, over 0.1-0.3 m of motion
    assert np.median(rotation_errors) < 0.3  # degrees


def test_scale_comes_from_the_depth_map(sequence):
    odometry = FramePairOdometry(sequence.config.intrinsics)
    result, truth, _, _ = _errors(sequence, odometry, 30, 12, depth_scale=1.2)
    assert result.ok
    ratio = np.linalg.norm(result.relative_pose[:3, 3]) / np.linalg.norm(truth[:3, 3])
    assert ratio == pytest.approx(1.2, abs=0.06)


def test_covariance_is_positive_definite_and_grows_with_worse_data(sequence):
    odometry = FramePairOdometry(sequence.config.intrinsics)
    result, _, _, _ = _errors(sequence, odometry, 30, 4)
    assert np.all(np.linalg.eigvalsh(result.covariance) > 0)
    # Sensor noise on the second frame: keypoints land less precisely.
    frame_a, frame_b = sequence.frame(30), sequence.frame(34)
    noise = np.random.default_rng(0).normal(0.0, 12.0, frame_b.rendered.rgb.shape)
    noisy = np.clip(frame_b.rendered.rgb + noise, 0, 255).astype(np.uint8)
    worse = odometry.estimate(frame_a.rendered.rgb, noisy, frame_a.rendered.depth)
    assert worse.ok
    assert np.trace(worse.covariance) > np.trace(result.covariance)


def test_blank_frames_fail_cleanly_and_bad_shapes_are_refused(sequence):
    odometry = FramePairOdometry(sequence.config.intrinsics)
    blank = np.zeros_like(sequence.frame(0).rendered.rgb)
    depth = sequence.frame(0).rendered.depth
    result = odometry.estimate(blank, blank, depth)
    assert not result.ok
    assert 'features' in result.reason
    with pytest.raises(ValueError, match='differ'):
        odometry.estimate(blank, blank[:, :-1], depth)


def test_keyframe_moves_on_when_old_or_poorly_matched():
    policy = KeyframePolicy(max_frames=40, min_inliers=80)
    assert policy.keep(100, 139, 80)
    assert not policy.keep(100, 140, 500)  # old enough
    assert not policy.keep(100, 110, 79)  # the views drift apart
    assert not KeyframePolicy(max_frames=0).keep(100, 101, 1000)  # frame to frame
    with pytest.raises(ValueError, match='max_frames'):
        KeyframePolicy(max_frames=-1)
