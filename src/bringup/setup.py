# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Install the bringup package."""

from glob import glob

from setuptools import find_packages, setup

package_name = 'bringup'

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test', 'test.*']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
        ('share/' + package_name + '/launch', glob('launch/*.launch.py')),
        ('share/' + package_name + '/config', glob('config/*.yaml') + glob('config/*.xml')),
        ('share/' + package_name + '/rviz', glob('rviz/*.rviz')),
    ],
    install_requires=['setuptools'],
    zip_safe=True,
    maintainer='Edge offload maintainers',
    maintainer_email='maintainers@edge-offload.dev',
    description='Applications, launch and parameter files of the edge-offloading suite.',
    license='Apache-2.0',
    extras_require={'test': ['pytest']},
    entry_points={
        'console_scripts': [
            'sensor_source = bringup.sensor_source_node:main',
            'people_detection = bringup.people_detection_node:main',
            'tracking_monitor = bringup.tracking_monitor_node:main',
            'follower = bringup.follower_node:main',
            'bag_recorder = bringup.bag_recorder_node:main',
            'bag_evaluate = bringup.bag_evaluator:main',
            'people_tracker = bringup.people_tracker_node:main',
            # The whole people-tracking graph in one process, from the launch file's YAML.
            'kapao_tracking = bringup.graph_runner:main',
        ],
    },
)
