# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The follower node over DDS: follows a target, stops on an emergency stop and on lost data.

The node runs as its own process; this test plays the tracker (``target``), the odometry
(``odometry``), the detector (``people``), the bridge (``link_state``) and the operator
(``estop``), and watches ``cmd_vel`` and ``follower/state``. Times asserted are the
acceptance bounds of the application (0.5 s), measured on the node's published commands;
a generous margin covers DDS delivery on a loaded 2-core machine.
"""

from __future__ import annotations

import time

from geometry_msgs.msg import PointStamped, Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Bool, String

from edge_offload_testing import node_command, spin_until
from offload_interfaces.msg import LinkState, PersonArray

RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
LATCHED = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)


class World:
    """Publishes what the follower listens to and records what it sends."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.target_pub = node.create_publisher(PointStamped, 'target', RELIABLE)
        self.odometry_pub = node.create_publisher(Odometry, 'odometry', RELIABLE)
        self.people_pub = node.create_publisher(PersonArray, 'people', RELIABLE)
        self.link_pub = node.create_publisher(LinkState, 'link_state', RELIABLE)
        self.estop_pub = node.create_publisher(Bool, 'estop', LATCHED)
        self.commands: list[tuple[float, Twist]] = []
        self.states: list[str] = []
        node.create_subscription(Twist, 'cmd_vel', self._on_cmd, RELIABLE)
        node.create_subscription(
            String, 'follower/state', lambda m: self.states.append(m.data), LATCHED
        )
        self.person_x = 3.0  # metres ahead of the robot, which stays at the origin
        self.visible = True
        node.create_timer(0.05, self._publish_world)

    def _on_cmd(self, message: Twist) -> None:
        self.commands.append((time.monotonic(), message))

    def _publish_world(self) -> None:
        stamp = self.node.get_clock().now().to_msg()
        odometry = Odometry()
        odometry.header.stamp, odometry.header.frame_id = stamp, 'odom'
        odometry.pose.pose.orientation.w = 1.0
        self.odometry_pub.publish(odometry)
        people = PersonArray()
        people.header.stamp = stamp
        self.people_pub.publish(people)
        link = LinkState()
        link.header.stamp, link.connected = stamp, True
        self.link_pub.publish(link)
        if self.visible:
            target = PointStamped()
            target.header.stamp, target.header.frame_id = stamp, 'odom'
            target.point.x = self.person_x
            self.target_pub.publish(target)

    def last_linear(self) -> float:
        return self.commands[-1][1].linear.x if self.commands else 0.0

    def stopped_since(self, since: float) -> float | None:
        """Return the time of the first zero command after ``since`` from which all stay zero."""
        after = [(t, m) for t, m in self.commands if t >= since]
        first = None
        for t, message in after:
            moving = message.linear.x != 0.0 or message.angular.z != 0.0
            if moving:
                first = None
            elif first is None:
                first = t
        return first


def test_follower_follows_and_stops_on_estop_and_on_a_lost_target(
    ros_context, ros_executor, ros_processes
):
    follower = ros_processes.start(node_command('people_following.follower_node'), name='follower')
    node = Node('follower_system_test', context=ros_context)
    world = World(node)
    ros_executor.add_node(node)
    assert spin_until(
        ros_executor, lambda: node.count_subscribers('target') > 0, timeout_s=60.0
    ), ros_processes.output(follower)

    # A person 3 m ahead: the robot drives towards them (1.8 m too far).
    assert spin_until(ros_executor, lambda: world.last_linear() > 0.3, timeout_s=10.0), (
        ros_processes.output(follower)
    )
    assert 'following' in world.states

    # Emergency stop: zero at once, and it stays zero while pressed.
    pressed = time.monotonic()
    world.estop_pub.publish(Bool(data=True))
    spin_until(ros_executor, lambda: time.monotonic() - pressed > 1.0, timeout_s=2.0)
    stopped = world.stopped_since(pressed)
    assert stopped is not None, [m.linear.x for _, m in world.commands[-25:]]
    assert stopped - pressed < 0.5
    assert world.states[-1] == 'estop'

    # Released: the stop stays latched until a target observed after the release arrives,
    # then the robot moves again.
    world.estop_pub.publish(Bool(data=False))
    assert spin_until(ros_executor, lambda: world.last_linear() > 0.1, timeout_s=10.0), (
        world.states
    )

    # The person disappears: the robot is stopped within 0.5 s of the last observation.
    world.visible = False
    lost = time.monotonic()
    spin_until(ros_executor, lambda: time.monotonic() - lost > 1.5, timeout_s=3.0)
    stopped = world.stopped_since(lost)
    assert stopped is not None
    assert stopped - lost < 0.5 + 0.2  # + one 50 ms world cycle and DDS delivery
    assert world.states[-1] in ('target_stale', 'no_target')
    node.destroy_node()


def test_follower_refuses_a_bad_configuration(ros_processes):
    process = ros_processes.start(
        node_command('people_following.follower_node', max_linear=3.0, stop_decel_linear=1.0),
        name='follower_bad',
    )
    assert process.wait(timeout=60.0) == 1
    assert 'bad follower configuration' in ros_processes.output(process)
