# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Before the source starts, the runner checks that people detection is connected.

Fast DDS can leave two processes half-discovered under load: frames reach people detection
but its results or its front-end requests go nowhere. The runner holds the source until
people detection's status shows its links, and restarts it when they stay down.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue

from people_following import graph_runner
from people_following.graph import GraphNode

CONNECTED = {'offload_server_seen': 'True', 'people_subscribers_matched': '2'}


def test_connected_people_detection_misses_nothing():
    assert graph_runner.missing_links(CONNECTED, 2, 1) == []


@pytest.mark.parametrize(
    ('values', 'in_graph', 'monitor_matched', 'expected'),
    [
        ({**CONNECTED, 'offload_server_seen': 'False'}, 2, 1, 'offload action server'),
        ({**CONNECTED, 'people_subscribers_matched': '1'}, 2, 1, 'matched to 1 of the 2'),
        (CONNECTED, 2, 0, 'matched to no publisher'),
        # A status from before these values were reported counts as not connected.
        ({}, 1, 1, 'offload action server'),
        ({**CONNECTED, 'people_subscribers_matched': 'n/a'}, 1, 1, 'matched to 0 of the 1'),
    ],
)
def test_each_missing_link_is_named(values, in_graph, monitor_matched, expected):
    missing = graph_runner.missing_links(values, in_graph, monitor_matched)
    assert len(missing) >= 1
    assert any(expected in reason for reason in missing), missing


class _Statuses:
    """A status watch whose people detection status the test sets."""

    def __init__(self) -> None:
        self.values: dict[str, str] | None = None
        self.forgotten = 0

    def find(self, part: str) -> DiagnosticStatus | None:
        if self.values is None:
            return None
        values = [KeyValue(key=k, value=v) for k, v in self.values.items()]
        return DiagnosticStatus(name=f'people_detection: {part}', values=values)

    def forget(self, part: str) -> None:  # noqa: ARG002 - as _StatusWatch.forget
        self.values = None
        self.forgotten += 1


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])


def _graph(statuses: _Statuses, monitor_matched: int = 1) -> graph_runner._Graph:
    graph = graph_runner._Graph.__new__(graph_runner._Graph)
    subscription = SimpleNamespace(
        topic_name='/people', get_publisher_count=lambda: monitor_matched
    )
    monitor = SimpleNamespace(people_subscription=subscription, count_subscribers=lambda _: 2)
    graph.plan = SimpleNamespace(
        nodes=(GraphNode('people_detection', 'people_following', 'x:Y', own_process=True),)
    )
    graph.ros_arguments = []
    graph.composed = {'tracking_monitor': monitor}
    graph.status_watch = statuses
    graph.processes = {'people_detection': _sleeper()}
    graph.logger = SimpleNamespace(warning=lambda text: graph.warnings.append(text))
    graph.warnings = []
    return graph


def _stop_all(graph: graph_runner._Graph, started: list[subprocess.Popen]) -> None:
    for process in [*started, *graph.processes.values()]:
        process.kill()
        process.wait()


def test_the_source_waits_for_a_connected_people_detection(monkeypatch):
    monkeypatch.setattr(graph_runner, 'LINKS_TIMEOUT_S', 30.0)
    statuses = _Statuses()
    graph = _graph(statuses)
    statuses.values = {**CONNECTED, 'offload_server_seen': 'False'}
    waiting = threading.Thread(
        target=graph.await_people_detection_links, args=(threading.Event(),)
    )
    waiting.start()
    time.sleep(0.5)
    assert waiting.is_alive()  # not connected yet: the source is held
    statuses.values = CONNECTED
    waiting.join(timeout=5.0)
    assert not waiting.is_alive()
    assert graph.warnings == []
    _stop_all(graph, [])


def test_people_detection_that_stays_disconnected_is_restarted_then_given_up_on(monkeypatch):
    monkeypatch.setattr(graph_runner, 'LINKS_TIMEOUT_S', 0.3)
    started: list[subprocess.Popen] = []

    def start(module: str, arguments: list[str]) -> subprocess.Popen:  # noqa: ARG001
        started.append(_sleeper())
        statuses.values = {**CONNECTED, 'people_subscribers_matched': '0'}  # its new status
        return started[-1]

    monkeypatch.setattr(graph_runner, '_start_node_process', start)
    statuses = _Statuses()
    statuses.values = {**CONNECTED, 'people_subscribers_matched': '0'}
    graph = _graph(statuses)
    first = graph.processes['people_detection']
    graph.await_people_detection_links(threading.Event())

    assert len(started) == graph_runner.LINK_RESTARTS
    assert statuses.forgotten == graph_runner.LINK_RESTARTS  # the old status is not reused
    assert first.poll() is not None  # the disconnected process was stopped
    assert graph.processes['people_detection'] is started[-1]
    assert 'restarting it' in graph.warnings[0]
    assert 'matched to 0 of the 2' in graph.warnings[0]
    assert 'starting the source anyway' in graph.warnings[-1]
    _stop_all(graph, started)


def test_a_restart_that_connects_lets_the_source_start(monkeypatch):
    monkeypatch.setattr(graph_runner, 'LINKS_TIMEOUT_S', 0.3)
    started: list[subprocess.Popen] = []

    def start(module: str, arguments: list[str]) -> subprocess.Popen:  # noqa: ARG001
        started.append(_sleeper())
        statuses.values = CONNECTED
        return started[-1]

    monkeypatch.setattr(graph_runner, '_start_node_process', start)
    statuses = _Statuses()
    statuses.values = {**CONNECTED, 'offload_server_seen': 'False'}
    graph = _graph(statuses)
    graph.await_people_detection_links(threading.Event())

    assert len(started) == 1
    assert len(graph.warnings) == 1
    _stop_all(graph, started)


def test_a_stop_request_ends_the_wait(monkeypatch):
    monkeypatch.setattr(graph_runner, 'LINKS_TIMEOUT_S', 30.0)
    statuses = _Statuses()  # no status at all
    graph = _graph(statuses)
    stop = threading.Event()
    stop.set()
    graph.await_people_detection_links(stop)
    assert graph.warnings == []
    _stop_all(graph, [])
