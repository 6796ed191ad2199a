# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Metrics of a robot's answer timeline around a server fault (pure functions, no I/O).

A fault test records one ``Answer`` per request the robot made: when the answer came
(``time.monotonic()``, the same clock in every process of the machine), whether it was
offloaded (``False``: the robot ran the model itself, a local fallback), whether it was
bit-equal to the model run locally, and how many round trips it took (``None`` when not
offloaded or not known). The test knows when it did the fault and when the server could
answer again; these functions say what the robot did around those instants:

* ``first_fallback_after``: when the robot first answered locally after the fault;
* ``resumed_at``: the start of the first run of offloaded answers lasting ``steady_s`` with
  no fallback in between ("offloading resumed");
* ``resumed_at(..., accept=replayed)``: the same for replayed (one round trip) answers;
* ``runs``: the runs of consecutive answers that satisfy a predicate;
* ``longest_gap``: the longest time the robot went without an answer.

``measure`` gathers them for one fault and ``format_table`` prints a table of several.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple


class Answer(NamedTuple):
    """One answered request: ``(t, offloaded, equal, round_trips)``."""

    t: float
    offloaded: bool
    equal: bool
    round_trips: int | None = None


Predicate = Callable[[Answer], bool]


def answers(records: Iterable[Sequence]) -> list[Answer]:
    """Return ``records`` (tuples ``(t, offloaded, equal, round_trips)``) as sorted Answers."""
    return sorted((Answer(*record) for record in records), key=lambda answer: answer.t)


def offloaded(answer: Answer) -> bool:
    """Return whether the edge server answered (no local fallback)."""
    return answer.offloaded


def replayed(answer: Answer) -> bool:
    """Return whether the answer was offloaded in one round trip (an RRTO replay)."""
    return answer.offloaded and answer.round_trips == 1


@dataclass(frozen=True)
class Run:
    """Consecutive answers that all satisfy a predicate."""

    start: float  # time of the first answer
    end: float  # time of the last answer
    count: int

    @property
    def duration(self) -> float:
        """Return the time from the first to the last answer of the run."""
        return self.end - self.start


def runs(records: Iterable[Sequence], accept: Predicate = offloaded, since: float = -1e300):
    """Return the runs of consecutive answers at or after ``since`` that ``accept`` takes."""
    found: list[Run] = []
    start = end = None
    count = 0
    for answer in answers(records):
        if answer.t < since:
            continue
        if accept(answer):
            if start is None:
                start, count = answer.t, 0
            end = answer.t
            count += 1
        elif start is not None:
            found.append(Run(start, end, count))
            start = None
    if start is not None:
        found.append(Run(start, end, count))
    return found


def resumed_at(
    records: Iterable[Sequence],
    since: float,
    steady_s: float = 1.0,
    accept: Predicate = offloaded,
) -> float | None:
    """Return when the first run after ``since`` lasting ``steady_s`` began (None: none did).

    A run is consecutive answers that ``accept`` takes (offloaded ones by default), from
    its first answer to its last at least ``steady_s`` apart, with no other answer between.
    """
    for run in runs(records, accept, since):
        if run.duration >= steady_s:
            return run.start
    return None


def first_fallback_after(records: Iterable[Sequence], since: float) -> float | None:
    """Return when the robot first answered locally (a fallback) at or after ``since``."""
    for answer in answers(records):
        if answer.t >= since and not answer.offloaded:
            return answer.t
    return None


def longest_gap(records: Iterable[Sequence], start: float, end: float) -> float:
    """Return the longest time between ``start``, the answers in between, and ``end``."""
    times = [start, *(a.t for a in answers(records) if start < a.t < end), end]
    return max(later - earlier for earlier, later in zip(times, times[1:], strict=False))


@dataclass(frozen=True)
class FaultMetrics:
    """What the robot did around one fault; times in seconds, None where it never did."""

    fault_t: float
    back_t: float  # when the server could answer again
    first_fallback_s: float | None  # from the fault
    resumed_s: float | None  # from back_t: a steady run of offloaded answers began
    replay_resumed_s: float | None  # from back_t: a steady run of replayed answers began
    longest_gap_s: float  # the robot's longest wait for an answer, fault to resumption
    answers: int  # at or after the fault
    fallbacks: int  # at or after the fault
    unequal: int  # answers (all of the timeline) not bit-equal to the local model


def measure(
    records: Iterable[Sequence],
    fault_t: float,
    back_t: float,
    steady_s: float = 1.0,
) -> FaultMetrics:
    """Return the metrics of ``records`` around a fault at ``fault_t``, served at ``back_t``.

    Resumption is the first steady run after the first fallback (after the fault if the
    robot never fell back), counted from ``back_t``; a run that began before ``back_t``
    counts as 0 (the robot was offloading when the server could serve it).
    """
    timeline = answers(records)
    first = first_fallback_after(timeline, fault_t)
    # Offloaded answers before the first fallback were in flight at the fault.
    since = fault_t if first is None else first
    resumed = resumed_at(timeline, since, steady_s)
    replay = resumed_at(timeline, since, steady_s, replayed)
    end = resumed if resumed is not None else (timeline[-1].t if timeline else fault_t)
    after = [answer for answer in timeline if answer.t >= fault_t]
    return FaultMetrics(
        fault_t=fault_t,
        back_t=back_t,
        first_fallback_s=None if first is None else first - fault_t,
        resumed_s=None if resumed is None else max(0.0, resumed - back_t),
        replay_resumed_s=None if replay is None else max(0.0, replay - back_t),
        longest_gap_s=longest_gap(timeline, fault_t, max(end, fault_t)),
        answers=len(after),
        fallbacks=sum(not answer.offloaded for answer in after),
        unequal=sum(not answer.equal for answer in timeline),
    )


def format_table(rows: Sequence[tuple[str, FaultMetrics]]) -> str:
    """Return a text table of ``(scenario, metrics)`` rows."""

    def seconds(value: float | None) -> str:
        return '-' if value is None else f'{value:.3f}'

    header = (
        'scenario',
        'first fallback',
        'resumed',
        'replay resumed',
        'longest gap',
        'answers',
        'fallbacks',
        'unequal',
    )
    lines = [header]
    for name, metrics in rows:
        lines.append(
            (
                name,
                seconds(metrics.first_fallback_s),
                seconds(metrics.resumed_s),
                seconds(metrics.replay_resumed_s),
                seconds(metrics.longest_gap_s),
                str(metrics.answers),
                str(metrics.fallbacks),
                str(metrics.unequal),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [
        '  '.join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        for line in lines
    ]
    text.insert(1, '  '.join('-' * width for width in widths))
    return '\n'.join(text) + '\n(s; first fallback from the fault, resumed from the server back)'
