# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Install the edge_offload_testing package (the workspace's test harness)."""

from setuptools import find_packages, setup

package_name = 'edge_offload_testing'

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test', 'test.*']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
    ],
    install_requires=['setuptools'],
    zip_safe=True,
    maintainer='Edge offload maintainers',
    maintainer_email='maintainers@edge-offload.dev',
    description='Test harness of the edge-offloading suite (fixtures, graph waits, servers).',
    license='Apache-2.0',
    # No pytest11 entry point: the workspace's pytest configuration loads the fixtures
    # (-p edge_offload_testing.pytest_plugin), so other pytest runs do not import rclpy.
)
