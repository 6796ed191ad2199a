# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""What a running people-following graph must show, for its launch tests.

:class:`GraphWatcher` subscribes to the graph's outputs and says what has not shown up yet;
:func:`loopback_params_file` makes a parameter file self-contained on one machine (its own
CURVE keys, a free port).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image, PointCloud2
from std_msgs.msg import String

from edge_offload.keys import ensure_loopback_keys
from offload_interfaces.msg import LinkState, PersonArray

RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
LATCHED = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)


def loopback_params_file(source: Path, directory: Path, port: int) -> Path:
    """Write ``source`` with CURVE keys made in ``directory`` and the server on ``port``."""
    keys = ensure_loopback_keys(directory / 'keys')
    document = yaml.safe_load(source.read_text())
    endpoint = f'tcp://127.0.0.1:{port}'
    for node, values in (
        ('offload_bridge', {'server_endpoint': endpoint}),
        ('edge_server', {'endpoint': endpoint}),
    ):
        if node in document:
            document[node]['ros__parameters'].update(values)
    bridge = document.get('offload_bridge', {}).get('ros__parameters', {})
    if 'secret_key_file' in bridge:
        bridge['secret_key_file'] = keys['robot_secret']
        bridge['server_public_key_file'] = keys['server_public']
    server = document.get('edge_server', {}).get('ros__parameters', {})
    if 'secret_key_file' in server:
        server['secret_key_file'] = keys['server_secret']
        server['authorized_clients_dir'] = keys['authorized']
    path = directory / source.name
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


class GraphWatcher:
    """Subscribes to the graph's outputs and says which have not shown what they must."""

    def __init__(self, node: Node) -> None:
        """Subscribe on ``node`` (the caller spins it)."""
        self.people: list[PersonArray] = []
        self.tracks: list[PersonArray] = []
        self.commands: list[Twist] = []
        self.depth_frames = 0
        self.clouds: list[PointCloud2] = []
        self.odometry: list[Odometry] = []
        self.states: list[str] = []
        self.links: list[LinkState] = []
        node.create_subscription(PersonArray, 'people', self.people.append, RELIABLE)
        node.create_subscription(PersonArray, 'tracks', self.tracks.append, RELIABLE)
        node.create_subscription(Twist, 'cmd_vel', self.commands.append, RELIABLE)
        node.create_subscription(Image, 'depth', self._on_depth, RELIABLE)
        node.create_subscription(Odometry, 'odometry', self.odometry.append, RELIABLE)
        node.create_subscription(PointCloud2, 'depth/points', self.clouds.append, RELIABLE)
        node.create_subscription(
            String, 'follower/state', lambda m: self.states.append(m.data), LATCHED
        )
        node.create_subscription(LinkState, 'link_state', self.links.append, RELIABLE)

    def _on_depth(self, _message: Image) -> None:
        self.depth_frames += 1

    def received(self) -> str:
        """Return how much of each output has arrived so far (for a failure's message)."""
        modes = sorted({p.offload_mode for p in self.people})
        return (
            f'{len(self.people)} people messages (modes {modes}), {self.depth_frames} depth maps, '
            f'{len(self.odometry)} odometry, {len(self.clouds)} clouds, {len(self.tracks)} '
            f'tracks, {len(self.links)} link states (connected: '
            f'{sum(link.connected for link in self.links)}), {len(self.commands)} commands, '
            f'follower states {self.states[-3:]}'
        )

    def missing(self) -> list[str]:
        """Return what the graph has not shown yet (empty when it all works)."""
        checks = {
            'people results offloaded to the edge server': any(
                # '<front end mode>+tracking' when people are tracked between detections
                p.offload_mode.split('+')[0] not in ('', 'local', 'none')
                for p in self.people
            ),
            'AccuMO depth maps': self.depth_frames > 0,
            'AccuMO odometry in the odom frame': any(
                o.header.frame_id == 'odom' for o in self.odometry
            ),
            'a depth point cloud': any(cloud.width > 0 for cloud in self.clouds),
            'tracks in the odom frame': any(t.header.frame_id == 'odom' for t in self.tracks),
            'a connected link': any(link.connected for link in self.links),
            'follower commands': len(self.commands) >= 5,
            'a follower state': bool(self.states),
        }
        return [name for name, ok in checks.items() if not ok]

    def robot_stayed_still(self) -> bool:
        """Return whether every command was zero (nobody to follow in synthetic frames)."""
        return all(c.linear.x == 0.0 and c.angular.z == 0.0 for c in self.commands)
