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
import signal
import subprocess
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from edge_offload_testing.ros2_cli import require_ros2_cli

# Inside pytest's own limit (pyproject.toml), so that a hung launch test is reported here.
LAUNCH_TEST_TIMEOUT_S = 270
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
    # The launch test's own temporary files (keys, the kapao test's bag of over 100 MB)
    # go under pytest's tmp_path, which pytest prunes, not into /tmp for good.
    environment = dict(os.environ, ROS_LOG_DIR=str(tmp_path / 'ros_log'), TMPDIR=str(tmp_path))
    # A session of its own: on a timeout its nodes go with it instead of living on as
    # orphans that publish into the next test's graph.
    process = subprocess.Popen(
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
        start_new_session=True,
    )
    try:
        stdout, _ = process.communicate(timeout=LAUNCH_TEST_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, _ = process.communicate(timeout=30)
        pytest.fail(
            f'launch_test {path.name} still running after {LAUNCH_TEST_TIMEOUT_S} s:\n'
            f'{stdout[-6000:]}'
        )
    finally:
        if process.poll() is None:  # interrupted (Ctrl-C, pytest-timeout): take it all down
            os.killpg(process.pid, signal.SIGKILL)
    output = stdout[-6000:]
    code = process.returncode
    assert code == 0, f'launch_test {path.name} exited {code}:\n{output}'
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
