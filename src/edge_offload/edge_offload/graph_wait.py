# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Wait on the ROS graph instead of sleeping.

The first messages of a new publisher are lost while DDS discovery runs, so a test
that publishes must first wait until the subscriber is matched, and a test that
listens must wait for the publisher. Every wait has a time budget and spins the
executor meanwhile, so callbacks keep running.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rclpy.action import ActionClient
from rclpy.executors import Executor
from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.subscription import Subscription

from offload_interfaces.msg import LinkState


def spin_until(
    executor: Executor,
    predicate: Callable[[], bool],
    timeout_s: float,
    *,
    poll_s: float = 0.05,
) -> bool:
    """Spin ``executor`` until ``predicate()`` is true; return False on timeout."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        remaining = deadline - time.monotonic()
        if remaining <= 0.0:
            return False
        executor.spin_once(timeout_sec=min(poll_s, remaining))
    return True


def wait_for_subscribers(
    executor: Executor, publisher: Publisher, count: int = 1, timeout_s: float = 10.0
) -> bool:
    """Spin until ``publisher`` is matched with at least ``count`` subscriptions."""
    return spin_until(executor, lambda: publisher.get_subscription_count() >= count, timeout_s)


def wait_for_publishers(
    executor: Executor, subscription: Subscription, count: int = 1, timeout_s: float = 10.0
) -> bool:
    """Spin until ``subscription`` is matched with at least ``count`` publishers."""
    return spin_until(executor, lambda: subscription.get_publisher_count() >= count, timeout_s)


def prime_action_client(
    executor: Executor,
    client: ActionClient,
    goal: object,
    *,
    attempts: int = 5,
    answer_timeout_s: float = 3.0,
    result_timeout_s: float = 60.0,
) -> None:
    """Send ``goal`` until one is answered and its result arrives; raise if none is.

    ``server_is_ready()`` only says that the client's requests reach the server. The
    server's reply writers discover the client on their own, and a reply written before
    they have is lost: the goal's future then never completes (seen in CI). One goal
    that came back whole shows that both the goal and the result replies get through.
    """
    for _ in range(attempts):
        sent = client.send_goal_async(goal)
        if not spin_until(executor, sent.done, answer_timeout_s):
            continue
        handle = sent.result()
        if not handle.accepted:
            raise RuntimeError('the action server rejected the priming goal')
        if spin_until(executor, handle.get_result_async().done, result_timeout_s):
            return
    raise TimeoutError(f'no goal of {attempts} was answered with a result')


def wait_for_bridge_connection(
    executor: Executor, node: Node, timeout_s: float = 60.0, topic: str = 'link_state'
) -> bool:
    """Spin until the offload bridge's ``link_state`` says it is connected to its server.

    A test that disables the bridge's local fallback must not send goals before then: the
    bridge answers them as failed while it is still connecting.
    """
    connected = []
    subscription = node.create_subscription(
        LinkState, topic, lambda message: connected.append(message.connected), 10
    )
    try:
        return spin_until(executor, lambda: any(connected), timeout_s)
    finally:
        node.destroy_subscription(subscription)
