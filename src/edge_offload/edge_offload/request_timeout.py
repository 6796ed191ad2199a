# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Server time limits derived from measured round trips (plain Python: no ROS, no sockets).

A goal without a deadline used to get a fixed server time limit. On a machine where the
edge server's honest answer takes longer than that limit, the bridge gave up and ran the
frame locally while the server was still computing it: the work was done twice and
everything got slower. A dead server is detected by other means (pings and the liveness
timeout), so the time limit does not need to be short to detect death; it only needs to
be long enough that an honest answer is not abandoned.

``RequestTimeouts`` keeps, per ``(model, mode)``, the last ``window`` measured round
trips of successful requests (including replies that came after the client had already
given up on them) and returns the limit for the next request without a deadline::

    limit = clamp(factor * p95(window), min=floor_s, max=ceiling_s)

and ``floor_s`` before anything is measured. ``p95`` is the nearest-rank 95th percentile
of the window (for fewer than 20 samples it is the window's maximum), so one slow outlier
in 20 does not set the limit, but two do. The defaults (``DEFAULT_FACTOR`` 2.0,
``DEFAULT_WINDOW`` 20, ``DEFAULT_CEILING_S`` 30 s) leave room for an answer twice as slow
as nearly every recent one, adapt within a few seconds of a 5-10 Hz stream, and never
wait longer than 30 s for a server that is alive (pings answered) but stuck.

The object is thread-safe: the client's I/O thread records, goal workers ask for limits
and a timer reads estimates for diagnostics and logs.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_FACTOR = 2.0
DEFAULT_WINDOW = 20
DEFAULT_CEILING_S = 30.0
DEFAULT_QUANTILE = 0.95
# A change of the limit by this fraction (of the last reported one) is worth a log line...
NOTABLE_CHANGE_RATIO = 0.25
# ... but one per (model, mode) in this period at most.
CHANGE_LOG_PERIOD_S = 5.0
# (model, mode) pairs tracked at most; the least recently measured is forgotten first.
MAX_KEYS = 256
# The op of an ordinary whole-model inference; other ops are tracked apart.
INFER_OP = 'infer'


@dataclass(frozen=True)
class TimeoutEstimate:
    """The current limit of one (model, mode) and what it was derived from."""

    model: str
    mode: str
    limit_s: float
    quantile_s: float  # nan before any measurement
    samples: int


@dataclass(frozen=True)
class LimitChange:
    """A notable change of one (model, mode)'s limit since it was last reported."""

    model: str
    mode: str
    previous_s: float
    limit_s: float
    quantile_s: float
    samples: int


def nearest_rank(values: list[float], quantile: float) -> float:
    """Return the nearest-rank ``quantile`` (0 < q <= 1) of non-empty ``values``."""
    ordered = sorted(values)
    rank = max(1, math.ceil(quantile * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


class RequestTimeouts:
    """Per (model, mode) server time limits from a window of measured round trips."""

    def __init__(
        self,
        floor_s: float,
        ceiling_s: float = DEFAULT_CEILING_S,
        factor: float = DEFAULT_FACTOR,
        window: int = DEFAULT_WINDOW,
        *,
        quantile: float = DEFAULT_QUANTILE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Set the limits: ``floor_s`` also applies before anything is measured.

        Raises:
            ValueError: ``floor_s`` not > 0, ``ceiling_s`` < ``floor_s``, ``factor`` < 1,
                ``window`` < 1 or ``quantile`` outside (0, 1].

        """
        if not floor_s > 0:
            raise ValueError(f'request_timeout_s must be > 0, not {floor_s}')
        if not ceiling_s >= floor_s:
            raise ValueError(
                f'max_request_timeout_s ({ceiling_s}) must be >= request_timeout_s ({floor_s})'
            )
        if not factor >= 1.0:
            raise ValueError(f'request_timeout_factor must be >= 1, not {factor}')
        if window < 1:
            raise ValueError(f'the measurement window must hold >= 1 round trip, not {window}')
        if not 0.0 < quantile <= 1.0:
            raise ValueError(f'quantile must be in (0, 1], not {quantile}')
        self.floor_s = float(floor_s)
        self.ceiling_s = float(ceiling_s)
        self.factor = float(factor)
        self.window = int(window)
        self.quantile = float(quantile)
        self._clock = clock
        self._lock = threading.Lock()
        self._samples: dict[tuple[str, str], collections.deque[float]] = {}
        self._limits: dict[tuple[str, str], float] = {}
        # Last reported limit and when it was reported, per key.
        self._reported: dict[tuple[str, str], tuple[float, float]] = {}
        self._late_replies = 0

    @property
    def late_replies(self) -> int:
        """Return how many of the recorded round trips ended after the client gave up."""
        with self._lock:
            return self._late_replies

    # -- measurements and limits -------------------------------------------------------

    def record(self, model: str, mode: str, seconds: float) -> None:
        """Add one measured round trip of a successful request (ignored unless finite, >= 0)."""
        if not (math.isfinite(seconds) and seconds >= 0):
            return
        key = (model, mode)
        with self._lock:
            samples = self._samples.pop(key, None)  # re-inserted last: most recently measured
            if samples is None:
                samples = collections.deque(maxlen=self.window)
                if len(self._samples) >= MAX_KEYS:
                    oldest = next(iter(self._samples))
                    del self._samples[oldest]
                    self._limits.pop(oldest, None)
                    self._reported.pop(oldest, None)
            samples.append(float(seconds))
            self._samples[key] = samples
            self._limits[key] = self._derive(samples)

    def limit_s(self, model: str, mode: str) -> float:
        """Return the time limit of the next request of ``model`` in ``mode``."""
        with self._lock:
            return self._limits.get((model, mode), self.floor_s)

    def _derive(self, samples: collections.deque[float]) -> float:
        measured = self.factor * nearest_rank(list(samples), self.quantile)
        return min(self.ceiling_s, max(self.floor_s, measured))

    def estimates(self) -> list[TimeoutEstimate]:
        """Return the limit of every measured (model, mode), sorted by model and mode."""
        with self._lock:
            return [
                TimeoutEstimate(
                    model,
                    mode,
                    self._limits[(model, mode)],
                    nearest_rank(list(samples), self.quantile),
                    len(samples),
                )
                for (model, mode), samples in sorted(self._samples.items())
            ]

    def estimate(self, model: str, mode: str) -> TimeoutEstimate:
        """Return the limit of ``model`` in ``mode`` (the floor when nothing is measured)."""
        with self._lock:
            samples = self._samples.get((model, mode))
            if not samples:
                return TimeoutEstimate(model, mode, self.floor_s, math.nan, 0)
            return TimeoutEstimate(
                model,
                mode,
                self._limits[(model, mode)],
                nearest_rank(list(samples), self.quantile),
                len(samples),
            )

    def notable_changes(
        self,
        min_ratio: float = NOTABLE_CHANGE_RATIO,
        min_period_s: float = CHANGE_LOG_PERIOD_S,
    ) -> list[LimitChange]:
        """Return the limits that moved by ``min_ratio`` or more since last reported.

        Each is then counted as reported. A key reported less than ``min_period_s`` ago is
        left for a later call (its change is not lost, only delayed). The first report of a
        key compares with the floor, the limit it had before any measurement.
        """
        now = self._clock()
        changes = []
        with self._lock:
            for key, limit in sorted(self._limits.items()):
                previous, reported_at = self._reported.get(key, (self.floor_s, -math.inf))
                if abs(limit - previous) < min_ratio * previous:
                    continue
                if now - reported_at < min_period_s:
                    continue
                self._reported[key] = (limit, now)
                samples = self._samples[key]
                changes.append(
                    LimitChange(
                        key[0],
                        key[1],
                        previous,
                        limit,
                        nearest_rank(list(samples), self.quantile),
                        len(samples),
                    )
                )
        return changes

    # -- EdgeClient's request timing hooks (edge_offload.client.RequestTiming) ---------

    def timeout_for_call(self, mode: str, op: str, fields: Mapping[str, Any]) -> float:
        """Return the limit of a CALL sent without one (the client asks at submit)."""
        return self.limit_s(*call_key(mode, op, fields))

    def record_call(
        self, mode: str, op: str, fields: Mapping[str, Any], seconds: float, *, late: bool
    ) -> None:
        """Record a successful CALL's round trip, answered in time or ``late``."""
        if late:
            with self._lock:
                self._late_replies += 1
        self.record(*call_key(mode, op, fields), seconds)


def call_key(mode: str, op: str, fields: Mapping[str, Any]) -> tuple[str, str]:
    """Return the (model, mode) a CALL is measured under.

    The model is the call's ``model`` field ('' when it names none); an op other than
    ``infer`` is kept apart as ``mode:op``, since one inference of a multi-call mode may
    send calls of very different lengths.
    """
    model = fields.get('model', '') if isinstance(fields, Mapping) else ''
    label = mode if op == INFER_OP else f'{mode}:{op}'
    return (model if isinstance(model, str) else '', label)
