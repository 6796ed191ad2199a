# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The accumo_ros skeleton is built, installed and registered in the ament index."""

import importlib
from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from catkin_pkg.package import parse_package


def test_package_is_importable_and_indexed():
    module = importlib.import_module('accumo_ros')
    share = Path(get_package_share_directory('accumo_ros'))
    installed = parse_package(share / 'package.xml')
    assert installed.name == 'accumo_ros'
    assert module.__doc__, 'the package says what it is for'
