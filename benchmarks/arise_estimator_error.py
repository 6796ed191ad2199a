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

``--estimator`` takes one name or a comma-separated list (``all``: the three), printed side by
side: ``single`` (the dissertation's drop / stride), ``two-point`` (the slope between the
tracked maps from the last two results) and ``regression`` (:class:`StrideRegressionEstimator`:
a line with an intercept through the pairs of the last ``--regression-maps`` results' tracked
maps, the last ``--regression-history`` pairs). ``--truth`` picks what the actual drop is
measured against: ``gt`` (the ground-truth depth, as above) or ``server`` (the server net's
map of each frame, which is how the dissertation words it: drops "relative to DNN
inference", §3.4.3); the summary shows both. Each warp is computed once per sequence and
shared by the estimators and SLAs.
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
    Reference,
    StrideRegressionEstimator,
    mean_stride,
)
from arise_ros.scene_drop import TrackedMapErrors, server_maps

ESTIMATORS = ('single', 'two-point', 'regression')


def _longest_interval(rate: float, e2e: int, sla: float, reference: Reference, cap: int) -> int:
    if rate <= 0:
        return cap
    bound = 2.0 * (sla + reference.drop(rate)) / rate - 2.0 * e2e + 1.0
    return max(1, min(cap, math.floor(bound)))


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
):
    """Run one robot's loop; returns the mean estimated and actual drops (both truths)."""
    if estimator_name not in ESTIMATORS:
        raise ValueError(f'unknown estimator {estimator_name!r}, expected one of {ESTIMATORS}')
    count = len(server)
    pair_errors = pair_errors or TrackedMapErrors(sequence, server)

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
    estimated, actual_gt, actual_server = [], [], []
    results: list[int] = []  # the offloaded frames whose results are back, oldest first
    for frame in range(count):
        # results due now
        due = [f for f in offloads[-4:] if f + e2e == frame]
        for source in due:
            if results and source > results[-1]:
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
        stride = frame - results[-1]
        estimated.append(estimator.rate * stride - reference.drop(estimator.rate))
        tracked_gt, tracked_server = pair_errors(results[-1], frame)
        reference_gt, reference_server = pair_errors(frame - e2e_ref, frame)
        actual_gt.append(tracked_gt - reference_gt)
        actual_server.append(tracked_server - reference_server)
    return {
        'estimated': statistics.fmean(estimated),
        'actual': statistics.fmean(actual_gt),
        'actual_server': statistics.fmean(actual_server),
        'offloads': len(offloads),
        'mean_interval': count / len(offloads),
        'regular_estimate': (estimator.rate or 0.0) * mean_stride(e2e, interval)
        - reference.drop(estimator.rate or 0.0),
    }


def _estimators(text: str) -> list[str]:
    names = list(ESTIMATORS) if text == 'all' else [v.strip() for v in text.split(',')]
    for name in names:
        if name not in ESTIMATORS:
            raise argparse.ArgumentTypeError(
                f'unknown estimator {name!r}; expected all or some of {", ".join(ESTIMATORS)}'
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
        default=['single'],
        help="comma-separated, or all: single (the dissertation's drop / stride), two-point "
        '(the slope between the tracked maps from the last two results), regression (a '
        'line with an intercept through the pairs of the last results; see --regression-*)',
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
    args = parser.parse_args(argv)
    if args.regression_maps < 1:
        parser.error('--regression-maps must be >= 1')
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
                    )
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
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
