# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""One side of a LOPInfer request: compute its slices, send what the peer lacks (spec 4.2).

``SideRunner`` walks the graph in order. For each node the side computes, it waits for the
columns it needs from the peer (a bounded mailbox fed by the transport), runs ONE kernel
for all its columns (``run_slice``), and hands the columns the peer needs to a sender
thread, so the link carries them while this side goes on computing. Pieces are released
after their last consumer. The transport is two callables, so the same runner serves the
robot (over ``EdgeClient``), the server (inside its mode) and in-process tests.

Device-speed emulation: with ``slowdown`` > 1 each operator is followed by a sleep of
``(slowdown - 1)`` times its measured time (the robot and server share one CPU here;
sleeping leaves the CPU to the sender and the server, as a slower device would).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from lopinfer_ros.graph import OpGraph
from lopinfer_ros.locality import NodeInfo, Piece, run_slice
from lopinfer_ros.schedule import ROBOT, Schedule, merge


class LopAbortedError(RuntimeError):
    """The request was cancelled, timed out or the peer failed."""


@dataclass
class Slice:
    """Columns ``[lo, hi)`` of node ``node``'s output."""

    node: int
    lo: int
    hi: int
    tensor: torch.Tensor


class Mailbox:
    """Slices received for one request, by node; waits are bounded and cancellable."""

    def __init__(self, expected: int) -> None:
        self._slices: dict[int, Slice] = {}
        self._expected = expected
        self._received = 0
        self._condition = threading.Condition()
        self._error: str = ''

    def put(self, item: Slice) -> None:
        """Store a slice (a second one for the same node is a protocol error)."""
        with self._condition:
            if item.node in self._slices or self._received >= self._expected:
                self._error = f'unexpected slice of node {item.node}'
            else:
                self._slices[item.node] = item
                self._received += 1
            self._condition.notify_all()

    def fail(self, why: str) -> None:
        """Wake every waiter with ``why``."""
        with self._condition:
            self._error = self._error or why
            self._condition.notify_all()

    def take(self, node: int, deadline: float) -> Slice:
        """Return node's slice, waiting until ``deadline`` (monotonic)."""
        with self._condition:
            while node not in self._slices:
                if self._error:
                    raise LopAbortedError(self._error)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise LopAbortedError(f'peer did not send node {node} in time')
                self._condition.wait(remaining)
            return self._slices.pop(node)


class Sender:
    """A thread that hands slices to the transport in FIFO order (one per direction)."""

    def __init__(self, send: Callable[[list[Slice]], None], max_queued: int) -> None:
        self._send = send
        self._queue: collections.deque[Slice | None] = collections.deque()
        self._max_queued = max_queued
        self._condition = threading.Condition()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name='lop-sender', daemon=True)
        self._thread.start()

    def put(self, item: Slice) -> None:
        """Queue ``item``; raises if the sender failed or the queue bound is hit."""
        with self._condition:
            if self.error is not None:
                raise LopAbortedError(f'sending failed: {self.error}')
            if len(self._queue) >= self._max_queued:
                raise LopAbortedError('send queue full')
            self._queue.append(item)
            self._condition.notify()

    def close(self, timeout_s: float = 5.0) -> None:
        """Finish sending what is queued, then stop."""
        with self._condition:
            self._queue.append(None)
            self._condition.notify()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._queue:
                    self._condition.wait()
                batch: list[Slice] = []
                while self._queue and self._queue[0] is not None:
                    batch.append(self._queue.popleft())
                stop = bool(self._queue) and self._queue[0] is None
            if batch and self.error is None:
                try:
                    self._send(batch)
                except BaseException as error:  # noqa: BLE001 - reported to the runner
                    self.error = error
            if stop:
                return


@dataclass
class RunStats:
    """What one side did in one request."""

    compute_s: float = 0.0
    emulated_wait_s: float = 0.0
    waited_s: float = 0.0
    bytes_sent: int = 0
    slices_sent: int = 0
    events: list[tuple[str, int, float, float]] = field(default_factory=list)
    # Kernel time per computed node (the emulated wait excluded).
    compute_by_node: dict[int, float] = field(default_factory=dict)


class SideRunner:
    """Run one side's part of a plan."""

    def __init__(
        self,
        graph: OpGraph,
        infos: Sequence[NodeInfo],
        schedule: Schedule,
        side: str,
        *,
        mailbox: Mailbox,
        sender: Sender | None,
        slowdown: float = 1.0,
        deadline: float | None = None,
        cancel: threading.Event | None = None,
        record_events: bool = False,
    ) -> None:
        self.graph = graph
        self.infos = infos
        self.schedule = schedule
        self.side = side
        self.mailbox = mailbox
        self.sender = sender
        self.slowdown = slowdown
        self.deadline = deadline if deadline is not None else time.monotonic() + 3600.0
        self.cancel = cancel
        self.record_events = record_events
        self.stats = RunStats()
        self._held: dict[int, Piece] = {}
        self._pending_receive = {
            u for u in range(len(graph.nodes)) if _nonempty(schedule.receives(side, u))
        }
        self._t0 = time.perf_counter()

    def run(self, inputs: Sequence[torch.Tensor] = ()) -> list[torch.Tensor]:
        """Run this side; the robot gets the whole outputs, the server an empty list."""
        graph, schedule = self.graph, self.schedule
        if self.side == ROBOT:
            for index, tensor in enumerate(inputs):
                self._held[index] = Piece(tensor, 0, self.infos[index].width)
                self._send(index)
        with torch.inference_mode():
            for node in graph.nodes[graph.num_inputs :]:
                first, end = schedule.computes(self.side, node.index)
                if end <= first:
                    continue
                for producer in node.inputs:
                    self._receive(producer)
                self._check()
                started = time.perf_counter()
                out = run_slice(graph, self.infos, node, self._held, first, end)
                elapsed = time.perf_counter() - started
                self.stats.compute_s += elapsed
                self.stats.compute_by_node[node.index] = elapsed
                if self.slowdown > 1.0:
                    wait = (self.slowdown - 1.0) * elapsed
                    time.sleep(wait)
                    self.stats.emulated_wait_s += wait
                if self.record_events:
                    self.stats.events.append(
                        ('compute', node.index, started - self._t0, time.perf_counter() - self._t0)
                    )
                self._held[node.index] = Piece(out, first, end)
                self._send(node.index)
                self._release(node.index)
            if self.side != ROBOT:
                return []
            outputs = []
            for index in graph.outputs:
                self._receive(index)
                piece = self._held[index]
                outputs.append(piece.tensor.contiguous())
            return outputs

    def _check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise LopAbortedError('request cancelled')
        if time.monotonic() > self.deadline:
            raise LopAbortedError('request deadline passed')
        if self.sender is not None and self.sender.error is not None:
            raise LopAbortedError(f'sending failed: {self.sender.error}')

    def _send(self, index: int) -> None:
        lo, hi = self.schedule.sends(self.side, index)
        if hi <= lo or self.sender is None:
            return
        piece = self._held[index]
        axis = self.infos[index].split
        data = piece.tensor if axis is None else piece.tensor.narrow(axis, lo - piece.lo, hi - lo)
        data = data.contiguous()
        self.stats.bytes_sent += data.numel() * data.element_size()
        self.stats.slices_sent += 1
        self.sender.put(Slice(index, lo, hi, data))

    def _receive(self, producer: int) -> None:
        if producer not in self._pending_receive:
            return
        started = time.perf_counter()
        item = self.mailbox.take(producer, self.deadline)
        waited = time.perf_counter() - started
        self.stats.waited_s += waited
        if self.record_events:
            self.stats.events.append(
                ('wait', producer, started - self._t0, started - self._t0 + waited)
            )
        expected = self.schedule.receives(self.side, producer)
        if (item.lo, item.hi) != expected:
            raise LopAbortedError(
                f'node {producer}: got columns [{item.lo}, {item.hi}), expected {expected}'
            )
        self._check_shape(producer, item)
        self._held[producer] = merge(
            self._held.get(producer), item.tensor, item.lo, item.hi, self.infos[producer].split
        )
        self._pending_receive.discard(producer)

    def _check_shape(self, producer: int, item: Slice) -> None:
        node = self.graph.nodes[producer]
        axis = self.infos[producer].split
        shape = list(node.shape)
        if axis is not None:
            shape[axis] = item.hi - item.lo
        got = list(item.tensor.shape)
        if node.dynamic and len(got) == len(shape):
            shape = got  # data-dependent sizes (an opaque node and after): the rank only
        if got != shape or item.tensor.dtype != node.dtype:
            raise LopAbortedError(
                f'node {producer}: got {item.tensor.dtype} {list(item.tensor.shape)}, '
                f'expected {node.dtype} {shape}'
            )

    def _release(self, index: int) -> None:
        # Drop pieces whose last consumer has run (outputs are kept: last_use = len).
        for producer in self.graph.nodes[index].inputs:
            if self.schedule.last_use[producer] <= index:
                self._held.pop(producer, None)


def _nonempty(interval: tuple[int, int]) -> bool:
    return interval[1] > interval[0]


def expected_receives(schedule: Schedule, side: str) -> int:
    """Return how many slices ``side`` receives in one request."""
    return sum(1 for u in range(len(schedule.up)) if _nonempty(schedule.receives(side, u)))
