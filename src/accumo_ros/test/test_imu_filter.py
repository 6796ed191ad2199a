# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The ESKF reproduces strapdown integration, fuses delayed poses exactly and is consistent."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np
import pytest
from scipy.spatial.transform import Rotation
from scipy.stats import chi2

from accumo_ros.geometry import GRAVITY_WORLD, make_poses, rotation_angles
from accumo_ros.simulation.imu import ImuNoise, ImuSeries, integrate_imu, simulate_imu
from accumo_ros.simulation.trajectory import (
    Sinusoid,
    Trajectory,
    TrajectoryConfig,
    TrajectoryState,
)
from accumo_ros.tasks.imu_filter import (
    DelayedPoseFusion,
    ErrorStateKalmanFilter,
    ImuCalibration,
    LevelGroundPrior,
    StaleSnapshotError,
    UnknownSnapshotError,
    exp_and_right_jacobian_so3,
    gyro_rotation,
)

IMU_RATE_HZ = 240.0
SAMPLES_PER_FRAME = 4  # 60 FPS camera
MEASUREMENT_STRIDE = 8 * SAMPLES_PER_FRAME  # a server pose every 8 frames
SIGMA_POSITION = 0.05  # m
SIGMA_ORIENTATION = np.radians(1.0)  # rad
POSE_COVARIANCE = np.diag([SIGMA_POSITION**2] * 3 + [SIGMA_ORIENTATION**2] * 3)
MONTE_CARLO_RUNS = 20
NEES_DURATION_S = 10.0
NEES_TIMES_S = (1.5, 3.0, 4.5, 6.0, 7.5, 9.0, 9.99)
POSE_INDEX = np.r_[0:3, 6:9]  # δp and δθ in the 15-dim error state

TRAJECTORIES = {
    'default': TrajectoryConfig(),
    'yaw_sway': TrajectoryConfig(yaw_sway=Sinusoid(0.4, 0.4)),
}


def _simulate(
    config: TrajectoryConfig, duration_s: float, noise: ImuNoise, seed: int
) -> tuple[TrajectoryState, ImuSeries, np.random.Generator]:
    trajectory = Trajectory(config)
    times = trajectory.samples(duration_s, IMU_RATE_HZ)
    rng = np.random.default_rng(seed)
    return trajectory.state(times), simulate_imu(trajectory, times, noise, rng), rng


def _perturbed_pose(pose: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Measure a pose: the true pose with noise of POSE_COVARIANCE, as fuse_pose models it."""
    noise = rng.normal(size=6)
    rotation = pose[:3, :3] @ Rotation.from_rotvec(SIGMA_ORIENTATION * noise[3:]).as_matrix()
    return make_poses(rotation, pose[:3, 3] + SIGMA_POSITION * noise[:3])


def _dt(times: np.ndarray, k: int) -> float:
    return 0.0 if k == 0 else float(times[k] - times[k - 1])


def _state_error(kf: ErrorStateKalmanFilter, truth: TrajectoryState, imu: ImuSeries, k: int):
    """Return the true 15-dim error state (δp, δv, δθ, δb_g, δb_a) of the filter at sample k."""
    gyro_bias, accel_bias = kf.biases
    return np.concatenate(
        [
            truth.poses[k, :3, 3] - kf.position,
            truth.velocity_world[k] - kf.velocity,
            Rotation.from_matrix(kf.rotation.T @ truth.poses[k, :3, :3]).as_rotvec(),
            imu.gyro_bias[k] - gyro_bias,
            imu.accel_bias[k] - accel_bias,
        ]
    )


def test_exp_and_right_jacobian_match_scipy():
    rng = np.random.default_rng(3)
    for scale in (1e-9, 1e-4, 0.3, 2.5):
        phi = scale * rng.normal(size=3)
        exp_phi, jacobian = exp_and_right_jacobian_so3(phi)
        np.testing.assert_allclose(exp_phi, Rotation.from_rotvec(phi).as_matrix(), atol=1e-15)
        delta = 1e-7 * rng.normal(size=3)
        perturbed = exp_phi @ Rotation.from_rotvec(jacobian @ delta).as_matrix()
        np.testing.assert_allclose(
            perturbed, Rotation.from_rotvec(phi + delta).as_matrix(), atol=1e-13
        )


@pytest.mark.parametrize('name', TRAJECTORIES)
def test_noise_free_prediction_reproduces_strapdown_integration(name):
    truth, imu, _ = _simulate(TRAJECTORIES[name], 20.0, ImuNoise.noise_free(), seed=0)
    kf = ErrorStateKalmanFilter(truth.poses[0], truth.velocity_world[0], ImuNoise.noise_free())
    poses = np.empty_like(truth.poses)
    velocities = np.empty_like(truth.velocity_world)
    for k in range(len(imu)):
        kf.predict(imu.angular_velocity[k], imu.linear_acceleration[k], _dt(imu.times, k))
        poses[k], velocities[k] = kf.pose, kf.velocity
    expected_poses, expected_velocities = integrate_imu(
        imu.times,
        imu.angular_velocity,
        imu.linear_acceleration,
        truth.poses[0],
        truth.velocity_world[0],
    )
    np.testing.assert_allclose(poses, expected_poses, rtol=0.0, atol=1e-9)
    np.testing.assert_allclose(velocities, expected_velocities, rtol=0.0, atol=1e-9)
    position_error = np.linalg.norm(poses[:, :3, 3] - truth.poses[:, :3, 3], axis=1)
    assert position_error.max() < 2e-3
    rotation_error = Rotation.from_matrix(
        np.swapaxes(poses[:, :3, :3], 1, 2) @ truth.poses[:, :3, :3]
    ).magnitude()
    assert rotation_error.max() < 1e-4


@pytest.mark.parametrize('ground_prior', [None, LevelGroundPrior()], ids=['plain', 'level'])
def test_delayed_fusion_equals_fusion_at_measurement_time(ground_prior):
    truth, imu, rng = _simulate(TRAJECTORIES['yaw_sway'], 4.0, ImuNoise(), seed=7)
    # (offload sample, arrival sample): the first two overlap, so two snapshots are
    # outstanding at once; the last one arrives right after its offload.
    offloads = [(96, 140), (128, 170), (400, 470), (600, 601)]
    measurements = {start: _perturbed_pose(truth.poses[start], rng) for start, _ in offloads}
    arrivals = {arrival: start for start, arrival in offloads}

    # With the level-ground prior, rolling back and re-predicting must also replay its
    # updates at the same samples (its clock is part of the snapshot).
    reference = ErrorStateKalmanFilter(
        truth.poses[0], truth.velocity_world[0], ground_prior=ground_prior
    )
    delayed = DelayedPoseFusion(
        ErrorStateKalmanFilter(truth.poses[0], truth.velocity_world[0], ground_prior=ground_prior),
        max_buffer=200,
    )
    for k in range(len(imu)):
        gyro, accel = imu.angular_velocity[k], imu.linear_acceleration[k]
        reference.predict(gyro, accel, _dt(imu.times, k))
        if k in measurements:
            assert reference.fuse_pose(measurements[k], POSE_COVARIANCE)
        assert delayed.add_imu(imu.times[k], gyro, accel) == ()
        if k in measurements:
            delayed.snapshot(k, imu.times[k])
        if k in arrivals:
            assert delayed.fuse(arrivals[k], measurements[arrivals[k]], POSE_COVARIANCE)
        if not delayed.outstanding:
            # Between offloads both filters hold the same estimate.
            np.testing.assert_allclose(delayed.filter.pose, reference.pose, atol=1e-9)

    kf = delayed.filter
    assert kf.fused_count == reference.fused_count == len(offloads)
    assert delayed.buffered == 0
    np.testing.assert_allclose(kf.pose, reference.pose, rtol=0.0, atol=1e-9)
    np.testing.assert_allclose(kf.velocity, reference.velocity, rtol=0.0, atol=1e-9)
    for ours, theirs in zip(kf.biases, reference.biases, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=0.0, atol=1e-9)
    np.testing.assert_allclose(kf.covariance, reference.covariance, rtol=0.0, atol=1e-9)


def test_out_of_order_and_unknown_snapshots_raise():
    truth, imu, rng = _simulate(TRAJECTORIES['default'], 1.0, ImuNoise(), seed=2)
    fusion = DelayedPoseFusion(ErrorStateKalmanFilter(truth.poses[0], truth.velocity_world[0]))
    for k in range(100):
        fusion.add_imu(imu.times[k], imu.angular_velocity[k], imu.linear_acceleration[k])
        if k in (20, 40):
            fusion.snapshot(f'frame{k}', imu.times[k])
    assert fusion.outstanding == ('frame20', 'frame40')
    with pytest.raises(ValueError, match='already outstanding'):
        fusion.snapshot('frame40', imu.times[99])
    assert fusion.fuse('frame40', _perturbed_pose(truth.poses[40], rng), POSE_COVARIANCE)
    assert fusion.outstanding == ()
    with pytest.raises(StaleSnapshotError, match="newer snapshot 'frame40' was fused first"):
        fusion.fuse('frame20', truth.poses[20], POSE_COVARIANCE)
    with pytest.raises(UnknownSnapshotError, match="'frame40'"):
        fusion.fuse('frame40', truth.poses[40], POSE_COVARIANCE)
    with pytest.raises(UnknownSnapshotError, match="'never'"):
        fusion.fuse('never', truth.poses[40], POSE_COVARIANCE)
    with pytest.raises(ValueError, match='from the latest IMU sample'):
        fusion.snapshot('late', imu.times[99] + 0.5)
    with pytest.raises(ValueError, match='not after the previous sample'):
        fusion.add_imu(imu.times[99], imu.angular_velocity[99], imu.linear_acceleration[99])


def test_buffer_overflow_drops_the_oldest_snapshot():
    truth, imu, _ = _simulate(TRAJECTORIES['default'], 1.0, ImuNoise(), seed=4)
    fusion = DelayedPoseFusion(
        ErrorStateKalmanFilter(truth.poses[0], truth.velocity_world[0]), max_buffer=50
    )
    dropped = []
    for k in range(120):
        dropped.append(
            fusion.add_imu(imu.times[k], imu.angular_velocity[k], imu.linear_acceleration[k])
        )
        if k in (10, 30):
            fusion.snapshot(k, imu.times[k])
        assert fusion.buffered <= 50
    # Snapshot 10 overflows at its 51st buffered sample (k = 61), snapshot 30 at k = 81.
    assert dropped[61] == (10,)
    assert dropped[81] == (30,)
    assert sum(len(keys) for keys in dropped) == fusion.dropped_snapshots == 2
    assert fusion.outstanding == ()
    assert fusion.buffered == 0
    with pytest.raises(StaleSnapshotError, match=r'IMU buffer overflow \(max_buffer=50\)'):
        fusion.fuse(10, truth.poses[10], POSE_COVARIANCE)


def _filter_after_good_poses() -> tuple[TrajectoryState, ImuSeries, ErrorStateKalmanFilter]:
    """Return a filter that fused a good pose every MEASUREMENT_STRIDE samples for 2 s."""
    truth, imu, rng = _simulate(TRAJECTORIES['yaw_sway'], 2.0, ImuNoise(), seed=5)
    kf = ErrorStateKalmanFilter(truth.poses[0], truth.velocity_world[0])
    for k in range(len(imu)):
        kf.predict(imu.angular_velocity[k], imu.linear_acceleration[k], _dt(imu.times, k))
        if k > 0 and k % MEASUREMENT_STRIDE == 0:
            assert kf.fuse_pose(_perturbed_pose(truth.poses[k], rng), POSE_COVARIANCE)
    return truth, imu, kf


def test_gate_rejects_an_outlier_and_counts_it():
    truth, imu, kf = _filter_after_good_poses()
    outlier = truth.poses[-1].copy()
    outlier[:3, 3] += [10.0, 0.0, 0.0]

    ungated = kf.copy()
    ungated.gate_threshold = None
    before_pose, before_covariance = kf.pose, kf.covariance
    assert not kf.fuse_pose(outlier, POSE_COVARIANCE)
    assert kf.rejected_count == 1
    assert kf.last_mahalanobis_sq > 1e3
    np.testing.assert_array_equal(kf.pose, before_pose)
    np.testing.assert_array_equal(kf.covariance, before_covariance)
    # Without the gate the same pose drags the estimate metres away.
    assert ungated.fuse_pose(outlier, POSE_COVARIANCE)
    assert ungated.rejected_count == 0
    assert np.linalg.norm(ungated.position - before_pose[:3, 3]) > 1.0

    # Through the delayed path a rejected pose leaves the current estimate as it was.
    fusion = DelayedPoseFusion(kf)
    fusion.add_imu(imu.times[-1], imu.angular_velocity[-1], imu.linear_acceleration[-1])
    fusion.snapshot('outlier', imu.times[-1])
    for k in range(1, 20):
        t = imu.times[-1] + k / IMU_RATE_HZ
        fusion.add_imu(t, imu.angular_velocity[-1], imu.linear_acceleration[-1])
    current_pose = kf.pose
    assert not fusion.fuse('outlier', outlier, POSE_COVARIANCE)
    assert kf.rejected_count == 2
    np.testing.assert_array_equal(kf.pose, current_pose)


def test_copy_is_independent():
    kf = ErrorStateKalmanFilter()
    other = kf.copy()
    other.predict(np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 9.81]), 0.1)
    np.testing.assert_array_equal(kf.pose, np.eye(4))
    assert not np.array_equal(other.pose, np.eye(4))
    state = other.snapshot()
    other.predict(np.zeros(3), np.array([0.0, 0.0, 9.81]), 0.1)
    other.restore(state)
    np.testing.assert_array_equal(other.pose, make_poses(state.rotation, state.position))


@dataclass(frozen=True)
class MonteCarlo:
    nees_pose: np.ndarray  # (runs, len(NEES_TIMES_S)), 6-dof pose NEES
    nees_state: np.ndarray  # (runs, len(NEES_TIMES_S)), 15-dim NEES against the true biases
    fused_rmse: float  # position RMSE over all runs and samples, m
    imu_only_rmse: float  # the same for IMU-only dead reckoning from the same start
    rejected: int


@cache
def _monte_carlo(name: str) -> MonteCarlo:
    """Run the filter with datasheet IMU noise and noisy poses, MONTE_CARLO_RUNS times."""
    eval_index = np.rint(np.array(NEES_TIMES_S) * IMU_RATE_HZ).astype(int)
    nees_pose, nees_state, fused_sq, imu_only_sq, rejected = [], [], [], [], 0
    for seed in range(MONTE_CARLO_RUNS):
        truth, imu, rng = _simulate(TRAJECTORIES[name], NEES_DURATION_S, ImuNoise(), seed)
        # The initial pose and velocity errors are drawn from the filter's own initial
        # covariance, as the true initial biases are from its bias sigmas (simulate_imu).
        initial_covariance = ErrorStateKalmanFilter().covariance[:9, :9]
        error = rng.multivariate_normal(np.zeros(9), initial_covariance)
        rotation = truth.poses[0, :3, :3] @ Rotation.from_rotvec(error[6:9]).as_matrix()
        pose = make_poses(rotation, truth.poses[0, :3, 3] + error[:3])
        velocity = truth.velocity_world[0] + error[3:6]
        kf = ErrorStateKalmanFilter(pose, velocity, ImuNoise())
        run_pose, run_state, position_error = [], [], []
        for k in range(len(imu)):
            kf.predict(imu.angular_velocity[k], imu.linear_acceleration[k], _dt(imu.times, k))
            if k > 0 and k % MEASUREMENT_STRIDE == 0:
                kf.fuse_pose(_perturbed_pose(truth.poses[k], rng), POSE_COVARIANCE)
            position_error.append(truth.poses[k, :3, 3] - kf.position)
            if k in eval_index:
                state_error = _state_error(kf, truth, imu, k)
                covariance = kf.covariance
                pose_error = state_error[POSE_INDEX]
                pose_covariance = covariance[np.ix_(POSE_INDEX, POSE_INDEX)]
                run_pose.append(pose_error @ np.linalg.solve(pose_covariance, pose_error))
                run_state.append(state_error @ np.linalg.solve(covariance, state_error))
        dead_reckoned, _ = integrate_imu(
            imu.times, imu.angular_velocity, imu.linear_acceleration, pose, velocity
        )
        nees_pose.append(run_pose)
        nees_state.append(run_state)
        fused_sq.append(np.sum(np.square(position_error), axis=1))
        imu_only_sq.append(np.sum((dead_reckoned[:, :3, 3] - truth.poses[:, :3, 3]) ** 2, axis=1))
        rejected += kf.rejected_count
    return MonteCarlo(
        nees_pose=np.array(nees_pose),
        nees_state=np.array(nees_state),
        fused_rmse=float(np.sqrt(np.mean(fused_sq))),
        imu_only_rmse=float(np.sqrt(np.mean(imu_only_sq))),
        rejected=rejected,
    )


@pytest.mark.parametrize('name', TRAJECTORIES)
def test_filter_is_consistent(name):
    """The average NEES over the runs lies within the two-sided 95 % chi-square bounds.

    For a consistent filter ``runs * average NEES ~ chi2(runs * dof)``. Two checks:

    * the NEES pooled over all evaluation times must lie within the plain 95 % bounds
      (pooling correlated times only narrows its spread, so this keeps a <= 5 % false-alarm
      rate and catches a systematically over- or under-confident filter);
    * every time's NEES must lie within the 95 % bounds of the whole family of per-time
      checks (Bonferroni over the 2 x len(NEES_TIMES_S) checks). With plain 95 % bounds
      per check, 14 checks would fail a perfectly consistent filter about half the time:
      with these seeds the 6-dof NEES at t = 1.5 s is 7.9 (bound 7.61), while 150 other
      runs give 5.9 to 6.4 there and 5.95 over the whole run.
    """
    result = _monte_carlo(name)
    runs = MONTE_CARLO_RUNS
    checks = 2 * len(NEES_TIMES_S)
    for label, nees, dof in (('pose', result.nees_pose, 6), ('state', result.nees_state, 15)):
        low, high = chi2.ppf([0.025, 0.975], runs * dof) / runs
        family_low, family_high = chi2.ppf([0.025 / checks, 1 - 0.025 / checks], runs * dof) / runs
        average = nees.mean(axis=0)
        pooled = float(nees.mean())
        print(
            f'{name} {label} ({dof} dof) NEES over {runs} runs at t={NEES_TIMES_S}: '
            f'{np.round(average, 2).tolist()}, pooled {pooled:.2f}; 95% bounds '
            f'[{low:.2f}, {high:.2f}], family-wise [{family_low:.2f}, {family_high:.2f}]'
        )
        assert low < pooled < high, (label, pooled, low, high)
        assert np.all((average > family_low) & (average < family_high)), (label, average)
    print(f'{name}: {result.rejected} of the gated poses rejected')


@pytest.mark.parametrize('name', TRAJECTORIES)
def test_pose_fusion_beats_imu_only_dead_reckoning(name):
    result = _monte_carlo(name)
    ratio = result.fused_rmse / result.imu_only_rmse
    print(
        f'{name}: position RMSE fused {result.fused_rmse:.4f} m, '
        f'IMU only {result.imu_only_rmse:.3f} m, ratio {ratio:.4f}'
    )
    assert ratio < 0.2
    # Each pose is measured to 5 cm; fusing them with the IMU should do at least as well.
    assert result.fused_rmse < SIGMA_POSITION


# Relative poses (the server's VO): noise in the first body frame, as VoResult reports it.
SIGMA_RELATIVE_TRANSLATION = 0.01  # m
SIGMA_RELATIVE_ROTATION = np.radians(0.3)  # rad
RELATIVE_COVARIANCE = np.diag(
    [SIGMA_RELATIVE_TRANSLATION**2] * 3 + [SIGMA_RELATIVE_ROTATION**2] * 3
)
RELATIVE_RUNS = 12
RELATIVE_DURATION_S = 8.0


def _relative_measurement(
    first: np.ndarray, second: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Return the noisy ``T_first_second``: translation and left rotation noise in frame 1."""
    relative = np.linalg.inv(first) @ second
    noise = rng.normal(size=6)
    rotation = Rotation.from_rotvec(SIGMA_RELATIVE_ROTATION * noise[3:]).as_matrix()
    return make_poses(
        rotation @ relative[:3, :3], relative[:3, 3] + SIGMA_RELATIVE_TRANSLATION * noise[:3]
    )


def test_relative_fusion_needs_a_clone():
    kf = ErrorStateKalmanFilter()
    assert not kf.has_clone
    with pytest.raises(RuntimeError, match='clone_pose'):
        kf.fuse_relative_pose(np.eye(4), RELATIVE_COVARIANCE)
    kf.clone_pose()
    assert kf.has_clone
    # At the cloned pose itself, the identity is exactly what is expected.
    assert kf.fuse_relative_pose(np.eye(4), RELATIVE_COVARIANCE)
    assert kf.last_mahalanobis_sq == pytest.approx(0.0, abs=1e-12)
    kf.drop_clone()
    assert not kf.has_clone


def test_position_in_clone_is_the_motion_since_the_clone_in_its_frame():
    yaw = Rotation.from_euler('z', 90, degrees=True).as_matrix()
    kf = ErrorStateKalmanFilter(make_poses(yaw, np.zeros(3)), np.array([0.0, 1.0, 0.0]))
    assert kf.position_in_clone() is None
    kf.clone_pose()
    for _ in range(100):  # 1 s at 1 m/s along world y, the clone's forward axis
        kf.predict(np.zeros(3), np.array([0.0, 0.0, 9.81]), 0.01)  # the filter's g
    np.testing.assert_allclose(kf.position_in_clone(), [1.0, 0.0, 0.0], atol=1e-3)


def test_rotation_since_clone_is_the_angle_turned_since_the_clone():
    kf = ErrorStateKalmanFilter()
    assert kf.rotation_since_clone() is None
    kf.clone_pose()
    for _ in range(50):  # 0.5 s at 0.8 rad/s about the body's z axis
        kf.predict(np.array([0.0, 0.0, 0.8]), np.array([0.0, 0.0, 9.81]), 0.01)
    assert kf.rotation_since_clone() == pytest.approx(0.4, abs=1e-6)
    kf.clone_pose()
    assert kf.rotation_since_clone() == pytest.approx(0.0, abs=1e-9)


@cache
def _relative_monte_carlo(keyframe_every: int = 1) -> tuple[np.ndarray, float, float, int]:
    """Fuse noisy relative poses every 8 frames; return (NEES, fused, IMU-only RMSE, rejected).

    NEES is the 15-dim state NEES at the end of each run. The initial pose is exact, so the
    position error is the drift the relative poses let through. ``keyframe_every`` > 1:
    that many poses in a row are measured from one keyframe (``keep_clone``).
    """
    nees, fused_sq, imu_only_sq, rejected = [], [], [], 0
    for seed in range(RELATIVE_RUNS):
        truth, imu, rng = _simulate(
            TRAJECTORIES['yaw_sway'], RELATIVE_DURATION_S, ImuNoise(), seed
        )
        kf = ErrorStateKalmanFilter(truth.poses[0], truth.velocity_world[0], ImuNoise())
        previous = 0
        position_error = []
        for k in range(len(imu)):
            kf.predict(imu.angular_velocity[k], imu.linear_acceleration[k], _dt(imu.times, k))
            if k == 0:
                kf.clone_pose()
            elif k % MEASUREMENT_STRIDE == 0:
                measured = _relative_measurement(truth.poses[previous], truth.poses[k], rng)
                keep = (k // MEASUREMENT_STRIDE) % keyframe_every != 0
                kf.fuse_relative_pose(measured, RELATIVE_COVARIANCE, keep_clone=keep)
                if not keep:
                    previous = k
            position_error.append(truth.poses[k, :3, 3] - kf.position)
        state_error = _state_error(kf, truth, imu, len(imu) - 1)
        nees.append(state_error @ np.linalg.solve(kf.covariance, state_error))
        dead_reckoned, _ = integrate_imu(
            imu.times,
            imu.angular_velocity,
            imu.linear_acceleration,
            truth.poses[0],
            truth.velocity_world[0],
        )
        fused_sq.append(np.sum(np.square(position_error), axis=1))
        imu_only_sq.append(np.sum((dead_reckoned[:, :3, 3] - truth.poses[:, :3, 3]) ** 2, axis=1))
        rejected += kf.rejected_count
    return (
        np.array(nees),
        float(np.sqrt(np.mean(fused_sq))),
        float(np.sqrt(np.mean(imu_only_sq))),
        rejected,
    )


def _assert_relative_fusion_consistent(nees: np.ndarray, rejected: int) -> None:
    """NEES inside its 95 % bounds; rejections no more than the gate's chance rate."""
    low, high = chi2.ppf([0.025, 0.975], RELATIVE_RUNS * 15) / RELATIVE_RUNS
    print(
        f'state NEES {nees.mean():.2f} (95% bounds [{low:.2f}, {high:.2f}]), {rejected} rejected'
    )
    assert low < nees.mean() < high
    # The 99.9 % gate on 30 poses a run: a few rejections among 360 are chance.
    assert rejected <= 0.01 * RELATIVE_RUNS * (
        RELATIVE_DURATION_S * IMU_RATE_HZ // MEASUREMENT_STRIDE
    )


def test_relative_pose_fusion_is_consistent_and_bounds_the_drift():
    """Stochastic cloning keeps the filter consistent and the drift far below dead reckoning.

    Absolute position and yaw are unobservable from relative poses, so their variance
    grows; the 15-dim NEES checks that it grows as fast as the true error does.
    """
    nees, fused_rmse, imu_only_rmse, rejected = _relative_monte_carlo()
    print(f'relative fusion: position RMSE {fused_rmse:.4f} m, IMU only {imu_only_rmse:.3f} m')
    _assert_relative_fusion_consistent(nees, rejected)
    assert fused_rmse < 0.2 * imu_only_rmse


def test_keyframe_fusion_is_consistent_and_drifts_less_than_chaining():
    """Poses measured from a kept keyframe add their error once per keyframe, not per pose.

    The same number of equally noisy poses: chained frame to frame, the errors of all of
    them add up; four from each keyframe, only every fourth one's do.
    """
    nees, keyframe_rmse, _, rejected = _relative_monte_carlo(keyframe_every=4)
    _, chained_rmse, _, _ = _relative_monte_carlo()
    print(f'keyframe fusion: position RMSE {keyframe_rmse:.4f} m vs chained {chained_rmse:.4f} m')
    _assert_relative_fusion_consistent(nees, rejected)
    assert keyframe_rmse < 0.8 * chained_rmse


def test_discarded_snapshot_changes_nothing():
    truth, imu, _ = _simulate(TRAJECTORIES['yaw_sway'], 1.0, ImuNoise(), seed=5)
    reference = ErrorStateKalmanFilter(truth.poses[0], truth.velocity_world[0])
    delayed = DelayedPoseFusion(ErrorStateKalmanFilter(truth.poses[0], truth.velocity_world[0]))
    for k in range(len(imu)):
        gyro, accel = imu.angular_velocity[k], imu.linear_acceleration[k]
        reference.predict(gyro, accel, _dt(imu.times, k))
        delayed.add_imu(imu.times[k], gyro, accel)
        if k == 40:
            delayed.snapshot('pair', imu.times[k])
    assert delayed.buffered > 0
    delayed.discard('pair')
    assert delayed.outstanding == ()
    assert delayed.buffered == 0
    np.testing.assert_array_equal(delayed.filter.pose, reference.pose)
    with pytest.raises(UnknownSnapshotError):
        delayed.discard('pair')


def test_delayed_relative_fusion_equals_fusion_at_measurement_time():
    truth, imu, rng = _simulate(TRAJECTORIES['yaw_sway'], 4.0, ImuNoise(), seed=11)
    offloads = list(range(MEASUREMENT_STRIDE, len(imu) - 20, MEASUREMENT_STRIDE))
    failed = offloads[3]  # the server had no pose for this pair: the chain restarts there
    latency = 16  # samples; below the stride, so one offload is in flight at a time
    measurements, previous = {}, 0
    for k in offloads:
        measurements[k] = (
            None
            if k == failed
            else _relative_measurement(truth.poses[previous], truth.poses[k], rng)
        )
        previous = k
    arrivals = {k + latency: k for k in offloads}

    reference = ErrorStateKalmanFilter(truth.poses[0], truth.velocity_world[0])
    delayed = DelayedPoseFusion(ErrorStateKalmanFilter(truth.poses[0], truth.velocity_world[0]))
    for k in range(len(imu)):
        gyro, accel = imu.angular_velocity[k], imu.linear_acceleration[k]
        reference.predict(gyro, accel, _dt(imu.times, k))
        delayed.add_imu(imu.times[k], gyro, accel)
        if k == 0:
            reference.clone_pose()
            delayed.filter.clone_pose()
        elif k in measurements:
            if measurements[k] is None:
                reference.clone_pose()
            else:
                assert reference.fuse_relative_pose(measurements[k], RELATIVE_COVARIANCE)
            delayed.snapshot(k, imu.times[k])
        if k in arrivals:
            start = arrivals[k]
            fused = delayed.fuse_relative(start, measurements[start], RELATIVE_COVARIANCE)
            assert fused == (measurements[start] is not None)
        if not delayed.outstanding:
            np.testing.assert_allclose(delayed.filter.pose, reference.pose, atol=1e-9)

    kf = delayed.filter
    assert kf.fused_count == reference.fused_count == len(offloads) - 1
    np.testing.assert_allclose(kf.pose, reference.pose, rtol=0.0, atol=1e-9)
    np.testing.assert_allclose(kf.velocity, reference.velocity, rtol=0.0, atol=1e-9)
    np.testing.assert_allclose(kf.covariance, reference.covariance, rtol=0.0, atol=1e-9)


def test_rotated_outliers_never_force_their_way_in():
    """A run of poses 9° and 3 m off (a PnP on wrong matches) is refused, however long.

    Only translation disagreements can mean the filter's velocity is wrong; the attitude
    comes from the gyro. Before this rule the fourth such pose in a row was fused, and one
    replay's position error jumped from 0.07 m to 5.5 m.
    """
    truth, imu, rng = _simulate(TRAJECTORIES['default'], 3.0, ImuNoise(), seed=3)
    kf = ErrorStateKalmanFilter(truth.poses[0], truth.velocity_world[0], ImuNoise())
    outlier = make_poses(Rotation.from_euler('z', 9.0, degrees=True).as_matrix(), [3.0, 0, 0])
    outcomes = []
    for k in range(len(imu)):
        kf.predict(imu.angular_velocity[k], imu.linear_acceleration[k], _dt(imu.times, k))
        if k > 0 and k % MEASUREMENT_STRIDE == 0:
            good = _perturbed_pose(truth.poses[k], rng)
            bad = len(outcomes) in range(2, 9)  # seven outliers in a row
            outcomes.append(kf.fuse_pose(good @ outlier if bad else good, POSE_COVARIANCE))
    assert outcomes[2:9] == [False] * 7
    assert kf.rotation_outlier_count == 7
    assert kf.recovered_count == 0
    assert all(outcomes[:2])
    assert all(outcomes[9:])
    assert np.linalg.norm(kf.pose[:3, 3] - truth.poses[-1][:3, 3]) < 0.1


def test_poses_rejected_in_a_row_reopen_the_velocity():
    """A filter sure of a wrong velocity rejects good poses, but never more than three."""
    truth, imu, rng = _simulate(TRAJECTORIES['default'], 3.0, ImuNoise(), seed=2)
    wrong_velocity = truth.velocity_world[0] + np.array([2.0, 0.0, 0.0])
    kf = ErrorStateKalmanFilter(truth.poses[0], wrong_velocity, ImuNoise(), velocity_sigma=0.005)
    stuck = kf.copy()
    stuck.max_consecutive_rejections = None
    outcomes, stuck_outcomes = [], []
    for k in range(len(imu)):
        for filter_ in (kf, stuck):
            filter_.predict(imu.angular_velocity[k], imu.linear_acceleration[k], _dt(imu.times, k))
        if k > 0 and k % MEASUREMENT_STRIDE == 0:
            measured = _perturbed_pose(truth.poses[k], rng)
            outcomes.append(kf.fuse_pose(measured, POSE_COVARIANCE))
            stuck_outcomes.append(stuck.fuse_pose(measured, POSE_COVARIANCE))
    # Never more than three rejections in a row; once the velocity is right, all are taken.
    assert outcomes[:4] == [False, False, False, True]
    assert 'FFFF' not in ''.join('T' if taken else 'F' for taken in outcomes)
    assert kf.recovered_count >= 1
    assert all(outcomes[-10:])
    assert not any(stuck_outcomes)
    final_velocity_error = np.linalg.norm(kf.velocity - truth.velocity_world[-1])
    stuck_velocity_error = np.linalg.norm(stuck.velocity - truth.velocity_world[-1])
    print(f'velocity error {final_velocity_error:.3f} m/s, {stuck_velocity_error:.3f} if stuck')
    assert final_velocity_error < 0.2 * stuck_velocity_error
    with pytest.raises(ValueError, match='max_consecutive_rejections'):
        ErrorStateKalmanFilter(max_consecutive_rejections=0)


def test_a_pose_far_inside_the_gate_is_fused_with_less_weight():
    """The robust weight: d² above robust_distance_sq scales the pose's covariance by d²/it.

    A wrong VO pair just inside the gate (d² 19.8 against 22.46) otherwise moved a replay's
    velocity by 1 m/s at once; the filter then refused the good pairs after it.
    """
    truth, imu, kf = _filter_after_good_poses()
    # Offsets along x: the pose's d² grows with the square of the offset.
    direction = np.array([1.0, 0.0, 0.0])
    base = kf.copy()
    unit = base.pose.copy()
    unit[:3, 3] += 0.1 * direction
    base.fuse_pose(unit, POSE_COVARIANCE)
    per_offset_sq = base.last_mahalanobis_sq / 0.01  # d² of a 1 m offset (residual is linear)
    results = {}
    for d2 in (2.0, 15.0):
        offset = np.sqrt(d2 / per_offset_sq)
        measured = kf.pose.copy()
        measured[:3, 3] += offset * direction
        plain, robust = kf.copy(), kf.copy()
        robust.robust_distance_sq = 4.0
        assert plain.fuse_pose(measured, POSE_COVARIANCE)
        assert robust.fuse_pose(measured, POSE_COVARIANCE)
        assert robust.last_mahalanobis_sq == pytest.approx(d2, rel=1e-6)
        results[d2] = (plain, robust)
    # Near the prediction nothing changes; far out the pose pulls the state less.
    plain, robust = results[2.0]
    np.testing.assert_allclose(robust.pose, plain.pose, atol=1e-12)
    assert robust.downweighted_count == 0
    plain, robust = results[15.0]
    assert robust.downweighted_count == 1
    pulled = np.linalg.norm(plain.position - kf.position)
    pulled_robust = np.linalg.norm(robust.position - kf.position)
    assert 0.0 < pulled_robust < 0.6 * pulled
    with pytest.raises(ValueError, match='robust_distance_sq'):
        ErrorStateKalmanFilter(robust_distance_sq=0.0)


def test_level_ground_prior_stops_a_gyro_bias_from_tilting_the_attitude():
    """Without poses, a gyro bias tilts the attitude and gravity leaks into the velocity.

    On level ground (the trajectory's camera sways by under 1°) the prior keeps the tilt
    near the truth and the velocity error small; yaw, which it does not see, drifts alike.
    The accelerometer bias is set near zero here: the prior cannot see it, and its own
    drift would hide the gravity leak this test is about.
    """
    noise = ImuNoise(gyro_bias_sigma=np.radians(0.5), accel_bias_sigma=1e-4)
    truth, imu, _ = _simulate(TRAJECTORIES['default'], 8.0, noise, seed=11)
    plain = ErrorStateKalmanFilter(truth.poses[0], truth.velocity_world[0], noise)
    level = ErrorStateKalmanFilter(
        truth.poses[0], truth.velocity_world[0], noise, ground_prior=LevelGroundPrior()
    )
    up = np.array([0.0, 0.0, 1.0])
    for k in range(len(imu)):
        for kf in (plain, level):
            kf.predict(imu.angular_velocity[k], imu.linear_acceleration[k], _dt(imu.times, k))

    def tilt_deg(kf: ErrorStateKalmanFilter) -> float:
        return float(
            np.degrees(
                np.arccos(np.clip((kf.rotation.T @ up) @ (truth.poses[-1][:3, :3].T @ up), -1, 1))
            )
        )

    def velocity_error(kf: ErrorStateKalmanFilter) -> float:
        return float(np.linalg.norm(kf.velocity - truth.velocity_world[-1]))

    print(
        f'tilt {tilt_deg(plain):.2f} -> {tilt_deg(level):.2f} deg, velocity error '
        f'{velocity_error(plain):.2f} -> {velocity_error(level):.2f} m/s'
    )
    assert tilt_deg(plain) > 1.0
    assert tilt_deg(level) < 0.5
    assert velocity_error(level) < 0.5 * velocity_error(plain)
    assert abs(level.velocity[2]) < 0.3
    with pytest.raises(ValueError, match='tilt_sigma_rad'):
        LevelGroundPrior(tilt_sigma_rad=0.0)


def test_gyro_rotation_integrates_the_rates_between_two_times():
    times = np.arange(0.0, 2.0, 0.005)
    rates = np.tile([0.0, 0.0, 0.5], (len(times), 1))  # 0.5 rad/s about body z
    rotation = gyro_rotation(times, rates, 0.2, 1.2)
    assert rotation_angles(rotation[None])[0] == pytest.approx(0.5, abs=1e-9)
    assert rotation[1, 0] > 0  # positive yaw: x turns towards y
    # A known bias is taken off; the same window from the other end is the inverse.
    biased = gyro_rotation(times, rates + [0.0, 0.0, 0.1], 0.2, 1.2, bias=[0.0, 0.0, 0.1])
    np.testing.assert_allclose(biased, rotation, atol=1e-12)
    np.testing.assert_allclose(gyro_rotation(times, rates, 0.7, 0.7), np.eye(3))
    with pytest.raises(ValueError, match='before start'):
        gyro_rotation(times, rates, 1.0, 0.5)


def test_of_the_vo_alternatives_the_one_the_prediction_agrees_with_is_fused():
    """Every other pair gives a box's motion first and the room's as an alternative."""
    truth, imu, rng = _simulate(TRAJECTORIES['default'], 2.0, ImuNoise(), seed=4)
    kf = ErrorStateKalmanFilter(truth.poses[0], truth.velocity_world[0], ImuNoise())
    without = kf.copy()
    clone_at, pairs = 0, 0
    taken = []
    for k in range(len(imu)):
        for filter_ in (kf, without):
            filter_.predict(imu.angular_velocity[k], imu.linear_acceleration[k], _dt(imu.times, k))
        if k == 0:
            kf.clone_pose()
            without.clone_pose()
        elif k % MEASUREMENT_STRIDE == 0:
            room = _relative_measurement(truth.poses[clone_at], truth.poses[k], rng)
            box = room @ make_poses(np.eye(3), [0.25, 0.0, 0.05])  # same turn, moved on
            first, alternatives = (box, [(room, RELATIVE_COVARIANCE)]) if pairs % 2 else (room, [])
            taken.append(
                kf.fuse_relative_pose(first, RELATIVE_COVARIANCE, alternatives=alternatives)
            )
            without.fuse_relative_pose(first, RELATIVE_COVARIANCE)
            clone_at, pairs = k, pairs + 1
    assert all(taken)
    assert kf.alternative_count == pairs // 2
    assert kf.recovered_count == 0
    # Without them the gate refuses the box's motion, and those pairs are lost.
    assert without.rejected_count == pairs // 2
    assert kf.fused_count == pairs
    assert np.linalg.norm(kf.position - truth.poses[-1][:3, 3]) < 0.15


def test_alternatives_taken_in_a_row_still_lead_to_the_recovery():
    """A refused pose counts towards the recovery even when an alternative is taken."""
    kf = ErrorStateKalmanFilter()
    kf.clone_pose()
    far = make_poses(np.eye(3), [1.0, 0.0, 0.0])
    for expected in (1, 2, 3):
        assert kf.fuse_relative_pose(
            far, RELATIVE_COVARIANCE, alternatives=[(np.eye(4), RELATIVE_COVARIANCE)]
        )
        assert (kf.alternative_count, kf.consecutive_rejections) == (expected, expected)
    # The recovery is due: the pose itself is taken, with the velocity reopened.
    assert kf.fuse_relative_pose(
        far, RELATIVE_COVARIANCE, alternatives=[(np.eye(4), RELATIVE_COVARIANCE)]
    )
    assert (kf.alternative_count, kf.recovered_count) == (3, 1)
    # A pose the gate takes needs no alternative.
    kf.fuse_relative_pose(
        np.eye(4), RELATIVE_COVARIANCE, alternatives=[(far, RELATIVE_COVARIANCE)]
    )
    assert kf.alternative_count == 3


def test_an_imu_calibration_is_validated_and_uncalibrated_is_the_datasheet():
    noise = ImuNoise()
    uncalibrated = ImuCalibration.uncalibrated(noise)
    assert uncalibrated.gyro_bias == (0.0, 0.0, 0.0)
    assert uncalibrated.accel_bias_sigma == noise.accel_bias_sigma
    assert ImuCalibration([1, 2, 3], np.zeros(3), 0.1, 0.2).gyro_bias == (1.0, 2.0, 3.0)
    for bad in (
        dict(gyro_bias=(0.0, 0.0)),
        dict(accel_bias=(0.0, math.nan, 0.0)),
        dict(gyro_bias_sigma=0.0),
        dict(accel_bias_sigma=-1.0),
    ):
        values = dict(gyro_bias=(0.0, 0.0, 0.0), accel_bias=(0.0, 0.0, 0.0), gyro_bias_sigma=1e-3)
        values['accel_bias_sigma'] = 1e-2
        values.update(bad)
        with pytest.raises(ValueError, match=next(iter(bad))):
            ImuCalibration(**values)


def test_a_calibrated_filter_dead_reckons_without_the_bias_drift():
    """A robot standing still, its accelerometer 0.2 m/s² off: calibrated, it stays put.

    Unknown, the bias is integrated into metres within seconds.
    """
    accel_bias = np.array([0.15, -0.12, 0.0])
    gyro_bias = np.array([0.004, -0.003, 0.002])
    noise = ImuNoise()
    calibrated = ImuCalibration(gyro_bias, accel_bias, 1e-4, 0.01)
    filters = {
        'uncalibrated': ErrorStateKalmanFilter(noise=noise),
        'calibrated': ErrorStateKalmanFilter(noise=noise, **calibrated.filter_keywords()),
    }
    gravity_reading = -GRAVITY_WORLD  # the specific force at rest, body axes = world axes
    dt = 1.0 / IMU_RATE_HZ
    for kf in filters.values():
        for _ in range(int(5.0 * IMU_RATE_HZ)):
            kf.predict(gyro_bias, gravity_reading + accel_bias, dt)
    drift = {name: float(np.linalg.norm(kf.position)) for name, kf in filters.items()}
    assert drift['uncalibrated'] > 1.5  # ½ · 0.19 m/s² · (5 s)²
    assert drift['calibrated'] < 0.01
    assert np.allclose(filters['calibrated'].biases[1], accel_bias)
    # The calibration's residual (plus 5 s of bias walk) is the filter's bias uncertainty.
    expected = 0.01**2 + noise.accel_bias_walk**2 * 5.0
    assert filters['calibrated'].covariance[12, 12] == pytest.approx(expected, rel=0.01)
    assert filters['uncalibrated'].covariance[12, 12] > noise.accel_bias_sigma**2
