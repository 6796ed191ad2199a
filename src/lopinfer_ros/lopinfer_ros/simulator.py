# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Event-driven simulator of a LOPInfer plan (spec 3.6), full and incremental (pure Python).

Model (the semantics the runtime follows, see ``lopinfer_ros.problem``):

* Each side (robot M, server R) has one compute queue and runs its slices of the nodes in
  topological (index) order; a slice starts when the side is free and every column it
  needs is there. A side with no columns of a node spends nothing on it.
* Each direction of the link is one FIFO: a message of ``n`` bytes occupies it for
  ``LinkModel.transfer_s(n)`` and arrives ``latency_s`` after it left.
* Right after a side has computed ``u`` it sends at most one message per direction with
  the columns of ``u`` that the other side's consumers need and the other side lacks, as
  one contiguous range that reaches the receiver's own boundary (so that what a side
  holds stays contiguous; the runtime's ``lopinfer_ros.schedule`` does the same): up
  (M->R) carries ``[min need, r_u)``, down (R->M) ``[m_u, max need)``, where an output
  needs all of itself on M. Since ``r <= m`` the sender always holds those columns.
* The makespan (latency) is when the last output is whole on M.

:func:`simulate` is the reference: exact, and fast enough for local search (two passes over
the nodes, per-problem tables precomputed once and cached). :class:`PrefixSim` is the
incremental form for the beam search: it simulates a prefix of decided nodes and can be
extended node by node and copied cheaply. It cannot be exact, because the message of a
producer depends on consumers that are not decided yet; it places a producer's message
when the first consumer that needs it is decided and appends later consumers' extra
columns to it (exact on chains, approximate around skip connections). Plans it yields
are always re-scored with :func:`simulate`.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np

from lopinfer_ros.problem import (
    ATOMIC,
    INPUT,
    LOCAL,
    CostCurve,
    LinkModel,
    Plan,
    PlanNode,
    PlanProblem,
)

UP = 'up'
DOWN = 'down'
ROBOT = 'M'
SERVER = 'R'
# Float slack when comparing event times on the critical path.
_EPS = 1e-12


def _cost_table(curve: CostCurve, width: int) -> list[float]:
    """Return ``curve(k)`` for ``k = 0..width`` (vectorised, same formula as CostCurve)."""
    xs = np.asarray(curve.columns, dtype=float)
    ys = np.asarray(curve.seconds, dtype=float)
    cols = np.arange(width + 1, dtype=float)
    out = np.interp(cols, xs, ys)
    below = cols < xs[0]
    out[below] = ys[0] * (0.5 + 0.5 * cols[below] / xs[0])
    above = cols > xs[-1]
    if above.any():
        if len(xs) == 1:
            out[above] = ys[0] * cols[above] / xs[0]
        else:
            slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
            out[above] = np.maximum(0.0, ys[-1] + slope * (cols[above] - xs[-1]))
    # Exact sample values, so a hand-computed profile reproduces to the last bit.
    for x, y in zip(curve.columns, curve.seconds, strict=True):
        if x <= width:
            out[x] = y
    out[0] = 0.0
    return out.tolist()


def _is_identity(node: PlanNode, problem: PlanProblem) -> bool:
    """Whether every input footprint of ``node`` is column ``j`` -> column ``j``."""
    if node.kind != LOCAL or not node.inputs:
        return False
    ident_lo = tuple(range(node.width))
    ident_hi = tuple(range(1, node.width + 1))
    for k, u in enumerate(node.inputs):
        if problem.nodes[u].width != node.width:
            return False
        if node.need_lo[k] != ident_lo or node.need_hi[k] != ident_hi:
            return False
    return True


class Compiled:
    """Per-problem tables the simulator and planner use (built once, cached per problem)."""

    def __init__(self, problem: PlanProblem) -> None:
        nodes = problem.nodes
        n = len(nodes)
        self.n = n
        self.width = [node.width for node in nodes]
        self.kind = [node.kind for node in nodes]
        self.op = [node.op for node in nodes]
        self.is_input = [node.kind == INPUT for node in nodes]
        self.is_atomic = [node.kind == ATOMIC for node in nodes]
        self.col_bytes = [node.column_bytes for node in nodes]
        self.input_bytes = problem.input_bytes
        self.outputs = tuple(sorted(set(problem.outputs)))
        self.is_output = [False] * n
        for u in self.outputs:
            self.is_output[u] = True
        # (producer, need_lo, need_hi) per input slot, and the same per consumer slot.
        self.in_edges: list[tuple[tuple[int, tuple[int, ...], tuple[int, ...]], ...]] = []
        out_edges: list[list[tuple[int, tuple[int, ...], tuple[int, ...]]]] = [[] for _ in nodes]
        for v, node in enumerate(nodes):
            edges = tuple((u, node.need_lo[k], node.need_hi[k]) for k, u in enumerate(node.inputs))
            self.in_edges.append(edges)
            for u, lo, hi in edges:
                out_edges[u].append((v, lo, hi))
        self.out_edges = [tuple(e) for e in out_edges]
        self.last_consumer = [max((w for w, _, _ in e), default=-1) for e in self.out_edges]
        self.closers: list[list[int]] = [[] for _ in nodes]
        for u, last in enumerate(self.last_consumer):
            if last >= 0:
                self.closers[last].append(u)
        self.cost_m = [_cost_table(node.device, node.width) for node in nodes]
        self.cost_r = [_cost_table(node.server, node.width) for node in nodes]
        self.out_bytes = [node.column_bytes * node.width for node in nodes]
        # Constraint 5: tensors larger than the model input must not cross the link.
        self.expansive = [b > problem.input_bytes for b in self.out_bytes]
        self.elementwise = [_is_identity(node, problem) for node in nodes]
        self.halo = [self._halo(u) for u in range(n)]
        # Suffix sums for completion estimates: work after node v at full width.
        dev_after = [0.0] * (n + 1)
        srv_after = [0.0] * (n + 1)
        outb_after = [0] * (n + 1)
        for v in range(n - 1, -1, -1):
            full = self.width[v]
            dev_after[v] = dev_after[v + 1] + (0.0 if self.is_input[v] else self.cost_m[v][full])
            srv_after[v] = srv_after[v + 1] + (0.0 if self.is_input[v] else self.cost_r[v][full])
            outb_after[v] = outb_after[v + 1] + (self.out_bytes[v] if self.is_output[v] else 0)
        self.dev_after = dev_after
        self.srv_after = srv_after
        self.outb_after = outb_after

    def _halo(self, u: int) -> int:
        """Return the columns of ``u`` a consumer's slice reaches past its own cut (>= 1)."""
        halo = 0
        wu = self.width[u]
        for w, lo, hi in self.out_edges[u]:
            ww = self.width[w]
            j = ww // 2
            span = hi[j] - lo[j]
            stride = wu / ww
            halo = max(halo, math.ceil((span - stride) / 2))
        return max(1, min(halo, wu))


_CACHE: dict[int, Compiled] = {}


def compile_problem(problem: PlanProblem) -> Compiled:
    """Return the (cached) simulator tables of ``problem``."""
    key = id(problem)
    compiled = _CACHE.get(key)
    if compiled is None:
        compiled = Compiled(problem)
        _CACHE[key] = compiled
        # Drop the entry with the problem; Compiled holds no reference back to it.
        weakref.finalize(problem, _CACHE.pop, key, None)
    return compiled


@dataclass(frozen=True)
class NodeTiming:
    """When a node's slices ran: ``None`` where a side has no columns of it."""

    start_m: float | None
    end_m: float | None
    start_r: float | None
    end_r: float | None


@dataclass(frozen=True)
class Message:
    """One transfer: columns ``[lo, hi)`` of ``producer`` that one side sends the other."""

    producer: int
    direction: str
    columns: tuple[int, int]
    nbytes: int
    send_s: float
    start_s: float
    arrival_s: float


@dataclass(frozen=True)
class Timeline:
    """A simulated schedule with its critical path.

    ``slack[v]`` is how long node ``v``'s slices (the tighter side) could slip without
    delaying the makespan (infinite for work no output depends on); ``critical`` lists
    the events of one critical path in time order as ``('compute', node, side)`` or
    ``('message', producer, direction)``.
    ``transfer_s[u]`` is the link time of ``u``'s messages (both directions).
    """

    nodes: tuple[NodeTiming, ...]
    messages: tuple[Message, ...]
    slack: tuple[float, ...]
    critical: tuple[tuple[str, int, str], ...]
    transfer_s: tuple[float, ...]


@dataclass(frozen=True)
class SimResult:
    """What a simulated plan costs."""

    makespan_s: float
    bytes_up: int
    bytes_down: int
    messages: int
    compute_s: float = 0.0
    # Whether a tensor larger than the model input crosses the link (constraint 5); the
    # return of outputs to M does not count.
    expansive_transfer: bool = False
    timeline: Timeline | None = None

    @property
    def bytes_total(self) -> int:
        """Bytes moved in both directions."""
        return self.bytes_up + self.bytes_down


def check_plan(problem: PlanProblem, plan: Plan) -> None:
    """Raise ValueError if ``plan`` is invalid for ``problem`` (ranges, inputs, atomics)."""
    plan.check(problem)
    for node, m, r in zip(problem.nodes, plan.m, plan.r, strict=True):
        if node.kind == ATOMIC and (m, r) not in ((1, 1), (0, 0)):
            raise ValueError(f'global node {node.name} must run whole on one side, got {m}, {r}')


def simulate(
    problem: PlanProblem, plan: Plan, link: LinkModel, *, timeline: bool = False
) -> SimResult:
    """Simulate ``plan`` on ``problem`` over ``link``; see the module docstring."""
    check_plan(problem, plan)
    compiled = compile_problem(problem)
    if timeline:
        return _simulate_timeline(compiled, plan.m, plan.r, link)
    return _simulate_fast(compiled, plan.m, plan.r, link)


def _link_params(link: LinkModel) -> tuple[float, float, float]:
    """Return (seconds per message, seconds per byte, latency) of ``link.transfer_s``."""
    bandwidth = link.bandwidth_bytes_per_s
    if not bandwidth > 0:
        # A dead link: every message takes forever (and 0 * inf never makes a NaN).
        return math.inf, 0.0, float(link.latency_s)
    per_byte = getattr(link, 'per_byte_s', 0.0) + 1.0 / bandwidth
    per_msg = link.per_message_s + link.per_message_bytes / bandwidth
    return per_msg, per_byte, float(link.latency_s)


# A node's messages as :func:`_message_ranges` finds them: (up_lo, up_to, down_hi, down_to),
# where up_to / down_to list the consumers that wait for each (None: no consumer).
_Needs = tuple[int, list[int] | None, int, list[int] | None]
# An event of the timeline: ('compute', node, side) or ('message', producer, direction).
_Event = tuple[str, int, str]


def _message_ranges(
    c: Compiled, m: tuple[int, ...] | list[int], r: tuple[int, ...] | list[int]
) -> list[_Needs | None]:
    """Return per node the columns its messages carry and the consumers that wait for them.

    A message is one contiguous range that starts (up) or ends (down) at the receiver's own
    boundary, as the runtime sends it (``lopinfer_ros.schedule``): up carries
    ``[up_lo, r_v)`` (``up_lo``: the least any server consumer needs) to the server slices
    of ``up_to``, down ``[m_v, down_hi)`` to the robot slices of ``down_to``; an output goes
    down whole. ``None`` for a node that is no output and sends nothing. This depends on
    the plan only, not on any time, so the simulators find it in a pass before the timed one.
    """
    width = c.width
    is_output = c.is_output
    ranges: list[_Needs | None] = [None] * c.n
    for v, edges, mv, rv in zip(range(c.n), c.out_edges, m, r, strict=True):
        up_lo = rv
        down_hi = mv
        up_to = down_to = None
        for w, lo, hi in edges:
            mw = m[w]
            if mw:
                b = hi[mw - 1]
                if b > mv and b > lo[0]:
                    if b > down_hi:
                        down_hi = b
                    if down_to is None:
                        down_to = [w]
                    else:
                        down_to.append(w)
            rw = r[w]
            ww = width[w]
            if rw < ww:
                a = lo[rw]
                if a < rv and hi[ww - 1] > a:
                    if a < up_lo:
                        up_lo = a
                    if up_to is None:
                        up_to = [w]
                    else:
                        up_to.append(w)
        if is_output[v]:
            ranges[v] = (up_lo, up_to, width[v], down_to)
        elif up_to is not None or down_hi > mv:
            ranges[v] = (up_lo, up_to, down_hi, down_to)
    return ranges


def _simulate_fast(
    c: Compiled, m: tuple[int, ...] | list[int], r: tuple[int, ...] | list[int], link: LinkModel
) -> SimResult:
    """Exact simulation without a timeline (the hot path of the planner).

    Two passes: what each message carries (:func:`_message_ranges`), then when each slice
    and message runs, node by node.
    """
    n = c.n
    cost_m = c.cost_m
    cost_r = c.cost_r
    col_bytes = c.col_bytes
    is_output = c.is_output
    expansive = c.expansive
    msg_s, byte_s, lat = _link_params(link)
    ranges = _message_ranges(c, m, r)
    ready_m = [0.0] * n
    ready_r = [0.0] * n
    tm = tr = up_free = down_free = 0.0
    bytes_up = bytes_down = messages = 0
    compute = 0.0
    makespan = 0.0
    exp_transfer = False
    for v, mv, rv, wv, needs in zip(range(n), m, r, c.width, ranges, strict=True):
        em = er = 0.0
        if mv:
            s = tm if tm > ready_m[v] else ready_m[v]
            d = cost_m[v][mv]
            compute += d
            tm = em = s + d
        if rv < wv:
            s = tr if tr > ready_r[v] else ready_r[v]
            d = cost_r[v][wv - rv]
            compute += d
            tr = er = s + d
        if needs is None:
            continue
        up_lo, up_to, down_hi, down_to = needs
        if up_to is not None:
            nb = (rv - up_lo) * col_bytes[v]
            if expansive[v]:
                exp_transfer = True
            s = up_free if up_free > em else em
            up_free = s + msg_s + nb * byte_s
            arr = up_free + lat
            bytes_up += nb
            messages += 1
            for w in up_to:
                if arr > ready_r[w]:
                    ready_r[w] = arr
        # The return of an output to M is no transfer constraint 5 forbids.
        if down_to is not None and expansive[v] and not is_output[v]:
            exp_transfer = True
        arr = 0.0
        if down_hi > mv:
            nb = (down_hi - mv) * col_bytes[v]
            s = down_free if down_free > er else er
            down_free = s + msg_s + nb * byte_s
            arr = down_free + lat
            bytes_down += nb
            messages += 1
            if down_to is not None:
                for w in down_to:
                    if arr > ready_m[w]:
                        ready_m[w] = arr
        if is_output[v]:
            t = arr if mv < wv else em
            if mv and em > t:
                t = em
            if t > makespan:
                makespan = t
    return SimResult(
        makespan_s=makespan,
        bytes_up=bytes_up,
        bytes_down=bytes_down,
        messages=messages,
        compute_s=compute,
        expansive_transfer=exp_transfer,
    )


class _Events:
    """Every slice and message of one simulated plan, in the order they were scheduled.

    Filled by :func:`_record_events`; the backward pass, the slack and the critical path of
    :func:`_simulate_timeline` read it.
    """

    def __init__(self, n: int, lat: float) -> None:
        self.lat = lat
        self.start_m: list[float | None] = [None] * n
        self.end_m: list[float | None] = [None] * n
        self.start_r: list[float | None] = [None] * n
        self.end_r: list[float | None] = [None] * n
        self.msgs: dict[tuple[int, str], Message] = {}
        # Which messages a node's slice waits for, per side: (producer, direction).
        self.waits: dict[tuple[int, str], list[tuple[int, str]]] = {}
        # The consumers waiting for a message, and the producer of the message before it
        # in the same direction.
        self.consumers_of: dict[tuple[int, str], list[int]] = {}
        self.prev_msg: dict[tuple[int, str], int | None] = {}
        self.order: list[_Event] = []  # forward event order
        self.bytes_up = self.bytes_down = 0
        self.compute = 0.0
        self.exp_transfer = False

    def finish(self, ev: _Event) -> float:
        """Return when ``ev`` ended (a message: when it arrived)."""
        kind, v, side = ev
        if kind == 'compute':
            return self.end_m[v] if side == ROBOT else self.end_r[v]  # type: ignore[return-value]
        return self.msgs[(v, side)].arrival_s

    def duration(self, ev: _Event) -> float:
        """Return how long ``ev`` took (a message: from its start on the link to arrival)."""
        kind, v, side = ev
        if kind == 'compute':
            if side == ROBOT:
                return self.end_m[v] - self.start_m[v]  # type: ignore[operator]
            return self.end_r[v] - self.start_r[v]  # type: ignore[operator]
        msg = self.msgs[(v, side)]
        return msg.arrival_s - msg.start_s

    def critical_pred(self, ev: _Event) -> _Event | None:
        """Return the event whose end fixed the start of ``ev`` (None at time zero)."""
        kind, v, side = ev
        msgs = self.msgs
        if kind == 'message':
            msg = msgs[(v, side)]
            if msg.start_s <= _EPS:
                return None
            # Either the sender finished computing, or the previous message freed the link.
            if abs(msg.start_s - msg.send_s) <= _EPS:
                return ('compute', v, ROBOT if side == UP else SERVER)
            prev = self.prev_msg[(v, side)]
            return ('message', prev, side) if prev is not None else None
        start = self.start_m[v] if side == ROBOT else self.start_r[v]
        if start is None or start <= _EPS:
            return None
        for u, d in self.waits.get((v, side), []):
            if abs(msgs[(u, d)].arrival_s - start) <= _EPS:
                return ('message', u, d)
        ends = self.end_m if side == ROBOT else self.end_r
        for u in range(v - 1, -1, -1):
            if ends[u] is not None:
                return ('compute', u, side)
        return None


def _record_events(
    c: Compiled, m: tuple[int, ...] | list[int], r: tuple[int, ...] | list[int], link: LinkModel
) -> _Events:
    """Simulate like :func:`_simulate_fast`, recording every slice and message."""
    n = c.n
    width = c.width
    msg_s, byte_s, lat = _link_params(link)
    ev = _Events(n, lat)
    start_m, end_m, start_r, end_r = ev.start_m, ev.end_m, ev.start_r, ev.end_r
    order = ev.order
    ready_m = [0.0] * n
    ready_r = [0.0] * n
    tm = tr = up_free = down_free = 0.0
    last_msg: dict[str, int | None] = {UP: None, DOWN: None}
    for v, needs in enumerate(_message_ranges(c, m, r)):
        mv, rv, wv = m[v], r[v], width[v]
        if mv:
            s = max(tm, ready_m[v])
            d = c.cost_m[v][mv]
            ev.compute += d
            start_m[v], end_m[v] = s, s + d
            tm = s + d
            order.append(('compute', v, ROBOT))
        if rv < wv:
            s = max(tr, ready_r[v])
            d = c.cost_r[v][wv - rv]
            ev.compute += d
            start_r[v], end_r[v] = s, s + d
            tr = s + d
            order.append(('compute', v, SERVER))
        if needs is None:
            continue
        up_lo, up_to, down_hi, down_to = needs
        gather = c.is_output[v] and mv < wv
        if c.expansive[v] and (up_to or (down_to and not gather)):
            ev.exp_transfer = True
        for direction, cols, targets in ((UP, (up_lo, rv), up_to), (DOWN, (mv, down_hi), down_to)):
            if cols[1] <= cols[0]:
                continue
            targets = targets or []
            nb = (cols[1] - cols[0]) * c.col_bytes[v]
            if direction == UP:
                send = end_m[v]
                s = max(up_free, send)
                up_free = s + msg_s + nb * byte_s
                arr = up_free + lat
                ev.bytes_up += nb
                for w in targets:
                    ready_r[w] = max(ready_r[w], arr)
                    ev.waits.setdefault((w, SERVER), []).append((v, UP))
            else:
                send = end_r[v]
                s = max(down_free, send)
                down_free = s + msg_s + nb * byte_s
                arr = down_free + lat
                ev.bytes_down += nb
                for w in targets:
                    ready_m[w] = max(ready_m[w], arr)
                    ev.waits.setdefault((w, ROBOT), []).append((v, DOWN))
            ev.msgs[(v, direction)] = Message(v, direction, cols, nb, send, s, arr)
            ev.prev_msg[(v, direction)] = last_msg[direction]
            last_msg[direction] = v
            ev.consumers_of[(v, direction)] = targets
            order.append(('message', v, direction))
    return ev


def _output_done(c: Compiled, m: tuple[int, ...] | list[int], ev: _Events) -> dict[int, float]:
    """Return when each output is whole on M."""
    done: dict[int, float] = {}
    for u in c.outputs:
        t = ev.end_m[u] if m[u] else 0.0
        if m[u] < c.width[u]:
            t = max(t or 0.0, ev.msgs[(u, DOWN)].arrival_s)
        done[u] = t or 0.0
    return done


def _latest_finish(c: Compiled, ev: _Events, makespan: float) -> dict[_Event, float]:
    """Backward pass: return the latest finish of each event that keeps the makespan.

    Work no output depends on (a redundant slice nobody reads) has no deadline (infinity).
    """
    latest: dict[_Event, float] = {}
    next_compute: dict[str, _Event | None] = {ROBOT: None, SERVER: None}
    next_message: dict[str, _Event | None] = {UP: None, DOWN: None}
    duration = ev.duration
    for e in reversed(ev.order):
        kind, v, side = e
        lf = math.inf
        if kind == 'compute':
            nxt = next_compute[side]
            if nxt is not None:
                lf = min(lf, latest[nxt] - duration(nxt))
            if c.is_output[v] and side == ROBOT:
                lf = min(lf, makespan)
            direction = UP if side == ROBOT else DOWN
            if (v, direction) in ev.msgs:
                mev = ('message', v, direction)
                lf = min(lf, latest[mev] - duration(mev))
            next_compute[side] = e
        else:
            nxt = next_message[side]
            if nxt is not None:
                # The next message may start once this one has left the link.
                lf = min(lf, latest[nxt] - duration(nxt) + ev.lat)
            target_side = SERVER if side == UP else ROBOT
            for w in ev.consumers_of[(v, side)]:
                cev = ('compute', w, target_side)
                lf = min(lf, latest[cev] - duration(cev))
            if c.is_output[v] and side == DOWN:
                lf = min(lf, makespan)
            next_message[side] = e
        latest[e] = lf
    return latest


def _node_slack(n: int, ev: _Events, latest: dict[_Event, float]) -> list[float]:
    """Return how long each node's slices (the tighter side) could slip."""
    slack = [math.inf] * n
    for e in ev.order:
        kind, v, _ = e
        sl = latest[e] - ev.finish(e)
        if kind == 'compute' and sl < slack[v]:
            slack[v] = sl
    return slack


def _critical_path(c: Compiled, ev: _Events, done: dict[int, float]) -> list[_Event]:
    """Return one critical path in time order, back from the output that finishes last."""
    critical: list[_Event] = []
    if not c.outputs:
        return critical
    last = max(c.outputs, key=lambda u: done[u])
    e: _Event | None
    if (last, DOWN) in ev.msgs and done[last] == ev.msgs[(last, DOWN)].arrival_s:
        e = ('message', last, DOWN)
    else:
        e = ('compute', last, ROBOT)
    while e is not None:
        critical.append(e)
        e = ev.critical_pred(e)
    critical.reverse()
    return critical


def _simulate_timeline(
    c: Compiled, m: tuple[int, ...] | list[int], r: tuple[int, ...] | list[int], link: LinkModel
) -> SimResult:
    """Simulate like :func:`_simulate_fast`, recording every event and the critical path."""
    n = c.n
    ev = _record_events(c, m, r, link)
    done = _output_done(c, m, ev)
    makespan = max(done.values(), default=0.0)
    latest = _latest_finish(c, ev, makespan)
    transfer = [0.0] * n
    for (v, _), msg in ev.msgs.items():
        transfer[v] += msg.arrival_s - msg.start_s - ev.lat
    nodes = tuple(
        NodeTiming(ev.start_m[v], ev.end_m[v], ev.start_r[v], ev.end_r[v]) for v in range(n)
    )
    return SimResult(
        makespan_s=makespan,
        bytes_up=ev.bytes_up,
        bytes_down=ev.bytes_down,
        messages=len(ev.msgs),
        compute_s=ev.compute,
        expansive_transfer=ev.exp_transfer,
        timeline=Timeline(
            nodes=nodes,
            messages=tuple(sorted(ev.msgs.values(), key=lambda g: (g.start_s, g.direction))),
            slack=tuple(_node_slack(n, ev, latest)),
            critical=tuple(_critical_path(c, ev, done)),
            transfer_s=tuple(transfer),
        ),
    )


class PrefixSim:
    """Incremental simulation of a plan decided node by node in topological order.

    ``extend(m, r)`` decides the next node; :meth:`copy` branches the state (a shallow copy
    of the open producers, so beams stay cheap). Open producers are those with consumers
    still undecided; for each the state keeps what each side holds and the message
    already placed per direction. See the module docstring for where it is approximate.
    """

    __slots__ = (
        'c',
        'msg_s',
        'byte_s',
        'lat',
        'next',
        'tm',
        'tr',
        'up_free',
        'down_free',
        'bytes_up',
        'bytes_down',
        'messages',
        'compute',
        'done',
        'open',
        'trail',
        'front_bytes',
        'hold_m',
        'hold_r',
        'exp_transfer',
    )

    def __init__(self, compiled: Compiled, link: LinkModel) -> None:
        self.c = compiled
        self.msg_s, self.byte_s, self.lat = _link_params(link)
        self.next = 0
        self.tm = self.tr = self.up_free = self.down_free = 0.0
        self.bytes_up = self.bytes_down = self.messages = 0
        self.compute = 0.0
        self.done = 0.0
        # producer -> (m, r, end_m, end_r, up_lo, up_arrival, down_hi, down_arrival); a
        # message not placed yet has arrival None.
        self.open: dict[int, tuple] = {}
        self.trail: tuple | None = None
        # Bytes of the open producers (whole) and what each side holds of them.
        self.front_bytes = self.hold_m = self.hold_r = 0
        self.exp_transfer = False

    def copy(self) -> PrefixSim:
        """Return an independent copy of this state."""
        other = PrefixSim.__new__(PrefixSim)
        for name in PrefixSim.__slots__:
            setattr(other, name, getattr(self, name))
        other.open = dict(self.open)
        return other

    def holdings(self, v: int) -> list[tuple[int, int]]:
        """Return ``(m_u, r_u)`` of each input of the next node ``v``."""
        return [self.open[u][:2] for u, _, _ in self.c.in_edges[v]]

    def _send_up(self, u: int, entry: tuple, a: int) -> float:
        """Make sure R gets ``[a, r_u)`` of ``u``; return when it has arrived."""
        lo, arr = entry[4], entry[5]
        if arr is not None and lo <= a:
            return arr
        cb = self.c.col_bytes[u]
        if arr is None:
            nb = (entry[1] - a) * cb
            free = max(self.up_free, entry[2]) + self.msg_s + nb * self.byte_s
            self.messages += 1
            new_arr = free + self.lat
        else:
            # A late consumer: its extra columns ride at the end of the queue.
            nb = (lo - a) * cb
            free = max(self.up_free, entry[2]) + nb * self.byte_s
            new_arr = max(arr, free + self.lat)
        if self.c.expansive[u]:
            self.exp_transfer = True
        self.up_free = free
        self.bytes_up += nb
        self.open[u] = entry[:4] + (a, new_arr) + entry[6:]
        return new_arr

    def _send_down(self, u: int, entry: tuple, b: int, gather: bool = False) -> float:
        """Make sure M gets ``[m_u, b)`` of ``u``; return when it has arrived."""
        hi, arr = entry[6], entry[7]
        if arr is not None and b <= hi:
            return arr
        cb = self.c.col_bytes[u]
        if arr is None:
            nb = (b - entry[0]) * cb
            free = max(self.down_free, entry[3]) + self.msg_s + nb * self.byte_s
            self.messages += 1
            new_arr = free + self.lat
        else:
            nb = (b - hi) * cb
            free = max(self.down_free, entry[3]) + nb * self.byte_s
            new_arr = max(arr, free + self.lat)
        # The return of an output to M is no transfer constraint 5 forbids.
        if self.c.expansive[u] and not (gather or self.c.is_output[u]):
            self.exp_transfer = True
        self.down_free = free
        self.bytes_down += nb
        self.open[u] = entry[:6] + (b, new_arr)
        return new_arr

    def extend(self, m: int, r: int) -> None:
        """Decide ``(m, r)`` for the next node and simulate it."""
        c = self.c
        v = self.next
        wv = c.width[v]
        open_ = self.open
        start_m = self.tm
        start_r = self.tr
        for u, lo, hi in c.in_edges[v]:
            entry = open_[u]
            if m:
                b = hi[m - 1]
                if b > entry[0] and b > lo[0]:
                    t = self._send_down(u, entry, b)
                    if t > start_m:
                        start_m = t
                    entry = open_[u]
            if r < wv:
                a = lo[r]
                if a < entry[1] and hi[wv - 1] > a:
                    t = self._send_up(u, entry, a)
                    if t > start_r:
                        start_r = t
        end_m = end_r = 0.0
        if m:
            d = c.cost_m[v][m]
            self.compute += d
            end_m = self.tm = start_m + d
        if r < wv:
            d = c.cost_r[v][wv - r]
            self.compute += d
            end_r = self.tr = start_r + d
        if c.out_edges[v] or c.is_output[v]:
            open_[v] = (m, r, end_m, end_r, r, None, m, None)
            cb = c.col_bytes[v]
            self.front_bytes += c.out_bytes[v]
            self.hold_m += cb * m
            self.hold_r += cb * (wv - r)
        if c.is_output[v]:
            t = end_m if m else 0.0
            if m < wv:
                t = max(t, self._send_down(v, open_[v], wv, gather=True))
            if t > self.done:
                self.done = t
        closers = c.closers[v]
        if not c.out_edges[v] and c.is_output[v]:
            closers = closers + [v]
        for u in closers:
            entry = open_.pop(u)
            cb = c.col_bytes[u]
            self.front_bytes -= c.out_bytes[u]
            self.hold_m -= cb * entry[0]
            self.hold_r -= cb * (c.width[u] - entry[1])
        self.trail = (self.trail, m, r)
        self.next = v + 1

    def plan(self) -> Plan:
        """Return the decisions so far as a plan (only valid once every node is decided)."""
        ms: list[int] = []
        rs: list[int] = []
        node = self.trail
        while node is not None:
            node, m, r = node
            ms.append(m)
            rs.append(r)
        return Plan(tuple(reversed(ms)), tuple(reversed(rs)))
