# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO's accuracy metrics: hand-computed cases, and evo as the reference on real data.

The real trajectories (TUM RGB-D fr1/xyz and fr2/desk, KITTI odometry 00 with ORB-SLAM2 and
S-PTAM estimates) come from evo's source archive; ``tools/fetch_assets.py`` puts them in
the asset folder.
"""

from __future__ import annotations

import copy
import math
from functools import cache

import numpy as np
import pytest
from evo.core import metrics as evo_metrics
from evo.core import sync
from evo.core.trajectory import PosePath3D
from evo.tools import file_interface

from accumo_ros.geometry import make_poses
from accumo_ros.metrics import (
    KITTI_SEGMENT_LENGTHS,
    DepthErrors,
    ate,
    depth_errors,
    kitti_errors,
    kitti_segment_lengths,
    path_length,
    rpe,
    segment_errors,
    umeyama,
)
from edge_offload.assets import asset_path

# evo and this module compute the same floating-point expressions in different orders.
EVO_RTOL = 1e-9


def _rz(angles: np.ndarray) -> np.ndarray:
    angles = np.asarray(angles, dtype=np.float64)
    c, s = np.cos(angles), np.sin(angles)
    rotations = np.zeros(angles.shape + (3, 3))
    rotations[..., 0, 0], rotations[..., 0, 1] = c, -s
    rotations[..., 1, 0], rotations[..., 1, 1] = s, c
    rotations[..., 2, 2] = 1.0
    return rotations


def _straight_line(count: int, spacing: float) -> np.ndarray:
    """Poses along world x, ``spacing`` metres apart, heading along x."""
    positions = np.zeros((count, 3))
    positions[:, 0] = spacing * np.arange(count)
    return make_poses(np.broadcast_to(np.eye(3), (count, 3, 3)), positions)


# --- Depth ------------------------------------------------------------------------------------


def test_depth_errors_on_a_2x2_example_computed_by_hand():
    ground_truth = np.array([[1.0, 2.0], [4.0, 8.0]])
    predicted = np.array([[1.1, 2.5], [3.0, 8.0]])
    # Differences 0.1, 0.5, -1, 0; ratios max(p/g, g/p) 1.1, 1.25, 4/3, 1.
    errors = depth_errors(predicted, ground_truth)
    assert errors.valid_pixels == 4
    assert errors.abs_rel == pytest.approx((0.1 / 1 + 0.5 / 2 + 1 / 4 + 0) / 4)  # 0.15
    assert errors.sq_rel == pytest.approx((0.01 / 1 + 0.25 / 2 + 1 / 4 + 0) / 4)  # 0.09625
    assert errors.rmse == pytest.approx(math.sqrt((0.01 + 0.25 + 1 + 0) / 4))
    logs = [math.log(1.1), math.log(1.25), math.log(0.75), 0.0]
    assert errors.rmse_log == pytest.approx(math.sqrt(sum(v * v for v in logs) / 4))
    # δ < 1.25 is strict: the 1.25 ratio (2.5 / 2, exact in binary) does not count.
    assert errors.delta1 == 0.5
    assert errors.delta2 == 1.0  # every ratio < 1.5625
    assert errors.delta3 == 1.0


def test_depth_errors_of_a_perfect_prediction():
    depth = np.linspace(0.5, 20.0, 12).reshape(3, 4)
    errors = depth_errors(depth, depth)
    assert errors == DepthErrors(0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 12)


def test_depth_errors_skip_invalid_pixels():
    ground_truth = np.array([1.0, 0.0, np.nan, 90.0, 2.0, 2.0, 2.0, 2.0, 1e-3, 80.0])
    predicted = np.array([1.5, 1.0, 1.0, 1.0, np.nan, 0.0, -1.0, np.inf, 1.0, 60.0])
    # Valid: index 0 and index 9 (80 m is inside (min, max]); 1e-3 m is the excluded bound.
    errors = depth_errors(predicted, ground_truth, max_depth=80.0)
    assert errors.valid_pixels == 2
    assert errors.abs_rel == pytest.approx((0.5 / 1.0 + 20.0 / 80.0) / 2)
    assert errors.rmse == pytest.approx(math.sqrt((0.25 + 400.0) / 2))
    assert errors.delta1 == 0.0  # ratios 1.5 and 4/3
    assert errors.delta2 == 1.0


def test_depth_errors_with_a_mask_and_a_batch():
    rng = np.random.default_rng(7)
    ground_truth = rng.uniform(0.5, 10.0, size=(3, 4, 5))
    predicted = ground_truth * rng.uniform(0.7, 1.4, size=ground_truth.shape)
    mask = rng.random(ground_truth.shape) < 0.5
    masked = depth_errors(predicted, ground_truth, mask=mask)
    direct = depth_errors(predicted[mask], ground_truth[mask])
    assert masked == direct
    assert masked.valid_pixels == int(mask.sum())
    flat = depth_errors(predicted.reshape(-1), ground_truth.reshape(-1))
    assert depth_errors(predicted, ground_truth) == flat


def test_depth_errors_reject_bad_input():
    depth = np.ones((2, 2))
    with pytest.raises(ValueError, match='shape'):
        depth_errors(np.ones((2, 3)), depth)
    with pytest.raises(ValueError, match='no valid pixel'):
        depth_errors(depth, np.zeros((2, 2)))
    with pytest.raises(ValueError, match='no valid pixel'):
        depth_errors(depth, depth, mask=np.zeros((2, 2), dtype=bool))
    with pytest.raises(ValueError, match='no valid pixel'):
        depth_errors(np.full((2, 2), np.nan), depth)
    with pytest.raises(ValueError, match='mask has shape'):
        depth_errors(depth, depth, mask=np.ones((1, 2), dtype=bool))
    with pytest.raises(ValueError, match='boolean'):
        depth_errors(depth, depth, mask=np.ones((2, 2)))


# --- KITTI segment errors ---------------------------------------------------------------------


def test_segment_lengths_are_kittis_for_long_paths_and_scaled_for_short_ones():
    assert kitti_segment_lengths(3724.2) == (
        100.0,
        200.0,
        300.0,
        400.0,
        500.0,
        600.0,
        700.0,
        800.0,
    )
    assert kitti_segment_lengths(800.0) == KITTI_SEGMENT_LENGTHS
    assert kitti_segment_lengths(50.0) == pytest.approx([5.0 * k for k in range(1, 9)])
    assert kitti_segment_lengths(12.0, count=4) == pytest.approx([2.0, 4.0, 6.0, 8.0])
    with pytest.raises(ValueError, match='positive'):
        kitti_segment_lengths(0.0)
    with pytest.raises(ValueError, match='count'):
        kitti_segment_lengths(10.0, count=0)


def test_kitti_errors_scale_the_lengths_to_a_short_path():
    poses = _straight_line(201, 0.25)  # 50 m; 0.25 is exact in binary, so are the distances
    result = kitti_errors(poses, poses)
    assert result.lengths == pytest.approx([5.0 * k for k in range(1, 9)])
    assert result.t_err == 0.0
    assert result.r_err == 0.0
    # A segment of 5 k m from start frame f (a multiple of 10, 0.25 m apart) ends at frame
    # f + 20 k + 1 (the devkit wants distance > L), which must exist (< 201).
    expected = sum(1 for f in range(0, 201, 10) for k in range(1, 9) if f + 20 * k + 1 < 201)
    assert result.segments == expected


def test_kitti_errors_are_zero_for_a_perfect_estimate_on_real_data():
    gt = _kitti('KITTI_00_gt.txt')
    result = kitti_errors(gt, gt)
    assert result.lengths == KITTI_SEGMENT_LENGTHS
    assert result.t_err == pytest.approx(0.0, abs=1e-12)
    # The file's 9-digit rotations are orthonormal to ~1e-9 only, so R^T R has a trace up to
    # ~1e-9 below 3, and the devkit's acos turns that into ~5e-5 rad: a noise floor of
    # ~7e-5 deg/m here, 3 % of ORB-SLAM2's 2.5e-3 deg/m on the same data.
    assert result.r_err < 1e-4


def test_scaled_translations_give_five_percent_on_a_straight_line():
    spacing = 0.5
    gt = _straight_line(200, spacing)
    est = gt.copy()
    est[:, :3, 3] = gt[0, :3, 3] + 1.05 * (gt[:, :3, 3] - gt[0, :3, 3])
    segments = segment_errors(gt, est, segment_lengths=(10.0, 25.0), step=10)
    # By hand: a segment of nominal length L ends L / 0.5 + 1 frames later (the devkit needs
    # distance > L), so it spans L + 0.5 m; its error is 5 % of that span, over L.
    assert np.all(segments.last_frame - segments.first_frame == segments.length / spacing + 1)
    span = segments.length + spacing
    np.testing.assert_allclose(segments.t_err, 0.05 * span / segments.length, rtol=1e-12)
    np.testing.assert_allclose(segments.t_err * segments.length / span, 0.05, rtol=1e-12)
    assert np.all(segments.r_err == 0.0)
    # Start frames 0, 10, ..., 170 fit 10 m (21 frames); 0 .. 140 fit 25 m (51 frames).
    assert len(segments) == 18 + 15
    result = kitti_errors(gt, est, segment_lengths=(10.0, 25.0))
    assert result.t_err == pytest.approx((18 * 0.05 * 10.5 / 10 + 15 * 0.05 * 25.5 / 25) / 33)
    assert result.segments == 33


def test_scaled_translations_on_a_planar_curve():
    # A circle of radius 20 m driven tangentially, 0.2 m (0.01 rad) per frame.
    radius, count = 20.0, 600
    theta = 0.01 * np.arange(count)
    positions = np.stack([radius * np.sin(theta), radius * (1.0 - np.cos(theta)), 0 * theta], 1)
    gt = make_poses(_rz(theta), positions)
    est = gt.copy()
    est[:, :3, 3] = 1.05 * positions  # about the start, the origin
    segments = segment_errors(gt, est, segment_lengths=(15.0, 40.0), step=10)
    # By hand: the error is 5 % of the chord 2 r sin(Δθ / 2), the rotation is exact.
    chord = 2.0 * radius * np.sin(0.01 * (segments.last_frame - segments.first_frame) / 2.0)
    np.testing.assert_allclose(segments.t_err, 0.05 * chord / segments.length, rtol=1e-9)
    np.testing.assert_allclose(segments.r_err, 0.0, atol=1e-6)


def test_a_constant_yaw_bias_on_a_straight_line():
    # Ground truth drives straight along x, 0.125 m a frame. The estimate integrates the same
    # forward steps but turns an extra 0.2 deg left every frame.
    spacing, bias, count = 0.125, math.radians(0.2), 400
    frames = np.arange(count)
    gt = _straight_line(count, spacing)
    heading = bias * frames
    # Position k of the estimate is spacing * sum_{j<k} (cos jε, sin jε, 0).
    steps = spacing * np.stack([np.cos(heading), np.sin(heading), 0 * heading], 1)
    positions = np.concatenate([np.zeros((1, 3)), np.cumsum(steps, axis=0)[:-1]])
    est = make_poses(_rz(heading), positions)

    lengths = (5.0, 12.0)
    segments = segment_errors(gt, est, segment_lengths=lengths, step=10)
    for length in lengths:
        # By hand: n = L / 0.125 + 1 frames. The estimated relative pose is a yaw of n ε and a
        # displacement of the geometric sums below; the ground truth's is (n 0.125, 0, 0).
        # Error E = inv(est_rel) @ gt_rel: rotation -n ε, translation Rz(-n ε) (gt - est).
        n = round(length / spacing) + 1
        sum_cos = math.sin(n * bias / 2) * math.cos((n - 1) * bias / 2) / math.sin(bias / 2)
        sum_sin = math.sin(n * bias / 2) * math.sin((n - 1) * bias / 2) / math.sin(bias / 2)
        t_err = math.hypot(n * spacing - spacing * sum_cos, spacing * sum_sin) / length
        r_err = math.degrees(n * bias) / length
        this = segments.length == length
        assert np.all(segments.last_frame[this] - segments.first_frame[this] == n)
        np.testing.assert_allclose(segments.t_err[this], t_err, rtol=1e-9)
        np.testing.assert_allclose(segments.r_err[this], r_err, rtol=1e-9)
    # n = 41 frames: 8.2 deg over 5 m is 1.64 deg/m.
    np.testing.assert_allclose(segments.r_err[segments.length == 5.0], 1.64, rtol=1e-9)
    result = kitti_errors(gt, est, segment_lengths=lengths)
    assert result.t_err == pytest.approx(float(np.mean(segments.t_err)))
    assert result.r_err == pytest.approx(float(np.mean(segments.r_err)))


def test_segments_covering_frames_give_a_frame_level_proxy():
    count = 300
    gt = _straight_line(count, 0.125)
    est = gt.copy()
    est[150:, 0, 3] += 0.5  # one jump between frames 149 and 150
    segments = segment_errors(gt, est, segment_lengths=(2.0, 5.0), step=10)
    assert np.all(segments.first_frame % 10 == 0)
    covering = segments.covering([149, 150])
    jumped = (segments.first_frame < 150) & (segments.last_frame >= 150)
    # Only segments that straddle the jump see it.
    np.testing.assert_allclose(segments.t_err[jumped], 0.5 / segments.length[jumped])
    np.testing.assert_allclose(segments.t_err[~jumped], 0.0, atol=1e-12)
    assert np.all(covering[jumped])
    proxy = segments.summary(covering)
    assert proxy.segments == int(covering.sum())
    assert proxy.t_err == pytest.approx(float(np.mean(segments.t_err[covering])))
    assert proxy.t_err > segments.summary().t_err
    np.testing.assert_array_equal(segments.covering([0]), segments.first_frame == 0)
    assert segments.covering([]).sum() == 0
    with pytest.raises(ValueError, match='no segment selected'):
        segments.summary(segments.covering([]))


def test_kitti_errors_reject_trajectories_too_short_for_any_segment():
    poses = _straight_line(40, 0.125)  # 4.875 m
    with pytest.raises(ValueError, match='no segment'):
        kitti_errors(poses, poses, segment_lengths=(5.0,))
    with pytest.raises(ValueError, match='no segment'):
        kitti_errors(poses[:1], poses[:1])
    standing = make_poses(np.broadcast_to(np.eye(3), (20, 3, 3)), np.zeros((20, 3)))
    with pytest.raises(ValueError, match='no segment'):
        kitti_errors(standing, standing)
    with pytest.raises(ValueError, match='associate'):
        kitti_errors(poses, poses[:-1])
    with pytest.raises(ValueError, match='positive'):
        kitti_errors(poses, poses, segment_lengths=(0.0, 1.0))
    # The devkit needs distance > L: a path exactly L long fits no segment of L.
    with pytest.raises(ValueError, match='no segment'):
        kitti_errors(_straight_line(11, 0.5), _straight_line(11, 0.5), segment_lengths=(5.0,))


def test_kitti_00_orb_slam2_matches_its_published_errors():
    gt = _kitti('KITTI_00_gt.txt')
    orb = _kitti('KITTI_00_ORB.txt')
    sptam = _kitti('KITTI_00_SPTAM.txt')
    assert path_length(gt) == pytest.approx(3724.2, abs=0.1)
    orb_result = kitti_errors(gt, orb)
    sptam_result = kitti_errors(gt, sptam)
    # ORB-SLAM2 here is the stereo system (a Sim(3) fit gives scale 1.005, not arbitrary), so
    # no alignment is needed; KITTI errors are relative, so a rigid alignment changes nothing.
    _, _, scale = umeyama(orb[:, :3, 3], gt[:, :3, 3], with_scale=True)
    print(
        f'\nKITTI 00 ORB-SLAM2: t_err {100 * orb_result.t_err:.3f} %, '
        f'r_err {100 * orb_result.r_err:.4f} deg/100 m over {orb_result.segments} segments, '
        f'ATE (SE3) {ate(gt, orb):.3f} m, Sim(3) scale {scale:.4f}; '
        f'S-PTAM: t_err {100 * sptam_result.t_err:.3f} %, '
        f'r_err {100 * sptam_result.r_err:.4f} deg/100 m'
    )
    assert scale == pytest.approx(1.0, abs=0.01)
    # Mur-Artal and Tardós, ORB-SLAM2 (T-RO 2017), Table II, stereo, sequence 00:
    # t_rel 0.70 %, r_rel 0.25 deg/100 m, t_abs 1.3 m.
    assert orb_result.t_err == pytest.approx(0.0070, abs=0.0005)
    assert orb_result.r_err == pytest.approx(0.0025, abs=0.0003)
    assert ate(gt, orb) == pytest.approx(1.3, abs=0.05)
    assert orb_result.segments > 3000
    # A worse, still loop-closed stereo SLAM: well inside the 0.5-20 % of KITTI entries.
    assert 0.005 < sptam_result.t_err < 0.2
    assert sptam_result.t_err > orb_result.t_err


# --- Umeyama, ATE and RPE ---------------------------------------------------------------------


def test_umeyama_recovers_a_similarity():
    rng = np.random.default_rng(3)
    source = rng.normal(size=(50, 3))
    rotation = _rz(0.7) @ np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]])
    target = 2.5 * source @ rotation.T + np.array([1.0, -2.0, 3.0])
    found_rotation, found_translation, found_scale = umeyama(source, target, with_scale=True)
    np.testing.assert_allclose(found_rotation, rotation, atol=1e-12)
    np.testing.assert_allclose(found_translation, [1.0, -2.0, 3.0], atol=1e-12)
    assert found_scale == pytest.approx(2.5, rel=1e-12)
    # A mirror image is fitted by a proper rotation, never a reflection.
    mirrored, _, _ = umeyama(source, source * np.array([1.0, 1.0, -1.0]))
    assert np.linalg.det(mirrored) == pytest.approx(1.0)
    with pytest.raises(ValueError, match='degenerate'):
        umeyama(np.zeros((5, 3)), np.ones((5, 3)))


def test_ate_and_rpe_on_a_rigidly_moved_and_a_scaled_copy():
    rng = np.random.default_rng(5)
    count = 100
    heading = np.cumsum(rng.normal(0.0, 0.05, count))
    positions = np.cumsum(rng.normal(0.0, 0.3, (count, 3)), axis=0)
    gt = make_poses(_rz(heading), positions)
    motion = make_poses(_rz(1.2), np.array([3.0, -1.0, 0.5]))
    moved = motion @ gt
    assert ate(gt, moved) == pytest.approx(0.0, abs=1e-9)
    assert ate(gt, moved, align='none') > 1.0
    offset = gt.copy()
    offset[:, :3, 3] += np.array([0.3, 0.4, 0.0])
    assert ate(gt, offset, align='none') == pytest.approx(0.5)
    # RPE is blind to a global rigid motion.
    assert rpe(gt, moved) == pytest.approx((0.0, 0.0), abs=1e-9)
    scaled = gt.copy()
    scaled[:, :3, 3] *= 0.5
    assert ate(gt, scaled, align='sim3') == pytest.approx(0.0, abs=1e-9)
    assert ate(gt, scaled, align='se3') > 0.1
    with pytest.raises(ValueError, match='align'):
        ate(gt, gt, align='sim2')  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='delta'):
        rpe(gt, gt, delta=0)
    with pytest.raises(ValueError, match='no pair'):
        rpe(gt[:5], gt[:5], delta=5)


def test_rpe_pairs_are_consecutive_by_default_and_every_frame_on_request():
    count, spacing = 25, 1.0
    gt = _straight_line(count, spacing)
    est = gt.copy()
    est[7, 1, 3] = 1.0  # frame 7 is off by 1 m sideways
    # Consecutive pairs of delta 5: (0, 5), (5, 10), ... never touch frame 7.
    assert rpe(gt, est, delta=5) == (0.0, 0.0)
    # All pairs (i, i + 5): (2, 7) and (7, 12) see a 1 m error; 20 pairs in all.
    translation, rotation = rpe(gt, est, delta=5, all_pairs=True)
    assert translation == pytest.approx(math.sqrt(2.0 / 20.0))
    assert rotation == 0.0


# --- The same metrics in evo, on real trajectories --------------------------------------------

# (name, ground truth, estimate, format)
REAL_PAIRS = (
    ('fr1_xyz-rgbdslam', 'freiburg1_xyz-groundtruth.txt', 'freiburg1_xyz-rgbdslam.txt', 'tum'),
    (
        'fr1_xyz-rgbdslam_drift',
        'freiburg1_xyz-groundtruth.txt',
        'freiburg1_xyz-rgbdslam_drift.txt',
        'tum',
    ),
    ('fr2_desk-ORB', 'fr2_desk_groundtruth.txt', 'fr2_desk_ORB.txt', 'tum'),
    ('KITTI_00-ORB', 'KITTI_00_gt.txt', 'KITTI_00_ORB.txt', 'kitti'),
    ('KITTI_00-SPTAM', 'KITTI_00_gt.txt', 'KITTI_00_SPTAM.txt', 'kitti'),
)
PAIR_IDS = [pair[0] for pair in REAL_PAIRS]


def _evo_file(name: str) -> str:
    # Raises AssetMissingError (run tools/fetch_assets.py) when the data was not fetched.
    return str(asset_path(f'data/evo/{name}'))


@cache
def _read_kitti(name: str) -> PosePath3D:
    return file_interface.read_kitti_poses_file(_evo_file(name))


@cache
def _evo_pair(gt_name: str, est_name: str, kind: str) -> tuple[PosePath3D, PosePath3D]:
    """Ground truth and estimate with one pose each per frame (TUM: associated by time)."""
    if kind == 'kitti':
        return _read_kitti(gt_name), _read_kitti(est_name)
    gt = file_interface.read_tum_trajectory_file(_evo_file(gt_name))
    est = file_interface.read_tum_trajectory_file(_evo_file(est_name))
    return sync.associate_trajectories(gt, est)


def _kitti(name: str) -> np.ndarray:
    return np.array(_read_kitti(name).poses_se3)


def _as_arrays(gt: PosePath3D, est: PosePath3D) -> tuple[np.ndarray, np.ndarray]:
    return np.array(gt.poses_se3), np.array(est.poses_se3)


@pytest.mark.parametrize(('name', 'gt_name', 'est_name', 'kind'), REAL_PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize('align', ['se3', 'sim3', 'none'])
def test_ate_matches_evo_ape(name: str, gt_name: str, est_name: str, kind: str, align: str):
    gt, est = _evo_pair(gt_name, est_name, kind)
    assert gt.num_poses == est.num_poses > 700
    ours = ate(*_as_arrays(gt, est), align=align)
    aligned = copy.deepcopy(est)
    if align != 'none':
        aligned.align(gt, correct_scale=align == 'sim3')
    ape = evo_metrics.APE(evo_metrics.PoseRelation.translation_part)
    ape.process_data((gt, aligned))
    reference = ape.get_statistic(evo_metrics.StatisticsType.rmse)
    print(f'\n{name} ATE {align}: ours {ours:.12g} m, evo {reference:.12g} m')
    assert ours == pytest.approx(reference, rel=EVO_RTOL)


def _rpe_cases() -> list:
    cases = []
    for pair in REAL_PAIRS:
        # evo's RPE loops in Python; all pairs of the 4541 KITTI poses would take seconds.
        settings = [(1, False), (10, False)] + ([(10, True)] if pair[3] == 'tum' else [])
        for delta, all_pairs in settings:
            case_id = f'{pair[0]}-delta{delta}' + ('-all' if all_pairs else '')
            cases.append(pytest.param(pair[1], pair[2], pair[3], delta, all_pairs, id=case_id))
    return cases


@pytest.mark.parametrize(('gt_name', 'est_name', 'kind', 'delta', 'all_pairs'), _rpe_cases())
def test_rpe_matches_evo(gt_name: str, est_name: str, kind: str, delta: int, all_pairs: bool):
    gt, est = _evo_pair(gt_name, est_name, kind)
    translation, rotation = rpe(*_as_arrays(gt, est), delta=delta, all_pairs=all_pairs)
    reference = []
    for relation in (
        evo_metrics.PoseRelation.translation_part,
        evo_metrics.PoseRelation.rotation_angle_deg,
    ):
        metric = evo_metrics.RPE(
            relation, delta=delta, delta_unit=evo_metrics.Unit.frames, all_pairs=all_pairs
        )
        metric.process_data((gt, est))
        reference.append(metric.get_statistic(evo_metrics.StatisticsType.rmse))
    print(
        f'\n{est_name} RPE delta {delta} all_pairs {all_pairs}: ours {translation:.12g} m '
        f'{rotation:.12g} deg, evo {reference[0]:.12g} m {reference[1]:.12g} deg'
    )
    assert translation == pytest.approx(reference[0], rel=EVO_RTOL)
    assert rotation == pytest.approx(reference[1], rel=EVO_RTOL)
