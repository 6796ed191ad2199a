# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The load balancer's choice: fresh servers with room first, bursts spread, the left one last."""

import pytest

from arise_ros.fleet_directory import FleetDirectory, ServerLoad


def _load(server_id: str, now: float, **values) -> ServerLoad:
    fields = {'admitted': 0, 'waiting': 0, 'idle_share': 1.0, 'max_clients': 8}
    fields.update(values)
    return ServerLoad(server_id, f'tcp://h:{server_id}', reported_s=now, **fields)


def test_servers_with_robots_waiting_come_after_those_with_idle_time():
    directory = FleetDirectory()
    directory.report(_load('a', 0.0, admitted=3, idle_share=0.2))
    directory.report(_load('b', 0.0, admitted=1, idle_share=0.7))
    directory.report(_load('c', 0.0, admitted=1, waiting=2, idle_share=0.9))
    assert directory.where(0.1) == ['tcp://h:b', 'tcp://h:a', 'tcp://h:c']


def test_a_server_that_stopped_reporting_or_is_full_gets_nobody():
    directory = FleetDirectory(stale_after_s=0.6)
    directory.report(_load('old', 0.0))
    directory.report(_load('full', 1.0, admitted=6, waiting=2))
    directory.report(_load('fresh', 1.0, idle_share=0.1))
    assert directory.where(1.0) == ['tcp://h:fresh']
    directory.mark_down('fresh')
    assert directory.where(1.0) == []


def test_a_burst_of_robots_spreads_over_equal_servers():
    directory = FleetDirectory()
    for name in ('a', 'b'):
        directory.report(_load(name, 0.0, idle_share=0.5))
    firsts = [directory.where(0.1)[0] for _ in range(4)]
    assert sorted(firsts) == ['tcp://h:a', 'tcp://h:a', 'tcp://h:b', 'tcp://h:b']


def test_the_server_a_robot_leaves_is_tried_last_not_dropped():
    directory = FleetDirectory()
    directory.report(_load('a', 0.0, idle_share=0.9))
    directory.report(_load('b', 0.0, idle_share=0.1))
    assert directory.where(0.1, avoid='tcp://h:a') == ['tcp://h:b', 'tcp://h:a']
    directory.mark_down('b')
    assert directory.where(0.1, avoid='tcp://h:a') == ['tcp://h:a']


def test_bad_reports_and_too_many_servers_are_refused():
    with pytest.raises(ValueError, match='idle share'):
        _load('a', 0.0, idle_share=1.5)
    with pytest.raises(ValueError, match='bad counts'):
        _load('a', 0.0, admitted=-1)
    directory = FleetDirectory(max_servers=1)
    directory.report(_load('a', 0.0))
    directory.report(_load('a', 1.0))  # a new report of a known server is fine
    with pytest.raises(ValueError, match='holds 1 servers'):
        directory.report(_load('b', 0.0))
