# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""LOPInfer's baselines on a :class:`PlanProblem`, and how plans are compared.

:func:`device_only`, :func:`server_only` and :func:`layer_split` (DSCCS / Neurosurgeon:
every node whole on one side, the cut found by a minimum cut); :func:`better` orders
simulated plans (makespan, then bytes, then compute). The LOSS search that starts from the
best of them is :mod:`lopinfer_ros.planner`.
"""

from __future__ import annotations

import math
from collections import deque

from lopinfer_ros.problem import INPUT, LinkModel, Plan, PlanProblem
from lopinfer_ros.simulator import (
    Compiled,
    SimResult,
    _simulate_fast,
    compile_problem,
)

DEVICE_ONLY = 'device_only'
SERVER_ONLY = 'server_only'
LAYER_SPLIT = 'layer_split'
LOPINFER = 'lopinfer'
BASELINES = (DEVICE_ONLY, SERVER_ONLY, LAYER_SPLIT)
# Relative tolerance under which two makespans count as equal (float noise).
_REL_TOL = 1e-12


def sim_key(sim: SimResult) -> tuple[float, int, float]:
    return (sim.makespan_s, sim.bytes_up + sim.bytes_down, sim.compute_s)


def better(a: SimResult, b: SimResult) -> bool:
    """Whether ``a`` beats ``b``: lower makespan; ties: fewer bytes, then less compute."""
    tol = _REL_TOL * max(1.0, abs(b.makespan_s)) if math.isfinite(b.makespan_s) else 0.0
    if a.makespan_s < b.makespan_s - tol:
        return True
    if a.makespan_s > b.makespan_s + tol:
        return False
    if a.bytes_total != b.bytes_total:
        return a.bytes_total < b.bytes_total
    return a.compute_s < b.compute_s - _REL_TOL * max(1.0, b.compute_s)


def _whole(c: Compiled, on_m: list[bool]) -> tuple[list[int], list[int]]:
    m = [0] * c.n
    r = [0] * c.n
    for v in range(c.n):
        if on_m[v] or c.is_input[v]:
            m[v] = r[v] = c.width[v]
    return m, r


def device_only(problem: PlanProblem) -> Plan:
    """Return the plan that runs every node whole on the robot."""
    widths = tuple(node.width for node in problem.nodes)
    return Plan(widths, widths)


def server_only(problem: PlanProblem) -> Plan:
    """Return the plan that runs everything but the inputs on the server."""
    m = tuple(node.width if node.kind == INPUT else 0 for node in problem.nodes)
    return Plan(m, m)


def layer_split(
    problem: PlanProblem, link: LinkModel, *, exhaustive_limit: int = 12, min_cut: bool = True
) -> Plan:
    """Return the best layer partition (every node whole on one side) in the simulator.

    Tries every topological-prefix cut (nodes before the cut on the robot, the rest on
    the server; outputs come back), which covers Neurosurgeon's single cut on a DAG with
    skip connections, plus the DSCCS-style s-t min-cut of compute and transfer times
    (``min_cut``), which may place a tail back on the robot. Problems with at most
    ``exhaustive_limit`` non-input nodes are searched exhaustively over all partitions.
    Ties go to fewer bytes, then less compute.
    """
    c = compile_problem(problem)
    free = [v for v in range(c.n) if not c.is_input[v]]
    best_sim: SimResult | None = None
    best: tuple[list[int], list[int]] | None = None

    def consider(m: list[int], r: list[int]) -> None:
        nonlocal best_sim, best
        sim = _simulate_fast(c, m, r, link)
        if best_sim is None or better(sim, best_sim):
            best_sim, best = sim, (list(m), list(r))

    if len(free) <= exhaustive_limit:
        for mask in range(1 << len(free)):
            on_m = [False] * c.n
            for bit, v in enumerate(free):
                on_m[v] = bool(mask >> bit & 1)
            consider(*_whole(c, on_m))
    else:
        on_m = [False] * c.n
        m, r = _whole(c, on_m)
        consider(m, r)
        for v in free:
            m[v] = r[v] = c.width[v]
            consider(m, r)
        if min_cut:
            consider(*_whole(c, _min_cut_side(c, link)))
    assert best is not None  # noqa: S101 - at least one partition was simulated
    return Plan(tuple(best[0]), tuple(best[1]))


def _min_cut_side(c: Compiled, link: LinkModel) -> list[bool]:
    """Return which nodes the s-t min cut of compute and transfer times puts on the robot.

    Source = robot, sink = server: a node on the robot cuts ``v -> sink`` (its device
    time), on the server ``source -> v`` (its server time plus the return of an output);
    an edge across the cut costs the producer's transfer time.
    """
    n = c.n
    source, sink = n, n + 1
    graph = _FlowGraph(n + 2)
    big = 1e18
    for v in range(n):
        full = c.width[v]
        if c.is_input[v]:
            graph.add(source, v, big)
            continue
        back = link.transfer_s(c.out_bytes[v]) + link.latency_s if c.is_output[v] else 0.0
        graph.add(source, v, min(big, c.cost_r[v][full] + back))
        graph.add(v, sink, c.cost_m[v][full])
        for u, _, _ in c.in_edges[v]:
            t = min(big, link.transfer_s(c.out_bytes[u]) + link.latency_s)
            graph.add(u, v, t)
            graph.add(v, u, t)
    graph.max_flow(source, sink)
    reach = graph.reachable(source)
    return [reach[v] for v in range(n)]


class _FlowGraph:
    """Dinic max-flow on float capacities (small graphs: a model's operators)."""

    def __init__(self, n: int) -> None:
        self.adj: list[list[int]] = [[] for _ in range(n)]
        self.to: list[int] = []
        self.cap: list[float] = []

    def add(self, a: int, b: int, cap: float) -> None:
        self.adj[a].append(len(self.to))
        self.to.append(b)
        self.cap.append(cap)
        self.adj[b].append(len(self.to))
        self.to.append(a)
        self.cap.append(0.0)

    def _levels(self, s: int, t: int) -> list[int] | None:
        level = [-1] * len(self.adj)
        level[s] = 0
        queue = deque([s])
        while queue:
            a = queue.popleft()
            for e in self.adj[a]:
                if self.cap[e] > 1e-15 and level[self.to[e]] < 0:
                    level[self.to[e]] = level[a] + 1
                    queue.append(self.to[e])
        return level if level[t] >= 0 else None

    def max_flow(self, s: int, t: int) -> float:
        total = 0.0
        while (level := self._levels(s, t)) is not None:
            it = [0] * len(self.adj)
            while True:
                pushed = self._push(s, t, level, it)
                if pushed <= 1e-15:
                    break
                total += pushed
        return total

    def _push(self, s: int, t: int, level: list[int], it: list[int]) -> float:
        # Iterative DFS along the level graph; returns the bottleneck of one path.
        path: list[int] = []
        a = s
        while True:
            if a == t:
                flow = min(self.cap[e] for e in path)
                for e in path:
                    self.cap[e] -= flow
                    self.cap[e ^ 1] += flow
                return flow
            advanced = False
            while it[a] < len(self.adj[a]):
                e = self.adj[a][it[a]]
                b = self.to[e]
                if self.cap[e] > 1e-15 and level[b] == level[a] + 1:
                    path.append(e)
                    a = b
                    advanced = True
                    break
                it[a] += 1
            if not advanced:
                if a == s:
                    return 0.0
                level[a] = -1  # dead end
                e = path.pop()
                a = self.to[e ^ 1]
                it[a] += 1

    def reachable(self, s: int) -> list[bool]:
        seen = [False] * len(self.adj)
        seen[s] = True
        stack = [s]
        while stack:
            a = stack.pop()
            for e in self.adj[a]:
                if self.cap[e] > 1e-15 and not seen[self.to[e]]:
                    seen[self.to[e]] = True
                    stack.append(self.to[e])
        return seen


def plan_baselines(problem: PlanProblem, link: LinkModel) -> dict[str, Plan]:
    """Return the three baseline plans, keyed by mode name."""
    return {
        DEVICE_ONLY: device_only(problem),
        SERVER_ONLY: server_only(problem),
        LAYER_SPLIT: layer_split(problem, link),
    }
