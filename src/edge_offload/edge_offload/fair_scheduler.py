# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Share the edge server's worker threads fairly between robots.

Plain Python (no sockets): the server puts each accepted call under its robot's key and
worker threads ``take`` the next one. Two rules make a heavy robot slow itself, not the
others:

* **Least service first.** Each robot has a virtual time: the worker seconds its calls
  used, plus the time its running calls have run so far. A worker takes the queued call
  of the robot with the least. A robot that was idle starts ``wake_credit_s`` below the
  least virtual time of the busy ones, so idling banks no more credit than that (as CFS
  places a waking task); ties go to the robot with fewer calls running.
* **A worker kept free for the others.** While more than one robot is connected, no
  robot runs on more than ``workers - 1`` workers at once, so a robot whose calls take
  seconds cannot occupy every worker; alone it may use them all.

Queues are bounded per robot (``max_queued_per_client``); ``put`` past the bound raises
``QueueFullError``. ``close`` wakes every worker and hands back what was still queued.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Item = TypeVar('Item')


class QueueFullError(Exception):
    """The robot already has as many calls queued as it may."""


class SchedulerClosedError(Exception):
    """The scheduler is closed: the server is stopping."""


@dataclass
class Ticket(Generic[Item]):
    """One call handed to a worker; give it back with ``FairScheduler.finish``."""

    client: Hashable
    item: Item
    started: float


@dataclass
class _Client:
    queue: collections.deque = field(default_factory=collections.deque)
    running: dict[int, float] = field(default_factory=dict)  # ticket id -> start time
    vtime: float = 0.0
    connected: int = 0


class FairScheduler(Generic[Item]):
    """Bounded per-robot queues drained by worker threads, least service first."""

    def __init__(
        self,
        workers: int,
        max_queued_per_client: int,
        *,
        wake_credit_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if workers < 1 or max_queued_per_client < 1 or wake_credit_s < 0:
            raise ValueError('workers, max_queued_per_client must be >= 1, wake_credit_s >= 0')
        self.workers = workers
        self.max_queued_per_client = max_queued_per_client
        self.wake_credit_s = wake_credit_s
        self._clock = clock
        self._clients: dict[Hashable, _Client] = {}
        self._changed = threading.Condition()
        self._closed = False

    # -- who is connected -------------------------------------------------------------

    def connect(self, client: Hashable) -> None:
        """Count one more open session of ``client`` (it then shares the workers)."""
        with self._changed:
            self._clients.setdefault(client, _Client()).connected += 1

    def disconnect(self, client: Hashable) -> list[Item]:
        """Count one session of ``client`` fewer; return its queued calls if none is left."""
        with self._changed:
            state = self._clients.get(client)
            if state is None:
                return []
            state.connected = max(0, state.connected - 1)
            dropped: list[Item] = []
            if state.connected == 0:
                dropped = list(state.queue)
                state.queue.clear()
                self._forget_if_idle(client, state)
            self._changed.notify_all()
            return dropped

    # -- producers --------------------------------------------------------------------

    def put(self, client: Hashable, item: Item) -> None:
        """Queue ``item`` for ``client``.

        Raises:
            QueueFullError: ``client`` has ``max_queued_per_client`` calls queued.
            SchedulerClosedError: the scheduler is closed.

        """
        with self._changed:
            if self._closed:
                raise SchedulerClosedError('scheduler closed')
            state = self._clients.setdefault(client, _Client())
            if len(state.queue) >= self.max_queued_per_client:
                raise QueueFullError(f'{len(state.queue)} calls already queued')
            if not state.queue and not state.running:
                # Becoming busy: start near the busy robots' least virtual time.
                floor = self._least_busy_vtime(self._clock()) - self.wake_credit_s
                state.vtime = max(state.vtime, floor)
            state.queue.append(item)
            self._changed.notify()

    # -- workers ----------------------------------------------------------------------

    def take(self, timeout_s: float | None = None) -> Ticket[Item] | None:
        """Wait for the next call to run; None when closed or ``timeout_s`` passed."""
        deadline = None if timeout_s is None else self._clock() + timeout_s
        with self._changed:
            while True:
                if self._closed:
                    return None
                chosen = self._choose(self._clock())
                if chosen is not None:
                    client, state = chosen
                    started = self._clock()
                    ticket = Ticket(client, state.queue.popleft(), started)
                    state.running[id(ticket)] = started
                    return ticket
                remaining = None if deadline is None else deadline - self._clock()
                if remaining is not None and remaining <= 0:
                    return None
                self._changed.wait(remaining)

    def finish(self, ticket: Ticket[Item]) -> float:
        """Charge ``ticket``'s run time to its robot; return that time in seconds."""
        with self._changed:
            state = self._clients.get(ticket.client)
            elapsed = max(0.0, self._clock() - ticket.started)
            if state is not None and state.running.pop(id(ticket), None) is not None:
                state.vtime += elapsed
                self._forget_if_idle(ticket.client, state)
            self._changed.notify_all()
            return elapsed

    def close(self) -> list[Item]:
        """Stop handing out work; wake every worker; return the calls still queued."""
        with self._changed:
            self._closed = True
            dropped = [item for state in self._clients.values() for item in state.queue]
            for state in self._clients.values():
                state.queue.clear()
            self._changed.notify_all()
            return dropped

    # -- introspection ----------------------------------------------------------------

    def queued(self, client: Hashable | None = None) -> int:
        """Return how many calls wait (of ``client``, or of everyone)."""
        with self._changed:
            states = (
                list(self._clients.values())
                if client is None
                else [self._clients.get(client, _Client())]
            )
            return sum(len(state.queue) for state in states)

    def running(self, client: Hashable) -> int:
        """Return how many of ``client``'s calls run on a worker now."""
        with self._changed:
            state = self._clients.get(client)
            return 0 if state is None else len(state.running)

    # -- internals (with the lock held) --------------------------------------------------

    def _worker_cap(self) -> int:
        connected = sum(1 for state in self._clients.values() if state.connected or state.queue)
        return self.workers if connected <= 1 else max(1, self.workers - 1)

    def _effective_vtime(self, state: _Client, now: float) -> float:
        return state.vtime + sum(now - started for started in state.running.values())

    def _least_busy_vtime(self, now: float) -> float:
        busy = [
            self._effective_vtime(state, now)
            for state in self._clients.values()
            if state.queue or state.running
        ]
        return min(busy, default=-math.inf)

    def _choose(self, now: float) -> tuple[Hashable, _Client] | None:
        if sum(len(state.running) for state in self._clients.values()) >= self.workers:
            return None
        cap = self._worker_cap()
        best = None
        best_key = None
        for client, state in self._clients.items():
            if not state.queue or len(state.running) >= cap:
                continue
            key = (self._effective_vtime(state, now), len(state.running))
            if best_key is None or key < best_key:
                best, best_key = (client, state), key
        return best

    def _forget_if_idle(self, client: Hashable, state: _Client) -> None:
        if not state.connected and not state.queue and not state.running:
            del self._clients[client]
