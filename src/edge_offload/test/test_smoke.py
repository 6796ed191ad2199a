# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""edge_offload is installed with its pytest plugin registered."""

from importlib.metadata import entry_points

from edge_offload.testing import installed_package_manifest


def test_package_is_importable_and_indexed():
    manifest = installed_package_manifest('edge_offload')
    assert 'offload_interfaces' in {dependency.name for dependency in manifest.exec_depends}


def test_fixture_plugin_is_registered_for_every_pytest_run():
    plugins = {entry.value for entry in entry_points(group='pytest11')}
    assert 'edge_offload.testing.pytest_plugin' in plugins
