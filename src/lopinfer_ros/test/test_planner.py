# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""LOSS and its baselines on hand-made and random problems."""

from __future__ import annotations

import itertools
import random
import sys
import time
from pathlib import Path

import pytest

from lopinfer_ros.baselines import (
    BASELINES,
    DEVICE_ONLY,
    LAYER_SPLIT,
    LOPINFER,
    SERVER_ONLY,
    better,
    device_only,
    layer_split,
    server_only,
)
from lopinfer_ros.planner import loss
from lopinfer_ros.problem import (
    ATOMIC,
    INPUT,
    LOCAL,
    LinkModel,
    Plan,
    PlanProblem,
)
from lopinfer_ros.simulator import check_plan, simulate

# The test folder is not a package: the helpers sit beside this file.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan_fixtures import Builder, conv, ident, synthetic_problem  # noqa: E402

MS = 1e-3
# Small budgets: the tests check properties, not how far a long search gets.
FAST = {'time_budget_s': 5.0, 'max_non_improving': 150, 'max_iterations': 1500}


def random_problem(rng: random.Random, size: int) -> PlanProblem:
    """Return a small random CNN-like DAG.

    Convolutions, strides, element-wise nodes, residual adds, global barriers, tensors
    larger than the input.
    """
    b = Builder()
    width = rng.choice((8, 16, 24))
    x = b.add(INPUT, width, col_bytes=rng.choice((30, 100)))
    frontier = [x]
    speedup = rng.choice((1.0, 3.0, 10.0))
    while len(b.nodes) < size:
        u = frontier[-1]
        wu = b.nodes[u].width
        choice = rng.random()
        dev = rng.uniform(1, 10) * MS
        srv = dev / speedup
        cb = rng.choice((10, 50, 100, 300))
        if choice < 0.08 and len(frontier) > 2:
            g = b.add(ATOMIC, 1, [u], [[(0, wu)]], cb, dev, srv)
            frontier.append(b.add(LOCAL, wu, [g], [[(0, 1)] * wu], cb, dev, srv))
        elif choice < 0.25 and wu > 4:
            wo = (wu + 1) // 2
            frontier.append(b.add(LOCAL, wo, [u], [conv(wu, wo, 3, 2)], cb, dev, srv))
        elif choice < 0.45:
            frontier.append(b.add(LOCAL, wu, [u], [ident(wu)], cb, dev / 20, srv / 20))
        elif choice < 0.6:
            same = [f for f in frontier[:-1] if b.nodes[f].width == wu]
            if same:
                other = rng.choice(same)
                frontier.append(
                    b.add(LOCAL, wu, [u, other], [ident(wu), ident(wu)], cb, dev / 20, srv / 20)
                )
        else:
            frontier.append(
                b.add(LOCAL, wu, [u], [conv(wu, wu, rng.choice((1, 3)))], cb, dev, srv)
            )
    last = len(b.nodes) - 1
    head = b.add(ATOMIC, 1, [last], [[(0, b.nodes[last].width)]], 40, 0.5 * MS, 0.1 * MS)
    return b.problem([head], model=f'random{size}')


def overlap_problem() -> PlanProblem:
    """Return three 3-wide convolutions as fast on the robot as on the server."""
    b = Builder()
    u = b.add(INPUT, 32, col_bytes=10)
    for _ in range(3):
        u = b.add(LOCAL, 32, [u], [conv(32, 32)], col_bytes=10, dev=32 * MS, srv=32 * MS)
    head = b.add(ATOMIC, 1, [u], [[(0, 32)]], col_bytes=4, dev=0.1 * MS, srv=0.1 * MS)
    return b.problem([head], model='overlap')


def fast_server_problem() -> PlanProblem:
    """Return a chain the server runs 100x faster (its first operator is a convolution)."""
    b = Builder()
    u = b.add(INPUT, 16, col_bytes=50)
    for k in (3, 1, 3, 3):
        u = b.add(LOCAL, 16, [u], [conv(16, 16, k)], col_bytes=80, dev=20 * MS, srv=0.2 * MS)
    head = b.add(ATOMIC, 1, [u], [[(0, 16)]], col_bytes=40, dev=2 * MS, srv=0.02 * MS)
    return b.problem([head], model='fast-server')


def _check_result(problem, link, result, pruning=True):
    check_plan(problem, result.plan)
    resim = simulate(problem, result.plan, link)
    assert resim.makespan_s == pytest.approx(result.makespan_s, rel=1e-12)
    assert set(result.baselines) == set(BASELINES)
    best_baseline = min(s.makespan_s for s in result.baseline_sims.values())
    # Algorithm 1, line 11: never worse than the best baseline.
    assert result.makespan_s <= best_baseline * (1 + 1e-12)
    if result.source == LOPINFER and pruning:
        assert not resim.expansive_transfer
    if result.search_sim is not None:
        assert not better(result.search_sim, result.sim)


def test_baseline_plans():
    problem = overlap_problem()
    assert device_only(problem) == Plan((32, 32, 32, 32, 1), (32, 32, 32, 32, 1))
    assert server_only(problem) == Plan((32, 0, 0, 0, 0), (32, 0, 0, 0, 0))


@pytest.mark.parametrize('seed', range(30))
def test_loss_never_worse_than_the_best_baseline(seed):
    rng = random.Random(seed)
    problem = random_problem(rng, size=rng.randint(5, 24))
    for bandwidth in (2e4, 3e5, 3e6, 1e8):
        link = LinkModel(bandwidth, per_message_s=rng.choice((0.0, 2e-4)))
        pruning = rng.random() < 0.7
        result = loss(problem, link, seed=seed, transmission_pruning=pruning, **FAST)
        _check_result(problem, link, result, pruning)


def test_loss_beats_layer_split_where_overlap_helps():
    problem = overlap_problem()
    link = LinkModel(10e6)
    result = loss(problem, link, **FAST)
    _check_result(problem, link, result)
    split = result.baseline_sims[LAYER_SPLIT].makespan_s
    assert split == pytest.approx(96.1 * MS)  # nothing beats running it all on one side
    assert result.source == LOPINFER
    # Both sides compute about half of every convolution.
    assert result.makespan_s < 0.7 * split
    assert all(0 < m < 32 for m in result.plan.m[1:4])


def test_device_only_without_bandwidth():
    problem = random_problem(random.Random(5), size=16)
    link = LinkModel(1e3)  # 1 kB/s: any transfer costs more than the whole model
    result = loss(problem, link, **FAST)
    assert result.plan == device_only(problem)
    assert result.sim.bytes_total == 0


def test_dead_link_runs_everything_on_the_robot():
    problem = random_problem(random.Random(6), size=14)
    result = loss(problem, LinkModel(0.0), **FAST)
    assert result.plan == device_only(problem)
    assert result.makespan_s == pytest.approx(result.baseline_sims[DEVICE_ONLY].makespan_s)


def test_server_only_with_plenty_of_bandwidth():
    problem = fast_server_problem()
    link = LinkModel(1e12)
    result = loss(problem, link, **FAST)
    assert result.plan == server_only(problem)
    assert result.makespan_s == pytest.approx(result.baseline_sims[SERVER_ONLY].makespan_s)


def test_same_seed_same_plan():
    problem = random_problem(random.Random(9), size=30)
    link = LinkModel(2e6)
    first = loss(problem, link, seed=3, **FAST)
    second = loss(problem, link, seed=3, **FAST)
    assert first.plan == second.plan
    assert first.search_plan == second.search_plan
    assert first.stats['lns_iterations'] == second.stats['lns_iterations']


def _brute_force(problem: PlanProblem, link: LinkModel) -> float:
    free = [v for v, node in enumerate(problem.nodes) if node.kind != INPUT]
    best = float('inf')
    for sides in itertools.product((0, 1), repeat=len(free)):
        m = [node.width for node in problem.nodes]
        r = list(m)
        for v, on_m in zip(free, sides, strict=True):
            if not on_m:
                m[v] = r[v] = 0
        best = min(best, simulate(problem, Plan(tuple(m), tuple(r)), link).makespan_s)
    return best


def test_layer_split_finds_the_best_partition():
    # A chain whose activations shrink: the best single cut is in the middle.
    b = Builder()
    u = b.add(INPUT, 16, col_bytes=4000)
    for cb in (800, 200, 100, 50, 20):
        u = b.add(LOCAL, 16, [u], [conv(16, 16)], col_bytes=cb, dev=6 * MS, srv=0.6 * MS)
    head = b.add(ATOMIC, 1, [u], [[(0, 16)]], col_bytes=40, dev=0.2 * MS, srv=0.02 * MS)
    problem = b.problem([head], model='chain')
    link = LinkModel(2e6)
    best = _brute_force(problem, link)
    # Prefix cuts and the min cut only (no exhaustive search) find it.
    plan = layer_split(problem, link, exhaustive_limit=0)
    assert simulate(problem, plan, link).makespan_s == pytest.approx(best, rel=1e-12)
    assert plan not in (device_only(problem), server_only(problem))
    # On a random DAG with skip connections the exhaustive search is the optimum too.
    problem = random_problem(random.Random(2), size=10)
    for bandwidth in (1e5, 1e6, 1e7):
        link = LinkModel(bandwidth)
        plan = layer_split(problem, link)
        assert all(m in (0, node.width) for m, node in zip(plan.m, problem.nodes, strict=True))
        assert simulate(problem, plan, link).makespan_s == pytest.approx(
            _brute_force(problem, link), rel=1e-12
        )


def test_layer_split_min_cut_brings_a_large_output_back_to_the_robot():
    # The middle node is 100x faster on the server, the output is large: the best
    # partition is robot - server - robot, which no single prefix cut gives.
    b = Builder()
    u = b.add(INPUT, 16, col_bytes=1000)
    u = b.add(LOCAL, 16, [u], [conv(16, 16)], col_bytes=10, dev=1 * MS, srv=0.1 * MS)
    u = b.add(LOCAL, 16, [u], [conv(16, 16)], col_bytes=10, dev=50 * MS, srv=0.5 * MS)
    u = b.add(LOCAL, 16, [u], [conv(16, 16)], col_bytes=5000, dev=1 * MS, srv=0.1 * MS)
    problem = b.problem([u], model='big-output')
    link = LinkModel(1e6)
    plan = layer_split(problem, link, exhaustive_limit=0)
    assert plan.m == (16, 16, 0, 16)
    assert simulate(problem, plan, link).makespan_s == pytest.approx(
        _brute_force(problem, link), rel=1e-12
    )


def test_layer_split_handles_skip_connections_with_prefix_cuts():
    problem = random_problem(random.Random(4), size=40)
    link = LinkModel(3e6)
    plan = layer_split(problem, link)
    sim = simulate(problem, plan, link)
    for baseline in (device_only(problem), server_only(problem)):
        assert sim.makespan_s <= simulate(problem, baseline, link).makespan_s * (1 + 1e-12)


def test_transmission_pruning_keeps_expansive_tensors_local():
    b = Builder()
    u = b.add(INPUT, 16, col_bytes=10)
    u = b.add(LOCAL, 16, [u], [conv(16, 16)], col_bytes=200, dev=10 * MS, srv=10 * MS)
    for _ in range(3):
        u = b.add(LOCAL, 16, [u], [conv(16, 16)], col_bytes=5, dev=10 * MS, srv=10 * MS)
    head = b.add(ATOMIC, 1, [u], [[(0, 16)]], col_bytes=4, dev=0.1 * MS, srv=0.1 * MS)
    problem = b.problem([head], model='expansive')
    link = LinkModel(5e6)
    pruned = loss(problem, link, transmission_pruning=True, **FAST)
    _check_result(problem, link, pruned)
    assert pruned.search_sim is not None
    assert not pruned.search_sim.expansive_transfer
    free = loss(problem, link, transmission_pruning=False, **FAST)
    _check_result(problem, link, free, pruning=False)


def test_no_local_operators_gives_the_layer_split():
    b = Builder()
    u = b.add(INPUT, 1, col_bytes=1000)
    for _ in range(4):
        u = b.add(ATOMIC, 1, [u], [[(0, 1)]], col_bytes=100, dev=5 * MS, srv=0.5 * MS)
    problem = b.problem([u], model='global')
    link = LinkModel(1e6)
    result = loss(problem, link, **FAST)
    assert result.makespan_s == pytest.approx(result.baseline_sims[LAYER_SPLIT].makespan_s)
    assert result.source in (LAYER_SPLIT, LOPINFER)


def test_synthetic_model_plans_quickly_and_validly():
    problem = synthetic_problem(150, seed=1)
    link = LinkModel(30e6)
    result = loss(problem, link, time_budget_s=5.0, max_non_improving=200)
    _check_result(problem, link, result)
    assert result.stats['decision_nodes'] < len(problem.nodes)
    assert result.source in (LOPINFER, DEVICE_ONLY, SERVER_ONLY, LAYER_SPLIT)


def test_plans_do_not_depend_on_the_clock(monkeypatch):
    """Without a wall-clock budget (the default) a slow machine plans the same.

    The slow machine is a clock that advances one second per reading.
    """
    problem = synthetic_problem(80, seed=3)
    link = LinkModel(8e6)
    first = loss(problem, link, max_non_improving=300, max_iterations=3000)
    ticks = itertools.count()
    monkeypatch.setattr(time, 'perf_counter', lambda: float(next(ticks)))
    second = loss(problem, link, max_non_improving=300, max_iterations=3000)
    assert first.plan == second.plan
    assert first.stats['lns_iterations'] == second.stats['lns_iterations']
    assert second.stats['lns_iterations'] > 1
