# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Batch inference latency of one model on one server, by batch size (ARISE's ``lat_bs``).

A profile is measured on the server that will use it (``measure_profile``) or loaded from a
YAML file measured elsewhere, e.g. on a GPU server (``load_profile``). The scheduler only
reads it; it never guesses a latency for a batch size the profile does not hold.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

PROFILE_FORMAT = 'arise_batch_latency/1'


class ProfileError(ValueError):
    """A latency profile that cannot be used (missing sizes, bad values, wrong format)."""


@dataclass(frozen=True)
class BatchLatencyProfile:
    """Latency in seconds of one batched inference, for batch sizes 1 to ``max_batch``.

    ``source`` says where the figures come from (the device they were measured on, or the
    published curve they follow), so that a result computed with the profile can say so.
    """

    model: str
    latency_s: Mapping[int, float]
    source: str
    _by_size: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.model:
            raise ProfileError('a latency profile needs a model name')
        sizes = sorted(self.latency_s)
        if not sizes or sizes != list(range(1, len(sizes) + 1)):
            raise ProfileError(
                f'profile of {self.model!r}: batch sizes must be 1..N without gaps, got {sizes}'
            )
        values = [float(self.latency_s[size]) for size in sizes]
        for size, value in zip(sizes, values, strict=True):
            if not math.isfinite(value) or value <= 0.0:
                raise ProfileError(
                    f'profile of {self.model!r}: latency at batch size {size} must be a '
                    f'positive number of seconds, got {value!r}'
                )
        object.__setattr__(self, '_by_size', tuple(values))

    @property
    def max_batch(self) -> int:
        return len(self._by_size)

    def latency(self, batch_size: int) -> float:
        """Return the latency of one batch of ``batch_size`` requests, in seconds."""
        if not 1 <= batch_size <= self.max_batch:
            raise ProfileError(
                f'profile of {self.model!r} has batch sizes 1..{self.max_batch}, not {batch_size}'
            )
        return self._by_size[batch_size - 1]

    def scaled(self, factor: float, why: str) -> BatchLatencyProfile:
        """Return this profile with every latency times ``factor`` (``why`` goes in source)."""
        if not (math.isfinite(factor) and factor > 0.0):
            raise ProfileError(f'a profile scale is a positive number, got {factor!r}')
        return BatchLatencyProfile(
            self.model,
            {size: value * factor for size, value in enumerate(self._by_size, start=1)},
            f'{self.source}; x{factor:.2f} {why}',
        )

    def throughput(self, batch_size: int) -> float:
        """Return requests per second when every batch has ``batch_size`` requests."""
        return batch_size / self.latency(batch_size)

    def to_dict(self) -> dict:
        return {
            'format': PROFILE_FORMAT,
            'model': self.model,
            'source': self.source,
            'latency_s': {size: self._by_size[size - 1] for size in range(1, self.max_batch + 1)},
        }

    @classmethod
    def from_dict(cls, data: object, origin: str = 'profile') -> BatchLatencyProfile:
        if not isinstance(data, dict) or data.get('format') != PROFILE_FORMAT:
            raise ProfileError(f'{origin}: not a batch latency profile (format {PROFILE_FORMAT})')
        latencies = data.get('latency_s')
        if not isinstance(latencies, dict):
            raise ProfileError(f'{origin}: latency_s must map batch sizes to seconds')
        try:
            parsed = {int(size): float(value) for size, value in latencies.items()}
        except (TypeError, ValueError) as error:
            raise ProfileError(f'{origin}: latency_s: {error}') from error
        return cls(str(data.get('model', '')), parsed, str(data.get('source', '')))


def gpu_like_profile(max_batch: int = 16, model: str = 'depth') -> BatchLatencyProfile:
    """Return a GPU-like curve, ``7 + 3·bs`` ms: batching amortises well.

    The shape of the dissertation's Fig. 3.12 (amortised latency falling with the batch
    size), not a measurement: for benchmarks on machines without a GPU, and said so in
    the profile's ``source``.
    """
    return BatchLatencyProfile(
        model,
        {size: 0.007 + 0.003 * size for size in range(1, max_batch + 1)},
        'GPU-like curve (7 + 3 bs ms)',
    )


def load_profile(path: str | Path) -> BatchLatencyProfile:
    """Read a profile written by ``save_profile`` (or by hand, in the same format)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ProfileError(f'{path}: {error}') from error
    return BatchLatencyProfile.from_dict(data, str(path))


def save_profile(profile: BatchLatencyProfile, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(profile.to_dict(), sort_keys=False))


def measure_profile(
    model: str,
    run_batch: Callable[[int], None],
    max_batch: int,
    source: str,
    repeats: int = 5,
    warmup: int = 2,
    clock: Callable[[], float] | None = None,
    shape: str = 'line',
) -> BatchLatencyProfile:
    """Time ``run_batch(n)`` for n = 1..max_batch; return the profile of ``shape``.

    Each size's latency is the median of ``repeats`` runs, not the mean: one preempted run
    on a shared machine should not make a batch size look slower than it is. The sizes are
    timed in turns (1, 2, ..., max_batch, then again), so that a busy spell of the machine
    slows every size alike rather than one.

    ``shape``:

    * ``'line'`` (the default): the least-squares line ``a + b·n`` through the medians, with
      ``b`` at least 1 % of the batch-1 latency. On a CPU a batch costs about linearly more
      per request, and a line keeps measurement noise from making a larger batch look free
      (a plateau), which Step 1 would take: it would plan batches that then run late.
    * ``'monotone'``: the medians themselves, made non-decreasing (the server can always
      run a smaller batch padded to a larger one's cost). For a profile measured with many
      repeats on a quiet server, where real plateaus (a GPU's) should be kept.
    """
    import time

    if max_batch < 1 or repeats < 1 or warmup < 0:
        raise ProfileError('max_batch and repeats must be at least 1, warmup at least 0')
    if shape not in ('line', 'monotone'):
        raise ProfileError(f"shape must be 'line' or 'monotone', got {shape!r}")
    clock = clock or time.perf_counter
    sizes = range(1, max_batch + 1)
    for size in sizes:
        for _ in range(warmup):
            run_batch(size)
    samples: dict[int, list[float]] = {size: [] for size in sizes}
    for _ in range(repeats):
        for size in sizes:
            start = clock()
            run_batch(size)
            samples[size].append(clock() - start)
    medians = [statistics.median(samples[size]) for size in sizes]
    if shape == 'line' and max_batch > 1:
        fit = statistics.linear_regression(list(sizes), medians)
        slope = max(fit.slope, 0.01 * medians[0])
        # Through the medians' centre with the (floored) slope.
        centre_n, centre_latency = statistics.fmean(sizes), statistics.fmean(medians)
        fitted = [centre_latency + slope * (size - centre_n) for size in sizes]
        floor = 0.5 * min(medians)
        latencies = [max(value, floor) for value in fitted]
        for index in range(1, len(latencies)):
            latencies[index] = max(latencies[index], latencies[index - 1] + 1e-6)
        source = f'{source}; least-squares line through the medians'
    else:
        latencies = list(medians)
        for index in range(1, len(latencies)):
            latencies[index] = max(latencies[index], latencies[index - 1])
    return BatchLatencyProfile(model, {size: latencies[size - 1] for size in sizes}, source)


# observed_scale: batches it needs, the change it ignores, the bounds of the scale.
SCALE_MIN_BATCHES = 16
SCALE_STEP = 0.1
SCALE_BOUNDS = (0.5, 4.0)


def observed_scale(
    profile: BatchLatencyProfile, batches: Sequence[tuple[int, float]], current: float
) -> float | None:
    """Return the scale the profile should have now, or None to keep ``current``.

    ``batches`` are the server's newest (size, seconds). The scale is the median ratio of
    real to profiled latency, within :data:`SCALE_BOUNDS`; None with fewer than
    :data:`SCALE_MIN_BATCHES` batches, or when it moved by at most :data:`SCALE_STEP` from
    ``current`` (plans change only for a real change, not for noise).
    """
    if len(batches) < SCALE_MIN_BATCHES:
        return None
    ratio = statistics.median(
        seconds / profile.latency(min(max(size, 1), profile.max_batch))
        for size, seconds in batches
    )
    scale = min(max(ratio, SCALE_BOUNDS[0]), SCALE_BOUNDS[1])
    if abs(scale / current - 1.0) <= SCALE_STEP:
        return None
    return scale
