# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The sensor source's wait for acknowledgements leaves the rest of its process running.

rclpy's ``wait_for_all_acked`` holds the GIL while it waits. The replay's source called it
after every frame, and a small message's acknowledgement takes until Fast DDS's next
heartbeat (3 s): the runner's other nodes froze for that long each frame (the edge client
declared its server silent, goals went unanswered, frames went unrecorded).
``await_acknowledged`` must wait the same way without stopping the other threads.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from edge_offload_testing import spin_until
from people_following.sensor_source_node import await_acknowledged

RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
SUBSCRIBER = """
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

rclpy.init()
node = rclpy.create_node('acknowledging_subscriber')
qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
node.create_subscription(String, 'acked', lambda message: None, qos)
rclpy.spin(node)
"""


@pytest.fixture
def publisher_and_subscriber(ros_context, ros_executor, ros_processes):  # noqa: ANN001
    node = Node('ack_publisher', context=ros_context)
    ros_executor.add_node(node)
    publisher = node.create_publisher(String, 'acked', RELIABLE)
    subscriber = ros_processes.start([sys.executable, '-c', SUBSCRIBER], name='subscriber')
    matched = spin_until(ros_executor, lambda: publisher.get_subscription_count() == 1, 30.0)
    assert matched, ros_processes.output(subscriber)
    # The subscriber matched this publisher a moment after this publisher matched it.
    assert await_acknowledged([publisher], 10.0, threading.Event()) == []
    try:
        yield publisher, subscriber
    finally:
        if subscriber.poll() is None:
            os.kill(subscriber.pid, signal.SIGCONT)


def test_a_live_subscriber_acknowledges(publisher_and_subscriber):  # noqa: ANN001
    publisher, _ = publisher_and_subscriber
    publisher.publish(String(data='hello'))
    assert await_acknowledged([publisher], 10.0, threading.Event()) == []


def test_waiting_for_a_stalled_subscriber_leaves_other_threads_running(
    publisher_and_subscriber,  # noqa: ANN001
):
    publisher, subscriber = publisher_and_subscriber
    os.kill(subscriber.pid, signal.SIGSTOP)  # it can no longer acknowledge anything
    publisher.publish(String(data='x' * 100_000))

    ticks = 0
    stop_ticking = threading.Event()

    def tick() -> None:
        nonlocal ticks
        while not stop_ticking.is_set():
            ticks += 1
            time.sleep(0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        started = time.monotonic()
        unacknowledged = await_acknowledged([publisher], 1.0, threading.Event())
        waited_s = time.monotonic() - started
    finally:
        stop_ticking.set()
        ticker.join()
    assert unacknowledged == [publisher]
    assert waited_s >= 1.0
    # rclpy's blocking wait let the other thread run once in such a wait (measured: 1).
    assert ticks >= 50, ticks


def test_a_stop_request_ends_the_wait(publisher_and_subscriber):  # noqa: ANN001
    publisher, subscriber = publisher_and_subscriber
    os.kill(subscriber.pid, signal.SIGSTOP)
    publisher.publish(String(data='never acknowledged'))
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    started = time.monotonic()
    assert await_acknowledged([publisher], 600.0, stop) == [publisher]
    assert time.monotonic() - started < 300.0  # long before the 600 s timeout


def test_no_publishers_is_nothing_to_wait_for():
    assert await_acknowledged([], 600.0, threading.Event()) == []
