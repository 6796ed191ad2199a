# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The plan simulator: hand-computed schedules, a naive reference, the incremental form."""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import pytest

from lopinfer_ros.baselines import device_only, server_only
from lopinfer_ros.problem import (
    ATOMIC,
    INPUT,
    LOCAL,
    CostCurve,
    LinkModel,
    Plan,
    PlanProblem,
)
from lopinfer_ros.simulator import (
    DOWN,
    UP,
    PrefixSim,
    _cost_table,
    compile_problem,
    simulate,
)

# The test folder is not a package: the helpers sit beside this file.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan_fixtures import Builder, conv, ident, synthetic_problem  # noqa: E402

MS = 1e-3


def tiny() -> PlanProblem:
    """Input (4 columns) -> conv a -> conv b -> atomic head; 100 bytes per column."""
    b = Builder()
    x = b.add(INPUT, 4)
    a = b.add(LOCAL, 4, [x], [conv(4, 4)], dev=8 * MS, srv=0.8 * MS)
    c = b.add(LOCAL, 4, [a], [conv(4, 4)], dev=8 * MS, srv=0.8 * MS)
    b.add(ATOMIC, 1, [c], [[(0, 4)]], col_bytes=40, dev=1 * MS, srv=0.1 * MS)
    return b.problem([3])


# 100 kB/s: 10 us per byte; 1 ms one way; no per-message overhead.
TINY_LINK = LinkModel(1e5, latency_s=1 * MS, per_message_s=0.0, per_message_bytes=0)


def test_tiny_device_only_by_hand():
    result = simulate(tiny(), device_only(tiny()), TINY_LINK)
    assert result.makespan_s == pytest.approx(17 * MS)
    assert (result.bytes_up, result.bytes_down, result.messages) == (0, 0, 0)


def test_tiny_server_only_by_hand():
    # Input (400 B) up: 4 ms + 1 ms; R: 0.8 + 0.8 + 0.1; output (40 B) down: 0.4 + 1 ms.
    result = simulate(tiny(), server_only(tiny()), TINY_LINK)
    assert result.makespan_s == pytest.approx((5 + 1.7 + 1.4) * MS)
    assert (result.bytes_up, result.bytes_down, result.messages) == (400, 40, 2)


def test_tiny_layer_split_by_hand():
    # M: a (8 ms); a up whole (400 B: 5 ms); R: b, head (0.9 ms); head down (1.4 ms).
    plan = Plan((4, 4, 0, 0), (4, 4, 0, 0))
    result = simulate(tiny(), plan, TINY_LINK)
    assert result.makespan_s == pytest.approx((8 + 5 + 0.9 + 1.4) * MS)
    assert (result.bytes_up, result.bytes_down) == (400, 40)


def test_tiny_split_with_halo_by_hand():
    # a: M [0, 3), R [1, 4) (column 1..2 replicated); b cut at 2; head on M.
    # R needs input [0, 4) (column 1 of a reads input 0..2): 400 B up, arrives at 5 ms.
    # M: a 6 ms, b [0, 2) needs a [0, 3): held -> 10 ms. R: a 5.6, b [2, 4) needs a
    # [1, 4): held -> 6.0 ms. The head needs b [2, 4) from R: 200 B down, 2 + 1 ms -> 9.0.
    # Head on M starts at max(10, 9) and takes 1 ms.
    plan = Plan((4, 3, 2, 1), (4, 1, 2, 1))
    result = simulate(tiny(), plan, TINY_LINK, timeline=True)
    assert result.makespan_s == pytest.approx(11 * MS)
    assert (result.bytes_up, result.bytes_down, result.messages) == (400, 200, 2)
    timeline = result.timeline
    assert timeline.nodes[1].end_m == pytest.approx(6 * MS)
    assert timeline.nodes[1].start_r == pytest.approx(5 * MS)
    assert timeline.nodes[2].end_r == pytest.approx(6 * MS)
    down = [msg for msg in timeline.messages if msg.direction == DOWN]
    assert [(msg.producer, msg.columns, msg.nbytes) for msg in down] == [(2, (2, 4), 200)]
    assert down[0].arrival_s == pytest.approx(9 * MS)
    # M's queue is the critical path: input, a, b, head on M.
    assert timeline.critical[-1] == ('compute', 3, 'M')
    assert timeline.slack[3] == pytest.approx(0.0, abs=1e-12)
    assert timeline.slack[2] == pytest.approx(0.0, abs=1e-12)


def test_one_message_per_producer_and_direction():
    # The input feeds two convolutions and an add: all on R, one upload of the input.
    b = Builder()
    x = b.add(INPUT, 8)
    a = b.add(LOCAL, 8, [x], [conv(8, 8)], dev=MS, srv=MS)
    c = b.add(LOCAL, 8, [x], [conv(8, 8, k=5)], dev=MS, srv=MS)
    s = b.add(LOCAL, 8, [a, c], [ident(8), ident(8)], dev=MS, srv=MS)
    problem = b.problem([s])
    result = simulate(problem, server_only(problem), TINY_LINK)
    assert result.bytes_up == 800  # the input once, not once per consumer
    assert result.bytes_down == 800
    assert result.messages == 2
    # Split both convolutions at 4: R needs input [3, 8) for a and [2, 8) for c; M needs
    # input it holds. One message of their union [2, 8) = 6 columns.
    plan = Plan((8, 4, 4, 8), (8, 4, 4, 8))
    result = simulate(problem, plan, TINY_LINK, timeline=True)
    ups = [msg for msg in result.timeline.messages if msg.direction == UP]
    assert [(msg.producer, msg.columns) for msg in ups] == [(0, (2, 8))]
    assert result.bytes_up == 600


def test_global_barrier_waits_for_both_halves():
    b = Builder()
    x = b.add(INPUT, 8)
    a = b.add(LOCAL, 8, [x], [ident(8)], dev=8 * MS, srv=8 * MS)
    g = b.add(ATOMIC, 1, [a], [[(0, 8)]], col_bytes=10, dev=MS, srv=MS)
    problem = b.problem([g])
    # a split 4/4, barrier on M: waits for R's half (400 B: 4 ms + 1 ms after R's 4 ms).
    plan = Plan((8, 4, 1), (8, 4, 1))
    result = simulate(problem, plan, TINY_LINK)
    # R gets input [4, 8) (400 B) at 5 ms, computes until 9 ms, sends 400 B -> 14 ms.
    assert result.makespan_s == pytest.approx(15 * MS)


def test_output_must_end_whole_on_the_robot():
    b = Builder()
    x = b.add(INPUT, 4)
    a = b.add(LOCAL, 4, [x], [ident(4)], dev=4 * MS, srv=4 * MS)
    problem = b.problem([a])
    plan = Plan((4, 1), (4, 1))  # M computes column 0, R columns 1..3
    result = simulate(problem, plan, TINY_LINK, timeline=True)
    # R: input [1, 4) (300 B) at 4 ms, 3 ms compute, back 300 B: 3 + 1 ms -> 11 ms.
    assert result.makespan_s == pytest.approx(11 * MS)
    assert [m.columns for m in result.timeline.messages] == [(1, 4), (1, 4)]


def test_expansive_transfer_flag_ignores_the_output_return():
    b = Builder()
    x = b.add(INPUT, 4, col_bytes=10)
    a = b.add(LOCAL, 4, [x], [conv(4, 4)], col_bytes=100, dev=MS, srv=MS)  # 10x the input
    c = b.add(LOCAL, 4, [a], [conv(4, 4)], col_bytes=100, dev=MS, srv=MS)
    problem = b.problem([c])
    assert compile_problem(problem).expansive == [False, True, True]
    # a on M, c on R: a crosses the link.
    assert simulate(problem, Plan((4, 4, 0), (4, 4, 0)), TINY_LINK).expansive_transfer
    # Everything on R: only the input goes up and the output comes back.
    assert not simulate(problem, server_only(problem), TINY_LINK).expansive_transfer


def test_dead_link_makes_transfers_infinite():
    dead = LinkModel(0.0)
    assert math.isinf(simulate(tiny(), server_only(tiny()), dead).makespan_s)
    assert simulate(tiny(), device_only(tiny()), dead).makespan_s == pytest.approx(17 * MS)


@pytest.mark.parametrize(
    'plan',
    [
        Plan((4, 5, 0, 1), (4, 0, 0, 1)),  # m > width
        Plan((4, 2, 0, 1), (4, 3, 0, 1)),  # r > m
        Plan((4, 2, 2, 1), (4, 2, 2, 0)),  # a global node split
        Plan((3, 2, 2, 1), (3, 2, 2, 1)),  # input not whole on the robot
        Plan((4, 2, 2), (4, 2, 2)),  # too short
    ],
)
def test_invalid_plans_are_refused(plan):
    with pytest.raises(ValueError, match='.'):
        simulate(tiny(), plan, TINY_LINK)


def test_cost_tables_match_the_curves():
    rng = random.Random(3)
    for _ in range(50):
        samples = sorted(rng.sample(range(1, 40), rng.randint(1, 4)))
        curve = CostCurve(tuple(samples), tuple(rng.uniform(0, 1) for _ in samples))
        width = rng.randint(1, 60)
        table = _cost_table(curve, width)
        for k in range(width + 1):
            assert table[k] == pytest.approx(curve(k), abs=1e-12)


# -- a naive reference and random problems ------------------------------------------------


def random_problem(rng: random.Random, size: int = 12, model: str = 'random') -> PlanProblem:
    """Return a small random DAG.

    Convolutions (some strided), element-wise nodes, residual adds, global barriers and
    expansive tensors.
    """
    b = Builder()
    width = rng.choice((8, 12, 16))
    x = b.add(INPUT, width, col_bytes=rng.choice((20, 50)))
    frontier = [x]
    while len(b.nodes) < size:
        u = frontier[-1]
        wu = b.nodes[u].width
        choice = rng.random()
        dev = rng.uniform(0.5, 5) * MS
        srv = dev / rng.choice((1, 4, 10))
        cb = rng.choice((10, 40, 100, 400))
        if choice < 0.1 and len(frontier) > 1:
            # Barrier: an atomic node reading the whole tensor, then a local node again.
            g = b.add(ATOMIC, 1, [u], [[(0, wu)]], col_bytes=cb, dev=dev, srv=srv)
            v = b.add(LOCAL, wu, [g], [[(0, 1)] * wu], col_bytes=cb, dev=dev, srv=srv)
            frontier.append(v)
        elif choice < 0.3 and wu > 2:
            wo = (wu + 1) // 2
            frontier.append(b.add(LOCAL, wo, [u], [conv(wu, wo, 3, 2)], cb, dev, srv))
        elif choice < 0.5:
            frontier.append(b.add(LOCAL, wu, [u], [ident(wu)], cb, dev / 10, srv / 10))
        elif choice < 0.65:
            same = [f for f in frontier[:-1] if b.nodes[f].width == wu]
            if same:
                other = rng.choice(same)
                v = b.add(LOCAL, wu, [u, other], [ident(wu), ident(wu)], cb, dev / 10, srv / 10)
                frontier.append(v)
        else:
            k = rng.choice((1, 3, 5))
            frontier.append(b.add(LOCAL, wu, [u], [conv(wu, wu, k)], cb, dev, srv))
    last = len(b.nodes) - 1
    outputs = [last]
    if rng.random() < 0.3:
        outputs.append(rng.randrange(1, last))
    return b.problem(outputs, model=model)


def random_plan(problem: PlanProblem, rng: random.Random) -> Plan:
    ms, rs = [], []
    for node in problem.nodes:
        if node.kind == INPUT:
            ms.append(node.width)
            rs.append(node.width)
        elif node.kind == ATOMIC:
            side = rng.choice((0, 1))
            ms.append(side)
            rs.append(side)
        else:
            m = rng.choice((0, node.width, rng.randint(0, node.width)))
            r = rng.choice((m, rng.randint(0, m)))
            ms.append(m)
            rs.append(r)
    return Plan(tuple(ms), tuple(rs))


def reference(problem: PlanProblem, plan: Plan, link: LinkModel) -> tuple[float, int, int]:
    """Naive event simulation of the documented semantics (makespan, bytes up, down)."""
    nodes, m, r = problem.nodes, plan.m, plan.r
    up: dict[int, int] = {}
    down: dict[int, int] = {}
    waits_m: dict[int, set[int]] = {v: set() for v in range(len(nodes))}
    waits_r: dict[int, set[int]] = {v: set() for v in range(len(nodes))}
    for v, node in enumerate(nodes):
        for k, u in enumerate(node.inputs):
            if m[v] > 0:
                lo, hi = node.needed(k, 0, m[v])
                if hi > lo and hi > m[u]:
                    down[u] = max(down.get(u, m[u]), hi)
                    waits_m[v].add(u)
            if r[v] < node.width:
                lo, hi = node.needed(k, r[v], node.width)
                if hi > lo and lo < r[u]:
                    up[u] = min(up.get(u, r[u]), lo)
                    waits_r[v].add(u)
    for u in problem.outputs:
        if m[u] < nodes[u].width:
            down[u] = nodes[u].width
    t_m = t_r = link_up = link_down = 0.0
    end_m, end_r, arr_up, arr_down = {}, {}, {}, {}
    bytes_up = bytes_down = 0
    for v, node in enumerate(nodes):
        if m[v] > 0:
            start = max([t_m] + [arr_down[u] for u in waits_m[v]])
            t_m = end_m[v] = start + node.device(m[v])
        if r[v] < node.width:
            start = max([t_r] + [arr_up[u] for u in waits_r[v]])
            t_r = end_r[v] = start + node.server(node.width - r[v])
        if v in up:
            nbytes = (r[v] - up[v]) * node.column_bytes
            link_up = max(link_up, end_m[v]) + link.transfer_s(nbytes)
            arr_up[v] = link_up + link.latency_s
            bytes_up += nbytes
        if v in down:
            nbytes = (down[v] - m[v]) * node.column_bytes
            link_down = max(link_down, end_r[v]) + link.transfer_s(nbytes)
            arr_down[v] = link_down + link.latency_s
            bytes_down += nbytes
    makespan = max(max(end_m.get(u, 0.0), arr_down.get(u, 0.0)) for u in problem.outputs)
    return makespan, bytes_up, bytes_down


@pytest.mark.parametrize('seed', range(40))
def test_simulate_matches_the_naive_reference(seed):
    rng = random.Random(seed)
    problem = random_problem(rng, size=rng.randint(4, 20))
    link = LinkModel(rng.choice((2e4, 1e5, 1e6)), per_byte_s=rng.choice((0.0, 1e-7)))
    for _ in range(10):
        plan = random_plan(problem, rng)
        fast = simulate(problem, plan, link)
        detailed = simulate(problem, plan, link, timeline=True)
        makespan, bytes_up, bytes_down = reference(problem, plan, link)
        assert fast.makespan_s == pytest.approx(makespan, rel=1e-9)
        assert (fast.bytes_up, fast.bytes_down) == (bytes_up, bytes_down)
        assert detailed.makespan_s == pytest.approx(fast.makespan_s, rel=1e-12)
        assert detailed.bytes_total == fast.bytes_total
        assert detailed.messages == fast.messages == len(detailed.timeline.messages)
        assert detailed.expansive_transfer == fast.expansive_transfer
        assert min(detailed.timeline.slack) >= -1e-9
        assert detailed.timeline.critical


def test_prefix_sim_is_exact_on_chains_and_branches_cheaply():
    rng = random.Random(7)
    for _ in range(30):
        b = Builder()
        u = b.add(INPUT, 16)
        for _ in range(rng.randint(1, 8)):
            k = rng.choice((1, 3, 5))
            u = b.add(
                LOCAL,
                16,
                [u],
                [conv(16, 16, k)],
                rng.choice((10, 100)),
                rng.uniform(1, 5) * MS,
                rng.uniform(0.1, 5) * MS,
            )
        problem = b.problem([u])
        compiled = compile_problem(problem)
        plan = random_plan(problem, rng)
        state = PrefixSim(compiled, TINY_LINK)
        branch = None
        for v in range(len(problem.nodes)):
            if v == 1:
                branch = state.copy()
            state.extend(plan.m[v], plan.r[v])
        assert state.plan() == plan
        exact = simulate(problem, plan, TINY_LINK)
        assert state.done == pytest.approx(exact.makespan_s, rel=1e-12)
        assert (state.bytes_up, state.bytes_down) == (exact.bytes_up, exact.bytes_down)
        assert branch is not None
        assert branch.next == 1  # the copy did not move on


def test_prefix_sim_close_on_dags():
    # Skip connections make it approximate (extra columns ride at the end of the queue),
    # but it never forgets bytes and stays in the neighbourhood of the exact makespan.
    rng = random.Random(11)
    for _ in range(30):
        problem = random_problem(rng, size=14)
        plan = random_plan(problem, rng)
        state = PrefixSim(compile_problem(problem), TINY_LINK)
        for v in range(len(problem.nodes)):
            state.extend(plan.m[v], plan.r[v])
        exact = simulate(problem, plan, TINY_LINK)
        assert state.bytes_up + state.bytes_down == exact.bytes_total
        assert state.done == pytest.approx(exact.makespan_s, rel=0.5)


def test_synthetic_problem_is_valid_and_fast_to_simulate():
    problem = synthetic_problem(600, seed=2)
    assert len(problem.nodes) == 600
    link = LinkModel(10e6)
    dev = simulate(problem, device_only(problem), link)
    assert dev.makespan_s == pytest.approx(0.12)
    srv = simulate(problem, server_only(problem), link)
    assert srv.bytes_up == problem.input_bytes
