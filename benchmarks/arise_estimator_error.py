# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""ARISE's accuracy estimators against the actual drop, per sequence and SLA (Fig. 3.21).

Set-up (printed): AccuMO's generated sequences (60 fps, 416x128, ground-truth depth and
poses; ``accumo_generate`` makes them), the trained server depth net's maps (the
evaluator's cache, or computed), AccuMO's depth tracker (forward warping with the true
pose change). One robot per sequence runs ARISE's client loop: a result for frame f is
back ``--e2e`` frames later; each new result updates the drop rate (the tracked map of
that frame against the server's map of it, over the stride: Fig. 3.9), and Step 1's
closed form picks the next interval for the SLA. Per frame, the estimated drop is
``rate × stride - rate × e2e_ref`` and the actual drop is AbsRel(tracked map, ground
truth) minus AbsRel(reference map, ground truth), the reference being a dedicated server
(every frame, ``--e2e-ref`` frames late). Reported: the sequence's mean estimated and
actual drop, the error |estimated - actual| as a share of the SLA, and whether the actual
drop met the SLA. Nothing is asserted.

``--estimator`` takes one name or a comma-separated list (``all``: the four; by default
``single,probed``), printed side by side: ``single`` (the dissertation's drop / stride),
``two-point`` (the slope between the tracked maps from the last two results), ``regression``
(:class:`StrideRegressionEstimator`: a line with an intercept through the pairs of the last
``--regression-maps`` results' tracked maps, the last ``--regression-history`` pairs) and
``probed`` (:class:`ProbedDropRateEstimator`: every ``--probe-every``-th offload brings an
extra one ``--e2e-ref`` frames later, which measures the reference's own drop; the rate is
the chord from it; the share of extra offloads is printed). ``known`` is no estimator: the
robot is given its sequence's chord of the drop curve (from the reference stride to 12
frames, measured offline over 40 source frames) and never updates it, which shows the error
that the loop and a scene's changes leave even with the rate known.

``--truth`` picks what the actual drop is measured against: ``gt`` (the ground-truth depth,
as above) or ``server`` (the server net's map of each frame, which is how the dissertation
words it: drops "relative to DNN inference", §3.4.3); the summary shows both. Each warp is
computed once per sequence and shared by the estimators and SLAs.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

from accumo_ros.simulation.dataset import load_index
from accumo_ros.simulation.sequence_bag import read_sequence_bag
from arise_ros.accuracy import (
    DropRateEstimator,
    ProbedDropRateEstimator,
    Reference,
    StrideRegressionEstimator,
    mean_stride,
)
from arise_ros.scene_drop import TrackedMapErrors, drop_curve, server_maps

ESTIMATORS = ('single', 'two-point', 'regression', 'probed')
# Not an estimator: the sequence's own drop curve, measured offline (the bound any online
# estimator of a constant rate works against).
KNOWN = 'known'


def _longest_interval(rate: float, e2e: int, sla: float, reference: Reference, cap: int) -> int:
    if rate <= 0:
        return cap
    bound = 2.0 * (sla + reference.drop(rate)) / rate - 2.0 * e2e + 1.0
    return max(1, min(cap, math.floor(bound)))


class _DropLog:
    """A robot's estimated and actual drop on each frame, against both truths."""

    def __init__(self, pair_errors: TrackedMapErrors, reference: Reference) -> None:
        self._pair_errors = pair_errors
        self._reference = reference
        self._estimated: list[float] = []
        self._actual_gt: list[float] = []
        self._actual_server: list[float] = []

    def add(self, rate: float, source: int, frame: int) -> None:
        """Log ``frame`` shown from the result of ``source``, with the robot's ``rate``."""
        self._estimated.append(rate * (frame - source) - self._reference.drop(rate))
        tracked_gt, tracked_server = self._pair_errors(source, frame)
        reference_gt, reference_server = self._pair_errors(
            frame - self._reference.e2e_frames, frame
        )
        self._actual_gt.append(tracked_gt - reference_gt)
        self._actual_server.append(tracked_server - reference_server)

    def means(self) -> dict[str, float]:
        """Return the mean estimated drop and the mean actual drops."""
        return {
            'estimated': statistics.fmean(self._estimated),
            'actual': statistics.fmean(self._actual_gt),
            'actual_server': statistics.fmean(self._actual_server),
        }


def run_sequence(
    sequence,
    server,
    sla,
    e2e,
    e2e_ref,
    first_interval,
    max_interval,
    estimator_name='single',
    pair_errors=None,
    regression_maps=3,
    regression_history=12,
    regression_min_fraction=0.0,
    probe_every=8,
):
    """Run one robot's loop; returns the mean estimated and actual drops (both truths)."""
    if estimator_name not in (*ESTIMATORS, KNOWN):
        raise ValueError(f'unknown estimator {estimator_name!r}, expected one of {ESTIMATORS}')
    count = len(server)
    pair_errors = pair_errors or TrackedMapErrors(sequence, server)
    if estimator_name == KNOWN:
        # The chord of the sequence's drop curve from the reference stride to 12 frames.
        curve = drop_curve(pair_errors, (e2e_ref, 12), sources=40)
        known_rate = curve.rate(e2e_ref, 12, 'server')
    if estimator_name == 'probed':
        return run_probed_sequence(
            server, sla, e2e, e2e_ref, first_interval, max_interval, pair_errors, probe_every
        )

    def against_server(source: int, frame: int) -> float:
        return pair_errors(source, frame)[1]

    reference = Reference(e2e_ref, 1)
    estimator = (
        StrideRegressionEstimator(history=regression_history, min_fraction=regression_min_fraction)
        if estimator_name == 'regression'
        else DropRateEstimator()
    )
    offloads = [0]
    interval = first_interval
    if estimator_name == KNOWN:
        estimator = DropRateEstimator(initial_rate=known_rate)
        interval = _longest_interval(known_rate, e2e, sla, reference, max_interval)
    drops = _DropLog(pair_errors, reference)
    results: list[int] = []  # the offloaded frames whose results are back, oldest first
    for frame in range(count):
        # results due now
        due = [f for f in offloads[-4:] if f + e2e == frame]
        for source in due:
            if results and source > results[-1] and estimator_name != KNOWN:
                # Fig. 3.9: the tracked map of `source` (from the previous result) against
                # the server's map of `source`, over the stride between them.
                stride = source - results[-1]
                drop = against_server(results[-1], source)
                if estimator_name == 'two-point' and len(results) >= 2:
                    far = against_server(results[-2], source)
                    estimator.observe_two(drop, stride, far, source - results[-2])
                elif estimator_name == 'regression':
                    estimator.observe_pairs(
                        (against_server(old, source), source - old)
                        for old in results[-regression_maps:]
                    )
                else:
                    estimator.observe(drop, stride)
                interval = _longest_interval(estimator.rate, e2e, sla, reference, max_interval)
            results = (results + [source])[-max(2, regression_maps) :]
        if frame >= offloads[-1] + interval:
            offloads.append(frame)
        if not results or frame < e2e_ref or estimator.rate is None:
            continue
        drops.add(estimator.rate, results[-1], frame)
    return {
        **drops.means(),
        'offloads': len(offloads),
        'mean_interval': count / len(offloads),
        'regular_estimate': (estimator.rate or 0.0) * mean_stride(e2e, interval)
        - reference.drop(estimator.rate or 0.0),
        'extra_offloads': 0.0,
    }


def run_probed_sequence(
    server, sla, e2e, e2e_ref, first_interval, max_interval, pair_errors, probe_every
):
    """Run one robot's loop with :class:`ProbedDropRateEstimator` and its probe offloads.

    A probe is sent ``e2e_ref`` frames after the offload it goes with (the reference's
    stride) and comes back ``e2e`` frames after capture like any result; it is used for
    tracking too. The interval counts from the regular offloads.
    """
    count = len(server)
    reference = Reference(e2e_ref, 1)
    estimator = ProbedDropRateEstimator(reference_stride=e2e_ref, probe_every=probe_every)
    regular, sent, probes = [0], [0], set()
    interval = first_interval
    results: list[int] = []  # every result back, probes included, oldest first
    regular_results: list[int] = []  # the regular offloads' results back, oldest first
    drops = _DropLog(pair_errors, reference)
    for frame in range(count):
        for source in [f for f in sent[-8:] if f + e2e == frame]:
            if source in probes:
                if regular_results and source - regular_results[-1] == e2e_ref:
                    estimator.observe_probe(pair_errors(regular_results[-1], source)[1])
            else:
                if regular_results:
                    # The earlier results within the estimator's range, and the newest one.
                    tracked = [
                        old
                        for old in regular_results[:-1]
                        if source - old <= estimator.longest_stride
                    ] + regular_results[-1:]
                    estimator.observe_result(
                        (pair_errors(old, source)[1], source - old) for old in tracked
                    )
                    interval = _longest_interval(estimator.rate, e2e, sla, reference, max_interval)
                regular_results = (regular_results + [source])[-6:]
            results = (results + [source])[-8:]
        if frame >= regular[-1] + interval:
            regular.append(frame)
            sent.append(frame)
            if estimator.wants_probe(len(regular), interval):
                probes.add(frame + e2e_ref)
                sent.append(frame + e2e_ref)
        if not results or frame < e2e_ref or estimator.rate is None:
            continue
        drops.add(estimator.rate, results[-1], frame)
    return {
        **drops.means(),
        'offloads': len(sent),
        'mean_interval': count / len(regular),
        'regular_estimate': estimator.rate * mean_stride(e2e, interval)
        - reference.drop(estimator.rate),
        'extra_offloads': len(probes) / len(regular),
    }


def _estimators(text: str) -> list[str]:
    names = list(ESTIMATORS) if text == 'all' else [v.strip() for v in text.split(',')]
    for name in names:
        if name not in (*ESTIMATORS, KNOWN):
            raise argparse.ArgumentTypeError(
                f'unknown estimator {name!r}; expected all or some of '
                f'{", ".join((*ESTIMATORS, KNOWN))}'
            )
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('datasets', nargs='+', type=Path, help='accumo_generate folders')
    parser.add_argument('--slas', default='0.02,0.04,0.06')
    parser.add_argument('--e2e', type=int, default=3, help='frames to a result (60 fps)')
    parser.add_argument('--e2e-ref', type=int, default=2, help='the reference setup')
    parser.add_argument('--first-interval', type=int, default=4)
    parser.add_argument('--max-interval', type=int, default=30)
    parser.add_argument('--cache', type=Path, default=Path('results/accumo_depth_cache'))
    parser.add_argument(
        '--estimator',
        type=_estimators,
        default=['single', 'probed'],
        help="comma-separated, or all: single (the dissertation's drop / stride), two-point "
        '(the slope between the tracked maps from the last two results), regression (a '
        'line with an intercept through the pairs of the last results; see --regression-*), '
        'probed (the chord from the drop at the reference stride, measured by probes; see '
        "--probe-every); also known (not in all: the sequence's measured drop curve, fixed). "
        'Default: single,probed',
    )
    parser.add_argument(
        '--regression-maps',
        type=int,
        default=3,
        help='regression: how many earlier results are tracked to each new result',
    )
    parser.add_argument(
        '--regression-history', type=int, default=12, help='regression: pairs kept'
    )
    parser.add_argument(
        '--regression-min-fraction',
        type=float,
        default=0.0,
        help='regression: the rate is at least this share of the line through the origin',
    )
    parser.add_argument(
        '--truth',
        choices=('gt', 'server'),
        default='gt',
        help='the actual drop in the per-sequence rows: against ground-truth depth, or '
        "against the server's map of each frame (the dissertation's wording)",
    )
    parser.add_argument(
        '--probe-every',
        type=int,
        default=8,
        help='probed: every this many offloads brings a probe (an extra offload of the frame '
        '--e2e-ref frames later)',
    )
    args = parser.parse_args(argv)
    if args.regression_maps < 1:
        parser.error('--regression-maps must be >= 1')
    if args.probe_every < 1:
        parser.error('--probe-every must be >= 1')
    slas = [float(v) for v in args.slas.split(',')]
    names = args.estimator
    print(
        f'set-up: results back {args.e2e} frames after capture, reference {args.e2e_ref} '
        f'frames (every frame, dedicated server); first interval {args.first_interval}, '
        f'at most {args.max_interval}; drop = AbsRel against '
        f'{"ground truth" if args.truth == "gt" else "the server map of the frame"}; '
        f'estimators {", ".join(names)} (regression: {args.regression_maps} maps, '
        f'{args.regression_history} pairs, at least {args.regression_min_fraction:g} of the '
        'line through the origin)'
    )
    truth_key = {'gt': 'actual', 'server': 'actual_server'}
    header = ' | '.join(
        f'{n} interval | {n} estimated | {n} actual | {n} error / SLA | {n} met' for n in names
    )
    print(f'\n| SLA | sequence | category | {header} |')
    print('|---|---|---|' + '---|' * (5 * len(names)))
    errors = {(t, n, sla): [] for t in truth_key for n in names for sla in slas}
    met = {(t, n, sla): [] for t in truth_key for n in names for sla in slas}
    extra = {n: [] for n in names}
    started = time.monotonic()
    for folder in args.datasets:
        for entry in load_index(folder):
            path = folder / entry.name
            sequence = read_sequence_bag(path)
            server = server_maps(folder, entry.name, sequence.rgb, args.cache)
            pair_errors = TrackedMapErrors(sequence, server)
            for sla in slas:
                cells = []
                for name in names:
                    row = run_sequence(
                        sequence,
                        server,
                        sla,
                        args.e2e,
                        args.e2e_ref,
                        args.first_interval,
                        args.max_interval,
                        estimator_name=name,
                        pair_errors=pair_errors,
                        regression_maps=args.regression_maps,
                        regression_history=args.regression_history,
                        regression_min_fraction=args.regression_min_fraction,
                        probe_every=args.probe_every,
                    )
                    extra[name].append(row['extra_offloads'])
                    for truth, key in truth_key.items():
                        errors[truth, name, sla].append(abs(row['estimated'] - row[key]) / sla)
                        met[truth, name, sla].append(row[key] <= sla)
                    actual = row[truth_key[args.truth]]
                    cells.append(
                        f'{row["mean_interval"]:.1f} | {row["estimated"]:.4f} | {actual:.4f} | '
                        f'{100 * abs(row["estimated"] - actual) / sla:.0f} % | '
                        f'{"yes" if actual <= sla else "no"}'
                    )
                print(
                    f'| {sla:g} | {folder.name}/{entry.name} | {sequence.category} | '
                    + ' | '.join(cells)
                    + ' |',
                    flush=True,
                )
    print(f'\nruntime: {time.monotonic() - started:.0f} s')
    header = ' | '.join(
        f'{n} mean error / SLA | {n} max error / SLA | {n} met the SLA' for n in names
    )
    print(f'\n| drop against | SLA | sequences | {header} |')
    print('|---|---|---|' + '---|' * (3 * len(names)))
    for truth in truth_key:
        for sla in slas:
            cells = []
            for name in names:
                values = errors[truth, name, sla]
                cells.append(
                    f'{100 * statistics.fmean(values):.0f} % | {100 * max(values):.0f} % | '
                    f'{sum(met[truth, name, sla])} of {len(values)}'
                )
            print(
                f'| {"ground truth" if truth == "gt" else "server map"} | {sla:g} | '
                f'{len(errors[truth, names[0], sla])} | ' + ' | '.join(cells) + ' |'
            )
    if 'probed' in names:
        print(
            f'\nprobed: probes added {100 * statistics.fmean(extra["probed"]):.1f} % to the '
            f'offloads (every {args.probe_every}th offload while the interval is over '
            f'{args.e2e_ref} frames)'
        )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
