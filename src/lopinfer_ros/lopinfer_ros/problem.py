# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""What the planner sees of a model: a DAG of sliceable operators with costs (pure Python).

The planner, simulator and plan tables work on a :class:`PlanProblem` only; the torch
graph, locality analysis and profiler build one (``graph``, ``locality``, ``profiler``). Keeping it
plain data (tuples of ints and floats) makes it picklable for the parallel table builder
and lets planner tests use hand-made graphs.

Conventions (spec 3.5, one split axis per tensor):

* Node ``v`` has ``width`` canonical local operations (columns of its output along its
  split axis); an atomic node (global operator, or a tensor without a split axis) has
  width 1.
* A plan gives every node ``(m, r)`` with ``0 <= r <= m <= width``: the robot (M)
  computes columns ``[0, m)``, the server (R) computes ``[r, width)``; ``[r, m)`` is
  replicated. Atomic nodes allow ``(1, 1)`` (robot) or ``(0, 0)`` (server). Input nodes
  are fixed at ``(width, width)``: the robot holds the inputs.
* ``need_lo[k][j]`` / ``need_hi[k][j]``: output column ``j`` of the node needs columns
  ``[need_lo, need_hi)`` of its ``k``-th input (the exact footprint, already clipped).
  Both are non-decreasing in ``j``, so columns ``[a, b)`` need ``[need_lo[a], need_hi[b-1])``.
* After computing ``u`` a side holds its own columns; what a consumer on the other side
  needs beyond that is sent in one message per producer and direction (the union of the
  consumers' needs, widened to start at the receiver's own boundary so its piece stays
  contiguous: robot receives ``[m_u, max hi)``, server ``[min lo, r_u)``), from the side
  that computed it. Output nodes must end up whole on
  the robot.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

INPUT = 'input'
LOCAL = 'local'
ATOMIC = 'atomic'
NODE_KINDS = frozenset({INPUT, LOCAL, ATOMIC})


@dataclass(frozen=True)
class CostCurve:
    """Compute seconds as a function of the number of columns computed.

    Measured at a few widths (small kernels do not scale linearly) and interpolated
    piecewise linearly; zero columns cost nothing, more than the widest sample is
    extrapolated from the last segment.
    """

    columns: tuple[int, ...]
    seconds: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.columns) != len(self.seconds) or not self.columns:
            raise ValueError('a cost curve needs as many seconds as column samples (>= 1)')
        if any(b <= a for a, b in zip(self.columns, self.columns[1:], strict=False)):
            raise ValueError(f'cost curve columns must increase: {self.columns}')
        if self.columns[0] < 1 or any(s < 0 for s in self.seconds):
            raise ValueError('cost curve columns must be >= 1 and seconds >= 0')

    def __call__(self, columns: int) -> float:
        """Return the seconds to compute ``columns`` columns."""
        if columns <= 0:
            return 0.0
        xs, ys = self.columns, self.seconds
        i = bisect.bisect_left(xs, columns)
        if i < len(xs) and xs[i] == columns:
            return ys[i]
        if i == 0:
            # Below the narrowest sample: a launch costs about the narrowest kernel.
            return ys[0] * (0.5 + 0.5 * columns / xs[0])
        if i == len(xs):
            if len(xs) == 1:
                return ys[0] * columns / xs[0]
            slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
            return max(0.0, ys[-1] + slope * (columns - xs[-1]))
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        return y0 + (y1 - y0) * (columns - x0) / (x1 - x0)

    def scaled(self, factor: float) -> CostCurve:
        """Return this curve with every time multiplied by ``factor``."""
        return CostCurve(self.columns, tuple(s * factor for s in self.seconds))

    def plus(self, seconds: float) -> CostCurve:
        """Return this curve with ``seconds`` added at every width (a fixed overhead)."""
        return CostCurve(self.columns, tuple(s + seconds for s in self.seconds))


@dataclass(frozen=True)
class PlanNode:
    """One operator of the model as the planner sees it."""

    name: str
    op: str
    kind: str
    width: int
    inputs: tuple[int, ...]
    need_lo: tuple[tuple[int, ...], ...]
    need_hi: tuple[tuple[int, ...], ...]
    column_bytes: int
    device: CostCurve
    server: CostCurve

    def __post_init__(self) -> None:
        if self.kind not in NODE_KINDS:
            raise ValueError(f'node {self.name}: unknown kind {self.kind!r}')
        if self.width < 1 or (self.kind == ATOMIC and self.width != 1):
            raise ValueError(f'node {self.name}: bad width {self.width} for {self.kind}')
        if not (len(self.inputs) == len(self.need_lo) == len(self.need_hi)):
            raise ValueError(f'node {self.name}: one footprint per input is needed')
        for lo, hi in zip(self.need_lo, self.need_hi, strict=True):
            if len(lo) != self.width or len(hi) != self.width:
                raise ValueError(f'node {self.name}: footprints must have one entry per column')

    def needed(self, k: int, first: int, end: int) -> tuple[int, int]:
        """Return the columns ``[lo, hi)`` of input ``k`` that columns ``[first, end)`` need."""
        if end <= first:
            return (0, 0)
        return (self.need_lo[k][first], self.need_hi[k][end - 1])


@dataclass(frozen=True)
class LinkModel:
    """The link between robot and server as the simulator models it (one FIFO per way).

    A message of ``n`` bytes occupies its direction for ``per_message_s + n / bandwidth``
    seconds and arrives ``latency_s`` (one way) after it has left.
    """

    bandwidth_bytes_per_s: float
    latency_s: float = 0.0013
    per_message_s: float = 0.0002
    per_message_bytes: int = 200
    # Encode + decode CPU time per payload byte (measured by the profiler).
    per_byte_s: float = 0.0

    def transfer_s(self, nbytes: int) -> float:
        """Return how long ``nbytes`` occupy the link (not counting latency)."""
        if self.bandwidth_bytes_per_s <= 0:
            return float('inf')
        return (
            self.per_message_s
            + nbytes * self.per_byte_s
            + (nbytes + self.per_message_bytes) / self.bandwidth_bytes_per_s
        )


@dataclass(frozen=True)
class PlanProblem:
    """A model's operator DAG in topological order, with its outputs and identity."""

    model: str
    graph_hash: str
    nodes: tuple[PlanNode, ...]
    outputs: tuple[int, ...]
    input_bytes: int
    profile_hash: str = ''
    consumers: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        consumers: list[list[int]] = [[] for _ in self.nodes]
        for index, node in enumerate(self.nodes):
            for u in node.inputs:
                if not 0 <= u < index:
                    raise ValueError(f'node {node.name}: input {u} is not an earlier node')
                if index not in consumers[u]:
                    consumers[u].append(index)
        for u in self.outputs:
            if not 0 <= u < len(self.nodes):
                raise ValueError(f'output {u} is not a node')
        object.__setattr__(self, 'consumers', tuple(tuple(c) for c in consumers))


@dataclass(frozen=True)
class Plan:
    """Where each node's columns run: robot ``[0, m[v])``, server ``[r[v], width)``."""

    m: tuple[int, ...]
    r: tuple[int, ...]

    def check(self, problem: PlanProblem) -> None:
        """Raise ValueError if this plan is not valid for ``problem``."""
        if len(self.m) != len(problem.nodes) or len(self.r) != len(problem.nodes):
            raise ValueError('a plan needs one (m, r) per node')
        for node, m, r in zip(problem.nodes, self.m, self.r, strict=True):
            if not 0 <= r <= m <= node.width:
                raise ValueError(f'node {node.name}: need 0 <= r <= m <= width, got {r}, {m}')
            if node.kind == INPUT and (m, r) != (node.width, node.width):
                raise ValueError(f'input {node.name} must stay on the robot')
