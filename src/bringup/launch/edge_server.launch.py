# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Start the edge server on the edge (GPU) machine.

    ros2 launch bringup edge_server.launch.py
    ros2 launch bringup edge_server.launch.py endpoint:=tcp://0.0.0.0:6000

The server is a lifecycle node that configures (loads the models and keys) and activates
(binds the endpoint) itself at start and after every respawn, so a crashed server comes
back without anyone calling ``ros2 lifecycle set``. Its default parameter file serves what
a robot started with ``kapao_tracking.launch.py`` asks for. Robots connect with CURVE keys
made by ``edge_offload_keygen``; their public keys go in ``authorized_clients_dir``.
"""

from __future__ import annotations

import os

from ament_index_python.packages import get_package_share_directory
from launch import Action, LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable

from edge_offload.launch_helpers import (
    argument,
    common_arguments,
    enabled,
    respawning_lifecycle_node,
    write_launch_parameters,
)
from edge_offload.parameter_files import (
    apply_run_flags,
    load_parameter_file,
    node_parameters,
    parse_flag,
)


def generate_launch_description() -> LaunchDescription:
    """Declare the arguments; the server is made once their values are known."""
    share = get_package_share_directory('bringup')
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                'params_file',
                default_value=os.path.join(share, 'config', 'edge_server.yaml'),
                description='Parameter file of the edge server (models, modes, keys, limits)',
            ),
            DeclareLaunchArgument(
                'endpoint',
                default_value='',
                description="ZeroMQ endpoint the server binds (robots connect to it); '' = the "
                "parameter file's value",
            ),
            *common_arguments('the server'),
            SetEnvironmentVariable('RCUTILS_LOGGING_BUFFERED_STREAM', '1'),
            OpaqueFunction(function=_server),
        ]
    )


def _server(context: LaunchContext) -> list[Action]:
    server = node_parameters(load_parameter_file(argument(context, 'params_file')), 'edge_server')
    if argument(context, 'endpoint'):
        server['endpoint'] = argument(context, 'endpoint')
    parameters = {'edge_server': server}
    apply_run_flags(
        parameters,
        use_sim_time=parse_flag(argument(context, 'use_sim_time'), 'use_sim_time'),
        autostart=enabled(context, 'autostart'),
    )
    params_file = write_launch_parameters(
        parameters, 'edge_server_parameters.yaml', argument(context, 'namespace')
    )
    return [respawning_lifecycle_node(context, 'edge_offload', 'edge_server', params_file)]
