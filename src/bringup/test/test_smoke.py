# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The bringup package is built, installed and registered in the ament index."""

from pathlib import Path

from ament_index_python.packages import get_package_share_directory

from edge_offload_testing import installed_package_manifest


def test_package_is_importable_and_indexed():
    manifest = installed_package_manifest('bringup')
    assert 'edge_offload' in {dependency.name for dependency in manifest.exec_depends}


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
