# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Install the lopinfer_ros package."""

from setuptools import find_packages, setup

package_name = 'lopinfer_ros'

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
    description='LOPInfer (Intra-DP) local-operator parallel inference for ROS 2.',
    license='Apache-2.0',
    extras_require={'test': ['pytest']},
    entry_points={
        'console_scripts': ['lopinfer_plan = lopinfer_ros.plan_cli:main'],
        'edge_offload.modes': [
            'lopinfer = lopinfer_ros.modes:LopInferMode',
            'layer_split = lopinfer_ros.modes:LayerSplitMode',
        ],
        'edge_offload.server_modes': [
            'lopinfer = lopinfer_ros.modes:LopInferServerMode',
            'layer_split = lopinfer_ros.modes:LayerSplitServerMode',
        ],
    },
)
