# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The rosbag workflow end to end, as a user runs it.

``kapao_tracking`` (the launch file's graph in one process) records a run to a bag with its
metrics file; ``bag_evaluate`` reproduces that file from the bag, then replays the bag's
camera through the graph again and evaluates the new run.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from edge_offload_testing import free_tcp_port

FRAMES = 12


def _run(*args: str, timeout: float = 240.0) -> subprocess.CompletedProcess:
    return subprocess.run([*args], capture_output=True, text=True, timeout=timeout, check=False)


def _log(result: subprocess.CompletedProcess) -> str:
    """Return the start (set-up) and the end (why it stopped) of a run's output."""
    parts = []
    for name, text in (('stdout', result.stdout), ('stderr', result.stderr)):
        if len(text) > 8000:
            text = f'{text[:4000]}\n[... {len(text) - 8000} characters ...]\n{text[-4000:]}'
        parts.append(f'--- {name} ---\n{text}')
    return '\n'.join(parts)


def _graph_args(tmp_path) -> list[str]:  # noqa: ANN001
    return [
        '--start-edge-server',
        '--keys-dir', str(tmp_path / 'keys'),
        '--server-endpoint', f'tcp://127.0.0.1:{free_tcp_port()}',
        '--mode', 'nnto',
    ]  # fmt: skip


@pytest.fixture
def recorded_run(ros_domain_id, tmp_path):  # noqa: ANN001, ARG001 - isolates the DDS domain
    bag = tmp_path / 'run'
    result = _run(
        sys.executable, '-m', 'people_following.graph_runner',
        '--source', 'synthetic', '--max-frames', str(FRAMES), '--reliable-sensor-qos',
        '--record-bag', str(bag), '--no-follow', *_graph_args(tmp_path),
    )  # fmt: skip
    assert result.returncode == 0, _log(result)
    return bag


def test_recorded_run_is_reproduced_then_replayed_through_the_graph(recorded_run, tmp_path):
    bag = recorded_run
    metrics_file = bag.parent / 'run.metrics.json'
    recorded = json.loads(metrics_file.read_text())
    assert recorded['image_raw']['frames'] == FRAMES
    assert recorded['people']['frames'] >= 1
    assert recorded['link_state']['connected_fraction'] > 0.0

    # The metrics file, recomputed from the bag alone.
    check = _run(
        sys.executable, '-m', 'people_following.bag_evaluator', str(bag),
        '--out', str(tmp_path / 'check'), '--check', str(metrics_file), '--quiet',
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    assert 'reproduced' in check.stdout
    assert (tmp_path / 'check' / 'metrics.png').stat().st_size > 0

    # The same camera frames through the graph again, as fast as possible.
    replay = _run(
        sys.executable, '-m', 'people_following.bag_evaluator', str(bag),
        '--out', str(tmp_path / 'replay'), '--replay', '--rate', 'max', '--quiet',
        '--graph-args', ' '.join(_graph_args(tmp_path)),
    )  # fmt: skip
    assert replay.returncode == 0, _log(replay)
    replayed = json.loads((tmp_path / 'replay' / 'metrics.json').read_text())
    assert replayed['image_raw']['frames'] == FRAMES
    assert 'people' in replayed, 'no result replayed\n' + _log(replay)
    assert replayed['people']['frames'] >= 1
    modes = {mode.removesuffix('+tracking') for mode in replayed['people']['offload_modes']}
    assert modes <= {'nnto', 'local', 'none'}  # none: tracked before the first detection
    # Replayed frames keep their recorded stamps: the graph's latency is measured from the
    # replayed image, and every result matches one.
    from_image = replayed['people']['latency_from_image_ms']
    assert from_image['count'] == replayed['people']['frames']
    # Measured between the recorder's receipts: a tracked result (tens of ms) can be
    # logged before the recorder has its 1.3 MB image, so the bound is from above only.
    assert from_image['max'] < replayed['people']['latency_ms']['max']
    # A second replay into the same folder would overwrite it: refused.
    again = _run(
        sys.executable, '-m', 'people_following.bag_evaluator', str(bag),
        '--out', str(tmp_path / 'replay'), '--replay', '--quiet',
    )  # fmt: skip
    assert again.returncode == 2
    assert 'exists' in again.stderr
