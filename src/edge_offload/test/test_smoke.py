# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""edge_offload is installed; the test fixtures are the workspace's, not the environment's."""

from importlib.metadata import entry_points

from edge_offload_testing import installed_package_manifest


def test_package_is_importable_and_indexed():
    manifest = installed_package_manifest('edge_offload')
    assert 'offload_interfaces' in {dependency.name for dependency in manifest.exec_depends}


def test_fixture_plugin_is_not_registered_for_every_pytest_run():
    # A global pytest11 plugin would import rclpy into every pytest run in the venv.
    plugins = {entry.value for entry in entry_points(group='pytest11')}
    assert not any(plugin.startswith('edge_offload') for plugin in plugins)
