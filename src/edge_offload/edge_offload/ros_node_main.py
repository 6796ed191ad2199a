# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The ``main`` of the suite's nodes: spin, optionally autostart, shut down cleanly."""

from __future__ import annotations

from collections.abc import Callable

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from rclpy.node import Node


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


def run_node(
    make_node: Callable[[], Node],
    name: str,
    args: list[str] | None = None,
    *,
    configuration_errors: tuple[type[BaseException], ...] = (ValueError,),
    release: Callable[[Node], None] | None = None,
) -> int:
    """Run a plain node until shutdown; return an exit code.

    An error of ``configuration_errors`` while the node is built (a bad parameter, a
    missing file) is logged as one line under ``name`` and gives exit code 1, with no
    traceback. ``release`` runs before the node is destroyed (final reports, files).
    """
    rclpy.init(args=args)
    try:
        node = make_node()
    except configuration_errors as error:
        rclpy.logging.get_logger(name).error(f'bad configuration: {error}')
        rclpy.try_shutdown()
        return 1
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if release is not None:
            release(node)
        node.destroy_node()
        rclpy.try_shutdown()
    return 0
