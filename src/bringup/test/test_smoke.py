# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The bringup package is built, installed and registered in the ament index."""

import importlib.util
from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from catkin_pkg.package import parse_package


def test_package_is_indexed_and_holds_no_python():
    manifest = parse_package(Path(get_package_share_directory('bringup')) / 'package.xml')
    assert manifest.name == 'bringup'
    # The nodes its launch files start come from these packages.
    assert {'people_following', 'edge_offload', 'accumo_ros'} <= {
        dependency.name for dependency in manifest.exec_depends
    }
    assert importlib.util.find_spec('bringup') is None


def test_launch_config_and_rviz_files_are_installed_from_the_package():
    package = Path(__file__).resolve().parents[1]
    share = Path(get_package_share_directory('bringup'))
    for folder, pattern in (('launch', '*.launch.py'), ('config', '*.yaml'), ('rviz', '*.rviz')):
        expected = {path.name for path in (package / folder).glob(pattern)}
        assert expected, f'no {pattern} in {package / folder}'
        installed = {path.name for path in (share / folder).glob(pattern)}
        assert installed == expected, (
            f'{folder}: installed {sorted(installed)}, package has {sorted(expected)}; '
            'run make setup to reinstall'
        )
