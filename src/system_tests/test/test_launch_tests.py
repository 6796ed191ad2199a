# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Run the launch tests (``test_*_launch.py``) with the real ``launch_test`` command.

launch_testing's pytest plugin does not load under pytest 9, so each launch test runs as
``launch_test FILE`` in its own process, as ``colcon test`` would run it on a ROS 2
installation, and its JUnit report must show every test run and passed: a launch test
that skipped, or found no tests, fails here. Without the ROS 2 tooling these skip with the
reason (see :mod:`edge_offload_testing.ros2_cli`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from edge_offload_testing.ros2_cli import require_ros2_cli

LAUNCH_TESTS = sorted(Path(__file__).parent.glob('test_*_launch.py'))


def test_there_are_launch_tests():
    assert {path.name for path in LAUNCH_TESTS} >= {
        'test_kapao_tracking_launch.py',
        'test_edge_server_launch.py',
    }, f'found {[path.name for path in LAUNCH_TESTS]}'


@pytest.mark.parametrize('path', LAUNCH_TESTS, ids=lambda path: path.stem)
def test_launch_test_passes(path, ros_domain_id, tmp_path):
    require_ros2_cli()
    report = tmp_path / 'junit.xml'
    environment = dict(os.environ, ROS_LOG_DIR=str(tmp_path / 'ros_log'))
    result = subprocess.run(
        [
            shutil.which('launch_test'),
            str(path),
            '--package-name',
            'system_tests',
            '--junit-xml',
            str(report),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=environment,
        timeout=540,
        check=False,
    )
    output = result.stdout[-6000:]
    assert result.returncode == 0, f'launch_test {path.name} exited {result.returncode}:\n{output}'
    assert report.is_file(), f'no JUnit report from launch_test:\n{output}'
    # The report launch_test just wrote here, not outside data.
    cases = ElementTree.parse(report).getroot().iter('testcase')  # noqa: S314
    outcomes = {
        case.get('name'): [child.tag for child in case if child.tag != 'system-out']
        for case in cases
    }
    assert outcomes, f'launch_test {path.name} ran no test:\n{output}'
    bad = {name: tags for name, tags in outcomes.items() if tags}
    assert not bad, f'not passed (failure, error or skipped): {bad}\n{output}'
