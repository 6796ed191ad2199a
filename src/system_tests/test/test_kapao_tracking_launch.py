# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""launch_testing test of ``kapao_tracking.launch.py`` (``launch_test`` runs it).

Launches the whole graph on one machine (``start_edge_server:=true source:=synthetic``)
with a parameter file of its own (CURVE keys and a free port), giving no endpoint argument:
the file's endpoint must be the one used. ``follow:=True`` (capitalised, as users type it)
must start the AccuMO scheduler as well as the tracker and the follower. It checks, with
:class:`edge_offload_testing.people_graph.GraphWatcher`, that people are detected through the edge
server, AccuMO publishes depth and odometry, tracks come out in the odometry frame, the
link is up and the follower holds a robot that has nobody to follow still; after shutdown,
every process exited cleanly and the bag of the run was written.
``test_launch_tests.py`` runs it; pytest does not collect it (``conftest.py``).
"""

from __future__ import annotations

import os
import shutil
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

from edge_offload_testing import free_tcp_port
from edge_offload_testing.people_graph import GraphWatcher, loopback_params_file

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
            'follow': 'True',
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
        # The graph shows everything in about 10 s; the wait and the shutdown stay well inside
        # the runner's time limit, so a failure reports what was missing.
        deadline = time.monotonic() + 150.0
        while self.watcher.missing() and time.monotonic() < deadline:
            rclpy.spin_once(self.node, timeout_sec=0.1)
        missing = self.watcher.missing()
        assert missing == [], (
            f'the graph has not shown: {missing}; received {self.watcher.received()}'
        )
        commands = self.watcher.commands
        assert self.watcher.robot_stayed_still(), f'the robot was told to move: {commands[-5:]}'


@launch_testing.post_shutdown_test()
class TestGraphShutdown(unittest.TestCase):
    """After shutdown: clean exits, and the bag of the run was written."""

    def test_every_process_exited_cleanly(self, proc_info) -> None:  # noqa: ANN001
        launch_testing.asserts.assertExitCodes(proc_info)

    def test_run_was_recorded(self, directory) -> None:  # noqa: ANN001
        written = sorted(path.name for path in directory.iterdir())
        assert (directory / 'run' / 'metadata.yaml').is_file(), f'{directory}: {written}'
        assert (directory / 'run.metrics.json').is_file(), f'{directory}: {written}'
        # Checked: the bag (over 100 MB of camera frames) goes; a failed run's stays.
        shutil.rmtree(directory)
