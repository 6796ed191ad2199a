# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO's two depth tracker accuracy models against the true drop at slow-link strides.

Set-up (printed): two sets made by ``accumo_generate --holdout none`` (every room), the
packaged server and lite depth nets (CPU; maps cached as .npz), the true camera poses for
the warps (so that only the models differ, not the odometry).

For frames f every ``--frame-step`` frames and strides s (default 15, 30, 45, 60: the
strides between depth offloads on a 16 Mbit/s link, 15 frames of latency), the server map
of frame b = f - s is warped to f:

* true drop: ``AbsRel(warped vs ground truth) - AbsRel(server map of f vs ground truth)``;
* ``flow`` model (the dissertation's, ``DepthTrackerAccuracyModel``): ``AbsRel(D'_2 vs D''_2)``
  of the DIS flow from b to f;
* ``offload`` model (``offload_tracker_drop_rate`` × s): the warped map against the server
  map of f, the line ``slope · AbsRel - offset`` fitted by least squares on ``--fit-dataset``.

Prints the fitted line (to copy into ``PipelineConfig``), then per stride and per category
on ``--dataset``: mean true drop, each model's mean (bias) and Spearman rank correlation.
Nothing is asserted.

    python benchmarks/accumo_tracker_model_strides.py --fit-dataset results/accumo_calib
        --dataset results/accumo_test4
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr

from accumo_ros.tasks.depth_tracking import DepthTrackerAccuracyModel, optical_relative_pose
from accumo_ros.tools.evaluate import abs_rel, load_sequence_data

ROOT = Path(__file__).resolve().parents[1]


def _rows(dataset: Path, cache: Path, strides: list[int], frame_step: int) -> list[dict]:
    rows = []
    for path in sorted(p for p in dataset.iterdir() if (p / 'metadata.yaml').is_file()):
        data = load_sequence_data(path, cache / dataset.name, oracle=False)
        sequence = data.sequence
        model = DepthTrackerAccuracyModel(sequence.intrinsics)
        server = data.server_depth
        for frame in range(max(strides), len(sequence.frame_times), frame_step):
            for stride in strides:
                base = frame - stride
                pose = optical_relative_pose(data.truth[base], data.truth[frame])
                try:
                    flow = model.estimate(
                        sequence.rgb[base], server[base], sequence.rgb[frame], pose, stride
                    )
                except ValueError:
                    continue  # nothing of the map lands in view: neither model applies
                warped = flow.warped_depth
                rows.append(
                    {
                        'category': sequence.category,
                        'stride': stride,
                        'true': abs_rel(warped, sequence.depth[frame]) - data.server_error[frame],
                        'flow': flow.error,
                        'vs_server': abs_rel(warped, server[frame]),
                    }
                )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--fit-dataset', type=Path, required=True, help='fit the line here')
    parser.add_argument('--dataset', type=Path, required=True, help='validate here')
    parser.add_argument('--strides', type=int, nargs='+', default=[15, 30, 45, 60])
    parser.add_argument('--frame-step', type=int, default=20)
    parser.add_argument('--cache', type=Path, default=ROOT / 'results' / 'accumo_depth_cache')
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    started = time.monotonic()
    fit_rows = _rows(args.fit_dataset, args.cache, args.strides, args.frame_step)
    slope, intercept = np.polyfit(
        [r['vs_server'] for r in fit_rows], [r['true'] for r in fit_rows], 1
    )
    offset = -intercept
    print(
        f'# fit on {args.fit_dataset} ({len(fit_rows)} pairs): true drop = {slope:.3f} · '
        f'AbsRel(tracked vs server) - {offset:.4f}; strides {args.strides}, a frame every '
        f'{args.frame_step}; true poses; CPU, {time.monotonic() - started:.0f} s'
    )
    rows = _rows(args.dataset, args.cache, args.strides, args.frame_step)
    print(f'\nvalidated on {args.dataset} ({len(rows)} pairs):\n')
    print('| group | pairs | true | flow (bias) | offload (bias) | Spearman flow | offload |')
    print('|---|---|---|---|---|---|---|')
    groups = [(f'stride {s}', lambda r, s=s: r['stride'] == s) for s in args.strides]
    categories = sorted({r['category'] for r in rows})
    groups += [(c, lambda r, c=c: r['category'] == c) for c in categories]
    for label, member in [*groups, ('all', lambda r: True)]:
        chosen = [r for r in rows if member(r)]
        true = np.array([r['true'] for r in chosen])
        flow = np.array([r['flow'] for r in chosen])
        offload = np.maximum(0.0, slope * np.array([r['vs_server'] for r in chosen]) - offset)
        print(
            f'| {label} | {len(chosen)} | {true.mean():.4f} | {flow.mean():.4f} '
            f'({(flow - true).mean():+.4f}) | {offload.mean():.4f} '
            f'({(offload - true).mean():+.4f}) '
            f'| {spearmanr(flow, true)[0]:.2f} | {spearmanr(offload, true)[0]:.2f} |'
        )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
