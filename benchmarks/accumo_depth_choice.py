# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO's depth model (r, d) against the truth along real runs, per category.

Set-up (printed): the sequences of sets made by ``accumo_generate``, the packaged nets (maps
cached as .npz by ``accumo_evaluate``'s cache layout), one scheduler at one weight, phase 0,
offload latencies from ``--latencies`` (default: the dissertation's link), the VO prior and
IMU calibration as ``accumo_evaluate``'s. The run is the scheduler's own (its decisions use
the models); at every frame after the first depth result it records, for the server map in
use (base b, stride s):

* the model: the tracker's predicted drop ``r · s`` and the lite net's drop ``d``;
* the truth: the warped map's AbsRel minus the server map's own at b (what ``r · s``
  predicts), and the lite net's AbsRel at the frame minus the same (what ``d`` predicts);
  the choices are scored with the two maps' own AbsRel on the frame.

Prints per category and stride range the means of each, how often the local choice
(``lite`` when ``r · s >= d``) agrees with the true one (``lite`` when the lite net's error
is below the warped map's), and the depth AbsRel of the model's choice against the
per-frame true choice. Nothing is asserted.

``--signals`` also computes, on every such frame, what the robot could measure there to
make the choice per frame (all from the frame itself, no ground truth):

* ``photometric``: the base frame's image warped like its depth against the current image
  (grey levels, 5×5 box mean), averaged over the pixels a point landed on;
* ``holes``: the fraction of pixels no point landed on;
* ``d_now``: the lite-drop line (``lite_drop_slope · AbsRel - offset``) of the lite net
  against the *warped* map on the current frame, over the photometrically consistent pixels
  (residual below 16 levels), instead of against the server map of the base frame;

and prints per set the depth AbsRel of choices made with them: ``r · s >= d_now``, a
logistic classifier on (``r · s``, ``d``, s, the three signals) fitted on ``--fit-dataset``'s
frames (each weighted by what a wrong choice costs there), and, as a different local
algorithm, the per-pixel fusion (the warped map where it is photometrically consistent,
the lite net elsewhere).

    python benchmarks/accumo_depth_choice.py results/accumo_s11 results/accumo_s12 \
        --latencies results/accumo/offload_latencies_16mbit.yaml
    python benchmarks/accumo_depth_choice.py results/accumo_s12 results/accumo_s15 \
        --signals --fit-dataset results/accumo_calib --imu-calibration 3:0.05
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import cv2
import numpy as np
import torch
from scipy import optimize

from accumo_ros.scheduler.pipeline import DEPTH, LITE_DROP_OFFSET, LITE_DROP_SLOPE
from accumo_ros.simulation.dataset import split_paths
from accumo_ros.tasks.depth_tracking import forward_warp
from accumo_ros.tasks.odometry_model import OdometryModelSet
from accumo_ros.tools import evaluate
from accumo_ros.tools.odometry_eval import (
    add_imu_calibration_argument,
    add_vo_prior_argument,
    vo_prior_flags,
)

ROOT = Path(__file__).resolve().parents[1]
STRIDE_BINS = ((1, 20), (20, 30), (30, 45), (45, 70), (70, 10_000))
COLUMNS = ('stride', 'model_rs', 'model_d', 'true_rs', 'true_d', 'server_b', 'lite', 'warped')
SIGNALS = ('photometric', 'holes', 'd_now', 'fused')
# Grey levels (0-255, after a 5×5 box mean) above which a warped pixel is inconsistent.
PHOTOMETRIC_THRESHOLD = 16.0
# The classifier's inputs: the models' two estimates, the stride and the three signals.
FEATURES = ('model_rs', 'model_d', 'stride', 'photometric', 'holes', 'd_now')


def photometric_residual(warped_rgb: np.ndarray, rgb: np.ndarray) -> np.ndarray:
    """Return |grey(warped) - grey(current)| per pixel, box-averaged over 5×5 (float32)."""
    residual = cv2.absdiff(
        cv2.cvtColor(warped_rgb, cv2.COLOR_RGB2GRAY).astype(np.float32),
        cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY).astype(np.float32),
    )
    return cv2.blur(residual, (5, 5))


def frame_signals(
    server_depth: np.ndarray,
    base_rgb: np.ndarray,
    rgb: np.ndarray,
    lite: np.ndarray,
    truth: np.ndarray,
    intrinsics,  # noqa: ANN001
    T_2_1: np.ndarray,  # noqa: N803
) -> tuple[float, float, float, float] | None:
    """Return (photometric, holes, d_now, fused AbsRel) of one frame; None if nothing lands."""
    warp = forward_warp(server_depth, intrinsics, T_2_1)
    if warp.holes.all():
        return None
    residual = photometric_residual(warp.apply(base_rgb), rgb)
    landed = ~warp.holes
    consistent = landed & (residual < PHOTOMETRIC_THRESHOLD)
    with np.errstate(invalid='ignore'):
        usable = consistent & np.isfinite(lite) & (warp.depth > evaluate.MIN_DEPTH)
    if usable.sum() >= 20:
        reference = warp.depth[usable]
        agreement = float(np.mean(np.abs(lite[usable] - reference) / reference))
        d_now = LITE_DROP_SLOPE * agreement - LITE_DROP_OFFSET
    else:
        d_now = np.inf  # nothing consistent to compare with: no evidence for the lite net
    fused = np.where(consistent, warp.depth, lite)
    return (
        float(residual[landed].mean()),
        float(warp.holes.mean()),
        float(d_now),
        evaluate.abs_rel(fused, truth),
    )


def _record(path: Path, cache: Path, args: argparse.Namespace) -> tuple[str, np.ndarray]:
    """Replay one sequence; return its category and rows (COLUMNS, then SIGNALS if asked)."""
    latencies = evaluate.LatencyModel.load(args.latencies)
    models = OdometryModelSet.load()
    data = evaluate.load_sequence_data(
        path,
        cache,
        False,
        models,
        latencies,
        calibration_residual=args.imu_calibration,
        **vo_prior_flags(args.vo_prior),
    )
    initial = evaluate._initial_odometry_model(models, latencies, data.fps)
    truth = evaluate._oracle(data, True, 'now', initial)
    rows: dict[int, tuple] = {}
    signals: dict[tuple[int, int], tuple | None] = {}
    build = evaluate._build_pipeline

    def recording_build(*a, **k) -> evaluate._EvalPipeline:  # noqa: ANN002, ANN003
        pipeline = build(*a, **k)

        def source(pipe: evaluate._EvalPipeline, frame: int) -> list:
            model = pipe.model_estimates()
            base = pipe.last_offloads[DEPTH]
            if base is not None and base != frame and np.isfinite(model[DEPTH].local_drop):
                true = truth(pipe, frame)[DEPTH]
                s = frame - base
                extra: tuple = ()
                if args.signals:
                    if (frame, base) not in signals:
                        signals[frame, base] = frame_signals(
                            pipe._depth.server_depth,
                            pipe._depth.rgb,
                            pipe.rgb,
                            data.lite_depth[frame],
                            data.sequence.depth[frame],
                            pipe.intrinsics,
                            pipe.warp_pose(),
                        )
                    extra = signals[frame, base] or (np.nan,) * len(SIGNALS)
                # The last call of a frame (the local choice's) is the one kept.
                rows[frame] = (
                    s,
                    model[DEPTH].drop_rate * s,
                    model[DEPTH].local_drop,
                    true.drop_rate * s,
                    true.local_drop,
                    float(data.server_error[base]),
                    float(data.lite_error[frame]),
                    pipe.tracker_error(base),
                    *extra,
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


def _columns(rows: np.ndarray) -> dict[str, np.ndarray]:
    names = COLUMNS + SIGNALS
    return {name: rows[:, i] for i, name in enumerate(names[: rows.shape[1]])}


def _features(frames: dict[str, np.ndarray]) -> np.ndarray:
    x = np.column_stack([frames[name] for name in FEATURES])
    return np.where(np.isfinite(x), x, 1.0)  # d_now = inf: nothing consistent, as a 100 % drop


def fit_choice(frames: dict[str, np.ndarray], l2: float = 1e-3) -> tuple[np.ndarray, ...]:
    """Fit P(lite better) = logistic(features); return (mean, scale, weights).

    Each frame is weighted by |warped AbsRel - lite AbsRel|, what a wrong choice costs there.
    """
    x = _features(frames)
    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-12
    z = np.column_stack([(x - mean) / scale, np.ones(len(x))])
    warped = frames['warped']
    lite_better = (frames['lite'] < warped).astype(float)
    cost = np.abs(frames['lite'] - warped)
    cost = cost / cost.mean()

    def loss(beta: np.ndarray) -> tuple[float, np.ndarray]:
        logits = z @ beta
        p = 1.0 / (1.0 + np.exp(-logits))
        value = np.sum(cost * (np.logaddexp(0.0, logits) - lite_better * logits))
        return value + l2 * beta @ beta, z.T @ (cost * (p - lite_better)) + 2 * l2 * beta

    beta = optimize.minimize(loss, np.zeros(z.shape[1]), jac=True, method='L-BFGS-B').x
    return mean, scale, beta


def _choose_fitted(frames: dict[str, np.ndarray], fitted: tuple[np.ndarray, ...]) -> np.ndarray:
    mean, scale, beta = fitted
    z = np.column_stack([(_features(frames) - mean) / scale, np.ones(len(frames['stride']))])
    return z @ beta > 0.0


def _signal_table(by_set: dict[str, np.ndarray], fit_name: str | None) -> list[str]:
    fitted = fit_choice(_columns(by_set[fit_name])) if fit_name else None
    lines = [
        '| set | frames | tracker only | model (`r·s >= d`) | `r·s >= d_now` | fitted on '
        f'{fit_name or "-"} | per-pixel fusion | true choice |',
        '|---|---|---|---|---|---|---|---|',
    ]
    for name, rows in by_set.items():
        f = _columns(rows)
        warped = f['warped']

        def depth(lite: np.ndarray, f=f, warped=warped) -> str:
            return f'{np.where(lite, f["lite"], warped).mean():.4f}'

        fitted_cell = depth(_choose_fitted(f, fitted)) if fitted is not None else '-'
        label = f'{name} (fit)' if name == fit_name else name
        model = depth(f['model_rs'] >= f['model_d'])
        lines.append(
            f'| {label} | {len(rows)} | {warped.mean():.4f} | {model} '
            f'| {depth(f["model_rs"] >= f["d_now"])} | {fitted_cell} | {f["fused"].mean():.4f} '
            f'| {np.minimum(warped, f["lite"]).mean():.4f} |'
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('datasets', type=Path, nargs='+', help='sets made by accumo_generate')
    parser.add_argument('--latencies', type=Path, help='offload latency file (default: fast)')
    parser.add_argument('--scheduler', default='accumo')
    parser.add_argument('--weights', default='1:1', help='depth:odometry')
    parser.add_argument('--cache', type=Path, default=ROOT / 'results' / 'accumo_depth_cache')
    parser.add_argument('--signals', action='store_true', help='per-frame signals (see above)')
    parser.add_argument(
        '--fit-dataset', type=Path, help='with --signals: fit the classifier on this set'
    )
    add_vo_prior_argument(parser)
    add_imu_calibration_argument(parser)
    args = parser.parse_args(argv)
    args.weights = tuple(float(v) for v in args.weights.split(':'))
    if args.fit_dataset and not args.signals:
        parser.error('--fit-dataset needs --signals')
    torch.set_num_threads(2)
    datasets = ([args.fit_dataset] if args.fit_dataset else []) + args.datasets
    by_category: dict[str, list[np.ndarray]] = defaultdict(list)
    by_set: dict[str, list[np.ndarray]] = defaultdict(list)
    for dataset in datasets:
        for path in [p for split in ('train', 'heldout') for p in split_paths(dataset, split)]:
            category, rows = _record(path, args.cache / dataset.name, args)
            by_set[dataset.name].append(rows)
            if dataset != args.fit_dataset:
                by_category[category].append(rows)
                by_category['all'].append(rows)
            print(f'{dataset.name}/{path.name}: {len(rows)} frames', flush=True)
    sets = ', '.join(d.name for d in args.datasets)
    calibration = 'none' if args.imu_calibration is None else 'calibrated'
    print(
        f'\n# {args.scheduler} at {args.weights[0]:g}:{args.weights[1]:g}, phase 0; latencies '
        f'{args.latencies or "the dissertation link"}; VO prior {args.vo_prior}; IMU '
        f'{calibration}; sets {sets}\n'
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
            f = _columns(a)
            rs, d, true_rs, true_d = f['model_rs'], f['model_d'], f['true_rs'], f['true_d']
            tracker = f['warped']
            model_lite, true_lite = rs >= d, f['lite'] < tracker
            label = 'all' if high == 10_000 and low == 1 else f'{low}-{min(high, 999)}'
            print(
                f'| {category} | {label} | {len(a)} | {rs.mean():.4f} | {true_rs.mean():.4f} | '
                f'{d.mean():.4f} | {true_d.mean():.4f} | {np.mean(model_lite == true_lite):.0%} '
                f'| {np.where(model_lite, f["lite"], tracker).mean():.4f} '
                f'| {np.where(true_lite, f["lite"], tracker).mean():.4f} |'
            )
    if args.signals:
        fit_name = args.fit_dataset.name if args.fit_dataset else None
        stacked = {name: np.concatenate(parts) for name, parts in by_set.items()}
        print('\nDepth AbsRel of each per-frame choice (and of the per-pixel fusion):\n')
        print('\n'.join(_signal_table(stacked, fit_name)))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
