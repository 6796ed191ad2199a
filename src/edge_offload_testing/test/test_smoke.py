# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""edge_offload_testing is installed, and its fixtures come from this workspace's configuration."""

from edge_offload_testing import installed_package_manifest


def test_package_is_installed_and_indexed():
    manifest = installed_package_manifest('edge_offload_testing')
    assert 'edge_offload' in {dependency.name for dependency in manifest.exec_depends}


def test_the_fixtures_are_loaded_here(pytestconfig):
    assert pytestconfig.pluginmanager.has_plugin('edge_offload_testing.pytest_plugin')
