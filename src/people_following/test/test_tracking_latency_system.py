# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Capture-to-result latency of the people graph, and every_frame on real video.

sensor_source (``vtest.avi``, default ``start_time_s``) -> people_detection, which offloads
each frame through offload_bridge (``local``: no edge server needed) -> tracking_monitor,
over DDS. The source stamps each frame when it publishes it, so the monitor's latency
(``now - header.stamp``) is the detection node's own (frame arrival to result, its
``latency_p50_s`` diagnostics) plus the transport of the frame (``arrival_delay_p50_s``:
stamp to arrival, measured by the node) and of the result: within ``MAX_RESIDUAL_S`` (20 ms,
as issue 32 asks), not plus the half second (517-533 ms) the wait for subscribers used to
add. That graph runs as ``make run`` runs the robot's nodes (``people_following.graph_runner``):
people detection in a process of its own, the others in this one on one executor thread.
A graph a loaded machine pushed over the bound is measured again (three at most).

With ``rate_mode: every_frame`` each frame of a short clip gets its result, none dropped,
with the nodes in processes of their own (as the launch file starts them). The people
model is ``blazepose_detector_people`` (the BlazePose detector alone, about 20 ms a frame
on a CPU), so the graph keeps up with the video.
"""

from __future__ import annotations

import signal
import threading
import time

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import Image

from edge_offload.offload_bridge_node import OffloadBridgeNode
from edge_offload.sensor_qos import sensor_qos
from edge_offload_testing import (
    KeySet,
    free_tcp_port,
    make_test_keys,
    node_command,
    offload_bridge_node_command,
    spin_until,
)
from offload_interfaces.action import Offload
from offload_interfaces.msg import LinkState
from people_following.sensor_source_node import SensorSourceNode
from people_following.tracking_monitor_node import TrackingMonitorNode

OBSERVER_DEPTH = 100  # more than any test here publishes

MODEL = 'blazepose_detector_people'
VIDEO = 'asset:media/opencv/vtest.avi'
DETECTION_STATUS = 'people_detection: people detection'
# The monitor's median latency minus the detection node's and the frame's measured
# transport: the result's transport and the medians' spread, nothing else (the stamping
# error was 517-533 ms).
MAX_RESIDUAL_S = 0.020


class _Graph:
    """The bridge and the detection node as processes; the monitor in this process."""

    def __init__(self, tmp_path, ros_context, ros_executor, ros_processes) -> None:  # noqa: ANN001
        self.executor = ros_executor
        self.processes = ros_processes
        self.sources = []
        keys = make_test_keys(tmp_path / 'keys')
        # No server listens there: the bridge runs the model itself (mode local).
        self.bridge = ros_processes.start(
            offload_bridge_node_command(free_tcp_port(), keys, [MODEL], mode='local'),
            name='offload_bridge',
        )
        self.detection = ros_processes.start(
            node_command(
                'people_following.people_detection_node',
                model=MODEL,
                queue_size=1,
                max_in_flight=1,
                publish_annotated=False,
                reliable_sensor_qos=True,
                diagnostics_period_s=0.2,
            ),
            name='people_detection',
        )
        self.monitor = TrackingMonitorNode(
            context=ros_context, parameter_overrides=[Parameter('reliable_sensor_qos', value=True)]
        )
        self.node = Node('tracking_latency_test', context=ros_context)
        self.detection_status: dict[str, str] = {}
        self.node.create_subscription(DiagnosticArray, '/diagnostics', self._on_diagnostics, 10)
        # The source waits for this subscription too, so it has discovered this process
        # (and the monitor's camera_info subscription) before its first frame.
        self.frames_seen = 0
        # Reliable like the source in every_frame mode, with room for every frame a test
        # publishes: this process also spins the monitor, and under load its executor can
        # fall more than the sensor profile's 5 samples behind (28 of 30 seen in one CI run).
        observer_qos = sensor_qos(True)
        observer_qos.depth = OBSERVER_DEPTH
        self.node.create_subscription(Image, 'image_raw', self._on_image, observer_qos)
        ros_executor.add_node(self.monitor)
        ros_executor.add_node(self.node)
        # The detection node publishes people, and the bridge is active (its link_state).
        ready = spin_until(
            ros_executor,
            lambda: (
                self.node.count_publishers('people') > 0
                and self.node.count_publishers('link_state') > 0
            ),
            timeout_s=60.0,
        )
        assert ready, self.output()
        # Active, with its action server up (it publishes link_state once active).
        link_states: list[LinkState] = []
        subscription = self.node.create_subscription(
            LinkState, 'link_state', link_states.append, 10
        )
        assert spin_until(ros_executor, lambda: bool(link_states), timeout_s=60.0), self.output()
        self.node.destroy_subscription(subscription)

    def _on_image(self, message: Image) -> None:
        self.frames_seen += 1

    def _on_diagnostics(self, message: DiagnosticArray) -> None:
        for status in message.status:
            if status.name == DETECTION_STATUS:
                self.detection_status = {value.key: value.value for value in status.values}

    def start_source(self, **parameters: object):  # noqa: ANN201 - a Popen
        source = self.processes.start(
            node_command(
                'people_following.sensor_source_node',
                source='video',
                uri=VIDEO,
                # people_detection and this process.
                wait_for_subscribers=2,
                reliable_sensor_qos=True,
                **parameters,
            ),
            name='sensor_source',
        )
        self.sources.append(source)
        return source

    def wait_for_results(self, frames: int, timeout_s: float) -> bool:
        summary = self.monitor.summary

        def done() -> bool:
            return (
                summary.results >= frames
                and summary.frames_captured >= frames
                and int(self.detection_status.get('results', 0)) >= frames
            )

        return spin_until(self.executor, done, timeout_s=timeout_s)

    def output(self) -> str:
        started = [self.bridge, self.detection, *self.sources]
        return '\n'.join(self.processes.output(process) for process in started)

    def close(self) -> None:
        self.node.destroy_node()
        self.monitor.close()
        self.monitor.destroy_node()


@pytest.fixture
def graph(tmp_path, ros_context, ros_executor, ros_processes):  # noqa: ANN201
    graph = _Graph(tmp_path, ros_context, ros_executor, ros_processes)
    yield graph
    graph.close()


def _until(predicate, timeout_s: float) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _measure_latencies(  # noqa: ANN001
    keys: KeySet, ros_context, ros_processes, frames: int
) -> tuple[float, float, float, str]:
    """Run the graph as graph_runner does; return three medians and the monitor's report.

    People detection in a process of its own, the other nodes in this one on one executor
    thread.

    Returns the monitor's median capture-to-result latency, the detection node's median
    latency (``latency_p50_s``), its median frame transport (``arrival_delay_p50_s``) and
    the monitor's final report.
    """
    executor = SingleThreadedExecutor(context=ros_context)
    nodes: list[Node] = []
    bridge = None
    detection = None
    detection_status: dict[str, str] = {}

    def on_diagnostics(message: DiagnosticArray) -> None:
        for status in message.status:
            if status.name == DETECTION_STATUS:
                detection_status.update({value.key: value.value for value in status.values})

    def count(key: str) -> int:
        return int(detection_status.get(key, 0))

    def parameters(**values: object) -> list[Parameter]:
        return [Parameter(name, value=value) for name, value in values.items()]

    try:
        # As graph_runner builds it: bridge (activated), detection, monitor, then the source.
        bridge = OffloadBridgeNode(
            context=ros_context,
            parameter_overrides=parameters(
                server_endpoint=f'tcp://127.0.0.1:{free_tcp_port()}',
                secret_key_file=str(keys.robot_secret),
                server_public_key_file=str(keys.server_public),
                models=[MODEL],
                mode='local',
                # One intra-op thread, as kapao_tracking.yaml sets where everything shares 2
                # cores: with torch's default 2, runs stalled for up to a second.
                torch_threads=1,
            ),
        )
        nodes.append(bridge)
        for transition in (bridge.trigger_configure, bridge.trigger_activate):
            assert transition() == TransitionCallbackReturn.SUCCESS
        detection = ros_processes.start(
            node_command(
                'people_following.people_detection_node',
                model=MODEL,
                # Each frame through the bridge: the node's own latency spans the model.
                tracking=False,
                queue_size=1,
                publish_annotated=False,
                reliable_sensor_qos=True,
                diagnostics_period_s=0.2,
            ),
            # One log per graph (a run a loaded machine pushed over the bound is repeated).
            name=f'people_detection_{time.monotonic_ns()}',
        )
        monitor = TrackingMonitorNode(
            context=ros_context, parameter_overrides=parameters(reliable_sensor_qos=True)
        )
        nodes.append(monitor)
        probe = Node('tracking_latency_test', context=ros_context)
        probe.create_subscription(DiagnosticArray, '/diagnostics', on_diagnostics, 10)
        nodes.append(probe)
        offload = ActionClient(probe, Offload, 'offload')
        assert _until(offload.server_is_ready, timeout_s=30.0)
        # The detection process is up (it publishes people) before the source starts.
        assert _until(lambda: probe.count_publishers('people') > 0, timeout_s=60.0), (
            ros_processes.output(detection)
        )
        source = SensorSourceNode(
            context=ros_context,
            parameter_overrides=parameters(
                source='video',
                uri=VIDEO,
                # 4 frames a second: headroom on 2 shared cores, so the medians measure
                # stamps and transport, not a queue behind a busy executor.
                rate_mode='fixed',
                rate_hz=4.0,
                max_frames=frames,
                wait_for_subscribers=1,
                reliable_sensor_qos=True,
            ),
        )
        nodes.append(source)
        for node in nodes:
            executor.add_node(node)
        spin_thread = threading.Thread(target=executor.spin, daemon=True)
        spin_thread.start()
        summary = monitor.summary
        # Realtime: the detection node may drop a frame while it is busy (drop-oldest), and
        # on a loaded machine DDS may drop one before the node takes it (keep-last history).
        done = _until(
            lambda: (
                source.finished.is_set()
                and summary.frames_captured >= frames
                and count('frames_received') >= frames - 5
                and count('results') + count('frames_dropped') >= count('frames_received')
                and summary.results >= count('results') > 0
            ),
            timeout_s=60.0,
        )
        assert done, (
            f'{monitor.final_report()}; detection: {detection_status}; '
            f'{ros_processes.output(detection)}'
        )
        report = monitor.final_report()
    finally:
        executor.shutdown(timeout_sec=5.0)
        if detection is not None and detection.poll() is None:
            detection.send_signal(signal.SIGINT)
            detection.wait(timeout=10.0)
        if bridge is not None:
            bridge.release()
        for node in reversed(nodes):
            node.destroy_node()
    assert source.error is None
    assert summary.frames_captured == frames, report
    # Realtime: frames the detection node dropped while busy have no result; the medians
    # are over the others.
    # The diagnostics (every 0.2 s) may lag the monitor by a result.
    assert summary.results >= count('results') >= frames // 4, (report, detection_status)
    return (
        float(np.median(summary.latencies_s)),
        float(detection_status['latency_p50_s']),
        float(detection_status['arrival_delay_p50_s']),
        report,
    )


def test_monitor_latency_is_detection_latency_plus_transport(tmp_path, ros_context, ros_processes):
    keys = make_test_keys(tmp_path / 'keys')
    measured = []
    # Another graph only when a run's residual exceeded the bound: on a loaded machine (2
    # shared cores) the executor's scheduling can delay the result; a stamping error never
    # passes (the wait for subscribers alone was 500 ms).
    for _ in range(3):
        monitor_p50_s, detection_p50_s, transport_p50_s, report = _measure_latencies(
            keys, ros_context, ros_processes, 24
        )
        residual_s = monitor_p50_s - detection_p50_s - transport_p50_s
        measured.append(residual_s)
        print(
            f'monitor p50 {monitor_p50_s * 1e3:.1f} ms = detection p50 '
            f'{detection_p50_s * 1e3:.1f} ms + frame transport p50 '
            f'{transport_p50_s * 1e3:.1f} ms + {residual_s * 1e3:.1f} ms; {report}'
        )
        if abs(residual_s) <= MAX_RESIDUAL_S:
            break
    assert abs(measured[-1]) <= MAX_RESIDUAL_S, (
        f'monitor minus detection latency minus frame transport (medians): '
        f'{[f"{d * 1e3:.1f} ms" for d in measured]}'
    )


def test_every_frame_gets_a_result_and_none_is_dropped(graph):
    frames = 30
    source = graph.start_source(rate_mode='every_frame', max_frames=frames)
    assert graph.wait_for_results(frames, timeout_s=60.0), (
        f'{graph.monitor.final_report()}\n{graph.detection_status}\n{graph.output()}'
    )
    assert source.wait(timeout=15.0) == 0, graph.output()
    output = graph.processes.output(source)
    assert f'published {frames} frames' in output, output
    assert f'{frames} answered on people, 0 unanswered' in output, output
    summary = graph.monitor.summary
    assert summary.results == summary.frames_captured == frames
    assert summary.frames_without_result() == 0
    # The test's own image subscription may match after the first frame went out.
    assert graph.frames_seen >= frames - 1
    status = graph.detection_status
    assert int(status['frames_received']) == frames, status
    assert int(status.get('frames_dropped', 0)) == 0, status
