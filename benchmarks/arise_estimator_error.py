# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""ARISE's accuracy estimator against ground truth, per sequence and SLA (Fig. 3.21).

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
"""

from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path

import numpy as np

from accumo_ros.metrics import depth_errors
from accumo_ros.simulation.dataset import load_index
from accumo_ros.simulation.sequence_bag import read_sequence_bag
from accumo_ros.tasks.depth_tracking import optical_relative_pose, warp_depth
from arise_ros.accuracy import DropRateEstimator, Reference, mean_stride


def _server_depth(folder: Path, name: str, rgb: np.ndarray, cache_root: Path) -> np.ndarray:
    cache = cache_root / folder.name / f'{name}.npz'
    if cache.is_file():
        return np.load(cache)['server']
    from accumo_ros.tasks.depth_nets import load_depth_net

    return load_depth_net('server').predict(rgb)


def _longest_interval(rate: float, e2e: int, sla: float, reference: Reference, cap: int) -> int:
    if rate <= 0:
        return cap
    bound = 2.0 * (sla + reference.drop(rate)) / rate - 2.0 * e2e + 1.0
    return max(1, min(cap, math.floor(bound)))


def run_sequence(
    sequence, server, sla, e2e, e2e_ref, first_interval, max_interval, two_point=False
):
    poses = sequence.frame_poses()
    count = len(server)

    def tracked(source: int, frame: int) -> np.ndarray:
        return warp_depth(
            server[source], sequence.intrinsics, optical_relative_pose(poses[source], poses[frame])
        )

    def error(depth: np.ndarray, frame: int) -> float:
        return depth_errors(depth, sequence.depth[frame]).abs_rel

    reference = Reference(e2e_ref, 1)
    reference_error = {
        frame: error(tracked(frame - e2e_ref, frame), frame) for frame in range(e2e_ref, count)
    }
    estimator = DropRateEstimator()
    offloads = [0]
    interval = first_interval
    estimated, actual = [], []
    frame_of_result = None  # the newest offloaded frame whose result is back
    previous_result = None  # the one before it
    for frame in range(count):
        # results due now
        due = [f for f in offloads[-4:] if f + e2e == frame]
        for source in due:
            if frame_of_result is not None and source > frame_of_result:
                # Fig. 3.9: the tracked map of `source` (from the previous result) against
                # the server's map of `source`, over the stride between them.
                stride = source - frame_of_result
                drop = depth_errors(tracked(frame_of_result, source), server[source]).abs_rel
                if two_point and previous_result is not None:
                    far = depth_errors(tracked(previous_result, source), server[source]).abs_rel
                    estimator.observe_two(drop, stride, far, source - previous_result)
                else:
                    estimator.observe(drop, stride)
                interval = _longest_interval(estimator.rate, e2e, sla, reference, max_interval)
            previous_result, frame_of_result = frame_of_result, source
        if frame >= offloads[-1] + interval:
            offloads.append(frame)
        if frame_of_result is None or frame < e2e_ref or estimator.rate is None:
            continue
        stride = frame - frame_of_result
        estimated.append(estimator.rate * stride - reference.drop(estimator.rate))
        actual.append(error(tracked(frame_of_result, frame), frame) - reference_error[frame])
    return {
        'estimated': statistics.fmean(estimated),
        'actual': statistics.fmean(actual),
        'offloads': len(offloads),
        'mean_interval': count / len(offloads),
        'regular_estimate': (estimator.rate or 0.0) * mean_stride(e2e, interval)
        - reference.drop(estimator.rate or 0.0),
    }


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
        choices=('single', 'two-point'),
        default='single',
        help="single: the dissertation's drop / stride; two-point: the slope between the "
        'tracked maps from the last two results',
    )
    args = parser.parse_args(argv)
    slas = [float(v) for v in args.slas.split(',')]
    print(
        f'set-up: results back {args.e2e} frames after capture, reference {args.e2e_ref} '
        f'frames (every frame, dedicated server); first interval {args.first_interval}, '
        f'at most {args.max_interval}; drop = AbsRel against ground truth; estimator '
        f'{args.estimator}'
    )
    print('\n| SLA | sequence | category | interval | estimated | actual | error / SLA | met |')
    print('|---|---|---|---|---|---|---|---|')
    errors: dict[float, list[float]] = {sla: [] for sla in slas}
    met: dict[float, list[bool]] = {sla: [] for sla in slas}
    for folder in args.datasets:
        for entry in load_index(folder):
            path = folder / entry.name
            sequence = read_sequence_bag(path)
            server = _server_depth(folder, entry.name, sequence.rgb, args.cache)
            for sla in slas:
                row = run_sequence(
                    sequence,
                    server,
                    sla,
                    args.e2e,
                    args.e2e_ref,
                    args.first_interval,
                    args.max_interval,
                    two_point=args.estimator == 'two-point',
                )
                error = abs(row['estimated'] - row['actual']) / sla
                errors[sla].append(error)
                met[sla].append(row['actual'] <= sla)
                print(
                    f'| {sla:g} | {folder.name}/{entry.name} | {sequence.category} | '
                    f'{row["mean_interval"]:.1f} | {row["estimated"]:.4f} | {row["actual"]:.4f} '
                    f'| {100 * error:.0f} % | {"yes" if row["actual"] <= sla else "no"} |',
                    flush=True,
                )
    print('\n| SLA | sequences | mean error / SLA | max error / SLA | actual drop met the SLA |')
    print('|---|---|---|---|---|')
    for sla in slas:
        values = errors[sla]
        print(
            f'| {sla:g} | {len(values)} | {100 * statistics.fmean(values):.0f} % | '
            f'{100 * max(values):.0f} % | {sum(met[sla])} of {len(met[sla])} |'
        )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
