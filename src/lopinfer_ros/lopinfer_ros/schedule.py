# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""From a plan to what each side computes, sends and receives (pure, no I/O).

For node ``u`` with plan ``(m, r)`` the robot computes ``[0, m)`` and the server
``[r, width)``. After computing ``u`` a side sends, in one message, the columns of ``u``
that the other side's consumers need and it lacks (spec 3.5, "only the missing
portions"); outputs must end whole on the robot. The robot's send of ``u`` is
``up[u]``, the server's is ``down[u]``; both come from columns the sender computed
itself, because ``r <= m``. The same rule is the simulator's transfer model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from lopinfer_ros.graph import OpGraph
from lopinfer_ros.locality import NodeInfo, Piece, run_slice
from lopinfer_ros.problem import Plan

ROBOT = 'robot'
SERVER = 'server'
Interval = tuple[int, int]
EMPTY: Interval = (0, 0)


@dataclass(frozen=True)
class Schedule:
    """Per node: columns computed by each side and columns sent each way."""

    robot: tuple[Interval, ...]
    server: tuple[Interval, ...]
    up: tuple[Interval, ...]
    down: tuple[Interval, ...]
    last_use: tuple[int, ...]

    def computes(self, side: str, node: int) -> Interval:
        """Return the columns ``side`` computes of ``node``."""
        return (self.robot if side == ROBOT else self.server)[node]

    def sends(self, side: str, node: int) -> Interval:
        """Return the columns of ``node`` that ``side`` sends to the other side."""
        return (self.up if side == ROBOT else self.down)[node]

    def receives(self, side: str, node: int) -> Interval:
        """Return the columns of ``node`` that ``side`` receives."""
        return (self.down if side == ROBOT else self.up)[node]


def _union(a: Interval, b: Interval) -> Interval:
    if a[1] <= a[0]:
        return b
    if b[1] <= b[0]:
        return a
    return (min(a[0], b[0]), max(a[1], b[1]))


def make_schedule(
    graph: OpGraph, infos: Sequence[NodeInfo], plan: Plan, outputs: Sequence[int] | None = None
) -> Schedule:
    """Derive the per-side work and messages of ``plan`` (validated against ``infos``)."""
    count = len(graph.nodes)
    if len(plan.m) != count:
        raise ValueError(f'plan has {len(plan.m)} nodes, the graph {count}')
    robot: list[Interval] = []
    server: list[Interval] = []
    for node, info, m, r in zip(graph.nodes, infos, plan.m, plan.r, strict=True):
        if not 0 <= r <= m <= info.width:
            raise ValueError(f'node {node.index}: need 0 <= r <= m <= {info.width}')
        if node.op == 'input' and (m, r) != (info.width, info.width):
            raise ValueError(f'input node {node.index} must stay on the robot')
        robot.append((0, m) if m else EMPTY)
        server.append((r, info.width) if r < info.width else EMPTY)
    need_robot: list[Interval] = [EMPTY] * count
    need_server: list[Interval] = [EMPTY] * count
    last_use = list(range(count))
    for node in graph.nodes:
        info = infos[node.index]
        for k, producer in enumerate(node.inputs):
            last_use[producer] = max(last_use[producer], node.index)
            for mine, needs in ((robot, need_robot), (server, need_server)):
                first, end = mine[node.index]
                if end <= first:
                    continue
                if info.atomic:
                    wanted = (0, infos[producer].width)
                else:
                    wanted = (
                        info.rule.need(k, first, end)
                        if infos[producer].split is not None
                        else (0, 1)
                    )
                needs[producer] = _union(needs[producer], wanted)
    for output in outputs if outputs is not None else graph.outputs:
        need_robot[output] = (0, infos[output].width)
        last_use[output] = count
    # A received range always starts at the receiver's own boundary, so that the piece it
    # holds stays contiguous (a strided footprint may skip the columns next to it).
    up, down = [], []
    for u in range(count):
        server_first = server[u][0] if server[u] != EMPTY else infos[u].width
        lo, hi = need_server[u]
        up.append((lo, server_first) if hi > lo and lo < server_first else EMPTY)
        robot_end = robot[u][1]
        lo, hi = need_robot[u]
        down.append((robot_end, hi) if hi > lo and hi > robot_end else EMPTY)
    return Schedule(tuple(robot), tuple(server), tuple(up), tuple(down), tuple(last_use))


def merge(
    piece: Piece | None, received: torch.Tensor, lo: int, hi: int, axis: int | None
) -> Piece:
    """Join received columns ``[lo, hi)`` to a side's own piece (canonical order)."""
    if piece is None or piece.hi <= piece.lo:
        return Piece(received, lo, hi)
    if axis is None:
        return piece
    if hi == piece.lo:
        return Piece(torch.cat((received, piece.tensor), axis), lo, piece.hi)
    if lo == piece.hi:
        return Piece(torch.cat((piece.tensor, received), axis), piece.lo, hi)
    raise RuntimeError(f'received columns [{lo}, {hi}) do not touch held [{piece.lo}, {piece.hi})')


def run_split_locally(
    graph: OpGraph, infos: Sequence[NodeInfo], plan: Plan, inputs: Sequence[torch.Tensor]
) -> list[torch.Tensor]:
    """Run ``plan`` with both sides in this process (the runtime's logic, no transport).

    Used by tests: every plan must give the outputs of the whole graph.
    """
    schedule = make_schedule(graph, infos, plan)
    held: dict[str, dict[int, Piece]] = {ROBOT: {}, SERVER: {}}
    for index, tensor in enumerate(inputs):
        width = infos[index].width
        held[ROBOT][index] = Piece(tensor, 0, width)
    with torch.inference_mode():
        for index in range(graph.num_inputs):
            _exchange(infos, schedule, held, index)
        for node in graph.nodes[graph.num_inputs :]:
            for side in (ROBOT, SERVER):
                first, end = schedule.computes(side, node.index)
                if end > first:
                    out = run_slice(graph, infos, node, held[side], first, end)
                    held[side][node.index] = Piece(out, first, end)
            _exchange(infos, schedule, held, node.index)
    return [held[ROBOT][output].tensor for output in graph.outputs]


def _exchange(infos, schedule: Schedule, held, index: int) -> None:
    axis = infos[index].split
    for side, other in ((ROBOT, SERVER), (SERVER, ROBOT)):
        lo, hi = schedule.sends(side, index)
        if hi <= lo:
            continue
        piece = held[side][index]
        if axis is None:
            data = piece.tensor
        else:
            data = piece.tensor.narrow(axis, lo - piece.lo, hi - lo)
        held[other][index] = merge(held[other].get(index), data.clone(), lo, hi, axis)
