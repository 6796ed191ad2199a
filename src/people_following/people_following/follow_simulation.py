# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""A simulated person, robot and RGB-D camera for testing the people-following chain.

Plain numpy, deterministic given a seeded generator. :func:`simulate_chain` closes the loop
through the pure modules (the acceptance test ``test_follow_chain.py`` and
``benchmarks/follow_accuracy.py``); the world's pieces also drive the process-level test
across the ROS nodes (``test/test_follow_closed_loop_system.py``).

* Robot: a unicycle (x, y, heading) in the odometry frame that executes each command exactly
  for one control cycle (an exact arc).
* Camera: 0.1 m ahead of the base, 0.5 m up, looking forward and pitched up 15° (so a person
  at the set distance keeps the hips in view); a 320×240 RGB image and a 160×120 depth image
  registered to it, 70° horizontal field of view.
* Person: a vertical cylinder (radius 0.2 m, 1.75 m tall) with 17 COCO joints inside it. The
  depth image is ray-cast against the person, the floor and a background 8 m away, with
  noise and dropouts; keypoints are the joints' projections with pixel noise, score 0 when
  out of the image.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from edge_offload.camera_model import PinholeCamera
from people_following.follower import FollowerCommand, FollowerConfig, PersonFollower, Target
from people_following.person_localizer import LocalizerConfig, PersonLocalizer
from people_following.person_tracker import PersonTracker

# The camera's mounting as the people_tracker node's parameters (REP-103 rpy: pitch up 15°).
CAMERA_POSITION_M = (0.1, 0.0, 0.5)
CAMERA_RPY_RAD = (0.0, -math.radians(15.0), 0.0)

WALK_START_S = 4.0  # standing 2.5 m ahead until then, so the robot closes in first
CURVE_START_S = 12.0
GONE_S = 24.0  # the person disappears
SETTLED_S = WALK_START_S + 4.0
SPEED = 0.5  # m/s
CURVE_RADIUS = 5.0  # m, to the left
BODY_RADIUS = 0.2
BODY_HEIGHT = 1.75
BACKGROUND_M = 8.0

# COCO joints: (lateral offset to the person's left, height), metres.
JOINTS = np.array(
    [
        (0.0, 1.60),  # nose
        (0.03, 1.64),  # left eye
        (-0.03, 1.64),
        (0.08, 1.62),  # left ear
        (-0.08, 1.62),
        (0.18, 1.42),  # left shoulder
        (-0.18, 1.42),
        (0.22, 1.12),  # left elbow
        (-0.22, 1.12),
        (0.22, 0.85),  # left wrist
        (-0.22, 0.85),
        (0.10, 0.95),  # left hip
        (-0.10, 0.95),
        (0.10, 0.50),  # left knee
        (-0.10, 0.50),
        (0.10, 0.08),  # left ankle
        (-0.10, 0.08),
    ]
)


def pinhole(width: int, height: int, hfov_deg: float) -> PinholeCamera:
    focal = (width / 2.0) / math.tan(math.radians(hfov_deg) / 2.0)
    k = [focal, 0.0, (width - 1) / 2.0, 0.0, focal, (height - 1) / 2.0, 0.0, 0.0, 1.0]
    return PinholeCamera.from_k(k, width, height)


RGB = pinhole(320, 240, 70.0)
DEPTH = pinhole(160, 120, 70.0)


def _base_optical() -> np.ndarray:
    """T_base_optical: the camera's mounting on the robot."""
    # Optical axes in the base frame (x forward, y left, z up): x right, y down, z forward.
    optical = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
    pitch = math.radians(15.0)
    c, s = math.cos(pitch), math.sin(pitch)
    pitch_up = np.array([[c, 0.0, -s], [0.0, 1.0, 0.0], [s, 0.0, c]])
    transform = np.eye(4)
    transform[:3, :3] = pitch_up @ optical
    transform[:3, 3] = (0.1, 0.0, 0.5)
    return transform


T_BASE_OPTICAL = _base_optical()
_COLUMNS, _ROWS = np.meshgrid(np.arange(DEPTH.width), np.arange(DEPTH.height))
# Depth-pixel rays in the optical frame, z = 1: the ray parameter is the z-depth.
DEPTH_RAYS = DEPTH.ray(np.stack([_COLUMNS + 0.5, _ROWS + 0.5], axis=-1)).reshape(-1, 3)


@dataclass(frozen=True)
class PersonState:
    x: float
    y: float
    heading: float
    visible: bool


def make_walker(speed: float = SPEED) -> Callable[[float], PersonState]:
    """Return a walk: stand 2.5 m ahead, walk straight, then a curve left; vanish at GONE_S.

    The straight part lasts from ``WALK_START_S`` to ``CURVE_START_S``; ``speed`` in m/s.
    """

    def walk(t: float) -> PersonState:
        walked = max(0.0, t - WALK_START_S) * speed
        straight = (CURVE_START_S - WALK_START_S) * speed
        visible = t < GONE_S
        if walked <= straight:
            return PersonState(2.5 + walked, 0.0, 0.0, visible)
        angle = (walked - straight) / CURVE_RADIUS
        return PersonState(
            2.5 + straight + CURVE_RADIUS * math.sin(angle),
            CURVE_RADIUS * (1.0 - math.cos(angle)),
            angle,
            visible,
        )

    return walk


walker = make_walker(SPEED)


@dataclass
class Robot:
    x: float = 0.0
    y: float = 0.0
    heading: float = 0.0

    def t_odom_base(self) -> np.ndarray:
        c, s = math.cos(self.heading), math.sin(self.heading)
        transform = np.eye(4)
        transform[:2, :2] = [[c, -s], [s, c]]
        transform[:2, 3] = (self.x, self.y)
        return transform

    def to_base(self, point: np.ndarray) -> tuple[float, float]:
        """Return an odometry-frame ground point in the base frame."""
        dx, dy = point[0] - self.x, point[1] - self.y
        c, s = math.cos(self.heading), math.sin(self.heading)
        return c * dx + s * dy, -s * dx + c * dy

    def rotate_to_base(self, vector: np.ndarray) -> tuple[float, float]:
        """Return an odometry-frame ground vector (a velocity) in the base axes."""
        c, s = math.cos(self.heading), math.sin(self.heading)
        return c * vector[0] + s * vector[1], -s * vector[0] + c * vector[1]

    def drive(self, linear: float, angular: float, dt: float) -> None:
        """Execute a command for ``dt`` seconds exactly (an arc)."""
        if abs(angular) < 1e-12:
            self.x += linear * dt * math.cos(self.heading)
            self.y += linear * dt * math.sin(self.heading)
            return
        heading = self.heading + angular * dt
        self.x += linear / angular * (math.sin(heading) - math.sin(self.heading))
        self.y -= linear / angular * (math.cos(heading) - math.cos(self.heading))
        self.heading = heading


def render_camera_frame(
    person: PersonState, t_odom_optical: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Render the keypoints (17, 3) and the depth image the camera sees."""
    rotation, camera = t_odom_optical[:3, :3], t_odom_optical[:3, 3]
    directions = DEPTH_RAYS @ rotation.T  # odometry frame, one per depth pixel
    with np.errstate(divide='ignore', invalid='ignore'):
        floor = np.where(directions[:, 2] < 0.0, -camera[2] / directions[:, 2], np.inf)
    depth = np.minimum(floor, BACKGROUND_M)
    keypoints = np.zeros((17, 3))
    if person.visible:
        # Ray against the vertical cylinder: |c + t·d - p|² = r² on the ground plane.
        offset = camera[:2] - (person.x, person.y)
        a = np.sum(directions[:, :2] ** 2, axis=1)
        b = 2.0 * directions[:, :2] @ offset
        c = offset @ offset - BODY_RADIUS**2
        discriminant = b * b - 4.0 * a * c
        with np.errstate(invalid='ignore', divide='ignore'):
            t = (-b - np.sqrt(discriminant)) / (2.0 * a)
        height = camera[2] + t * directions[:, 2]
        hit = (discriminant >= 0.0) & (t > 0.0) & (height >= 0.0) & (height <= BODY_HEIGHT)
        depth = np.where(hit & (t < depth), t, depth)

        left = np.array([-math.sin(person.heading), math.cos(person.heading)])
        joints = np.empty((17, 3))
        joints[:, :2] = np.array([person.x, person.y]) + JOINTS[:, :1] * left
        joints[:, 2] = JOINTS[:, 1]
        in_optical = (joints - camera) @ rotation  # Rᵀ(p - c), row by row
        pixels = RGB.pixel(in_optical) + rng.normal(0.0, 1.0, (17, 2))
        seen = RGB.contains(pixels)
        keypoints[seen, :2] = pixels[seen]
        keypoints[seen, 2] = 0.9
    depth = depth + rng.normal(0.0, 0.02, depth.shape)
    depth[rng.random(depth.shape) < 0.05] = 0.0  # dropouts
    return keypoints, depth.reshape(DEPTH.height, DEPTH.width)


CHAIN_DT = 0.05  # 20 Hz control
CHAIN_CAMERA_EVERY = 2  # a frame every other cycle: 10 Hz
LATENCY_STEPS = 1  # a frame's result reaches the follower one cycle later
# The simulated torso's surface is 0.09 m (shoulders) to 0.17 m (hips) in front of its axis.
LOCALIZER = LocalizerConfig(body_centre_offset_m=0.15)


@dataclass
class Run:
    """What happened in one :func:`simulate_chain` run, cycle by cycle."""

    times: list[float] = field(default_factory=list)
    commands: list[FollowerCommand] = field(default_factory=list)
    distances: list[float] = field(default_factory=list)  # true, base to the person's axis
    localization_errors: list[float] = field(default_factory=list)  # m, on the ground plane
    last_seen_s: float | None = None  # stamp of the last frame whose detection hit the target
    robot: Robot = field(default_factory=Robot)


def simulate_chain(
    duration_s: float,
    person_at: Callable[[float], PersonState] = walker,
    estop_at: Callable[[float], bool] = lambda t: False,
    seed: int = 5,
    follower_config: FollowerConfig | None = None,
) -> Run:
    """Run localizer -> tracker -> follower for ``duration_s`` of simulated time.

    20 Hz control, 10 Hz camera; a frame's result reaches the follower one control cycle
    later, as the tracker's target in the base frame with its velocity, stamped with the
    frame's time; between frames, and when the target's track got no detection, the last
    target is passed again, so its stamp ages and the follower's staleness rules apply.
    """
    rng = np.random.default_rng(seed)
    localizer = PersonLocalizer(LOCALIZER)
    tracker = PersonTracker()
    follower = PersonFollower(follower_config or FollowerConfig())
    run = Run()
    robot = run.robot
    target: Target | None = None
    pending: list[tuple[int, Target]] = []  # (step it reaches the follower, target)
    for step in range(round(duration_s / CHAIN_DT)):
        now = step * CHAIN_DT
        person = person_at(now)
        if step % CHAIN_CAMERA_EVERY == 0:
            t_odom_optical = robot.t_odom_base() @ T_BASE_OPTICAL
            keypoints, depth = render_camera_frame(person, t_odom_optical, rng)
            result = localizer.localize(keypoints, depth, RGB, DEPTH)
            detections = []
            if result.ok:
                odom = localizer.to_odom(result.location, t_odom_optical)
                detections.append(odom.detection())
                truth = np.array([person.x, person.y])
                run.localization_errors.append(float(np.linalg.norm(odom.ground_position - truth)))
            tracker.update(now, detections, robot_position=(robot.x, robot.y))
            track = tracker.target
            # Only a detection of the target is a new observation: a coasting track is not.
            if track is not None and track.time_since_update_s == 0.0:
                x, y = robot.to_base(track.position)
                vx, vy = robot.rotate_to_base(track.velocity)
                pending.append((step + LATENCY_STEPS, Target(x, y, now, vx, vy)))
                run.last_seen_s = now
        while pending and pending[0][0] <= step:
            target = pending.pop(0)[1]
        command = follower.update(now, target, estop=estop_at(now), link_ok=True, detector_ok=True)
        run.times.append(now)
        run.commands.append(command)
        run.distances.append(math.hypot(person.x - robot.x, person.y - robot.y))
        robot.drive(command.linear, command.angular, CHAIN_DT)
    return run
