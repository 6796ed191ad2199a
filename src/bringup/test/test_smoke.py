# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The bringup skeleton is built, installed and registered in the ament index."""

import importlib
from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from catkin_pkg.package import parse_package


def test_package_is_importable_and_indexed():
    module = importlib.import_module('bringup')
    share = Path(get_package_share_directory('bringup'))
    installed = parse_package(share / 'package.xml')
    assert installed.name == 'bringup'
    assert module.__doc__, 'the package says what it is for'


def test_launch_and_config_directories_are_installed_from_the_root():
    # bringup installs the root launch/ and config/ files; they appear as they are added.
    root = Path(__file__).resolve().parents[3]
    share = Path(get_package_share_directory('bringup'))
    for folder, pattern in (('launch', '*.launch.py'), ('config', '*.yaml')):
        expected = {path.name for path in (root / folder).glob(pattern)}
        installed = {path.name for path in (share / folder).glob(pattern)}
        assert installed == expected, f'run make setup to reinstall {folder}/'
