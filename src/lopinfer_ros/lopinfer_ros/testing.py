# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Helpers for lopinfer tests: random valid plans and hand-made planner problems."""

from __future__ import annotations

import random
from collections.abc import Sequence

from lopinfer_ros.locality import NodeInfo
from lopinfer_ros.problem import INPUT, CostCurve, Plan, PlanNode, PlanProblem


def random_plan(infos: Sequence[NodeInfo], rng: random.Random) -> Plan:
    """Return a random valid plan: random cuts and replication, atomic nodes on a side."""
    ms, rs = [], []
    for info in infos:
        if info.rule.node.op == 'input':
            ms.append(info.width)
            rs.append(info.width)
        elif info.width == 1:
            side = rng.choice([0, 1])
            ms.append(side)
            rs.append(side)
        else:
            m = rng.randint(0, info.width)
            ms.append(m)
            rs.append(rng.randint(0, m))
    return Plan(tuple(ms), tuple(rs))


def linear(width: int, seconds: float) -> CostCurve:
    """Return a curve that costs ``seconds * k / width`` for ``k`` columns."""
    if width == 1:
        return CostCurve((1,), (seconds,))
    return CostCurve((1, width), (seconds / width, seconds))


def conv(width_in: int, width_out: int, k: int = 3, stride: int = 1) -> list[tuple[int, int]]:
    """Return the per-column footprint of a ``k``-wide, 'same'-padded convolution."""
    pad = k // 2
    return [
        (max(0, j * stride - pad), min(width_in, j * stride - pad + k)) for j in range(width_out)
    ]


def ident(width: int) -> list[tuple[int, int]]:
    """Return the footprint of an element-wise node."""
    return [(j, j + 1) for j in range(width)]


class Builder:
    """Builds a PlanProblem node by node (needs as (lo, hi) per output column)."""

    def __init__(self) -> None:
        self.nodes: list[PlanNode] = []

    def add(self, kind, width, inputs=(), needs=(), col_bytes=100, dev=0.0, srv=0.0, op=None):
        """Append a node; return its index."""
        lo = tuple(tuple(a for a, _ in need) for need in needs)
        hi = tuple(tuple(b for _, b in need) for need in needs)
        self.nodes.append(
            PlanNode(
                f'n{len(self.nodes)}',
                op or kind,
                kind,
                width,
                tuple(inputs),
                lo,
                hi,
                col_bytes,
                linear(width, dev),
                linear(width, srv),
            )
        )
        return len(self.nodes) - 1

    def problem(self, outputs, input_bytes=None, model='test') -> PlanProblem:
        """Return the problem with ``outputs`` (input bytes summed from the input nodes)."""
        if input_bytes is None:
            input_bytes = sum(n.column_bytes * n.width for n in self.nodes if n.kind == INPUT)
        return PlanProblem(model, 'hash-' + model, tuple(self.nodes), tuple(outputs), input_bytes)
