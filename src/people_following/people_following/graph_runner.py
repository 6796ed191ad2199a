# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Run the people-following graph in one process: ``kapao_tracking``.

The graph of ``bringup``'s ``kapao_tracking.launch.py``, from the same definition
(:mod:`people_following.graph`): the same arguments, nodes, parameter file and rules. The
nodes marked ``own_process`` there (the edge server, people detection) run in processes of
their own, as the launch file starts them; the others are composed in this process on one
executor thread (their callbacks do not block; the bridge's goals run on its workers).
Frames go over Fast DDS's shared memory whole (``dds_profile``). The source starts once
people detection's status shows its links (it sees the offload action server; every reader
of its results is matched), and people detection is restarted when they stay down
(:func:`missing_links`). It is how the graph runs where ``ros2 launch`` is not installed,
and the README's main job:

    kapao_tracking --source video --uri vtest.avi --start-edge-server --no-follow --record out.mp4
    kapao_tracking source:=bag uri:=run1 record_bag:=replay1

Every launch argument is an option (``--follow`` / ``--no-follow``, ``--record-path`` or
``--record``) and may also be given as the launch file takes it (``name:=value``); the
defaults are the launch file's, so the following chain runs unless ``--no-follow``.
Runner-only options: ``--keys-dir`` makes CURVE keys for the bridge and the local edge
server when they are missing (single-machine runs); ``--max-frames``, ``--bag-topics`` and
``--reliable-sensor-qos`` set the source. With a finite source (video, image folder, bag,
``--max-frames``) the runner waits for the last results after the source ends, prints a
summary and exits 0; Ctrl-C stops it at any time.

``--rate-mode every_frame`` evaluates every frame offline as fast as the graph goes: the
source publishes the next frame when the last one's result has come (lossless: it implies
``--reliable-sensor-qos``, also when the parameter file sets the mode).
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.context import Context
from rclpy.exceptions import ParameterException
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from edge_offload.diagnostics import DIAGNOSTICS_TOPIC
from edge_offload.keys import ensure_loopback_keys
from edge_offload.parameter_files import ParameterFileError, write_parameter_file
from people_following.camera_info_file import CameraInfoError
from people_following.dds_profile import PROFILE_VARIABLE, large_frames_profile
from people_following.graph import (
    ARGUMENTS,
    RELIABLE_FOR_EVERY_FRAME,
    GraphNode,
    GraphPlan,
    plan_graph,
)
from people_following.sensor_sources import SourceError, resolve_uri
from people_following.tracking_monitor_node import Summary

DRAIN_TIMEOUT_S = 30.0
PROCESS_STOP_S = 5.0  # the edge server and people detection stop within this
EDGE_SERVER_START_S = 120.0
# After the source ends, results have stopped when none came for this long.
_RESULTS_QUIET_S = 2.0
# The statuses a failed run reports, and the most it keeps (one per node and server mode).
_REPORTED_STATUSES = ('people detection', 'offload_bridge', 'edge_server')
_MAX_STATUSES = 64
# Before the source starts: people detection's links must be up within this long of its
# first status, or it is restarted (at most LINK_RESTARTS times); and its first status must
# come within PEOPLE_DETECTION_START_S (models load first).
LINKS_TIMEOUT_S = 15.0
LINK_RESTARTS = 2
PEOPLE_DETECTION_START_S = 120.0
_PEOPLE_DETECTION_STATUS = 'people detection'
# Older option names that still work.
_ALIASES = {'record_path': ('--record',)}


def build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser: the graph's arguments, plus the runner's options."""
    parser = argparse.ArgumentParser(
        prog='kapao_tracking',
        description="Run bringup's kapao_tracking.launch.py graph in one process (people "
        'detection and a local edge server in processes of their own).',
    )
    parser.add_argument(
        'launch_arguments', nargs='*', metavar='NAME:=VALUE',
        help='launch arguments as ros2 launch takes them (the options below are the same)',
    )  # fmt: skip
    graph = parser.add_argument_group('graph arguments (those of kapao_tracking.launch.py)')
    for argument in ARGUMENTS:
        flags = ['--' + argument.name.replace('_', '-'), *_ALIASES.get(argument.name, ())]
        default = f' (default: {argument.default})' if argument.default else ''
        options: dict[str, Any] = {'dest': argument.name, 'default': None}
        if argument.boolean:
            options['action'] = argparse.BooleanOptionalAction
        elif argument.choices:
            options['choices'] = argument.choices
        graph.add_argument(*flags, help=argument.description + default, **options)
    runner = parser.add_argument_group('runner options')
    runner.add_argument(
        '--keys-dir', type=Path, default=None,
        help='use (and create when missing) CURVE keys in this folder for bridge and server',
    )  # fmt: skip
    runner.add_argument('--max-frames', type=int, default=None, help='stop after N frames')
    runner.add_argument(
        '--bag-topics', default=None, metavar='IMAGE[,CAMERA_INFO[,IMU]]',
        help='the topics a bag source plays (a recorded run has more than one image topic)',
    )  # fmt: skip
    runner.add_argument(
        '--reliable-sensor-qos', action='store_true', default=None,
        help='deliver every frame (replays of files and bags); default: sensor-data QoS',
    )  # fmt: skip
    return parser


def graph_values(args: argparse.Namespace) -> dict[str, str]:
    """Return the graph arguments given on the command line, as launch argument strings."""
    values: dict[str, str] = {}
    for text in args.launch_arguments:
        name, separator, value = text.partition(':=')
        if not separator:
            raise ValueError(f'{text!r} is not NAME:=VALUE')
        values[name] = value
    for argument in ARGUMENTS:
        value = getattr(args, argument.name)
        if value is not None:
            values[argument.name] = str(value).lower() if argument.boolean else str(value)
    return values


def runner_plan(args: argparse.Namespace, keys: dict[str, str]) -> GraphPlan:
    """Return the graph's plan for ``args``, with the runner's own options applied."""
    plan = plan_graph(graph_values(args))
    bag_topics = (args.bag_topics.split(',') if args.bag_topics else []) + ['', '', '']
    reliable = {
        node: {'reliable_sensor_qos': args.reliable_sensor_qos}
        for node in RELIABLE_FOR_EVERY_FRAME
    }
    runner_options = reliable | {
        'sensor_source': {
            'max_frames': args.max_frames,
            'reliable_sensor_qos': args.reliable_sensor_qos,
            'bag_image_topic': bag_topics[0] or None,
            'bag_camera_info_topic': bag_topics[1] or None,
            'bag_imu_topic': bag_topics[2] or None,
        },
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
        if node in plan.parameters:
            plan.parameters[node].update({k: v for k, v in values.items() if v is not None})
    return plan


def _ros_arguments(plan: GraphPlan, params_file: Path) -> list[str]:
    """Return the ``--ros-args`` every node of ``plan`` runs with (as ros2 launch gives them)."""
    arguments = ['--params-file', str(params_file)]
    if plan.namespace:
        arguments += ['-r', f'__ns:=/{plan.namespace.strip("/")}']
    for source, target in plan.remappings:
        arguments += ['-r', f'{source}:={target}']
    return [*arguments, '--log-level', plan.log_level]


def main(argv: list[str] | None = None) -> int:
    """Run the graph until the source ends (finite sources) or Ctrl-C; return an exit code."""
    args = build_parser().parse_args(argv)
    try:
        if args.uri is not None:
            resolve_uri(args.uri)  # a missing asset fails here, before models load
        keys = ensure_loopback_keys(args.keys_dir) if args.keys_dir else {}
        plan = runner_plan(args, keys)
    except (ParameterFileError, SourceError, ValueError) as error:
        print(f'kapao_tracking: {error}', file=sys.stderr)
        return 1
    if plan.rviz:
        print(
            'kapao_tracking: RViz runs with the launch file (ros2 launch bringup '
            'kapao_tracking.launch.py rviz:=true); not started here',
            file=sys.stderr,
        )
    # Before rclpy starts; the node processes started here inherit it.
    profile = large_frames_profile(os.environ)
    if profile is not None:
        os.environ[PROFILE_VARIABLE] = profile
    with tempfile.TemporaryDirectory(prefix='kapao_tracking_') as directory:
        params_file = write_parameter_file(
            plan.parameters, Path(directory) / 'parameters.yaml', plan.namespace
        )
        ros_arguments = _ros_arguments(plan, params_file)
        rclpy.init(args=['--ros-args', *ros_arguments])
        return _run(plan, ros_arguments)


def _activate(node: LifecycleNode) -> bool:
    for transition in (node.trigger_configure, node.trigger_activate):
        if transition() != TransitionCallbackReturn.SUCCESS:
            node.get_logger().error(f'{transition.__name__.removeprefix("trigger_")} failed')
            return False
    return True


def _start_node_process(module: str, ros_arguments: list[str]) -> subprocess.Popen:
    """Start a node of the graph in a process of its own, as ``ros2 launch`` would."""
    command = [sys.executable, '-m', module, '--ros-args', *ros_arguments]
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


def _await_last_results(
    summary: Summary,
    published: int,
    deadline: float,
    stop: threading.Event,
    failed: Callable[[], bool] = lambda: False,
) -> None:
    """Wait until every published frame has its result or results stop coming.

    Frames dropped on the way never get one: results have stopped when none came for
    ``_RESULTS_QUIET_S``, many frames' tracking time (tracking never waits for the front
    end), or at ``deadline``. A graph that has answered nothing yet is still starting (a
    short replay can end before the first result), not stopped: it gets until ``deadline``.
    The source's count, not the monitor's, says how many frames to wait for: a replay at
    full speed ends before the monitor has taken its frames off the executor's queue.
    ``failed`` ends the wait early (a node of the graph has exited).
    """
    last_count, last_change = summary.results, time.monotonic()
    while max(published, summary.frames_captured) > summary.results and not stop.is_set():
        if failed():
            return
        now = time.monotonic()
        if summary.results != last_count:
            last_count, last_change = summary.results, now
        quiet = summary.results > 0 and now - last_change > _RESULTS_QUIET_S
        if quiet or now > deadline:
            return
        time.sleep(0.05)


def missing_links(
    status_values: dict[str, str], subscribers_in_graph: int, monitor_publishers_matched: int
) -> list[str]:
    """Return what people detection's links lack, from its status and the monitor's view.

    Fast DDS can leave two processes half-discovered under heavy load (measured: 2 of 87
    runs on 2 cores kept busy): frames reach people detection, but it never sees the offload
    action server, or its results match none of the readers the ROS graph lists. Both show
    here before the first frame. Empty: connected.
    """
    missing = []
    if status_values.get('offload_server_seen') != 'True':
        missing.append('it does not see the offload action server')
    text = status_values.get('people_subscribers_matched', '0')
    matched = int(text) if text.isdigit() else 0
    if matched < subscribers_in_graph:
        missing.append(
            f'its results are matched to {matched} of the {subscribers_in_graph} readers '
            'the ROS graph lists'
        )
    if monitor_publishers_matched < 1:
        missing.append("the monitor's results subscription is matched to no publisher")
    return missing


class _StatusWatch(Node):
    """The graph's newest ``/diagnostics`` status per name: what a failed run reports."""

    def __init__(self, context: Context | None = None) -> None:
        super().__init__('kapao_tracking_status', context=context)
        self.statuses: dict[str, DiagnosticStatus] = {}
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.create_subscription(DiagnosticArray, DIAGNOSTICS_TOPIC, self._on_statuses, qos)

    def _on_statuses(self, message: DiagnosticArray) -> None:
        for status in message.status:
            if status.name in self.statuses or len(self.statuses) < _MAX_STATUSES:
                self.statuses[status.name] = status

    def find(self, part: str) -> DiagnosticStatus | None:
        """Return the newest status whose name contains ``part``, if any."""
        for name, status in list(self.statuses.items()):
            if part in name:
                return status
        return None

    def forget(self, part: str) -> None:
        """Drop the statuses whose names contain ``part`` (a restarted node's old ones)."""
        for name in [name for name in list(self.statuses) if part in name]:
            self.statuses.pop(name, None)

    def report(self, wanted: tuple[str, ...] = _REPORTED_STATUSES) -> list[str]:
        """Return one line per status whose name contains one of ``wanted``."""
        lines = []
        for name, status in sorted(self.statuses.items()):
            if any(part in name for part in wanted):
                values = ', '.join(f'{v.key} {v.value}' for v in status.values)
                lines.append(f'{name}: {status.message} ({values})')
        return lines


class _Graph:
    """The started nodes: composed ones on one executor thread, the others as processes."""

    def __init__(self, plan: GraphPlan, ros_arguments: list[str]) -> None:
        self.plan = plan
        self.ros_arguments = ros_arguments
        self.executor = SingleThreadedExecutor()
        self.composed: dict[str, Node] = {}
        self.status_watch = _StatusWatch()
        self.processes: dict[str, subprocess.Popen] = {}
        self.spin_thread = threading.Thread(
            target=self.executor.spin, name='executor', daemon=True
        )
        self.logger = rclpy.logging.get_logger('kapao_tracking')

    def start(self, node: GraphNode) -> bool:
        """Start ``node``; False (logged) when it cannot serve."""
        if node.own_process:
            extra = ['-p', 'autostart:=true'] if node.lifecycle else []
            process = _start_node_process(node.module, [*extra, *self.ros_arguments])
            self.processes[node.name] = process
            if node.name == 'edge_server':
                endpoint = self.plan.parameters['edge_server']['endpoint']
                if not _await_edge_server(process, endpoint):
                    self.logger.error(
                        f'the edge server did not come up on {endpoint} within '
                        f'{EDGE_SERVER_START_S:.0f} s (see its log above)'
                    )
                    return False
            return True
        module, _, class_name = node.node_class.partition(':')
        instance = getattr(importlib.import_module(module), class_name)()
        self.composed[node.name] = instance
        if node.lifecycle and not _activate(instance):
            return False
        self.executor.add_node(instance)
        return True

    def begin(self) -> None:
        """Start the executor thread; nodes join it as they start."""
        self.executor.add_node(self.status_watch)
        self.spin_thread.start()

    def await_people_detection_links(self, stop: threading.Event) -> None:
        """Hold the source until people detection's links are up; restart it if they stay down.

        Logged, never fatal: after ``LINK_RESTARTS`` restarts (or no status at all) the
        source starts anyway and the run says what is missing.
        """
        name = 'people_detection'
        monitor = self.composed.get('tracking_monitor')
        if name not in self.processes or monitor is None:
            return
        topic = monitor.people_subscription.topic_name
        restarts = 0
        started = time.monotonic()
        first_status: float | None = None
        while not stop.is_set() and self._exited_process() is None:
            now = time.monotonic()
            status = self.status_watch.find(_PEOPLE_DETECTION_STATUS)
            if status is None:
                if now - started > PEOPLE_DETECTION_START_S:
                    self.logger.warning(
                        f'no status from {name} within {PEOPLE_DETECTION_START_S:.0f} s; '
                        'starting the source without checking its links'
                    )
                    return
                stop.wait(0.1)
                continue
            first_status = first_status or now
            missing = missing_links(
                {value.key: value.value for value in status.values},
                monitor.count_subscribers(topic),
                monitor.people_subscription.get_publisher_count(),
            )
            if not missing:
                return
            if now - first_status > LINKS_TIMEOUT_S:
                if restarts == LINK_RESTARTS:
                    self.logger.warning(
                        f'{name} is still not connected after {restarts} restarts '
                        f'({"; ".join(missing)}); starting the source anyway'
                    )
                    return
                self.logger.warning(
                    f'{name} is not connected {LINKS_TIMEOUT_S:.0f} s after its first status '
                    f'({"; ".join(missing)}): DDS discovery between the processes failed; '
                    'restarting it'
                )
                self._restart_process(name)
                restarts += 1
                started, first_status = time.monotonic(), None
            stop.wait(0.1)

    def _restart_process(self, name: str) -> None:
        node = next(node for node in self.plan.nodes if node.name == name)
        _stop_process(self.processes[name])
        self.status_watch.forget(_PEOPLE_DETECTION_STATUS)
        self.processes[name] = _start_node_process(node.module, self.ros_arguments)

    def spin(self, stop: threading.Event) -> int:
        """Spin until the source ends or ``stop``; return the exit code."""
        source = self.composed['sensor_source']
        while not stop.is_set() and not source.finished.is_set():
            if self._report_exited_process():
                return 1
            stop.wait(0.1)
        if source.finished.is_set() and not stop.is_set():
            # Let the last frames come back before stopping.
            summary = self.composed['tracking_monitor'].summary
            published = source.frames_published
            deadline = time.monotonic() + DRAIN_TIMEOUT_S
            _await_last_results(
                summary, published, deadline, stop, lambda: self._exited_process() is not None
            )
            if self._report_exited_process():
                return 1
            if published and not summary.results:
                monitor = self.composed['tracking_monitor']
                results = monitor.people_subscription
                self.logger.error(
                    f'no result for any of the {published} frames within '
                    f'{DRAIN_TIMEOUT_S:.0f} s of the source ending (publishers of '
                    f'{results.topic_name}: {monitor.count_publishers(results.topic_name)} in '
                    f'the ROS graph, {results.get_publisher_count()} matched in DDS); the last '
                    'statuses:\n' + ('\n'.join(self.status_watch.report()) or '(none received)')
                )
                return 1
            return 0 if source.error is None else 1
        return 0

    def _exited_process(self) -> str | None:
        """Return the name of a node running as a process that has exited, if any."""
        for name, process in self.processes.items():
            if process.poll() is not None:
                return name
        return None

    def _report_exited_process(self) -> bool:
        """Log a node process that has exited; whether there is one."""
        name = self._exited_process()
        if name is None:
            return False
        # Its own log says why (a bad parameter, a missing model).
        self.logger.error(f'{name} exited with code {self.processes[name].returncode}')
        return True

    def close(self) -> None:
        recorder = self.composed.get('bag_recorder')
        if recorder is not None:
            recorder.close()
            output_dir = self.plan.parameters['bag_recorder']['output_dir']
            recorder.get_logger().info(f'bag written: {output_dir}')
        monitor = self.composed.get('tracking_monitor')
        if monitor is not None:
            monitor.close()
            monitor.get_logger().info(f'summary: {monitor.final_report()}')
        self.executor.shutdown(timeout_sec=5.0)
        for node in self.composed.values():
            if isinstance(node, LifecycleNode):
                node.release()
        for node in (*reversed(self.composed.values()), self.status_watch):
            node.destroy_node()
        rclpy.try_shutdown()
        if self.spin_thread.is_alive():
            self.spin_thread.join(timeout=5.0)
        for process in self.processes.values():
            _stop_process(process)


def _run(plan: GraphPlan, ros_arguments: list[str]) -> int:
    graph = _Graph(plan, ros_arguments)
    stop = threading.Event()
    try:
        graph.begin()
        for node in plan.nodes:
            if node.name == 'sensor_source':
                signal.signal(signal.SIGINT, lambda *_: stop.set())
                signal.signal(signal.SIGTERM, lambda *_: stop.set())
                graph.await_people_detection_links(stop)
            if not graph.start(node):
                return 1
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        return graph.spin(stop)
    except (ValueError, ParameterException, SourceError, CameraInfoError) as error:
        graph.logger.error(f'bad configuration: {error}')
        return 1
    finally:
        graph.close()


if __name__ == '__main__':
    sys.exit(main())
