# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Both sides' runners in threads, joined by in-memory senders and mailboxes."""

import random
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from lopinfer_ros.graph import capture
from lopinfer_ros.locality import analyse
from lopinfer_ros.problem import Plan
from lopinfer_ros.runtime import LopAbortedError, Mailbox, Sender, SideRunner, expected_receives
from lopinfer_ros.schedule import ROBOT, SERVER, make_schedule

# The test folder is not a package: the helpers sit beside this file.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan_fixtures import random_plan  # noqa: E402


def _net():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, 2, 1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.Conv2d(8, 8, 3, 1, 1, groups=2),
        nn.MaxPool2d(3, 2, 1),
        nn.Conv2d(8, 4, 1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, 3),
    ).eval()


def _run_both(graph, infos, plan, x, *, fail_server_at=None, deadline_s=10.0):
    schedule = make_schedule(graph, infos, plan)
    robot_box = Mailbox(expected_receives(schedule, ROBOT))
    server_box = Mailbox(expected_receives(schedule, SERVER))

    def deliver(box):
        def send(batch):
            for item in batch:
                box.put(item)

        return send

    robot_sender = Sender(deliver(server_box), 1000)
    server_sender = Sender(deliver(robot_box), 1000)
    deadline = time.monotonic() + deadline_s
    server = SideRunner(
        graph, infos, schedule, SERVER, mailbox=server_box, sender=server_sender, deadline=deadline
    )
    errors = []

    def serve():
        try:
            if fail_server_at is not None:
                robot_box.fail(f'server failed at node {fail_server_at}')
                return
            server.run()
            server_sender.close()
        except LopAbortedError as error:
            errors.append(error)

    thread = threading.Thread(target=serve)
    thread.start()
    robot = SideRunner(
        graph,
        infos,
        schedule,
        ROBOT,
        mailbox=robot_box,
        sender=robot_sender,
        slowdown=1.5,
        deadline=deadline,
    )
    try:
        return robot.run([x]), robot.stats, server.stats
    finally:
        robot_sender.close()
        server_box.fail('robot finished')
        thread.join(5)


@pytest.mark.parametrize('seed', range(8))
def test_threaded_sides_match_the_whole_graph(seed):
    model = _net()
    x = torch.randn(1, 3, 20, 36)
    graph = capture(model, [x])
    infos = analyse(graph)
    expected = graph.run([x])[0]
    plan = random_plan(infos, random.Random(seed))
    (got,), robot_stats, server_stats = _run_both(graph, infos, plan, x)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    schedule = make_schedule(graph, infos, plan)
    assert robot_stats.slices_sent == sum(1 for a, b in schedule.up if b > a)
    assert robot_stats.emulated_wait_s > 0 or not any(b > a for a, b in schedule.robot[1:])


class _Positive(nn.Module):
    lopinfer_opaque = True

    def forward(self, x):
        flat = x.flatten()
        return flat[flat > 0]


class _ConvPositive(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.conv = nn.Conv2d(3, 2, 3, padding=1)
        self.positive = _Positive()

    def forward(self, x):
        return self.positive(self.conv(x)) * 2


def test_data_dependent_sizes_cross_the_link_between_frames():
    """The graph is captured on one frame; later frames keep fewer or more values."""
    model = _ConvPositive().eval()
    graph = capture(model, [torch.randn(1, 3, 8, 12)])
    infos = analyse(graph)
    opaque = next(n.index for n in graph.nodes if n.op.startswith('opaque:'))
    for seed in range(6):
        plan = random_plan(infos, random.Random(seed))
        m, r = list(plan.m), list(plan.r)
        m[opaque] = r[opaque] = seed % 2  # NMS-like step on the robot, then on the server
        m[-1] = r[-1] = 1 - seed % 2  # its consumer on the other side
        x = torch.randn(1, 3, 8, 12)
        (got,), _, _ = _run_both(graph, infos, Plan(tuple(m), tuple(r)), x)
        expected = model(x)
        assert got.shape == expected.shape
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def test_server_failure_aborts_the_robot_with_a_reason():
    model = _net()
    x = torch.randn(1, 3, 20, 36)
    graph = capture(model, [x])
    infos = analyse(graph)
    server_only = Plan(
        tuple(info.width if i == 0 else 0 for i, info in enumerate(infos)),
        tuple(info.width if i == 0 else 0 for i, info in enumerate(infos)),
    )
    with pytest.raises(LopAbortedError, match='server failed'):
        _run_both(graph, infos, server_only, x, fail_server_at=3)


def test_missing_slice_times_out():
    box = Mailbox(1)
    with pytest.raises(LopAbortedError, match='in time'):
        box.take(3, time.monotonic() + 0.05)


def test_mailbox_refuses_duplicates_and_extras():
    from lopinfer_ros.runtime import Slice

    box = Mailbox(1)
    box.put(Slice(1, 0, 2, torch.zeros(2)))
    box.put(Slice(2, 0, 2, torch.zeros(2)))
    with pytest.raises(LopAbortedError, match='unexpected slice'):
        box.take(5, time.monotonic() + 1)
