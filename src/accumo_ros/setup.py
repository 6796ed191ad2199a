# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Install the accumo_ros package."""

from setuptools import find_packages, setup

package_name = 'accumo_ros'

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test', 'test.*']),
    # Trained depth nets and the odometry accuracy model, made by the suite's own scripts.
    package_data={package_name: ['weights/*.pt', 'weights/*.yaml']},
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
    ],
    install_requires=['setuptools'],
    zip_safe=True,
    maintainer='Edge offload maintainers',
    maintainer_email='maintainers@edge-offload.dev',
    description='AccuMO accuracy-driven multitask offloading scheduler for ROS 2.',
    license='Apache-2.0',
    extras_require={'test': ['pytest']},
    entry_points={
        'console_scripts': [
            'accumo_generate = accumo_ros.simulation.dataset:main',
            'accumo_train_depth = accumo_ros.tools.train_depth:main',
            'accumo_odometry_eval = accumo_ros.tools.odometry_eval:main',
            'accumo_evaluate = accumo_ros.tools.evaluate:main',
            'accumo_evaluate_e2e = accumo_ros.tools.evaluate_e2e:main',
            'accumo_scheduler = accumo_ros.scheduler_node:main',
        ],
        # AccuMO's server models in the edge_offload zoo (trained weights, packaged here).
        'edge_offload.models': [
            'accumo_depth = accumo_ros.models:accumo_depth',
            'accumo_odometry = accumo_ros.models:accumo_odometry',
            'accumo_depth_odometry = accumo_ros.models:accumo_depth_odometry',
        ],
    },
)
