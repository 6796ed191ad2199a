# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``follower``: drives the robot after the tracked person (``follower`` on a timer).

Subscribes

* ``target`` (``geometry_msgs/PointStamped``): the person to follow, in the odometry frame,
  stamped with the capture time of the image it was seen in (the tracker's output);
* ``target/velocity`` (``geometry_msgs/Vector3Stamped``, optional): the person's ground
  velocity in the same frame with the same stamp as the target (the tracker's estimate), for
  the feed-forward; a velocity whose stamp is not the target's is not used;
* ``odometry`` (``nav_msgs/Odometry``): the robot's pose in the same frame, to place the
  target in the robot base frame at each control cycle (the robot moves between frames);
* ``estop`` (``std_msgs/Bool``, transient local, so a late-joining follower still sees a
  pressed stop): true stops the robot at once and latches (see :mod:`people_following.follower`);
* ``link_state`` (``LinkState``) and ``people`` (``PersonArray``): link and detector health.
  A link that reports itself disconnected or has not reported for ``link_timeout_s``, or
  no detector result for ``detector_timeout_s``, stops the robot (0 turns a check off).

Publishes ``cmd_vel`` (``geometry_msgs/Twist``, reliable) every ``1 / control_rate_hz`` and
``follower/state`` (``std_msgs/String``: following, holding, no_target, target_stale,
estop, link_down, detector_down, bad_input) when it changes. The callbacks only store the
latest message; the control step runs on the timer and takes microseconds, so nothing
blocks the executor. Times are the node clock's (``use_sim_time`` works with bags).
"""

from __future__ import annotations

import sys
from dataclasses import fields

import numpy as np
from geometry_msgs.msg import PointStamped, Twist, Vector3Stamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from scipy.spatial.transform import Rotation
from std_msgs.msg import Bool, String

from edge_offload.ros_node_main import run_node
from edge_offload.ros_params import ParamSpec, declare_parameters, parameter_values
from edge_offload.stamps import stamp_seconds
from offload_interfaces.msg import LinkState, PersonArray
from people_following.follower import FollowerConfig, FollowerState, PersonFollower, Target

# The follower's configuration, parameter by parameter (names and defaults are its fields').
_FOLLOWER_DEFAULTS = FollowerConfig()
PARAMETERS = (
    ParamSpec('control_rate_hz', 20.0, 'Rate of cmd_vel commands (Hz).', 1.0, 200.0),
    ParamSpec('set_distance_m', _FOLLOWER_DEFAULTS.set_distance_m, 'Distance to keep (m).', 0.3),
    ParamSpec(
        'set_bearing_rad', _FOLLOWER_DEFAULTS.set_bearing_rad, 'Bearing to keep (rad).', -1.5, 1.5
    ),
    ParamSpec('k_linear', _FOLLOWER_DEFAULTS.k_linear, 'Distance gain (1/s).', 0.01, 100.0),
    ParamSpec('k_angular', _FOLLOWER_DEFAULTS.k_angular, 'Bearing gain (1/s).', 0.01, 100.0),
    ParamSpec(
        'feed_forward_gain',
        _FOLLOWER_DEFAULTS.feed_forward_gain,
        "Share of the person's velocity (target/velocity) fed forward (0 = feedback only).",
        0.0,
        1.0,
    ),
    ParamSpec('max_linear', _FOLLOWER_DEFAULTS.max_linear, 'Top forward speed (m/s).', 0.01, 5.0),
    ParamSpec('max_reverse', _FOLLOWER_DEFAULTS.max_reverse, 'Top reverse speed (m/s).', 0.0, 5.0),
    ParamSpec('max_angular', _FOLLOWER_DEFAULTS.max_angular, 'Top turn rate (rad/s).', 0.01, 10.0),
    ParamSpec(
        'max_linear_accel', _FOLLOWER_DEFAULTS.max_linear_accel, 'Speeding up (m/s^2).', 0.01
    ),
    ParamSpec(
        'max_angular_accel', _FOLLOWER_DEFAULTS.max_angular_accel, 'Turning up (rad/s^2).', 0.01
    ),
    ParamSpec('stop_decel_linear', _FOLLOWER_DEFAULTS.stop_decel_linear, 'Braking (m/s^2).', 0.01),
    ParamSpec(
        'stop_decel_angular', _FOLLOWER_DEFAULTS.stop_decel_angular, 'Braking (rad/s^2).', 0.01
    ),
    ParamSpec(
        'target_timeout_s',
        _FOLLOWER_DEFAULTS.target_timeout_s,
        'A target observed longer ago than this is stale: the robot stops.',
        0.01,
        10.0,
    ),
    ParamSpec(
        'max_stop_time_s',
        _FOLLOWER_DEFAULTS.max_stop_time_s,
        'The robot is stopped at most this long after the last usable observation.',
        0.05,
        10.0,
    ),
    ParamSpec(
        'odometry_timeout_s',
        0.5,
        'A robot pose older than this cannot place the target: treated as no target.',
        0.01,
        10.0,
    ),
    ParamSpec(
        'link_timeout_s',
        1.0,
        'No link_state for this long means the link is down (0 = do not require one).',
        0.0,
        60.0,
    ),
    ParamSpec(
        'detector_timeout_s',
        1.0,
        'No people result for this long means the detector is down (0 = do not check).',
        0.0,
        60.0,
    ),
)

# Fields of FollowerConfig that come straight from parameters of the same name.
_CONFIG_FIELDS = tuple(
    field.name for field in fields(FollowerConfig) if field.name in {p.name for p in PARAMETERS}
)
BAD_INPUT = 'bad_input'


def _base_rotation(odometry: Odometry) -> np.ndarray:
    q = odometry.pose.pose.orientation
    quaternion = np.array([q.x, q.y, q.z, q.w])  # ROS order; scipy normalises it
    if not np.all(np.isfinite(quaternion)) or np.linalg.norm(quaternion) < 1e-9:
        raise ValueError('odometry orientation is not a rotation (zero or non-finite quaternion)')
    return Rotation.from_quat(quaternion).as_matrix()  # base -> odom


def base_from_odometry(point_odom: np.ndarray, odometry: Odometry) -> np.ndarray:
    """Return ``point_odom`` (3,) in the robot base frame given the robot's ``odometry`` pose."""
    p = odometry.pose.pose.position
    offset = np.asarray(point_odom, dtype=np.float64) - np.array([p.x, p.y, p.z])
    return _base_rotation(odometry).T @ offset


def base_axes_from_odometry(vector_odom: np.ndarray, odometry: Odometry) -> np.ndarray:
    """Return a vector (3,) of the odometry frame (a velocity) in the base axes."""
    return _base_rotation(odometry).T @ np.asarray(vector_odom, dtype=np.float64)


class FollowerNode(Node):
    """Timer-driven wrapper of :class:`people_following.follower.PersonFollower`."""

    def __init__(self, **kwargs) -> None:  # noqa: ANN003 - rclpy Node options
        super().__init__('follower', **kwargs)
        declare_parameters(self, PARAMETERS)
        self._config = config = parameter_values(self, PARAMETERS)
        try:
            follower_config = FollowerConfig(**{name: config[name] for name in _CONFIG_FIELDS})
        except ValueError as error:
            raise ValueError(f'bad follower configuration: {error}') from error
        self._follower = PersonFollower(follower_config)
        self._target: PointStamped | None = None
        self._target_velocity: Vector3Stamped | None = None
        self._odometry: Odometry | None = None
        self._estop = False
        self._link: LinkState | None = None
        self._link_received_s: float | None = None
        self._people_received_s: float | None = None
        self._state: str | None = None

        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        latched = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        self.create_subscription(PointStamped, 'target', self._on_target, reliable)
        self.create_subscription(
            Vector3Stamped, 'target/velocity', self._on_target_velocity, reliable
        )
        self.create_subscription(Odometry, 'odometry', self._on_odometry, reliable)
        self.create_subscription(Bool, 'estop', self._on_estop, latched)
        self.create_subscription(LinkState, 'link_state', self._on_link_state, reliable)
        self.create_subscription(PersonArray, 'people', self._on_people, reliable)
        self._cmd_pub = self.create_publisher(Twist, 'cmd_vel', reliable)
        self._state_pub = self.create_publisher(String, 'follower/state', latched)
        self.create_timer(1.0 / config['control_rate_hz'], self._control)
        self.get_logger().info(
            f'following at {follower_config.set_distance_m} m, {config["control_rate_hz"]} Hz; '
            f'stops within {follower_config.max_stop_time_s} s of losing the target'
        )

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    # -- inputs: store only -----------------------------------------------------------------

    def _on_target(self, message: PointStamped) -> None:
        self._target = message

    def _on_target_velocity(self, message: Vector3Stamped) -> None:
        self._target_velocity = message

    def _on_odometry(self, message: Odometry) -> None:
        self._odometry = message

    def _on_estop(self, message: Bool) -> None:
        self._estop = bool(message.data)
        if self._estop:
            self.get_logger().warning('emergency stop pressed')
            self._publish(0.0, 0.0)  # at once, not at the next tick

    def _on_link_state(self, message: LinkState) -> None:
        self._link, self._link_received_s = message, self._now()

    def _on_people(self, _message: PersonArray) -> None:
        self._people_received_s = self._now()

    # -- control ----------------------------------------------------------------------------

    def _target_in_base(self, now: float) -> Target | None:
        """Return the latest target in the base frame now, or None if it cannot be placed."""
        target, odometry = self._target, self._odometry
        if target is None or odometry is None:
            return None
        if now - stamp_seconds(odometry.header.stamp) > self._config['odometry_timeout_s']:
            return None
        frame, odometry_frame = target.header.frame_id, odometry.header.frame_id
        if frame and odometry_frame and frame != odometry_frame:
            self.get_logger().error(
                f'target in frame {frame!r} but odometry in {odometry_frame!r}: not followed',
                throttle_duration_sec=5.0,
            )
            return None
        point = np.array([target.point.x, target.point.y, target.point.z])
        x, y, _ = base_from_odometry(point, odometry)
        vx = vy = 0.0
        velocity = self._target_velocity
        if velocity is not None and velocity.header.stamp == target.header.stamp:
            v = velocity.vector
            vx, vy, _ = base_axes_from_odometry(np.array([v.x, v.y, v.z]), odometry)
        return Target(float(x), float(y), stamp_seconds(target.header.stamp), float(vx), float(vy))

    def _link_ok(self, now: float) -> bool:
        timeout = self._config['link_timeout_s']
        if timeout == 0.0:
            return True
        return (
            self._link is not None
            and self._link.connected
            and now - self._link_received_s <= timeout
        )

    def _detector_ok(self, now: float) -> bool:
        timeout = self._config['detector_timeout_s']
        if timeout == 0.0:
            return True
        return self._people_received_s is not None and now - self._people_received_s <= timeout

    def _control(self) -> None:
        now = self._now()
        try:
            target = self._target_in_base(now)
            command = self._follower.update(
                now,
                target,
                estop=self._estop,
                link_ok=self._link_ok(now),
                detector_ok=self._detector_ok(now),
            )
        except ValueError as error:
            # Untrusted input is never acted on: stop (the follower ramps up from zero).
            self.get_logger().warning(f'not moving: {error}', throttle_duration_sec=2.0)
            self._publish(0.0, 0.0)
            self._set_state(BAD_INPUT)
            return
        self._publish(command.linear, command.angular)
        self._set_state(command.state)

    def _publish(self, linear: float, angular: float) -> None:
        twist = Twist()
        twist.linear.x = float(linear)
        twist.angular.z = float(angular)
        self._cmd_pub.publish(twist)

    def _set_state(self, state: FollowerState | str) -> None:
        state = str(state)
        if state == self._state:
            return
        # rclpy ties a severity to each call site, so two calls.
        if state in ('following', 'holding'):
            self.get_logger().info(f'follower state: {state}')
        else:
            self.get_logger().warning(f'follower state: {state}')
        self._state = state
        self._state_pub.publish(String(data=state))

    def destroy_node(self) -> None:
        """Send one last zero command, then destroy the node."""
        if hasattr(self, '_cmd_pub') and self.context.ok():  # not after a rejected config
            self._publish(0.0, 0.0)
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Run the follower until shutdown; exit code 1 on a bad configuration."""
    return run_node(FollowerNode, 'follower', args)


if __name__ == '__main__':
    sys.exit(main())
