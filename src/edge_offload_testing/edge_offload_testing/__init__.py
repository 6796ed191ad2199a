# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The test harness of the workspace: isolated ROS domains, graph waits, keys and servers.

Tests import it; runtime code never does. Its pytest fixtures (``pytest_plugin``) are
loaded by this workspace's pytest configuration (``-p edge_offload_testing.pytest_plugin``
in the root ``pyproject.toml``), not registered for every pytest run in the environment.
The runtime helpers it re-exports (process groups, node command lines, graph waits) live in
``edge_offload``.
"""

from edge_offload.graph_wait import (
    prime_action_client,
    spin_until,
    wait_for_bridge_connection,
    wait_for_publishers,
    wait_for_subscribers,
)
from edge_offload.node_processes import (
    ProcessGroup,
    edge_server_node_command,
    free_tcp_port,
    node_command,
    offload_bridge_node_command,
)
from edge_offload_testing.offload import (
    HeadlessServer,
    KeySet,
    authorize_robot,
    edge_client_for,
    loopback_edge_server,
    make_test_keys,
    resident_memory_bytes,
    start_headless_server,
    start_link_emulator_process,
)
from edge_offload_testing.packages import installed_package_manifest
from edge_offload_testing.ros_domain import reserve_domain_id

__all__ = [
    'HeadlessServer',
    'ProcessGroup',
    'KeySet',
    'authorize_robot',
    'edge_client_for',
    'edge_server_node_command',
    'free_tcp_port',
    'loopback_edge_server',
    'make_test_keys',
    'node_command',
    'offload_bridge_node_command',
    'prime_action_client',
    'resident_memory_bytes',
    'start_headless_server',
    'start_link_emulator_process',
    'installed_package_manifest',
    'reserve_domain_id',
    'spin_until',
    'wait_for_bridge_connection',
    'wait_for_publishers',
    'wait_for_subscribers',
]
