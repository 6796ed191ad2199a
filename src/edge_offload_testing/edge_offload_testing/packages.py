# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Check that a workspace package is built, installed and registered in the ament index."""

from __future__ import annotations

import importlib
from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from catkin_pkg.package import Package, parse_package


def installed_package_manifest(name: str) -> Package:
    """Import package ``name`` and return the manifest installed in its share directory.

    Raises if the Python package cannot be imported, the ament index does not know it, or
    the installed ``package.xml`` is invalid or names another package.
    """
    module = importlib.import_module(name)
    if not module.__doc__:
        raise AssertionError(f'package {name} has no docstring saying what it is for')
    manifest = parse_package(Path(get_package_share_directory(name)) / 'package.xml')
    if manifest.name != name:
        raise AssertionError(f'share/{name}/package.xml names {manifest.name}')
    return manifest
