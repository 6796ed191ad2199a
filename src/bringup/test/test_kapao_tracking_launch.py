# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""launch_testing test of ``kapao_tracking.launch.py`` (runs where launch_testing is installed).

Launches the whole graph on one machine (``start_edge_server:=true source:=synthetic``, its
own CURVE keys and port) and checks, with :class:`bringup.graph_checks.GraphWatcher`, that
people are detected through the edge server, AccuMO publishes depth and odometry, tracks
come out in the odometry frame, the link is up and the follower commands a robot that has
nobody to follow to stand still; after shutdown, every process exited cleanly. Where
``launch_testing`` is missing (the PyPI ROS wheels) this module is skipped with that reason;
``test/test_launch_equivalents_system.py`` starts the same nodes as processes and checks the
same behaviour there.
"""

from __future__ import annotations

import os
import tempfile
import time
import unittest
from pathlib import Path

import pytest

pytest.importorskip(
    'launch_testing', reason='launch_testing is not installed (needs a ROS 2 distribution)'
)
import launch_testing  # noqa: E402
import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402
import rclpy  # noqa: E402
from ament_index_python.packages import get_package_share_directory  # noqa: E402
from launch import LaunchDescription  # noqa: E402
from launch.actions import IncludeLaunchDescription  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402

from bringup.graph_checks import GraphWatcher, loopback_params_file  # noqa: E402
from edge_offload.testing import free_tcp_port  # noqa: E402

SHARE = Path(get_package_share_directory('bringup'))


@pytest.mark.launch_test
def generate_test_description():  # noqa: ANN201 - launch_testing's entry point
    """Launch the graph with a self-contained parameter file."""
    directory = Path(tempfile.mkdtemp(prefix='kapao_tracking_launch_'))
    params = loopback_params_file(
        SHARE / 'config' / 'kapao_tracking.yaml', directory, free_tcp_port()
    )
    graph = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.fspath(SHARE / 'launch' / 'kapao_tracking.launch.py')),
        launch_arguments={
            'params_file': os.fspath(params),
            'source': 'synthetic',
            'start_edge_server': 'true',
            'record_bag': os.fspath(directory / 'run'),
        }.items(),
    )
    return LaunchDescription([graph, launch_testing.actions.ReadyToTest()]), {
        'directory': directory
    }


class TestGraphRuns(unittest.TestCase):
    """Active test: the graph's outputs while it runs."""

    @classmethod
    def setUpClass(cls) -> None:
        rclpy.init()
        cls.node = rclpy.create_node('kapao_tracking_launch_test')
        cls.watcher = GraphWatcher(cls.node)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.node.destroy_node()
        rclpy.shutdown()

    def test_graph_detects_tracks_and_holds_the_robot_still(self) -> None:
        deadline = time.monotonic() + 240.0
        while self.watcher.missing() and time.monotonic() < deadline:
            rclpy.spin_once(self.node, timeout_sec=0.1)
        assert self.watcher.missing() == []
        assert self.watcher.robot_stayed_still()


@launch_testing.post_shutdown_test()
class TestGraphShutdown(unittest.TestCase):
    """After shutdown: clean exits, and the bag of the run was written."""

    def test_every_process_exited_cleanly(self, proc_info) -> None:  # noqa: ANN001
        launch_testing.asserts.assertExitCodes(proc_info)

    def test_run_was_recorded(self, directory) -> None:  # noqa: ANN001
        assert (directory / 'run' / 'metadata.yaml').is_file()
        assert (directory / 'run.metrics.json').is_file()
