# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``rate_mode: every_frame``: every frame, paced by its result, never hung by a missing one.

* :class:`Backpressure` on its own: results free the window, late frames are given up.
* The node against a responder that answers each frame after a while: every frame is
  published and answered, and never more than ``max_frames_ahead`` wait at once.
* Nobody answers: each frame is given up after ``backpressure_timeout_s``, the source ends
  by itself with exit code 0 and says how many frames had no result.
* The runner's ``--rate-mode every_frame`` and the launch file's ``rate_mode:=every_frame``
  make the camera path reliable end to end.
"""

from __future__ import annotations

import importlib.util
import subprocess
import threading
import time
from pathlib import Path

import pytest
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image

from edge_offload.sensor_qos import sensor_qos
from edge_offload_testing import node_command, spin_until
from offload_interfaces.msg import PersonArray
from people_following.graph import RELIABLE_FOR_EVERY_FRAME
from people_following.sensor_source_node import Backpressure, SensorSourceNode

BRINGUP = Path(__file__).resolve().parents[2] / 'bringup'
CONFIG = BRINGUP / 'config'
LAUNCH = BRINGUP / 'launch'


def test_backpressure_results_free_the_window_and_late_frames_are_given_up():
    stop = threading.Event()
    backpressure = Backpressure(timeout_s=0.2)
    backpressure.add(1)
    backpressure.add(2)
    assert backpressure.outstanding() == 2
    assert backpressure.answer(1)
    assert not backpressure.answer(1)  # once only
    assert not backpressure.answer(99)  # not a frame of ours
    assert backpressure.wait_until_at_most(1, stop) == 0
    started = time.monotonic()
    # Frame 2 never gets its result: given up at its deadline, not before, not never.
    assert backpressure.wait_until_at_most(0, stop) == 1
    assert 0.1 < time.monotonic() - started < 1.0
    assert (backpressure.answered, backpressure.unanswered) == (1, 1)
    assert not backpressure.answer(2)  # too late: already counted as unanswered

    # A result from another thread wakes the waiting publisher at once.
    backpressure = Backpressure(timeout_s=10.0)
    backpressure.add(3)
    threading.Timer(0.05, backpressure.answer, args=(3,)).start()
    started = time.monotonic()
    assert backpressure.wait_until_at_most(0, stop) == 0
    assert time.monotonic() - started < 1.0
    # A stop request ends the wait too.
    backpressure.add(4)
    stop.set()
    assert backpressure.wait_until_at_most(0, stop) == 0


class _Responder:
    """Answers each image on ``people`` with its header after ``delay_s``, as detection does."""

    def __init__(self, ros_context, delay_s: float) -> None:  # noqa: ANN001
        self.node = Node('every_frame_responder', context=ros_context)
        self.delay_s = delay_s
        self.pending: list[tuple[float, Image]] = []
        self.answered: list[int] = []
        self.most_waiting = 0
        self._publisher = self.node.create_publisher(
            PersonArray, 'people', QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        )
        self.node.create_subscription(Image, 'image_raw', self._on_image, sensor_qos(True))
        self.node.create_timer(0.01, self._answer)

    def _on_image(self, message: Image) -> None:
        self.pending.append((time.monotonic(), message))
        self.most_waiting = max(self.most_waiting, len(self.pending))

    def _answer(self) -> None:
        while self.pending and time.monotonic() - self.pending[0][0] >= self.delay_s:
            _, image = self.pending.pop(0)
            self._publisher.publish(PersonArray(header=image.header))
            stamp = image.header.stamp
            self.answered.append(stamp.sec * 10**9 + stamp.nanosec)


def _source(ros_context, **parameters: object) -> SensorSourceNode:  # noqa: ANN001
    overrides = [Parameter(name, value=value) for name, value in parameters.items()]
    return SensorSourceNode(context=ros_context, parameter_overrides=overrides)


def test_every_frame_waits_for_each_result_and_publishes_every_frame(ros_context, ros_executor):
    frames, delay_s = 12, 0.05
    responder = _Responder(ros_context, delay_s)
    ros_executor.add_node(responder.node)
    source = _source(
        ros_context,
        source='synthetic',
        width=64,
        height=48,
        # 2 fps: realtime pacing would take 6 s; every_frame goes at the responder's pace.
        fps=2.0,
        imu_rate_hz=0.0,
        rate_mode='every_frame',
        max_frames=frames,
        wait_for_subscribers=1,
    )
    try:
        ros_executor.add_node(source)
        started = time.monotonic()
        assert spin_until(ros_executor, source.finished.is_set, timeout_s=30.0)
        elapsed = time.monotonic() - started
        backpressure = source._backpressure
        assert (backpressure.answered, backpressure.unanswered) == (frames, 0)
    finally:
        source.destroy_node()
        responder.node.destroy_node()
    assert len(responder.answered) == frames
    assert responder.answered == sorted(set(responder.answered))
    # One frame ahead at most: the next frame came only after the last one was answered.
    assert responder.most_waiting == 1
    assert frames * delay_s < elapsed < 5.0, elapsed


def test_every_frame_without_results_times_out_and_ends(ros_domain_id):
    result = subprocess.run(
        node_command(
            'people_following.sensor_source_node',
            source='synthetic',
            width=64,
            height=48,
            imu_rate_hz=0.0,
            rate_mode='every_frame',
            max_frames=3,
            backpressure_timeout_s=0.3,
        ),
        capture_output=True,
        text=True,
        timeout=60.0,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert 'rate_mode every_frame: publishing reliably' in output
    assert 'no publisher of /people after 0.3 s' in output
    assert 'no result on people within 0.3 s of a frame' in output
    assert 'end of source' not in output  # max_frames ends it
    summary = [line for line in output.splitlines() if 'max_frames (3) reached' in line]
    assert len(summary) == 1, output
    assert 'published 3 frames' in summary[0]
    assert '0 answered on people, 3 unanswered (no result within 0.3 s)' in summary[0]


def test_the_runner_makes_every_frame_lossless():
    from people_following import graph_runner

    parser = graph_runner.build_parser()
    arguments = ['--record-bag', 'run_bag', '--rate-mode']
    parameters = graph_runner.runner_plan(
        parser.parse_args([*arguments, 'every_frame']), keys={}
    ).parameters
    assert parameters['sensor_source']['rate_mode'] == 'every_frame'
    for node in RELIABLE_FOR_EVERY_FRAME:
        assert parameters[node]['reliable_sensor_qos'] is True, node
    # The other modes leave the QoS to the file and --reliable-sensor-qos.
    realtime = graph_runner.runner_plan(
        parser.parse_args([*arguments, 'realtime']), keys={}
    ).parameters
    assert realtime['people_detection']['reliable_sensor_qos'] is False
    reliable = graph_runner.runner_plan(
        parser.parse_args(['--reliable-sensor-qos']), keys={}
    ).parameters
    assert reliable['tracking_monitor']['reliable_sensor_qos'] is True


def test_the_launch_files_rate_mode_argument_makes_every_frame_lossless(tmp_path, monkeypatch):
    pytest.importorskip('launch')
    pytest.importorskip('launch_ros')
    from launch import LaunchContext
    from launch.actions import DeclareLaunchArgument

    spec = importlib.util.spec_from_file_location(
        'kapao_tracking_launch', LAUNCH / 'kapao_tracking.launch.py'
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    written: dict[str, dict] = {}

    def write(parameters: dict, file_name: str, namespace: str) -> Path:
        written.update(parameters)
        return tmp_path / file_name

    monkeypatch.setattr(module, 'write_launch_parameters', write)
    description = module.generate_launch_description()
    context = LaunchContext()
    for entity in description.entities:
        if isinstance(entity, DeclareLaunchArgument):
            default = entity.default_value[0].perform(context) if entity.default_value else ''
            context.launch_configurations[entity.name] = default
    assert 'every_frame' in next(
        entity.description
        for entity in description.entities
        if isinstance(entity, DeclareLaunchArgument) and entity.name == 'rate_mode'
    )
    context.launch_configurations.update(
        params_file=str(CONFIG / 'kapao_tracking.yaml'), rate_mode='every_frame', follow='false'
    )
    module._graph(context)
    assert written['sensor_source']['rate_mode'] == 'every_frame'
    for node in ('sensor_source', 'people_detection', 'tracking_monitor'):
        assert written[node]['reliable_sensor_qos'] is True, node
