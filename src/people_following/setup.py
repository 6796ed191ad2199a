# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Install the people_following package."""

from setuptools import find_packages, setup

package_name = 'people_following'

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
    description='People following on a wheeled robot: sensor sources, offloaded people '
    'detection, localizer, tracker, follower, bag recording and evaluation.',
    license='Apache-2.0',
    extras_require={'test': ['pytest']},
    entry_points={
        'console_scripts': [
            'sensor_source = people_following.sensor_source_node:main',
            'people_detection = people_following.people_detection_node:main',
            'tracking_monitor = people_following.tracking_monitor_node:main',
            'follower = people_following.follower_node:main',
            'bag_recorder = people_following.bag_recorder_node:main',
            'bag_evaluate = people_following.bag_evaluator:main',
            'people_tracker = people_following.people_tracker_node:main',
            # bringup's kapao_tracking.launch.py graph in one process, from the same definition.
            'kapao_tracking = people_following.graph_runner:main',
        ],
    },
)
