# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""QoS of the camera and IMU topics: sensor-data by default, reliable for lossless replays.

Live sensors use the sensor-data profile (best effort, keep last 5): a late frame is worth
less than the next one. Replaying a video or bag for evaluation must not lose frames, and
large best-effort images between processes do get lost (UDP fragments), so the source and
its consumers can switch to reliable delivery with the ``reliable_sensor_qos`` parameter.
A best-effort subscriber still receives from a reliable publisher, so only the publisher
and the subscribers that must see every frame need the setting.
"""

from __future__ import annotations

from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

RELIABLE_SENSOR_QOS_DESCRIPTION = (
    'Reliable delivery of images, camera_info and imu (lossless replays); false = the '
    'sensor-data profile (best effort), right for live cameras'
)


def sensor_qos(reliable: bool) -> QoSProfile:
    """Return the sensor-data profile, or the same depth with reliable delivery."""
    if not reliable:
        return qos_profile_sensor_data
    return QoSProfile(
        depth=qos_profile_sensor_data.depth,
        history=qos_profile_sensor_data.history,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=qos_profile_sensor_data.durability,
    )
