# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Synthetic AccuMO sequences: scene, trajectory, IMU and frames from one seed.

AccuMO's evaluation needs frames with ground-truth depth and pose plus an IMU at 60 FPS;
none can be downloaded, so (like the dissertation with CARLA) the suite makes them. A
sequence is labelled with one of four categories, dynamic objects low/high × angular
velocity low/high (``<dynamic>_<angular>``, e.g. ``high_low``):

* **dynamic objects**: boxes that drive the robot's own figure-eight ahead of it or
  towards it, offset sideways (so they never hit the camera). ``low``: one pedestrian-sized
  box far ahead; ``high``: two car-sized boxes close ahead and two oncoming ones. Their
  measured image share is written to the metadata.
* **angular velocity**: the camera head's yaw sway
  (:mod:`accumo_ros.simulation.trajectory`). ``low``:
  ±2.3° at 0.25 Hz; ``high``: ±26° at 0.4 Hz. The measured mean |ω| is in the metadata.

Everything is drawn from ``numpy.random.default_rng(seed)``, so a seed gives the same
sequence on any machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from accumo_ros.simulation.imu import ImuNoise, ImuSeries, simulate_imu
from accumo_ros.simulation.scene import Box, RenderedFrame, Renderer, Scene, make_texture_bank
from accumo_ros.simulation.trajectory import Sinusoid, Trajectory, TrajectoryConfig
from edge_offload.camera_model import PinholeCamera

DYNAMIC_LEVELS = ('low', 'high')
ANGULAR_LEVELS = ('low', 'high')
CATEGORIES = tuple(f'{d}_{a}' for d in DYNAMIC_LEVELS for a in ANGULAR_LEVELS)
YAW_SWAY = {'low': (0.04, 0.25), 'high': (0.45, 0.4)}  # amplitude rad, frequency Hz
ROOM_HALF_EXTENTS = np.array([14.0, 8.5, 3.5])
# Static boxes keep this much floor free on each side of the path, for the moving boxes.
PATH_CLEARANCE_M = 2.6
MIN_CAMERA_CLEARANCE_M = 0.6


@dataclass(frozen=True)
class SequenceConfig:
    """What to generate; every field has a default (the default data set's)."""

    seed: int = 0
    category: str = 'low_low'
    duration_s: float = 20.0
    fps: float = 60.0
    imu_rate_hz: float = 240.0
    width: int = 416
    height: int = 128
    horizontal_fov_deg: float = 90.0
    imu_noise: ImuNoise = field(default_factory=ImuNoise)
    static_boxes: int = 14

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f'unknown category {self.category!r}; use one of {CATEGORIES}')
        if self.duration_s <= 0.0 or self.fps <= 0.0:
            raise ValueError('duration_s and fps must be positive')
        if self.imu_rate_hz < self.fps:
            raise ValueError('the IMU must run at least at the frame rate')
        if self.width < 8 or self.height < 8:
            raise ValueError('images must be at least 8×8 pixels')

    @property
    def dynamic_level(self) -> str:
        """``low`` or ``high`` moving-object share."""
        return self.category.split('_')[0]

    @property
    def angular_level(self) -> str:
        """``low`` or ``high`` angular velocity."""
        return self.category.split('_')[1]

    @property
    def frame_count(self) -> int:
        """Frames in the sequence."""
        return int(round(self.duration_s * self.fps))

    @property
    def intrinsics(self) -> PinholeCamera:
        """The camera."""
        return PinholeCamera.from_fov(self.width, self.height, self.horizontal_fov_deg)


@dataclass(frozen=True)
class SyntheticFrame:
    """One frame with its ground truth."""

    index: int
    time_s: float
    pose: np.ndarray  # T_world_body (4, 4)
    rendered: RenderedFrame


class SyntheticSequence:
    """A generated sequence: scene, trajectory, IMU; frames are rendered on demand."""

    def __init__(self, config: SequenceConfig) -> None:
        self.config = config
        rng = np.random.default_rng(config.seed)
        self.trajectory = Trajectory(_trajectory_config(config, rng))
        self.scene = _build_scene(config, self.trajectory, rng)
        self.frame_times = np.arange(config.frame_count) / config.fps
        self.ground_truth = self.trajectory.state(self.frame_times)
        imu_times = self.trajectory.samples(config.duration_s, config.imu_rate_hz)
        self.imu: ImuSeries = simulate_imu(self.trajectory, imu_times, config.imu_noise, rng)
        self.renderer = Renderer(self.scene, config.intrinsics)

    def frame(self, index: int) -> SyntheticFrame:
        """Render frame ``index``."""
        t = float(self.frame_times[index])
        pose = self.ground_truth.poses[index]
        return SyntheticFrame(index, t, pose, self.renderer.render(pose, t))

    def frames(self) -> Iterator[SyntheticFrame]:
        """Render every frame in order."""
        for index in range(len(self.frame_times)):
            yield self.frame(index)

    def mean_angular_speed(self) -> float:
        """Mean |ω| of the ground truth over the frames, rad/s."""
        return float(np.linalg.norm(self.ground_truth.angular_velocity_body, axis=1).mean())


def _trajectory_config(config: SequenceConfig, rng: np.random.Generator) -> TrajectoryConfig:
    amplitude, hz = YAW_SWAY[config.angular_level]
    return TrajectoryConfig(
        radius_x_m=float(rng.uniform(8.0, 9.5)),
        radius_y_m=float(rng.uniform(3.0, 3.8)),
        lap_period_s=float(rng.uniform(36.0, 44.0)),
        lap_phase_rad=float(rng.uniform(0.0, 2.0 * np.pi)),
        camera_height_m=float(rng.uniform(1.0, 1.4)),
        yaw_sway=Sinusoid(amplitude, hz, float(rng.uniform(0.0, 2.0 * np.pi))),
        pitch_sway=Sinusoid(0.01, 0.9, float(rng.uniform(0.0, 2.0 * np.pi))),
        roll_sway=Sinusoid(0.008, 1.3, float(rng.uniform(0.0, 2.0 * np.pi))),
        bounce=Sinusoid(0.01, 2.3, float(rng.uniform(0.0, 2.0 * np.pi))),
    )


def _random_albedo(rng: np.random.Generator) -> np.ndarray:
    hue = rng.random(3)
    return 0.35 + 0.65 * hue / hue.max()


def _path_points(trajectory: Trajectory, count: int = 400) -> np.ndarray:
    times = np.linspace(0.0, trajectory.config.lap_period_s, count, endpoint=False)
    return trajectory.path_position(times)[0]


def _build_scene(
    config: SequenceConfig, trajectory: Trajectory, rng: np.random.Generator
) -> Scene:
    textures = make_texture_bank(rng, 8)
    room = Box(
        center=np.array([0.0, 0.0, ROOM_HALF_EXTENTS[2]]),
        half_extents=ROOM_HALF_EXTENTS,
        yaw=0.0,
        albedo=np.array([0.85, 0.82, 0.78]),
        texture=0,
        texel_m=0.04,
        inside=True,
        name='room',
    )
    boxes = [room]
    path = _path_points(trajectory)
    attempts = 0
    while len(boxes) < 1 + config.static_boxes and attempts < 2000:
        attempts += 1
        tall = rng.random() < 0.3
        half = (
            np.array([rng.uniform(0.2, 0.4), rng.uniform(0.2, 0.4), rng.uniform(1.2, 2.5)])
            if tall
            else rng.uniform([0.3, 0.3, 0.2], [1.5, 1.5, 1.1])
        )
        limit = ROOM_HALF_EXTENTS[:2] - half[:2].max()
        center_xy = rng.uniform(-limit, limit)
        radius = float(np.linalg.norm(half[:2]))
        if np.min(np.linalg.norm(path - center_xy, axis=1)) < radius + PATH_CLEARANCE_M:
            continue
        boxes.append(
            Box(
                center=np.array([center_xy[0], center_xy[1], half[2]]),
                half_extents=half,
                yaw=float(rng.uniform(0.0, np.pi)),
                albedo=_random_albedo(rng),
                texture=int(rng.integers(1, len(textures))),
                texel_m=float(rng.uniform(0.015, 0.04)),
                name='pillar' if tall else 'box',
            )
        )
    boxes.extend(_moving_boxes(config, trajectory, rng))
    return Scene(boxes, textures)


def _moving_boxes(
    config: SequenceConfig, trajectory: Trajectory, rng: np.random.Generator
) -> list[Box]:
    """Boxes that drive the figure-eight ahead of the camera or towards it."""
    if config.dynamic_level == 'low':
        layouts = [('pedestrian', float(rng.uniform(5.0, 7.0)), float(rng.choice([-1, 1])))]
    else:
        meet_1, meet_2 = rng.uniform(0.15, 0.85, 2) * config.duration_s
        layouts = [
            ('car', float(rng.uniform(3.5, 4.5)), 1.0),
            ('car', float(rng.uniform(5.5, 6.5)), -1.0),
            ('oncoming', float(meet_1), 1.0),
            ('oncoming', float(meet_2), -1.0),
        ]
    times = np.arange(config.frame_count) / config.fps
    camera = trajectory.state(times).poses[:, :3, 3]
    boxes = []
    for kind, first_parameter, side in layouts:
        if kind == 'pedestrian':
            half = np.array([0.25, 0.3, 0.85])
        else:
            half = np.array([rng.uniform(1.6, 2.2), rng.uniform(0.75, 0.9), rng.uniform(0.7, 0.8)])
        lateral = side * (float(half[1]) + 0.8)
        box = Box(
            center=np.zeros(3),
            half_extents=half,
            yaw=0.0,
            albedo=_random_albedo(rng),
            texture=int(rng.integers(1, 8)),
            texel_m=float(rng.uniform(0.01, 0.025)),
            name=kind,
        )
        # On the figure-eight's tight ends a box ahead can swing in front of the camera;
        # push it further ahead (or move the meeting) until it keeps its distance.
        for attempt in range(40):
            parameter = first_parameter + (
                rng.uniform(0.0, config.duration_s) if kind == 'oncoming' and attempt else attempt
            )
            box.motion = _PathFollower(
                trajectory, kind == 'oncoming', float(parameter), lateral, float(half[2])
            )
            if _clearance(box, times, camera) >= MIN_CAMERA_CLEARANCE_M:
                boxes.append(box)
                break
    return boxes


def _clearance(box: Box, times: np.ndarray, camera: np.ndarray) -> float:
    """Smallest distance between the camera and the box's surface over ``times``."""
    yaw, centers = box.motion.poses(times)
    offset = camera - centers
    cos_yaw, sin_yaw = np.cos(yaw), np.sin(yaw)
    local = np.abs(
        np.stack(
            [
                cos_yaw * offset[:, 0] + sin_yaw * offset[:, 1],
                -sin_yaw * offset[:, 0] + cos_yaw * offset[:, 1],
                offset[:, 2],
            ],
            axis=1,
        )
    )
    return float(np.linalg.norm(np.maximum(local - box.half_extents, 0.0), axis=1).min())


@dataclass(frozen=True)
class _PathFollower:
    """Drive the camera's path ``lead_s`` ahead, or towards it to meet at ``lead_s``."""

    trajectory: Trajectory
    oncoming: bool
    lead_s: float
    lateral_m: float
    height_m: float

    def poses(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Yaw (N,) and centre (N, 3) at ``times``."""
        path_times = 2.0 * self.lead_s - times if self.oncoming else times + self.lead_s
        position, _, _ = self.trajectory.path_position(path_times)
        heading, _ = self.trajectory.heading(path_times)
        normal = np.stack([-np.sin(heading), np.cos(heading)], axis=-1)
        xy = position + self.lateral_m * normal
        centers = np.column_stack([xy, np.full(len(xy), self.height_m)])
        return heading + (np.pi if self.oncoming else 0.0), centers

    def __call__(self, t: float) -> tuple[float, np.ndarray]:
        yaw, centers = self.poses(np.array([t]))
        return float(yaw[0]), centers[0]
