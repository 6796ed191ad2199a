# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The baselines' schedules and the MPC behind one policy interface."""

from __future__ import annotations

import pytest

from accumo_ros.scheduler.mpc import AccuracyEstimate, MpcScheduler, TaskSpec
from accumo_ros.scheduler.offload_policies import MpcPolicy, make_policy

ESTIMATES = [AccuracyEstimate(0.01), AccuracyEstimate(0.01)]


def _schedule(policy, count: int = 8) -> list[tuple[int, ...]]:  # noqa: ANN001
    return [policy.choose(frame, [None, None], ESTIMATES) for frame in range(count)]


def test_baseline_schedules() -> None:
    assert _schedule(make_policy('la', 2), 3) == [(), (), ()]
    assert _schedule(make_policy('rr', 2), 4) == [(0,), (1,), (0,), (1,)]
    assert _schedule(make_policy('wrr:3:1', 2)) == [(0,), (0,), (0,), (1,)] * 2
    assert _schedule(make_policy('WRR:1:2', 2), 6) == [(0,), (1,), (1,)] * 2
    assert _schedule(make_policy('aao', 2), 2) == [(0, 1), (0, 1)]
    assert _schedule(make_policy('rr', 3), 4) == [(0,), (1,), (2,), (0,)]
    assert make_policy('wrr:1:1', 2).name == 'rr'
    assert make_policy('wrr:2:1', 2).name == 'wrr:2:1'


def test_mpc_policy_counts_offloads_in_a_row_for_the_cap() -> None:
    scheduler = MpcScheduler([TaskSpec('depth', 5), TaskSpec('odometry', 4)], max_in_a_row=3)
    policy = make_policy('accumo', 2, scheduler)
    assert isinstance(policy, MpcPolicy)
    depth_heavy = [AccuracyEstimate(0.05), AccuracyEstimate(0.0001)]
    last = [95, 60]
    chosen = []
    for frame in range(100, 140, 5):  # results back every 5 frames
        (task,) = policy.choose(frame, last, depth_heavy)
        chosen.append(task)
        last[task] = frame
    # Depth loses accuracy 500 times faster, but never more than three times in a row.
    assert chosen == [0, 0, 0, 1, 0, 0, 0, 1]
    assert policy.last_decision is not None
    assert policy.last_decision.task == 1


def test_bad_policy_names_are_refused() -> None:
    with pytest.raises(ValueError, match='unknown offload policy'):
        make_policy('fifo', 2)
    with pytest.raises(ValueError, match='one count per task'):
        make_policy('wrr:3', 2)
    with pytest.raises(ValueError, match='one count per task'):
        make_policy('wrr:a:b', 2)
    with pytest.raises(ValueError, match='counts must be'):
        make_policy('wrr:0:0', 2)
    with pytest.raises(ValueError, match='needs an MpcScheduler'):
        make_policy('accumo', 2)


def test_a_task_that_seems_free_is_offloaded_within_its_stride_limit() -> None:
    """Stride limits count from the first decision for a task never offloaded.

    With estimates that say odometry's stride costs nothing, the MPC would give every
    offload to depth and never start odometry (a clairvoyant run dead-reckoned 9 s).
    """
    tasks = [TaskSpec('depth', 5, 25), TaskSpec('odometry', 4, 26)]
    policy = MpcPolicy(MpcScheduler(tasks))
    estimates = [AccuracyEstimate(0.01), AccuracyEstimate(0.0)]
    last: list[int | None] = [None, None]
    chosen: list[tuple[int, int]] = []
    frame = 100
    while frame < 200:
        (task,) = policy.choose(frame, last, estimates)
        chosen.append((frame, task))
        frame += tasks[task].latency_frames
        last[task] = frame - tasks[task].latency_frames
    odometry = [f for f, task in chosen if task == 1]
    assert odometry, 'odometry was never offloaded'
    assert odometry[0] - 100 <= 26
    assert all(b - a <= 26 for a, b in zip(odometry, odometry[1:], strict=False))
