# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""edge_offload_zoo is installed and its models are registered in edge_offload's group."""

from importlib.metadata import entry_points

from edge_offload_testing import installed_package_manifest


def test_package_is_importable_and_indexed():
    manifest = installed_package_manifest('edge_offload_zoo')
    assert 'edge_offload' in {dependency.name for dependency in manifest.exec_depends}


def test_its_models_are_registered_by_name():
    registered = {entry.name: entry.value for entry in entry_points(group='edge_offload.models')}
    assert registered['blazepose_lite_people'].startswith('edge_offload_zoo.blazepose:')
    assert registered['resnet18'].startswith('edge_offload_zoo.classification:')
    assert registered['tiny_cnn'].startswith('edge_offload.models:')
