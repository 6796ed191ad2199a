# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The fast-mode evaluator: the oracle accuracy model, a replay, latency files and the report."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from accumo_ros.scheduler.mpc import AccuracyEstimate
from accumo_ros.simulation.sequence import SequenceConfig, SyntheticSequence
from accumo_ros.simulation.sequence_bag import (
    read_sequence_bag,
    turn_on_biases,
    write_sequence_bag,
)
from accumo_ros.tasks.odometry_model import OdometryAccuracyModel
from accumo_ros.tools import evaluate
from accumo_ros.tools.evaluate import (
    LatencyModel,
    RunResult,
    SequenceData,
    VoCache,
    abs_rel,
    report,
    run_scheduler,
    scheduler_variant,
)
from accumo_ros.tools.evaluate import main as evaluate_main
from accumo_ros.tools.odometry_eval import emulated_calibration, parse_calibration_residual

SERVER_SCALE, LITE_SCALE = 1.05, 1.25  # the stand-in nets' depth = truth x scale
WINDOW = 32


def _window_drop(start: int) -> float:
    return 0.004 * (start // WINDOW)


@pytest.fixture(scope='module')
def data(tmp_path_factory) -> SequenceData:  # noqa: ANN001
    """Return a short generated sequence whose 'nets' are its ground truth scaled."""
    path = tmp_path_factory.mktemp('bags') / 'low_high_0'
    config = SequenceConfig(seed=4, category='low_high', duration_s=2.5, width=208, height=64)
    write_sequence_bag(SyntheticSequence(config), path)
    sequence = read_sequence_bag(path)
    server = (sequence.depth * SERVER_SCALE).astype(np.float32)
    lite = (sequence.depth * LITE_SCALE).astype(np.float32)
    frames = len(sequence.frame_times)
    return SequenceData(
        name=path.name,
        category=sequence.category,
        sequence=sequence,
        server_depth=server,
        lite_depth=lite,
        server_error=np.array([abs_rel(server[i], sequence.depth[i]) for i in range(frames)]),
        lite_error=np.array([abs_rel(lite[i], sequence.depth[i]) for i in range(frames)]),
        truth=sequence.frame_poses(),
        vo=VoCache(sequence, lambda _s, index: server[index]),
        odometry_window_drops={start: _window_drop(start) for start in range(0, frames, WINDOW)},
        fps=float(config.fps),
    )


def test_the_oracles_schedule_on_the_true_drops(data: SequenceData) -> None:
    # The window drops above are measured as this model measures them (4 -> 8 over 32 frames).
    model = OdometryAccuracyModel(0.005, 0.01)
    latencies = LatencyModel.load(None)
    oracle = run_scheduler(data, 'accumo-oracle', (1.0, 1.0), latencies, model)
    clairvoyant = run_scheduler(data, 'accumo-clairvoyant', (1.0, 1.0), latencies, model)
    real = run_scheduler(data, 'accumo', (1.0, 1.0), latencies, model)
    for run in (oracle, clairvoyant, real):
        assert run.drop_rates
        assert sum(run.depth_sources.values()) == len(data.sequence.frame_times)
        assert min(run.offloads) > 0
        assert math.isfinite(run.depth_abs_rel)
        assert math.isfinite(run.odometry_t_err)
    # Odometry: the true drop of the stride step 4 → 8 over a 32-frame window -- the window
    # the decision's frame lies in (clairvoyant), or the last complete one, which is the
    # window the model measures its angular speed over (oracle).
    for frame, _depth_rate, odometry_rate in clairvoyant.drop_rates:
        assert odometry_rate == pytest.approx(_window_drop(frame // WINDOW * WINDOW) / 4.0)
    for frame, _depth_rate, odometry_rate in oracle.drop_rates:
        start = frame // WINDOW * WINDOW - WINDOW
        assert odometry_rate == pytest.approx(_window_drop(start) / 4.0 if start >= 0 else 0.0)
    # The models estimate from angular speed instead: other values, same frames replayed.
    assert [r[2] for r in real.drop_rates] != [r[2] for r in oracle.drop_rates]
    # The lite 'net' is 25 % off everywhere, the server 5 %: with the true local drop
    # (0.20) the oracles' selector keeps the warped server map while it is the better one.
    for run in (oracle, clairvoyant):
        assert run.depth_sources['tracker'] > 0
        assert run.depth_abs_rel < float(np.mean(data.lite_error))


def test_one_task_clairvoyant_keeps_the_other_tasks_model(data: SequenceData) -> None:
    """accumo-clairvoyant-depth / -odometry: true drops for one task, the model for the other."""
    model, latencies = OdometryAccuracyModel(0.005, 0.01), LatencyModel.load(None)
    both = run_scheduler(data, 'accumo-clairvoyant', (1.0, 1.0), latencies, model)
    real = run_scheduler(data, 'accumo', (1.0, 1.0), latencies, model)
    depth = run_scheduler(data, 'accumo-clairvoyant-depth', (1.0, 1.0), latencies, model)
    odometry = run_scheduler(data, 'accumo-clairvoyant-odometry', (1.0, 1.0), latencies, model)
    # Odometry: the window's true drop, or the model's estimate from the angular speed.
    for frame, _depth_rate, odometry_rate in odometry.drop_rates:
        assert odometry_rate == pytest.approx(_window_drop(frame // WINDOW * WINDOW) / 4.0)
    assert [r[2] for r in depth.drop_rates] != [r[2] for r in both.drop_rates]
    # Depth: the first decision (no depth offload yet) is the same initial rate for all;
    # afterwards the true rate differs from the model's.
    assert [r[1] for r in odometry.drop_rates][1:] != [r[1] for r in both.drop_rates][1:]
    assert [r[1] for r in real.drop_rates] != [r[1] for r in depth.drop_rates]


def test_each_attribution_oracle_replaces_only_its_estimate(data: SequenceData) -> None:
    """now-depth / -odometry / -tracker / -lite: true values for one part, models elsewhere."""
    model = OdometryAccuracyModel(0.005, 0.01)
    modelled = (AccuracyEstimate(0.002, 0.3), AccuracyEstimate(0.0007, free_stride=4))

    class _Pipeline:  # what the oracle reads of the evaluation pipeline
        last_offloads = (10, None)
        tracker_model = SimpleNamespace(drop_rate=0.001)

        def tracker_error(self, base: int) -> float:
            return float(data.server_error[base]) + 0.05

        def model_estimates(self) -> tuple[AccuracyEstimate, AccuracyEstimate]:
            return modelled

    frame = 40
    true_rate = 0.05 / (frame - 10)
    true_local = max(0.0, float(data.lite_error[frame] - data.server_error[10]))
    true_odometry = AccuracyEstimate(_window_drop(32) / 4.0, free_stride=4)

    def estimates(timing: str) -> list[AccuracyEstimate]:
        return evaluate._oracle(data, True, timing, model)(_Pipeline(), frame)

    true_depth = AccuracyEstimate(true_rate, true_local)
    assert estimates('now') == [true_depth, true_odometry]
    assert estimates('now-depth') == [true_depth, modelled[1]]
    assert estimates('now-odometry') == [modelled[0], true_odometry]
    assert estimates('now-tracker') == [AccuracyEstimate(true_rate, 0.3), modelled[1]]
    assert estimates('now-lite') == [AccuracyEstimate(0.002, true_local), modelled[1]]
    assert estimates('now-mpc') == [true_depth, true_odometry]  # the selector: models
    for name in evaluate.ATTRIBUTION:
        assert scheduler_variant(name)[0] == 'accumo'
        assert name in evaluate.WEIGHTED


def test_the_clairvoyants_mpc_and_selector_apart(data: SequenceData) -> None:
    """-mpc: true drops for the MPC only; rr+la-clairvoyant: the true choice for RR only."""
    model, latencies = OdometryAccuracyModel(0.005, 0.01), LatencyModel.load(None)
    both = run_scheduler(data, 'accumo-clairvoyant', (1.0, 1.0), latencies, model)
    mpc = run_scheduler(data, 'accumo-clairvoyant-mpc', (1.0, 1.0), latencies, model)
    # The same offloads (the MPC sees the same true drops), another tracker-or-lite choice:
    # the lite model's d (about 0.11 here) is below the true 0.20, so the models leave the
    # tracker earlier.
    assert mpc.offloaded == both.offloaded
    assert mpc.depth_sources['local_algorithm'] > both.depth_sources['local_algorithm']
    assert mpc.depth_abs_rel > both.depth_abs_rel
    rr_la = run_scheduler(data, 'rr+la', None, latencies, model)
    rr_true = run_scheduler(data, 'rr+la-clairvoyant', None, latencies, model)
    assert rr_true.offloaded == rr_la.offloaded  # round robin ignores the estimates
    assert rr_true.depth_abs_rel < rr_la.depth_abs_rel
    assert 'rr+la-clairvoyant' in evaluate.ORACLES
    assert 'rr+la-clairvoyant' not in evaluate.WEIGHTED


def test_the_oracle_measures_odometry_as_the_model_in_use_was(data: SequenceData) -> None:
    # A model measured over 16-frame windows with strides 4 and 12: the oracle's true drops
    # are that model's windows, spread over its stride step of 8 frames.
    model = OdometryAccuracyModel(
        0.0, 0.01, window_frames=16, base_stride=4, raised_stride=12, latency_frames=4
    )
    frames = len(data.sequence.frame_times)
    drops = {start: 0.001 * (start // 16 + 1) for start in range(0, frames, 16)}
    slow = dataclasses.replace(data, odometry_window_drops=drops)
    run = run_scheduler(slow, 'accumo-clairvoyant', (1.0, 1.0), LatencyModel.load(None), model)
    assert run.drop_rates
    for frame, _depth_rate, odometry_rate in run.drop_rates:
        assert odometry_rate == pytest.approx(drops[frame // 16 * 16] / 8.0)


def test_any_static_ratio_runs_with_the_local_algorithm(data: SequenceData) -> None:
    assert scheduler_variant('wrr:4:1+la') == ('wrr:4:1', True, False)
    assert scheduler_variant('rr+la') == ('rr', True, False)
    assert scheduler_variant('wrr:4:1') == ('wrr:4:1', False, False)
    assert scheduler_variant('la') == ('la', True, False)
    model, latencies = OdometryAccuracyModel(0.005, 0.01), LatencyModel.load(None)
    with_la = run_scheduler(data, 'wrr:4:1+la', None, latencies, model)
    without = run_scheduler(data, 'wrr:4:1', None, latencies, model)
    # The same ratio (four depth offloads to one odometry), one with the lite net to fall
    # back on: only the depth source differs.
    assert with_la.offloads == without.offloads
    assert with_la.offloads[0] >= 3 * with_la.offloads[1]
    assert with_la.odometry_t_err == pytest.approx(without.odometry_t_err)
    assert without.depth_sources.get('local_algorithm', 0) == 0
    # A bad ratio is refused before any work.
    assert evaluate_main(['--dataset', '.', '--output', '.', '--schedulers', 'wrr:4+la']) == 2


def test_a_phase_delays_the_first_offload(data: SequenceData) -> None:
    """--phases: the same schedule shifted; nothing is offloaded before the phase."""
    model, latencies = OdometryAccuracyModel(0.005, 0.01), LatencyModel.load(None)
    at_zero = run_scheduler(data, 'rr', None, latencies, model)
    shifted = run_scheduler(data, 'rr', None, latencies, model, phase=7)
    assert (at_zero.phase, shifted.phase) == (0, 7)
    first = [
        next(f for f, task in enumerate(r.offloaded) if task >= 0) for r in (at_zero, shifted)
    ]
    assert first == [0, 7]
    # Round robin from the shifted start: the same alternation, seven frames later.
    frames = len(at_zero.offloaded) - 7
    assert shifted.offloaded[7:] == at_zero.offloaded[:frames]
    for bad in ('-1', '0,0', 'x'):
        assert evaluate_main(['--dataset', '.', '--output', '.', '--phases', bad]) == 2


def test_an_emulated_imu_calibration_reaches_the_robots_filters(data: SequenceData) -> None:
    """--imu-calibration: the true turn-on biases plus a seeded error, told to the filter."""
    accel_residual, gyro_residual = parse_calibration_residual('3:0.05')
    assert accel_residual == pytest.approx(3e-3 * 9.80665)
    assert gyro_residual == pytest.approx(math.radians(0.05))
    assert parse_calibration_residual('none') is None
    calibration = emulated_calibration(data.sequence, accel_residual, gyro_residual)
    assert calibration == emulated_calibration(data.sequence, accel_residual, gyro_residual)
    gyro_bias, accel_bias = turn_on_biases(data.sequence)
    assert np.all(np.abs(np.subtract(calibration.accel_bias, accel_bias)) < 5 * accel_residual)
    assert np.all(np.abs(np.subtract(calibration.gyro_bias, gyro_bias)) < 5 * gyro_residual)
    assert (calibration.accel_bias_sigma, calibration.gyro_bias_sigma) == (
        accel_residual,
        gyro_residual,
    )
    # No offloads: the pose is the IMU's alone, and the known bias is not integrated.
    model, latencies = OdometryAccuracyModel(0.005, 0.01), LatencyModel.load(None)
    uncalibrated = run_scheduler(data, 'la', None, latencies, model)
    calibrated = run_scheduler(
        dataclasses.replace(data, imu_calibration=calibration), 'la', None, latencies, model
    )
    assert calibrated.max_position_error_m < 0.5 * uncalibrated.max_position_error_m
    for bad in ('x', '3', '0:0.05', '3:-1'):
        with pytest.raises(SystemExit) as refused:
            evaluate_main(['--dataset', '.', '--output', '.', '--imu-calibration', bad])
        assert refused.value.code == 2


def test_the_horizon_is_a_setting(data: SequenceData) -> None:
    """--horizon reaches the MPC; a horizon of one frame sees no result and is still valid."""
    model, latencies = OdometryAccuracyModel(0.005, 0.01), LatencyModel.load(None)
    default = run_scheduler(data, 'accumo', (1.0, 1.0), latencies, model)
    short = run_scheduler(data, 'accumo', (1.0, 1.0), latencies, model, horizon=1)
    assert short.offloaded != default.offloaded
    assert sum(short.offloads) > 0
    assert evaluate_main(['--dataset', '.', '--output', '.', '--horizon', '0']) == 2


def test_latency_files_are_read_and_drawn_from(tmp_path) -> None:  # noqa: ANN001
    document = {
        'source': 'test',
        'depth': {'latency_ms': [60.0, 80.0], 'server_ms': [20.0]},
        'odometry': {'latency_ms': [70.0], 'server_ms': [40.0]},
    }
    path = tmp_path / 'latencies.yaml'
    path.write_text(yaml.safe_dump(document))
    model = LatencyModel.load(path)
    assert model.source == 'test'
    assert model.default_frames(60.0) == (5, 5)  # medians 70 ms and 70 ms at 60 FPS
    rng = np.random.default_rng(0)
    assert {model.draw((0,), rng) for _ in range(50)} == {0.06, 0.08}
    assert model.draw((1, 0), rng) == pytest.approx(0.07 + 0.02)  # plus depth's server time
    path.write_text(yaml.safe_dump({'depth': {'latency_ms': []}}))
    with pytest.raises(ValueError, match='latency'):
        LatencyModel.load(path)


def _run(
    sequence: str, scheduler: str, depth: float, odometry: float, position_error: float = 0.5
) -> RunResult:
    return RunResult(
        sequence, 'low_low', scheduler, (1.0, 1.0) if 'accumo' in scheduler else None,
        depth, odometry, (1, 1), {}, 0.1, 0.2, [], [], [], 60.0, position_error,
    )  # fmt: skip


def test_report_compares_with_the_oracle_per_sequence() -> None:
    runs = [
        _run('a', 'accumo', 0.10, 0.10),
        _run('a', 'accumo-oracle', 0.10, 0.10),
        _run('b', 'accumo', 0.12, 0.12),
        _run('b', 'accumo-oracle', 0.10, 0.10),
        _run('a', 'rr', 0.2, 0.2),
        _run('b', 'rr', 0.25, 0.3, position_error=4.0),
    ]
    text = report(runs, {'mode': 'test'})
    # The filter health table names each scheduler's worst run.
    assert '| rr | 2 | 30.0% | 1 | 4.00 | b |' in text
    assert '| accumo | 2 | 12.0% | 0 | 0.50 | a at 1:1 |' in text
    assert '| 1:1 | 0.1100 | 0.1000 | +10.0 % | +0.0 .. +20.0 % |' in text
    assert 'Over all 2 (sequence, weight) runs the real models are +10.0 %' in text
