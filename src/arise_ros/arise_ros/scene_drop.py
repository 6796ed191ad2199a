# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Scene drop rates measured on recorded sequences, for the fleet simulation's robots.

ARISE's accuracy model (``arise_ros.accuracy``) makes a tracked result's drop linear in the
tracking stride, with a per-scene *drop rate*. The plan-level simulation (``fleet_sim``)
gives every robot such a rate; this module measures them on AccuMO's generated sequences,
so that a simulated fleet can be drawn from scenes the project actually has.

Per sequence: the server net's map of frame ``f`` is warped (AccuMO's depth tracker, the
true pose change) to ``f + s`` for each stride ``s``, and scored against the server's map
of ``f + s`` (the dissertation's definition of a drop: relative to DNN inference, §3.4.3)
and against ground truth. The *drop curve* is the mean over source frames spread over the
sequence. The rate is the curve's slope from the reference stride (the reference setup's
result age; the SLA is a drop above it) to a far stride: two server maps of one scene
differ, so the curve jumps at stride 1, and that jump cancels against the reference.
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accumo_ros.metrics import depth_errors
from accumo_ros.tasks.depth_tracking import optical_relative_pose, warp_depth

TRUTHS = ('server', 'gt')
RATES_HEADER = ('sequence', 'category', 'rate_server', 'rate_gt')


def server_maps(folder: Path, name: str, rgb: np.ndarray, cache_root: Path) -> np.ndarray:
    """Return the server depth net's map of every frame of ``folder/name``.

    From AccuMO's evaluator cache (``cache_root/folder.name/name.npz``) where it is there,
    else computed with the trained server net (minutes on a CPU for a 20 s sequence).
    """
    cache = cache_root / folder.name / f'{name}.npz'
    if cache.is_file():
        with np.load(cache, allow_pickle=False) as stored:
            return stored['server']
    from accumo_ros.tasks.depth_nets import load_depth_net  # torch: only when needed

    return load_depth_net('server').predict(rgb)


class TrackedMapErrors:
    """AbsRel of the server map of ``source`` warped to ``frame``, memoised.

    ``sequence`` needs ``intrinsics``, ``depth`` (ground truth, N x H x W) and
    ``frame_poses()``; ``server`` holds the server net's map of every frame. One warp gives
    the error against ground truth and against the server's own map of ``frame``.
    """

    def __init__(self, sequence, server: np.ndarray) -> None:  # noqa: ANN001 - duck-typed
        if len(server) != len(sequence.depth):
            raise ValueError(
                f'{len(server)} server maps for a sequence of {len(sequence.depth)} frames'
            )
        self._sequence = sequence
        self._server = server
        self._poses = sequence.frame_poses()
        self._cache: dict[tuple[int, int], tuple[float, float]] = {}

    def __len__(self) -> int:
        return len(self._server)

    def __call__(self, source: int, frame: int) -> tuple[float, float]:
        """Return (AbsRel against ground truth, AbsRel against the server map) at ``frame``."""
        key = (source, frame)
        if key not in self._cache:
            warped = warp_depth(
                self._server[source],
                self._sequence.intrinsics,
                optical_relative_pose(self._poses[source], self._poses[frame]),
            )
            self._cache[key] = (
                depth_errors(warped, self._sequence.depth[frame]).abs_rel,
                depth_errors(warped, self._server[frame]).abs_rel,
            )
        return self._cache[key]


@dataclass(frozen=True)
class DropCurve:
    """Mean AbsRel of a tracked map by stride, against each truth."""

    strides: tuple[int, ...]
    server: tuple[float, ...]
    gt: tuple[float, ...]

    def at(self, stride: int, truth: str) -> float:
        """Return the mean AbsRel at ``stride`` against ``truth`` (one of ``TRUTHS``)."""
        if truth not in TRUTHS:
            raise ValueError(f'unknown truth {truth!r}; use one of {TRUTHS}')
        return getattr(self, truth)[self.strides.index(stride)]

    def rate(self, reference_stride: int, far_stride: int, truth: str) -> float:
        """Return the drop per frame of stride from ``reference_stride`` to ``far_stride``."""
        if far_stride <= reference_stride:
            raise ValueError('far_stride must be longer than reference_stride')
        rise = self.at(far_stride, truth) - self.at(reference_stride, truth)
        return rise / (far_stride - reference_stride)


def drop_curve(errors: TrackedMapErrors, strides: Sequence[int], sources: int = 25) -> DropCurve:
    """Measure the drop curve over ``sources`` source frames spread over the sequence."""
    strides = tuple(sorted(set(strides)))
    if not strides or strides[0] < 1:
        raise ValueError(f'strides must be positive, got {strides}')
    last_source = len(errors) - 1 - strides[-1]
    if last_source < 0:
        raise ValueError(
            f'a sequence of {len(errors)} frames is shorter than stride {strides[-1]}'
        )
    count = max(1, min(sources, last_source + 1))
    frames = np.unique(np.linspace(0, last_source, count).round().astype(int)).tolist()
    gt, server = [], []
    for stride in strides:
        pairs = [errors(source, source + stride) for source in frames]
        gt.append(statistics.fmean(pair[0] for pair in pairs))
        server.append(statistics.fmean(pair[1] for pair in pairs))
    return DropCurve(strides, tuple(server), tuple(gt))


@dataclass(frozen=True)
class SceneRate:
    """One sequence's measured drop rates (AbsRel per frame of stride)."""

    sequence: str
    category: str
    rate_server: float
    rate_gt: float


def write_rates(path: Path | str, rates: Iterable[SceneRate], comment: str = '') -> None:
    """Write ``rates`` as CSV; ``comment`` lines (how they were measured) go first, '#'-led."""
    with Path(path).open('w', newline='', encoding='utf-8') as stream:
        for line in comment.splitlines():
            stream.write(f'# {line}\n')
        writer = csv.writer(stream)
        writer.writerow(RATES_HEADER)
        for rate in rates:
            writer.writerow(
                (rate.sequence, rate.category, f'{rate.rate_server:.6f}', f'{rate.rate_gt:.6f}')
            )


def read_rates(path: Path | str, truth: str = 'server') -> tuple[float, ...]:
    """Read one truth's rates from a ``write_rates`` file; a clear error on a bad file."""
    if truth not in TRUTHS:
        raise ValueError(f'unknown truth {truth!r}; use one of {TRUTHS}')
    path = Path(path)
    with path.open(newline='', encoding='utf-8') as stream:
        rows = [line for line in stream if line.strip() and not line.startswith('#')]
    reader = csv.DictReader(rows)
    if reader.fieldnames is None or f'rate_{truth}' not in reader.fieldnames:
        raise ValueError(f'{path}: no rate_{truth} column (expected {", ".join(RATES_HEADER)})')
    rates = []
    for number, row in enumerate(reader, start=1):
        try:
            value = float(row[f'rate_{truth}'])
        except (TypeError, ValueError):
            raise ValueError(f'{path}: data row {number} has no number for rate_{truth}') from None
        if not value > 0.0:
            raise ValueError(
                f'{path}: data row {number}: a drop rate must be positive, got {value}'
            )
        rates.append(value)
    if not rates:
        raise ValueError(f'{path}: no rates')
    return tuple(rates)
