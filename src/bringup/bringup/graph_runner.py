# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Run the people-tracking graph's robot nodes: ``kapao_tracking``.

The same nodes as ``launch/kapao_tracking.launch.py``, with the same parameter file: people
detection (the heavy one: the tracking thread) and the optional edge server each in a
process of their own, as the launch file starts them, the others composed in this process
on one executor thread (their callbacks do not block; the bridge's goals run on its
workers). Frames go over Fast DDS's shared memory whole (``dds_profile``). It is how the
graph runs where ``ros2 launch`` is not installed, and the README's main job:

    kapao_tracking --source video --uri vtest.avi --start-edge-server --record out.mp4
    kapao_tracking --source bag --uri run1 --follow --record-bag replay1

``--follow`` adds the following chain (AccuMO scheduler with ``--depth-source accumo``,
people tracker, follower), as the launch file's ``follow:=true`` does; ``--record-bag``
writes the run's topics to a new bag with its metrics next to it (``<bag>.metrics.json``,
which ``bag_evaluate <bag> --check`` reproduces).

The options mirror the launch arguments. ``--keys-dir`` makes CURVE keys for the bridge and
the local edge server when they are missing (single-machine runs). With a finite source
(video, image folder, bag, ``--max-frames``) the runner waits for the last results after
the source ends, prints a summary and exits 0; Ctrl-C stops it at any time.

``--rate-mode every_frame`` evaluates every frame offline as fast as the graph goes: the
source publishes the next frame when the last one's result has come (lossless: it implies
``--reliable-sensor-qos``, also when the parameter file sets the mode).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import rclpy
from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
from rclpy.exceptions import ParameterException
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from rclpy.node import Node

from accumo_ros.scheduler_node import AccumoSchedulerNode
from bringup.bag_recorder_node import BagRecorderNode
from bringup.camera_info_file import CameraInfoError
from bringup.dds_profile import PROFILE_VARIABLE, large_frames_profile
from bringup.follower_node import FollowerNode
from bringup.graph_parameters import (
    GraphArguments,
    ParameterFileError,
    graph_parameters,
    load_parameter_file,
    write_parameter_file,
)
from bringup.people_tracker_node import PeopleTrackerNode
from bringup.sensor_source_node import RATE_MODES, SensorSourceNode
from bringup.sensor_sources import SourceError, resolve_uri
from bringup.tracking_monitor_node import Summary, TrackingMonitorNode
from edge_offload.keys import ensure_loopback_keys
from edge_offload.offload_bridge_node import OffloadBridgeNode

DRAIN_TIMEOUT_S = 30.0
PROCESS_STOP_S = 5.0  # the edge server and people detection stop within this
EDGE_SERVER_START_S = 120.0
# After the source ends, results have stopped when none came for this long.
_RESULTS_QUIET_S = 2.0
# Nodes of the graph that subscribe image_raw or camera_info with reliable_sensor_qos.
RELIABLE_CONSUMERS = ('people_detection', 'bag_recorder', 'tracking_monitor')


def default_params_file() -> Path:
    """Return the installed ``config/kapao_tracking.yaml`` (or the source tree's copy)."""
    try:
        share = Path(get_package_share_directory('bringup'))
        return share / 'config' / 'kapao_tracking.yaml'
    except PackageNotFoundError:
        return Path(__file__).resolve().parents[1] / 'config' / 'kapao_tracking.yaml'


def build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser (the launch file's arguments, plus runner options)."""
    parser = argparse.ArgumentParser(
        prog='kapao_tracking',
        description='Run the people-tracking graph (source, bridge, detection, monitor, '
        'optionally an edge server in a process of its own).',
    )
    parser.add_argument(
        '--params-file', type=Path, default=None, help='parameter file of every node '
        '(default: the installed config/kapao_tracking.yaml)'
    )  # fmt: skip
    parser.add_argument(
        '--source', choices=('camera', 'video', 'images', 'bag', 'synthetic'), default=None,
        help='frame source (default: the parameter file)',
    )  # fmt: skip
    parser.add_argument(
        '--uri', default=None, help='camera device, video, image folder or bag; '
        "'asset:media/opencv/vtest.avi' names a fetched asset",
    )  # fmt: skip
    parser.add_argument('--mode', default=None, help='offloading mode of the bridge')
    parser.add_argument('--model', default=None, help='people model of the zoo')
    parser.add_argument('--server-endpoint', default=None, help='edge server endpoint')
    parser.add_argument(
        '--start-edge-server', action='store_true', help='also start an edge server'
    )
    parser.add_argument(
        '--keys-dir', type=Path, default=None,
        help='use (and create when missing) CURVE keys in this folder for bridge and server',
    )  # fmt: skip
    parser.add_argument('--record', default=None, help='write the annotated frames to a video')
    parser.add_argument(
        '--follow', action='store_true',
        help='also run the following chain: AccuMO scheduler (depth source accumo), people '
        'tracker and follower (cmd_vel)',
    )  # fmt: skip
    parser.add_argument(
        '--depth-source', choices=('accumo', 'rgbd'), default=None,
        help="the tracker's depth (default: the parameter file)",
    )  # fmt: skip
    parser.add_argument(
        '--record-bag', type=Path, default=None,
        help="write the run's topics to this new rosbag2 folder, metrics to <folder>.metrics.json",
    )  # fmt: skip
    parser.add_argument('--max-frames', type=int, default=None, help='stop after N frames')
    parser.add_argument(
        '--rate-mode', choices=RATE_MODES, default=None,
        help='realtime follows the source timeline, fixed the rate_hz of the parameter file, '
        'max is as fast as the source reads, every_frame publishes each frame once the last '
        "one's result has come: every frame evaluated, none dropped (implies "
        '--reliable-sensor-qos) (default: the parameter file)',
    )  # fmt: skip
    parser.add_argument(
        '--bag-topics', default=None, metavar='IMAGE[,CAMERA_INFO[,IMU]]',
        help='the topics a bag source plays (a recorded run has more than one image topic)',
    )  # fmt: skip
    parser.add_argument(
        '--reliable-sensor-qos', action='store_true', default=None,
        help='deliver every frame (replays of files and bags); default: sensor-data QoS',
    )  # fmt: skip
    parser.add_argument(
        '--rviz',
        action='store_true',
        help='not started by the runner: says to use kapao_tracking.launch.py rviz:=true',
    )
    parser.add_argument('--log-level', default='info', help='ROS log level')
    return parser


def _runner_parameters(
    args: argparse.Namespace, sections: dict, keys: dict[str, str]
) -> dict[str, dict]:
    """Return each node's parameters: the file's, then the given options (as the launch file)."""
    parameters = graph_parameters(
        sections,
        GraphArguments(
            source=args.source or '',
            uri=args.uri or '',
            mode=args.mode or '',
            model=args.model or '',
            server_endpoint=args.server_endpoint or '',
            record_path=args.record or '',
            depth_source=args.depth_source or '',
            record_bag=str(args.record_bag) if args.record_bag is not None else '',
        ),
    )
    bag_topics = (args.bag_topics.split(',') if args.bag_topics else []) + ['', '', '']
    recording = bool(parameters['bag_recorder']['output_dir'])
    runner_options = {
        'sensor_source': {
            'max_frames': args.max_frames,
            'reliable_sensor_qos': args.reliable_sensor_qos,
            'rate_mode': args.rate_mode,
            'bag_image_topic': bag_topics[0] or None,
            'bag_camera_info_topic': bag_topics[1] or None,
            'bag_imu_topic': bag_topics[2] or None,
            # The recorder subscribes to image_raw too: wait for both.
            'wait_for_subscribers': 2 if recording else None,
        },
        'people_detection': {'reliable_sensor_qos': args.reliable_sensor_qos},
        'bag_recorder': {'reliable_sensor_qos': args.reliable_sensor_qos},
        'tracking_monitor': {'reliable_sensor_qos': args.reliable_sensor_qos},
        'offload_bridge': {
            'secret_key_file': keys.get('robot_secret'),
            'server_public_key_file': keys.get('server_public'),
        },
        'edge_server': {
            'secret_key_file': keys.get('server_secret'),
            'authorized_clients_dir': keys.get('authorized'),
        },
    }
    for node, values in runner_options.items():
        parameters[node].update({name: v for name, v in values.items() if v is not None})
    if parameters['sensor_source'].get('rate_mode') == 'every_frame':
        # Every frame must arrive: the source and its consumers all deliver reliably.
        for node in ('sensor_source', *RELIABLE_CONSUMERS):
            parameters[node]['reliable_sensor_qos'] = True
    return parameters


def _activate(node: LifecycleNode) -> bool:
    for transition in (node.trigger_configure, node.trigger_activate):
        if transition() != TransitionCallbackReturn.SUCCESS:
            node.get_logger().error(f'{transition.__name__.removeprefix("trigger_")} failed')
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    """Run the graph until the source ends (finite sources) or Ctrl-C; return an exit code."""
    args = build_parser().parse_args(argv)
    params_file = args.params_file or default_params_file()
    try:
        sections = load_parameter_file(params_file)
        if args.uri is not None:
            resolve_uri(args.uri)  # a missing asset fails here, before models load
    except (ParameterFileError, SourceError) as error:
        print(f'kapao_tracking: {error}', file=sys.stderr)
        return 1
    keys = ensure_loopback_keys(args.keys_dir) if args.keys_dir else {}
    if args.rviz:
        print(
            'kapao_tracking: RViz runs with the launch file (ros2 launch bringup '
            'kapao_tracking.launch.py rviz:=true); not started here',
            file=sys.stderr,
        )
    parameters = _runner_parameters(args, sections, keys)
    # Before rclpy starts; the node processes started here inherit it.
    profile = large_frames_profile(os.environ)
    if profile is not None:
        os.environ[PROFILE_VARIABLE] = profile
    with tempfile.TemporaryDirectory(prefix='kapao_tracking_') as directory:
        run_params = write_parameter_file(parameters, Path(directory) / 'parameters.yaml')
        rclpy.init(
            args=['--ros-args', '--params-file', str(run_params), '--log-level', args.log_level]
        )
        return _run(args, parameters, run_params)


def _start_node_process(
    module: str, params_file: Path, log_level: str, *extra: str
) -> subprocess.Popen:
    """Start a node of the graph in a process of its own, as ``ros2 launch`` would.

    The edge server, as on a real edge machine, and people detection: their Python work
    (the front end's decoding, the tracking thread's crops and drawing) would otherwise
    share one GIL with every other node. Measured on 2 cores with every robot node in one
    process, that process sat at one core and kept up with half the frames.
    """
    command = [
        sys.executable, '-m', module,
        '--ros-args', '--params-file', str(params_file), *extra, '--log-level', log_level,
    ]  # fmt: skip
    return subprocess.Popen(command)  # noqa: S603 - our own interpreter and module


def _await_edge_server(server: subprocess.Popen, endpoint: str) -> bool:
    """Wait until the server accepts TCP connections on ``endpoint``; False if it does not.

    It binds once its models are loaded; False when it exits first or takes over
    ``EDGE_SERVER_START_S``. The graph starts after it, so a run offloads from its first
    frame.
    """
    address = urlsplit(endpoint)
    wildcard = address.hostname in (None, '*', '0.0.0.0')  # noqa: S104 - bound there, not by us
    host = '127.0.0.1' if wildcard else address.hostname
    deadline = time.monotonic() + EDGE_SERVER_START_S
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with socket.create_connection((host, address.port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.2)
    return False


def _stop_process(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=PROCESS_STOP_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _await_last_results(summary: Summary, deadline: float, stop: threading.Event) -> None:
    """Wait until every captured frame has its result or results stop coming.

    Frames dropped on the way never get one: results have stopped when none came for
    ``_RESULTS_QUIET_S``, many frames' tracking time (tracking never waits for the front
    end), or at ``deadline``. A graph that has answered nothing yet is still starting (a
    short replay can end before the first result), not stopped: it gets until ``deadline``.
    """
    last_count, last_change = summary.results, time.monotonic()
    while summary.frames_without_result() and not stop.is_set():
        now = time.monotonic()
        if summary.results != last_count:
            last_count, last_change = summary.results, now
        quiet = summary.results > 0 and now - last_change > _RESULTS_QUIET_S
        if quiet or now > deadline:
            return
        time.sleep(0.05)


def _run(args: argparse.Namespace, parameters: dict[str, dict], params_file: Path) -> int:
    executor = SingleThreadedExecutor()
    nodes: list[Node] = []
    lifecycle_nodes: list[LifecycleNode] = []
    stop = threading.Event()
    spin_thread = threading.Thread(target=executor.spin, name='executor', daemon=True)
    exit_code = 0
    monitor: TrackingMonitorNode | None = None
    recorder: BagRecorderNode | None = None
    server: subprocess.Popen | None = None
    processes: list[subprocess.Popen] = []
    logger = rclpy.logging.get_logger('kapao_tracking')
    try:
        if args.start_edge_server:
            server = _start_node_process(
                'edge_offload.edge_server_node', params_file, args.log_level,
                '-p', 'autostart:=true',
            )  # fmt: skip
            endpoint = parameters['edge_server']['endpoint']
            if not _await_edge_server(server, endpoint):
                rclpy.logging.get_logger('kapao_tracking').error(
                    f'the edge server did not come up on {endpoint} within '
                    f'{EDGE_SERVER_START_S:.0f} s (see its log above)'
                )
                return 1
        bridge = OffloadBridgeNode()
        nodes.append(bridge)
        lifecycle_nodes.append(bridge)
        if not _activate(bridge):
            return 1
        detection = _start_node_process(
            'bringup.people_detection_node', params_file, args.log_level
        )
        processes.append(detection)
        monitor = TrackingMonitorNode()
        nodes.append(monitor)
        if args.follow:
            nodes.append(PeopleTrackerNode())
            if parameters['people_tracker']['depth_source'] == 'accumo':
                nodes.append(AccumoSchedulerNode())
            nodes.append(FollowerNode())
        if parameters['bag_recorder']['output_dir']:
            # Before the source starts, so the bag holds the whole run.
            recorder = BagRecorderNode()
            nodes.append(recorder)
        source = SensorSourceNode()
        nodes.append(source)
        for node in nodes:
            executor.add_node(node)
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        spin_thread.start()
        while not stop.is_set() and not source.finished.is_set():
            if detection.poll() is not None:
                # Its own log says why (a bad parameter, a missing model).
                logger.error(f'people_detection exited with code {detection.returncode}')
                return 1
            stop.wait(0.1)
        if source.finished.is_set() and not stop.is_set():
            # Let the last frames come back before stopping.
            deadline = time.monotonic() + DRAIN_TIMEOUT_S
            _await_last_results(monitor.summary, deadline, stop)
            exit_code = 0 if source.error is None else 1
    except (ValueError, ParameterException, SourceError, CameraInfoError) as error:
        rclpy.logging.get_logger('kapao_tracking').error(f'bad configuration: {error}')
        exit_code = 1
    finally:
        if recorder is not None:
            recorder.close()
            recorder.get_logger().info(f'bag written: {parameters["bag_recorder"]["output_dir"]}')
        if monitor is not None:
            monitor.close()
            monitor.get_logger().info(f'summary: {monitor.final_report()}')
        executor.shutdown(timeout_sec=5.0)
        for node in lifecycle_nodes:
            node.release()
        for node in reversed(nodes):
            node.destroy_node()
        rclpy.try_shutdown()
        if spin_thread.is_alive():
            spin_thread.join(timeout=5.0)
        for process in [*processes, server]:
            if process is not None:
                _stop_process(process)
    return exit_code


if __name__ == '__main__':
    sys.exit(main())
