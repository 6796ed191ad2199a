# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""LOSS planner (Algorithm 1 of the LOPInfer paper) on a :class:`PlanProblem`.

Baselines (:mod:`lopinfer_ros.baselines`): :func:`device_only`, :func:`server_only` and
:func:`layer_split` (DSCCS / Neurosurgeon: every node whole on one side). :func:`loss` runs
Algorithm 1: seed with the best baseline, Phase I beam search over the nodes in topological
order, Phase II large neighbourhood search (LNS) with the exact simulator, then the best of
LOSS and the baselines (line 11), so it is never worse than the best baseline in the
simulator.

Decision variables (exact or harmless reductions):

* Input nodes are fixed at ``(width, width)``; global (atomic) nodes choose a side.
* Cheap element-wise followers (every input has the same width and an identity
  footprint, no input is a model input, the node is no convolution or matrix product and
  costs no more on the robot than its costliest input: ReLU, BatchNorm, residual add,
  channel concat) are *derived*: they take
  ``(min m_u, min(max r_u, min m_u))`` of their inputs, i.e. exactly the columns both sides
  already hold (the replicated range included), which needs no transfer whenever the
  inputs agree. Choosing anything else for them only moves a small amount of work, or
  adds a transfer next to the producer that decides the split anyway.
* Every other local node is a decision node.

Phase I (:meth:`_Search.beam`): candidates per decision node are the cuts ``{0, width,
the first producer's split scaled by the width ratio, the transfer-free bounds (largest
robot prefix / smallest server suffix computable from what each side holds), 25/50/75
%}`` x replication ``{0, halo, 2 x halo}`` (halo: how far a consumer's footprint reaches
past a cut; wider multiples for tensors constraint 5 keeps local), plus the
transfer-free maximal replication and the seed's choice. Partial plans are simulated
incrementally (:class:`~lopinfer_ros.simulator.PrefixSim`), ranked by a completion
estimate (the best of: robot gathers and hands the rest off at the best later layer cut,
server gathers and finishes, or both keep a share paying a message latency per remaining
halo operator), pruned when a fluid lower bound exceeds the best baseline's makespan;
one beam slot always follows the seed.

Phase II (:meth:`_Search.lns`; the moves in :mod:`lopinfer_ros.neighbourhood`): anchors
are decision nodes on the critical path, with the least slack, or next to the costliest
transfers; a move revokes a neighbourhood of 4-24 decision nodes around one (or snapped to
*segment boundaries*: topological cuts no tensor larger than the input crosses) and
repairs it: a random candidate for one node, one cut fraction and replication for the
window, a shift, more or less replication, or a *segment*: a new cut at the window's end
with every node before it widened (backward footprint closure, spec 2.4) so that each
side computes its share of the window without transfers. Accepted only if strictly
better (makespan; ties: fewer bytes, then less compute).

Determinism: Phase II stops on iteration counts (``max_iterations``, or
``max_non_improving`` rejections in a row), not on the clock, so the same problem, link
and arguments give the same plan on any machine; ties are broken by bytes, then compute,
then index order. A wall-clock ``time_budget_s`` can be set as well (the paper's tau);
when it binds, the result depends on the machine's speed.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
import time
from dataclasses import dataclass, field

from lopinfer_ros.baselines import LOPINFER, better, plan_baselines, sim_key
from lopinfer_ros.neighbourhood import Neighbourhoods
from lopinfer_ros.problem import LinkModel, Plan, PlanProblem
from lopinfer_ros.simulator import (
    Compiled,
    PrefixSim,
    SimResult,
    _link_params,
    _simulate_fast,
    _simulate_timeline,
    check_plan,
    compile_problem,
)

# Operators never derived from their inputs even with an identity footprint (1x1 conv).
_HEAVY_OPS = ('conv', 'linear', 'matmul', 'mm', 'einsum')
# Shares of the remaining work the completion estimate lets the server take.
_ALPHAS = tuple(i / 8 for i in range(9))


@dataclass(frozen=True)
class PlannedResult:
    """What :func:`loss` returns: the plan to run and what it was compared with."""

    plan: Plan
    sim: SimResult
    # 'lopinfer', or the baseline that beat the search (Algorithm 1, line 11).
    source: str
    baselines: dict[str, Plan]
    baseline_sims: dict[str, SimResult]
    # The best plan the search itself found (before line 11); None if none was feasible.
    search_plan: Plan | None = None
    search_sim: SimResult | None = None
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def makespan_s(self) -> float:
        """Predicted latency of :attr:`plan`."""
        return self.sim.makespan_s


def loss(
    problem: PlanProblem,
    link: LinkModel,
    *,
    beam_width: int = 8,
    time_budget_s: float | None = None,
    max_non_improving: int = 2000,
    max_iterations: int = 12000,
    seed: int = 0,
    transmission_pruning: bool = True,
    neighbourhood: tuple[int, int] = (4, 24),
    baselines: dict[str, Plan] | None = None,
) -> PlannedResult:
    """Plan ``problem`` for ``link`` with LOSS (spec 3.7, Algorithm 1).

    ``beam_width``: partial plans kept per step of Phase I. ``time_budget_s``: optional wall-clock
    budget of Phase II (tau; None: none, the default, for machine-independent plans).
    ``max_non_improving``: Phase II stops after this many
    consecutive rejected neighbourhoods (K); ``max_iterations`` caps it in all. ``seed``
    drives the neighbourhood choice. ``transmission_pruning``: the search never sends a
    tensor larger than the model input across the link (constraint 5); baselines may, and
    the final best-of still compares against them. ``neighbourhood``: min and max number
    of decision nodes an LNS move revokes. ``baselines``: precomputed baseline plans.
    """
    t_start = time.perf_counter()
    c = compile_problem(problem)
    if baselines is None:
        baselines = plan_baselines(problem, link)
    base_sims, best_name = _score_baselines(problem, c, link, baselines)
    seed_plan = baselines[best_name]
    t_base = time.perf_counter()

    rng = random.Random(seed)  # noqa: S311 - a seeded search, not cryptography
    search = _Search(c, link, transmission_pruning, rng)
    beam_plans = search.beam(seed_plan, beam_width, base_sims[best_name].makespan_s)
    t_beam = time.perf_counter()

    # Phase II starts from the best feasible plan: the beam's or a baseline's.
    search_plan, search_sim, iterations, accepted = _phase_two(
        search,
        beam_plans + [(list(p.m), list(p.r)) for p in baselines.values()],
        time_budget_s=time_budget_s,
        max_non_improving=max_non_improving,
        max_iterations=max_iterations,
        neighbourhood=neighbourhood,
    )
    t_lns = time.perf_counter()

    # Algorithm 1, line 11: the best of the search and the baselines.
    plan, sim, source = seed_plan, base_sims[best_name], best_name
    if search_sim is not None and search_plan is not None and not better(sim, search_sim):
        plan, sim, source = search_plan, search_sim, LOPINFER
    stats = {
        'baselines_s': t_base - t_start,
        'beam_s': t_beam - t_base,
        'lns_s': t_lns - t_beam,
        'total_s': t_lns - t_start,
        'lns_iterations': iterations,
        'lns_accepted': accepted,
        'beam_plans': len(beam_plans),
        **search.stats(),
    }
    return PlannedResult(
        plan=plan,
        sim=sim,
        source=source,
        baselines=dict(baselines),
        baseline_sims=base_sims,
        search_plan=search_plan,
        search_sim=search_sim,
        stats=stats,
    )


def _score_baselines(
    problem: PlanProblem, c: Compiled, link: LinkModel, baselines: dict[str, Plan]
) -> tuple[dict[str, SimResult], str]:
    """Simulate the baseline plans; return their results and the name of the best one."""
    for plan in baselines.values():
        check_plan(problem, plan)
    base_sims = {name: _simulate_fast(c, p.m, p.r, link) for name, p in baselines.items()}
    best_name = min(base_sims, key=lambda name: sim_key(base_sims[name]))
    for name in base_sims:  # deterministic winner among exact ties
        if better(base_sims[name], base_sims[best_name]):
            best_name = name
    return base_sims, best_name


def _best_start(
    c: Compiled, link: LinkModel, plans: list[tuple[list[int], list[int]]], pruning: bool
) -> tuple[list[int], list[int], SimResult] | None:
    """Return the best of ``plans`` allowed under ``pruning``, with its simulation (or None)."""
    best: tuple[list[int], list[int], SimResult] | None = None
    for m, r in plans:
        sim = _simulate_fast(c, m, r, link)
        if pruning and sim.expansive_transfer:
            continue
        if best is None or better(sim, best[2]):
            best = (m, r, sim)
    return best


def _phase_two(
    search: _Search,
    starts: list[tuple[list[int], list[int]]],
    *,
    time_budget_s: float | None,
    max_non_improving: int,
    max_iterations: int,
    neighbourhood: tuple[int, int],
) -> tuple[Plan | None, SimResult | None, int, int]:
    """Run Phase II from the best feasible plan of ``starts``.

    Returns the plan it ends with, its simulation, and the LNS iterations and accepted
    moves; ``(None, None, 0, 0)`` when no start is feasible.
    """
    start = _best_start(search.c, search.link, starts, search.pruning)
    if start is None:
        return None, None, 0, 0
    m, r, sim = start
    m, r, sim, iterations, accepted = search.lns(
        m,
        r,
        sim,
        deadline=math.inf if time_budget_s is None else time.perf_counter() + time_budget_s,
        max_non_improving=max_non_improving,
        max_iterations=max_iterations,
        neighbourhood=neighbourhood,
    )
    return Plan(tuple(m), tuple(r)), sim, iterations, accepted


def _signature(s: PrefixSim) -> tuple:
    """Return what makes two partial plans interchangeable for the rest of the search."""
    return (
        round(s.tm, 12),
        round(s.tr, 12),
        round(s.up_free, 12),
        round(s.down_free, 12),
        round(s.done, 12),
        tuple((u, e[0], e[1]) for u, e in s.open.items()),
    )


class _Search:
    """State shared by Phase I and Phase II for one problem and bandwidth."""

    def __init__(self, c: Compiled, link: LinkModel, pruning: bool, rng: random.Random) -> None:
        self.c = c
        self.link = link
        self.pruning = pruning
        self.rng = rng
        self.simulations = 0
        self.accepted_moves: dict[str, int] = {}
        self.derived = [self._is_derived(v) for v in range(c.n)]
        self.decisions = [v for v in range(c.n) if not c.is_input[v] and not self.derived[v]]
        self._prepare_estimates()
        self.moves = Neighbourhoods(c, rng, self.decisions, self.derived, self.candidates)

    def _prepare_estimates(self) -> None:
        """Precompute the bandwidth-dependent tables of :meth:`_estimate`."""
        c = self.c
        link = self.link
        n = c.n
        # dev_before[k]: robot time of nodes < k; best_handoff[k]: min over cuts k' >= k of
        # dev_before[k'] + the transfer of the tensors crossing k' + the server's rest and
        # the return of outputs computed there (the layer split of the remaining nodes).
        msg_s, byte_s, _ = _link_params(link)
        dev_before = [0.0] * (n + 1)
        for v in range(n):
            dev_before[v + 1] = dev_before[v] + (0.0 if c.is_input[v] else c.cost_m[v][c.width[v]])
        delta_bytes = [0] * (n + 2)
        delta_count = [0] * (n + 2)
        for u in range(n):
            last = c.last_consumer[u]
            if last > u:
                delta_bytes[u + 1] += c.out_bytes[u]
                delta_bytes[last + 1] -= c.out_bytes[u]
                delta_count[u + 1] += 1
                delta_count[last + 1] -= 1
        ret = [0.0] * (n + 1)
        for v in range(n - 1, -1, -1):
            back = link.transfer_s(c.out_bytes[v]) + link.latency_s if c.is_output[v] else 0.0
            ret[v] = ret[v + 1] + back
        handoff = [0.0] * (n + 1)
        cross_b = cross_n = 0
        for k in range(n + 1):
            cross_b += delta_bytes[k]
            cross_n += delta_count[k]
            if k == n:
                handoff[k] = dev_before[n]
                continue
            xfer = 0.0
            if cross_n:
                xfer = cross_n * msg_s + cross_b * byte_s + link.latency_s
            handoff[k] = dev_before[k] + xfer + c.srv_after[k] + ret[k]
        for k in range(n - 1, -1, -1):
            handoff[k] = min(handoff[k], handoff[k + 1])
        self.dev_before = dev_before
        self.best_handoff = handoff
        # Remaining nodes whose footprint reaches past a cut: a split kept to the end pays
        # about one message latency per such node on the critical path.
        spatial = [0] * (n + 1)
        for v in range(n - 1, -1, -1):
            halo_node = not c.is_input[v] and not c.elementwise[v] and not c.is_atomic[v]
            spatial[v] = spatial[v + 1] + (1 if halo_node else 0)
        self.spatial_after = spatial
        self.exchange_s = msg_s + link.latency_s

    def _is_derived(self, v: int) -> bool:
        """Whether ``v`` is a cheap element-wise follower that inherits its inputs' columns.

        Not when it reads a model input (the robot holds those whole, and the server should
        be able to take the first operator's columns), when it is a pointwise convolution
        or matrix product, or when it costs more than its costliest input: those are worth
        their own decision.
        """
        c = self.c
        if not c.elementwise[v] or any(word in c.op[v].lower() for word in _HEAVY_OPS):
            return False
        producers = [u for u, _, _ in c.in_edges[v]]
        if any(c.is_input[u] for u in producers):
            return False
        own = c.cost_m[v][c.width[v]]
        return own <= max(c.cost_m[u][c.width[u]] for u in producers)

    # -- candidate generation -------------------------------------------------------------

    def derive(self, v: int, hold: list[tuple[int, int]]) -> tuple[int, int]:
        """Return the derived ``(m, r)`` of element-wise ``v`` from its inputs' ``(m, r)``."""
        m = min(mu for mu, _ in hold)
        r = max(ru for _, ru in hold)
        return m, min(r, m)

    def free_bounds(self, v: int, hold: list[tuple[int, int]]) -> tuple[int, int]:
        """Return the largest robot prefix and smallest server suffix needing no transfer."""
        c = self.c
        fm = c.width[v]
        fr = 0
        for (_, lo, hi), (mu, ru) in zip(c.in_edges[v], hold, strict=True):
            fm = min(fm, bisect.bisect_right(hi, mu))
            fr = max(fr, bisect.bisect_left(lo, ru))
        return fm, fr

    def candidates(
        self, v: int, hold: list[tuple[int, int]], extra: tuple[int, int] | None = None
    ) -> list[tuple[int, int]]:
        """Return the candidate ``(m, r)`` of decision node ``v`` (sorted, no duplicates)."""
        c = self.c
        if c.is_atomic[v]:
            return [(0, 0), (1, 1)]
        w = c.width[v]
        out: set[tuple[int, int]] = {(0, 0), (w, w)}
        cuts = {w // 4, w // 2, (3 * w) // 4}
        if hold:
            fm, fr = self.free_bounds(v, hold)
            (mu, ru), wu = hold[0], c.width[c.in_edges[v][0][0]]
            mi = min(w, round(mu * w / wu))
            ri = min(mi, round(ru * w / wu))
            cuts.update((fm, fr, mi))
            out.add((mi, ri))
            if fr <= fm:
                out.add((fm, fr))
                mid = min(max(mi, fr), fm)
                out.add((mid, mid))
        h = c.halo[v]
        # A tensor that may not cross the link needs enough replication for its consumers
        # to go on without transfers for a while: offer wider overlaps there.
        reps = (1, 2, 4, 8, 16, 32) if self.pruning and c.expansive[v] else (1, 2)
        for cut in cuts:
            out.add((cut, cut))
            if 0 < cut < w:
                for k in reps:
                    out.add((min(w, cut + k * h), max(0, cut - k * h)))
        if extra is not None and 0 <= extra[1] <= extra[0] <= w:
            out.add(extra)
        return sorted(out)

    # -- Phase I: beam search -------------------------------------------------------------

    def _estimate(self, s: PrefixSim) -> tuple[float, float]:
        """Return (completion estimate, lower bound) of the makespan of a partial plan.

        The bound lets the undecided work flow between the two compute queues with no
        transfers. The estimate is the best of three completions, each timed along its
        critical path: the robot gathers the open tensors and goes on, handing the rest
        to the server at the best later layer cut (device-only included); the server
        gathers them and does all the rest, sending outputs back; or the two keep a share
        ``a`` each (best on a grid), paying about one message latency per remaining
        operator whose footprint crosses the cut.
        """
        c = self.c
        nxt = s.next
        wm = c.dev_after[nxt]
        wr = c.srv_after[nxt]
        if wm <= 0.0 and wr <= 0.0:
            return s.done, s.done
        tm, tr = s.tm, s.tr
        # Fluid bound: all on the robot, all on the server, or both queues end together.
        lb = min(tm + wm, max(tm, tr + wr))
        a_star = (tm + wm - tr) / (wm + wr)
        if 0.0 < a_star < 1.0:
            lb = min(lb, tr + a_star * wr)
        lb = max(lb, s.done)
        ob = c.outb_after[nxt]
        fb, hm, hr = s.front_bytes, s.hold_m, s.hold_r
        msg_s, byte_s, lat = s.msg_s, s.byte_s, s.lat
        up_start = max(s.up_free, tm) + msg_s + lat
        down_start = max(s.down_free, tr) + msg_s + lat
        ret = msg_s + ob * byte_s + lat if ob else 0.0
        # Robot gathers everything, then the best layer split of the rest.
        start = tm
        if fb > hm:
            start = max(start, down_start + (fb - hm) * byte_s)
        best = start - self.dev_before[nxt] + self.best_handoff[nxt]
        # Server gathers everything and finishes.
        start = tr
        if fb > hr:
            start = max(start, up_start + (fb - hr) * byte_s)
        best = min(best, start + wr + ret)
        penalty = self.spatial_after[nxt] * self.exchange_s
        for a in _ALPHAS[1:-1]:
            start = tm
            need = (1.0 - a) * fb - hm
            if need > 0:
                start = max(start, down_start + need * byte_s)
            fin = start + (1.0 - a) * wm
            start = tr
            need = a * fb - hr
            if need > 0:
                start = max(start, up_start + need * byte_s)
            end = start + a * wr
            if ob:
                end += msg_s + a * ob * byte_s + lat
            fin = max(fin, end) + penalty
            if fin < best:
                best = fin
        return max(best, s.done), lb

    def beam(self, seed_plan: Plan, width: int, ub: float) -> list[tuple[list[int], list[int]]]:
        """Phase I: return the complete plans left in the beam (best first)."""
        c = self.c
        states = [PrefixSim(c, self.link)]
        seed_index = 0
        bound = ub * (1.0 + 1e-9)
        for v in range(c.n):
            if c.is_input[v]:
                for s in states:
                    s.extend(c.width[v], c.width[v])
                continue
            if self.derived[v]:
                for s in states:
                    s.extend(*self.derive(v, s.holdings(v)))
                if self.pruning and any(s.exp_transfer for s in states):
                    seed_state = states[seed_index] if seed_index >= 0 else None
                    states = [s for s in states if not s.exp_transfer]
                    seed_index = states.index(seed_state) if seed_state in states else -1
                if not states:
                    return []
                continue
            seed_mr = (seed_plan.m[v], seed_plan.r[v])
            scored = []
            seed_child = None
            for i, s in enumerate(states):
                for j, (m, r) in enumerate(self.candidates(v, s.holdings(v), seed_mr)):
                    child = s.copy()
                    child.extend(m, r)
                    if self.pruning and child.exp_transfer:
                        continue
                    est, lb = self._estimate(child)
                    if i == seed_index and (m, r) == seed_mr:
                        # The seed's own path stays even if the (approximate) incremental
                        # simulation sees it above the bound.
                        seed_child = child
                    elif lb > bound:
                        continue  # cannot beat the best baseline any more
                    scored.append((est, lb, child.bytes_up + child.bytes_down, i, j, child))
            if not scored:
                return []
            scored.sort(key=lambda item: item[:5])
            kept: list[PrefixSim] = []
            seen: set[tuple] = set()
            # One slot follows the seed (Algorithm 1 starts the beam from it), so the beam
            # always holds a plan about as good as the best baseline.
            seed_index = -1
            if seed_child is not None:
                kept.append(seed_child)
                seen.add(_signature(seed_child))
                seed_index = 0
            for item in scored:
                child = item[5]
                sig = _signature(child)
                if sig in seen:
                    continue
                seen.add(sig)
                kept.append(child)
                if len(kept) >= width:
                    break
            states = kept
        plans = []
        for s in states:
            plan = s.plan()
            plans.append((list(plan.m), list(plan.r)))
        return plans

    # -- Phase II: large neighbourhood search --------------------------------------------

    def stats(self) -> dict[str, int]:
        """Return the search's counters for :attr:`PlannedResult.stats`."""
        stats = {'lns_simulations': self.simulations, 'decision_nodes': len(self.decisions)}
        stats.update({f'accepted_{kind}': count for kind, count in self.accepted_moves.items()})
        return stats

    def _simulate(self, m: list[int], r: list[int]) -> SimResult:
        self.simulations += 1
        return _simulate_fast(self.c, m, r, self.link)

    def rederive(self, m: list[int], r: list[int], changed: set[int]) -> None:
        """Recompute derived nodes downstream of ``changed`` (in place, adds to it)."""
        c = self.c
        derived = self.derived
        heap = [w for u in changed for w, _, _ in c.out_edges[u] if derived[w]]
        heapq.heapify(heap)
        done = -1
        while heap:
            v = heapq.heappop(heap)
            if v == done:
                continue  # queued by several inputs
            done = v
            mr = self.derive(v, [(m[u], r[u]) for u, _, _ in c.in_edges[v]])
            if mr != (m[v], r[v]):
                m[v], r[v] = mr
                changed.add(v)
                for w, _, _ in c.out_edges[v]:
                    if derived[w]:
                        heapq.heappush(heap, w)

    def _anchors(self, timeline) -> tuple[list[int], list[int]]:
        """Return decision nodes near low-slack events and near the costliest transfers."""
        c = self.c
        pos = self.decisions

        def decision_at_or_before(v: int) -> int | None:
            i = bisect.bisect_right(pos, v) - 1
            return pos[i] if i >= 0 else None

        critical: list[int] = []
        for kind, v, _ in timeline.critical:
            d = v if kind == 'compute' else v
            d = decision_at_or_before(d)
            if d is not None and (not critical or critical[-1] != d):
                critical.append(d)
        slack = timeline.slack
        tight = sorted(self.decisions, key=lambda v: (slack[v], v))[: max(8, len(pos) // 20)]
        for v in tight:
            if v not in critical:
                critical.append(v)
        heavy: list[int] = []
        by_transfer = sorted(
            (v for v in range(c.n) if timeline.transfer_s[v] > 0.0),
            key=lambda v: (-timeline.transfer_s[v], v),
        )
        for u in by_transfer[:12]:
            for d in [decision_at_or_before(u)] + [w for w, _, _ in c.out_edges[u]]:
                if d is not None and not self.derived[d] and not c.is_input[d]:
                    if d not in heavy:
                        heavy.append(d)
        return critical, heavy

    def lns(
        self,
        m: list[int],
        r: list[int],
        sim: SimResult,
        *,
        deadline: float,
        max_non_improving: int,
        max_iterations: int,
        neighbourhood: tuple[int, int],
    ) -> tuple[list[int], list[int], SimResult, int, int]:
        """Phase II: improve ``(m, r)`` until the deadline or K rejections in a row."""
        c = self.c
        if not self.decisions:
            return m, r, sim, 0, 0
        lo_size, hi_size = neighbourhood
        timeline = _simulate_timeline(c, m, r, self.link).timeline
        critical, heavy = self._anchors(timeline)
        non_improving = iterations = accepted = aimed = 0
        stale = False
        while (
            iterations < max_iterations
            and non_improving < max_non_improving
            and time.perf_counter() < deadline
        ):
            iterations += 1
            if stale and iterations >= aimed + 20:
                # The critical path moved: re-aim the neighbourhoods (not after every
                # acceptance: a timeline costs about ten simulations).
                timeline = _simulate_timeline(c, m, r, self.link).timeline
                critical, heavy = self._anchors(timeline)
                aimed, stale = iterations, False
            pool = heavy if heavy and self.rng.random() < 0.4 else critical
            if not pool or self.rng.random() < 0.1:
                pool = self.decisions
            anchor = self.rng.choice(pool)
            cand_m, cand_r = list(m), list(r)
            kind, changed = self.moves.move(cand_m, cand_r, anchor, lo_size, hi_size)
            if not changed:
                non_improving += 1
                continue
            self.rederive(cand_m, cand_r, changed)
            cand = self._simulate(cand_m, cand_r)
            if (self.pruning and cand.expansive_transfer) or not better(cand, sim):
                non_improving += 1
                continue
            m, r, sim = cand_m, cand_r, cand
            accepted += 1
            self.accepted_moves[kind] = self.accepted_moves.get(kind, 0) + 1
            non_improving = 0
            stale = True
        return m, r, sim, iterations, accepted
