# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Install the arise_ros package."""

from setuptools import find_packages, setup

package_name = 'arise_ros'

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
    description='ARISE: serving many robots from one edge server under accuracy SLAs.',
    license='Apache-2.0',
    extras_require={'test': ['pytest']},
    entry_points={
        'console_scripts': [
            'arise_emulated_robot = arise_ros.emulated_robot:main',
            'arise_fleet = arise_ros.ray_fleet:main',
            'arise_fleet_node = arise_ros.fleet_node:main',
        ],
        'edge_offload.server_modes': [
            'arise = arise_ros.server_mode:AriseServerMode',
            'fleet = arise_ros.fleet_mode:FleetServerMode',
        ],
    },
)
