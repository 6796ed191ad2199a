# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The depth task's warping tracker, its accuracy models and the local selector."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from accumo_ros.geometry import make_poses, relative_poses
from accumo_ros.metrics import depth_errors
from accumo_ros.simulation.sequence import SequenceConfig, SyntheticSequence
from accumo_ros.tasks.depth_tracking import (
    LOCAL_ALGORITHM,
    TRACKER,
    DepthTrackerAccuracyModel,
    LocalDepthSelector,
    estimate_tracker_error,
    fit_lite_drop,
    forward_warp,
    lite_model_drop,
    move_by_flow,
    offload_tracker_drop_rate,
    optical_pose_change,
    optical_relative_pose,
    select_local_depth,
    warp_depth,
    warp_image,
)
from edge_offload.camera_model import PinholeCamera

SMALL = {'duration_s': 4.0, 'width': 208, 'height': 64}
# low_low seed 2 shows no moving box in its first ~3.5 s (checked in the tests that use it).
STATIC_SEED = 2
STATIC_FRAMES = range(20, 120, 25)


def _translation(x: float = 0.0, y: float = 0.0, z: float = 0.0) -> np.ndarray:
    return make_poses(np.eye(3), np.array([x, y, z]))


@pytest.fixture(scope='module')
def static_sequence() -> SyntheticSequence:
    return SyntheticSequence(SequenceConfig(category='low_low', seed=STATIC_SEED, **SMALL))


@pytest.fixture(scope='module')
def dynamic_sequence() -> SyntheticSequence:
    return SyntheticSequence(SequenceConfig(category='high_low', seed=1, **SMALL))


def _static_frame(sequence: SyntheticSequence, index: int):
    frame = sequence.frame(index)
    # The test's premise: the frame shows no moving object.
    assert not frame.rendered.dynamic_mask(sequence.scene).any(), index
    return frame


# --- Warping ----------------------------------------------------------------------------------


def test_identity_pose_returns_the_input_exactly(static_sequence):
    depth = static_sequence.frame(30).rendered.depth
    warped, holes = warp_depth(
        depth, static_sequence.config.intrinsics, np.eye(4), return_holes=True
    )
    assert warped.dtype == depth.dtype
    np.testing.assert_array_equal(warped, depth)
    assert not holes.any()


def test_fronto_parallel_plane_moved_towards_is_exactly_one_metre_closer():
    intrinsics = PinholeCamera(fx=100.0, fy=100.0, cx=39.5, cy=29.5, width=80, height=60)
    plane = np.full((60, 80), 5.0)
    # The camera moves 1 m forward: frame-1 points are 1 m less far in frame 2.
    warped, holes = warp_depth(plane, intrinsics, _translation(z=-1.0), return_holes=True)
    # Magnification by 5/4 leaves cracks between the splatted points; the nearest fill
    # closes them with the same plane, so every pixel is exact.
    assert holes.any()
    np.testing.assert_array_equal(warped, 4.0)


def test_sideways_translation_shifts_by_whole_pixels_and_fills_the_border():
    intrinsics = PinholeCamera(fx=100.0, fy=100.0, cx=39.5, cy=29.5, width=80, height=60)
    plane = np.full((60, 80), 5.0)
    image = np.tile(np.arange(80, dtype=np.uint8), (60, 1))
    # The camera moves 0.5 m left, so points move 0.5 m right: fx * 0.5 / 5 = 10 px.
    pose = _translation(x=0.5)
    warped, holes = warp_depth(plane, intrinsics, pose, return_holes=True)
    np.testing.assert_array_equal(warped, 5.0)
    np.testing.assert_array_equal(holes[:, :10], True)
    np.testing.assert_array_equal(holes[:, 10:], False)
    moved = warp_image(image, plane, intrinsics, pose)
    np.testing.assert_array_equal(moved[:, 10:], image[:, :70])
    # Nearest fill: the hole columns repeat the first filled column.
    np.testing.assert_array_equal(moved[:, :10], 0)


@pytest.mark.parametrize(
    ('move', 'near', 'far', 'target'),
    [
        # A sideways move of 1 m shifts a point at 1 m by 10 px and one at 10 m by 1 px.
        (1.0, 0, 9, 10),  # the nearer point comes first in the image
        (-1.0, 19, 10, 9),  # ... and last: the result must not depend on the order
    ],
)
def test_z_buffer_keeps_the_nearer_of_two_points_on_one_pixel(move, near, far, target):
    intrinsics = PinholeCamera(fx=10.0, fy=10.0, cx=0.0, cy=0.0, width=20, height=1)
    depth = np.full((1, 20), np.nan)  # invalid: only the two points are splatted
    image = np.zeros((1, 20), dtype=np.uint8)
    depth[0, near], image[0, near] = 1.0, 200
    depth[0, far], image[0, far] = 10.0, 100
    warp = forward_warp(depth, intrinsics, _translation(x=move))
    assert np.count_nonzero(~warp.holes) == 1
    assert not warp.holes[0, target]
    assert warp.depth[0, target] == 1.0
    assert warp.apply(image)[0, target] == 200
    # The nearest fill spreads the one landed value everywhere.
    np.testing.assert_array_equal(warp.depth, 1.0)


def test_nothing_in_view_gives_an_all_nan_map():
    intrinsics = PinholeCamera(fx=10.0, fy=10.0, cx=0.0, cy=0.0, width=20, height=1)
    depth = np.full((1, 20), np.nan)
    depth[0, 10] = 1.0  # shifted by 10 px to column 20, just outside
    warped, holes = warp_depth(depth, intrinsics, _translation(x=1.0), return_holes=True)
    assert holes.all()
    assert np.isnan(warped).all()


@pytest.mark.parametrize('stride', [1, 6, 12])
def test_warping_a_static_scene_with_true_depth_and_pose_matches_the_true_depth(
    static_sequence, stride
):
    intrinsics = static_sequence.config.intrinsics
    medians, overall = [], []
    for first in STATIC_FRAMES:
        frame_1 = _static_frame(static_sequence, first)
        frame_2 = _static_frame(static_sequence, first + stride)
        pose = optical_relative_pose(frame_1.pose, frame_2.pose)
        warp = forward_warp(frame_1.rendered.depth, intrinsics, pose)
        truth = frame_2.rendered.depth
        # Visible in both: a point landed there and it is the surface frame 2 sees (a
        # disoccluded pixel is filled from a neighbour, usually of another box).
        same_surface = warp.apply(frame_1.rendered.object_id) == frame_2.rendered.object_id
        visible = ~warp.holes & same_surface
        assert visible.mean() > 0.8
        relative = np.abs(warp.depth - truth) / truth
        medians.append(float(np.median(relative[visible])))
        overall.append(depth_errors(warp.depth, truth).abs_rel)
    print(
        f'stride {stride}: median AbsRel on visible pixels {max(medians):.4f} (worst pair), '
        f'overall AbsRel {np.mean(overall):.4f}'
    )
    # Only the splat's rounding to the nearest pixel (≤ 0.5 px) is left.
    assert max(medians) < 0.005
    if stride == 6:
        assert max(overall) < 0.05


def test_optical_pose_change_from_body_motion_matches_the_world_poses(static_sequence):
    pose_1 = static_sequence.frame(10).pose
    pose_2 = static_sequence.frame(40).pose
    np.testing.assert_allclose(
        optical_pose_change(relative_poses(pose_1, pose_2)),
        optical_relative_pose(pose_1, pose_2),
        atol=1e-12,
    )


def test_warped_image_shows_frame_two(static_sequence):
    intrinsics = static_sequence.config.intrinsics
    frame_1 = _static_frame(static_sequence, 40)
    frame_2 = _static_frame(static_sequence, 52)
    pose = optical_relative_pose(frame_1.pose, frame_2.pose)
    image, holes = warp_image(
        frame_1.rendered.rgb, frame_1.rendered.depth, intrinsics, pose, return_holes=True
    )
    np.testing.assert_array_equal(
        holes, warp_depth(frame_1.rendered.depth, intrinsics, pose, return_holes=True)[1]
    )
    difference = np.abs(image.astype(int) - frame_2.rendered.rgb.astype(int)).mean(axis=-1)
    # Texture aliasing and shading leave a few grey levels; a wrong warp leaves tens.
    assert np.median(difference[~holes]) < 8.0


def test_move_by_flow_moves_values_keeps_the_nearer_and_fills_holes():
    depth = np.arange(1.0, 13.0).reshape(3, 4)
    zero = np.zeros((3, 4, 2))
    np.testing.assert_array_equal(move_by_flow(depth, zero), depth)
    shift = zero.copy()
    shift[..., 0] = 1.0  # one pixel right
    moved, holes = move_by_flow(depth, shift, return_holes=True)
    np.testing.assert_array_equal(moved[:, 1:], depth[:, :3])
    np.testing.assert_array_equal(moved[:, 0], depth[:, 0])  # filled from column 1
    np.testing.assert_array_equal(holes[:, 0], True)
    # (0, 0) at 1 m and (0, 3) at 4 m both move onto (0, 2), which stays (3 m): nearest wins.
    collide = zero.copy()
    collide[0, 0, 0] = 2.0
    collide[0, 3, 0] = -1.0
    moved = move_by_flow(depth, collide)
    assert moved[0, 2] == 1.0


# --- Tracker accuracy model -------------------------------------------------------------------


def _pairs(sequence: SyntheticSequence, starts, strides):
    intrinsics = sequence.config.intrinsics
    model = DepthTrackerAccuracyModel(intrinsics)
    true, estimated = [], []
    for start in starts:
        frame_1 = sequence.frame(start)
        for stride in strides:
            frame_2 = sequence.frame(start + stride)
            pose = optical_relative_pose(frame_1.pose, frame_2.pose)
            estimate = model.estimate(
                frame_1.rendered.rgb, frame_1.rendered.depth, frame_2.rendered.rgb, pose, stride
            )
            true.append(depth_errors(estimate.warped_depth, frame_2.rendered.depth).abs_rel)
            estimated.append(estimate.error)
    return np.array(true), np.array(estimated)


def _smooth_texture(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    # Blurred noise: coarse-to-fine flow (DIS) needs structure that survives its pyramid;
    # pixel-sized white noise averages out and the flow stays at zero.
    texture = cv2.GaussianBlur(rng.random((height, width)), (0, 0), 3.0)
    texture = (texture - texture.min()) / (texture.max() - texture.min())
    return (255.0 * texture).astype(np.uint8)


def test_flow_moves_the_warped_depth_to_where_the_object_really_is():
    # A still camera (identity pose) sees a textured square at 5 m in front of a wall at
    # 10 m; between the frames the square moves 6 px right. D'_2 = D_1 puts it at the old
    # place, D''_2 must put it at the new one.
    rng = np.random.default_rng(3)
    height, width = 64, 96
    intrinsics = PinholeCamera(fx=60.0, fy=60.0, cx=47.5, cy=31.5, width=width, height=height)
    wall = _smooth_texture(rng, height, width)
    square = _smooth_texture(rng, 20, 20)
    rgb_1, rgb_2 = wall.copy(), wall.copy()
    rgb_1[20:40, 20:40] = square
    rgb_2[20:40, 26:46] = square
    depth_1 = np.full((height, width), 10.0)
    depth_1[20:40, 20:40] = 5.0
    estimate = estimate_tracker_error(rgb_1, depth_1, rgb_2, intrinsics, np.eye(4), 6)
    np.testing.assert_array_equal(estimate.warped_depth, depth_1)
    moved = estimate.moved_depth
    # The square's inside and its new leading edge; the uncovered strip (nearest-filled)
    # is left out.
    assert np.median(moved[22:38, 28:44]) == 5.0
    assert np.median(moved[22:38, 41:45]) == 5.0
    assert np.median(moved[22:38, 10:19]) == 10.0
    # The estimate is close to the true error: the strips the square left and entered.
    truth = np.full((height, width), 10.0)
    truth[20:40, 26:46] = 5.0
    true_error = depth_errors(depth_1, truth).abs_rel
    assert 0.4 * true_error < estimate.error < 1.5 * true_error
    assert estimate.drop_rate == pytest.approx(estimate.error / 6)


def test_estimated_error_is_small_on_static_content_and_larger_with_moving_objects(
    static_sequence, dynamic_sequence
):
    _true_static, static = _pairs(static_sequence, STATIC_FRAMES, (6, 12))
    _true_dynamic, dynamic = _pairs(dynamic_sequence, range(0, 200, 40), (6, 12))
    print(f'estimated error: static mean {static.mean():.4f}, dynamic mean {dynamic.mean():.4f}')
    assert static.max() < 0.01
    assert dynamic.mean() > 4.0 * static.mean()


def test_estimated_error_correlates_with_the_true_warping_error(static_sequence, dynamic_sequence):
    starts = range(0, 200, 20)
    strides = (6, 9, 12, 18)
    true_static, estimated_static = _pairs(static_sequence, starts, strides)
    true_dynamic, estimated_dynamic = _pairs(dynamic_sequence, starts, strides)
    true = np.concatenate([true_static, true_dynamic])
    estimated = np.concatenate([estimated_static, estimated_dynamic])
    correlation = float(np.corrcoef(true, estimated)[0, 1])
    print(
        f'{true.size} pairs: Pearson r {correlation:.3f}; mean true / estimated '
        f'low_low {true_static.mean():.4f} / {estimated_static.mean():.4f}, '
        f'high_low {true_dynamic.mean():.4f} / {estimated_dynamic.mean():.4f}'
    )
    assert correlation > 0.5


def test_accuracy_model_runs_from_the_minimum_stride_and_keeps_the_latest_rate(
    dynamic_sequence,
):
    intrinsics = dynamic_sequence.config.intrinsics
    model = DepthTrackerAccuracyModel(intrinsics)
    assert model.drop_rate == 0.02
    frame_1, frame_2 = dynamic_sequence.frame(60), dynamic_sequence.frame(69)
    inputs = (frame_1.rendered.rgb, frame_1.rendered.depth, frame_2.rendered.rgb)
    pose = optical_relative_pose(frame_1.pose, frame_2.pose)
    assert model.update(*inputs, pose, 5) is None
    assert model.drop_rate == 0.02
    estimate = model.update(*inputs, pose, 9)
    assert estimate is not None
    assert model.last is estimate
    assert model.drop_rate == pytest.approx(estimate.error / 9)
    # The model function and the stateless one agree.
    again = estimate_tracker_error(*inputs, intrinsics, pose, 9)
    assert again.error == pytest.approx(estimate.error)
    model.reset()
    assert model.drop_rate == 0.02
    assert model.last is None


# --- Local algorithm and selector -------------------------------------------------------------


def test_lite_model_drop_is_abs_rel_against_the_server_minus_its_mean():
    server = np.full((4, 5), 2.0)
    lite = np.full((4, 5), 2.2)
    assert lite_model_drop(lite, server) == pytest.approx(0.1 - 0.04)
    assert lite_model_drop(lite, server, 0.1) == pytest.approx(0.0)
    # Server pixels outside (0, 80] m are not valid pseudo ground truth.
    server[0, :] = 0.0
    server[1, :] = 100.0
    lite[0:2, :] = 50.0
    assert lite_model_drop(lite, server, offset=0.0) == pytest.approx(0.1)
    # A lite model better than the server's own average gives a negative drop.
    assert lite_model_drop(server, server) == pytest.approx(-0.04)
    assert lite_model_drop(lite, server, 0.01, slope=0.5) == pytest.approx(0.05 - 0.01)


def test_fit_lite_drop_recovers_a_noisy_line_and_rejects_degenerate_pairs():
    rng = np.random.default_rng(3)
    abs_rel = rng.uniform(0.02, 0.3, 400)
    true_drop = 0.6 * abs_rel - 0.01 + rng.normal(0.0, 0.005, 400)
    slope, offset = fit_lite_drop(abs_rel, true_drop)
    assert slope == pytest.approx(0.6, abs=0.02)
    assert offset == pytest.approx(0.01, abs=0.003)
    with pytest.raises(ValueError, match='constant'):
        fit_lite_drop(np.full(5, 0.1), np.arange(5.0))
    with pytest.raises(ValueError, match='slope'):
        fit_lite_drop(abs_rel, -abs_rel)
    with pytest.raises(ValueError, match='two or more'):
        fit_lite_drop([0.1], [0.1])
    with pytest.raises(ValueError, match='finite'):
        fit_lite_drop([0.1, math.nan], [0.1, 0.2])


def test_offload_tracker_drop_rate_compares_the_tracked_map_with_the_server_map_of_its_frame():
    server = np.full((4, 5), 10.0)
    tracked = server * 1.2  # 20 % off everywhere
    assert offload_tracker_drop_rate(tracked, server, 10, slope=1.0, offset=0.0) == pytest.approx(
        0.02
    )
    rate = offload_tracker_drop_rate(tracked, server, 10, slope=0.8, offset=0.05)
    assert rate == pytest.approx((0.8 * 0.2 - 0.05) / 10)
    # Below the offset (the two server maps' own difference) the drop is 0, never negative.
    assert offload_tracker_drop_rate(server, server, 10, slope=1.0, offset=0.05) == 0.0
    # A pixel the warp left empty counts as 100 % off; server pixels out of range are skipped.
    holes = server.copy()
    holes[0, :] = np.nan
    out_of_range = server.copy()
    out_of_range[1, :] = 0.0
    assert offload_tracker_drop_rate(holes, server, 1, slope=1.0, offset=0.0) == pytest.approx(
        0.25
    )
    assert offload_tracker_drop_rate(
        holes, out_of_range, 1, slope=1.0, offset=0.0
    ) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match='no valid pixel'):
        offload_tracker_drop_rate(server, np.zeros_like(server), 1, slope=1.0, offset=0.0)
    with pytest.raises(ValueError, match='differ'):
        offload_tracker_drop_rate(server[:2], server, 1, slope=1.0, offset=0.0)
    with pytest.raises(ValueError, match='stride'):
        offload_tracker_drop_rate(server, server, 0, slope=1.0, offset=0.0)
    with pytest.raises(ValueError, match='slope'):
        offload_tracker_drop_rate(server, server, 1, slope=0.0, offset=0.0)


def test_selector_switches_when_the_tracker_drop_reaches_the_lite_drop():
    assert select_local_depth(0.25, 3, 1.0) == TRACKER
    assert select_local_depth(0.25, 4, 1.0) == LOCAL_ALGORITHM  # equal: switch
    assert select_local_depth(0.25, 5, 1.0) == LOCAL_ALGORITHM
    assert select_local_depth(0.5, 100, math.inf) == TRACKER
    assert select_local_depth(0.0, 1, -0.01) == LOCAL_ALGORITHM
    selector = LocalDepthSelector()
    assert selector.drop_rate == 0.02
    assert selector.select(50) == TRACKER
    selector.lite_drop = 0.1
    assert selector.select(4) == TRACKER
    selector.drop_rate = 0.5
    assert selector.select(1) == LOCAL_ALGORITHM


# --- Errors -----------------------------------------------------------------------------------


def test_invalid_inputs_raise_value_errors(static_sequence):
    intrinsics = static_sequence.config.intrinsics
    frame = static_sequence.frame(30)
    depth, rgb = frame.rendered.depth, frame.rendered.rgb
    with pytest.raises(ValueError, match='shape'):
        warp_depth(depth[:, :-1], intrinsics, np.eye(4))
    with pytest.raises(ValueError, match='float depth'):
        warp_depth(depth.astype(np.uint16), intrinsics, np.eye(4))
    with pytest.raises(ValueError, match='4×4'):
        warp_depth(depth, intrinsics, np.eye(3))
    with pytest.raises(ValueError, match='image has shape'):
        forward_warp(depth, intrinsics, np.eye(4)).apply(rgb[:-1])
    with pytest.raises(ValueError, match='flow'):
        move_by_flow(depth, np.zeros(depth.shape + (3,)))
    with pytest.raises(ValueError, match='rgb_2 has shape'):
        estimate_tracker_error(rgb, depth, rgb[:, :-1], intrinsics, np.eye(4), 6)
    with pytest.raises(ValueError, match='8-bit'):
        estimate_tracker_error(rgb.astype(np.float32), depth, rgb, intrinsics, np.eye(4), 6)
    model = DepthTrackerAccuracyModel(intrinsics)
    for stride in (0, -3, 2.5):
        with pytest.raises(ValueError, match='stride'):
            estimate_tracker_error(rgb, depth, rgb, intrinsics, np.eye(4), stride)
        with pytest.raises(ValueError, match='stride'):
            model.update(rgb, depth, rgb, np.eye(4), stride)
        with pytest.raises(ValueError, match='stride'):
            select_local_depth(0.02, stride, 0.1)
    with pytest.raises(ValueError, match='shape'):
        lite_model_drop(depth[:, :-1], depth)
    with pytest.raises(ValueError, match='offset'):
        lite_model_drop(depth, depth, math.inf)
    with pytest.raises(ValueError, match='slope'):
        lite_model_drop(depth, depth, slope=0.0)
    with pytest.raises(ValueError, match='drop rate'):
        select_local_depth(math.nan, 6, 0.1)
    with pytest.raises(ValueError, match='NaN'):
        select_local_depth(0.02, 6, math.nan)
