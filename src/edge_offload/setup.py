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
            'edge_offload_zoo = edge_offload.zoo.zoo_cli:main',
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
        # The model zoo.
        'edge_offload.models': [
            'tiny_cnn = edge_offload.models:tiny_cnn',
            # Benchmark networks with torchvision's layouts (random weights).
            'resnet18 = edge_offload.zoo.classification:resnet18',
            'resnet50 = edge_offload.zoo.classification:resnet50',
            'resnet152 = edge_offload.zoo.classification:resnet152',
            'vgg19 = edge_offload.zoo.classification:vgg19',
            'vgg19_bn = edge_offload.zoo.classification:vgg19_bn',
            'densenet121 = edge_offload.zoo.classification:densenet121',
            'convnext_tiny = edge_offload.zoo.classification:convnext_tiny',
            'mobilenet_v2 = edge_offload.zoo.classification:mobilenet_v2',
            # KAPAO people pipelines (uint8 image -> people) and bare nets (random weights).
            'kapao_s = edge_offload.zoo.kapao:kapao_s',
            'kapao_m = edge_offload.zoo.kapao:kapao_m',
            'kapao_l = edge_offload.zoo.kapao:kapao_l',
            'kapao_s_net = edge_offload.zoo.kapao:kapao_s_net',
            'kapao_m_net = edge_offload.zoo.kapao:kapao_m_net',
            'kapao_l_net = edge_offload.zoo.kapao:kapao_l_net',
            # BlazePose with its real pretrained weights (Apache-2.0, fetched by make setup).
            'blazepose_people = edge_offload.zoo.blazepose:blazepose_people',
            'blazepose_fast_people = edge_offload.zoo.blazepose:blazepose_fast_people',
            'blazepose_lite_people = edge_offload.zoo.blazepose:blazepose_lite_people',
            'blazepose_hog_people = edge_offload.zoo.blazepose:blazepose_hog_people',
            'blazepose_detector_people = edge_offload.zoo.blazepose:blazepose_detector_people',
            'blazepose_tiled_people = edge_offload.zoo.blazepose:blazepose_tiled_people',
            'blazepose_landmark_full = edge_offload.zoo.blazepose:blazepose_landmark_full',
        ],
    },
)
