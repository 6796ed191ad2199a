# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO's depth tracker accuracy model: estimated versus true warping error, and timing.

Set-up (printed): synthetic sequences (``accumo_ros.simulation.sequence``) of each category,
several seeds, at the given size. For every start frame (every ``--start-step`` frames) and stride
(6, 9, 12, 18 by default) frame 1 is the "last offloaded" frame and frame 1 + stride the
current one. The server depth D_1 is frame 1's ground truth and the pose change the
ground-truth one, so the only error left is the tracker's own (moving objects, holes).
True error = AbsRel(D'_2 vs ground-truth D_2); estimated = AbsRel(D'_2 vs D''_2) of
``DepthTrackerAccuracyModel`` (DIS flow, ``--preset``). Prints the per-category and
per-stride means and Pearson correlations, and the median time per call of ``warp_depth``
and of the accuracy model on this CPU (OpenCV's default threads unless ``--threads``).
Writes the pairs as CSV, and a scatter plot when matplotlib is installed. Nothing is
asserted.

    python benchmarks/accumo_depth_tracker_model.py [--width 416 --height 128]
        [--duration-s 4] [--seeds 2] [--strides 6 9 12 18] [--output-dir results/accumo]
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import cv2
import numpy as np

from accumo_ros.metrics import depth_errors
from accumo_ros.simulation.sequence import CATEGORIES, SequenceConfig, SyntheticSequence
from accumo_ros.tasks.depth_tracking import (
    DepthTrackerAccuracyModel,
    optical_relative_pose,
    warp_depth,
)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT_DIR = ROOT / 'results' / 'accumo'
PRESETS = {
    'ultrafast': cv2.DISOPTICAL_FLOW_PRESET_ULTRAFAST,
    'fast': cv2.DISOPTICAL_FLOW_PRESET_FAST,
    'medium': cv2.DISOPTICAL_FLOW_PRESET_MEDIUM,
}


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    if x.size < 2 or np.std(x) == 0.0 or np.std(y) == 0.0:
        return float('nan')
    return float(np.corrcoef(x, y)[0, 1])


def _median_ms(function, repeats: int) -> float:
    function()  # warm-up: caches, DIS buffers
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return 1e3 * float(np.median(times))


def _scatter(rows: list[dict], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, axes = plt.subplots(figsize=(5.5, 5))
    for category in CATEGORIES:
        points = [r for r in rows if r['category'] == category]
        if points:
            axes.scatter(
                [r['true_abs_rel'] for r in points],
                [r['estimated_abs_rel'] for r in points],
                s=10,
                label=category,
            )
    top = max(max(r['true_abs_rel'], r['estimated_abs_rel']) for r in rows)
    axes.plot([0.0, top], [0.0, top], color='grey', linewidth=0.8, linestyle='--')
    axes.set_xlabel("true warping error AbsRel(D'_2, D_2)")
    axes.set_ylabel("estimated error AbsRel(D'_2, D''_2)")
    axes.set_title('AccuMO depth tracker accuracy model')
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--categories', nargs='+', default=list(CATEGORIES))
    parser.add_argument('--seeds', type=int, default=2, help='sequences per category')
    parser.add_argument('--duration-s', type=float, default=4.0)
    parser.add_argument('--width', type=int, default=416)
    parser.add_argument('--height', type=int, default=128)
    parser.add_argument('--strides', type=int, nargs='+', default=[6, 9, 12, 18])
    parser.add_argument('--start-step', type=int, default=20, help='frames between starts')
    parser.add_argument('--preset', choices=sorted(PRESETS), default='medium')
    parser.add_argument('--repeats', type=int, default=30, help='timed calls (median)')
    parser.add_argument('--threads', type=int, default=None, help='OpenCV threads')
    parser.add_argument('--output-dir', type=Path, default=DEFAULT_OUTPUT_DIR)
    args = parser.parse_args(argv)
    if args.threads is not None:
        cv2.setNumThreads(args.threads)
    unknown = set(args.categories) - set(CATEGORIES)
    if unknown:
        parser.error(f'unknown categories {sorted(unknown)}; use {CATEGORIES}')

    print(
        f'# AccuMO depth tracker accuracy model: {len(args.categories)} categories x '
        f'{args.seeds} seeds, {args.duration_s:g} s at {args.width}x{args.height}, strides '
        f'{args.strides}, a start every {args.start_step} frames; ground-truth D_1 and pose; '
        f'DIS preset {args.preset}; OpenCV {cv2.__version__}, {cv2.getNumThreads()} threads',
        flush=True,
    )
    rows: list[dict] = []
    timing_case = None
    for category in args.categories:
        for seed in range(args.seeds):
            config = SequenceConfig(
                seed=seed,
                category=category,
                duration_s=args.duration_s,
                width=args.width,
                height=args.height,
            )
            sequence = SyntheticSequence(config)
            model = DepthTrackerAccuracyModel(config.intrinsics, preset=PRESETS[args.preset])
            last_start = config.frame_count - 1 - max(args.strides)
            for start in range(0, last_start + 1, args.start_step):
                frame_1 = sequence.frame(start)
                for stride in args.strides:
                    frame_2 = sequence.frame(start + stride)
                    pose = optical_relative_pose(frame_1.pose, frame_2.pose)
                    estimate = model.estimate(
                        frame_1.rendered.rgb,
                        frame_1.rendered.depth,
                        frame_2.rendered.rgb,
                        pose,
                        stride,
                    )
                    true = depth_errors(estimate.warped_depth, frame_2.rendered.depth).abs_rel
                    rows.append(
                        {
                            'category': category,
                            'seed': seed,
                            'start': start,
                            'stride': stride,
                            'dynamic_share': float(
                                frame_2.rendered.dynamic_mask(sequence.scene).mean()
                            ),
                            'true_abs_rel': true,
                            'estimated_abs_rel': estimate.error,
                        }
                    )
                    if timing_case is None and stride == max(args.strides):
                        timing_case = (model, frame_1, frame_2, pose, stride)
    if not rows:
        print('no frame pairs: make the sequences longer than the largest stride')
        return 2

    print()
    print('| category | pairs | mean true AbsRel | mean estimated | Pearson r |')
    print('|---|---|---|---|---|')
    for label in [*args.categories, 'all']:
        selected = [r for r in rows if label in ('all', r['category'])]
        true = np.array([r['true_abs_rel'] for r in selected])
        estimated = np.array([r['estimated_abs_rel'] for r in selected])
        print(
            f'| {label} | {len(selected)} | {true.mean():.4f} | {estimated.mean():.4f} | '
            f'{_pearson(true, estimated):.3f} |'
        )
    print()
    print('| stride | mean true AbsRel | mean estimated | mean true / stride | Pearson r |')
    print('|---|---|---|---|---|')
    for stride in args.strides:
        selected = [r for r in rows if r['stride'] == stride]
        true = np.array([r['true_abs_rel'] for r in selected])
        estimated = np.array([r['estimated_abs_rel'] for r in selected])
        print(
            f'| {stride} | {true.mean():.4f} | {estimated.mean():.4f} | '
            f'{true.mean() / stride:.5f} | {_pearson(true, estimated):.3f} |'
        )

    model, frame_1, frame_2, pose, stride = timing_case
    intrinsics = model.intrinsics
    warp_ms = _median_ms(
        lambda: warp_depth(frame_1.rendered.depth, intrinsics, pose), args.repeats
    )
    model_ms = _median_ms(
        lambda: model.estimate(
            frame_1.rendered.rgb, frame_1.rendered.depth, frame_2.rendered.rgb, pose, stride
        ),
        args.repeats,
    )
    print()
    print(
        f'median of {args.repeats} calls at {args.width}x{args.height}: warp_depth '
        f'{warp_ms:.2f} ms, accuracy model (warp + DIS + move + AbsRel) {model_ms:.2f} ms'
    )

    args.output_dir.mkdir(parents=True, exist_ok=True)
    table = args.output_dir / 'depth_tracker_model.csv'
    with table.open('w', newline='') as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f'wrote {table}')
    plot = args.output_dir / 'depth_tracker_model.png'
    if _scatter(rows, plot):
        print(f'wrote {plot}')
    else:
        print('matplotlib is not installed: no scatter plot')
    return 0


if __name__ == '__main__':
    sys.exit(main())
