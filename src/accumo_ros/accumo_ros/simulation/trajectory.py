# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Smooth, analytic camera trajectories for the synthetic AccuMO sequences.

A robot drives a figure-eight (a 1:2 Lissajous curve) on a level floor, heading along the
path; on top of that its camera head sways in yaw (the knob for angular velocity), and the
chassis pitches, rolls and bounces a little. Every term is a sinusoid, so position,
velocity, acceleration, orientation and body angular velocity are exact closed forms, and
the IMU derived from them is consistent with the ground-truth pose to machine precision.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accumo_ros.geometry import (
    GRAVITY_WORLD,
    euler_zyx_matrices,
    euler_zyx_rates_to_body,
    make_poses,
)


@dataclass(frozen=True)
class Sinusoid:
    """``amplitude * sin(2 pi hz t + phase)`` and its first two time derivatives."""

    amplitude: float
    hz: float
    phase: float = 0.0

    def value(self, t: np.ndarray) -> np.ndarray:
        """Return the value at times ``t``."""
        return self.amplitude * np.sin(2.0 * np.pi * self.hz * t + self.phase)

    def rate(self, t: np.ndarray) -> np.ndarray:
        """Return the first derivative at times ``t``."""
        omega = 2.0 * np.pi * self.hz
        return self.amplitude * omega * np.cos(omega * t + self.phase)

    def acceleration(self, t: np.ndarray) -> np.ndarray:
        """Return the second derivative at times ``t``."""
        omega = 2.0 * np.pi * self.hz
        return -self.amplitude * omega**2 * np.sin(omega * t + self.phase)


@dataclass(frozen=True)
class TrajectoryConfig:
    """A figure-eight drive with a swaying camera.

    ``yaw_sway`` sets the angular velocity: its peak rate is ``2 pi amplitude hz`` rad/s on
    top of the path's own turning (at most ``radius_x / (2 radius_y) * 2 pi / lap`` rad/s).
    """

    center_x_m: float = 0.0
    center_y_m: float = 0.0
    radius_x_m: float = 9.0
    radius_y_m: float = 3.5
    lap_period_s: float = 40.0
    lap_phase_rad: float = 0.0
    camera_height_m: float = 1.2
    yaw_sway: Sinusoid = Sinusoid(0.05, 0.3)
    pitch_sway: Sinusoid = Sinusoid(0.01, 0.9)
    roll_sway: Sinusoid = Sinusoid(0.008, 1.3)
    bounce: Sinusoid = Sinusoid(0.01, 2.3)

    def __post_init__(self) -> None:
        if self.radius_x_m <= 0.0 or self.radius_y_m <= 0.0 or self.lap_period_s <= 0.0:
            raise ValueError('radii and lap period must be positive')


@dataclass(frozen=True)
class TrajectoryState:
    """Ground truth at a set of times (all arrays have N rows)."""

    times: np.ndarray
    poses: np.ndarray  # T_world_body (N, 4, 4)
    velocity_world: np.ndarray  # (N, 3) m/s
    acceleration_world: np.ndarray  # (N, 3) m/s²
    angular_velocity_body: np.ndarray  # (N, 3) rad/s

    @property
    def specific_force_body(self) -> np.ndarray:
        """What an ideal accelerometer measures: R^T (a - g), in m/s²."""
        rotations = self.poses[:, :3, :3]
        return np.einsum('nji,nj->ni', rotations, self.acceleration_world - GRAVITY_WORLD)


class Trajectory:
    """Evaluate a :class:`TrajectoryConfig` at any times."""

    def __init__(self, config: TrajectoryConfig) -> None:
        self.config = config
        self._omega = 2.0 * np.pi / config.lap_period_s

    def path_position(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Floor position (x, y) and its first two derivatives along the figure-eight."""
        c = self.config
        theta = self._omega * t + c.lap_phase_rad
        w = self._omega
        position = np.stack(
            [
                c.center_x_m + c.radius_x_m * np.sin(theta),
                c.center_y_m + c.radius_y_m * np.sin(2.0 * theta),
            ],
            axis=-1,
        )
        velocity = np.stack(
            [c.radius_x_m * w * np.cos(theta), 2.0 * c.radius_y_m * w * np.cos(2.0 * theta)],
            axis=-1,
        )
        acceleration = np.stack(
            [
                -c.radius_x_m * w**2 * np.sin(theta),
                -4.0 * c.radius_y_m * w**2 * np.sin(2.0 * theta),
            ],
            axis=-1,
        )
        return position, velocity, acceleration

    def heading(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Path heading (rad) and its rate (rad/s); the speed never vanishes on this curve."""
        _, velocity, acceleration = self.path_position(t)
        vx, vy = velocity[..., 0], velocity[..., 1]
        ax, ay = acceleration[..., 0], acceleration[..., 1]
        return np.arctan2(vy, vx), (vx * ay - vy * ax) / (vx**2 + vy**2)

    def state(self, t: np.ndarray | float) -> TrajectoryState:
        """Poses, velocities, accelerations and body rates at times ``t`` (s)."""
        c = self.config
        t = np.atleast_1d(np.asarray(t, dtype=np.float64))
        xy, xy_rate, xy_accel = self.path_position(t)
        heading, heading_rate = self.heading(t)
        yaw = heading + c.yaw_sway.value(t)
        yaw_rate = heading_rate + c.yaw_sway.rate(t)
        pitch, pitch_rate = c.pitch_sway.value(t), c.pitch_sway.rate(t)
        roll, roll_rate = c.roll_sway.value(t), c.roll_sway.rate(t)

        position = np.column_stack([xy, c.camera_height_m + c.bounce.value(t)])
        velocity = np.column_stack([xy_rate, c.bounce.rate(t)])
        acceleration = np.column_stack([xy_accel, c.bounce.acceleration(t)])
        rotations = euler_zyx_matrices(yaw, pitch, roll)
        body_rates = euler_zyx_rates_to_body(pitch, roll, yaw_rate, pitch_rate, roll_rate)
        return TrajectoryState(
            times=t,
            poses=make_poses(rotations, position),
            velocity_world=velocity,
            acceleration_world=acceleration,
            angular_velocity_body=body_rates,
        )

    def samples(self, duration_s: float, rate_hz: float, start_s: float = 0.0) -> np.ndarray:
        """Return times ``start_s + k / rate_hz`` covering ``duration_s`` seconds."""
        count = int(round(duration_s * rate_hz))
        return start_s + np.arange(count) / rate_hz
