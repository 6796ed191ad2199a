# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Start the edge server on the edge (GPU) machine.

    ros2 launch bringup edge_server.launch.py
    ros2 launch bringup edge_server.launch.py endpoint:=tcp://0.0.0.0:5555

The server is a lifecycle node: configure loads the models and keys, activate binds the
endpoint. Robots connect with CURVE keys made by ``edge_offload_keygen``; their public keys
go in the server's ``authorized_clients_dir``.
"""

from __future__ import annotations

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode

from bringup.launch_helpers import configure_then_activate


def generate_launch_description() -> LaunchDescription:
    """Declare the arguments and the edge server node."""
    share = get_package_share_directory('bringup')
    arguments = [
        DeclareLaunchArgument(
            'params_file',
            default_value=os.path.join(share, 'config', 'edge_server.yaml'),
            description='Parameter file of the edge server (models, modes, keys, limits)',
        ),
        DeclareLaunchArgument(
            'endpoint',
            default_value='tcp://0.0.0.0:5555',
            description='ZeroMQ endpoint the server binds (robots connect to it)',
        ),
        DeclareLaunchArgument(
            'log_level', default_value='info', description='Log level of the server'
        ),
    ]
    server = LifecycleNode(
        package='edge_offload',
        executable='edge_server',
        name='edge_server',
        namespace='',
        parameters=[
            LaunchConfiguration('params_file'),
            {'endpoint': LaunchConfiguration('endpoint')},
        ],
        arguments=['--ros-args', '--log-level', LaunchConfiguration('log_level')],
        output='screen',
        respawn=True,
        additional_env={'RCUTILS_LOGGING_BUFFERED_STREAM': '1'},
    )
    return LaunchDescription([*arguments, server, *configure_then_activate(server)])
