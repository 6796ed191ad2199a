# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The ``arise`` server mode over the real protocol: bad calls get clear errors.

An in-process edge server on loopback with CURVE keys, serving ``arise`` on ``tiny_cnn``.
"""

import time

import pytest
import torch

from arise_ros.client import AriseMembership, AriseSession, RobotTask
from edge_offload.errors import ServerRejectedError
from edge_offload_testing import free_tcp_port
from edge_offload_testing.offload import edge_client_for, loopback_edge_server, make_test_keys

OPTIONS = {'model': 'tiny_cnn', 'profile_image': [64, 64], 'max_batch': 2, 'period_s': 0.05}
JOIN = {'fps': 30.0, 'sla': 0.04, 'frame_id': 0, 'uplink_s': 0.004, 'downlink_s': 0.002}


@pytest.fixture
def server_and_client(tmp_path):
    keys = make_test_keys(tmp_path)
    server = loopback_edge_server(
        keys, models=['tiny_cnn'], modes=['arise'], mode_options={'arise': dict(OPTIONS)}
    )
    endpoint = server.start()
    client = edge_client_for(keys, endpoint)
    try:
        assert client.wait_connected(10.0)
        yield server, client
    finally:
        client.close()
        server.stop()


@pytest.fixture
def served(server_and_client):
    return server_and_client[1]


def _rejected(client, op: str, fields: dict, tensors=None) -> str:
    with pytest.raises(ServerRejectedError) as caught:
        client.call('arise', op, fields, tensors, timeout_s=5.0)
    return str(caught.value)


def test_calls_out_of_order_or_malformed_are_refused_with_the_reason(served):
    assert 'join before sending frames' in _rejected(
        served, 'infer', {'frame_id': 1}, {'image': torch.rand(1, 3, 64, 64)}
    )
    assert 'join before asking a plan' in _rejected(served, 'plan', {'after': 0})
    assert 'fps must be a number' in _rejected(served, 'join', {**JOIN, 'fps': 'fast'})
    assert 'fps must be > 0' in _rejected(served, 'join', {**JOIN, 'fps': -1.0})
    assert 'no op' in _rejected(served, 'teleport', {})
    assert served.call('arise', 'join', JOIN, timeout_s=5.0).fields['status'] == 'waiting'
    assert 'has joined' in _rejected(served, 'join', JOIN)
    assert 'drop_rate must be in [0, 1]' in _rejected(served, 'report', {'drop_rate': 3.0})
    assert 'needs a frame_id' in _rejected(
        served, 'infer', {}, {'image': torch.rand(1, 3, 64, 64)}
    )
    wrong = _rejected(served, 'infer', {'frame_id': 2}, {'image': torch.rand(1, 3, 32, 32)})
    assert 'invalid_input' in wrong


def test_a_robot_is_admitted_gets_a_plan_and_its_frames_back(served):
    session = AriseSession(served, RobotTask('r', 30.0, 0.04, 0.004, 0.002, drop_rate=0.003))
    assert session.join(0) == 'waiting'
    for _ in range(200):
        if session.status == 'admitted' and session.plan().frames:
            break
        time.sleep(0.05)
    plan = session.plan()
    assert session.status == 'admitted'
    assert plan.frames == sorted(plan.frames)
    frame = plan.frames[0]
    assert session.wants(frame)
    reply = session.offload(frame, {'image': torch.rand(1, 3, 64, 64)}, drop_rate=0.003).result(
        5.0
    )
    assert reply.fields['frame_id'] == frame
    assert reply.tensors['features'].shape == (1, 16)
    session.leave()
    assert session.status == 'left'


def test_unknown_options_stop_the_server_at_configure(tmp_path):
    keys = make_test_keys(tmp_path)
    with pytest.raises(ValueError, match='unknown arise options'):
        loopback_edge_server(
            keys, models=['tiny_cnn'], modes=['arise'], mode_options={'arise': {'speed': 9}}
        )
    with pytest.raises(ValueError, match='does not serve'):
        loopback_edge_server(keys, models=['tiny_cnn'], mode_options={'arise': {}})


def test_a_waiting_robot_is_not_taken_for_lost_while_its_long_polls_time_out(tmp_path):
    keys = make_test_keys(tmp_path)
    options = {**OPTIONS, 'period_s': 3.0}  # the scheduler runs at join, then every 3 s
    server = loopback_edge_server(
        keys, models=['tiny_cnn'], modes=['arise'], mode_options={'arise': options}
    )
    endpoint = server.start()
    first, second = edge_client_for(keys, endpoint), edge_client_for(keys, endpoint)
    try:
        assert first.wait_connected(10.0)
        assert second.wait_connected(10.0)
        task = RobotTask('r', 30.0, 0.04, 0.004, 0.002, drop_rate=0.003)
        assert AriseSession(first, task).join(0) == 'waiting'  # starts the scheduler
        time.sleep(0.3)
        late = AriseSession(second, task, poll_timeout_s=0.3)
        assert late.join(0) == 'waiting'
        time.sleep(1.5)  # several long polls come back with nothing new before the next run
        assert late.status == 'waiting'
        for _ in range(200):  # the next run is due 3 s after the first
            if late.status == 'admitted':
                break
            time.sleep(0.05)
        assert late.status == 'admitted'
    finally:
        first.close()
        second.close()
        server.stop()


def _statuses(server) -> dict:
    return {status.name: status for status in server.mode_diagnostics()}


def test_diagnostics_show_the_fleet_and_each_admitted_robot(server_and_client):
    server, client = server_and_client
    fleet = _statuses(server)['arise fleet']
    assert fleet.message == '0 robot(s) admitted, 0 waiting'
    assert fleet.values['latency profile'].startswith('measured at start-up')
    session = AriseSession(client, RobotTask('r1', 30.0, 0.04, 0.004, 0.002, 0.003))
    assert session.join(0) == 'waiting'
    deadline = time.monotonic() + 10.0
    while session.status != 'admitted' and time.monotonic() < deadline:
        time.sleep(0.05)
    statuses = _statuses(server)
    robot = statuses['arise robot r1']
    assert robot.level == 'ok', robot
    assert robot.message.startswith('admitted: every'), robot
    assert robot.values['sla'] == '0.0400'
    assert robot.values['interval (frames)'] == session.plan().interval
    assert float(robot.values['estimated drop']) <= 0.04
    assert statuses['arise fleet'].values['admitted'] == 1
    assert statuses['arise fleet'].values['admissions total'] == 1
    session.leave()
    assert 'arise robot r1' not in _statuses(server)


def _admitted_robot_that_sends_one_frame(client) -> AriseSession:
    session = AriseSession(client, RobotTask('r1', 30.0, 0.04, 0.004, 0.002, 0.003))
    session.join(0)
    deadline = time.monotonic() + 10.0
    while not (session.status == 'admitted' and session.plan().frames):
        assert time.monotonic() < deadline, session.status
        time.sleep(0.05)
    frame = session.plan().frames[0]
    image = {'image': torch.rand(1, 3, 64, 64)}
    session.offload(frame, image, drop_rate=0.003).result(5.0)
    return session


def test_a_robot_admitted_but_getting_no_results_shows_its_served_drop_over_its_sla(tmp_path):
    # Verify on the plan only: the served drop must show what the plan cannot.
    keys = make_test_keys(tmp_path)
    server = loopback_edge_server(
        keys,
        models=['tiny_cnn'],
        modes=['arise'],
        mode_options={'arise': {**OPTIONS, 'verify_past_s': 0.0}},
    )
    client = edge_client_for(keys, server.start())
    try:
        assert client.wait_connected(10.0)
        session = _admitted_robot_that_sends_one_frame(client)
        # A number once a frame of the robot's clock has passed since its admission.
        deadline = time.monotonic() + 5.0
        while _statuses(server)['arise robot r1'].values['served drop (last 10 s)'] == 'none yet':
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # Then it sends nothing: its plan still looks fine (the scheduler plans on what it
        # told the robot), but every frame it tracks drifts further from its last result.
        # At 0.003 a frame, 0.04 is about 14 frames of mean stride.
        deadline = time.monotonic() + 10.0
        while True:
            robot = _statuses(server)['arise robot r1']
            if robot.level == 'warn':
                break
            assert time.monotonic() < deadline, robot
            time.sleep(0.1)
        assert 'served drop' in robot.message, robot
        assert float(robot.values['served drop (last 10 s)']) > 0.04
        assert float(robot.values['estimated drop']) <= 0.04
        session.leave()
    finally:
        client.close()
        server.stop()


def test_a_robot_whose_results_stop_is_evicted_and_told_so(server_and_client):
    # By default verify weighs each robot's real results of the last 2 s: a robot that
    # gets none (here: it sends nothing more) no longer fits its SLA and makes room.
    server, client = server_and_client
    session = _admitted_robot_that_sends_one_frame(client)
    deadline = time.monotonic() + 10.0
    while session.status != 'evicted':
        assert time.monotonic() < deadline, session.status
        time.sleep(0.05)
    assert 'arise robot r1' not in _statuses(server)
    assert _statuses(server)['arise fleet'].values['evictions total'] == 1


def test_a_robot_started_before_its_server_runs_locally_then_joins_it(tmp_path):
    keys = make_test_keys(tmp_path)
    port = free_tcp_port()
    endpoint = f'tcp://127.0.0.1:{port}'
    statuses = []
    membership = AriseMembership(
        [endpoint],
        lambda at: edge_client_for(keys, at),
        RobotTask('early', 30.0, 0.04, 0.004, 0.002, 0.003),
        on_status=lambda status, reason: statuses.append(status),
        connect_timeout_s=0.3,
    )
    membership.start(0)  # returns: no server yet, the robot runs locally
    assert membership.status == 'lost'
    server = loopback_edge_server(
        keys,
        endpoint=endpoint,
        models=['tiny_cnn'],
        modes=['arise'],
        mode_options={'arise': dict(OPTIONS)},
    )
    server.start()
    try:
        deadline = time.monotonic() + 15.0
        while membership.status != 'admitted' and time.monotonic() < deadline:
            time.sleep(0.05)
        assert membership.status == 'admitted', statuses
        assert membership.endpoint == endpoint
    finally:
        membership.leave()
        server.stop()
