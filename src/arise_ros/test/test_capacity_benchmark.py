# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""benchmarks/arise_capacity.py as a user runs it: the measured scenes by default, a table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / 'benchmarks' / 'arise_capacity.py'
SHORT = ['--profiles', 'gpu_like', '--slas', '0.04', '--duration', '6', '--warmup', '2']


def _run(*extra: str) -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *SHORT, *extra],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _rows(output: str) -> dict[tuple[str, str], list[str]]:
    rows = {}
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.strip('|').split('|')]
        if line.startswith('| 0.04 |'):
            rows[cells[1], cells[2]] = cells
    return rows


def test_by_default_robots_draw_the_rates_measured_on_the_generated_sequences():
    output = _run()
    assert 'set-up: 60 fps; one of 20 measured rates' in output
    assert 'arise_drop_rates.csv' in output
    rows = _rows(output)
    # Every system, each baseline with both admissions, side by side.
    assert set(rows) == {
        ('static', 'fixed count'),
        *((s, a) for s in ('clipper', 'chameleon', 'arise_alpha') for a in ('pending', 'verify')),
        ('arise', 'verify'),
    }
    for cells in rows.values():
        robots, within = float(cells[3]), float(cells[4])
        assert 0.0 <= within <= robots
    assert 'x (' in rows['arise', 'verify'][10], 'ARISE is compared with the baselines'


def test_a_bad_rates_file_is_a_usage_error_not_a_traceback(tmp_path):
    bad = tmp_path / 'rates.csv'
    bad.write_text('sequence,category,rate_server,rate_gt\ns,c,fast,0.001\n')
    for path in (bad, tmp_path / 'missing.csv'):
        done = subprocess.run(
            [sys.executable, str(SCRIPT), *SHORT, '--rates-file', str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2
        assert '--rates-file:' in done.stderr
        assert 'Traceback' not in done.stderr
