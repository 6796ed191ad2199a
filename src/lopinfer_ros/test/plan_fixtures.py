# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Helpers for lopinfer's tests: random valid plans, hand-made and synthetic problems.

The test folder is not a package: tests put this folder on ``sys.path`` to import it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from lopinfer_ros.locality import NodeInfo
from lopinfer_ros.problem import ATOMIC, INPUT, LOCAL, CostCurve, Plan, PlanNode, PlanProblem


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


def synthetic_problem(
    num_nodes: int = 600,
    *,
    seed: int = 0,
    width: int = 448,
    speedup: float = 8.0,
    device_s: float = 0.12,
    channels: int = 64,
    stages: int = 4,
    model: str = 'synthetic',
) -> PlanProblem:
    """Return a CNN-like random problem for benchmarks and tests.

    A stride-4 stem, then ``stages`` stages of convolutions (1 or 3 wide) with element-wise
    followers and residual adds; each stage after the first starts with a stride-2
    convolution that halves the width and doubles the channels; then a global pool and a
    head (atomic nodes). Work is proportional to multiply-accumulates, scaled so that the
    robot needs ``device_s`` for the whole model; the server is ``speedup`` times faster
    and every slice pays a 15 us launch overhead.
    """
    rng = random.Random(seed)  # noqa: S311 - reproducible test data, not cryptography
    specs: list[tuple] = []

    def add(name, op, kind, w, inputs, needs, col_bytes, work):
        lo = tuple(tuple(a for a, _ in need) for need in needs)
        hi = tuple(tuple(b for _, b in need) for need in needs)
        specs.append((name, op, kind, w, tuple(inputs), lo, hi, col_bytes, work))
        return len(specs) - 1

    def conv_need(w_in, w_out, k, stride):
        pad = k // 2
        return [(max(0, j * stride - pad), min(w_in, j * stride - pad + k)) for j in range(w_out)]

    def ident(w):
        return [(j, j + 1) for j in range(w)]

    w = rows = width  # rows: the other spatial axis, folded into the column bytes
    x = add('input', 'input', INPUT, w, [], [], 3 * rows * 4, 0.0)
    input_bytes = 3 * rows * 4 * w
    ch = channels
    # A ResNet-like stem: a stride-2 7-wide convolution, then a stride-2 max pool.
    w_out, rows = (w + 1) // 2, (rows + 1) // 2
    prev = add(
        'stem',
        'conv',
        LOCAL,
        w_out,
        [x],
        [conv_need(w, w_out, 7, 2)],
        ch * rows * 4,
        49 * 3 * ch * rows * w_out,
    )
    w = w_out
    w_out, rows = (w + 1) // 2, (rows + 1) // 2
    prev = add(
        'pool',
        'max_pool2d',
        LOCAL,
        w_out,
        [prev],
        [conv_need(w, w_out, 3, 2)],
        ch * rows * 4,
        9 * ch * rows * w_out,
    )
    w = w_out
    body = num_nodes - 6
    stage = 0
    while len(specs) < num_nodes - 3:
        if stage < stages - 1 and len(specs) >= 3 + body * (stage + 1) // stages:
            stage += 1
            w_out, rows = (w + 1) // 2, (rows + 1) // 2
            work = 9 * ch * 2 * ch * rows * w_out
            ch *= 2
            prev = add(
                f'down{len(specs)}',
                'conv',
                LOCAL,
                w_out,
                [prev],
                [conv_need(w, w_out, 3, 2)],
                ch * rows * 4,
                work,
            )
            w = w_out
            continue
        if len(specs) == num_nodes - 4:
            prev = add(
                f'relu{len(specs)}',
                'relu',
                LOCAL,
                w,
                [prev],
                [ident(w)],
                ch * rows * 4,
                ch * rows * w,
            )
            continue
        block_in = prev
        k = rng.choice((1, 3, 3))
        prev = add(
            f'conv{len(specs)}',
            'conv',
            LOCAL,
            w,
            [prev],
            [conv_need(w, w, k, 1)],
            ch * rows * 4,
            k * k * ch * ch * rows * w,
        )
        prev = add(
            f'relu{len(specs)}', 'relu', LOCAL, w, [prev], [ident(w)], ch * rows * 4, ch * rows * w
        )
        if rng.random() < 0.5 and len(specs) <= num_nodes - 5:
            prev = add(
                f'conv{len(specs)}',
                'conv',
                LOCAL,
                w,
                [prev],
                [conv_need(w, w, 3, 1)],
                ch * rows * 4,
                9 * ch * ch * rows * w,
            )
            prev = add(
                f'add{len(specs)}',
                'add',
                LOCAL,
                w,
                [prev, block_in],
                [ident(w), ident(w)],
                ch * rows * 4,
                ch * rows * w,
            )
    gap = add('gap', 'adaptive_avg_pool2d', ATOMIC, 1, [prev], [[(0, w)]], ch * 4, ch * rows * w)
    fc = add('fc', 'linear', ATOMIC, 1, [gap], [[(0, 1)]], 1000 * 4, ch * 1000)
    out = add('softmax', 'softmax', ATOMIC, 1, [fc], [[(0, 1)]], 1000 * 4, 1000)
    launch = 15e-6
    total = sum(spec[-1] for spec in specs)
    unit = max(0.0, device_s - launch * (len(specs) - 1)) / total
    nodes = []
    for name, op, kind, w, inputs, lo, hi, col_bytes, work in specs:
        samples = tuple(sorted({max(1, w // 8), max(1, w // 4), max(1, w // 2), w}))
        dev = tuple(0.0 if kind == INPUT else launch + unit * work * s / w for s in samples)
        srv = tuple(
            0.0 if kind == INPUT else launch + unit * work * s / w / speedup for s in samples
        )
        nodes.append(
            PlanNode(
                name,
                op,
                kind,
                w,
                inputs,
                lo,
                hi,
                col_bytes,
                CostCurve(samples, dev),
                CostCurve(samples, srv),
            )
        )
    return PlanProblem(
        model=model,
        graph_hash=f'synthetic-{num_nodes}-{seed}',
        nodes=tuple(nodes),
        outputs=(out,),
        input_bytes=input_bytes,
        profile_hash=f'speedup-{speedup}',
    )
