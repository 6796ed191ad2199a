# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Pytest fixtures for tests that run ROS 2 nodes (``-p edge_offload_testing.pytest_plugin``).

``ros_domain_id`` gives the test a domain of its own and exports it, with localhost-only
discovery, to every process the test starts. ``ros_context`` is an initialised rclpy
context in that domain, shut down after the test; ``ros_executor`` spins it.
``ros_processes`` starts processes in the same domain and stops them after the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor

from edge_offload.node_processes import ProcessGroup
from edge_offload_testing.ros_domain import reserve_domain_id


@pytest.fixture
def ros_domain_id(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """Reserve a free ROS domain id and export it to the test and its child processes."""
    with reserve_domain_id() as domain_id:
        monkeypatch.setenv('ROS_DOMAIN_ID', str(domain_id))
        # Keep discovery traffic on this machine's loopback interface.
        monkeypatch.setenv('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
        # Child Python processes print their logs as they happen.
        monkeypatch.setenv('PYTHONUNBUFFERED', '1')
        yield domain_id


@pytest.fixture
def ros_context(ros_domain_id: int) -> Iterator[Context]:
    """Yield an rclpy context initialised in the test's own domain."""
    context = Context()
    context.init(domain_id=ros_domain_id)
    try:
        yield context
    finally:
        context.try_shutdown()


@pytest.fixture
def ros_executor(ros_context: Context) -> Iterator[SingleThreadedExecutor]:
    """Yield a single-threaded executor bound to ``ros_context``."""
    executor = SingleThreadedExecutor(context=ros_context)
    try:
        yield executor
    finally:
        executor.shutdown()


@pytest.fixture
def ros_processes(ros_domain_id: int, tmp_path: Path) -> Iterator[ProcessGroup]:
    """Yield a ProcessGroup whose processes run in the test's domain; stop them after."""
    group = ProcessGroup(tmp_path)
    try:
        yield group
    finally:
        group.stop_all()
