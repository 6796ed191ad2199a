# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The people-following graph, defined once: its arguments, its nodes, their parameters.

``bringup``'s ``kapao_tracking.launch.py`` declares :data:`ARGUMENTS` and starts the nodes
:func:`plan_graph` returns; the in-process runner ``kapao_tracking`` takes the same
arguments (as ``--name value`` or ``name:=value``) and starts the same plan. So a node, an
argument or a rule added here is in both.

The rule for parameters: the parameter file holds every parameter, and an argument
overrides the parameters it names only when it is given. An argument left at its empty
default leaves the file's value alone, so editing the YAML always takes effect. Plain
Python (no ``launch``, no ``rclpy``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

from edge_offload.parameter_files import (
    LIFECYCLE_NODES,
    apply_run_flags,
    load_parameter_file,
    node_parameters,
    parse_flag,
    run_arguments,
)

__all__ = [
    'ARGUMENTS',
    'NODES',
    'GraphArgument',
    'GraphNode',
    'GraphPlan',
    'bringup_config_dir',
    'default_params_file',
    'graph_parameters',
    'plan_graph',
]


@dataclass(frozen=True)
class GraphArgument:
    """A launch argument of the graph; ``''`` as a value means "not given"."""

    name: str
    default: str
    description: str
    choices: tuple[str, ...] = ()
    boolean: bool = False


@dataclass(frozen=True)
class GraphNode:
    """A node of the graph: its executable (named like the node) and its class."""

    name: str
    package: str
    # 'module:Class', composed in the runner's process unless ``own_process``.
    node_class: str
    # The runner starts it in a process of its own (``python -m module``), as ros2 launch
    # does every node: the edge server, as on an edge machine, and people detection, whose
    # Python work would otherwise share one GIL with every other node (measured on 2 cores:
    # that process sat at one core and kept up with half the frames).
    own_process: bool = False

    @property
    def lifecycle(self) -> bool:
        return self.name in LIFECYCLE_NODES

    @property
    def module(self) -> str:
        return self.node_class.partition(':')[0]


_EMPTY_MEANS_FILE = "; '' = the parameter file's value"
# params_file's default: the installed config/kapao_tracking.yaml (see default_params_file).
ARGUMENTS: tuple[GraphArgument, ...] = (
    GraphArgument('params_file', '', 'Parameter file of every node of the graph'),
    GraphArgument(
        'source',
        '',
        'Frame source: camera, video, images, bag or synthetic' + _EMPTY_MEANS_FILE,
        choices=('camera', 'video', 'images', 'bag', 'synthetic'),
    ),
    GraphArgument(
        'uri',
        '',
        "Camera device, video file, image folder or bag ('asset:NAME' = a fetched asset)"
        + _EMPTY_MEANS_FILE,
    ),
    GraphArgument(
        'mode',
        '',
        'Offloading mode of the people model: local, nnto, per_op, rrto, layer_split or '
        'lopinfer (the bridge runs locally while the server fails)' + _EMPTY_MEANS_FILE,
    ),
    GraphArgument(
        'model',
        '',
        'People model of the zoo: with tracking the front end that finds people to track '
        '(blazepose_lite_people, blazepose_people), without it the model run on every frame '
        '(also blazepose_fast_people; kapao_s/m/l are untrained, for latency experiments); '
        'the bridge and a local server load it too' + _EMPTY_MEANS_FILE,
    ),
    GraphArgument(
        'server_endpoint',
        '',
        'ZeroMQ endpoint of the edge server the bridge connects to (and a local server binds)'
        + _EMPTY_MEANS_FILE,
    ),
    GraphArgument('record_path', '', 'Video file for the annotated frames' + _EMPTY_MEANS_FILE),
    GraphArgument(
        'depth_source',
        '',
        "The tracker's depth: accumo (AccuMO scheduler, which also gives odometry) or rgbd "
        '(an RGB-D camera, with the robot odometry)' + _EMPTY_MEANS_FILE,
        choices=('accumo', 'rgbd'),
    ),
    GraphArgument(
        'record_bag',
        '',
        "New folder for a rosbag2 of the run's topics (metrics next to it as "
        '<folder>.metrics.json)' + _EMPTY_MEANS_FILE,
    ),
    GraphArgument(
        'rate_mode',
        '',
        "Pacing of sensor_source: realtime (the source's timeline), fixed (rate_hz), max (as "
        "fast as the source reads) or every_frame (each frame once the last one's result has "
        'come: every frame evaluated, none dropped; makes the source, people_detection, '
        'bag_recorder and tracking_monitor use reliable sensor QoS)' + _EMPTY_MEANS_FILE,
        choices=('realtime', 'fixed', 'max', 'every_frame'),
    ),
    # Topics the graph exchanges with the robot, remapped when given another name.
    GraphArgument('cmd_vel_topic', 'cmd_vel', 'Velocity commands of the follower'),
    GraphArgument(
        'odometry_topic',
        'odometry',
        "Odometry of the graph: AccuMO's output, or with depth_source rgbd the robot's own "
        '(e.g. /odom)',
    ),
    GraphArgument(
        'depth_image_topic',
        'depth_camera/image',
        'Depth image registered to the colour camera, 32FC1 m or 16UC1 mm (depth_source rgbd)',
    ),
    GraphArgument(
        'depth_camera_info_topic',
        'depth_camera/camera_info',
        'CameraInfo of that depth image (depth_source rgbd)',
    ),
    GraphArgument(
        'start_edge_server',
        'false',
        'Also start an edge server on this machine (single-machine runs)',
        boolean=True,
    ),
    GraphArgument(
        'follow',
        'true',
        'Start the AccuMO scheduler (depth source accumo), the tracker and the follower '
        '(cmd_vel); false: people detection only',
        boolean=True,
    ),
    GraphArgument('rviz', 'false', 'Start RViz with the tracking view', boolean=True),
    *(
        GraphArgument(name, default, description, boolean=name in ('use_sim_time', 'autostart'))
        for name, default, description in run_arguments('every node')
    ),
)
_TOPIC_ARGUMENTS = (
    'cmd_vel_topic',
    'odometry_topic',
    'depth_image_topic',
    'depth_camera_info_topic',
)

# Every node, in the order the runner starts them: the server before the bridge that
# connects to it, the consumers before the source, so the first frames have subscribers.
NODES: tuple[GraphNode, ...] = (
    GraphNode(
        'edge_server',
        'edge_offload',
        'edge_offload.edge_server_node:EdgeServerNode',
        own_process=True,
    ),
    GraphNode(
        'offload_bridge', 'edge_offload', 'edge_offload.offload_bridge_node:OffloadBridgeNode'
    ),
    GraphNode(
        'people_detection',
        'people_following',
        'people_following.people_detection_node:PeopleDetectionNode',
        own_process=True,
    ),
    GraphNode(
        'tracking_monitor',
        'people_following',
        'people_following.tracking_monitor_node:TrackingMonitorNode',
    ),
    GraphNode(
        'people_tracker',
        'people_following',
        'people_following.people_tracker_node:PeopleTrackerNode',
    ),
    GraphNode('accumo_scheduler', 'accumo_ros', 'accumo_ros.scheduler_node:AccumoSchedulerNode'),
    GraphNode('follower', 'people_following', 'people_following.follower_node:FollowerNode'),
    GraphNode(
        'bag_recorder', 'people_following', 'people_following.bag_recorder_node:BagRecorderNode'
    ),
    GraphNode(
        'sensor_source', 'people_following', 'people_following.sensor_source_node:SensorSourceNode'
    ),
)
NODE_NAMES = tuple(node.name for node in NODES)

# What each argument sets when given: (node, parameter).
_DIRECT_TARGETS = {
    'source': (('sensor_source', 'source'),),
    'uri': (('sensor_source', 'uri'),),
    'mode': (('offload_bridge', 'mode'),),
    'model': (('people_detection', 'model'),),
    # A local edge server listens where the bridge connects.
    'server_endpoint': (('offload_bridge', 'server_endpoint'), ('edge_server', 'endpoint')),
    'record_path': (('tracking_monitor', 'record_path'),),
    'depth_source': (('people_tracker', 'depth_source'),),
    'rate_mode': (('sensor_source', 'rate_mode'),),
}
# every_frame must lose no frame: these nodes then publish or subscribe the camera reliably.
RELIABLE_FOR_EVERY_FRAME = (
    'sensor_source',
    'people_detection',
    'bag_recorder',
    'tracking_monitor',
)


@dataclass(frozen=True)
class GraphPlan:
    """The nodes to start, the parameters they run with, and how they are named."""

    nodes: tuple[GraphNode, ...]
    parameters: dict[str, dict[str, Any]]
    remappings: tuple[tuple[str, str], ...]
    namespace: str
    log_level: str
    rviz: bool


def bringup_config_dir() -> Path:
    """Return bringup's installed ``config/`` folder (or the source tree's, uninstalled)."""
    try:
        share = Path(get_package_share_directory('bringup'))
    except PackageNotFoundError:
        share = Path(__file__).resolve().parents[2] / 'bringup'
    return share / 'config'


def default_params_file() -> Path:
    """Return bringup's ``config/kapao_tracking.yaml``: every node's parameters."""
    return bringup_config_dir() / 'kapao_tracking.yaml'


def graph_parameters(
    sections: Mapping[str, Mapping[str, Any]],
    values: Mapping[str, str],
    nodes: tuple[str, ...] = NODE_NAMES,
) -> dict[str, dict[str, Any]]:
    """Return each node's parameters: the file's, with the given arguments applied.

    ``values`` are argument values as strings, '' or absent = not given. A given ``model``
    is also added to the models the bridge builds (local fallback) and the edge server
    loads, so a people model named on the command line is served.
    """
    parameters = {node: node_parameters(sections, node) for node in nodes}

    def put(node: str, name: str, value: Any) -> None:
        if node in parameters:
            parameters[node][name] = value

    for argument, targets in _DIRECT_TARGETS.items():
        value = values.get(argument, '')
        if value != '':
            for node, name in targets:
                put(node, name, value)
    model = values.get('model', '')
    if model:
        for node in ('offload_bridge', 'edge_server'):
            if node in parameters:
                models = list(parameters[node].get('models', []))
                if model not in models:
                    parameters[node]['models'] = [model, *models]
    record_bag = values.get('record_bag', '')
    if record_bag:
        put('bag_recorder', 'output_dir', record_bag)
        put('bag_recorder', 'metrics_file', f'{record_bag}.metrics.json')
    apply_run_flags(
        parameters,
        use_sim_time=parse_flag(values.get('use_sim_time', ''), 'use_sim_time'),
        autostart=parse_flag(values.get('autostart', ''), 'autostart'),
    )
    if parameters.get('sensor_source', {}).get('rate_mode') == 'every_frame':
        for node in RELIABLE_FOR_EVERY_FRAME:
            put(node, 'reliable_sensor_qos', True)
    return parameters


def _argument_values(given: Mapping[str, str]) -> dict[str, str]:
    """Return every argument's value: the given ones (checked), the defaults for the rest."""
    known = {argument.name: argument for argument in ARGUMENTS}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ValueError(f'unknown argument(s) {unknown}; the graph takes {sorted(known)}')
    values = {name: given.get(name, argument.default) for name, argument in known.items()}
    for name, argument in known.items():
        if argument.choices and values[name] not in ('', *argument.choices):
            raise ValueError(f'argument {name} is {values[name]!r}; one of {argument.choices}')
        if argument.boolean:
            parse_flag(values[name], name)  # raises on anything but true/false/1/0/''
    return values


def plan_graph(given: Mapping[str, str]) -> GraphPlan:
    """Return the nodes ``given`` arguments start and their parameters.

    Raises ParameterFileError for an unreadable parameter file and ValueError for an
    unknown argument or a bad value.
    """
    values = _argument_values(given)
    sections = load_parameter_file(values['params_file'] or default_params_file())
    parameters = graph_parameters(sections, values)
    follow = parse_flag(values['follow'], 'follow') is True
    wanted = {
        'sensor_source': True,
        'offload_bridge': True,
        'people_detection': True,
        'tracking_monitor': True,
        'accumo_scheduler': follow and parameters['people_tracker']['depth_source'] == 'accumo',
        'people_tracker': follow,
        'follower': follow,
        'bag_recorder': bool(parameters['bag_recorder'].get('output_dir')),
        'edge_server': parse_flag(values['start_edge_server'], 'start_edge_server') is True,
    }
    if wanted['bag_recorder']:
        # The recorder subscribes to image_raw too: the source waits for it and people
        # detection, so the bag holds the whole run.
        parameters['sensor_source']['wait_for_subscribers'] = 2
    nodes = tuple(node for node in NODES if wanted[node.name])
    defaults = {argument.name: argument.default for argument in ARGUMENTS}
    remappings = tuple(
        (defaults[name], values[name])
        for name in _TOPIC_ARGUMENTS
        if values[name] not in ('', defaults[name])
    )
    return GraphPlan(
        nodes=nodes,
        parameters={node.name: parameters[node.name] for node in nodes},
        remappings=remappings,
        namespace=values['namespace'],
        log_level=values['log_level'],
        rviz=parse_flag(values['rviz'], 'rviz') is True,
    )
