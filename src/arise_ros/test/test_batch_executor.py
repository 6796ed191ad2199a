# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The batch executor: planned batches wait for their members, reactive ones do not."""

import threading
import time

import pytest
import torch

from arise_ros.batch_executor import BatchExecutor, ExecutorBusyError
from arise_ros.latency_profile import BatchLatencyProfile
from arise_ros.scheduler import Batch, Request

PROFILE = BatchLatencyProfile('m', {1: 0.01, 2: 0.012, 3: 0.014, 4: 0.016}, 'test')


class Recorder:
    """A run_batch that doubles each input and records the batches it ran."""

    def __init__(self, hold: threading.Event | None = None) -> None:
        self.batches: list[list[float]] = []
        self.hold = hold
        self.started = threading.Event()

    def __call__(self, requests):
        self.started.set()
        if self.hold is not None:
            self.hold.wait(5.0)
        self.batches.append([float(r['x']) for r in requests])
        return [{'y': r['x'] * 2} for r in requests]


def _x(value: float) -> dict:
    return {'x': torch.tensor(value)}


def _planned(members: list[str], start_s: float) -> Batch:
    requests = tuple(Request(client, 0, start_s) for client in members)
    latency = PROFILE.latency(len(members))
    return Batch(start_s, latency, latency * 1.1, requests)


def test_reactive_batches_whatever_waits_when_the_executor_is_free():
    hold = threading.Event()
    recorder = Recorder(hold)
    executor = BatchExecutor(recorder, max_batch=3, policy='reactive')
    try:
        first = executor.submit('a', 0, _x(1))
        assert recorder.started.wait(5.0)  # the first batch is running (held)
        rest = [executor.submit(c, 0, _x(v)) for c, v in (('b', 2), ('c', 3), ('d', 4), ('e', 5))]
        hold.set()
        answers = [f.result(5.0)['y'].item() for f in (first, *rest)]
    finally:
        executor.close()
    assert answers == [2, 4, 6, 8, 10]
    assert recorder.batches == [[1.0], [2.0, 3.0, 4.0], [5.0]]
    assert executor.stats.batches == 3
    assert executor.stats.mean_batch_size == pytest.approx(5 / 3)


def test_a_planned_batch_waits_for_its_members_then_runs_them_together():
    recorder = Recorder()
    executor = BatchExecutor(recorder, 4, 'planned', profile=PROFILE)
    try:
        executor.set_plan([_planned(['a', 'b'], time.monotonic() + 5.0)])
        first = executor.submit('a', 7, _x(1))
        time.sleep(0.1)
        assert recorder.batches == [], 'a planned batch does not run without all its members'
        second = executor.submit('b', 9, _x(2))
        assert first.result(5.0)['y'].item() == 2
        assert second.result(5.0)['y'].item() == 4
    finally:
        executor.close()
    assert recorder.batches == [[1.0, 2.0]]
    assert executor.stats.late_requests == 0


def test_a_planned_batch_runs_without_a_late_member_after_its_grace_period():
    recorder = Recorder()
    executor = BatchExecutor(recorder, 4, 'planned', profile=PROFILE, grace_fraction=0.1)
    try:
        executor.set_plan([_planned(['a', 'b'], time.monotonic() + 0.05)])
        assert executor.submit('a', 7, _x(1)).result(5.0)['y'].item() == 2
    finally:
        executor.close()
    assert recorder.batches == [[1.0]]
    assert executor.stats.late_requests == 1


def test_a_request_nobody_planned_runs_in_a_gap_it_fits():
    recorder = Recorder()
    executor = BatchExecutor(recorder, 4, 'planned', profile=PROFILE)
    try:
        executor.set_plan([_planned(['a'], time.monotonic() + 5.0)])
        stray = executor.submit('z', 3, _x(5))
        assert stray.result(5.0)['y'].item() == 10
        assert recorder.batches == [[5.0]]
        planned = executor.submit('a', 1, _x(1))
        assert planned.result(5.0)['y'].item() == 2
    finally:
        executor.close()
    assert executor.stats.unplanned_requests == 1


def test_the_queue_is_bounded_and_a_failed_batch_fails_each_request():
    hold, started = threading.Event(), threading.Event()

    def failing(requests):
        started.set()
        hold.wait(5.0)
        raise RuntimeError('model crashed')

    executor = BatchExecutor(failing, max_batch=1, policy='reactive', max_pending=2)
    try:
        running = executor.submit('a', 0, _x(1))
        assert started.wait(5.0)
        waiting = [executor.submit('b', 0, _x(2)), executor.submit('c', 0, _x(3))]
        with pytest.raises(ExecutorBusyError, match='2 requests already wait'):
            executor.submit('d', 0, _x(4))
        hold.set()
        for future in (running, *waiting):
            with pytest.raises(RuntimeError, match='model crashed'):
                future.result(5.0)
    finally:
        executor.close()


def test_closing_fails_what_still_waits():
    executor = BatchExecutor(Recorder(), 4, 'planned', profile=PROFILE)
    executor.set_plan([_planned(['a', 'b'], time.monotonic() + 60.0)])
    waiting = executor.submit('a', 0, _x(1))
    executor.close()
    with pytest.raises(ExecutorBusyError, match='closed'):
        waiting.result(1.0)
    with pytest.raises(ExecutorBusyError, match='closed'):
        executor.submit('a', 1, _x(1))
