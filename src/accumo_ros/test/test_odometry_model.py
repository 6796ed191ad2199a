# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The odometry accuracy model (quantile regression) and the odometry evaluation runs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from scipy.spatial.transform import Rotation

from accumo_ros.simulation import dataset
from accumo_ros.simulation.sequence import SequenceConfig, SyntheticSequence
from accumo_ros.simulation.sequence_bag import read_sequence_bag, write_sequence_bag
from accumo_ros.tasks.odometry_model import (
    DEFAULT_MODEL_PATH,
    PACKAGED_MODEL_PATHS,
    OdometryAccuracyModel,
    OdometryModelSet,
    measured_free_stride,
    quantile_regression,
    window_angular_speed,
)
from accumo_ros.tools import odometry_eval


def test_quantile_regression_finds_the_quantile_line():
    rng = np.random.default_rng(0)
    x = rng.uniform(0.0, 2.0, 800)
    y = 1.0 + 2.0 * x + rng.normal(size=x.size)
    intercept, slope = quantile_regression(x, y, 0.95)
    # The true 95 % line of N(0, 1) noise is 1 + 1.645 + 2 x.
    assert intercept == pytest.approx(2.645, abs=0.25)
    assert slope == pytest.approx(2.0, abs=0.2)
    assert np.mean(y <= intercept + slope * x) == pytest.approx(0.95, abs=0.01)
    median_intercept, _ = quantile_regression(x, y, 0.5)
    assert median_intercept == pytest.approx(1.0, abs=0.2)
    # It bounds from above even when the points do not lie on a line (Fig. 2.11).
    skewed = 0.01 * x * rng.exponential(size=x.size)
    intercept, slope = quantile_regression(x, skewed, 0.95)
    assert slope > 0.0
    assert np.mean(skewed <= intercept + slope * x) >= 0.94


def test_quantile_regression_rejects_bad_input():
    with pytest.raises(ValueError, match='two or more'):
        quantile_regression([1.0], [2.0])
    with pytest.raises(ValueError, match='finite'):
        quantile_regression([1.0, np.nan], [2.0, 3.0])
    with pytest.raises(ValueError, match='quantile'):
        quantile_regression([1.0, 2.0], [2.0, 3.0], 1.0)


def test_window_angular_speed_is_angle_over_time():
    start = Rotation.from_euler('z', 0.3).as_matrix()
    end = start @ Rotation.from_euler('xyz', [0.0, 0.2, 0.0]).as_matrix()
    assert window_angular_speed(start, end, 0.5) == pytest.approx(0.4)
    with pytest.raises(ValueError, match='positive'):
        window_angular_speed(start, end, 0.0)


def test_model_rate_saving_and_loading(tmp_path):
    model = OdometryAccuracyModel(intercept=-0.002, slope=0.01)
    assert model.drop_bound(0.1) == 0.0  # a negative bound is no drop
    assert model.drop_rate(1.0) == pytest.approx((0.01 - 0.002) / 4)
    assert model.window_s == pytest.approx(32 / 60)
    path = tmp_path / 'model.yaml'
    model.save(path, command='test')
    assert OdometryAccuracyModel.load(path) == model
    assert yaml.safe_load(path.read_text())['provenance'] == {'command': 'test'}
    path.write_text('format: something/1\nintercept: 0\nslope: 1\n')
    with pytest.raises(ValueError, match='not an AccuMO odometry accuracy model'):
        OdometryAccuracyModel.load(path)
    with pytest.raises(FileNotFoundError, match='--fit'):
        OdometryAccuracyModel.load(tmp_path / 'missing.yaml')
    with pytest.raises(ValueError, match='base_stride'):
        OdometryAccuracyModel(0.0, 0.0, base_stride=8, raised_stride=8)
    with pytest.raises(ValueError, match='latency_frames'):
        OdometryAccuracyModel(0.0, 0.0, latency_frames=5)  # later than the base stride


def test_a_model_for_a_slow_link_spreads_the_drop_over_its_stride_step(tmp_path):
    # Measured at 14 frames' latency: strides 14 and 28, so the rate is the bound over 14.
    model = OdometryAccuracyModel(
        0.001, 0.01, window_frames=56, base_stride=14, raised_stride=28, latency_frames=14
    )
    assert model.drop_rate(1.0) == pytest.approx(0.011 / 14)
    assert model.window_s == pytest.approx(56 / 60)
    path = tmp_path / 'slow.yaml'
    model.save(path)
    assert OdometryAccuracyModel.load(path) == model


def test_committed_model_bounds_the_drop_from_above():
    """The packaged coefficients load, reached their quantile on the fit, give rates >= 0."""
    model = OdometryAccuracyModel.load()
    document = yaml.safe_load(DEFAULT_MODEL_PATH.read_text())
    provenance = document['provenance']
    assert provenance['command'].startswith('accumo_odometry_eval')
    assert provenance['train']['windows'] >= 80
    assert abs(provenance['train']['share_under_bound'] - model.quantile) < 0.04
    # Fitted past the stride the calibration set showed free, with the curve that says so.
    assert f'--base-stride {model.base_stride}' in provenance['command']
    assert provenance['base_stride_from']['free_stride'] == model.base_stride
    step = model.raised_stride - model.base_stride
    for speed in np.linspace(0.0, 2.0, 9):
        expected = max(0.0, model.intercept + model.slope * speed) / step
        assert model.drop_rate(speed) == pytest.approx(expected)


def test_the_packaged_models_cover_the_fast_and_the_16_mbit_link():
    models = OdometryModelSet.load()
    assert [m.latency_frames for m in models.models] == [4, 14]
    assert models.max_window_frames == 112
    for path, model in zip(PACKAGED_MODEL_PATHS, models.models, strict=True):
        provenance = yaml.safe_load(path.read_text())['provenance']
        assert f'--latency {model.latency_frames}' in provenance['command']
        assert abs(provenance['train']['share_under_bound'] - model.quantile) < 0.04
        # Strides below the base one cost nothing measurable on the calibration set.
        curve = provenance['base_stride_from']
        assert curve['free_stride'] == model.base_stride > model.latency_frames
        # No longer stride than the model measured: the scheduler plans none past it.
        assert model.stride_limit == model.raised_stride
        assert 'stride_limit_from' in provenance
    with pytest.raises(ValueError, match='stride_limit'):
        OdometryAccuracyModel(0.01, 0.0, stride_limit=6)  # raised_stride 8 was measured


def test_the_free_stride_ends_at_the_first_measurable_cost():
    # Median increases over stride 15 (t_err 4.1 %): 56 is the first above 10 % of it.
    increases = {15: 0.0, 21: -0.0007, 28: 0.0, 42: -0.0014}
    assert measured_free_stride({**increases, 56: 0.0067}, 0.041) == 42
    # A cost at 21 stops the search there, whatever comes after.
    assert measured_free_stride({**increases, 21: 0.005}, 0.041) == 15
    # No stride costs measurably: the longest measured is as far as the claim goes.
    assert measured_free_stride(increases, 0.041) == 42
    with pytest.raises(ValueError, match='at least one'):
        measured_free_stride({}, 0.04)


def test_the_model_measured_nearest_the_latency_in_use_applies():
    fast = OdometryAccuracyModel(0.01, 0.0)
    slow = OdometryAccuracyModel(
        0.01, 0.0, window_frames=56, base_stride=14, raised_stride=28, latency_frames=14
    )
    models = OdometryModelSet([slow, fast])
    assert models.models == (fast, slow)
    # Nearest on a log scale: 4 and 14 frames split at sqrt(56) = 7.5.
    for latency, expected in ((1, fast), (4, fast), (7, fast), (8, slow), (14, slow), (60, slow)):
        assert models.select(latency) is expected, latency
    assert 'latency 14: stride 14->28 over 56 frames' in models.describe()
    # A single model applies at every latency; the same latency twice is ambiguous.
    assert OdometryModelSet([fast]).select(30) is fast
    with pytest.raises(ValueError, match='same latency'):
        OdometryModelSet([fast, OdometryAccuracyModel(0.02, 0.0)])
    with pytest.raises(ValueError, match='at least one'):
        OdometryModelSet([])


def test_periodic_offloads_raise_the_stride_inside_the_window():
    assert odometry_eval.periodic_offloads(20, 4) == [0, 4, 8, 12, 16]
    assert odometry_eval.periodic_offloads(40, 4, (8, 24), 8) == [0, 4, 8, 16, 24, 28, 32, 36]


def test_vo_prior_flags_match_the_option_and_refuse_an_unknown_prior():
    flags = {p: odometry_eval.vo_prior_flags(p) for p in odometry_eval.VO_PRIORS}
    assert flags['none'] == {'gyro_prior': False, 'translation_prior': False}
    assert flags['gyro'] == {'gyro_prior': True, 'translation_prior': False}
    assert flags['motion'] == {'gyro_prior': True, 'translation_prior': True}
    with pytest.raises(ValueError, match="unknown VO prior 'imu'"):
        odometry_eval.vo_prior_flags('imu')


@pytest.fixture(scope='module')
def short_sequence(tmp_path_factory):
    """Write a 2.5 s high-angular-velocity sequence at 208×64 and read it back."""
    path = tmp_path_factory.mktemp('odometry') / 'seq'
    config = SequenceConfig(seed=4, category='low_high', duration_s=2.5, width=208, height=64)
    write_sequence_bag(SyntheticSequence(config), path)
    return read_sequence_bag(path)


def _ground_truth_depth(sequence, index):
    return sequence.depth[index]


def test_fused_run_forks_into_an_identical_history(short_sequence):
    vo = odometry_eval.VoCache(short_sequence, _ground_truth_depth)
    noise = odometry_eval.imu_noise_of(short_sequence)
    frames = len(short_sequence.frame_times)
    offloads = odometry_eval.periodic_offloads(frames, 8)
    run = odometry_eval.FusedOdometryRun(short_sequence, vo, offloads, 4, noise)
    run.run_to(50)
    fork = run.fork()
    run.run_to(frames)
    fork.run_to(frames)
    np.testing.assert_array_equal(fork.poses, run.poses)
    assert fork.filter is not run.filter
    assert run.filter.fused_count > 10


def test_fusing_vo_beats_the_imu_alone(short_sequence):
    # Against a keyframe, as the pipeline pairs; chained frame to frame, the VO covariance's
    # translation floor (sized for pairs sharing a keyframe) weighs VO less, but it still helps.
    keyframed = odometry_eval.sequence_accuracy(
        short_sequence, 'seq', _ground_truth_depth, 8, 4, odometry_eval.KeyframePolicy()
    )
    chained = odometry_eval.sequence_accuracy(short_sequence, 'seq', _ground_truth_depth, 8, 4)
    print(keyframed, chained, sep='\n')
    assert keyframed.vo_failures == chained.vo_failures == 0
    assert keyframed.fused_t_err < 0.5 * keyframed.kalman_t_err
    assert keyframed.fused_t_err < 3.0 * keyframed.vo_t_err
    assert chained.fused_t_err < 0.75 * chained.kalman_t_err


def test_window_drops_vanish_when_the_stride_does_not_change(short_sequence):
    speeds, drops = odometry_eval.window_drops(
        short_sequence, _ground_truth_depth, base_stride=4, raised_stride=4
    )
    assert speeds.size == drops.size >= 2
    np.testing.assert_array_equal(drops, 0.0)
    assert np.all(speeds > 0.05)
    _, raised = odometry_eval.window_drops(short_sequence, _ground_truth_depth)
    assert np.all(np.isfinite(raised))
    assert np.any(raised != 0.0)


def test_cli_fits_and_writes_a_loadable_model(tmp_path, capsys):
    folder = tmp_path / 'data'
    arguments = ['--output', str(folder), '--categories', 'low_high', '--per-category', '2']
    arguments += ['--duration', '2.5', '--width', '208', '--height', '64', '--workers', '1']
    assert dataset.main(arguments) == 0
    model_path = tmp_path / 'odometry.yaml'
    argv = ['--dataset', str(folder), '--depth', 'gt', '--fit', '--model', str(model_path)]
    argv += ['--output', str(tmp_path / 'report.json'), '--stride', '12', '--latency', '6']
    argv += ['--base-stride', '6', '--raised-stride', '12', '--window-frames', '24']
    assert odometry_eval.main(argv) == 0
    printed = capsys.readouterr().out
    assert 'KF+VO' in printed
    assert 'held-out' in printed
    assert 'stride 12 instead of 6 over a 24-frame window, poses 6 frames late' in printed
    model = OdometryAccuracyModel.load(model_path)
    assert (model.base_stride, model.raised_stride) == (6, 12)
    assert (model.window_frames, model.latency_frames) == (24, 6)
    # The measured windows are in the report, to fit other forms without measuring again.
    windows = json.loads((tmp_path / 'report.json').read_text())['windows']
    for split in ('train', 'heldout'):
        count = len(windows[split]['drop'])
        assert count >= 2
        assert len(windows[split]['angular_speed']) == len(windows[split]['sequence']) == count
    document = yaml.safe_load(model_path.read_text())
    assert document['provenance']['command'] == 'accumo_odometry_eval ' + ' '.join(argv)
    assert document['provenance']['train']['windows'] >= 2
    assert np.isfinite(model.slope)
    assert odometry_eval.main([*argv[:4], '--fit']) == 2  # no --model
    swapped = [*argv[:7], '--base-stride', '12', '--raised-stride', '6']
    assert odometry_eval.main(swapped) == 2
    late = [*argv[:7], '--latency', '8', '--stride', '12', '--base-stride', '6']
    assert odometry_eval.main(late) == 2  # poses later than the base stride
    assert odometry_eval.main(['--dataset', str(tmp_path / 'none'), '--depth', 'gt']) == 2


def test_with_the_translation_prior_the_chain_is_the_pairs_the_guided_run_got(short_sequence):
    guided = odometry_eval.sequence_accuracy(
        short_sequence, 'seq', _ground_truth_depth, 8, 4, translation_prior=True
    )
    plain = odometry_eval.sequence_accuracy(short_sequence, 'seq', _ground_truth_depth, 8, 4)
    assert guided.vo_failures == plain.vo_failures == 0
    assert guided.vo_pairs == plain.vo_pairs
    # No moving boxes here to steer away from: the prior changes the chain little.
    assert guided.vo_t_err == pytest.approx(plain.vo_t_err, rel=0.25, abs=0.01)
    assert guided.fused_t_err < 0.75 * guided.kalman_t_err
