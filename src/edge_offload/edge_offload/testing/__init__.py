# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Helpers for tests that run real ROS 2 graphs: isolated domains and graph waits."""

from edge_offload.testing.graph_wait import (
    prime_action_client,
    spin_until,
    wait_for_bridge_connection,
    wait_for_publishers,
    wait_for_subscribers,
)
from edge_offload.testing.offload import (
    HeadlessServer,
    KeySet,
    authorize_robot,
    edge_client_for,
    edge_server_node_command,
    free_tcp_port,
    loopback_edge_server,
    make_test_keys,
    node_command,
    offload_bridge_node_command,
    resident_memory_bytes,
    start_headless_server,
    start_link_emulator_process,
)
from edge_offload.testing.packages import installed_package_manifest
from edge_offload.testing.processes import ProcessGroup
from edge_offload.testing.ros_domain import reserve_domain_id

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
