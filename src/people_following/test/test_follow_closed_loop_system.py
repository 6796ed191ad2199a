# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Closed loop across the ROS nodes: simulated person and robot, real tracker and follower.

The ``people_tracker`` and ``follower`` nodes run as their own processes, over DDS, with
``use_sim_time``. This test is the world (:mod:`people_following.follow_simulation`): a
person walks a path; a simulated RGB-D camera on a simulated robot sees them; the test
publishes what the detector, the depth camera and the odometry would (``people`` with keypoints,
``depth_camera/image`` and ``camera_info``, ``odometry``), the link state, and ``/clock``;
the robot integrates the ``cmd_vel`` it gets back. The scenario starts once every link of
the loop is matched and the follower follows (a warm-up with the robot held still), so
discovery time never eats into it. Simulated time advances in lock step: a
camera frame's ``tracks`` (and its ``target``, when it has one) must come back before the
clock moves on, and each control tick's
``cmd_vel`` before the robot drives; so the run is the same on a loaded 2-core machine as on
a fast one, and the acceptance bounds are asserted in simulated time:

* after settling the distance to the person stays within ±0.3 m of the set point (and its
  median within 0.1 m: the tracked velocity is fed forward);
* the robot is stopped within 0.5 s of the person disappearing, and of an emergency stop.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from builtin_interfaces.msg import Time as TimeMsg
from geometry_msgs.msg import PointStamped, Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from scipy.spatial.transform import Rotation
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Bool, String

from edge_offload.image_convert import cv2_to_imgmsg
from edge_offload_testing import node_command, spin_until
from offload_interfaces.msg import Keypoint2D, LinkState, Person, PersonArray
from people_following.follow_simulation import (
    CAMERA_POSITION_M,
    CAMERA_RPY_RAD,
    DEPTH,
    GONE_S,
    RGB,
    SETTLED_S,
    T_BASE_OPTICAL,
    Robot,
    render_camera_frame,
    walker,
)
from people_following.follower import FollowerConfig

DT = 0.05  # the follower's 20 Hz
CAMERA_EVERY = 2  # 10 Hz frames
T0_NS = 100_000_000_000  # simulated time starts at 100 s (0 means "no time yet" in ROS)
STEP_NS = 50_000_000
RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
LATCHED = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
FOLLOWER = FollowerConfig()
TARGET_SCORE = 1.0  # the tracker's score for the target track in `tracks`
WAIT_S = 5.0  # wall-clock patience per lock step (a stalled process, not a slow one)
# Wall-clock patience for the follower to follow before the scenario starts: the tracker
# and the follower discover each other in their own time, which a step count (a few
# seconds of wall clock at lock-step speed) does not bound.
WARM_UP_TIMEOUT_S = 60.0


def _stamp(ns: int) -> TimeMsg:
    return TimeMsg(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _camera_info(camera, frame_id: str, stamp: TimeMsg) -> CameraInfo:  # noqa: ANN001
    info = CameraInfo(width=camera.width, height=camera.height, distortion_model='plumb_bob')
    info.header.stamp, info.header.frame_id = stamp, frame_id
    info.k = [camera.fx, 0.0, camera.cx, 0.0, camera.fy, camera.cy, 0.0, 0.0, 1.0]
    return info


@dataclass
class Step:
    t: float  # simulated seconds since the start
    linear: float
    angular: float
    distance: float  # true distance, base to the person's axis
    state: str


@dataclass
class World:
    """The simulated world, publishing sensors and the clock, driving the robot."""

    node: Node
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(5))
    robot: Robot = field(default_factory=Robot)
    commands: list[Twist] = field(default_factory=list)
    track_stamps: set[int] = field(default_factory=set)
    targets_received: int = 0
    target_in_tracks: set[int] = field(default_factory=set)  # stamps whose tracks had one
    state: str = ''
    steps: list[Step] = field(default_factory=list)
    last_seen_s: float | None = None  # the last frame in which the person was visible
    missed_frames: int = 0
    clock_step: int = 0  # control cycles since the clock started, warm-up included
    logs: Callable[[], str] = lambda: ''  # what the node processes printed

    def __post_init__(self) -> None:
        node = self.node
        self.clock_pub = node.create_publisher(Clock, '/clock', RELIABLE)
        self.people_pub = node.create_publisher(PersonArray, 'people', RELIABLE)
        self.info_pub = node.create_publisher(CameraInfo, 'camera_info', RELIABLE)
        self.depth_pub = node.create_publisher(Image, 'depth_camera/image', RELIABLE)
        self.depth_info_pub = node.create_publisher(
            CameraInfo, 'depth_camera/camera_info', RELIABLE
        )
        self.odometry_pub = node.create_publisher(Odometry, 'odometry', RELIABLE)
        self.link_pub = node.create_publisher(LinkState, 'link_state', RELIABLE)
        self.estop_pub = node.create_publisher(Bool, 'estop', LATCHED)
        node.create_subscription(Twist, 'cmd_vel', self.commands.append, RELIABLE)
        node.create_subscription(PersonArray, 'tracks', self._on_tracks, RELIABLE)
        node.create_subscription(PointStamped, 'target', self._on_target, RELIABLE)
        node.create_subscription(String, 'follower/state', self._on_state, LATCHED)

    def _on_tracks(self, message: PersonArray) -> None:
        stamp = message.header.stamp
        stamp_ns = stamp.sec * 1_000_000_000 + stamp.nanosec
        self.track_stamps.add(stamp_ns)
        if any(person.score == TARGET_SCORE for person in message.people):
            self.target_in_tracks.add(stamp_ns)

    def _on_target(self, _message: PointStamped) -> None:
        self.targets_received += 1

    def _on_state(self, message: String) -> None:
        self.state = message.data

    def _odometry(self, stamp: TimeMsg) -> Odometry:
        odometry = Odometry()
        odometry.header.stamp, odometry.header.frame_id = stamp, 'odom'
        odometry.child_frame_id = 'base_link'
        odometry.pose.pose.position.x = self.robot.x
        odometry.pose.pose.position.y = self.robot.y
        q = Rotation.from_euler('z', self.robot.heading).as_quat()
        o = odometry.pose.pose.orientation
        o.x, o.y, o.z, o.w = (float(v) for v in q)
        return odometry

    def _publish_frame(self, t: float, stamp: TimeMsg, executor) -> None:  # noqa: ANN001
        person = walker(t)
        t_odom_optical = self.robot.t_odom_base() @ T_BASE_OPTICAL
        keypoints, depth = render_camera_frame(person, t_odom_optical, self.rng)
        frame = 'camera_optical_frame'
        self.info_pub.publish(_camera_info(RGB, frame, stamp))
        self.depth_info_pub.publish(_camera_info(DEPTH, frame, stamp))
        depth_message = cv2_to_imgmsg(depth.astype(np.float32), '32FC1')
        depth_message.header.stamp, depth_message.header.frame_id = stamp, frame
        self.depth_pub.publish(depth_message)
        self.odometry_pub.publish(self._odometry(stamp))
        people = PersonArray(model_name='simulated', model_is_trained=True)
        people.header.stamp, people.header.frame_id = stamp, frame
        if np.count_nonzero(keypoints[:, 2]) > 0:
            self.last_seen_s = t
            person_message = Person(score=0.9)
            person_message.keypoints = [
                Keypoint2D(id=i, x_px=float(x), y_px=float(y), score=float(s))
                for i, (x, y, s) in enumerate(keypoints)
                if s > 0.0
            ]
            people.people.append(person_message)
        targets_before = self.targets_received
        self.people_pub.publish(people)
        stamp_ns = stamp.sec * 1_000_000_000 + stamp.nanosec
        if not spin_until(executor, lambda: stamp_ns in self.track_stamps, timeout_s=WAIT_S):
            self.missed_frames += 1
        elif stamp_ns in self.target_in_tracks:
            # The tracker publishes the target after the tracks: the clock must not move
            # on (and the follower act) before it is out.
            spin_until(executor, lambda: self.targets_received > targets_before, timeout_s=WAIT_S)

    def _tick(self, executor, t: float, estop: bool) -> Twist:  # noqa: ANN001
        """One control cycle at scenario time ``t``: sensors, clock, the follower's command."""
        stamp = _stamp(T0_NS + self.clock_step * STEP_NS)
        if estop:
            self.estop_pub.publish(Bool(data=True))
        if self.clock_step % CAMERA_EVERY == 0:
            self._publish_frame(t, stamp, executor)
        self.odometry_pub.publish(self._odometry(stamp))
        link = LinkState(connected=True)
        link.header.stamp = stamp
        self.link_pub.publish(link)
        received = len(self.commands)
        self.clock_pub.publish(Clock(clock=stamp))
        self.clock_step += 1
        spin_until(executor, lambda: len(self.commands) > received, timeout_s=WAIT_S)
        return self.commands[-1] if self.commands else Twist()

    def run(self, executor, duration_s: float, estop_at_s: float | None = None) -> None:  # noqa: ANN001
        """Advance ``duration_s`` of simulated time in lock step with the nodes.

        First a warm-up at the scenario's start, the robot held still, until the follower
        follows: discovery between processes completes in its own time (on a loaded
        machine, seconds of simulated time), and the scenario must not start before it.
        """
        deadline = time.monotonic() + WARM_UP_TIMEOUT_S
        while self.state != 'following' and time.monotonic() < deadline:
            self._tick(executor, 0.0, estop=False)
        assert self.state == 'following', (
            f'the follower never followed: {self.state!r}\n{self.logs()}'
        )
        self.missed_frames = 0
        for step in range(round(duration_s / DT)):
            t = step * DT
            command = self._tick(executor, t, estop_at_s is not None and t >= estop_at_s)
            person = walker(t)
            self.steps.append(
                Step(
                    t,
                    command.linear.x,
                    command.angular.z,
                    math.hypot(person.x - self.robot.x, person.y - self.robot.y),
                    self.state,
                )
            )
            self.robot.drive(command.linear.x, command.angular.z, DT)


def _start_chain(ros_processes, ros_executor, world: World) -> None:  # noqa: ANN001
    tracker = ros_processes.start(
        node_command(
            'people_following.people_tracker_node',
            use_sim_time=True,
            depth_source='rgbd',
            camera_position_m=list(CAMERA_POSITION_M),
            camera_rpy_rad=list(CAMERA_RPY_RAD),
            body_centre_offset_m=0.15,
            # The world publishes reliably; lock step must not hang on a lost depth image.
            reliable_sensor_qos=True,
        ),
        name='people_tracker',
    )
    follower = ros_processes.start(
        node_command('people_following.follower_node', use_sim_time=True), name='follower'
    )
    # Every link of the loop matched before the clock starts: reliable volatile messages
    # sent before discovery completes are lost, and a node missing its first odometry or
    # people would start late (seen on a loaded machine: no target until 4.6 s).
    node = world.node
    both = 2  # the tracker and the follower
    publishers = {
        world.clock_pub: both,
        world.people_pub: both,
        world.odometry_pub: both,
        world.info_pub: 1,
        world.depth_pub: 1,
        world.depth_info_pub: 1,
        world.link_pub: 1,
        world.estop_pub: 1,
    }
    world_subscriptions = ('cmd_vel', 'tracks', 'follower/state')

    def matched() -> bool:
        return (
            all(p.get_subscription_count() >= n for p, n in publishers.items())
            and all(node.count_publishers(topic) >= 1 for topic in world_subscriptions)
            # tracker -> follower, as seen in the graph
            and node.count_publishers('target') >= 1
            and node.count_subscribers('target') >= 1
        )

    world.logs = lambda: (
        f'--- people_tracker:\n{ros_processes.output(tracker)[-4000:]}\n'
        f'--- follower:\n{ros_processes.output(follower)[-4000:]}'
    )
    ok = spin_until(ros_executor, matched, timeout_s=60.0)
    assert ok, world.logs()


def _world(ros_context, ros_executor, ros_processes) -> World:  # noqa: ANN001
    node = Node('follow_closed_loop_world', context=ros_context)
    ros_executor.add_node(node)
    world = World(node)
    _start_chain(ros_processes, ros_executor, world)
    return world


def test_nodes_follow_a_walking_person_and_stop_when_they_vanish(
    ros_context, ros_executor, ros_processes
):
    world = _world(ros_context, ros_executor, ros_processes)
    world.run(ros_executor, GONE_S + 3.0)
    assert world.missed_frames <= 2, world.missed_frames
    times = np.array([s.t for s in world.steps])
    distances = np.array([s.distance for s in world.steps])

    settled = (times >= SETTLED_S) & (times < GONE_S)
    errors = distances[settled] - FOLLOWER.set_distance_m
    assert np.max(np.abs(errors)) <= 0.3, (np.min(errors), np.max(errors))
    # The tracker's velocity (target/velocity) is fed forward: no lag of speed / k_linear
    # (0.2 m here), which feedback alone would leave.
    assert abs(np.median(errors)) <= 0.1, np.median(errors)
    assert {world.steps[i].state for i in np.flatnonzero(settled)} <= {'following', 'holding'}
    # It followed the curve and moved at walking pace.
    assert world.robot.heading >= 0.8
    assert max(s.linear for s in world.steps) >= 0.5

    # Vanished: stopped within 0.5 s of the last frame that saw the person, and stays so.
    assert GONE_S - CAMERA_EVERY * DT <= world.last_seen_s < GONE_S
    moving = [s for s in world.steps if s.t == world.last_seen_s]
    assert moving[0].linear >= 0.3
    after = [s for s in world.steps if s.t >= world.last_seen_s + FOLLOWER.max_stop_time_s]
    assert len(after) >= 2.0 / DT
    assert all(s.linear == 0.0 and s.angular == 0.0 for s in after), [
        (s.t, s.linear) for s in after[:5]
    ]
    assert after[-1].state in ('target_stale', 'no_target')


ESTOP_AT_S = 10.0


def test_nodes_stop_within_half_a_second_of_an_emergency_stop(
    ros_context, ros_executor, ros_processes
):
    world = _world(ros_context, ros_executor, ros_processes)
    world.run(ros_executor, ESTOP_AT_S + 1.5, estop_at_s=ESTOP_AT_S)
    before = [s for s in world.steps if s.t < ESTOP_AT_S]
    assert before[-1].linear >= 0.3, world.logs()  # following at speed when pressed
    pressed = [s for s in world.steps if s.t >= ESTOP_AT_S]
    stopped = [s.t for s in pressed if s.linear == 0.0 and s.angular == 0.0]
    assert stopped
    assert stopped[0] - ESTOP_AT_S <= 0.5
    held = [s for s in pressed if s.t >= stopped[0]]
    assert all(s.linear == 0.0 and s.angular == 0.0 for s in held)
    assert held[-1].state == 'estop'
