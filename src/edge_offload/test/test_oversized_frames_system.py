# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Oversized and unfit frames on the robot, with the real nodes as processes over DDS.

Edge server, offload bridge (``nnto``) and people detection run as processes; this test
is the camera and an action client.

* A 192 MB frame (8000x8000 rgb8) published to people detection is refused by its header,
  with the reason in ``/diagnostics``; the node's resident memory is back within 10 MB of
  what it was (Fast DDS's reassembly buffer is given back by recreating the subscription),
  the bridge never sees the frame, and the next good frame is detected promptly, offloaded.
* The same frame sent straight to the bridge as a goal ends with ``ERROR_INPUT_TOO_LARGE``
  and the reason; the bridge's memory is back within 10 MB too (it recreates its action
  server when goals are quiet), and the next good goal is offloaded at once.
* A 1x100000 frame (an OpenCV assertion inside the model before) and a 4000x4000 frame (a
  server timeout, then a local run, for the next good frame before) are refused by the
  model's declared input sizes before the model runs, on the robot: the server never sees
  them.
"""

from __future__ import annotations

import time

import cv2
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.action import ActionClient
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image

from edge_offload.assets import asset_path
from edge_offload.image_convert import cv2_to_imgmsg
from edge_offload_testing import (
    edge_server_node_command,
    free_tcp_port,
    make_test_keys,
    node_command,
    offload_bridge_node_command,
    prime_action_client,
    resident_memory_bytes,
    spin_until,
    wait_for_bridge_connection,
)
from offload_interfaces.action import Offload
from offload_interfaces.msg import PersonArray

MODEL = 'blazepose_people'
HUGE = (8000, 8000)  # rgb8: 192,000,000 bytes, three times max_image_bytes
# What the issue measured: a node's resident memory may grow this much for a refused frame.
MAX_GROWTH_BYTES = 10_000_000
# A good frame after a refused one is answered this fast (the issue saw 13.2 s).
PROMPT_S = 5.0
# How long a node may take to give the memory back (Fast DDS's buffer goes with its
# reader, which the nodes recreate on their next timer tick / when goals are quiet).
RELEASE_WITHIN_S = 15.0


def _frame() -> Image:
    capture = cv2.VideoCapture(str(asset_path('media/opencv/vtest.avi')))
    ok, frame = capture.read()
    capture.release()
    assert ok, 'vtest.avi has no frame'
    return cv2_to_imgmsg(frame, 'bgr8')


def _blank(height: int, width: int) -> Image:
    message = Image(height=height, width=width, encoding='rgb8', step=width * 3)
    message.data = bytes(height * width * 3)
    return message


def _values(array: DiagnosticArray, name: str) -> dict[str, str] | None:
    for status in array.status:
        if status.name == name:
            return {value.key: value.value for value in status.values}
    return None


class _Diagnostics:
    """The latest values of one diagnostic status on /diagnostics."""

    def __init__(self, node: Node, name: str) -> None:
        self.name = name
        self.latest: dict[str, str] = {}
        node.create_subscription(DiagnosticArray, '/diagnostics', self._on_message, 10)

    def _on_message(self, array: DiagnosticArray) -> None:
        values = _values(array, self.name)
        if values is not None:
            self.latest = values

    def count(self, key: str) -> int:
        return int(self.latest.get(key, '0'))


def _settle_rss(executor, pid: int, seconds: float = 2.0) -> int:
    spin_until(executor, lambda: False, seconds)
    return resident_memory_bytes(pid)


def _wait_rss_back(executor, pid: int, baseline: int) -> tuple[bool, int]:
    """Spin until ``pid``'s RSS is within MAX_GROWTH_BYTES of ``baseline``; return the peak."""
    peak = resident_memory_bytes(pid)

    def back() -> bool:
        nonlocal peak
        rss = resident_memory_bytes(pid)
        peak = max(peak, rss)
        return rss - baseline <= MAX_GROWTH_BYTES

    return spin_until(executor, back, RELEASE_WITHIN_S, poll_s=0.2), peak


@pytest.fixture
def edge(tmp_path, ros_processes):
    """Start the edge server and the bridge (nnto, no fallback: offloading must work)."""
    keys = make_test_keys(tmp_path / 'keys')
    port = free_tcp_port()
    server = ros_processes.start(edge_server_node_command(port, keys, [MODEL]), name='edge_server')
    bridge = ros_processes.start(
        offload_bridge_node_command(port, keys, [MODEL], mode='nnto', fallback_to_local=False),
        name='offload_bridge',
    )
    return server, bridge


def test_people_detection_refuses_a_192_mb_frame_and_gives_its_memory_back(
    edge, ros_context, ros_executor, ros_processes
):
    server, bridge = edge
    detection = ros_processes.start(
        node_command(
            'people_following.people_detection_node',
            model=MODEL,
            # Per frame: every good frame is one goal, which the checks below count.
            tracking=False,
            reliable_sensor_qos=True,
            diagnostics_period_s=0.2,
        ),
        name='people_detection',
    )
    node = Node('oversized_frames_test', context=ros_context)
    ros_executor.add_node(node)
    people: list[tuple[float, PersonArray]] = []
    node.create_subscription(
        PersonArray, 'people', lambda message: people.append((time.monotonic(), message)), 10
    )
    diagnostics = _Diagnostics(node, 'people_detection: people detection')
    camera = node.create_publisher(
        Image, 'image_raw', QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
    )
    assert wait_for_bridge_connection(ros_executor, node), ros_processes.output(bridge)
    assert spin_until(ros_executor, lambda: camera.get_subscription_count() > 0, 30.0), (
        ros_processes.output(detection)
    )
    good = _frame()

    def detect_good_frame() -> float:
        """Publish the good frame (again every 0.5 s) until people come; return the delay."""
        before, started = len(people), time.monotonic()
        while time.monotonic() - started < 30.0:
            camera.publish(good)
            if spin_until(ros_executor, lambda: len(people) > before, 0.5):
                return people[-1][0] - started
        raise AssertionError('no people for a good frame:\n' + ros_processes.output(detection))

    for _ in range(3):  # warm-up: first runs allocate
        detect_good_frame()
    detection_rss = _settle_rss(ros_executor, detection.pid)
    bridge_rss = resident_memory_bytes(bridge.pid)
    assert spin_until(
        ros_executor,
        lambda: diagnostics.latest.get('in_flight') == '0' and diagnostics.latest['queued'] == '0',
        10.0,
    )
    goals_before = diagnostics.count('goals_sent')

    camera.publish(_blank(*HUGE))
    assert spin_until(ros_executor, lambda: diagnostics.count('frames_too_large') >= 1, 60.0), (
        ros_processes.output(detection)
    )
    reason = diagnostics.latest['last_refusal_reason']
    assert '8000x8000 rgb8' in reason, reason
    assert '192000000 bytes' in reason, reason
    assert 'max_image_bytes' in reason, reason
    assert 'frame refused before processing' in ros_processes.output(detection)
    released, peak = _wait_rss_back(ros_executor, detection.pid, detection_rss)
    final = resident_memory_bytes(detection.pid)
    assert released, (
        f'people_detection RSS {detection_rss / 1e6:.0f} MB before the 192 MB frame, '
        f'{final / 1e6:.0f} MB {RELEASE_WITHIN_S:.0f} s after it (peak {peak / 1e6:.0f} MB)'
    )
    assert spin_until(
        ros_executor, lambda: diagnostics.count('image_subscription_releases') >= 1, 10.0
    )
    # The frame never went on to the bridge.
    assert diagnostics.count('goals_sent') == goals_before
    assert resident_memory_bytes(bridge.pid) - bridge_rss <= MAX_GROWTH_BYTES

    # The next good frame is detected promptly, offloaded.
    delay = detect_good_frame()
    assert delay < PROMPT_S, f'the good frame after the refused one took {delay:.1f} s'
    assert people[-1][1].offload_mode == 'nnto'

    # A frame the model cannot take is refused by the model's declared sizes, unsent.
    camera.publish(_blank(1, 100_000))
    assert spin_until(ros_executor, lambda: diagnostics.count('frames_refused') >= 1, 30.0), (
        ros_processes.output(detection)
    )
    reason = diagnostics.latest['last_refusal_reason']
    assert '100000x1 has a side over 4096 px' in reason, reason
    assert diagnostics.count('errors') == 0
    assert 'Assertion failed' not in ros_processes.output(server)
    node.destroy_node()


def test_bridge_refuses_oversized_and_unfit_goals_before_the_model_runs(
    edge, ros_context, ros_executor, ros_processes
):
    server, bridge = edge
    node = Node('oversized_goals_test', context=ros_context)
    ros_executor.add_node(node)
    diagnostics = _Diagnostics(node, 'offload_bridge: offloading')
    client = ActionClient(node, Offload, 'offload')
    assert wait_for_bridge_connection(ros_executor, node), ros_processes.output(bridge)
    assert spin_until(ros_executor, client.server_is_ready, 30.0), ros_processes.output(bridge)
    good = _frame()

    def goal(image: Image) -> Offload.Goal:
        return Offload.Goal(model=MODEL, images=[image], image_input_names=['image'])

    def run(image: Image, timeout_s: float = 60.0) -> tuple[float, Offload.Result]:
        started = time.monotonic()
        sent = client.send_goal_async(goal(image))
        assert spin_until(ros_executor, sent.done, timeout_s), 'goal never answered'
        handle = sent.result()
        assert handle.accepted
        result = handle.get_result_async()
        assert spin_until(ros_executor, result.done, timeout_s), 'result never came'
        return time.monotonic() - started, result.result().result

    prime_action_client(ros_executor, client, goal(good))
    for _ in range(2):  # warm-up
        _, result = run(good)
        assert result.error_code == Offload.Result.ERROR_NONE, result.error_message
        assert result.mode_used == 'nnto'
        assert not result.fell_back
    bridge_rss = _settle_rss(ros_executor, bridge.pid)

    _, result = run(_blank(*HUGE))
    assert result.error_code == Offload.Result.ERROR_INPUT_TOO_LARGE
    assert '192000000 bytes' in result.error_message, result.error_message
    assert 'max_image_bytes' in result.error_message, result.error_message

    for size, words in [((1, 100_000), 'a side over 4096 px'), ((4000, 4000), 'pixels, over')]:
        elapsed, result = run(_blank(*size))
        assert result.error_code == Offload.Result.ERROR_INVALID_INPUT, result.error_message
        assert f"input 'image' of '{MODEL}' takes images of sides" in result.error_message
        assert words in result.error_message, result.error_message
        assert elapsed < PROMPT_S, f'{size} was refused after {elapsed:.1f} s'

    released, peak = _wait_rss_back(ros_executor, bridge.pid, bridge_rss)
    final = resident_memory_bytes(bridge.pid)
    assert released, (
        f'offload_bridge RSS {bridge_rss / 1e6:.0f} MB before the 192 MB goal, '
        f'{final / 1e6:.0f} MB {RELEASE_WITHIN_S:.0f} s after it (peak {peak / 1e6:.0f} MB)'
    )
    # The next good goal: offloaded, at once (the recreated action server answers it).
    assert spin_until(ros_executor, client.server_is_ready, 10.0)
    elapsed, result = run(good, timeout_s=PROMPT_S)
    assert result.error_code == Offload.Result.ERROR_NONE, result.error_message
    assert result.mode_used == 'nnto'
    assert not result.fell_back
    assert elapsed < PROMPT_S

    assert spin_until(
        ros_executor,
        lambda: (
            diagnostics.count('inputs_too_large') == 1
            and diagnostics.count('inputs_refused') == 2
            and diagnostics.count('action_server_releases') >= 1
        ),
        10.0,
    ), diagnostics.latest
    assert 'refused a goal' in ros_processes.output(bridge)
    # The model never ran on them: no OpenCV assertion, on the server or on the robot.
    assert 'Assertion failed' not in ros_processes.output(server)
    assert 'Assertion failed' not in ros_processes.output(bridge)
    client.destroy()
    node.destroy_node()
