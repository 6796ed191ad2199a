# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO's MPC scheduler: plan enumeration, simulation against the spec's pseudocode, choices."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accumo_ros.scheduler.mpc import (
    MAX_PLANS,
    UNSEEN_STRIDE,
    AccuracyEstimate,
    MpcScheduler,
    TaskSpec,
    count_plans,
    enumerate_plans,
    fitting_horizon,
    plan_set,
    weighted_sum,
)

DEPTH, ODOMETRY = 0, 1


def _tasks(latencies=(5, 4), limits=(None, None)) -> list[TaskSpec]:  # noqa: ANN001
    names = ('depth', 'odometry', 'third')
    return [
        TaskSpec(names[j], latency, limit)
        for j, (latency, limit) in enumerate(zip(latencies, limits, strict=True))
    ]


def _reference_cost(plan, latencies, frame, last_offloads, estimates, weights) -> float:  # noqa: ANN001
    """Return the cost by the spec's SimulatePlan (§2.7), frame by frame, weighted sum."""
    completed = [None if last is None else last for last in last_offloads]
    pending = [None] * len(latencies)
    total = 0.0
    for i, choice in enumerate(plan):
        f = frame + i
        for j, latency in enumerate(latencies):
            if pending[j] is not None and f - pending[j] >= latency:
                completed[j], pending[j] = pending[j], None
            if choice == j + 1:
                pending[j] = f
            stride = f - (frame - UNSEEN_STRIDE if completed[j] is None else completed[j])
            estimate = estimates[j]
            charged = max(0, stride - estimate.free_stride)
            total += weights[j] * min(estimate.drop_rate * charged, estimate.local_drop)
    return total


def test_worked_example_has_the_dissertations_four_plans() -> None:
    assert enumerate_plans((2, 2), 4) == [(1, 0, 1, 0), (1, 0, 2, 0), (2, 0, 1, 0), (2, 0, 2, 0)]


def test_plan_counts_and_shape_for_the_evaluated_latencies() -> None:
    plans = plan_set((5, 4), 30)
    assert len(plans) == 135  # spec §2.7 [derived]
    assert plans.plans.shape == (135, 30)
    assert len({tuple(p) for p in plans.plans}) == 135
    for plan in plans.plans:
        assert plan[0] != 0  # the channel is free when the scheduler runs
        i = 0
        while i < len(plan):  # back to back: each offload fills its latency, then the next
            task = plan[i] - 1
            assert task in (DEPTH, ODOMETRY)
            assert not plan[i + 1 : i + (5, 4)[task]].any()
            i += (5, 4)[task]
    assert len(plan_set((4, 4), 22)) == len(enumerate_plans((4, 4), 22))
    assert plan_set((5, 4), 30) is plans  # cached per latency vector
    with pytest.raises(ValueError, match='horizon'):
        enumerate_plans((0, 4), 30)


def test_worked_example_drop_of_task_one_at_the_current_frame() -> None:
    # Frame k-4 offloaded for task 1 and k-2 for task 2, both latency 2: at k task 1's
    # stride is 4, so in [2, 0, 1, 0] its drop at frame k is min(4 r1, d1).
    scheduler = MpcScheduler(_tasks((2, 2)), horizon=4)
    k = 100
    estimates = [AccuracyEstimate(0.01, 0.03), AccuracyEstimate(0.02, math.inf)]
    plans = scheduler.plans
    index = [tuple(p) for p in plans.plans].index((2, 0, 1, 0))
    chosen = np.zeros(len(plans), dtype=bool)
    chosen[index] = True
    drops = scheduler.simulate(plans, k, [k - 4, k - 2], estimates, chosen)[0]
    assert drops[0, 0] == pytest.approx(min(4 * 0.01, 0.03))
    # Task 1 is offloaded at k + 2 and usable at k + 4 (beyond the horizon): its stride
    # grows to 7 and the local algorithm caps it; task 2's offload at k is usable at k + 2.
    np.testing.assert_allclose(drops[:, 0], [0.03, 0.03, 0.03, 0.03])
    np.testing.assert_allclose(drops[:, 1], [2 * 0.02, 3 * 0.02, 2 * 0.02, 3 * 0.02])


@pytest.mark.parametrize('latencies', [(5, 4), (4, 4), (2, 3, 4)])
def test_vectorised_simulation_equals_the_spec_pseudocode(latencies) -> None:  # noqa: ANN001
    rng = np.random.default_rng(sum(latencies))
    count = len(latencies)
    horizon = 30 if count == 2 else 12
    weights = rng.uniform(0.2, 2.0, count)
    scheduler = MpcScheduler(_tasks(latencies, (None,) * count), horizon, weighted_sum(weights))
    plans = scheduler.plans
    for trial in range(20):
        frame = 500
        last = [
            None if rng.random() < 0.15 else frame - int(rng.integers(0, 40)) for _ in range(count)
        ]
        estimates = [
            AccuracyEstimate(
                float(rng.uniform(0.0, 0.02)),
                math.inf if rng.random() < 0.4 else float(rng.uniform(0.0, 0.3)),
                0.0 if rng.random() < 0.5 else float(rng.integers(1, 20)),
            )
            for _ in range(count)
        ]
        costs = scheduler.merge(scheduler.simulate(plans, frame, last, estimates))
        for index in rng.choice(len(plans), size=min(15, len(plans)), replace=False):
            expected = _reference_cost(
                plans.plans[index], latencies, frame, last, estimates, weights
            )
            assert costs[index] == pytest.approx(expected, rel=1e-12), (trial, index)
        decision = scheduler.decide(frame, last, estimates)
        assert decision.cost == pytest.approx(costs.min(), rel=1e-12)
        assert decision.plan[0] == decision.task + 1


def test_the_task_losing_accuracy_faster_gets_the_frame() -> None:
    scheduler = MpcScheduler(_tasks())
    last = [90, 92]  # both offloaded recently, results back
    fast_depth = [AccuracyEstimate(0.02), AccuracyEstimate(0.002)]
    assert scheduler.decide(100, last, fast_depth).task == DEPTH
    fast_odometry = [AccuracyEstimate(0.002), AccuracyEstimate(0.02)]
    assert scheduler.decide(100, last, fast_odometry).task == ODOMETRY
    # A good local algorithm caps depth's drop: the offload is worth more to odometry.
    capped = [AccuracyEstimate(0.02, local_drop=0.01), AccuracyEstimate(0.01)]
    assert scheduler.decide(100, last, capped).task == ODOMETRY
    # Weights carry the application's priorities through the merge function.
    even = [AccuracyEstimate(0.01), AccuracyEstimate(0.01)]
    depth_first = MpcScheduler(_tasks(), merge=weighted_sum([4.0, 1.0]))
    odometry_first = MpcScheduler(_tasks(), merge=weighted_sum([1.0, 4.0]))
    assert depth_first.decide(100, [80, 80], even).task == DEPTH
    assert odometry_first.decide(100, [80, 80], even).task == ODOMETRY


def test_strides_a_model_counts_free_buy_nothing() -> None:
    estimate = AccuracyEstimate(0.01, local_drop=0.25, free_stride=28)
    np.testing.assert_allclose(estimate.drop(np.array([0, 14, 28, 38, 100])), [0, 0, 0, 0.1, 0.25])
    # Odometry weighs four times depth, at the same rate and staleness: it gets the frame,
    # unless no stride the horizon can reach is past its free part.
    scheduler = MpcScheduler(_tasks((14, 14)), horizon=42, merge=weighted_sum([1.0, 4.0]))
    free = [AccuracyEstimate(0.01), AccuracyEstimate(0.01, free_stride=56)]
    assert scheduler.decide(100, [86, 86], free).task == DEPTH
    charged = [AccuracyEstimate(0.01), AccuracyEstimate(0.01)]
    assert scheduler.decide(100, [86, 86], charged).task == ODOMETRY
    with pytest.raises(ValueError, match='free_stride'):
        AccuracyEstimate(0.01, free_stride=-1.0)
    with pytest.raises(ValueError, match='free_stride'):
        AccuracyEstimate(0.01, free_stride=math.nan)


def test_a_task_without_results_is_offloaded_first() -> None:
    scheduler = MpcScheduler(_tasks())
    estimates = [AccuracyEstimate(0.02), AccuracyEstimate(0.001)]
    assert scheduler.decide(10, [9, None], estimates).task == ODOMETRY


def test_stride_limits_force_a_starved_task_and_fall_back_when_none_is_kept() -> None:
    # Odometry loses nothing by waiting, but has gone 22 of its 26 allowed frames: any plan
    # starting with depth (5 frames) would break its limit.
    scheduler = MpcScheduler(_tasks(limits=(25, 26)))
    estimates = [AccuracyEstimate(0.05), AccuracyEstimate(0.0)]
    unlimited = MpcScheduler(_tasks())
    assert unlimited.decide(100, [99, 78], estimates).task == DEPTH
    decision = scheduler.decide(100, [99, 78], estimates)
    assert decision.task == ODOMETRY
    assert not decision.fallback
    assert decision.feasible_plans < len(scheduler.plans)
    # Both past their limits: no plan is feasible; the task with the older offload goes.
    fallback = scheduler.decide(200, [160, 150], estimates)
    assert fallback.fallback
    assert fallback.task == ODOMETRY
    assert fallback.plan == ()
    assert scheduler.decide(200, [150, 160], estimates).task == DEPTH


def test_at_most_three_in_a_row() -> None:
    scheduler = MpcScheduler(_tasks(), max_in_a_row=3)
    estimates = [AccuracyEstimate(0.05), AccuracyEstimate(0.001)]
    assert scheduler.decide(100, [95, 60], estimates, history_run=(DEPTH, 2)).task == DEPTH
    decision = scheduler.decide(100, [95, 60], estimates, history_run=(DEPTH, 3))
    assert decision.task == ODOMETRY
    offloads = [task for task in decision.plan if task]
    runs = np.diff(np.flatnonzero(np.r_[True, np.diff(offloads) != 0, True]))
    assert runs.max() <= 3
    assert scheduler.plans.longest_run.max() > 3  # the cap did prune plans


def test_measured_latencies_give_a_new_plan_set() -> None:
    scheduler = MpcScheduler(_tasks(limits=(25, 26)), max_in_a_row=3)
    slower = scheduler.with_latencies([8, 6])
    assert [t.latency_frames for t in slower.tasks] == [8, 6]
    # Stride limits keep their meaning in rounds: the period went from 9 to 14 frames.
    assert [t.stride_limit for t in slower.tasks] == [39, 41]
    # The horizon stays 30 frames: scaled to the same rounds, it made AccuMO worse.
    assert slower.horizon == 30
    assert len(slower.plans) == len(enumerate_plans((8, 6), 30)) < len(scheduler.plans)
    # Scaled from the configured latencies each time, so changes do not compound.
    back = slower.with_latencies([14, 14]).with_latencies([5, 4])
    assert [t.stride_limit for t in back.tasks] == [25, 26]
    # A slow link (L = (14, 14)) keeps plans other than round robin feasible: with the
    # release's fixed 25 frames none would be, and every decision would be a fallback.
    slow = scheduler.with_latencies([14, 14])
    assert [t.stride_limit for t in slow.tasks] == [78, 81]
    estimates = [AccuracyEstimate(0.05), AccuracyEstimate(0.001)]
    decision = slow.decide(300, [286, 258], estimates)
    assert not decision.fallback
    assert decision.task == DEPTH
    # A latency above the configured limit does not make the scheduler unbuildable.
    lopsided = MpcScheduler(_tasks(limits=(6, 26))).with_latencies([40, 4])
    assert lopsided.tasks[0].stride_limit >= 40
    with pytest.raises(ValueError, match='2 tasks'):
        scheduler.with_latencies([5])


def test_the_horizon_is_shortened_to_a_bounded_plan_count() -> None:
    for latencies, horizon in (((5, 4), 30), ((2, 3), 17), ((1, 1), 9), ((3,), 10)):
        assert count_plans(latencies, horizon) == len(enumerate_plans(latencies, horizon))
    assert count_plans((1, 1), 30) == 2**30
    assert fitting_horizon((1, 1), 30) == 11  # 2^11 = MAX_PLANS
    assert MAX_PLANS == 2048
    assert fitting_horizon((5, 4), 30) == 30  # 135 plans: as configured
    assert fitting_horizon((1, 1), 30, max_plans=0) == 1
    # A scheduler built, or rescaled, to latencies of one frame stays usable.
    fast = MpcScheduler(_tasks((1, 1)))
    assert fast.horizon == 11
    lopsided = MpcScheduler(_tasks()).with_latencies([1, 40])
    assert len(lopsided.plans) <= MAX_PLANS
    estimates = [AccuracyEstimate(0.01), AccuracyEstimate(0.01)]
    assert lopsided.decide(100, [90, 50], estimates).task in (DEPTH, ODOMETRY)
    with pytest.raises(ValueError, match='horizon'):
        count_plans((5, 4), 0)


def test_a_stride_cap_bounds_the_scaled_limit() -> None:
    """A cap (the longest stride an accuracy model covers) lowers the scaled limit only."""
    scheduler = MpcScheduler(_tasks(limits=(25, 26)))
    capped = scheduler.with_latencies([14, 15], [None, 56])
    assert [t.stride_limit for t in capped.tasks] == [81, 56]  # 26 scaled: 84
    # Above the scaled limit, or absent, it changes nothing; below the latency it cannot go.
    assert [t.stride_limit for t in scheduler.with_latencies([5, 4], [None, 48]).tasks] == [
        25,
        26,
    ]
    assert scheduler.with_latencies([14, 15], [None, 10]).tasks[1].stride_limit == 15
    # The cap is not inherited: the next change scales from the configured limits again.
    assert capped.with_latencies([14, 15]).tasks[1].stride_limit == 84
    # Odometry whose stride costs nothing still goes before the cap: 45 frames stale, a
    # depth offload first (14 frames) would take it past 56; uncapped, depth goes.
    estimates = [AccuracyEstimate(0.05), AccuracyEstimate(0.0)]
    decision = capped.decide(400, [386, 355], estimates)
    assert not decision.fallback
    assert decision.task == 1
    assert scheduler.with_latencies([14, 15]).decide(400, [386, 355], estimates).task == 0
    with pytest.raises(ValueError, match='2 tasks'):
        scheduler.with_latencies([5, 4], [None])


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match='latency_frames'):
        TaskSpec('depth', 0)
    with pytest.raises(ValueError, match='below its latency'):
        TaskSpec('depth', 5, stride_limit=3)
    with pytest.raises(ValueError, match='drop_rate'):
        AccuracyEstimate(-0.1)
    with pytest.raises(ValueError, match='local_drop'):
        AccuracyEstimate(0.1, math.nan)
    with pytest.raises(ValueError, match='weights'):
        weighted_sum([1.0, -1.0])
    scheduler = MpcScheduler(_tasks())
    with pytest.raises(ValueError, match='one last offload and one estimate'):
        scheduler.decide(10, [1], [AccuracyEstimate(0.1)])
    with pytest.raises(ValueError, match='after the current frame'):
        scheduler.decide(10, [11, 1], [AccuracyEstimate(0.1)] * 2)
    broken = MpcScheduler(_tasks(), merge=lambda drops: drops.sum(axis=2))
    with pytest.raises(ValueError, match='merge returned shape'):
        broken.decide(10, [1, 2], [AccuracyEstimate(0.1)] * 2)
