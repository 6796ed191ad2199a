# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""ARISE's drop-rate estimator, SLA arithmetic and batch latency profiles."""

import pytest

from arise_ros.accuracy import (
    DropRateEstimator,
    Reference,
    frames_for,
    mean_stride,
    regular_schedule_drop,
)
from arise_ros.latency_profile import (
    BatchLatencyProfile,
    ProfileError,
    load_profile,
    measure_profile,
    save_profile,
)


def test_the_estimator_divides_the_drop_by_the_stride_and_keeps_the_latest():
    estimator = DropRateEstimator()
    assert estimator.rate is None
    # Fig. 3.9: the tracked result for frame f + L, carried L = 8 frames, is 0.04 off the
    # server's result for the same frame.
    assert estimator.observe(0.04, 8) == pytest.approx(0.005)
    assert estimator.observe(0.01, 5) == pytest.approx(0.002)
    assert estimator.samples == 2


def test_the_two_point_estimator_takes_the_slope_and_leaves_the_offset_out():
    estimator = DropRateEstimator()
    # Tracked over 4 frames the map is 0.03 off, over 8 frames 0.05: 0.005 per frame; the
    # 0.01 both share (two server maps of one scene differ) is not a drop that grows.
    assert estimator.observe_two(0.03, 4, 0.05, 8) == pytest.approx(0.005)
    # A far map closer than the near one (noise) gives a rate of 0, not a negative one.
    assert DropRateEstimator().observe_two(0.05, 4, 0.04, 8) == 0.0
    with pytest.raises(ValueError, match='near < far'):
        estimator.observe_two(0.03, 8, 0.05, 8)


def test_a_smoothed_estimator_moves_part_of_the_way():
    estimator = DropRateEstimator(smoothing=0.5, initial_rate=0.004)
    assert estimator.observe(0.02, 10) == pytest.approx(0.003)


@pytest.mark.parametrize(('drop', 'stride'), [(-0.1, 3), (float('nan'), 3), (0.1, 0)])
def test_the_estimator_refuses_impossible_measurements(drop, stride):
    estimator = DropRateEstimator()
    with pytest.raises(ValueError, match='stride|drop'):
        estimator.observe(drop, stride)
    assert estimator.rate is None


def test_sla_drop_of_a_regular_schedule_is_relative_to_the_reference():
    # strides e2e .. e2e + oi - 1 = 3..6, mean 4.5; the reference (every frame, 2 late) is 2
    assert mean_stride(3, 4) == 4.5
    reference = Reference(e2e_frames=2, interval=1)
    assert regular_schedule_drop(0.01, 3, 4, reference) == pytest.approx(0.01 * 4.5 - 0.02)
    assert regular_schedule_drop(0.01, 2, 1, reference) == 0.0
    # a result on a frame boundary is usable on that frame
    assert frames_for(0.1, 30.0) == 3
    assert frames_for(0.101, 30.0) == 4
    assert frames_for(0.0, 30.0) == 1


def test_profiles_hold_every_batch_size_from_one(tmp_path):
    profile = BatchLatencyProfile('depth', {1: 0.01, 2: 0.015}, 'measured on test')
    assert profile.max_batch == 2
    assert profile.throughput(2) == pytest.approx(2 / 0.015)
    path = tmp_path / 'profile.yaml'
    save_profile(profile, path)
    assert load_profile(path) == profile
    with pytest.raises(ProfileError, match='1..N'):
        BatchLatencyProfile('depth', {1: 0.01, 3: 0.02}, 'x')
    with pytest.raises(ProfileError, match='positive'):
        BatchLatencyProfile('depth', {1: 0.0}, 'x')
    with pytest.raises(ProfileError, match='batch sizes 1..2'):
        profile.latency(3)


def test_a_malformed_profile_file_is_refused_with_its_name(tmp_path):
    path = tmp_path / 'bad.yaml'
    path.write_text('format: something-else\n')
    with pytest.raises(ProfileError, match='bad.yaml'):
        load_profile(path)
    path.write_text('format: arise_batch_latency/1\nmodel: m\nlatency_s: {1: fast}\n')
    with pytest.raises(ProfileError, match='latency_s'):
        load_profile(path)


def test_measuring_a_profile_keeps_the_median_and_never_gets_faster_with_size():
    ticks = iter(range(1000))
    durations = {1: [5, 5, 90, 5, 5], 2: [4, 4, 4, 4, 4], 3: [9, 9, 9, 9, 9]}
    now = [0.0]
    calls = {size: 0 for size in durations}

    def run_batch(size: int) -> None:
        calls[size] += 1
        if calls[size] > 1:  # the first call is the warm-up
            now[0] += durations[size][calls[size] - 2] / 1000.0
        next(ticks)

    profile = measure_profile(
        'm', run_batch, 3, 'fake clock', repeats=5, warmup=1, clock=lambda: now[0]
    )
    assert profile.latency(1) == pytest.approx(0.005)  # the 90 ms outlier is ignored
    assert profile.latency(2) == pytest.approx(0.005)  # 4 ms measured, lifted to batch 1's
    assert profile.latency(3) == pytest.approx(0.009)
