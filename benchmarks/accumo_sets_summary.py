# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO across several test sets: gains per set, their mean and spread, and filter health.

Reads the ``runs.json`` that ``accumo_evaluate`` writes, given as ``LINK=SET=PATH`` (for
example ``16mbit=seed11=results/accumo_eval/s11_16/runs.json``); a (link, set) given more
than once merges its files, later runs replacing earlier ones of the same sequence,
scheduler, weights and phase (``--phases`` run separately, a rerun of one scheduler).
Per link and weight it prints, for each set, the mean overall cost (``(w_d · AbsRel +
w_o · t_err) / (w_d + w_o)``, averaged per category, then over categories, as the
evaluator's report) of AccuMO, the best static baseline, RR + LA and, where run, the
clairvoyant scheduler, AccuMO's gain over each (positive = AccuMO better), and the mean,
minimum and maximum gain over the sets. Then AccuMO's gain over RR + LA split into its depth
and odometry parts (the cost is linear in both, so the parts add up to the gain), with the
spread of RR + LA's cost over the phases: the gain a set shows by the phase alone. Where the
static ratios ran with the local algorithm too (``wrr:X:Y+la``), AccuMO against each of
them, and against the best of them and RR + LA per set (chosen with hindsight, a bound no
fixed schedule reaches). Then, per link, every scheduler's worst Kalman + VO t_err, the runs
above 20 % and the worst position error. Nothing is asserted.

    python benchmarks/accumo_sets_summary.py 16mbit=s11=/tmp/s11_16/runs.json ...
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from accumo_ros.tools.evaluate import STATIC_BASELINES, T_ERR_LIMIT, RunResult
from accumo_ros.tools.evaluate import overall as run_overall

COMPARED = ('rr+la', 'accumo-clairvoyant')
# The clairvoyant's two beneficiaries apart (accumo_evaluate's variants of those names).
SPLIT = ('rr+la', 'rr+la-clairvoyant', 'accumo', 'accumo-clairvoyant-mpc', 'accumo-clairvoyant')


def _chosen(runs: list[dict], scheduler: str, weights: tuple[float, float]) -> list[dict]:
    return [
        r
        for r in runs
        if r['scheduler'] == scheduler
        and (r['weights'] is None or tuple(r['weights']) == tuple(weights))
    ]


def _category_mean(runs: list[dict], value: Callable[[dict], float]) -> float:
    """Mean of ``value`` per category, then over categories (the evaluator's report)."""
    per_category = defaultdict(list)
    for r in runs:
        per_category[r['category']].append(value(r))
    return float(np.mean([np.mean(v) for v in per_category.values()]))


def overall(runs: list[dict], scheduler: str, weights: tuple[float, float]) -> float | None:
    """Return the mean overall cost of ``scheduler`` at ``weights`` (None if not run)."""
    chosen = _chosen(runs, scheduler, weights)
    if not chosen:
        return None
    return _category_mean(chosen, lambda r: run_overall(RunResult(**r), weights))


def cost_parts(
    runs: list[dict], scheduler: str, weights: tuple[float, float]
) -> tuple[float, float] | None:
    """Return the depth and odometry terms of :func:`overall` (they add up to it)."""
    chosen = _chosen(runs, scheduler, weights)
    if not chosen:
        return None
    w_depth, w_odometry = weights
    total = w_depth + w_odometry
    return (
        _category_mean(chosen, lambda r: w_depth * r['depth_abs_rel'] / total),
        _category_mean(chosen, lambda r: w_odometry * r['odometry_t_err'] / total),
    )


def phase_spread(runs: list[dict], scheduler: str, weights: tuple[float, float]) -> float | None:
    """Return (max - min) / mean of ``scheduler``'s cost over its phases, in % (None: one)."""
    chosen = _chosen(runs, scheduler, weights)
    phases = sorted({r.get('phase', 0) for r in chosen})
    if len(phases) < 2:
        return None
    costs = [
        _category_mean(
            [r for r in chosen if r.get('phase', 0) == phase],
            lambda r: run_overall(RunResult(**r), weights),
        )
        for phase in phases
    ]
    return 100.0 * (max(costs) - min(costs)) / float(np.mean(costs))


def _key(run: dict) -> tuple:
    return (run['sequence'], run['scheduler'], tuple(run['weights'] or ()), run.get('phase', 0))


def gain(reference: float, accumo: float) -> float:
    return 100.0 * (reference - accumo) / reference


def _parts_table(sets: dict[str, list[dict]], weights: list[tuple[float, float]]) -> None:
    """Print AccuMO's gain over RR + LA as depth part + odometry part, and the phase spread."""
    print(
        '\nAccuMO against RR + LA, its gain split into the depth and the odometry term of the '
        "cost (they add up to the gain), and the spread of each one's cost over its phases "
        '((max - min) / mean): what the phase alone moves a set by.\n'
    )
    print('| weight | set | gain | depth part | odometry part | phase spread: RR + LA | AccuMO |')
    print('|---|---|---|---|---|---|---|')
    for w in weights:
        columns: list[list[float]] = [[], [], []]
        for name, runs in sets.items():
            parts = [cost_parts(runs, scheduler, w) for scheduler in ('rr+la', 'accumo')]
            if parts[0] is None or parts[1] is None:
                continue
            (depth_rr, odometry_rr), (depth, odometry) = parts
            reference = depth_rr + odometry_rr
            values = (
                gain(reference, depth + odometry),
                100.0 * (depth_rr - depth) / reference,
                100.0 * (odometry_rr - odometry) / reference,
            )
            for column, value in zip(columns, values, strict=True):
                column.append(value)
            spreads = [phase_spread(runs, scheduler, w) for scheduler in ('rr+la', 'accumo')]
            print(
                f'| {w[0]:g}:{w[1]:g} | {name} | '
                + ' | '.join(f'{v:+.1f} %' for v in values)
                + ' | '
                + ' | '.join('' if v is None else f'{v:.1f} %' for v in spreads)
                + ' |'
            )
        if columns[0]:
            print(
                f'| {w[0]:g}:{w[1]:g} | **mean (min .. max)** | '
                + ' | '.join(
                    f'**{np.mean(c):+.1f} %** ({min(c):+.1f} .. {max(c):+.1f})' for c in columns
                )
                + ' | | |'
            )


def _depth_share(scheduler: str) -> float:
    """Depth offloads per odometry offload of a static ratio (``wrr:3:1+la``: 3; RR: 1)."""
    parts = scheduler.removesuffix('+la').split(':')
    return float(parts[1]) / float(parts[2]) if parts[0] == 'wrr' else 1.0


def _local_statics_table(sets: dict[str, list[dict]], weights: list[tuple[float, float]]) -> None:
    """Print AccuMO against every static ratio that ran with the local algorithm."""
    names = sorted(
        {r['scheduler'] for runs in sets.values() for r in runs if r['scheduler'].endswith('+la')},
        key=_depth_share,
        reverse=True,
    )
    print(
        '\nAccuMO against the static schedules with its local algorithm: the mean gain over '
        'the sets (min .. max) against each, and against the best of them per set, chosen '
        'with hindsight (no fixed schedule is that one on every set).\n'
    )
    print('| weight | ' + ' | '.join(names) + ' | best per set (hindsight) | its choices |')
    print('|---' * (len(names) + 3) + '|')
    for w in weights:
        columns: dict[str, list[float]] = defaultdict(list)
        choices = []
        for runs in sets.values():
            accumo = overall(runs, 'accumo', w)
            costs = {n: overall(runs, n, w) for n in names}
            costs = {n: c for n, c in costs.items() if c is not None}
            if accumo is None or not costs:
                continue
            for n, c in costs.items():
                columns[n].append(gain(c, accumo))
            best = min(costs, key=costs.__getitem__)
            columns['best'].append(gain(costs[best], accumo))
            choices.append(best)
        if not columns['best']:
            continue
        cells = [
            f'{np.mean(c):+.1f} % ({min(c):+.1f} .. {max(c):+.1f})'
            for c in (columns[n] for n in [*names, 'best'])
        ]
        print(f'| {w[0]:g}:{w[1]:g} | ' + ' | '.join(cells) + f' | {", ".join(choices)} |')


def _split_table(sets: dict[str, list[dict]], weights: list[tuple[float, float]]) -> None:
    """Print what the MPC and the local depth choice each gain with the true drops."""
    print(
        '\nThe clairvoyant split: RR + LA and the clairvoyant with the true tracker-or-lite '
        'choice, AccuMO and the clairvoyant MPC with the models\' choice. "MPC bound": the '
        'clairvoyant against RR + LA with the true choice (what scheduling can add with '
        'perfect estimates); "MPC with true drops": the clairvoyant MPC against RR + LA.\n'
    )
    print(
        '| weight | set | RR + LA | RR + LA, true choice | AccuMO | clairvoyant MPC | '
        'clairvoyant | MPC bound | MPC with true drops | AccuMO vs RR + LA |'
    )
    print('|---|---|---|---|---|---|---|---|---|---|')
    for w in weights:
        columns: list[list[float]] = [[], [], []]
        for name, runs in sets.items():
            costs = [overall(runs, scheduler, w) for scheduler in SPLIT]
            if any(c is None for c in costs):
                continue
            rr_la, rr_true, accumo, mpc, ideal = costs
            for column, value in zip(
                columns, (gain(rr_true, ideal), gain(rr_la, mpc), gain(rr_la, accumo)), strict=True
            ):
                column.append(value)
            print(
                f'| {w[0]:g}:{w[1]:g} | {name} | '
                + ' | '.join(f'{c:.4f}' for c in costs)
                + ' | '
                + ' | '.join(f'{column[-1]:+.1f} %' for column in columns)
                + ' |'
            )
        if columns[0]:
            print(
                f'| {w[0]:g}:{w[1]:g} | **mean (min .. max)** | | | | | | '
                + ' | '.join(
                    f'**{np.mean(c):+.1f} %** ({min(c):+.1f} .. {max(c):+.1f})' for c in columns
                )
                + ' |'
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('runs', nargs='+', help='LINK=SET=PATH of a runs.json')
    args = parser.parse_args(argv)
    by_link: dict[str, dict[str, list[dict]]] = defaultdict(dict)
    for item in args.runs:
        link, name, path = item.split('=', 2)
        # A set given again adds its runs (another phase, a rerun); a run of the same
        # sequence, scheduler, weights and phase replaces the earlier one.
        runs = {_key(r): r for r in by_link[link].get(name, [])}
        runs.update((_key(r), r) for r in json.loads(Path(path).read_text())['runs'])
        by_link[link][name] = list(runs.values())
    for link, sets in by_link.items():
        weights = sorted(
            {tuple(r['weights']) for runs in sets.values() for r in runs if r['weights']},
            key=lambda w: -w[0] / w[1],
        )
        print(f'\n## Link {link}: {len(sets)} sets ({", ".join(sets)})\n')
        phases: dict[str, set[int]] = defaultdict(set)
        for runs in sets.values():
            for r in runs:
                phases[r['scheduler']].add(r.get('phase', 0))
        print(
            'Phases averaged (frames before the first offload): '
            + '; '.join(f'{s} {",".join(map(str, sorted(p)))}' for s, p in phases.items())
            + '\n'
        )
        header = '| weight | set | AccuMO | best static | gain | RR + LA | gain | clairvoyant |'
        print(header)
        print('|---|---|---|---|---|---|---|---|')
        for w in weights:
            gains_static, gains_rr = [], []
            for name, runs in sets.items():
                accumo = overall(runs, 'accumo', w)
                statics = {s: overall(runs, s, w) for s in STATIC_BASELINES}
                best_name, best = min(
                    ((s, v) for s, v in statics.items() if v is not None), key=lambda x: x[1]
                )
                rr_la, ideal = (overall(runs, s, w) for s in COMPARED)
                gains_static.append(gain(best, accumo))
                gains_rr.append(gain(rr_la, accumo) if rr_la is not None else float('nan'))
                ideal_text = '' if ideal is None else f'{ideal:.4f}'
                rr_text = '' if rr_la is None else f'{rr_la:.4f}'
                print(
                    f'| {w[0]:g}:{w[1]:g} | {name} | {accumo:.4f} | {best:.4f} ({best_name}) | '
                    f'{gains_static[-1]:+.1f} % | {rr_text} | {gains_rr[-1]:+.1f} % | '
                    f'{ideal_text} |'
                )
            print(
                f'| {w[0]:g}:{w[1]:g} | **mean (min .. max)** | | | '
                f'**{np.mean(gains_static):+.1f} %** ({min(gains_static):+.1f} .. '
                f'{max(gains_static):+.1f}) | | **{np.nanmean(gains_rr):+.1f} %** '
                f'({np.nanmin(gains_rr):+.1f} .. {np.nanmax(gains_rr):+.1f}) | |'
            )
        _parts_table(sets, weights)
        if any(
            r['scheduler'].endswith('+la') and r['scheduler'] != 'rr+la'
            for runs in sets.values()
            for r in runs
        ):
            _local_statics_table(sets, weights)
        if any(r['scheduler'] == SPLIT[1] for runs in sets.values() for r in runs):
            _split_table(sets, weights)
        print(f'\nFilter health on {link}:\n')
        print(
            f'| scheduler | runs | worst t_err | runs > {T_ERR_LIMIT:.0%} | '
            'worst position error (m) | its run |'
        )
        print('|---|---|---|---|---|---|')
        every = [(name, r) for name, runs in sets.items() for r in runs]
        for scheduler in dict.fromkeys(r['scheduler'] for _, r in every):
            chosen = [(n, r) for n, r in every if r['scheduler'] == scheduler]
            name, worst = max(chosen, key=lambda x: x[1].get('max_position_error_m', np.nan))
            print(
                f'| {scheduler} | {len(chosen)} | '
                f'{max(r["odometry_t_err"] for _, r in chosen):.1%} | '
                f'{sum(r["odometry_t_err"] > T_ERR_LIMIT for _, r in chosen)} | '
                f'{worst.get("max_position_error_m", float("nan")):.2f} | '
                f'{name} {worst["sequence"]}'
                + (f' phase {worst["phase"]}' if worst.get('phase') else '')
                + ' |'
            )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
