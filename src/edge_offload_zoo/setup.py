# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Install the edge_offload_zoo package (the model zoo)."""

from setuptools import find_packages, setup

package_name = 'edge_offload_zoo'

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
    description='Model zoo of the edge-offloading suite: BlazePose, KAPAO, benchmark networks.',
    license='Apache-2.0',
    extras_require={'test': ['pytest']},
    entry_points={
        'console_scripts': [
            'edge_offload_zoo = edge_offload_zoo.zoo_cli:main',
        ],
        # Registered in edge_offload's model group: the robot and the server build them by name.
        'edge_offload.models': [
            # Benchmark networks with torchvision's layouts (random weights).
            'resnet18 = edge_offload_zoo.classification:resnet18',
            'resnet50 = edge_offload_zoo.classification:resnet50',
            'resnet152 = edge_offload_zoo.classification:resnet152',
            'vgg19 = edge_offload_zoo.classification:vgg19',
            'vgg19_bn = edge_offload_zoo.classification:vgg19_bn',
            'densenet121 = edge_offload_zoo.classification:densenet121',
            'convnext_tiny = edge_offload_zoo.classification:convnext_tiny',
            'mobilenet_v2 = edge_offload_zoo.classification:mobilenet_v2',
            # KAPAO people pipelines (uint8 image -> people) and bare nets (random weights).
            'kapao_s = edge_offload_zoo.kapao:kapao_s',
            'kapao_m = edge_offload_zoo.kapao:kapao_m',
            'kapao_l = edge_offload_zoo.kapao:kapao_l',
            'kapao_s_net = edge_offload_zoo.kapao:kapao_s_net',
            'kapao_m_net = edge_offload_zoo.kapao:kapao_m_net',
            'kapao_l_net = edge_offload_zoo.kapao:kapao_l_net',
            # BlazePose with its real pretrained weights (Apache-2.0, fetched by make setup).
            'blazepose_people = edge_offload_zoo.blazepose:blazepose_people',
            'blazepose_fast_people = edge_offload_zoo.blazepose:blazepose_fast_people',
            'blazepose_lite_people = edge_offload_zoo.blazepose:blazepose_lite_people',
            'blazepose_hog_people = edge_offload_zoo.blazepose:blazepose_hog_people',
            'blazepose_detector_people = edge_offload_zoo.blazepose:blazepose_detector_people',
            'blazepose_tiled_people = edge_offload_zoo.blazepose:blazepose_tiled_people',
            'blazepose_landmark_full = edge_offload_zoo.blazepose:blazepose_landmark_full',
        ],
    },
)
