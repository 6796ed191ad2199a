# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""FairScheduler: least worker time first, a worker kept for the others, bounded queues."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_offload.fair_scheduler import FairScheduler, QueueFullError, SchedulerClosedError


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _scheduler(workers=2, queued=8):
    clock = FakeClock()
    return FairScheduler(workers, queued, clock=clock), clock


def test_one_robot_alone_uses_every_worker():
    scheduler, _ = _scheduler(workers=2)
    scheduler.connect('heavy')
    scheduler.put('heavy', 1)
    scheduler.put('heavy', 2)
    first = scheduler.take(timeout_s=0)
    second = scheduler.take(timeout_s=0)
    assert (first.item, second.item) == (1, 2)


def test_a_worker_stays_free_for_others_while_several_robots_are_connected():
    scheduler, _ = _scheduler(workers=2)
    scheduler.connect('heavy')
    scheduler.connect('light')
    for item in range(4):
        scheduler.put('heavy', item)
    running = scheduler.take(timeout_s=0)
    assert running.client == 'heavy'
    # The heavy robot has one worker; the second stays free although it has work queued.
    assert scheduler.take(timeout_s=0) is None
    scheduler.put('light', 'x')
    ticket = scheduler.take(timeout_s=0)
    assert (ticket.client, ticket.item) == ('light', 'x')


def test_least_worker_time_goes_first():
    scheduler, clock = _scheduler(workers=1)
    scheduler.connect('heavy')
    scheduler.connect('light')
    scheduler.put('heavy', 'h1')
    ticket = scheduler.take(timeout_s=0)
    clock.now += 5.0  # a five-second call
    scheduler.put('heavy', 'h2')
    scheduler.put('light', 'l1')
    scheduler.put('light', 'l2')
    assert scheduler.finish(ticket) == pytest.approx(5.0)
    order = []
    for _ in range(3):
        ticket = scheduler.take(timeout_s=0)
        order.append(ticket.item)
        clock.now += 0.1
        scheduler.finish(ticket)
    assert order == ['l1', 'l2', 'h2']


def test_idle_robots_bank_no_credit():
    scheduler, clock = _scheduler(workers=1)
    scheduler.connect('a')
    scheduler.connect('b')
    # a works for 10 s while b is idle; b then arrives and must not get 10 s of priority.
    for _ in range(10):
        scheduler.put('a', 'a')
        ticket = scheduler.take(timeout_s=0)
        clock.now += 1.0
        scheduler.finish(ticket)
    scheduler.put('a', 'a')
    for _ in range(3):
        scheduler.put('b', 'b')
    order = []
    for _ in range(4):
        ticket = scheduler.take(timeout_s=0)
        order.append(ticket.item)
        clock.now += 1.0
        scheduler.finish(ticket)
        if ticket.item == 'a':
            scheduler.put('a', 'a')
    assert order.count('a') >= 1, f'robot a was starved by banked credit: {order}'


def test_running_calls_count_towards_worker_time():
    scheduler, clock = _scheduler(workers=3)
    scheduler.connect('heavy')
    scheduler.connect('light')
    scheduler.put('heavy', 'h1')
    scheduler.take(timeout_s=0)
    clock.now += 3.0  # still running
    scheduler.put('heavy', 'h2')
    scheduler.put('light', 'l1')
    assert scheduler.take(timeout_s=0).item == 'l1'


def test_queues_are_bounded_per_robot():
    scheduler, _ = _scheduler(queued=2)
    scheduler.put('a', 1)
    scheduler.put('a', 2)
    with pytest.raises(QueueFullError):
        scheduler.put('a', 3)
    scheduler.put('b', 1)  # another robot's queue is its own


def test_disconnect_drops_the_last_sessions_queue_and_close_wakes_workers():
    scheduler, _ = _scheduler()
    scheduler.connect('a')
    scheduler.connect('a')
    scheduler.put('a', 1)
    assert scheduler.disconnect('a') == []  # one session of a is still open
    assert scheduler.disconnect('a') == [1]
    scheduler.put('b', 2)
    woke = []
    waiter = threading.Thread(target=lambda: woke.append(scheduler.take()))
    scheduler.take(timeout_s=0)  # takes b's call
    waiter.start()
    assert scheduler.close() == []
    waiter.join(timeout=2.0)
    assert woke == [None]
    with pytest.raises(SchedulerClosedError):
        scheduler.put('a', 3)


@settings(max_examples=200, deadline=None)
@given(
    workers=st.integers(1, 4),
    steps=st.lists(
        st.tuples(st.sampled_from(['put', 'take', 'finish', 'tick']), st.integers(0, 2)),
        max_size=60,
    ),
)
def test_never_more_running_than_workers_and_no_call_lost(workers, steps):
    scheduler, clock = _scheduler(workers=workers, queued=4)
    clients = ['a', 'b', 'c']
    for client in clients:
        scheduler.connect(client)
    running = []
    put = taken = 0
    for action, index in steps:
        client = clients[index]
        if action == 'put':
            try:
                scheduler.put(client, (client, put))
                put += 1
            except QueueFullError:
                assert scheduler.queued(client) == 4
        elif action == 'take':
            ticket = scheduler.take(timeout_s=0)
            if ticket is not None:
                running.append(ticket)
                taken += 1
        elif action == 'finish' and running:
            scheduler.finish(running.pop(index % len(running)))
        else:
            clock.now += 0.5
        assert len(running) <= workers
        busy = {ticket.client for ticket in running}
        if workers > 1:
            for name in busy:
                assert scheduler.running(name) <= workers - 1
        assert put == taken + scheduler.queued()
    # Work-conserving: once everything finishes, every queued call is handed out.
    for ticket in running:
        scheduler.finish(ticket)
    while (ticket := scheduler.take(timeout_s=0)) is not None:
        scheduler.finish(ticket)
        taken += 1
    assert put == taken
