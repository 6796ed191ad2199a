# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Frame-pair visual odometry with depth for scale, on synthetic frames with ground truth."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from accumo_ros.geometry import T_BODY_OPTICAL, relative_poses, rotation_angles
from accumo_ros.simulation.sequence import SequenceConfig, SyntheticSequence
from accumo_ros.tasks.visual_odometry import (
    FramePairOdometry,
    KeyframePolicy,
    VoConfig,
    VoResult,
    translation_ransac,
)


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


def test_keyframe_moves_on_after_a_turn_that_follows_a_weak_pair_unless_disabled():
    policy = KeyframePolicy(min_inliers=80, max_rotation_rad=0.5)
    assert not policy.weak_pair(fused=True, inliers=80)
    assert policy.weak_pair(fused=True, inliers=79)  # the views drift apart
    assert policy.weak_pair(fused=False, inliers=500)  # failed or refused by the filter
    assert not policy.turned_too_far(0.5, after_weak_pair=True)
    assert policy.turned_too_far(0.51, after_weak_pair=True)
    assert not policy.turned_too_far(3.0, after_weak_pair=False)  # long pairs mostly match
    assert not policy.turned_too_far(None, after_weak_pair=True)  # no keyframe yet
    assert not KeyframePolicy(max_rotation_rad=0.0).turned_too_far(3.0, after_weak_pair=True)
    with pytest.raises(ValueError, match='max_rotation_rad'):
        KeyframePolicy(max_rotation_rad=-0.1)


def _yaw(angle_rad: float) -> np.ndarray:
    """Return a turn about the optical frame's y axis (down): the robot's yaw."""
    c, s = np.cos(angle_rad), np.sin(angle_rad)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def _scene(rng, count, rotation, translation, camera, depth_m=(2.0, 12.0)):
    """Points in front of camera 1 and their exact pixels in camera 2 (X_2 = R X_1 + t)."""
    points = np.column_stack(
        [rng.uniform(-3, 3, count), rng.uniform(-2, 2, count), rng.uniform(*depth_m, count)]
    )
    moved = points @ rotation.T + translation
    pixels = np.column_stack(
        [
            camera.fx * moved[:, 0] / moved[:, 2] + camera.cx,
            camera.fy * moved[:, 1] / moved[:, 2] + camera.cy,
        ]
    )
    return points, pixels


def test_translation_ransac_keeps_the_static_majority(sequence):
    camera = sequence.config.intrinsics
    rng = np.random.default_rng(1)
    rotation = _yaw(np.radians(2.0))
    static_t = np.array([0.05, 0.0, 0.3])
    static, static_pixels = _scene(rng, 120, rotation, static_t, camera)
    # A box moving on its own: the same camera rotation, another translation.
    box, box_pixels = _scene(rng, 80, rotation, static_t + [0.4, 0.0, -0.2], camera)
    points = np.vstack([static, box])
    pixels = np.vstack([static_pixels, box_pixels]) + rng.normal(0.0, 0.3, (200, 2))
    translation, inliers = translation_ransac(
        points, pixels, camera, rotation, iterations=200, threshold_px=2.0, rng=rng
    )
    np.testing.assert_allclose(translation, static_t, atol=0.01)
    assert set(inliers.tolist()) == set(range(120))


def test_the_rotation_prior_refuses_a_larger_set_that_turns_the_wrong_way(sequence):
    camera = sequence.config.intrinsics
    odometry = FramePairOdometry(camera)
    rng = np.random.default_rng(2)
    rotation = _yaw(np.radians(1.0))
    static_t = np.array([0.0, 0.0, 0.25])
    static, static_pixels = _scene(rng, 90, rotation, static_t, camera)
    # The larger set moves rigidly with 5 degrees more yaw: PnP alone takes it.
    wrong = _yaw(np.radians(6.0))
    box, box_pixels = _scene(rng, 150, wrong, static_t, camera)
    points, pixels = np.vstack([static, box]), np.vstack([static_pixels, box_pixels])

    def yaw_error(solved):
        rvec, tvec, inliers = solved
        estimated = cv2.Rodrigues(rvec)[0]
        return np.degrees(rotation_angles((estimated @ rotation.T)[None])[0]), inliers

    unguided, _ = yaw_error(odometry._solve_pnp(points, pixels, 240))  # noqa: SLF001
    assert unguided > 4.0
    # The prior is R_body1_body2; the optical rotation above is its conjugate.
    body_to_optical = T_BODY_OPTICAL[:3, :3]
    prior = (body_to_optical @ rotation @ body_to_optical.T).T
    sets = odometry._solve_with_prior(points, pixels, 240, prior)  # noqa: SLF001
    # The wrong-turning set is no alternative either: its turn breaks the prior.
    assert len(sets) == 1
    guided, inliers = yaw_error(sets[0])
    assert guided < 0.05
    assert set(inliers.tolist()) == set(range(90))


def test_with_the_true_rotation_as_prior_the_pose_is_as_good(sequence):
    odometry = FramePairOdometry(sequence.config.intrinsics)
    errors = []
    for first in range(0, 150, 30):
        a, b = sequence.frame(first), sequence.frame(first + 12)
        truth = relative_poses(a.pose[None], b.pose[None])[0]
        result = odometry.estimate(
            a.rendered.rgb, b.rendered.rgb, a.rendered.depth, rotation_prior=truth[:3, :3]
        )
        assert result.ok, result.reason
        error = np.linalg.inv(result.relative_pose) @ truth
        errors.append(np.linalg.norm(error[:3, 3]))
    assert np.median(errors) < 0.04


def test_a_prior_the_images_contradict_fails_the_pair(sequence):
    odometry = FramePairOdometry(sequence.config.intrinsics)
    a, b = sequence.frame(30), sequence.frame(42)
    truth = relative_poses(a.pose[None], b.pose[None])[0]
    wrong = truth[:3, :3] @ _yaw(np.radians(8.0))
    result = odometry.estimate(a.rendered.rgb, b.rendered.rgb, a.rendered.depth, wrong)
    assert not result.ok
    assert 'IMU rotation' in result.reason


def test_with_a_prior_the_room_behind_a_larger_moving_box_comes_back_as_an_alternative(sequence):
    camera = sequence.config.intrinsics
    odometry = FramePairOdometry(camera, VoConfig(prior_alternatives=2))
    rng = np.random.default_rng(3)
    rotation = _yaw(np.radians(1.5))
    static_t = np.array([0.02, 0.0, 0.25])
    static, static_pixels = _scene(rng, 70, rotation, static_t, camera)
    # The box fills more of the view: the same turn (the camera's), its own translation.
    box, box_pixels = _scene(rng, 140, rotation, static_t + [0.3, 0.0, 0.1], camera)
    points, pixels = np.vstack([box, static]), np.vstack([box_pixels, static_pixels])
    body_to_optical = T_BODY_OPTICAL[:3, :3]
    prior = (body_to_optical @ rotation @ body_to_optical.T).T
    sets = odometry._solve_with_prior(points, pixels, 210, prior)  # noqa: SLF001
    assert [set(inliers.tolist()) for _, _, inliers in sets] == [
        set(range(140)),
        set(range(140, 210)),
    ]
    np.testing.assert_allclose(sets[1][1][:, 0], static_t, atol=0.01)
    # Without alternatives (the default) only the box's motion is returned.
    single = FramePairOdometry(camera)
    assert len(single._solve_with_prior(points, pixels, 210, prior)) == 1  # noqa: SLF001


def test_the_alternatives_of_a_real_pair_are_poses_with_covariances(sequence):
    odometry = FramePairOdometry(sequence.config.intrinsics, VoConfig(prior_alternatives=2))
    a, b = sequence.frame(30), sequence.frame(42)
    truth = relative_poses(a.pose[None], b.pose[None])[0]
    result = odometry.estimate(
        a.rendered.rgb, b.rendered.rgb, a.rendered.depth, rotation_prior=truth[:3, :3]
    )
    assert result.ok
    for other in result.alternatives:
        assert other.ok
        assert other.inliers >= odometry.config.min_inliers
        assert other.inliers <= result.inliers
        assert np.all(np.linalg.eigvalsh(other.covariance) > 0)
    assert len(result.alternative_poses) == len(result.alternatives)
    # PnP without a prior gives none.
    assert odometry.estimate(a.rendered.rgb, b.rendered.rgb, a.rendered.depth).alternatives == ()


def _body_prior(rotation: np.ndarray, translation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (R_body1_body2, position of body 2 in body 1) of optical ``X_2 = R X_1 + t``."""
    body_to_optical = T_BODY_OPTICAL[:3, :3]
    rotation_prior = (body_to_optical @ rotation @ body_to_optical.T).T
    return rotation_prior, body_to_optical @ (-rotation.T @ translation)


def _box_ahead(camera, rng):
    """Return a room moving past the camera and a larger box driving along with it."""
    rotation = _yaw(np.radians(1.0))
    static_t = np.array([0.0, 0.0, -0.2])  # the camera drives 0.2 m forward
    static, static_pixels = _scene(rng, 60, rotation, static_t, camera, (2.0, 5.0))
    # The car ahead moves with the robot: seen from the camera it only turns.
    box, box_pixels = _scene(rng, 150, rotation, np.zeros(3), camera, (2.0, 5.0))
    return rotation, static_t, np.vstack([box, static]), np.vstack([box_pixels, static_pixels])


def test_a_translation_prior_picks_the_room_over_a_larger_box_driving_ahead(sequence):
    camera = sequence.config.intrinsics
    odometry = FramePairOdometry(camera)
    rotation, static_t, points, pixels = _box_ahead(camera, np.random.default_rng(4))
    rotation_prior, position = _body_prior(rotation, static_t)
    # The rotation alone takes the box: "the robot stands still". (Points near the focus
    # of expansion fit either motion.)
    (solved,) = odometry._solve_with_prior(points, pixels, 210, rotation_prior)  # noqa: SLF001
    assert set(range(150)) <= set(solved[2].tolist())
    assert np.linalg.norm(solved[1]) < 0.01
    # The filter predicts 0.17 m forward (15 % short): the room's set is the one near it.
    predicted = 0.85 * position
    gate = (predicted, odometry.config.translation_gate(predicted))
    (solved,) = odometry._solve_with_prior(  # noqa: SLF001
        points, pixels, 210, rotation_prior, gate
    )
    assert set(range(150, 210)) <= set(solved[2].tolist())
    assert len(solved[2]) < 120
    np.testing.assert_allclose(solved[1][:, 0], static_t, atol=0.01)


def test_a_pair_with_no_set_near_the_predicted_translation_fails(sequence):
    camera = sequence.config.intrinsics
    odometry = FramePairOdometry(camera)
    rotation, _, points, pixels = _box_ahead(camera, np.random.default_rng(5))
    rotation_prior, _ = _body_prior(rotation, np.zeros(3))
    sideways = np.array([0.0, 1.0, 0.0])  # 1 m to the left: nothing moved like that
    gate = (sideways, odometry.config.translation_gate(sideways))
    # Not the box's set, which contradicts the filter's prediction: no pose.
    failed = odometry._solve_with_prior(points, pixels, 210, rotation_prior, gate)  # noqa: SLF001
    assert isinstance(failed, VoResult)
    assert not failed.ok
    assert 'predicted translation' in failed.reason
    # A prediction the filter is unsure of (1 m standard deviation) gates nothing out.
    unsure = (sideways, odometry.config.translation_gate(sideways, sigma_m=1.0))
    (solved,) = odometry._solve_with_prior(  # noqa: SLF001
        points, pixels, 210, rotation_prior, unsure
    )
    assert set(range(150)) <= set(solved[2].tolist())


def test_a_real_pair_with_a_translation_prior(sequence):
    odometry = FramePairOdometry(sequence.config.intrinsics)
    a, b = sequence.frame(30), sequence.frame(42)
    truth = relative_poses(a.pose[None], b.pose[None])[0]
    frames = a.rendered.rgb, b.rendered.rgb, a.rendered.depth
    result = odometry.estimate(
        *frames, rotation_prior=truth[:3, :3], translation_prior=truth[:3, 3] * 1.2
    )
    assert result.ok, result.reason
    assert np.linalg.norm(result.relative_pose[:3, 3] - truth[:3, 3]) < 0.04
    far = odometry.estimate(
        *frames, rotation_prior=truth[:3, :3], translation_prior=truth[:3, 3] + [0, 2.0, 0]
    )
    assert not far.ok
    assert 'predicted translation' in far.reason
    with pytest.raises(ValueError, match='rotation prior'):
        odometry.estimate(*frames, translation_prior=truth[:3, 3])
    with pytest.raises(ValueError, match='translation prior'):
        odometry.estimate(
            *frames, rotation_prior=truth[:3, :3], translation_prior=[np.nan, 0.0, 0.0]
        )


def test_a_gated_set_that_turns_away_from_the_gyro_fails_for_that_reason(sequence):
    camera = sequence.config.intrinsics
    # A tolerance below the prior's error: the room's set is found near the predicted
    # translation, and its refined rotation then leaves the prior's.
    odometry = FramePairOdometry(camera, VoConfig(prior_rotation_tolerance_deg=0.05))
    rotation, static_t, points, pixels = _box_ahead(camera, np.random.default_rng(4))
    rotation_prior, position = _body_prior(rotation, static_t)
    rotation_prior = rotation_prior @ _yaw(np.radians(0.2))
    gate = (position, odometry.config.translation_gate(position))
    failed = odometry._solve_with_prior(points, pixels, 210, rotation_prior, gate)  # noqa: SLF001
    assert isinstance(failed, VoResult)
    assert not failed.ok
    assert 'refined rotation' in failed.reason
    assert failed.inliers >= odometry.config.min_inliers
