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

Every parameter is in ``params_file`` (``config/kapao_tracking.yaml``), the file the
in-process runner ``kapao_tracking`` reads too. An argument left empty leaves the file's
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

from bringup.dds_profile import PROFILE_VARIABLE, large_frames_profile
from bringup.graph_parameters import (
    LIFECYCLE_NODES,
    GraphArguments,
    graph_parameters,
    load_parameter_file,
    parse_flag,
)
from bringup.launch_helpers import (
    argument,
    common_arguments,
    enabled,
    respawning_lifecycle_node,
    write_launch_parameters,
)

# Arguments that override parameters when given; '' leaves the parameter file's value.
_PARAMETER_ARGUMENTS = (
    ('source', 'Frame source: camera, video, images, bag or synthetic'),
    ('uri', "Camera device, video file, image folder or bag ('asset:NAME' = a fetched asset)"),
    (
        'mode',
        'Offloading mode of the people model: local, nnto, per_op, rrto, layer_split or '
        'lopinfer (the bridge runs locally while the server fails)',
    ),
    (
        'model',
        'People model of the zoo: with tracking the front end that finds people to track '
        '(blazepose_lite_people, blazepose_people), without it the model run on every frame '
        '(also blazepose_fast_people; kapao_s/m/l are untrained, for latency experiments); '
        'the bridge and a local server load it too',
    ),
    (
        'server_endpoint',
        'ZeroMQ endpoint of the edge server the bridge connects to (and a local server binds)',
    ),
    ('record_path', 'Video file for the annotated frames'),
    (
        'depth_source',
        "The tracker's depth: accumo (AccuMO scheduler, which also gives odometry) or rgbd "
        '(an RGB-D camera, with the robot odometry)',
    ),
    (
        'record_bag',
        "New folder for a rosbag2 of the run's topics (metrics next to it as "
        '<folder>.metrics.json)',
    ),
)
# The rate_mode argument: sensor_source's pacing; '' leaves the file's value, like the above.
_RATE_MODE_DESCRIPTION = (
    "Pacing of sensor_source: realtime (the source's timeline), fixed (rate_hz), max (as fast "
    "as the source reads) or every_frame (each frame once the last one's result has come: "
    'every frame evaluated, none dropped; makes the source, people_detection, bag_recorder and '
    "tracking_monitor use reliable sensor QoS); '' = the parameter file's value"
)
# every_frame must lose no frame: these nodes then publish or subscribe the camera reliably.
_RELIABLE_FOR_EVERY_FRAME = (
    'sensor_source',
    'people_detection',
    'bag_recorder',
    'tracking_monitor',
)
# Topics the graph exchanges with the robot, remapped when given another name.
_TOPIC_ARGUMENTS = (
    ('cmd_vel_topic', 'cmd_vel', 'Velocity commands of the follower'),
    (
        'odometry_topic',
        'odometry',
        "Odometry of the graph: AccuMO's output, or with depth_source rgbd the robot's own "
        '(e.g. /odom)',
    ),
    (
        'depth_image_topic',
        'depth_camera/image',
        'Depth image registered to the colour camera, 32FC1 m or 16UC1 mm (depth_source rgbd)',
    ),
    (
        'depth_camera_info_topic',
        'depth_camera/camera_info',
        'CameraInfo of that depth image (depth_source rgbd)',
    ),
)
# Nodes of the graph outside bringup.
_PACKAGES = {
    'offload_bridge': 'edge_offload',
    'edge_server': 'edge_offload',
    'accumo_scheduler': 'accumo_ros',
}


def generate_launch_description() -> LaunchDescription:
    """Declare the arguments; the nodes are made once their values are known."""
    share = get_package_share_directory('bringup')
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                'params_file',
                default_value=os.path.join(share, 'config', 'kapao_tracking.yaml'),
                description='Parameter file of every node of the graph',
            ),
            *(
                DeclareLaunchArgument(
                    name,
                    default_value='',
                    description=f"{description}; '' = the parameter file's value",
                )
                for name, description in _PARAMETER_ARGUMENTS
            ),
            DeclareLaunchArgument(
                'rate_mode', default_value='', description=_RATE_MODE_DESCRIPTION
            ),
            *(
                DeclareLaunchArgument(name, default_value=default, description=description)
                for name, default, description in _TOPIC_ARGUMENTS
            ),
            DeclareLaunchArgument(
                'start_edge_server',
                default_value='false',
                description='Also start an edge server on this machine (single-machine runs)',
            ),
            DeclareLaunchArgument(
                'follow',
                default_value='true',
                description='Start the AccuMO scheduler (depth source accumo), the tracker and '
                'the follower (cmd_vel); false: people detection only',
            ),
            DeclareLaunchArgument(
                'rviz', default_value='false', description='Start RViz with the tracking view'
            ),
            *common_arguments('every node'),
            # Lines of the nodes' logs come out whole and in order on the screen.
            SetEnvironmentVariable('RCUTILS_LOGGING_BUFFERED_STREAM', '1'),
            OpaqueFunction(function=_graph),
        ]
    )


def _graph(context: LaunchContext) -> list[Action]:
    """Return the graph's nodes, with the parameters the given arguments leave or set."""
    graph_arguments = GraphArguments(
        **{name: argument(context, name) for name, _ in _PARAMETER_ARGUMENTS},
        use_sim_time=parse_flag(argument(context, 'use_sim_time'), 'use_sim_time'),
        autostart=enabled(context, 'autostart'),
    )
    sections = load_parameter_file(argument(context, 'params_file'))
    parameters = graph_parameters(sections, graph_arguments)
    if argument(context, 'rate_mode'):
        parameters['sensor_source']['rate_mode'] = argument(context, 'rate_mode')
    if parameters['sensor_source'].get('rate_mode') == 'every_frame':
        for node in _RELIABLE_FOR_EVERY_FRAME:
            parameters[node]['reliable_sensor_qos'] = True
    follow = enabled(context, 'follow')
    uses_accumo = parameters['people_tracker']['depth_source'] == 'accumo'
    wanted = {
        'sensor_source': True,
        'offload_bridge': True,
        'people_detection': True,
        'tracking_monitor': True,
        'accumo_scheduler': follow and uses_accumo,
        'people_tracker': follow,
        'follower': follow,
        'bag_recorder': bool(parameters['bag_recorder']['output_dir']),
        'edge_server': enabled(context, 'start_edge_server'),
    }
    namespace = argument(context, 'namespace')
    params_file = write_launch_parameters(
        {node: values for node, values in parameters.items() if wanted[node]},
        'kapao_tracking_parameters.yaml',
        namespace,
    )
    remappings = [
        (default, argument(context, name))
        for name, default, _ in _TOPIC_ARGUMENTS
        if argument(context, name) != default
    ]
    common = {
        'namespace': namespace,
        'parameters': [params_file],
        'remappings': remappings,
        'ros_arguments': ['--log-level', argument(context, 'log_level')],
        'output': 'screen',
    }
    actions: list[Action] = []
    profile = large_frames_profile(os.environ)
    if profile is not None:
        # Frames over shared memory whole (config/fastdds_large_frames.xml says why).
        actions.append(SetEnvironmentVariable(PROFILE_VARIABLE, profile))
    for node, wanted_node in wanted.items():
        if not wanted_node:
            continue
        package = _PACKAGES.get(node, 'bringup')
        if node in LIFECYCLE_NODES:
            actions.append(
                respawning_lifecycle_node(
                    context, package, node, params_file, remappings=remappings
                )
            )
        else:
            actions.append(Node(package=package, executable=node, name=node, **common))
    if enabled(context, 'rviz') and _rviz_installed():
        share = get_package_share_directory('bringup')
        actions.append(
            Node(
                package='rviz2',
                executable='rviz2',
                name='rviz2',
                namespace=namespace,
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
