# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO's depth model (r, d) against the truth along real runs, per category.

Set-up (printed): the sequences of sets made by ``accumo_generate``, the packaged nets (maps
cached as .npz by ``accumo_evaluate``'s cache layout), one scheduler at one weight, phase 0,
offload latencies from ``--latencies`` (default: the dissertation's link). The run is the
scheduler's own (its decisions use the models); at every frame after the first depth result
it records, for the server map in use (base b, stride s):

* the model: the tracker's predicted drop ``r · s`` and the lite net's drop ``d``;
* the truth: the warped map's AbsRel minus the server map's own at b (what ``r · s``
  predicts), and the lite net's AbsRel at the frame minus the same (what ``d`` predicts).

Prints per category and stride range the means of each, how often the local choice
(``lite`` when ``r · s >= d``) agrees with the true one (``lite`` when the lite net's error
is below the warped map's), and the depth AbsRel of the model's choice against the
per-frame true choice. Nothing is asserted.

    python benchmarks/accumo_depth_choice.py results/accumo_s11 results/accumo_s12 \
        --latencies results/accumo/offload_latencies_16mbit.yaml
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from accumo_ros.scheduler.pipeline import DEPTH
from accumo_ros.simulation.dataset import split_paths
from accumo_ros.tasks.odometry_model import OdometryModelSet
from accumo_ros.tools import evaluate

ROOT = Path(__file__).resolve().parents[1]
STRIDE_BINS = ((1, 20), (20, 30), (30, 45), (45, 70), (70, 10_000))


def _record(path: Path, cache: Path, args: argparse.Namespace) -> tuple[str, np.ndarray]:
    """Replay one sequence; return its category and rows (s, r·s, d, true r·s, true d, S_b, L)."""
    latencies = evaluate.LatencyModel.load(args.latencies)
    models = OdometryModelSet.load()
    data = evaluate.load_sequence_data(path, cache, False, models, latencies)
    initial = evaluate._initial_odometry_model(models, latencies, data.fps)
    truth = evaluate._oracle(data, True, 'now', initial)
    rows: dict[int, tuple] = {}
    build = evaluate._build_pipeline

    def recording_build(*a, **k) -> evaluate._EvalPipeline:  # noqa: ANN002, ANN003
        pipeline = build(*a, **k)

        def source(pipe: evaluate._EvalPipeline, frame: int) -> list:
            model = pipe.model_estimates()
            base = pipe.last_offloads[DEPTH]
            if base is not None and base != frame and np.isfinite(model[DEPTH].local_drop):
                true = truth(pipe, frame)[DEPTH]
                s = frame - base
                # The last call of a frame (the local choice's) is the one kept.
                rows[frame] = (
                    s,
                    model[DEPTH].drop_rate * s,
                    model[DEPTH].local_drop,
                    true.drop_rate * s,
                    true.local_drop,
                    float(data.server_error[base]),
                    float(data.lite_error[frame]),
                )
            return list(model)

        pipeline.accuracy_source = source
        return pipeline

    evaluate._build_pipeline = recording_build
    try:
        evaluate.run_scheduler(data, args.scheduler, args.weights, latencies, models)
    finally:
        evaluate._build_pipeline = build
    return data.category, np.array([rows[f] for f in sorted(rows)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('datasets', type=Path, nargs='+', help='sets made by accumo_generate')
    parser.add_argument('--latencies', type=Path, help='offload latency file (default: fast)')
    parser.add_argument('--scheduler', default='accumo')
    parser.add_argument('--weights', default='1:1', help='depth:odometry')
    parser.add_argument('--cache', type=Path, default=ROOT / 'results' / 'accumo_depth_cache')
    args = parser.parse_args(argv)
    args.weights = tuple(float(v) for v in args.weights.split(':'))
    torch.set_num_threads(2)
    by_category: dict[str, list[np.ndarray]] = defaultdict(list)
    for dataset in args.datasets:
        for path in [p for split in ('train', 'heldout') for p in split_paths(dataset, split)]:
            category, rows = _record(path, args.cache / dataset.name, args)
            by_category[category].append(rows)
            by_category['all'].append(rows)
            print(f'{dataset.name}/{path.name}: {len(rows)} frames', flush=True)
    sets = ', '.join(d.name for d in args.datasets)
    print(
        f'\n# {args.scheduler} at {args.weights[0]:g}:{args.weights[1]:g}, phase 0; latencies '
        f'{args.latencies or "the dissertation link"}; sets {sets}\n'
    )
    print(
        '| category | strides | frames | model r·s | true | model d | true | choice agrees '
        '| AbsRel, model choice | true choice |'
    )
    print('|---|---|---|---|---|---|---|---|---|---|')
    for category, parts in sorted(by_category.items()):
        every = np.concatenate(parts)
        for low, high in (*STRIDE_BINS, (1, 10_000)):
            a = every[(every[:, 0] >= low) & (every[:, 0] < high)]
            if len(a) < 20:
                continue
            _s, rs, d, true_rs, true_d, server_b, lite = a.T
            tracker = server_b + true_rs  # the warped map's AbsRel (true_rs is >= 0)
            model_lite, true_lite = rs >= d, true_rs >= true_d
            label = 'all' if high == 10_000 and low == 1 else f'{low}-{min(high, 999)}'
            print(
                f'| {category} | {label} | {len(a)} | {rs.mean():.4f} | {true_rs.mean():.4f} | '
                f'{d.mean():.4f} | {true_d.mean():.4f} | {np.mean(model_lite == true_lite):.0%} '
                f'| {np.where(model_lite, lite, tracker).mean():.4f} '
                f'| {np.where(true_lite, lite, tracker).mean():.4f} |'
            )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
