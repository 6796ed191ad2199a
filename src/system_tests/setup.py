# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Install the system_tests package: tests across packages (no Python module)."""

from setuptools import setup

package_name = 'system_tests'

setup(
    name=package_name,
    version='0.1.0',
    packages=[],
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
    ],
    install_requires=['setuptools'],
    zip_safe=True,
    maintainer='Edge offload maintainers',
    maintainer_email='maintainers@edge-offload.dev',
    description='System tests of the edge-offloading suite: launch files, launch tests, '
    'layering, documentation and lint across every package.',
    license='Apache-2.0',
    extras_require={'test': ['pytest']},
)
