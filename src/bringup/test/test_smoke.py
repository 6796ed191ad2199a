# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The bringup package is built, installed and registered in the ament index."""

from pathlib import Path

from ament_index_python.packages import get_package_share_directory

from edge_offload.testing import installed_package_manifest


def test_package_is_importable_and_indexed():
    manifest = installed_package_manifest('bringup')
    assert 'edge_offload' in {dependency.name for dependency in manifest.exec_depends}


def test_launch_and_config_files_are_installed_from_the_repository_root():
    # bringup installs the root launch/ and config/ files; they appear as they are added.
    root = Path(__file__).resolve().parents[3]
    share = Path(get_package_share_directory('bringup'))
    for folder, pattern in (('launch', '*.launch.py'), ('config', '*.yaml')):
        expected = {path.name for path in (root / folder).glob(pattern)}
        installed = {path.name for path in (share / folder).glob(pattern)}
        assert installed == expected, f'run make setup to reinstall {folder}/'
