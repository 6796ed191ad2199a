# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""launch_testing test of ``edge_server.launch.py`` (``launch_test`` runs it).

The launch file must bring the lifecycle edge server to ``active`` by itself (autostart)
and leave it listening on the endpoint argument; after shutdown the process exited
cleanly. ``test_launch_tests.py`` runs it; pytest does not collect it (``conftest.py``).
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
import unittest
from pathlib import Path

import launch_testing
import launch_testing.actions
import launch_testing.asserts
import pytest
import rclpy
from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from lifecycle_msgs.srv import GetState

from edge_offload_testing import free_tcp_port
from edge_offload_testing.people_graph import loopback_params_file

SHARE = Path(get_package_share_directory('bringup'))


@pytest.mark.launch_test
def generate_test_description():  # noqa: ANN201 - launch_testing's entry point
    """Launch the edge server with its own keys on a free port."""
    directory = Path(tempfile.mkdtemp(prefix='edge_server_launch_'))
    port = free_tcp_port()
    params = loopback_params_file(SHARE / 'config' / 'edge_server.yaml', directory, port)
    server = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.fspath(SHARE / 'launch' / 'edge_server.launch.py')),
        launch_arguments={
            'params_file': os.fspath(params),
            'endpoint': f'tcp://127.0.0.1:{port}',
        }.items(),
    )
    return LaunchDescription([server, launch_testing.actions.ReadyToTest()]), {'port': port}


class TestServerActive(unittest.TestCase):
    """Active test: the lifecycle reaches active and the endpoint listens."""

    @classmethod
    def setUpClass(cls) -> None:
        rclpy.init()
        cls.node = rclpy.create_node('edge_server_launch_test')

    @classmethod
    def tearDownClass(cls) -> None:
        cls.node.destroy_node()
        rclpy.shutdown()

    def test_server_becomes_active_and_listens(self, port) -> None:  # noqa: ANN001
        client = self.node.create_client(GetState, '/edge_server/get_state')
        assert client.wait_for_service(timeout_sec=60.0), 'no /edge_server/get_state service'
        label = ''
        deadline = time.monotonic() + 120.0
        while label != 'active' and time.monotonic() < deadline:
            future = client.call_async(GetState.Request())
            rclpy.spin_until_future_complete(self.node, future, timeout_sec=5.0)
            label = future.result().current_state.label if future.done() else ''
            time.sleep(0.2)
        assert label == 'active', f'edge_server is {label or "not answering"}, not active'
        with socket.create_connection(('127.0.0.1', port), timeout=5.0):
            pass  # raises (saying why) unless the endpoint listens


@launch_testing.post_shutdown_test()
class TestServerShutdown(unittest.TestCase):
    """After shutdown: a clean exit."""

    def test_server_exited_cleanly(self, proc_info) -> None:  # noqa: ANN001
        launch_testing.asserts.assertExitCodes(proc_info)
