# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO's depth drop models against the true drop, on the held-out split, with the nets.

Set-up (printed): the held-out sequences of a data set made by ``accumo_generate``, the
packaged server and lite depth nets (``accumo_ros.tasks.depth_nets``), CPU.

* **Depth tracker model** (spec §2.4): for start frames every ``--start-step`` frames and
  strides 6, 9, 12 and 18, frame 1 is the last offloaded frame with the server net's depth
  D_1 and frame 1 + stride the current one; the pose change is the IMU integrated from the
  fused filter's state at frame 1 (as on the robot:
  ``accumo_ros.scheduler.pipeline.ImuPoseChange``;
  the filter fuses server-depth keyframe VO every 8 frames, 4 frames late). True error:
  AbsRel(D'_2 vs ground truth); estimated: AbsRel(D'_2 vs D''_2) (DIS flow).
* **Local-algorithm (lite net) model**: on every ``--frame-step``-th frame, true drop
  ``AbsRel(lite vs ground truth) - AbsRel(server vs ground truth)`` against two estimates from
  ``AbsRel(lite vs server)`` (the server net stands in for ground truth): the release's
  rule, minus ``m`` (the server net's mean AbsRel on the *train* split, every 30th frame),
  and the least-squares line fitted on the train split's frames (``fit_lite_drop``; the
  pipeline's ``lite_drop_slope`` / ``lite_drop_offset`` defaults come from this print).

Prints Pearson and Spearman (rank) correlations per category and overall, and writes the
pairs as CSV. A few true tracker errors are outliers (AbsRel up to 3 where an oncoming box
stands close in front of a far wall) that the flow cannot see, so Pearson's r, which such
points dominate, is printed beside the rank correlation. The
odometry model's held-out correlation is printed by ``accumo_odometry_eval
--fit``. Nothing is asserted.

    python benchmarks/accumo_drop_models_heldout.py --dataset results/accumo_dataset
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr

from accumo_ros.metrics import depth_errors
from accumo_ros.scheduler.pipeline import ImuPoseChange
from accumo_ros.simulation.dataset import split_paths
from accumo_ros.simulation.sequence_bag import LoadedSequence, read_sequence_bag
from accumo_ros.tasks.depth_nets import load_depth_net
from accumo_ros.tasks.depth_tracking import (
    DepthTrackerAccuracyModel,
    fit_lite_drop,
    lite_model_drop,
)
from accumo_ros.tasks.visual_odometry import KeyframePolicy
from accumo_ros.tools.odometry_eval import (
    FusedOdometryRun,
    VoCache,
    imu_noise_of,
    periodic_offloads,
)

ROOT = Path(__file__).resolve().parent.parent
STRIDES = (6, 9, 12, 18)
VO_STRIDE, VO_LATENCY = 8, 4  # the odometry filter's VO offloads while the tracker warps


def _correlations(x: list[float], y: list[float]) -> tuple[float, float]:
    """Return Pearson's r and Spearman's rank correlation (NaN when an input is constant)."""
    x, y = np.asarray(x), np.asarray(y)
    if x.size < 2 or np.std(x) == 0.0 or np.std(y) == 0.0:
        return float('nan'), float('nan')
    return float(np.corrcoef(x, y)[0, 1]), float(spearmanr(x, y)[0])


def _pose_changes(
    sequence: LoadedSequence, fused: FusedOdometryRun, start: int, strides: tuple[int, ...]
) -> dict[int, np.ndarray]:
    """Optical pose change from ``start`` to ``start + stride``, IMU from the fused state."""
    frame_times, imu_times = sequence.frame_times, sequence.imu_times
    # The fused run has fed the IMU samples up to frame ``start``'s time (inclusive).
    sample = int(np.searchsorted(imu_times, frame_times[start] + 1e-9, side='right'))
    change = ImuPoseChange(fused.filter, float(imu_times[sample - 1]))
    poses = {}
    for stride in sorted(strides):
        while sample < len(imu_times) and imu_times[sample] <= frame_times[start + stride] + 1e-9:
            change.add_imu(
                imu_times[sample],
                sequence.angular_velocity[sample],
                sequence.linear_acceleration[sample],
            )
            sample += 1
        poses[stride] = change.pose_change()
    return poses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dataset', type=Path, default=ROOT / 'results' / 'accumo_dataset')
    parser.add_argument(
        '--fit-dataset',
        type=Path,
        help='fit the lite-drop line on the train split of this set instead of --dataset '
        '(one the nets never saw, e.g. accumo_generate --seed 2 --holdout none)',
    )
    parser.add_argument('--start-step', type=int, default=60, help='tracker start frames')
    parser.add_argument('--frame-step', type=int, default=20, help='lite-model frames')
    parser.add_argument('--threads', type=int, default=2, help='torch threads')
    parser.add_argument('--output-dir', type=Path, default=ROOT / 'results' / 'accumo')
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    server, lite = load_depth_net('server'), load_depth_net('lite')

    started = time.monotonic()
    train_errors, train_vs_server, train_drops = [], [], []
    fit_dataset = args.fit_dataset or args.dataset
    for path in split_paths(fit_dataset, 'train'):
        sequence = read_sequence_bag(path, every=30)
        predicted = server.predict(sequence.rgb)
        train_errors += [
            depth_errors(p, d).abs_rel for p, d in zip(predicted, sequence.depth, strict=True)
        ]
        sequence = read_sequence_bag(path, every=args.frame_step)
        server_maps, lite_maps = server.predict(sequence.rgb), lite.predict(sequence.rgb)
        for server_map, lite_map, truth in zip(
            server_maps, lite_maps, sequence.depth, strict=True
        ):
            train_vs_server.append(depth_errors(lite_map, server_map).abs_rel)
            train_drops.append(
                depth_errors(lite_map, truth).abs_rel - depth_errors(server_map, truth).abs_rel
            )
    server_mean = float(np.mean(train_errors))
    slope, offset = fit_lite_drop(np.array(train_vs_server), np.array(train_drops))
    print(
        f'# AccuMO depth drop models on the held-out split of {args.dataset}; server net '
        f'mean AbsRel on the train split of {fit_dataset} (every 30th frame): '
        f'{server_mean:.4f}; lite drop fitted there (every {args.frame_step}th frame, '
        f'{len(train_drops)} frames): slope {slope:.4f}, offset {offset:.4f}; tracker '
        f'strides {STRIDES}, a start every {args.start_step} frames, IMU pose change from '
        f'the fused state (VO every {VO_STRIDE} frames); '
        f'lite model on every {args.frame_step}th frame; {args.threads} torch threads'
    )
    tracker_rows, lite_rows = [], []
    for path in split_paths(args.dataset, 'heldout'):
        sequence = read_sequence_bag(path)
        category = sequence.category
        frames = len(sequence.frame_times)
        fused = FusedOdometryRun(
            sequence,
            VoCache(sequence, lambda s, index: server.predict(s.rgb[index])),
            periodic_offloads(frames, VO_STRIDE),
            VO_LATENCY,
            imu_noise_of(sequence),
            KeyframePolicy(),
        )
        model = DepthTrackerAccuracyModel(sequence.intrinsics)
        for start in range(0, frames - max(STRIDES), args.start_step):
            depth_1 = server.predict(sequence.rgb[start])
            fused.run_to(start + 1)
            pose_changes = _pose_changes(sequence, fused, start, STRIDES)
            for stride in STRIDES:
                end = start + stride
                pose = pose_changes[stride]
                estimate = model.estimate(
                    sequence.rgb[start], depth_1, sequence.rgb[end], pose, stride
                )
                true = depth_errors(estimate.warped_depth, sequence.depth[end]).abs_rel
                tracker_rows.append(
                    {
                        'sequence': path.name,
                        'category': category,
                        'start': start,
                        'stride': stride,
                        'true': true,
                        'estimated': estimate.error,
                    }
                )
        for frame in range(0, frames, args.frame_step):
            rgb = sequence.rgb[frame]
            server_depth, lite_depth = server.predict(rgb), lite.predict(rgb)
            server_abs_rel = depth_errors(server_depth, sequence.depth[frame]).abs_rel
            lite_rows.append(
                {
                    'sequence': path.name,
                    'category': category,
                    'frame': frame,
                    'estimated': lite_model_drop(lite_depth, server_depth, offset, slope=slope),
                    'release_estimated': lite_model_drop(lite_depth, server_depth, server_mean),
                    'true': depth_errors(lite_depth, sequence.depth[frame]).abs_rel
                    - server_abs_rel,
                    'server_abs_rel': server_abs_rel,
                }
            )
        print(f'{path.name}: done at {time.monotonic() - started:.0f} s', flush=True)

    for title, rows in (('depth tracker error', tracker_rows), ('lite-model drop', lite_rows)):
        print(f'\n{title}:\n')
        print('| category | samples | mean true | mean estimated | Pearson r | Spearman |')
        print('|---|---|---|---|---|---|')
        categories = sorted({row['category'] for row in rows})
        for label in [*categories, 'all']:
            chosen = [row for row in rows if label in ('all', row['category'])]
            true = [row['true'] for row in chosen]
            estimated = [row['estimated'] for row in chosen]
            pearson, spearman = _correlations(true, estimated)
            print(
                f'| {label} | {len(chosen)} | {np.mean(true):.4f} | {np.mean(estimated):.4f} | '
                f'{pearson:.3f} | {spearman:.3f} |'
            )
    true = np.array([row['true'] for row in lite_rows])
    print('\nlite-model drop, estimate minus true drop (held out, all categories):\n')
    print('| rule | mean (bias) | mean absolute |')
    print('|---|---|---|')
    for rule, key in (
        (f'release (slope 1, offset {server_mean:.4f})', 'release_estimated'),
        (f'fitted (slope {slope:.4f}, offset {offset:.4f})', 'estimated'),
    ):
        error = np.array([row[key] for row in lite_rows]) - true
        print(f'| {rule} | {error.mean():+.4f} | {np.abs(error).mean():.4f} |')
    args.output_dir.mkdir(parents=True, exist_ok=True)
    for name, rows in (('tracker_model_heldout', tracker_rows), ('lite_drop_heldout', lite_rows)):
        path = args.output_dir / f'{name}.csv'
        with path.open('w', newline='') as stream:
            writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        print(f'\npairs -> {path}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
