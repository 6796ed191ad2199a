# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The edge server's side of ARISE's plan: run each model's requests in batches.

One ``BatchExecutor`` per model, on a thread of its own. Requests come in from any thread
(``submit`` returns a future); the executor runs them as batches with ``run_batch`` (one
call for the whole batch, e.g. ``LoadedModel.run_batch``).

Two policies:

* ``planned`` (ARISE): follow the scheduler's plan. The next planned batch runs when every
  client planned into it has sent its request, or when its start plus the grace period has
  passed, with whatever has arrived; a request nobody planned (a client between plans)
  joins the next batch that runs, if that batch has room.
* ``reactive`` (ARISE-α, Clipper-like): whenever the executor is free, run what is waiting,
  up to ``max_batch`` in arrival order (``batch_limit`` can change it, e.g. AIMD).

The queue is bounded: a request over ``max_pending`` fails at once with ``ExecutorBusyError``.
No thread here waits on a client.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from arise_ros.latency_profile import BatchLatencyProfile
from arise_ros.scheduler import Batch

Inputs = Mapping[str, torch.Tensor]
RunBatch = Callable[[Sequence[Inputs]], Sequence[Any]]


class ExecutorBusyError(RuntimeError):
    """The executor's queue is full, or it is closed."""


@dataclass(eq=False)
class _Pending:
    client_id: str
    frame_id: int
    inputs: Inputs
    future: concurrent.futures.Future
    received_s: float


@dataclass
class ExecutorStats:
    batches: int = 0
    requests: int = 0
    busy_s: float = 0.0
    started_s: float = 0.0
    sizes: list[int] = field(default_factory=list)
    late_requests: int = 0
    unplanned_requests: int = 0
    # The newest batches' (size, seconds): what the server really takes, for the profile.
    recent: deque = field(default_factory=lambda: deque(maxlen=64))

    def idle_fraction(self, now_s: float) -> float:
        span = now_s - self.started_s
        return 1.0 - self.busy_s / span if span > 0 else 0.0

    @property
    def mean_batch_size(self) -> float:
        return self.requests / self.batches if self.batches else 0.0


class BatchExecutor:
    """Runs one model's requests as batches, following a plan or reacting to arrivals."""

    def __init__(
        self,
        run_batch: RunBatch,
        max_batch: int,
        policy: str = 'planned',
        max_pending: int = 256,
        profile: BatchLatencyProfile | None = None,
        grace_fraction: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
        name: str = 'arise-batches',
    ) -> None:
        if policy not in ('planned', 'reactive'):
            raise ValueError(f"policy must be 'planned' or 'reactive', got {policy!r}")
        if max_batch < 1 or max_pending < 1:
            raise ValueError('max_batch and max_pending must be at least 1')
        self._run_batch = run_batch
        self.max_batch = max_batch
        self.batch_limit = max_batch
        self.policy = policy
        self._max_pending = max_pending
        self._profile = profile
        self._grace_fraction = grace_fraction
        self._clock = clock
        self._pending: deque[_Pending] = deque()
        self._plan: deque[Batch] = deque()
        self._condition = threading.Condition()
        self._closed = False
        self.stats = ExecutorStats(started_s=clock())
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    # --- any thread ---------------------------------------------------------------------

    def submit(self, client_id: str, frame_id: int, inputs: Inputs) -> concurrent.futures.Future:
        """Queue one request; the future resolves to ``run_batch``'s answer for it."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._condition:
            if self._closed:
                raise ExecutorBusyError('the executor is closed')
            if len(self._pending) >= self._max_pending:
                raise ExecutorBusyError(f'{self._max_pending} requests already wait for a batch')
            self._pending.append(_Pending(client_id, frame_id, inputs, future, self._clock()))
            self._condition.notify_all()
        return future

    def set_plan(self, batches: Sequence[Batch]) -> None:
        """Follow ``batches`` from now on (the scheduler's newest plan)."""
        with self._condition:
            now = self._clock()
            self._plan = deque(b for b in batches if b.start_s + self._grace_s(1) >= now - 1.0)
            self._condition.notify_all()

    def recent_batches(self) -> list[tuple[int, float]]:
        """Return the newest batches' (size, seconds), oldest first."""
        with self._condition:
            return list(self.stats.recent)

    def set_profile(self, profile: BatchLatencyProfile) -> None:
        """Plan grace periods and gap fits with ``profile`` from now on."""
        with self._condition:
            self._profile = profile

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop; requests still waiting fail with ``ExecutorBusyError``."""
        with self._condition:
            self._closed = True
            waiting = list(self._pending)
            self._pending.clear()
            self._condition.notify_all()
        for pending in waiting:
            if pending.future.set_running_or_notify_cancel():
                pending.future.set_exception(ExecutorBusyError('the executor closed'))
        self._thread.join(timeout_s)

    def _grace_s(self, size: int) -> float:
        """How long a planned batch of ``size`` waits past its start for late members."""
        if self._profile is None:
            return 0.0
        return self._grace_fraction * self._profile.latency(min(size, self._profile.max_batch))

    def _fits_before(self, count: int, start_s: float, now_s: float) -> bool:
        """Whether a batch of ``count`` run now ends before a planned batch's start."""
        if self._profile is None:
            return False
        size = min(count, self._profile.max_batch)
        return now_s + self._profile.latency(size) <= start_s

    # --- the executor's thread ------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._condition:
                batch = self._next_batch()
                while batch is None:
                    if self._closed:
                        return
                    self._condition.wait(self._wait_s())
                    batch = self._next_batch()
            self._execute(batch)

    def _wait_s(self) -> float | None:
        """How long to sleep before a planned batch's deadline can pass (None: until woken)."""
        if self.policy != 'planned' or not self._plan:
            return None
        head = self._plan[0]
        deadline = head.start_s + self._grace_s(len(head.requests))
        return max(0.0005, deadline - self._clock())

    def _next_batch(self) -> list[_Pending] | None:
        """Return the requests to run now, or None to wait (call with the lock held)."""
        if not self._pending:
            return None
        if self.policy == 'reactive':
            return self._take(len(self._pending), set())
        now = self._clock()
        # Drop planned batches whose time is long gone and that nobody showed up for.
        while self._plan and self._plan[0].start_s + self._grace_s(1) + 1.0 < now:
            self._plan.popleft()
        if not self._plan:
            return self._take(len(self._pending), set())
        head = self._plan[0]
        members = {r.client_id for r in head.requests}
        arrived = {p.client_id for p in self._pending if p.client_id in members}
        deadline = head.start_s + self._grace_s(len(head.requests))
        if arrived != members and now < deadline:
            # Requests nobody planned run in the gap before the planned batch, if they fit.
            strays = [p for p in self._pending if p.client_id not in members]
            if strays and self._fits_before(len(strays), head.start_s, now):
                self.stats.unplanned_requests += len(strays)
                return self._take(len(strays), set(), only=strays)
            return None
        if not arrived:
            # The batch's clients are all late (or gone): move on to the next planned one.
            self._plan.popleft()
            if self._plan:
                return self._next_batch()
            return self._take(len(self._pending), set())
        self._plan.popleft()
        self.stats.late_requests += len(members) - len(arrived)
        # Late members' places go to requests nobody planned: the batch costs what was planned.
        return self._take(len(members), arrived)

    def _take(
        self, limit: int, first: set[str], only: list[_Pending] | None = None
    ) -> list[_Pending]:
        """Take the oldest request of each client in ``first``, then fill up in order."""
        limit = min(limit, self.batch_limit, self.max_batch)
        candidates = self._pending if only is None else only
        chosen: list[_Pending] = []
        taken: set[int] = set()
        served: set[str] = set()
        for pending in candidates:
            if pending.client_id in first and pending.client_id not in served:
                chosen.append(pending)
                taken.add(id(pending))
                served.add(pending.client_id)
        for pending in candidates:
            if len(chosen) >= limit:
                break
            if id(pending) in taken:
                continue
            chosen.append(pending)
            taken.add(id(pending))
            if first:
                self.stats.unplanned_requests += 1
        self._pending = deque(p for p in self._pending if id(p) not in taken)
        return chosen

    def _execute(self, batch: list[_Pending]) -> None:
        runnable = [p for p in batch if p.future.set_running_or_notify_cancel()]
        if not runnable:
            return
        started = self._clock()
        try:
            answers = self._run_batch([p.inputs for p in runnable])
        except Exception as error:  # noqa: BLE001 - every request of the batch is told
            for pending in runnable:
                pending.future.set_exception(error)
            answers = None
        busy = self._clock() - started
        with self._condition:
            self.stats.batches += 1
            self.stats.requests += len(runnable)
            self.stats.busy_s += busy
            self.stats.recent.append((len(runnable), busy))
            self.stats.sizes.append(len(runnable))
            if len(self.stats.sizes) > 4096:
                del self.stats.sizes[:2048]
        if answers is None:
            return
        for pending, answer in zip(runnable, answers, strict=True):
            if isinstance(answer, BaseException):
                pending.future.set_exception(answer)
            else:
                pending.future.set_result(answer)
