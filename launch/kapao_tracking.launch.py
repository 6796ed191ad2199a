# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
r"""People following on the robot: camera -> offloaded keypoints -> depth -> tracker -> cmd_vel.

    ros2 launch bringup kapao_tracking.launch.py
    ros2 launch bringup kapao_tracking.launch.py source:=video start_edge_server:=true \
        uri:=/usr/share/doc/opencv-doc/examples/data/vtest.avi follow:=false
    ros2 launch bringup kapao_tracking.launch.py mode:=lopinfer rviz:=true
    ros2 launch bringup kapao_tracking.launch.py depth_source:=rgbd record_bag:=~/runs/run1

Nodes: ``sensor_source`` (camera, video, image folder, bag or synthetic frames),
``offload_bridge`` (lifecycle; the offloading modes and the link monitor),
``people_detection`` (one ``Offload`` goal per frame), ``tracking_monitor`` (status line
and optional recording); with ``follow`` (the default) ``accumo_scheduler`` (AccuMO depth
and odometry, when ``depth_source`` is ``accumo``), ``people_tracker`` (localizer and
tracker) and ``follower`` (``cmd_vel``); optionally ``bag_recorder`` (``record_bag``),
``edge_server`` (lifecycle; for single-machine runs; the edge machine uses
``edge_server.launch.py``) and RViz. Every node reads its parameters from ``params_file``
(``config/kapao_tracking.yaml``), the same file the in-process runner ``kapao_tracking``
reads; the arguments below override single parameters.
"""

from __future__ import annotations

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PythonExpression
from launch_ros.actions import LifecycleNode, Node
from launch_ros.parameter_descriptions import ParameterValue

from bringup.launch_helpers import configure_then_activate


def generate_launch_description() -> LaunchDescription:
    """Declare the arguments and the nodes of the people-tracking graph."""
    share = get_package_share_directory('bringup')
    arguments = [
        DeclareLaunchArgument(
            'params_file',
            default_value=os.path.join(share, 'config', 'kapao_tracking.yaml'),
            description='Parameter file of every node of the graph',
        ),
        DeclareLaunchArgument(
            'source',
            default_value='camera',
            description='Frame source: camera, video, images, bag or synthetic',
        ),
        DeclareLaunchArgument(
            'uri',
            default_value='/dev/video0',
            description='Camera device, video file, image folder or bag of the source',
        ),
        DeclareLaunchArgument(
            'mode',
            default_value='nnto',
            description='Offloading mode of the people model: local, nnto, per_op, rrto, '
            'layer_split or lopinfer (the bridge falls back to local when the server fails)',
        ),
        DeclareLaunchArgument(
            'model',
            default_value='blazepose_people',
            description='People model of the zoo (blazepose_people, blazepose_hog_people, '
            'kapao_s/m/l: untrained, for latency experiments)',
        ),
        DeclareLaunchArgument(
            'server_endpoint',
            default_value='tcp://127.0.0.1:5555',
            description='ZeroMQ endpoint of the edge server the bridge connects to',
        ),
        DeclareLaunchArgument(
            'start_edge_server',
            default_value='false',
            description='Also start an edge server on this machine (single-machine runs)',
        ),
        DeclareLaunchArgument(
            'record_path',
            default_value='',
            description="Video file for the annotated frames; '' = no recording",
        ),
        DeclareLaunchArgument(
            'follow',
            default_value='true',
            description='Start the tracker and the follower (cmd_vel); false: detection only',
        ),
        DeclareLaunchArgument(
            'depth_source',
            default_value='accumo',
            description='Depth for the tracker: accumo (AccuMO scheduler, which also gives '
            'odometry) or rgbd (depth_camera/image and the robot odometry on odometry)',
        ),
        DeclareLaunchArgument(
            'record_bag',
            default_value='',
            description="New folder for a rosbag2 of the run's topics (bag_recorder, metrics "
            "next to it as <folder>.metrics.json); '' = no bag",
        ),
        DeclareLaunchArgument(
            'rviz', default_value='false', description='Start RViz with the tracking view'
        ),
        DeclareLaunchArgument(
            'log_level', default_value='info', description='Log level of every node'
        ),
    ]
    params_file = LaunchConfiguration('params_file')
    model = LaunchConfiguration('model')
    log_arguments = ['--ros-args', '--log-level', LaunchConfiguration('log_level')]
    buffered = {'RCUTILS_LOGGING_BUFFERED_STREAM': '1'}
    source = Node(
        package='bringup',
        executable='sensor_source',
        name='sensor_source',
        parameters=[
            params_file,
            {'source': LaunchConfiguration('source'), 'uri': LaunchConfiguration('uri')},
        ],
        arguments=log_arguments,
        output='screen',
        additional_env=buffered,
    )
    bridge = LifecycleNode(
        package='edge_offload',
        executable='offload_bridge',
        name='offload_bridge',
        namespace='',
        parameters=[
            params_file,
            {
                'mode': LaunchConfiguration('mode'),
                'server_endpoint': LaunchConfiguration('server_endpoint'),
                # Evaluated as YAML: the models the graph runs (the people model and AccuMO's
                # depth and odometry), built for local fallback.
                'models': ParameterValue(
                    ['[', model, ', accumo_depth, accumo_odometry, accumo_depth_odometry]']
                ),
            },
        ],
        arguments=log_arguments,
        output='screen',
        respawn=True,
        additional_env=buffered,
    )
    detection = Node(
        package='bringup',
        executable='people_detection',
        name='people_detection',
        parameters=[params_file, {'model': model}],
        arguments=log_arguments,
        output='screen',
        additional_env=buffered,
    )
    monitor = Node(
        package='bringup',
        executable='tracking_monitor',
        name='tracking_monitor',
        parameters=[params_file, {'record_path': LaunchConfiguration('record_path')}],
        arguments=log_arguments,
        output='screen',
        additional_env=buffered,
    )
    follow = LaunchConfiguration('follow')
    depth_source = LaunchConfiguration('depth_source')
    record_bag = LaunchConfiguration('record_bag')
    scheduler = Node(
        package='accumo_ros',
        executable='accumo_scheduler',
        name='accumo_scheduler',
        parameters=[params_file],
        arguments=log_arguments,
        output='screen',
        additional_env=buffered,
        condition=IfCondition(
            PythonExpression(["'", follow, "' == 'true' and '", depth_source, "' == 'accumo'"])
        ),
    )
    tracker = Node(
        package='bringup',
        executable='people_tracker',
        name='people_tracker',
        parameters=[params_file, {'depth_source': depth_source}],
        arguments=log_arguments,
        output='screen',
        additional_env=buffered,
        condition=IfCondition(follow),
    )
    follower = Node(
        package='bringup',
        executable='follower',
        name='follower',
        parameters=[params_file],
        arguments=log_arguments,
        output='screen',
        additional_env=buffered,
        condition=IfCondition(follow),
    )
    recorder = Node(
        package='bringup',
        executable='bag_recorder',
        name='bag_recorder',
        parameters=[
            params_file,
            {'output_dir': record_bag, 'metrics_file': [record_bag, '.metrics.json']},
        ],
        arguments=log_arguments,
        output='screen',
        additional_env=buffered,
        condition=IfCondition(PythonExpression(["'", record_bag, "' != ''"])),
    )
    start_server = IfCondition(LaunchConfiguration('start_edge_server'))
    server = LifecycleNode(
        package='edge_offload',
        executable='edge_server',
        name='edge_server',
        namespace='',
        parameters=[params_file],
        arguments=log_arguments,
        output='screen',
        respawn=True,
        condition=start_server,
        additional_env=buffered,
    )
    rviz = Node(
        package='rviz2',
        executable='rviz2',
        name='rviz2',
        arguments=['-d', os.path.join(share, 'rviz', 'kapao_tracking.rviz')],
        condition=IfCondition(LaunchConfiguration('rviz')),
        output='log',
    )
    return LaunchDescription(
        [
            *arguments,
            server,
            bridge,
            source,
            detection,
            monitor,
            scheduler,
            tracker,
            follower,
            recorder,
            rviz,
            *configure_then_activate(server, condition=start_server),
            *configure_then_activate(bridge),
        ]
    )
