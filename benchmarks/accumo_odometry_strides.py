# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Fused odometry t_err against the VO offload stride: which strides cost nothing measurable.

The odometry accuracy model (``accumo_ros.tasks.odometry_model``) measures the drop of
raising the stride from ``base_stride`` to ``raised_stride``; the scheduler counts strides
below ``base_stride`` as free. This script measures where that is true: on the chosen
split of a set it runs the robot's odometry filter (ESKF + server VO, the pipeline's
settings, poses fused ``--latency`` frames late) with VO every ``s`` frames for each
stride ``s``, and prints per stride the mean Kalman + VO t_err, per category, and the
increase over the shortest stride paired by sequence (mean, its standard error, how many
sequences got worse). It names the largest stride below the first that costs measurably
(:func:`accumo_ros.tasks.odometry_model.measured_free_stride`): the base stride to fit the
model at, with a raised stride past it (``accumo_odometry_eval --fit --base-stride B
--raised-stride R --window-frames 2R``).
Fit on the calibration set, never on a test set. ``--results`` prints the table again from
a saved ``--output`` without measuring. Nothing is asserted.

    python benchmarks/accumo_odometry_strides.py --dataset results/accumo_calib \
        --split train --latency 14 --strides 15,21,28,42,56
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from accumo_ros.metrics import kitti_errors
from accumo_ros.simulation.dataset import split_paths
from accumo_ros.simulation.sequence_bag import read_sequence_bag
from accumo_ros.tasks.odometry_model import measured_free_stride
from accumo_ros.tasks.visual_odometry import KeyframePolicy
from accumo_ros.tools.odometry_eval import (
    SEGMENT_STEP,
    FusedOdometryRun,
    VoCache,
    add_vo_prior_argument,
    depth_source,
    imu_noise_of,
    periodic_offloads,
    vo_prior_flags,
)


def measure(
    dataset: Path, split: str, latency: int, strides: list[int], vo_prior: str = 'motion'
) -> tuple[dict[str, dict[int, float]], dict[str, str]]:
    """Return each sequence's Kalman + VO t_err per stride, and each sequence's category.

    ``vo_prior`` as the evaluators' ``--vo-prior``: the VO the robot runs, so that the free
    stride is measured for it.
    """
    net_depth = depth_source('server')
    table: dict[str, dict[int, float]] = {}
    categories: dict[str, str] = {}
    for path in split_paths(dataset, split):
        sequence = read_sequence_bag(path)
        maps: dict[int, np.ndarray] = {}  # each frame's server depth once, for every stride

        def cached_depth(seq, index, maps=maps):  # noqa: ANN001, ANN202
            if index not in maps:
                maps[index] = net_depth(seq, index)
            return maps[index]

        vo = VoCache(sequence, cached_depth, **vo_prior_flags(vo_prior))
        truth = sequence.frame_poses()
        categories[path.name] = sequence.category
        table[path.name] = {}
        for stride in strides:
            run = FusedOdometryRun(
                sequence,
                vo,
                periodic_offloads(len(truth), stride),
                latency,
                imu_noise_of(sequence),
                KeyframePolicy(),
            )
            run.run_to(len(truth))
            table[path.name][stride] = kitti_errors(truth, run.poses, step=SEGMENT_STEP).t_err
        row = ' '.join(f'{100 * table[path.name][s]:6.2f}' for s in strides)
        print(f'{path.name:13s} {sequence.category:10s} {row}', flush=True)
    return table, categories


def report(
    table: dict[str, dict[int, float]], categories: dict[str, str], tolerance: float
) -> int:
    """Print the per-stride table; return the free stride (measured_free_stride)."""
    names = list(table)
    strides = sorted(next(iter(table.values())))
    shortest = strides[0]
    reference = float(np.mean([table[n][shortest] for n in names]))
    increases: dict[int, float] = {}
    cats = sorted(set(categories.values()))
    print(
        '\n| stride | mean t_err | '
        + ' | '.join(cats)
        + f' | increase over {shortest}: median | mean ± s.e. | sequences worse |'
    )
    print('|---|---|' + '---|' * len(cats) + '---|---|---|')
    for stride in strides:
        by_category = defaultdict(list)
        for n in names:
            by_category[categories[n]].append(table[n][stride])
        paired = np.array([table[n][stride] - table[n][shortest] for n in names])
        error = float(paired.std(ddof=1) / np.sqrt(paired.size)) if paired.size > 1 else 0.0
        increases[stride] = float(np.median(paired))
        print(
            f'| {stride} | {100 * np.mean([table[n][stride] for n in names]):.2f} % | '
            + ' | '.join(f'{100 * np.mean(by_category[c]):.2f} %' for c in cats)
            + f' | {100 * increases[stride]:+.2f} pp | {100 * paired.mean():+.2f} '
            f'± {100 * error:.2f} pp | {int((paired > 0).sum())} of {paired.size} |'
        )
    chosen = measured_free_stride(increases, reference, tolerance)
    print(
        f'\nfree stride (the largest below the first whose median increase is above '
        f"{100 * tolerance:.0f} % of stride {shortest}'s t_err, {100 * reference:.2f} %): {chosen}"
    )
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dataset', type=Path, help='accumo_generate folder')
    parser.add_argument('--split', choices=('train', 'heldout'), default='train')
    parser.add_argument('--latency', type=int, default=14, help='frames until a pose is back')
    parser.add_argument('--strides', default='15,21,28,42,56', help='VO strides')
    parser.add_argument(
        '--tolerance',
        type=float,
        default=0.1,
        help="median increase over the shortest stride's t_err that still counts as free",
    )
    add_vo_prior_argument(parser)
    parser.add_argument('--output', type=Path, help='JSON of every sequence and stride')
    parser.add_argument('--results', type=Path, help='print the table of a saved --output')
    args = parser.parse_args(argv)
    if args.results is not None:
        saved = json.loads(args.results.read_text())
        table = {n: {int(s): v for s, v in row.items()} for n, row in saved['t_err'].items()}
        print(f'{args.results}: latency {saved["latency"]} frames, strides {saved["strides"]}')
        report(table, saved['categories'], args.tolerance)
        return 0
    if args.dataset is None:
        parser.error('--dataset is required (or --results)')
    strides = sorted(int(s) for s in args.strides.split(','))
    if strides[0] <= args.latency:
        parser.error('every stride must exceed the latency (one pose in flight at a time)')
    print(
        f'Kalman + VO t_err on the {args.split} split of {args.dataset}: server VO with the '
        f'{args.vo_prior} prior, poses fused {args.latency} frames late (60 FPS), the '
        f"pipeline's filter settings; strides {strides}"
    )
    table, categories = measure(args.dataset, args.split, args.latency, strides, args.vo_prior)
    chosen = report(table, categories, args.tolerance)
    if args.output:
        document = {
            'latency': args.latency,
            'vo_prior': args.vo_prior,
            'strides': strides,
            't_err': table,
            'categories': categories,
            'free_stride': chosen,
        }
        args.output.write_text(json.dumps(document, indent=2))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
