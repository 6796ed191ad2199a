# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The accumo_ros package is built, installed and registered in the ament index."""

from edge_offload_testing import installed_package_manifest


def test_package_is_importable_and_indexed():
    manifest = installed_package_manifest('accumo_ros')
    assert 'edge_offload' in {dependency.name for dependency in manifest.exec_depends}
