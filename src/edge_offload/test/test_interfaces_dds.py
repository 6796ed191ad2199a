# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The suite's custom messages cross process boundaries over DDS intact."""

import sys
from pathlib import Path

import numpy as np
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from edge_offload.tensor_blob import from_tensor_blob, to_tensor_blob
from edge_offload_testing import spin_until, wait_for_publishers, wait_for_subscribers
from offload_interfaces.msg import Keypoint2D, LinkState, Person, PersonArray, TensorBlob

FIXTURES = Path(__file__).parent / 'fixtures'
RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


def _relay_round_trip(ros_context, ros_executor, ros_processes, message_type, message):
    """Send ``message`` through a relay process and return what comes back."""
    relay = ros_processes.start(
        [
            sys.executable,
            str(FIXTURES / 'message_relay.py'),
            message_type.__module__.rsplit('.', 1)[0],
            message_type.__name__,
        ],
        name='relay',
    )
    node = Node('relay_client', context=ros_context)
    ros_executor.add_node(node)
    received = []
    publisher = node.create_publisher(message_type, 'relay_in', RELIABLE)
    subscription = node.create_subscription(message_type, 'relay_out', received.append, RELIABLE)
    try:
        assert wait_for_subscribers(ros_executor, publisher, timeout_s=20.0), (
            'relay never subscribed:\n' + ros_processes.output(relay)
        )
        assert wait_for_publishers(ros_executor, subscription, timeout_s=20.0), (
            'relay never advertised:\n' + ros_processes.output(relay)
        )
        # Seeing the relay's endpoints does not mean the relay has matched ours yet
        # (discovery runs on both sides): a single message could be echoed to no reader.
        # So send again each second until one comes back.
        for _ in range(10):
            publisher.publish(message)
            if spin_until(ros_executor, lambda: received, timeout_s=1.0):
                break
        assert received, 'no message came back:\n' + ros_processes.output(relay)
        return received[0]
    finally:
        node.destroy_node()


def test_person_array_crosses_processes(ros_context, ros_executor, ros_processes):
    sent = PersonArray(model_name='kapao_s', model_is_trained=False, offload_mode='nnto')
    sent.header.frame_id = 'camera_optical_frame'
    sent.header.stamp.sec = 1_700_000_000
    sent.header.stamp.nanosec = 123_456_789
    for track_id in (1, 2):
        # Values exactly representable as float32, so equality is exact after the trip.
        person = Person(track_id=track_id, score=0.25 + 0.25 * track_id)
        person.box_x_min_px, person.box_y_min_px = 10.0 * track_id, 20.0
        person.box_x_max_px, person.box_y_max_px = 110.0, 220.0 * track_id
        person.keypoints = [
            Keypoint2D(id=Keypoint2D.NOSE, x_px=15.5, y_px=25.25, score=0.875),
            Keypoint2D(id=Keypoint2D.RIGHT_ANKLE, x_px=100.0, y_px=210.0, score=0.25),
        ]
        person.has_position = True
        person.position_m.x, person.position_m.z = 0.5, 3.0 * track_id
        sent.people.append(person)

    received = _relay_round_trip(ros_context, ros_executor, ros_processes, PersonArray, sent)

    assert received == sent
    assert received.people[1].keypoints[1].id == Keypoint2D.RIGHT_ANKLE
    assert received.people[1].position_m.z == 6.0


def test_link_state_crosses_processes(ros_context, ros_executor, ros_processes):
    sent = LinkState(
        server_id='tcp://127.0.0.1:5555',
        connected=True,
        uplink_bandwidth_bps=93e6,
        downlink_bandwidth_bps=float('nan'),
        rtt_s=0.0026,
        loss_ratio=0.01,
        window_s=1.0,
        sample_count=12,
        source=LinkState.SOURCE_COMBINED,
    )

    received = _relay_round_trip(ros_context, ros_executor, ros_processes, LinkState, sent)

    assert received.uplink_bandwidth_bps == 93e6
    assert np.isnan(received.downlink_bandwidth_bps)
    assert received.source == LinkState.SOURCE_COMBINED
    assert received.server_id == sent.server_id


def test_tensor_blob_payload_survives_dds(ros_context, ros_executor, ros_processes):
    # An image-sized float tensor: large enough to be fragmented by DDS.
    image = np.random.default_rng(0).standard_normal((1, 3, 256, 320)).astype(np.float32)
    sent = to_tensor_blob('image', image)

    received = _relay_round_trip(ros_context, ros_executor, ros_processes, TensorBlob, sent)

    np.testing.assert_array_equal(from_tensor_blob(received), image)
