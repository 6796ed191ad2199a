# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Install the edge_offload package."""

from glob import glob

from setuptools import find_packages, setup

package_name = 'edge_offload'

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test', 'test.*']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
        ('share/' + package_name + '/traces', glob('traces/*.trace')),
    ],
    install_requires=['setuptools'],
    zip_safe=True,
    maintainer='Edge offload maintainers',
    maintainer_email='maintainers@edge-offload.dev',
    description='Edge-offloading substrate: protocol, bridge, edge server, link tools.',
    license='Apache-2.0',
    extras_require={'test': ['pytest']},
    entry_points={
        'console_scripts': [
            'edge_server = edge_offload.edge_server_node:main',
            'offload_bridge = edge_offload.offload_bridge_node:main',
            'edge_offload_server = edge_offload.server:main',
            'edge_offload_keygen = edge_offload.keys:main',
            'edge_offload_link_emulator = edge_offload.link_emulator_cli:main',
        ],
        # Offloading modes, loaded by name (robot half and server half).
        'edge_offload.modes': [
            'local = edge_offload.modes.local:LocalMode',
            'nnto = edge_offload.modes.nnto:NntoMode',
        ],
        'edge_offload.server_modes': [
            'nnto = edge_offload.modes.nnto:NntoServerMode',
            'probe = edge_offload.modes.probe:ProbeServerMode',
        ],
        # Models, loaded by name (the zoo proper is the edge_offload_zoo package).
        'edge_offload.models': [
            'tiny_cnn = edge_offload.models:tiny_cnn',
        ],
    },
)
