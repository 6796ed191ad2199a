# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``/diagnostics`` for the suite's nodes: one publisher set-up and one status builder.

``diagnostic_updater`` (the ROS library) is not installed here, and each node already
computes its own level and message; what they share is the topic, its QoS, the stamping
and the key-value encoding, which live here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.qos import QoSProfile, ReliabilityPolicy

DIAGNOSTICS_TOPIC = '/diagnostics'
OK = DiagnosticStatus.OK
WARN = DiagnosticStatus.WARN
ERROR = DiagnosticStatus.ERROR


def create_diagnostics_publisher(node: Node) -> Publisher:
    """Return ``node``'s publisher on ``/diagnostics`` (reliable: aggregators miss nothing)."""
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    return node.create_publisher(DiagnosticArray, DIAGNOSTICS_TOPIC, qos)


def diagnostic_status(
    name: str,
    level: bytes,
    message: str,
    values: Mapping[str, object],
    hardware_id: str = '',
) -> DiagnosticStatus:
    """Return a status whose ``values`` are the mapping's items, each value as ``str``."""
    return DiagnosticStatus(
        level=level,
        name=name,
        message=message,
        hardware_id=hardware_id,
        values=[KeyValue(key=key, value=str(value)) for key, value in values.items()],
    )


def diagnostic_array(node: Node, statuses: Sequence[DiagnosticStatus]) -> DiagnosticArray:
    """Return ``statuses`` in an array stamped with ``node``'s clock now."""
    array = DiagnosticArray(status=list(statuses))
    array.header.stamp = node.get_clock().now().to_msg()
    return array
