# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The robot-side pipeline, the latency estimator and the fast evaluator's replay."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accumo_ros.geometry import rotation_angles
from accumo_ros.scheduler.mpc import MpcScheduler, TaskSpec
from accumo_ros.scheduler.offload_latency import OffloadLatencyEstimator, OffloadSample
from accumo_ros.scheduler.offload_policies import make_policy
from accumo_ros.scheduler.pipeline import (
    DEPTH,
    ODOMETRY,
    AccumoPipeline,
    DepthChoice,
    PipelineConfig,
)
from accumo_ros.simulation.sequence import SequenceConfig, SyntheticSequence
from accumo_ros.simulation.sequence_bag import read_sequence_bag, write_sequence_bag
from accumo_ros.tasks.depth_tracking import LOCAL_ALGORITHM, TRACKER
from accumo_ros.tasks.imu_filter import LevelGroundPrior
from accumo_ros.tasks.odometry_model import OdometryAccuracyModel, OdometryModelSet
from accumo_ros.tasks.visual_odometry import KeyframePolicy, VoConfig
from accumo_ros.tools import evaluate, odometry_eval

# 25 ms at 60 FPS: results usable two frames after the offload.
TWO_FRAMES = {
    'source': 'test',
    'depth': {'latency_ms': [25.0]},
    'odometry': {'latency_ms': [25.0]},
}


@pytest.fixture(scope='module')
def data(tmp_path_factory) -> evaluate.SequenceData:
    """Return a 1.5 s sequence; 'server' depth = ground truth, 'lite' = ground truth x 1.25."""
    path = tmp_path_factory.mktemp('pipeline') / 'seq'
    config = SequenceConfig(seed=5, category='high_high', duration_s=1.5, width=208, height=64)
    write_sequence_bag(SyntheticSequence(config), path)
    sequence = read_sequence_bag(path)
    server = sequence.depth.copy()
    lite = sequence.depth * np.float32(1.25)
    frames = len(server)
    return evaluate.SequenceData(
        'seq',
        sequence.category,
        sequence,
        server,
        lite,
        np.array([evaluate.abs_rel(server[i], sequence.depth[i]) for i in range(frames)]),
        np.array([evaluate.abs_rel(lite[i], sequence.depth[i]) for i in range(frames)]),
        sequence.frame_poses(),
        odometry_eval.VoCache(sequence, lambda s, index: s.depth[index]),
        {},
    )


def _run(data, scheduler, weights=None, odometry_model=None):
    return evaluate.run_scheduler(
        data,
        scheduler,
        weights,
        evaluate.LatencyModel(TWO_FRAMES),
        odometry_model or OdometryAccuracyModel.load(),
    )


# --- latency estimator --------------------------------------------------------------------------


def test_latency_frames_start_at_the_defaults_and_follow_the_measured_p90():
    estimator = OffloadLatencyEstimator((5, 4), fps=60.0, window=8)
    assert estimator.frames() == (5, 4)
    for latency in (0.030, 0.031, 0.032, 0.033, 0.034, 0.035, 0.036, 0.120):
        estimator.record(DEPTH, OffloadSample(latency))
    # p90 of the window is between 36 and 120 ms: 0.036 + 0.9 * ... -> 4.9 frames -> 5.
    assert estimator.frames()[DEPTH] == math.ceil(
        np.quantile([0.030, 0.031, 0.032, 0.033, 0.034, 0.035, 0.036, 0.120], 0.9) * 60
    )
    assert estimator.frames()[ODOMETRY] == 4  # no measurement yet


def test_a_halved_link_raises_the_latency_before_the_next_result():
    estimator = OffloadLatencyEstimator((5, 4), fps=60.0)
    # 160 kB up, 100 kB down, 20 ms server: 30.8 ms on a 200 Mbit/s, 1 ms link.
    for _ in range(4):
        estimator.record(DEPTH, OffloadSample(0.0308, 160_000, 100_000, 0.020))
    estimator.update_link(200e6, 200e6, 0.001)
    assert estimator.frames()[DEPTH] == 2
    estimator.update_link(20e6, 20e6, 0.001)  # a tenth: 125 ms -> 8 frames
    assert estimator.frames()[DEPTH] == math.ceil((0.001 + 8 * 260_000 / 20e6 + 0.020) * 60)
    estimator.update_link(math.nan, 1e6, 0.001)  # unknown: back to the measurements
    assert estimator.frames()[DEPTH] == 2
    with pytest.raises(ValueError, match='latency'):
        estimator.record(DEPTH, OffloadSample(math.nan))


# --- pipeline ----------------------------------------------------------------------------------


def test_odometry_only_schedule_matches_the_validated_fused_run(data):
    """wrr:0:1 fuses exactly what FusedOdometryRun fuses for the same offloads."""
    result = _run(data, 'wrr:0:1')
    offloads = [i for i, task in enumerate(result.offloaded) if task == ODOMETRY]
    # The chain starts at frame 0 without an upload; then every 2 frames from frame 1.
    assert offloads[:4] == [0, 1, 3, 5]
    reference = odometry_eval.FusedOdometryRun(
        data.sequence,
        data.vo,
        offloads,
        2,
        odometry_eval.imu_noise_of(data.sequence),
        PipelineConfig().keyframes,
    )
    reference.run_to(len(data.truth))
    expected = odometry_eval.kitti_errors(data.truth, reference.poses, step=6).t_err
    assert result.odometry_t_err == pytest.approx(expected, rel=1e-9)
    assert result.offloads[DEPTH] == 0


def test_round_robin_alternates_and_tracks_depth_from_server_maps(data):
    result = _run(data, 'rr')
    tasks = [task for task in result.offloaded if task >= 0]
    assert tasks[:6] == [0, 1, 0, 1, 0, 1] or tasks[:6] == [1, 0, 1, 0, 1, 0]
    # Back to back: an offload every two frames (bar the chain start of odometry).
    frames = [i for i, task in enumerate(result.offloaded) if task >= 0]
    assert max(np.diff(frames)) == 2
    # RR has no local algorithm: after the first depth result every frame is tracked.
    assert result.depth_sources[LOCAL_ALGORITHM] == 0
    assert result.depth_sources[TRACKER] >= len(result.offloaded) - 4
    # Warping the true depth a few frames is far better than the lite net's 25 % error.
    assert result.depth_abs_rel < 0.5 * float(np.mean(data.lite_error))


def test_local_only_uses_the_lite_net_and_the_imu(data):
    result = _run(data, 'la')
    assert result.offloads == (0, 0)
    assert result.depth_abs_rel == pytest.approx(float(np.mean(data.lite_error)))
    imu_only = odometry_eval.FusedOdometryRun(
        data.sequence, None, (), 0, odometry_eval.imu_noise_of(data.sequence)
    )
    imu_only.run_to(len(data.truth))
    assert result.odometry_t_err == pytest.approx(
        odometry_eval.kitti_errors(data.truth, imu_only.poses, step=6).t_err
    )


def test_accumo_gives_depth_more_offloads_when_depth_weighs_more(data):
    # A model that charges odometry from stride 4 on (the dissertation's), so that the
    # weights decide every offload.
    charged = OdometryAccuracyModel(0.01, 0.01)
    depth_heavy = _run(data, 'accumo', (4.0, 1.0), charged)
    odometry_heavy = _run(data, 'accumo', (1.0, 4.0), charged)
    assert depth_heavy.offloads[DEPTH] > odometry_heavy.offloads[DEPTH]
    assert depth_heavy.offloads[ODOMETRY] < odometry_heavy.offloads[ODOMETRY]
    assert depth_heavy.decision_ms_p50 > 0.0


def test_accumo_buys_no_odometry_stride_its_model_counts_free(data):
    free = OdometryAccuracyModel.load().base_stride
    charged = _run(data, 'accumo', (1.0, 4.0), OdometryAccuracyModel(0.01, 0.01))
    packaged = _run(data, 'accumo', (1.0, 4.0))

    def odometry_gaps(result):
        return np.diff([i for i, task in enumerate(result.offloaded) if task in (ODOMETRY, 2)])

    # Odometry is free for longer than the evaluator's stride limit (scaled to these 2-frame
    # latencies) allows it to wait: every odometry offload is one the limit forced.
    limit = math.ceil(
        evaluate.DEFAULT_STRIDE_LIMITS[ODOMETRY] * 4 / sum(evaluate.STRIDE_LIMIT_LATENCIES)
    )
    assert limit < free
    assert np.median(odometry_gaps(packaged)) == limit
    assert np.median(odometry_gaps(charged)) < limit / 2
    assert packaged.offloads[DEPTH] > charged.offloads[DEPTH]


def test_the_tracker_model_updates_once_depth_is_six_frames_stale(data):
    result = _run(data, 'wrr:1:3')  # depth every 8 frames at 2-frame latencies
    rates = {round(rate, 6) for _, rate, _ in result.drop_rates}
    assert len(rates) > 1  # moved away from the initial 0.02


def _odometry_only_pipeline(data, config: PipelineConfig | None = None) -> AccumoPipeline:
    """Return a pipeline that offloads odometry only, started at the true pose."""
    s = data.sequence
    return AccumoPipeline(
        s.intrinsics,
        make_policy('wrr:0:1', 2),
        lambda frame, _rgb: data.lite_depth[frame],
        OdometryAccuracyModel.load(),
        initial_pose=data.truth[0],
        initial_velocity=s.velocities_world[0],
        config=config,
    )


def test_a_failed_odometry_offload_restarts_the_chain(data):
    s = data.sequence
    pipeline = _odometry_only_pipeline(data)
    imu = 0
    for frame in range(3):
        while s.imu_times[imu] <= s.frame_times[frame] + 1e-9:
            pipeline.add_imu(s.imu_times[imu], s.angular_velocity[imu], s.linear_acceleration[imu])
            imu += 1
        pipeline.begin_frame(frame, s.frame_times[frame], s.rgb[frame])
        if not pipeline.outstanding:
            pipeline.decide()
    assert pipeline.outstanding == (ODOMETRY,)
    assert pipeline.odometry_pair(1)[:2] == (0, 1)
    with pytest.raises(RuntimeError, match='outstanding'):
        pipeline.decide()
    pipeline.offload_failed(ODOMETRY, 1)
    assert pipeline.outstanding == ()
    assert pipeline.last_offloads == (None, 0)  # no pose arrived for frame 1
    pipeline.decide()  # frame 2 pairs with the failed frame 1, where the chain restarted
    assert pipeline.odometry_pair(2)[:2] == (1, 2)


def test_the_odometry_model_follows_the_odometry_latency(data):
    s = data.sequence
    fast = OdometryAccuracyModel(0.01, 0.0)
    slow = OdometryAccuracyModel(
        0.02, 0.0, window_frames=56, base_stride=14, raised_stride=28, latency_frames=14
    )
    pipeline = AccumoPipeline(
        s.intrinsics,
        make_policy('rr', 2),
        lambda frame, _rgb: data.lite_depth[frame],
        OdometryModelSet([fast, slow]),
        initial_pose=data.truth[0],
        initial_velocity=s.velocities_world[0],
        latency_frames=(5, 4),
    )
    assert pipeline.odometry_model is fast
    pipeline.add_imu(s.imu_times[0], s.angular_velocity[0], s.linear_acceleration[0])
    pipeline.begin_frame(0, s.frame_times[0], s.rgb[0])
    assert pipeline.model_estimates()[ODOMETRY].drop_rate == pytest.approx(0.01 / 4)
    assert pipeline.model_estimates()[ODOMETRY].free_stride == 4
    pipeline.set_latency_frames((14, 15))  # the link slowed down
    assert pipeline.odometry_model is slow
    # Strides up to the one the model raised from cost nothing it measured.
    assert pipeline.model_estimates()[ODOMETRY].drop_rate == pytest.approx(0.02 / 14)
    assert pipeline.model_estimates()[ODOMETRY].free_stride == 14
    pipeline.set_latency_frames((5, 4))
    assert pipeline.odometry_model is fast


def test_the_odometry_model_bounds_the_mpc_stride(data):
    """The MPC plans no odometry stride past the longest the model in use measured."""
    s = data.sequence
    fast = OdometryAccuracyModel(0.01, 0.0, window_frames=96, base_stride=32, raised_stride=48)
    slow = OdometryAccuracyModel(
        0.02,
        0.0,
        window_frames=112,
        base_stride=42,
        raised_stride=56,
        latency_frames=14,
        stride_limit=56,
    )
    tasks = [TaskSpec('depth', 5, 25), TaskSpec('odometry', 4, 26)]
    pipeline = AccumoPipeline(
        s.intrinsics,
        make_policy('accumo', 2, MpcScheduler(tasks)),
        lambda frame, _rgb: data.lite_depth[frame],
        OdometryModelSet([fast, slow]),
        initial_pose=data.truth[0],
        initial_velocity=s.velocities_world[0],
        latency_frames=(14, 15),
    )
    pipeline.add_imu(s.imu_times[0], s.angular_velocity[0], s.linear_acceleration[0])
    pipeline.begin_frame(0, s.frame_times[0], s.rgb[0])
    pipeline.decide()
    # 26 frames at (5, 4) scale to 84 at (14, 15); the slow model measured up to 56.
    assert [t.stride_limit for t in pipeline.policy.scheduler.tasks] == [81, 56]
    for task in pipeline.outstanding:
        pipeline.offload_failed(task, 0)
    pipeline.set_latency_frames((5, 4))  # the fast model states no limit: the configured one
    pipeline.begin_frame(1, s.frame_times[1], s.rgb[1])
    pipeline.decide()
    assert [t.stride_limit for t in pipeline.policy.scheduler.tasks] == [25, 26]


def _stationary_pipeline(
    data, velocity: np.ndarray, config: PipelineConfig | None = None
) -> AccumoPipeline:
    """Return a depth-only pipeline whose filters believe the camera moves at ``velocity``."""
    s = data.sequence
    return AccumoPipeline(
        s.intrinsics,
        make_policy('wrr:1:0', 2),
        lambda frame, _rgb: data.lite_depth[frame],
        OdometryAccuracyModel.load(),
        initial_pose=np.eye(4),
        initial_velocity=velocity,
        config=config,
    )


def _feed_still_imu(pipeline: AccumoPipeline, t0: float, t1: float, rate_hz: float = 240.0):
    """Feed IMU samples of a camera at rest (specific force opposes gravity) in (t0, t1]."""
    for t in np.arange(t0 + 1.0 / rate_hz, t1 + 1e-9, 1.0 / rate_hz):
        pipeline.add_imu(float(t), np.zeros(3), np.array([0.0, 0.0, 9.81]))


def test_the_depth_warp_integrates_from_the_fused_state_not_the_drifting_imu_only_one(data):
    # Both filters start believing 1 m/s; a VO fix then tells the fused one the camera is
    # still (set here directly). The warp after a depth offload must follow the fused state.
    pipeline = _stationary_pipeline(data, np.array([1.0, 0.0, 0.0]))
    state = pipeline.fusion.filter.snapshot()
    state.velocity[:] = 0.0
    pipeline.fusion.filter.restore(state)
    pipeline.add_imu(0.0, np.zeros(3), np.array([0.0, 0.0, 9.81]))
    rgb = data.sequence.rgb[0]
    pipeline.begin_frame(0, 0.0, rgb)
    assert pipeline.decide().tasks == (DEPTH,)
    _feed_still_imu(pipeline, 0.0, 0.05)
    pipeline.depth_result(0, data.server_depth[0])
    _feed_still_imu(pipeline, 0.05, 0.2)
    pipeline.begin_frame(12, 0.2, rgb)
    moved = np.linalg.norm(pipeline.warp_pose()[:3, 3])
    imu_only_moved = np.linalg.norm(pipeline.imu_only.filter.pose[:3, 3])
    assert imu_only_moved == pytest.approx(0.2, abs=1e-3)  # what the release would warp by
    assert moved < 1e-6
    # A still camera: the warped map is the server map (bar pixels on the image border).
    warped = pipeline.render_depth(DepthChoice(TRACKER, 0, 12))
    inner = (slice(2, -2), slice(2, -2))
    np.testing.assert_allclose(warped[inner], data.server_depth[0][inner], rtol=1e-4)


def test_a_warp_that_leaves_nothing_in_view_falls_back_to_the_lite_net(data):
    # The warp's own state believes the camera went 100 m forward: every point of the server
    # map is behind it. The lite net's drop is set so high that the selector wants the tracker.
    config = PipelineConfig(lite_drop_offset=-10.0)
    pipeline = _stationary_pipeline(data, np.zeros(3), config)
    pipeline.add_imu(0.0, np.zeros(3), np.array([0.0, 0.0, 9.81]))
    rgb = data.sequence.rgb[0]
    pipeline.begin_frame(0, 0.0, rgb)
    pipeline.decide()
    pipeline.depth_result(0, data.server_depth[0])
    warp = pipeline._depth.warp.filter
    state = warp.snapshot()
    # Forward along the camera's optical axis (body x) at 500 m/s: 100 m in 0.2 s.
    state.velocity[:] = pipeline.imu_only.filter.rotation @ np.array([500.0, 0.0, 0.0])
    warp.restore(state)
    _feed_still_imu(pipeline, 0.0, 0.2)
    pipeline.begin_frame(12, 0.2, rgb)
    assert np.isnan(pipeline.warped_depth()).all()
    choice = pipeline.select_depth()
    assert choice.source == LOCAL_ALGORITHM
    assert pipeline.warp_failures == 1
    np.testing.assert_array_equal(pipeline.render_depth(choice), data.lite_depth[12])


@pytest.mark.parametrize('tracker_model', ['offload', 'flow'])
def test_the_offload_tracker_model_measures_the_tracked_map_against_the_next_result(
    data, tracker_model
):
    # A still camera: the tracker's map of frame 12 is the server map of frame 0. The server
    # map of frame 12 then says the scene is 10 % farther: the tracker was ~9 % off.
    config = PipelineConfig(
        tracker_model=tracker_model, tracker_offload_slope=1.0, tracker_offload_offset=0.01
    )
    pipeline = _stationary_pipeline(data, np.zeros(3), config)
    pipeline.add_imu(0.0, np.zeros(3), np.array([0.0, 0.0, 9.81]))
    rgb = data.sequence.rgb[0]
    pipeline.begin_frame(0, 0.0, rgb)
    assert pipeline.decide().tasks == (DEPTH,)
    pipeline.depth_result(0, data.server_depth[0])
    _feed_still_imu(pipeline, 0.0, 0.2)
    pipeline.begin_frame(12, 0.2, rgb)
    assert pipeline.decide().tasks == (DEPTH,)
    initial = pipeline.tracker_model.drop_rate
    pipeline.depth_result(12, data.server_depth[0] * np.float32(1.1))
    if tracker_model == 'offload':
        # |1 - 1.1| / 1.1 on all but the border pixels, minus the offset, over 12 frames.
        expected = (0.1 / 1.1 - 0.01) / 12
        assert pipeline.tracker_model.drop_rate == pytest.approx(expected, rel=0.05)
        assert not pipeline.update_accuracy_models()  # no flow runs in this mode
    else:
        assert pipeline.tracker_model.drop_rate == initial  # the flow model runs per frame


def test_the_pipeline_refuses_an_unknown_tracker_model():
    with pytest.raises(ValueError, match='tracker_model'):
        PipelineConfig(tracker_model='oracle')
    with pytest.raises(ValueError, match='tracker_offload_slope'):
        PipelineConfig(tracker_offload_slope=0.0)
    with pytest.raises(ValueError, match='odometry_robust_distance_sq'):
        PipelineConfig(odometry_robust_distance_sq=-1.0)


def test_the_odometry_filter_gets_the_configured_robust_weight_and_ground_prior(data):
    """The odometry filter takes both settings; the IMU-only filter dead-reckons plainly."""
    prior = LevelGroundPrior(tilt_sigma_rad=0.03)
    config = PipelineConfig(odometry_robust_distance_sq=5.0, level_ground=prior)
    pipeline = _stationary_pipeline(data, np.zeros(3), config)
    assert pipeline.fusion.filter.robust_distance_sq == 5.0
    assert pipeline.fusion.filter.ground_prior == prior
    assert pipeline.imu_only.filter.robust_distance_sq is None
    assert pipeline.imu_only.filter.ground_prior is None
    plain = PipelineConfig(odometry_robust_distance_sq=None, level_ground=None)
    off = _stationary_pipeline(data, np.zeros(3), plain)
    assert off.fusion.filter.robust_distance_sq is None
    assert off.fusion.filter.ground_prior is None


def test_abs_rel_counts_pixels_without_a_prediction_as_fully_wrong():
    truth = np.full((2, 2), 4.0)
    predicted = np.array([[4.0, np.nan], [4.0, 4.0]])
    assert evaluate.abs_rel(predicted, truth) == pytest.approx(0.25)
    assert evaluate.abs_rel(np.full((2, 2), np.nan), truth) == pytest.approx(1.0)


def _up_to_the_second_odometry_offload(data):
    """Return an odometry-only pipeline that offloaded frame 0 and is at frame 11, undecided."""
    s = data.sequence
    pipeline = _odometry_only_pipeline(data)
    imu = 0
    for frame in range(12):
        while s.imu_times[imu] <= s.frame_times[frame] + 1e-9:
            pipeline.add_imu(s.imu_times[imu], s.angular_velocity[imu], s.linear_acceleration[imu])
            imu += 1
        pipeline.begin_frame(frame, s.frame_times[frame], s.rgb[frame])
        if frame == 0:
            pipeline.decide()
    return pipeline


def _odometry_pipeline_to_frame_11(
    data, max_rotation_rad: float, first_pair_fails: bool
) -> AccumoPipeline:
    """Run an odometry-only pipeline to frame 11, ending every frame as the node does.

    Offloads at frames 0 (the chain's start) and 3; the pair (0, 3) arrives at frame 5,
    failed or as the true relative pose with 1000 inliers; at frame 11 the next offload is
    decided.
    """
    s = data.sequence
    keyframes = KeyframePolicy(max_rotation_rad=max_rotation_rad)
    pipeline = _odometry_only_pipeline(data, PipelineConfig(keyframes=keyframes))
    imu = 0
    for frame in range(12):
        while s.imu_times[imu] <= s.frame_times[frame] + 1e-9:
            pipeline.add_imu(s.imu_times[imu], s.angular_velocity[imu], s.linear_acceleration[imu])
            imu += 1
        if frame == 5:
            if first_pair_fails:
                pipeline.odometry_result(3, None, None)
            else:
                relative = np.linalg.inv(data.truth[0]) @ data.truth[3]
                covariance = np.diag([0.01**2] * 3 + [np.radians(0.5) ** 2] * 3)
                assert pipeline.odometry_result(3, relative, covariance, 1000)
        pipeline.begin_frame(frame, s.frame_times[frame], s.rgb[frame])
        if frame in (0, 3, 11):
            pipeline.decide()
        pipeline.end_frame()
    return pipeline


def test_a_turn_after_a_failed_pair_moves_the_vo_keyframe_between_offloads(data):
    turned = rotation_angles((data.truth[3][:3, :3].T @ data.truth[11][:3, :3])[None])[0]
    assert turned > np.radians(1.5)  # the high/high room turns over these 8 frames
    pipeline = _odometry_pipeline_to_frame_11(data, turned / 3, first_pair_fails=True)
    first, second, first_rgb = pipeline.odometry_pair(11)
    assert 3 < first < second == 11
    assert pipeline.keyframe_turns >= 1
    np.testing.assert_array_equal(first_rgb, data.sequence.rgb[first])
    # The pair turns less than the limit (plus one frame's turn).
    pair_turn = rotation_angles((data.truth[first][:3, :3].T @ data.truth[11][:3, :3])[None])
    assert pair_turn[0] < turned / 3 + np.radians(1.0)
    # Not while the pair is in flight: it measures from the filter's clone.
    turns = pipeline.keyframe_turns
    pipeline.end_frame()
    assert pipeline.keyframe_turns == turns
    # Without the limit, the pair spans the whole turn.
    no_limit = _odometry_pipeline_to_frame_11(data, 0.0, first_pair_fails=True)
    assert no_limit.odometry_pair(11)[:2] == (3, 11)


def test_a_turn_after_a_good_pair_leaves_the_keyframe(data):
    turned = rotation_angles((data.truth[3][:3, :3].T @ data.truth[11][:3, :3])[None])[0]
    pipeline = _odometry_pipeline_to_frame_11(data, turned / 3, first_pair_fails=False)
    assert pipeline.keyframe_turns == 0
    # The good pair's second frame is the keyframe (the pair was 3 frames; kept clone: 0).
    assert pipeline.odometry_pair(11)[0] in (0, 3)


def test_keyframes_moved_by_turns_match_the_validated_fused_run(data):
    """With gaps between odometry offloads (rr), both move the keyframe at the same frames."""
    # Every pair is weak (no pair has a million inliers): the keyframe moves on every turn.
    keyframes = KeyframePolicy(min_inliers=10**6, max_rotation_rad=np.radians(1.0))
    config = PipelineConfig(fps=data.fps, keyframes=keyframes)
    result = evaluate.run_scheduler(
        data,
        'rr',
        None,
        evaluate.LatencyModel(TWO_FRAMES),
        OdometryAccuracyModel.load(),
        0,
        config,
    )
    offloads = [i for i, task in enumerate(result.offloaded) if task == ODOMETRY]
    reference = odometry_eval.FusedOdometryRun(
        data.sequence, data.vo, offloads, 2, odometry_eval.imu_noise_of(data.sequence), keyframes
    )
    reference.run_to(len(data.truth))
    assert reference.keyframe_turns >= 3
    # Each pair after a turn starts between two offloads, not at one.
    firsts = {first for first, _, _ in reference.pair_results}
    assert firsts - set(offloads)
    expected = odometry_eval.kitti_errors(data.truth, reference.poses, step=6).t_err
    assert result.odometry_t_err == pytest.approx(expected, rel=1e-9)


def test_the_odometry_offload_carries_the_gyro_rotation_the_evaluator_uses(data):
    pipeline = _up_to_the_second_odometry_offload(data)
    pipeline.decide()
    first, second, _ = pipeline.odometry_pair(11)
    assert (first, second) == (0, 11)
    prior = pipeline.odometry_rotation_prior(11)
    # The evaluator's VO cache gives the pair the same prior as the node sends.
    np.testing.assert_allclose(prior, data.vo.rotation_prior(0, 11), atol=1e-12)
    truth = data.truth[0][:3, :3].T @ data.truth[11][:3, :3]
    assert rotation_angles((prior.T @ truth)[None])[0] < np.radians(0.5)


def test_the_odometry_offload_carries_the_filters_predicted_translation(data):
    pipeline = _up_to_the_second_odometry_offload(data)
    predicted = pipeline.fusion.filter.position_in_clone()
    sigma = pipeline.fusion.filter.position_in_clone_sigma()
    pipeline.decide()
    # Taken when the offload was decided: the filter's position since the keyframe, and a
    # gate that grows with its uncertainty.
    position, gate = pipeline.odometry_translation_prior(11)
    np.testing.assert_allclose(position, predicted)
    assert 0.0 < sigma < 0.1
    assert gate == pytest.approx(VoConfig().translation_gate(predicted, sigma))
    truth = (np.linalg.inv(data.truth[0]) @ data.truth[11])[:3, 3]
    assert np.linalg.norm(predicted - truth) < gate


def test_the_evaluator_sends_the_translation_prior_only_when_asked(data):
    plain = odometry_eval.VoCache(data.sequence, lambda _s, i: data.server_depth[i])
    guided = odometry_eval.VoCache(
        data.sequence, lambda _s, i: data.server_depth[i], translation_prior=True
    )
    sideways = (np.array([0.0, 3.0, 0.0]), 0.5)
    # Without translation_prior the prediction is ignored: the same (cached) result.
    assert plain(0, 11, sideways) is plain(0, 11)
    # With it, each prediction is a pair of its own (what VO does with it: test_visual_odometry).
    far = guided(0, 11, sideways)
    assert guided(0, 11, (sideways[0].copy(), 0.5)) is far
    assert guided(0, 11) is not far
    assert guided(0, 11, (sideways[0], 0.6)) is not far
    assert not odometry_eval.VoCache(
        data.sequence, None, False, translation_prior=True
    ).translation_prior
