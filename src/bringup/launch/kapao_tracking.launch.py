# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
r"""People following on the robot: camera -> offloaded keypoints -> depth -> tracker -> cmd_vel.

    ros2 launch bringup kapao_tracking.launch.py
    ros2 launch bringup kapao_tracking.launch.py source:=video uri:=asset:media/opencv/vtest.avi \
        start_edge_server:=true follow:=false
    ros2 launch bringup kapao_tracking.launch.py server_endpoint:=tcp://edge:5555 mode:=lopinfer
    ros2 launch bringup kapao_tracking.launch.py depth_source:=rgbd \
        depth_image_topic:=/camera/aligned_depth_to_color/image_raw \
        depth_camera_info_topic:=/camera/aligned_depth_to_color/camera_info odometry_topic:=/odom

Nodes: ``sensor_source`` (camera, video, image folder, bag or synthetic frames),
``offload_bridge`` (lifecycle; the offloading modes and the link monitor),
``people_detection`` (people tracked every frame, the front end offloaded as an ``Offload``
goal every few frames; one goal per frame with ``tracking: false``), ``tracking_monitor``
(status line and optional recording); with ``follow`` (the default) ``accumo_scheduler``
(AccuMO depth and odometry, when the depth source is ``accumo``), ``people_tracker`` (localizer and
tracker) and ``follower`` (``cmd_vel``); ``bag_recorder`` when a bag folder is set,
``edge_server`` (lifecycle; single-machine runs, the edge machine uses
``edge_server.launch.py``) and RViz on request.

The graph (its arguments, nodes and parameter rules) is defined once in
``people_following.graph``; this file turns it into launch actions, and the in-process runner
``kapao_tracking`` runs the same definition. Every parameter is in ``params_file``
(``config/kapao_tracking.yaml``). An argument left empty leaves the file's
value alone; a given one overrides the parameters it names. The parameters the nodes run
with are written once per launch into the launch's log folder. Lifecycle nodes configure
and activate themselves (``autostart``) at start and after every respawn.
"""

from __future__ import annotations

import os

import launch.logging
from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
from launch import Action, LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable
from launch_ros.actions import Node

from edge_offload.launch_helpers import (
    argument,
    respawning_lifecycle_node,
    write_launch_parameters,
)
from people_following.dds_profile import PROFILE_VARIABLE, large_frames_profile
from people_following.graph import ARGUMENTS, plan_graph


def generate_launch_description() -> LaunchDescription:
    """Declare the graph's arguments; the nodes are made once their values are known."""
    share = get_package_share_directory('bringup')
    defaults = {'params_file': os.path.join(share, 'config', 'kapao_tracking.yaml')}
    return LaunchDescription(
        [
            *(
                DeclareLaunchArgument(
                    graph_argument.name,
                    default_value=defaults.get(graph_argument.name, graph_argument.default),
                    description=graph_argument.description,
                )
                for graph_argument in ARGUMENTS
            ),
            # Lines of the nodes' logs come out whole and in order on the screen.
            SetEnvironmentVariable('RCUTILS_LOGGING_BUFFERED_STREAM', '1'),
            OpaqueFunction(function=_graph),
        ]
    )


def _graph(context: LaunchContext) -> list[Action]:
    """Return the nodes of the graph's plan for the given arguments."""
    plan = plan_graph(
        {
            graph_argument.name: argument(context, graph_argument.name)
            for graph_argument in ARGUMENTS
        }
    )
    params_file = write_launch_parameters(
        plan.parameters, 'kapao_tracking_parameters.yaml', plan.namespace
    )
    remappings = list(plan.remappings)
    actions: list[Action] = []
    profile = large_frames_profile(os.environ)
    if profile is not None:
        # Frames over shared memory whole (config/fastdds_large_frames.xml says why).
        actions.append(SetEnvironmentVariable(PROFILE_VARIABLE, profile))
    for node in plan.nodes:
        if node.lifecycle:
            actions.append(
                respawning_lifecycle_node(
                    context, node.package, node.name, params_file, remappings=remappings
                )
            )
        else:
            actions.append(
                Node(
                    package=node.package,
                    executable=node.name,
                    name=node.name,
                    namespace=plan.namespace,
                    parameters=[params_file],
                    remappings=remappings,
                    ros_arguments=['--log-level', plan.log_level],
                    output='screen',
                )
            )
    if plan.rviz and _rviz_installed():
        share = get_package_share_directory('bringup')
        actions.append(
            Node(
                package='rviz2',
                executable='rviz2',
                name='rviz2',
                namespace=plan.namespace,
                arguments=['-d', os.path.join(share, 'rviz', 'kapao_tracking.rviz')],
                output='log',
            )
        )
    return actions


def _rviz_installed() -> bool:
    """Return whether rviz2 is installed; say so once when it is not (the graph runs anyway)."""
    try:
        get_package_share_directory('rviz2')
    except PackageNotFoundError:
        launch.logging.get_logger('launch').warning(
            'rviz:=true, but rviz2 is not installed (e.g. apt install ros-$ROS_DISTRO-rviz2): '
            'the graph runs without it'
        )
        return False
    return True
