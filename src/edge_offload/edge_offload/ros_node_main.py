# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The ``main`` of the suite's lifecycle nodes: spin, optionally autostart, shut down cleanly."""

from __future__ import annotations

from collections.abc import Callable

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn


def run_lifecycle_node(
    make_node: Callable[[], LifecycleNode],
    release: Callable[[LifecycleNode], None],
    args: list[str] | None = None,
    num_threads: int = 2,
) -> int:
    """Run a lifecycle node on a multi-threaded executor until shutdown; return an exit code.

    With the node's ``autostart`` parameter it configures and activates itself (for runs
    without a lifecycle manager); a failed transition exits with code 1. ``release`` frees
    what the node holds before it is destroyed.
    """
    rclpy.init(args=args)
    node = make_node()
    executor = MultiThreadedExecutor(num_threads=num_threads)
    executor.add_node(node)
    try:
        if node.get_parameter('autostart').value:
            for transition in (node.trigger_configure, node.trigger_activate):
                if transition() != TransitionCallbackReturn.SUCCESS:
                    node.get_logger().error(f'autostart: {transition.__name__} failed')
                    return 1
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        release(node)
        node.destroy_node()
        executor.shutdown(timeout_sec=2.0)
        rclpy.try_shutdown()
    return 0
