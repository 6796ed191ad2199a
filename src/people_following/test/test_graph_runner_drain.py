# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""After its source ends, the runner waits for a graph that has not answered yet."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from people_following import graph_runner
from people_following.tracking_monitor_node import Summary


def _results_when_the_wait_returns(
    summary: Summary, published: int, answer: Callable[[], None]
) -> int:
    """Wait for ``published`` frames' results while ``answer`` runs; return the count then."""
    answering = threading.Thread(target=answer)
    answering.start()
    graph_runner._await_last_results(
        summary, published, time.monotonic() + 10.0, threading.Event()
    )
    results_when_it_returned = summary.results
    answering.join()
    return results_when_it_returned


def test_a_graph_without_results_gets_until_the_deadline(monkeypatch):
    monkeypatch.setattr(graph_runner, '_RESULTS_QUIET_S', 0.05)
    summary = Summary(frames_captured=5)

    def first_result_late() -> None:
        time.sleep(0.3)  # six quiet periods: a starting graph, not a stopped one
        summary.results = 5

    assert _results_when_the_wait_returns(summary, 5, first_result_late) == 5


def test_results_that_stop_end_the_wait_before_the_deadline(monkeypatch):
    monkeypatch.setattr(graph_runner, '_RESULTS_QUIET_S', 0.05)
    summary = Summary(frames_captured=5, results=2)
    deadline = time.monotonic() + 10.0
    graph_runner._await_last_results(summary, 5, deadline, threading.Event())
    # Dropped frames never get a result: the wait ends on the quiet period, not the deadline.
    assert time.monotonic() < deadline


def test_frames_the_monitor_has_not_counted_yet_are_waited_for(monkeypatch):
    # A replay at full speed ends before the monitor's callbacks have run: it has counted
    # no frame, but the source published 12, so their results are waited for.
    monkeypatch.setattr(graph_runner, '_RESULTS_QUIET_S', 0.05)
    summary = Summary()

    def frames_then_results_late() -> None:
        time.sleep(0.2)
        summary.frames_captured = 12
        time.sleep(0.2)
        summary.results = 12

    assert _results_when_the_wait_returns(summary, 12, frames_then_results_late) == 12


def test_a_node_that_exits_ends_the_wait_before_the_deadline():
    summary = Summary(frames_captured=5)
    deadline = time.monotonic() + 10.0
    graph_runner._await_last_results(summary, 5, deadline, threading.Event(), lambda: True)
    assert time.monotonic() < deadline - 5.0


def test_a_run_without_results_reports_the_graphs_last_statuses(ros_context, ros_executor):
    watch = graph_runner._StatusWatch(context=ros_context)
    node = Node('publisher', context=ros_context)
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    publisher = node.create_publisher(DiagnosticArray, '/diagnostics', qos)
    ros_executor.add_node(watch)
    ros_executor.add_node(node)
    statuses = [
        DiagnosticStatus(
            name='people_detection: people detection',
            message=message,
            values=[KeyValue(key='frames_received', value=received)],
        )
        for message, received in (('ok', '3'), ('2 frames dropped (inference busy)', '12'))
    ]
    unrelated = DiagnosticStatus(name='tracking_monitor: camera', message='ok')
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and not watch.report():
        publisher.publish(DiagnosticArray(status=[statuses[0], unrelated]))
        ros_executor.spin_once(timeout_sec=0.1)
    publisher.publish(DiagnosticArray(status=[statuses[1]]))
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and 'frames_received 12' not in ''.join(watch.report()):
        ros_executor.spin_once(timeout_sec=0.1)

    # The newest status of each matching name, and nothing else.
    assert watch.report() == [
        'people_detection: people detection: 2 frames dropped (inference busy) '
        '(frames_received 12)'
    ]
    node.destroy_node()
    watch.destroy_node()
