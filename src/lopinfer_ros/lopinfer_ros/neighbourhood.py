# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The moves of Phase II (large neighbourhood search) of the LOSS planner.

:mod:`lopinfer_ros.planner` draws an anchor among the decision nodes and asks
:meth:`Neighbourhoods.move` to revoke a window of decision nodes around it and repair the
window in place: a random candidate for the anchor alone, one cut fraction and overlap for
the whole window, a shift of every cut, more or less replication, the window's ranges
widened so that each side computes its share of it without transfers (backward footprint
closure, spec 2.4), or a *segment*: a new cut at the window's end and that closure before
it. The planner re-derives the element-wise followers and keeps the result only if the
simulator finds it better.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable

from lopinfer_ros.simulator import Compiled

# The Phase I candidates ``(m, r)`` of a node given its inputs' ``(m, r)``.
Candidates = Callable[[int, list[tuple[int, int]]], list[tuple[int, int]]]


class _Edit:
    """A candidate plan that a Phase II move changes in place, and the nodes it changed."""

    __slots__ = ('m', 'r', 'width', 'changed')

    def __init__(self, m: list[int], r: list[int], width: list[int]) -> None:
        self.m = m
        self.r = r
        self.width = width
        self.changed: set[int] = set()

    def assign(self, v: int, mv: int, rv: int) -> None:
        """Give ``v`` the ranges ``(mv, rv)``, clamped to valid ones."""
        mv = min(max(mv, 0), self.width[v])
        rv = min(max(rv, 0), mv)
        if (mv, rv) != (self.m[v], self.r[v]):
            self.m[v], self.r[v] = mv, rv
            self.changed.add(v)


class Neighbourhoods:
    """Phase II's moves over the decision nodes of one problem.

    ``decisions``: the decision nodes in topological order; ``derived``: which nodes take
    their ranges from their inputs (a move leaves them to the planner); ``candidates``:
    Phase I's candidate generator; ``rng``: the search's random source.
    """

    def __init__(
        self,
        c: Compiled,
        rng: random.Random,
        decisions: list[int],
        derived: list[bool],
        candidates: Candidates,
    ) -> None:
        self.c = c
        self.rng = rng
        self.decisions = decisions
        self.derived = derived
        self.candidates = candidates
        self.position = {v: i for i, v in enumerate(decisions)}
        self._prepare_boundaries()

    def _prepare_boundaries(self) -> None:
        """Find where a segment of split nodes may begin and end.

        Only the tensors crossing a segment's ends move between the sides, so good ends are
        topological cuts crossed by no tensor larger than the model input (the only legal
        ones under constraint 5). ``entries``: decision nodes a segment may start at;
        ``exits``: decision nodes it may end at.
        """
        c = self.c
        n = c.n
        delta = [0] * (n + 2)
        for u in range(n):
            last = c.last_consumer[u]
            if last > u and c.expansive[u]:
                delta[u + 1] += 1
                delta[last + 1] -= 1
        crossing = [0] * (n + 1)  # expansive tensors crossing the cut before node k
        count = 0
        for k in range(n + 1):
            count += delta[k]
            crossing[k] = count
        self.entries = [v for v in self.decisions if crossing[v] == 0]
        self.exits = [v for v in self.decisions if crossing[v + 1] == 0]

    def _window(self, anchor: int, size: int, backward: bool) -> list[int]:
        """Return about ``size`` decision nodes around ``anchor`` (ending there if backward).

        Half of the time the window is snapped to segment boundaries instead: it ends at
        the first exit at or after the anchor and starts at one of the few entries before.
        """
        if self.rng.random() < 0.5 and self.exits and self.entries:
            j = bisect.bisect_left(self.exits, anchor)
            last = self.exits[min(j, len(self.exits) - 1)]
            k = bisect.bisect_right(self.entries, last)
            if k:
                back = min(k, 1 + int(self.rng.expovariate(0.25)))
                first = self.entries[k - back]
                lo, hi = self.position[first], self.position[last]
                return self.decisions[lo : hi + 1]
        i = self.position[anchor]
        if backward:
            return self.decisions[max(0, i - size + 1) : i + 1]
        lo = max(0, i - size // 2)
        return self.decisions[lo : lo + size]

    def move(
        self, m: list[int], r: list[int], anchor: int, lo_size: int, hi_size: int
    ) -> tuple[str, set[int]]:
        """Apply one random neighbourhood repair around ``anchor`` in place.

        Returns the kind of move and the nodes it changed.
        """
        rng = self.rng
        size = rng.randint(lo_size, hi_size)
        kind = rng.choices(
            ('single', 'uniform', 'closure', 'segment', 'shift', 'replicate'),
            weights=(3, 3, 2, 3, 2, 2),
        )[0]
        edit = _Edit(m, r, self.c.width)
        if kind == 'single' or self.c.is_atomic[anchor] and kind != 'uniform':
            self._move_single(edit, anchor)
            return 'single', edit.changed
        window = self._window(anchor, size, backward=kind in ('closure', 'segment'))
        if kind == 'uniform':
            self._move_uniform(edit, anchor, window)
        elif kind == 'shift':
            self._move_shift(edit, window)
        elif kind == 'replicate':
            self._move_replicate(edit, window)
        elif kind == 'segment':
            self._move_segment(edit, window)
        else:
            edit.changed |= self._closure(m, r, window)
        return kind, edit.changed

    def _move_single(self, edit: _Edit, anchor: int) -> None:
        """Give ``anchor`` another of its Phase I candidates."""
        m, r = edit.m, edit.r
        hold = [(m[u], r[u]) for u, _, _ in self.c.in_edges[anchor]]
        options = [mr for mr in self.candidates(anchor, hold) if mr != (m[anchor], r[anchor])]
        if options:
            edit.assign(anchor, *self.rng.choice(options))

    def _move_uniform(self, edit: _Edit, anchor: int, window: list[int]) -> None:
        """Cut the whole window at one fraction, near the anchor's or not, with one overlap.

        Global nodes go whole to the robot or the server if the fraction is 1 or 0.
        """
        c = self.c
        rng = self.rng
        w = c.width[anchor]
        f0 = (edit.m[anchor] + edit.r[anchor]) / (2 * w)
        f = rng.choice(
            (
                0.0,
                1.0,
                0.25,
                0.5,
                0.75,
                f0 + 0.125,
                f0 - 0.125,
                f0 + 0.0625,
                f0 - 0.0625,
                rng.random(),
            )
        )
        f = min(1.0, max(0.0, f))
        k = rng.choice((0, 0, 1, 2))
        for v in window:
            if c.is_atomic[v]:
                if f in (0.0, 1.0):
                    edit.assign(v, int(f), int(f))
                continue
            cut = round(f * c.width[v])
            edit.assign(v, cut + k * c.halo[v], cut - k * c.halo[v])

    def _move_shift(self, edit: _Edit, window: list[int]) -> None:
        """Move every cut in the window by the same share of its node's width."""
        c = self.c
        m, r = edit.m, edit.r
        delta = self.rng.choice((-0.125, -0.0625, -0.03125, 0.03125, 0.0625, 0.125))
        for v in window:
            if not c.is_atomic[v]:
                step = round(delta * c.width[v]) or (1 if delta > 0 else -1)
                edit.assign(v, m[v] + step, r[v] + step)

    def _move_replicate(self, edit: _Edit, window: list[int]) -> None:
        """Give every cut in the window the same overlap: 0, 1, 2 or 4 halos."""
        c = self.c
        m, r = edit.m, edit.r
        k = self.rng.choice((0, 1, 2, 4))
        for v in window:
            if not c.is_atomic[v]:
                cut = (m[v] + r[v]) // 2
                edit.assign(v, cut + k * c.halo[v], cut - k * c.halo[v])

    def _move_segment(self, edit: _Edit, window: list[int]) -> None:
        """Put a new cut at the window's end and widen the nodes before it.

        Each side then computes its part of the whole window without transfers (only the
        window's entry and exit cross the link).
        """
        c = self.c
        rng = self.rng
        m, r = edit.m, edit.r
        end = window[-1]
        w = c.width[end]
        f0 = (m[end] + r[end]) / (2 * w)
        f = rng.choice((0.25, 0.5, 0.75, f0 + 0.125, f0 - 0.125, rng.random()))
        cut = round(min(1.0, max(0.0, f)) * w)
        if not c.is_atomic[end]:
            edit.assign(end, cut, cut)
        edit.changed |= self._closure(m, r, window)

    def _closure(self, m: list[int], r: list[int], window: list[int]) -> set[int]:
        """Make the window free of internal transfers by widening producers' ranges.

        Walks back from the window's last node: each node's robot range grows to what its
        robot-side consumers need and its server range to what theirs need (the cross-layer
        halo of spec 2.4); element-wise nodes pass the needs through to their inputs.
        """
        c = self.c
        if not window:
            return set()
        first, last = window[0], window[-1]
        need_m: dict[int, int] = {}
        need_r: dict[int, int] = {}
        changed: set[int] = set()
        for v in range(last, first - 1, -1):
            if c.is_input[v] or c.is_atomic[v] and v != last:
                break
            w = c.width[v]
            if v == last:
                mv, rv = m[v], r[v]
            else:
                mv = need_m.get(v, 0)
                rv = need_r.get(v, w)
                # Consumers outside the window keep what they have now.
                for x, lo, hi in c.out_edges[v]:
                    if x > last:
                        if m[x]:
                            mv = max(mv, hi[m[x] - 1])
                        if r[x] < c.width[x]:
                            rv = min(rv, lo[r[x]])
                if rv > mv:
                    mv = rv = (mv + rv) // 2
                if not self.derived[v] and (mv, rv) != (m[v], r[v]):
                    m[v], r[v] = mv, rv
                    changed.add(v)
            for u, lo, hi in c.in_edges[v]:
                if mv:
                    need_m[u] = max(need_m.get(u, 0), hi[mv - 1])
                if rv < w:
                    need_r[u] = min(need_r.get(u, c.width[u]), lo[rv])
        return changed
