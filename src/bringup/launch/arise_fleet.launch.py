# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""A fleet of emulated robots served by ARISE edge servers, on this machine.

    ros2 launch bringup arise_fleet.launch.py                       # 4 robots, 1 server
    ros2 launch bringup arise_fleet.launch.py robots:=8 servers:=2 sla:=0.02
    ros2 launch bringup arise_fleet.launch.py engine:=ray servers:=4 # the servers on Ray
    ros2 topic echo /diagnostics                                    # the fleet view

With ``engine:=launch`` (the default) each server is the ``edge_server`` lifecycle node
serving the ``arise`` mode (parameters in ``arise_fleet.yaml``; it respawns and autostarts
when killed). With ``engine:=ray`` one ``arise_fleet_node`` lifecycle node (it respawns and
autostarts too) runs the servers as Ray actors, with the same parameters, behind a
load-balancing front door on ``port`` (server i on ``port + 1 + i``); the robots ask the
front door where to go and keep the servers' list as a fallback. Each robot is an
``arise_emulated_robot`` process: it runs a camera clock, offloads the frames its plan names
over the real, authenticated protocol, and emulates local tracking (so one machine holds
tens of them). Robot ``i`` lists the servers starting from server ``i mod servers``, so the
fleet starts spread over them and a robot whose server dies joins the next (running
locally meanwhile). Robots start ``start_spacing_s`` apart, as robots arriving.

The servers publish the fleet on ``/diagnostics``: one status for the fleet (admitted,
waiting, evictions, scheduler run time, batch size, idle share) and one per robot (SLA,
interval, batch size, estimated drop); on Ray the fleet node publishes them, with the
front door's view of every server's load. Keys: a server pair and one pair per robot in
``keys_dir``, created when missing, every robot authorised.
"""

from __future__ import annotations

import os
from typing import Any

from ament_index_python.packages import get_package_share_directory
from launch import Action, LaunchContext, LaunchDescription
from launch.actions import (
    DeclareLaunchArgument,
    ExecuteProcess,
    OpaqueFunction,
    SetEnvironmentVariable,
    TimerAction,
)
from launch_ros.substitutions import ExecutableInPackage

from edge_offload.keys import ensure_keys
from edge_offload.launch_helpers import (
    argument,
    common_arguments,
    enabled,
    respawning_lifecycle_node,
    write_launch_parameters,
)
from edge_offload.parameter_files import load_parameter_file, node_parameters, parse_flag

# Bounds that keep a typo from starting a thousand processes.
_MAX_ROBOTS = 64
_MAX_SERVERS = {'launch': 2, 'ray': 8}
ENGINES = tuple(_MAX_SERVERS)


def generate_launch_description() -> LaunchDescription:
    """Declare the arguments; servers and robots are made once their values are known."""
    share = get_package_share_directory('bringup')
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                'params_file',
                default_value=os.path.join(share, 'config', 'arise_fleet.yaml'),
                description='Parameter file of the edge servers (arise.* options, limits)',
            ),
            DeclareLaunchArgument(
                'engine',
                default_value='launch',
                choices=list(ENGINES),
                description="Who runs the servers: 'launch' (one edge_server node each) or "
                "'ray' (Ray actors under one arise_fleet_node, behind a front door)",
            ),
            DeclareLaunchArgument(
                'robots', default_value='4', description=f'Emulated robots (1..{_MAX_ROBOTS})'
            ),
            DeclareLaunchArgument(
                'servers',
                default_value='1',
                description=f'Edge servers (1..{_MAX_SERVERS["launch"]}; with engine:=ray '
                f'1..{_MAX_SERVERS["ray"]}); robots fail over between them',
            ),
            DeclareLaunchArgument(
                'host',
                default_value='127.0.0.1',
                description='Address the servers bind and the robots connect to',
            ),
            DeclareLaunchArgument(
                'port',
                default_value='5600',
                description='Port of server 0, server i uses +i (engine:=ray: of the front '
                'door, server i uses +1+i)',
            ),
            DeclareLaunchArgument(
                'keys_dir',
                default_value='~/.local/share/edge_offload/keys/arise_fleet',
                description='CURVE keys of the servers and robots (created when missing)',
            ),
            DeclareLaunchArgument(
                'sla', default_value='0.04', description='Every robot’s accuracy-drop SLA'
            ),
            DeclareLaunchArgument('fps', default_value='30', description='Robot camera rate'),
            DeclareLaunchArgument(
                'drop_rates',
                default_value='0.003,0.004,0.005',
                description='Scene drop rates per frame of stride, comma-separated, cycled '
                'over the robots (emulated tracking accuracy)',
            ),
            DeclareLaunchArgument(
                'duration_s',
                default_value='0',
                description='How long each robot runs (0 = until the launch stops)',
            ),
            DeclareLaunchArgument(
                'start_spacing_s',
                default_value='0.5',
                description='Seconds between one robot’s start and the next one’s',
            ),
            *common_arguments('the servers'),
            SetEnvironmentVariable('RCUTILS_LOGGING_BUFFERED_STREAM', '1'),
            OpaqueFunction(function=_fleet),
        ]
    )


def _count(context: LaunchContext, name: str, most: int) -> int:
    text = argument(context, name)
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f'argument {name} is {text!r}; it must be a whole number') from None
    if not 1 <= value <= most:
        raise ValueError(f'argument {name} is {value}; it must be 1..{most}')
    return value


def _number(context: LaunchContext, name: str, low: float) -> float:
    text = argument(context, name)
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f'argument {name} is {text!r}; it must be a number') from None
    if not value >= low:
        raise ValueError(f'argument {name} is {value}; it must be at least {low}')
    return value


def _fleet(context: LaunchContext) -> list[Action]:
    engine = argument(context, 'engine')
    if engine not in ENGINES:
        raise ValueError(f'argument engine is {engine!r}; it must be one of {list(ENGINES)}')
    robots = _count(context, 'robots', _MAX_ROBOTS)
    servers = _count(context, 'servers', _MAX_SERVERS[engine])
    port = _count(context, 'port', 65535 - 1 - _MAX_SERVERS[engine])
    sla = _number(context, 'sla', 0.0)
    fps = _number(context, 'fps', 0.1)
    duration = _number(context, 'duration_s', 0.0)
    spacing = _number(context, 'start_spacing_s', 0.0)
    rates = [float(rate) for rate in argument(context, 'drop_rates').split(',') if rate.strip()]
    if not rates or any(not 0.0 <= rate <= 1.0 for rate in rates):
        raise ValueError('argument drop_rates must list rates in [0, 1]')
    host = argument(context, 'host')
    names = [f'robot_{index}' for index in range(robots)]
    keys = ensure_keys(argument(context, 'keys_dir'), names)

    server = node_parameters(load_parameter_file(argument(context, 'params_file')), 'edge_server')
    server.update(secret_key_file=keys['server_secret'], authorized_clients_dir=keys['authorized'])
    use_sim_time = parse_flag(argument(context, 'use_sim_time'), 'use_sim_time')
    if engine == 'ray':
        # The front door on port, server i on port + 1 + i (arise_ros.ray_fleet).
        endpoints = [f'tcp://{host}:{port + 1 + index}' for index in range(servers)]
        fleet_endpoint = f'tcp://{host}:{port}'
        actions = [_ray_fleet_node(context, servers, port, use_sim_time, server)]
    else:
        endpoints = [f'tcp://{host}:{port + index}' for index in range(servers)]
        fleet_endpoint = ''
        actions = _edge_server_nodes(context, endpoints, use_sim_time, server)
    robot_executable = ExecutableInPackage('arise_emulated_robot', 'arise_ros')
    for index, name in enumerate(names):
        first = index % servers
        ordered = endpoints[first:] + endpoints[:first]
        robot = ExecuteProcess(
            name=name,
            cmd=[
                robot_executable,
                *('--name', name, '--endpoint', ','.join(ordered)),
                *(('--fleet-endpoint', fleet_endpoint) if fleet_endpoint else ()),
                *('--secret-key-file', keys[f'{name}_secret']),
                *('--server-public-key-file', keys['server_public']),
                *('--sla', str(sla), '--fps', str(fps), '--rate', str(rates[index % len(rates)])),
                *('--duration-s', str(duration), '--log-level', argument(context, 'log_level')),
            ],
            output='screen',
            # Ctrl-C reaches the robot from the terminal and from launch: it leaves its
            # server and prints its summary.
            sigterm_timeout='3',
        )
        # The first robot waits for the servers to measure their latency profile (on Ray
        # it asks the front door until a server has reported, running locally meanwhile).
        actions.append(TimerAction(period=1.0 + index * spacing, actions=[robot]))
    return actions


def _edge_server_nodes(
    context: LaunchContext,
    endpoints: list[str],
    use_sim_time: bool | None,
    server: dict[str, Any],
) -> list[Action]:
    """Return one respawning ``edge_server`` lifecycle node per endpoint."""
    parameters = {}
    for index, endpoint in enumerate(endpoints):
        values = dict(server, endpoint=endpoint, server_id=f'edge_server_{index}')
        values['autostart'] = enabled(context, 'autostart')
        if use_sim_time is not None:
            values['use_sim_time'] = use_sim_time
        parameters[f'edge_server_{index}'] = values
    params_file = write_launch_parameters(
        parameters, 'arise_fleet_parameters.yaml', argument(context, 'namespace')
    )
    return [
        respawning_lifecycle_node(
            context, 'edge_offload', f'edge_server_{index}', params_file, executable='edge_server'
        )
        for index in range(len(endpoints))
    ]


def _ray_fleet_node(
    context: LaunchContext,
    servers: int,
    port: int,
    use_sim_time: bool | None,
    server: dict[str, Any],
) -> Action:
    """Return the respawning ``arise_fleet`` lifecycle node that runs the servers on Ray."""
    namespace = argument(context, 'namespace')
    # The servers' parameters as the edge_server nodes would get them (keys included), in
    # a file of their own next to the node's: data for the node, not a node's section.
    server_params_file = write_launch_parameters(
        {'edge_server': server}, 'arise_fleet_server_parameters.yaml', ''
    )
    values: dict[str, Any] = {
        'server_params_file': str(server_params_file),
        'servers': servers,
        'host': argument(context, 'host'),
        'port': port,
        'keys_dir': argument(context, 'keys_dir'),
        'autostart': enabled(context, 'autostart'),
    }
    if 'diagnostics_period_s' in server:
        # The servers' diagnostics period is the fleet view's.
        values['diagnostics_period_s'] = float(server['diagnostics_period_s'])
    if use_sim_time is not None:
        values['use_sim_time'] = use_sim_time
    params_file = write_launch_parameters(
        {'arise_fleet': values}, 'arise_fleet_parameters.yaml', namespace
    )
    return respawning_lifecycle_node(
        context, 'arise_ros', 'arise_fleet', params_file, executable='arise_fleet_node'
    )
