# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The ``main`` of the suite's nodes: spin, optionally autostart, shut down cleanly and fast.

Every node process keeps the shutdown contract of :mod:`edge_offload.stop_signals`: SIGINT
or SIGTERM starts one orderly shutdown (release, destroy, ``rclpy`` shutdown, exit code 0)
that ends within its budget, whatever else is running; further signals change nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import rclpy
from rclpy.executors import Executor, MultiThreadedExecutor
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

# The shutdown contract lives in stop_signals (no rclpy there); re-exported for the nodes.
from edge_offload.stop_signals import (
    HARD_LIMIT_S,
    SHUTDOWN_BUDGET_S,
    WATCHDOG_S,
    StopRequest,
    finish_process,
)

__all__ = [
    'HARD_LIMIT_S',
    'SHUTDOWN_BUDGET_S',
    'WATCHDOG_S',
    'StopRequest',
    'finish_process',
    'run_lifecycle_node',
    'run_node',
    'shut_down',
    'spin_until_stopped',
]

# How often the spin loop looks at the stop request.
_SPIN_PERIOD_S = 0.1


def spin_until_stopped(
    executor: Executor, stop: StopRequest, until: Callable[[], bool] | None = None
) -> None:
    """Spin ``executor`` until ``stop`` is set, the context ends or ``until()`` is true."""
    while not stop.is_set() and rclpy.ok() and (until is None or not until()):
        executor.spin_once(timeout_sec=_SPIN_PERIOD_S)


def shut_down(node: Node, executor: Executor | None = None) -> None:
    """Destroy ``node``, stop ``executor`` without waiting on busy callbacks, end rclpy."""
    node.destroy_node()
    if executor is not None:
        if isinstance(executor, MultiThreadedExecutor):
            executor.shutdown(timeout_sec=0.2, wait_for_threads=False)
        else:
            executor.shutdown(timeout_sec=0.2)
    rclpy.try_shutdown()


def run_lifecycle_node(
    make_node: Callable[[], LifecycleNode],
    name: str,
    release: Callable[[LifecycleNode], None],
    args: list[str] | None = None,
    num_threads: int = 2,
) -> int:
    """Run a lifecycle node on a multi-threaded executor until a stop signal, then exit.

    With the node's ``autostart`` parameter it configures and activates itself, at every
    start (also a respawn), so service comes back without a lifecycle manager; a failed
    transition exits with code 1. ``release`` frees what the node holds before it is
    destroyed; the process ends in :func:`finish_process`.
    """
    stop = StopRequest(name)
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    node = make_node()
    executor = MultiThreadedExecutor(num_threads=num_threads)
    executor.add_node(node)
    exit_code = 0
    try:
        if node.get_parameter('autostart').value:
            for transition in (node.trigger_configure, node.trigger_activate):
                if stop.is_set():
                    break
                if transition() != TransitionCallbackReturn.SUCCESS:
                    node.get_logger().error(f'autostart: {transition.__name__} failed')
                    exit_code = 1
                    break
        if exit_code == 0:
            spin_until_stopped(executor, stop)
    finally:
        if stop.is_set():
            node.get_logger().info(f'{stop.signal_name or "stop"}: shutting down')
        release(node)
        shut_down(node, executor)
    return finish_process(name, exit_code, stop)


def run_node(
    make_node: Callable[[], Node],
    name: str,
    args: list[str] | None = None,
    *,
    configuration_errors: tuple[type[BaseException], ...] = (ValueError,),
    release: Callable[[Node], None] | None = None,
) -> int:
    """Run a plain node until a stop signal, then exit (in :func:`finish_process`).

    An error of ``configuration_errors`` while the node is built (a bad parameter, a
    missing file) is logged as one line under ``name`` and returns exit code 1, with no
    traceback. ``release`` runs before the node is destroyed (final reports, files).
    """
    stop = StopRequest(name)
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    try:
        node = make_node()
    except configuration_errors as error:
        rclpy.logging.get_logger(name).error(f'bad configuration: {error}')
        rclpy.try_shutdown()
        return 1
    executor = rclpy.executors.SingleThreadedExecutor()
    executor.add_node(node)
    try:
        spin_until_stopped(executor, stop)
    finally:
        if release is not None:
            release(node)
        shut_down(node, executor)
    return finish_process(name, 0, stop)
