# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The robot-side pipeline, the latency estimator and the fast evaluator's replay."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accumo_ros import evaluate, odometry_eval
from accumo_ros.depth_tracking import LOCAL_ALGORITHM, TRACKER
from accumo_ros.odometry_model import OdometryAccuracyModel
from accumo_ros.offload_latency import OffloadLatencyEstimator, OffloadSample
from accumo_ros.offload_policies import make_policy
from accumo_ros.pipeline import DEPTH, ODOMETRY, AccumoPipeline, PipelineConfig
from accumo_ros.sequence import SequenceConfig, SyntheticSequence
from accumo_ros.sequence_bag import read_sequence_bag, write_sequence_bag

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


def _run(data, scheduler, weights=None):
    return evaluate.run_scheduler(
        data, scheduler, weights, evaluate.LatencyModel(TWO_FRAMES), OdometryAccuracyModel.load()
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
    depth_heavy = _run(data, 'accumo', (4.0, 1.0))
    odometry_heavy = _run(data, 'accumo', (1.0, 4.0))
    assert depth_heavy.offloads[DEPTH] > odometry_heavy.offloads[DEPTH]
    assert depth_heavy.offloads[ODOMETRY] < odometry_heavy.offloads[ODOMETRY]
    assert depth_heavy.decision_ms_p50 > 0.0


def test_the_tracker_model_updates_once_depth_is_six_frames_stale(data):
    result = _run(data, 'wrr:1:3')  # depth every 8 frames at 2-frame latencies
    rates = {round(rate, 6) for _, rate, _ in result.drop_rates}
    assert len(rates) > 1  # moved away from the initial 0.02


def test_a_failed_odometry_offload_restarts_the_chain(data):
    s = data.sequence
    pipeline = AccumoPipeline(
        s.intrinsics,
        make_policy('wrr:0:1', 2),
        lambda frame, _rgb: data.lite_depth[frame],
        OdometryAccuracyModel.load(),
        initial_pose=data.truth[0],
        initial_velocity=s.velocities_world[0],
    )
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
