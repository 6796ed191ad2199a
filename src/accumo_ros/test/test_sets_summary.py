# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""benchmarks/accumo_sets_summary.py: a set given twice merges its runs (phases, reruns)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from accumo_ros.tools.evaluate import RunResult

SCRIPT = Path(__file__).resolve().parents[3] / 'benchmarks' / 'accumo_sets_summary.py'


def _run(  # noqa: ANN202
    scheduler: str,
    depth: float,
    weights=None,  # noqa: ANN001
    phase: int = 0,
    odometry: float | None = None,
):
    result = RunResult(
        sequence='low_low_0',
        category='low_low',
        scheduler=scheduler,
        weights=weights,
        depth_abs_rel=depth,
        # By default the overall cost is depth at every weight.
        odometry_t_err=depth if odometry is None else odometry,
        offloads=(1, 1),
        depth_sources={},
        decision_ms_p50=0.0,
        decision_ms_p99=0.0,
        depth_error=[],
        offloaded=[],
        drop_rates=[],
        max_position_error_m=0.1,
        phase=phase,
    )
    return asdict(result)


def _write(path: Path, runs: list[dict]) -> str:
    path.write_text(json.dumps({'setup': {}, 'runs': runs}))
    return str(path)


def _summary(*arguments: str) -> str:
    """Return what the script prints for ``LINK=SET=PATH`` arguments."""
    command = [sys.executable, str(SCRIPT), *arguments]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def test_a_set_given_twice_averages_its_phases_and_takes_reruns(tmp_path: Path) -> None:
    first = _write(
        tmp_path / 'phase0.json',
        [
            _run('accumo', 0.10, (1.0, 1.0)),
            _run('rr', 0.20),
            _run('rr+la', 0.12),
            _run('accumo-clairvoyant', 0.50, (1.0, 1.0)),
        ],
    )
    second = _write(
        tmp_path / 'phase8.json',
        [_run('accumo', 0.06, (1.0, 1.0), phase=8), _run('rr', 0.20, phase=8)],
    )
    # Rerun of the clairvoyant at phase 0: replaces the first file's run.
    rerun = _write(tmp_path / 'rerun.json', [_run('accumo-clairvoyant', 0.07, (1.0, 1.0))])
    output = _summary(f'fast=s1={first}', f'fast=s1={second}', f'fast=s1={rerun}')
    # AccuMO: (0.10 + 0.06) / 2; RR + LA ran one phase; the clairvoyant's rerun counts.
    assert '| 1:1 | s1 | 0.0800 | 0.2000 (rr) | +60.0 % | 0.1200 | +33.3 % | 0.0700 |' in output
    assert 'accumo 0,8' in output
    assert '| accumo | 2 |' in output  # two phases, one run each


def test_the_clairvoyant_split_table(tmp_path: Path) -> None:
    """With rr+la-clairvoyant runs, the table of what the MPC and the depth choice gain."""
    runs = _write(
        tmp_path / 'split.json',
        [
            _run('accumo', 0.10, (1.0, 1.0)),
            _run('rr', 0.20),
            _run('rr+la', 0.12),
            _run('rr+la-clairvoyant', 0.08),
            _run('accumo-clairvoyant-mpc', 0.11, (1.0, 1.0)),
            _run('accumo-clairvoyant', 0.09, (1.0, 1.0)),
        ],
    )
    output = _summary(f'16mbit=s1={runs}')
    # MPC bound: 0.08 -> 0.09 (-12.5 %); MPC with true drops: 0.12 -> 0.11; AccuMO 0.12 -> 0.10.
    row = '| 1:1 | s1 | 0.1200 | 0.0800 | 0.1000 | 0.1100 | 0.0900 | -12.5 % | +8.3 % | +16.7 % |'
    assert row in output
    without = _write(
        tmp_path / 'plain.json',
        [_run('accumo', 0.1, (1.0, 1.0)), _run('rr', 0.2), _run('rr+la', 0.12)],
    )
    plain = _summary(f'16mbit=s1={without}')
    assert 'clairvoyant split' not in plain


def test_the_gain_over_rr_la_splits_into_depth_and_odometry(tmp_path: Path) -> None:
    runs = _write(
        tmp_path / 'parts.json',
        [
            _run('accumo', 0.10, (1.0, 1.0), odometry=0.05),
            _run('accumo', 0.10, (1.0, 1.0), phase=8, odometry=0.07),
            _run('rr', 0.20),
            _run('rr+la', 0.12, odometry=0.04),
            _run('rr+la', 0.12, phase=8, odometry=0.04),
        ],
    )
    output = _summary(f'16mbit=s1={runs}')
    # RR + LA 0.08 = 0.06 depth + 0.02 odometry; AccuMO 0.08 = 0.05 + 0.03: a gain of 0 made
    # of +12.5 % from depth and -12.5 % from odometry. AccuMO's phases cost 0.075 and 0.085.
    row = '| 1:1 | s1 | +0.0 % | +12.5 % | -12.5 % | 0.0 % | 12.5 % |'
    assert row in output


def test_the_static_ratios_with_the_local_algorithm(tmp_path: Path) -> None:
    """With wrr:X:Y+la runs, AccuMO against each and against the best per set."""
    first = _write(
        tmp_path / 's1.json',
        [
            _run('accumo', 0.09, (1.0, 1.0)),
            _run('rr', 0.20),
            _run('rr+la', 0.10),
            _run('wrr:2:1+la', 0.08),
        ],
    )
    second = _write(
        tmp_path / 's2.json',
        [
            _run('accumo', 0.10, (1.0, 1.0)),
            _run('rr', 0.20),
            _run('rr+la', 0.08),
            _run('wrr:2:1+la', 0.125),
        ],
    )
    output = _summary(f'16mbit=s1={first}', f'16mbit=s2={second}')
    # RR + LA: +10 % on s1, -25 % on s2; WRR 2:1 + LA: -12.5 % and +20 %; the best per set is
    # WRR 2:1 + LA on s1 (-12.5 %) and RR + LA on s2 (-25 %).
    row = (
        '| 1:1 | +3.8 % (-12.5 .. +20.0) | -7.5 % (-25.0 .. +10.0) | -18.8 % (-25.0 .. -12.5) '
        '| wrr:2:1+la, rr+la |'
    )
    assert row in output
    plain = _write(tmp_path / 'plain.json', [_run('accumo', 0.1, (1.0, 1.0)), _run('rr', 0.2)])
    assert 'static schedules with its local algorithm' not in _summary(f'16mbit=s1={plain}')
