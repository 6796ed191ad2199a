# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Start the offload bridge (robot) and, optionally, an edge server on the same machine.

    ros2 launch bringup offload_substrate.launch.py start_edge_server:=true
    ros2 launch bringup offload_substrate.launch.py server_endpoint:=tcp://edge:5555

Both are lifecycle nodes that configure and activate themselves at start and after every
respawn. Applications send ``Offload`` goals to the bridge's ``offload`` action. Keys come
from ``edge_offload_keygen``. An argument left empty leaves the parameter file's value.
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
    """Declare the arguments; the nodes are made once their values are known."""
    config_dir = os.path.join(get_package_share_directory('bringup'), 'config')
    return LaunchDescription(
        [
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
                default_value='',
                description='Offloading mode of the bridge (local, nnto, per_op, rrto, '
                "layer_split, lopinfer); '' = the parameter file's value",
            ),
            DeclareLaunchArgument(
                'server_endpoint',
                default_value='',
                description='Edge server endpoint the bridge connects to (and a local server '
                "binds); '' = the parameter files' values",
            ),
            *common_arguments('both nodes'),
            SetEnvironmentVariable('RCUTILS_LOGGING_BUFFERED_STREAM', '1'),
            OpaqueFunction(function=_nodes),
        ]
    )


def _nodes(context: LaunchContext) -> list[Action]:
    parameters = {
        'offload_bridge': node_parameters(
            load_parameter_file(argument(context, 'bridge_params_file')), 'offload_bridge'
        )
    }
    if enabled(context, 'start_edge_server'):
        parameters['edge_server'] = node_parameters(
            load_parameter_file(argument(context, 'server_params_file')), 'edge_server'
        )
    if argument(context, 'mode'):
        parameters['offload_bridge']['mode'] = argument(context, 'mode')
    if argument(context, 'server_endpoint'):
        # A local edge server listens where the bridge connects.
        parameters['offload_bridge']['server_endpoint'] = argument(context, 'server_endpoint')
        if 'edge_server' in parameters:
            parameters['edge_server']['endpoint'] = argument(context, 'server_endpoint')
    apply_run_flags(
        parameters,
        use_sim_time=parse_flag(argument(context, 'use_sim_time'), 'use_sim_time'),
        autostart=enabled(context, 'autostart'),
    )
    params_file = write_launch_parameters(
        parameters, 'offload_substrate_parameters.yaml', argument(context, 'namespace')
    )
    return [
        respawning_lifecycle_node(context, 'edge_offload', node, params_file)
        for node in parameters
    ]
