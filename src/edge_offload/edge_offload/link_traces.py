# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Mahimahi bandwidth traces: delivery opportunities of a network link over time.

A trace file lists, one per line, the integer millisecond timestamps at which the link may
deliver one packet of up to ``PACKET_BYTES`` (1500) bytes. Several lines may share a timestamp
(several packets in that millisecond); timestamps never decrease. As in mahimahi, the trace
repeats: its period is the last timestamp, and opportunity ``i`` of repetition ``k`` happens at
``k * period + timestamp[i]`` (a trace whose last timestamp is 0 repeats every millisecond).

Unlike mahimahi's parser, lines starting with ``#`` (comments) and blank lines are accepted and
ignored, so shipped traces can say where they came from; strip them
(``grep -v '^#' FILE``) before giving a file to ``mm-link``.
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path

# Bytes one delivery opportunity carries (an Ethernet MTU, as in mahimahi).
PACKET_BYTES = 1500
_BITS_PER_OPPORTUNITY = PACKET_BYTES * 8


class DeliveryTrace:
    """A cyclic sequence of delivery opportunities, each for ``PACKET_BYTES`` bytes.

    Trace time starts at 0; opportunities happen at times ``>= 0`` only. Counting is
    O(log n) in the number of lines of the trace, whatever the length of the interval.
    """

    def __init__(self, timestamps_ms: array, source: str = '<timestamps>') -> None:
        # Use load() or from_timestamps_ms(): they validate their input.
        self._timestamps = timestamps_ms
        self._count = len(timestamps_ms)
        self._period_ms = max(timestamps_ms[-1], 1)
        self.source = source

    @classmethod
    def load(cls, path: str | Path) -> DeliveryTrace:
        """Read a mahimahi trace file; raise ValueError naming the line of any bad entry."""
        path = Path(path)
        timestamps = array('q')
        previous = 0
        with path.open(encoding='utf-8') as trace_file:
            for line_number, line in enumerate(trace_file, start=1):
                text = line.strip()
                if not text or text.startswith('#'):
                    continue
                try:
                    value = int(text)
                except ValueError:
                    raise ValueError(
                        f'{path}:{line_number}: expected an integer millisecond timestamp, '
                        f'got {text!r}'
                    ) from None
                if value < 0:
                    raise ValueError(f'{path}:{line_number}: negative timestamp {value}')
                if value < previous:
                    raise ValueError(
                        f'{path}:{line_number}: timestamp {value} is before the previous '
                        f'timestamp {previous}; timestamps must not decrease'
                    )
                timestamps.append(value)
                previous = value
        if not timestamps:
            raise ValueError(f'{path}: the trace has no delivery opportunities')
        return cls(timestamps, str(path))

    @classmethod
    def from_timestamps_ms(cls, timestamps_ms: Iterable[int]) -> DeliveryTrace:
        """Build a trace from millisecond timestamps; raise ValueError on bad entries."""
        timestamps = array('q')
        previous = 0
        for index, value in enumerate(timestamps_ms):
            if isinstance(value, bool) or int(value) != value:
                raise ValueError(f'timestamp #{index} is not an integer: {value!r}')
            value = int(value)
            if value < 0:
                raise ValueError(f'timestamp #{index} is negative: {value}')
            if value < previous:
                raise ValueError(
                    f'timestamp #{index} ({value}) is before the previous one ({previous}); '
                    'timestamps must not decrease'
                )
            timestamps.append(value)
            previous = value
        if not timestamps:
            raise ValueError('the trace has no delivery opportunities')
        return cls(timestamps)

    def __len__(self) -> int:
        """Return the number of delivery opportunities in one period."""
        return self._count

    def __repr__(self) -> str:
        """Describe the trace by its source, size, period and mean rate."""
        return (
            f'DeliveryTrace({self.source!r}, {self._count} opportunities, '
            f'period {self.period_s:g} s, mean {self.mean_rate_bps() / 1e6:.2f} Mbit/s)'
        )

    @property
    def timestamps_ms(self) -> Sequence[int]:
        """Return the timestamps of one period (a copy)."""
        return self._timestamps.tolist()

    @property
    def period_s(self) -> float:
        """Return the period after which the trace repeats, in seconds."""
        return self._period_ms / 1000.0

    def mean_rate_bps(self) -> float:
        """Return the long-run mean rate in bit/s (opportunities * 1500 * 8 / period)."""
        return self._count * _BITS_PER_OPPORTUNITY / self.period_s

    def count_until(self, t_s: float) -> int:
        """Return how many opportunities happen at trace times in [0, t_s] (to the ns)."""
        if t_s < 0:
            return 0
        # Add a nanosecond so that the time of an opportunity counts it despite rounding.
        t_ms = t_s * 1000.0 + 1e-6
        repetitions = math.floor(t_ms / self._period_ms)
        remainder_ms = t_ms - repetitions * self._period_ms
        # Timestamps are integers: <= remainder is <= floor(remainder).
        within = bisect.bisect_right(self._timestamps, math.floor(remainder_ms))
        return repetitions * self._count + within

    def opportunity_time_s(self, index: int) -> float:
        """Return the trace time of opportunity ``index`` (0-based, counting repetitions)."""
        if index < 0:
            raise ValueError(f'opportunity index must be >= 0, got {index}')
        repetitions, position = divmod(index, self._count)
        return (repetitions * self._period_ms + self._timestamps[position]) / 1000.0

    def opportunities_between(self, t0_s: float, t1_s: float) -> int:
        """Return the number of opportunities at trace times in (t0_s, t1_s]."""
        if t1_s < t0_s:
            raise ValueError(f'interval end {t1_s} is before its start {t0_s}')
        return self.count_until(t1_s) - self.count_until(t0_s)

    def mean_rate_between(self, t0_s: float, t1_s: float) -> float:
        """Return the mean rate in bit/s the trace offers over (t0_s, t1_s]."""
        if t1_s <= t0_s:
            raise ValueError(f'empty interval ({t0_s}, {t1_s}]')
        return self.opportunities_between(t0_s, t1_s) * _BITS_PER_OPPORTUNITY / (t1_s - t0_s)


def rates_to_timestamps(rates_bps: Iterable[float], step_s: float) -> list[int]:
    """Turn a throughput series (one rate per ``step_s``) into delivery-opportunity timestamps.

    Step ``i`` covers (i * step, (i + 1) * step]; its opportunities are spread evenly over it,
    the last one at the end of the step. The fraction of an opportunity a step cannot use is
    carried to the next step, so the long-run mean matches the series to one opportunity.
    ``step_s`` must be a whole number of milliseconds.
    """
    step_ms = round(step_s * 1000.0)
    if step_ms < 1 or not math.isclose(step_ms, step_s * 1000.0, rel_tol=0.0, abs_tol=1e-6):
        raise ValueError(f'step must be a whole number (>= 1) of milliseconds, got {step_s} s')
    timestamps: list[int] = []
    carry = 0.0
    for index, rate in enumerate(rates_bps):
        if not math.isfinite(rate) or rate < 0:
            raise ValueError(f'rate #{index} must be finite and >= 0, got {rate}')
        exact = rate * step_s / _BITS_PER_OPPORTUNITY + carry
        count = math.floor(exact + 1e-9)
        carry = exact - count
        start_ms = index * step_ms
        # ceil(j * step / count) for j = 1..count: evenly spread, the last at the step's end.
        timestamps.extend(
            start_ms + (j * step_ms + count - 1) // count for j in range(1, count + 1)
        )
    return timestamps


def write_trace(
    path: str | Path, timestamps_ms: Sequence[int], header_lines: Sequence[str] = ()
) -> None:
    """Write a trace file: each header line as a ``#`` comment, then one timestamp a line."""
    trace = DeliveryTrace.from_timestamps_ms(timestamps_ms)  # validates
    lines = [f'# {line}'.rstrip() for line in header_lines]
    lines.extend(str(value) for value in trace.timestamps_ms)
    Path(path).write_text('\n'.join(lines) + '\n', encoding='utf-8')
