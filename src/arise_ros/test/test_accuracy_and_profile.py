# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""ARISE's drop-rate estimator, SLA arithmetic and batch latency profiles."""

import math
import random

import pytest

from arise_ros.accuracy import (
    DropRateEstimator,
    ProbedDropRateEstimator,
    Reference,
    StrideRegressionEstimator,
    frames_for,
    mean_stride,
    regular_schedule_drop,
)
from arise_ros.latency_profile import (
    BatchLatencyProfile,
    ProfileError,
    load_profile,
    measure_profile,
    observed_scale,
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


def test_the_probed_estimator_measures_growth_above_the_reference_and_not_the_floor():
    # A floor of 0.015 (two server maps of one scene differ) plus 0.003 per frame, with
    # noise; the robot offloads every 6 frames and every 8th offload brings a probe 2 frames
    # later. The SLA counts the drop above the reference (stride 2), so the rate is 0.003.
    rng = random.Random(11)
    estimator = ProbedDropRateEstimator(reference_stride=2, probe_every=8)
    probes = 0
    for offload in range(1, 200):
        estimator.observe_result(
            (0.015 + 0.003 * stride + rng.gauss(0.0, 0.002), stride) for stride in (6, 12, 18)
        )
        if estimator.wants_probe(offload, interval=6):
            probes += 1
            estimator.observe_probe(0.015 + 0.003 * 2 + rng.gauss(0.0, 0.002))
    assert estimator.rate == pytest.approx(0.003, rel=0.15)
    assert estimator.reference_drop == pytest.approx(0.021, abs=0.002)
    assert probes == pytest.approx(199 / 8, abs=2)
    # The one-pair rate of the same scene counts the floor: 0.015 / 6 + 0.003 = 0.0055.
    assert DropRateEstimator().observe(0.015 + 0.003 * 6, 6) == pytest.approx(0.0055)


def test_the_probed_estimator_is_safe_until_it_knows_the_reference_drop():
    estimator = ProbedDropRateEstimator(reference_stride=2, probe_every=8)
    assert estimator.rate is None
    assert estimator.wants_probe(1, interval=6)  # the first chance, not the 8th offload
    assert estimator.observe_result([(0.04, 8)]) == pytest.approx(0.005)  # drop / stride
    assert estimator.reference_drop is None
    estimator.observe_probe(0.02)
    assert not estimator.wants_probe(5, interval=6)
    assert estimator.wants_probe(8, interval=6)
    # A short interval brings reference pairs for free: no probe is needed.
    assert not estimator.wants_probe(8, interval=2)


def test_the_probed_estimator_takes_the_chord_from_the_longest_stride_in_range():
    # A time constant far under a frame: each chord replaces the estimate.
    estimator = ProbedDropRateEstimator(
        reference_stride=2, time_constant=1e-3, floor_smoothing=1.0, longest_stride=12
    )
    # An interval of 2: the pair at stride 2 is the reference's drop; the chord from it to
    # the longest stride within 12 (10) is the rate; stride 20 (the flat end) is left out.
    rate = estimator.observe_result([(0.02, 2), (0.036, 10), (0.04, 20)])
    assert estimator.reference_drop == pytest.approx(0.02)
    assert rate == pytest.approx((0.036 - 0.02) / 8)
    # A stride under the reference + 2 would be a chord over a frame: the one-pair rate.
    assert estimator.observe_result([(0.03, 3)]) == pytest.approx(0.01)
    # Only strides beyond the range: the shortest of them.
    assert estimator.observe_result([(0.05, 30), (0.045, 14)]) == pytest.approx(0.025 / 12)
    # A map tracked further that is closer than the reference (noise) is rate 0.
    assert estimator.observe_result([(0.01, 6)]) == 0.0


def test_the_probed_estimator_smooths_over_frames_not_results():
    # Two robots see the same step in their scene's rate, one every 4 frames, one every 24:
    # after 240 frames (4 s at 60 fps) both have moved the same share of the way.
    moved = []
    for interval in (4, 24):
        estimator = ProbedDropRateEstimator(reference_stride=2, time_constant=120.0)
        estimator.observe_probe(0.02)
        estimator.observe_result([(0.02 + 0.002 * (interval - 2), interval)])
        for _ in range(240 // interval):
            estimator.observe_result([(0.02 + 0.006 * (interval - 2), interval)])
        moved.append((estimator.rate - 0.002) / (0.006 - 0.002))
    assert moved[0] == pytest.approx(1.0 - math.exp(-2.0), abs=0.01)
    assert moved[1] == pytest.approx(moved[0], abs=0.01)


@pytest.mark.parametrize(
    'pairs', [[], [(-0.1, 3)], [(float('nan'), 3)], [(0.1, 0)], [(0.02, 4), (0.1, 2.5)]]
)
def test_the_probed_estimator_refuses_impossible_results_and_keeps_its_state(pairs):
    estimator = ProbedDropRateEstimator(time_constant=1e-3)
    estimator.observe_result([(0.02, 4)])
    with pytest.raises(ValueError, match='stride|drop|pair'):
        estimator.observe_result(pairs)
    assert estimator.rate == pytest.approx(0.005)
    assert estimator.samples == 1
    with pytest.raises(ValueError, match='drop'):
        estimator.observe_probe(float('inf'))
    assert estimator.reference_drop is None


@pytest.mark.parametrize(
    'kwargs',
    [
        {'reference_stride': 0},
        {'time_constant': 0.0},
        {'time_constant': float('nan')},
        {'floor_smoothing': 1.5},
        {'longest_stride': 3},
        {'probe_every': True},
    ],
)
def test_the_probed_estimator_refuses_bad_settings(kwargs):
    with pytest.raises(ValueError, match='must be'):
        ProbedDropRateEstimator(**kwargs)


def test_the_regression_recovers_slope_and_floor_from_noisy_linear_drops():
    # What a robot measures: a floor of 0.015 (two server maps of one scene differ) plus
    # 0.003 per frame of stride, with noise, at the strides of its last results (oi, 2·oi,
    # 3·oi for oi = 6).
    rng = random.Random(7)
    estimator = StrideRegressionEstimator(history=60)
    for _ in range(20):
        estimator.observe_pairs(
            (0.015 + 0.003 * stride + rng.gauss(0.0, 0.002), stride) for stride in (6, 12, 18)
        )
    assert estimator.rate == pytest.approx(0.003, rel=0.1)
    assert estimator.intercept == pytest.approx(0.015, abs=0.003)
    assert estimator.samples == 60
    # The dissertation's one pair counts the floor as rate: 0.015 / 6 + 0.003 = 0.0055.
    assert DropRateEstimator().observe(0.015 + 0.003 * 6, 6) == pytest.approx(0.0055)


def test_the_regression_keeps_a_bounded_history_and_follows_a_new_scene():
    estimator = StrideRegressionEstimator(history=4)
    for stride in (4, 8, 4, 8, 4, 8):
        estimator.observe(0.01 * stride, stride)  # a fast scene, no floor
    for stride in (4, 8, 4, 8):
        estimator.observe(0.01 + 0.002 * stride, stride)  # then a slow one
    assert len(estimator.pairs) == 4
    assert estimator.samples == 10
    assert estimator.rate == pytest.approx(0.002)
    assert estimator.intercept == pytest.approx(0.01)


def test_the_regression_falls_back_to_the_line_through_the_origin():
    # One stride only: the slope is not identifiable, the one-pair rate (an overestimate).
    estimator = StrideRegressionEstimator()
    assert estimator.rate is None
    assert estimator.observe(0.04, 8) == pytest.approx(0.005)
    assert estimator.intercept == 0.0
    # A negative floor is noise: the line is refitted through the origin.
    through_origin = StrideRegressionEstimator().observe_two(0.01, 4, 0.05, 8)
    assert through_origin == pytest.approx((4 * 0.01 + 8 * 0.05) / (16 + 64))
    # A falling line gives rate 0, or min_fraction of the through-origin rate.
    assert StrideRegressionEstimator().observe_two(0.05, 4, 0.04, 8) == 0.0
    lifted = StrideRegressionEstimator(min_fraction=0.5).observe_two(0.05, 4, 0.04, 8)
    assert lifted == pytest.approx(0.5 * (4 * 0.05 + 8 * 0.04) / 80)


def test_the_regression_and_the_two_point_slope_agree_on_two_pairs():
    regression = StrideRegressionEstimator()
    assert regression.observe_two(0.03, 4, 0.05, 8) == pytest.approx(0.005)
    assert regression.intercept == pytest.approx(0.01)


@pytest.mark.parametrize(
    ('drop', 'stride'),
    [(-0.1, 3), (float('nan'), 3), (float('inf'), 3), (0.1, 0), (0.1, 2.5), (0.1, True)],
)
def test_the_regression_refuses_impossible_measurements(drop, stride):
    estimator = StrideRegressionEstimator()
    estimator.observe(0.02, 4)
    with pytest.raises(ValueError, match='stride|drop'):
        estimator.observe(drop, stride)
    # a batch with one bad pair keeps none of it
    with pytest.raises(ValueError, match='stride|drop'):
        estimator.observe_pairs([(0.03, 6), (drop, stride)])
    assert estimator.pairs == ((4, 0.02),)
    assert estimator.rate == pytest.approx(0.005)


@pytest.mark.parametrize(
    ('kwargs', 'match'),
    [
        ({'history': 1}, 'history'),
        ({'history': 3.0}, 'history'),
        ({'min_spread': 0}, 'min_spread'),
        ({'min_fraction': 1.5}, 'min_fraction'),
        ({'min_fraction': float('nan')}, 'min_fraction'),
        ({'initial_rate': -0.1}, 'initial_rate'),
    ],
)
def test_the_regression_refuses_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        StrideRegressionEstimator(**kwargs)
    with pytest.raises(ValueError, match='at least one'):
        StrideRegressionEstimator().observe_pairs([])
    with pytest.raises(ValueError, match='near < far'):
        StrideRegressionEstimator().observe_two(0.03, 8, 0.05, 8)


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


def _fake_run(durations_ms: dict[int, list[float]]):
    """Return run_batch and a clock: size n's k-th timed run takes durations_ms[n][k]."""
    now = [0.0]
    calls = dict.fromkeys(durations_ms, 0)

    def run_batch(size: int) -> None:
        calls[size] += 1
        if calls[size] > 1:  # the first call is the warm-up
            now[0] += durations_ms[size][calls[size] - 2] / 1000.0

    return run_batch, lambda: now[0]


def test_a_monotone_profile_keeps_the_median_and_never_gets_faster_with_size():
    run_batch, clock = _fake_run({1: [5, 5, 90, 5, 5], 2: [4, 4, 4, 4, 4], 3: [9, 9, 9, 9, 9]})
    profile = measure_profile(
        'm', run_batch, 3, 'fake clock', repeats=5, warmup=1, clock=clock, shape='monotone'
    )
    assert profile.latency(1) == pytest.approx(0.005)  # the 90 ms outlier is ignored
    assert profile.latency(2) == pytest.approx(0.005)  # 4 ms measured, lifted to batch 1's
    assert profile.latency(3) == pytest.approx(0.009)


def test_a_line_profile_leaves_no_free_batch_slot_from_noise():
    # Medians 10, 17, 16 (noise), 25 ms: a monotone profile would make batch 3 free.
    run_batch, clock = _fake_run(
        {1: [10, 10, 10], 2: [17, 17, 17], 3: [16, 16, 90], 4: [25, 25, 25]}
    )
    profile = measure_profile('m', run_batch, 4, 'fake clock', repeats=3, warmup=1, clock=clock)
    latencies = [profile.latency(n) for n in range(1, 5)]
    assert all(b - a > 0.003 for a, b in zip(latencies, latencies[1:], strict=False))
    assert latencies[0] == pytest.approx(0.0105, abs=0.002)
    assert latencies[3] == pytest.approx(0.0245, abs=0.002)
    assert 'least-squares line' in profile.source


def test_the_profile_is_rescaled_by_what_batches_really_take_and_not_for_noise():
    profile = BatchLatencyProfile('m', {1: 0.010, 2: 0.015}, 'test')
    slow = [(1, 0.020), (2, 0.030)] * 8
    assert observed_scale(profile, slow[:10], 1.0) is None  # too few batches yet
    assert observed_scale(profile, slow, 1.0) == pytest.approx(2.0)
    assert observed_scale(profile, slow, 1.95) is None  # within 10 %: keep the plans
    assert observed_scale(profile, [(1, 1.0)] * 16, 1.0) == 4.0  # bounded
    scaled = profile.scaled(2.0, 'as measured')
    assert scaled.latency(2) == pytest.approx(0.030)
    assert scaled.source == 'test; x2.00 as measured'
    with pytest.raises(ProfileError):
        profile.scaled(0.0, 'no')
