# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Batch inference latency of one model on one server, by batch size (ARISE's ``lat_bs``).

A profile is measured on the server that will use it (``measure_profile``) or loaded from a
YAML file measured elsewhere, e.g. on a GPU server (``load_profile``). The scheduler only
reads it; it never guesses a latency for a batch size the profile does not hold.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
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
) -> BatchLatencyProfile:
    """Time ``run_batch(n)`` for n = 1..max_batch and keep the median of ``repeats`` runs.

    The median, not the mean: one preempted run on a shared machine should not make a batch
    size look slower than it is. Latencies are made non-decreasing in the batch size, since
    the server can always run a smaller batch padded to a larger one's cost.
    """
    import statistics
    import time

    if max_batch < 1 or repeats < 1 or warmup < 0:
        raise ProfileError('max_batch and repeats must be at least 1, warmup at least 0')
    clock = clock or time.perf_counter
    medians = []
    for size in range(1, max_batch + 1):
        for _ in range(warmup):
            run_batch(size)
        samples = []
        for _ in range(repeats):
            start = clock()
            run_batch(size)
            samples.append(clock() - start)
        medians.append(statistics.median(samples))
    for index in range(1, len(medians)):
        medians[index] = max(medians[index], medians[index - 1])
    return BatchLatencyProfile(
        model, {size: medians[size - 1] for size in range(1, max_batch + 1)}, source
    )
