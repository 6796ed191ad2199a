# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Start the offload bridge (robot) and, optionally, an edge server on the same machine.

Both are lifecycle nodes: this file configures them and activates each one once it is
inactive, the standard launch_ros pattern. Keys come from ``edge_offload_keygen``.

    ros2 launch bringup offload_substrate.launch.py start_edge_server:=true
"""

from __future__ import annotations

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode

from bringup.launch_helpers import configure_then_activate


def generate_launch_description() -> LaunchDescription:
    """Declare the arguments and the two lifecycle nodes."""
    config_dir = os.path.join(get_package_share_directory('bringup'), 'config')
    arguments = [
        DeclareLaunchArgument(
            'namespace', default_value='', description='Namespace of the robot-side nodes'
        ),
        DeclareLaunchArgument(
            'bridge_params_file',
            default_value=os.path.join(config_dir, 'offload_bridge.yaml'),
            description='Parameter file of the offload bridge',
        ),
        DeclareLaunchArgument(
            'server_params_file',
            default_value=os.path.join(config_dir, 'edge_server.yaml'),
            description='Parameter file of the edge server',
        ),
        DeclareLaunchArgument(
            'start_edge_server',
            default_value='false',
            description='Also start an edge server here (single-machine runs and demos)',
        ),
        DeclareLaunchArgument(
            'mode',
            default_value='nnto',
            description='Offloading mode of the bridge (local, nnto, ...)',
        ),
        DeclareLaunchArgument(
            'log_level', default_value='info', description='Log level of both nodes'
        ),
    ]
    log_arguments = ['--ros-args', '--log-level', LaunchConfiguration('log_level')]
    bridge = LifecycleNode(
        package='edge_offload',
        executable='offload_bridge',
        name='offload_bridge',
        namespace=LaunchConfiguration('namespace'),
        parameters=[
            LaunchConfiguration('bridge_params_file'),
            {'mode': LaunchConfiguration('mode')},
        ],
        arguments=log_arguments,
        output='screen',
        respawn=True,
        additional_env={'RCUTILS_LOGGING_BUFFERED_STREAM': '1'},
    )
    start_server = IfCondition(LaunchConfiguration('start_edge_server'))
    server = LifecycleNode(
        package='edge_offload',
        executable='edge_server',
        name='edge_server',
        namespace='',
        parameters=[LaunchConfiguration('server_params_file')],
        arguments=log_arguments,
        output='screen',
        respawn=True,
        condition=start_server,
        additional_env={'RCUTILS_LOGGING_BUFFERED_STREAM': '1'},
    )
    return LaunchDescription(
        [
            *arguments,
            server,
            bridge,
            *configure_then_activate(server, condition=start_server),
            *configure_then_activate(bridge),
        ]
    )
