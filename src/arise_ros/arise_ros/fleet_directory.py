# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Which ARISE server has room: the load balancer's state and choice (no Ray, no sockets).

Every server reports its load (robots admitted and waiting, the idle share of its current
plan, how many robots it may hold) every scheduler period. A robot that joins, or whose
server died, evicted or refused it, asks :meth:`FleetDirectory.where` for the servers to
try, best first:

* servers whose report is older than ``stale_after_s`` (or that were marked down) are left
  out: a dead server stops reporting at once, long before anything else notices;
* servers with nobody waiting come first, the one with the largest idle share first (ARISE
  admits by SLA, not by count, so idle time is the room a newcomer can use); then servers
  with robots waiting, fewest waiting first;
* each answer counts as one robot more on the first server until its next report, so that
  a burst of robots spreads over the servers instead of all taking the same one;
* the server the robot leaves (``avoid``) goes last, not away: it may be the only one.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, replace

# A robot placed on a server lowers its idle share by about this much until its next report.
_PLACEMENT_COST = 0.05


@dataclass(frozen=True)
class ServerLoad:
    """One server's report."""

    server_id: str
    endpoint: str
    admitted: int
    waiting: int
    idle_share: float
    max_clients: int
    reported_s: float
    # Changes when the server restarts (its process id): a new incarnation is a new server.
    incarnation: int = 0

    def __post_init__(self) -> None:
        if not self.server_id or not self.endpoint:
            raise ValueError('a server report needs a server id and an endpoint')
        if self.admitted < 0 or self.waiting < 0 or self.max_clients < 1:
            raise ValueError(f'{self.server_id}: bad counts in its report')
        if not (math.isfinite(self.idle_share) and 0.0 <= self.idle_share <= 1.0):
            raise ValueError(f'{self.server_id}: idle share must be in [0, 1]')

    @property
    def full(self) -> bool:
        return self.admitted + self.waiting >= self.max_clients


class FleetDirectory:
    """The newest report of every server, and the order a robot should try them in."""

    def __init__(self, stale_after_s: float = 0.6, max_servers: int = 256) -> None:
        if stale_after_s <= 0 or max_servers < 1:
            raise ValueError('stale_after_s must be > 0 and max_servers >= 1')
        self.stale_after_s = stale_after_s
        self._max_servers = max_servers
        self._lock = threading.Lock()
        self._loads: dict[str, ServerLoad] = {}

    def report(self, load: ServerLoad) -> None:
        """Record a server's report (it replaces the previous one)."""
        with self._lock:
            if load.server_id not in self._loads and len(self._loads) >= self._max_servers:
                raise ValueError(f'the directory holds {self._max_servers} servers already')
            self._loads[load.server_id] = load

    def mark_down(self, server_id: str) -> None:
        """Forget a server known to be gone (until it reports again)."""
        with self._lock:
            self._loads.pop(server_id, None)

    def live(self, now_s: float) -> list[ServerLoad]:
        """Return the servers whose report is fresh."""
        with self._lock:
            return [
                load
                for load in self._loads.values()
                if now_s - load.reported_s <= self.stale_after_s
            ]

    def where(self, now_s: float, avoid: str = '') -> list[str]:
        """Return the endpoints a robot should try, best first (``avoid``'s server last)."""
        with self._lock:
            live = [
                load
                for load in self._loads.values()
                if now_s - load.reported_s <= self.stale_after_s and not load.full
            ]
            ranked = sorted(live, key=_rank)
            ranked.sort(key=lambda load: load.endpoint == avoid)  # stable: keeps the rank
            if ranked:
                best = ranked[0]
                self._loads[best.server_id] = replace(
                    best,
                    admitted=best.admitted + 1,
                    idle_share=max(0.0, best.idle_share - _PLACEMENT_COST),
                )
            return [load.endpoint for load in ranked]


def _rank(load: ServerLoad) -> tuple:
    return (load.waiting > 0, load.waiting, -load.idle_share, load.admitted, load.server_id)
