# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""A MEMS IMU model (white noise, bias, bias random walk) and strapdown integration.

Noise figures are those of the Bosch BMI263 / BMI270 family (the dissertation names the
BMI263 as the datasheet its simulated IMU noise follows; the BMI263 shares the BMI270's
sensing elements), datasheet BST-BMI270-DS000, tables "Gyroscope" and "Accelerometer":

* gyroscope output noise density 0.007 °/s/√Hz; zero-rate offset ±0.5 °/s;
* accelerometer output noise density 160 µg/√Hz; zero-g offset ±20 mg.

Bosch gives typical values as 1 sigma, so the initial biases are drawn with those sigmas.
The datasheet has no bias-instability figure; the bias random walks (gyro 2e-5 rad/s²/√Hz,
accel 3e-3 m/s³/√Hz) are typical calibrated values for consumer MEMS IMUs and are an
assumption of this model, not datasheet values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.spatial.transform import Rotation

from accumo_ros.geometry import GRAVITY_WORLD, make_poses
from accumo_ros.simulation.trajectory import Trajectory

STANDARD_GRAVITY = 9.80665


@dataclass(frozen=True)
class ImuNoise:
    """Continuous-time noise of a 3-axis gyroscope and accelerometer (SI units)."""

    gyro_noise_density: float = math.radians(0.007)  # rad/s/√Hz
    accel_noise_density: float = 160e-6 * STANDARD_GRAVITY  # m/s²/√Hz
    gyro_bias_sigma: float = math.radians(0.5)  # rad/s, initial bias (1 sigma)
    accel_bias_sigma: float = 20e-3 * STANDARD_GRAVITY  # m/s², initial bias (1 sigma)
    gyro_bias_walk: float = 2e-5  # rad/s²/√Hz (assumption, see the module docstring)
    accel_bias_walk: float = 3e-3  # m/s³/√Hz (assumption, see the module docstring)

    @classmethod
    def noise_free(cls) -> ImuNoise:
        """Return an ideal IMU."""
        return cls(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)

    def scaled(self, factor: float) -> ImuNoise:
        """Every figure multiplied by ``factor`` (a better or worse part)."""
        return replace(
            self,
            **{name: getattr(self, name) * factor for name in self.__dataclass_fields__},
        )


@dataclass(frozen=True)
class ImuSeries:
    """IMU samples as ``sensor_msgs/Imu`` carries them, plus the true biases."""

    times: np.ndarray  # (N,) s
    angular_velocity: np.ndarray  # (N, 3) rad/s, body frame
    linear_acceleration: np.ndarray  # (N, 3) m/s², specific force, body frame
    gyro_bias: np.ndarray  # (N, 3) the bias contained in angular_velocity
    accel_bias: np.ndarray  # (N, 3) the bias contained in linear_acceleration

    def __len__(self) -> int:
        return len(self.times)


def _bias_path(
    rng: np.random.Generator, count: int, dt: float, initial_sigma: float, walk: float
) -> np.ndarray:
    initial = rng.normal(0.0, initial_sigma, size=3)
    steps = rng.normal(0.0, walk * np.sqrt(dt), size=(count, 3))
    steps[0] = 0.0
    return initial + np.cumsum(steps, axis=0)


def simulate_imu(
    trajectory: Trajectory,
    times: np.ndarray,
    noise: ImuNoise,
    rng: np.random.Generator,
) -> ImuSeries:
    """Sample the IMU at ``times`` (uniform) along ``trajectory``.

    White noise is discretised as ``density * sqrt(rate)`` per sample; the bias random walk
    as ``walk * sqrt(dt)`` per step.
    """
    times = np.asarray(times, dtype=np.float64)
    if len(times) < 2:
        raise ValueError('need at least two IMU samples')
    dt = float(times[1] - times[0])
    state = trajectory.state(times)
    count = len(times)
    gyro_bias = _bias_path(rng, count, dt, noise.gyro_bias_sigma, noise.gyro_bias_walk)
    accel_bias = _bias_path(rng, count, dt, noise.accel_bias_sigma, noise.accel_bias_walk)
    gyro_white = rng.normal(0.0, noise.gyro_noise_density / np.sqrt(dt), size=(count, 3))
    accel_white = rng.normal(0.0, noise.accel_noise_density / np.sqrt(dt), size=(count, 3))
    return ImuSeries(
        times=times,
        angular_velocity=state.angular_velocity_body + gyro_bias + gyro_white,
        linear_acceleration=state.specific_force_body + accel_bias + accel_white,
        gyro_bias=gyro_bias,
        accel_bias=accel_bias,
    )


def integrate_imu(
    times: np.ndarray,
    angular_velocity: np.ndarray,
    linear_acceleration: np.ndarray,
    initial_pose: np.ndarray,
    initial_velocity: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Dead-reckon poses (N, 4, 4) and world velocities (N, 3) from IMU samples.

    Second order: the rotation advances by the mean body rate of each step on SO(3), the
    velocity by the mean world acceleration, the position by the trapezoid of velocities.
    """
    count = len(times)
    rotations = np.empty((count, 3, 3))
    positions = np.empty((count, 3))
    velocities = np.empty((count, 3))
    rotations[0] = initial_pose[:3, :3]
    positions[0] = initial_pose[:3, 3]
    velocities[0] = initial_velocity
    accel_world = rotations[0] @ linear_acceleration[0] + GRAVITY_WORLD
    for k in range(1, count):
        dt = times[k] - times[k - 1]
        mean_rate = 0.5 * (angular_velocity[k - 1] + angular_velocity[k])
        rotations[k] = rotations[k - 1] @ Rotation.from_rotvec(mean_rate * dt).as_matrix()
        next_accel_world = rotations[k] @ linear_acceleration[k] + GRAVITY_WORLD
        velocities[k] = velocities[k - 1] + 0.5 * (accel_world + next_accel_world) * dt
        positions[k] = positions[k - 1] + 0.5 * (velocities[k - 1] + velocities[k]) * dt
        accel_world = next_accel_world
    return make_poses(rotations, positions), velocities
