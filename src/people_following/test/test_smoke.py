# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The people_following package is built, installed and registered in the ament index."""

import shutil
from pathlib import Path

from ament_index_python.packages import get_package_prefix

from edge_offload_testing import installed_package_manifest

EXECUTABLES = (
    'sensor_source',
    'people_detection',
    'tracking_monitor',
    'people_tracker',
    'follower',
    'bag_recorder',
    'bag_evaluate',
    'kapao_tracking',
)


def test_package_is_importable_and_indexed():
    manifest = installed_package_manifest('people_following')
    assert 'edge_offload' in {dependency.name for dependency in manifest.exec_depends}


def test_executables_are_where_ros2_run_finds_them():
    lib = Path(get_package_prefix('people_following')) / 'lib' / 'people_following'
    for name in EXECUTABLES:
        assert shutil.which(name, path=str(lib)), f'{name} not in {lib}'
