# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The bridge's per_op and rrto modes over real sockets, and the rrto-run launcher."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from edge_offload.api import Offloader, OffloaderConfig
from edge_offload.client import ClientConfig
from edge_offload.models import load_model
from edge_offload.server import EdgeServer, ServerConfig
from edge_offload_testing import make_test_keys

torch.set_num_threads(1)


@pytest.fixture
def keys(tmp_path):
    return make_test_keys(tmp_path / 'keys')


def _server(keys) -> EdgeServer:
    return EdgeServer(
        ServerConfig(
            endpoint='tcp://127.0.0.1:0',
            models=['resnet18'],
            modes=['nnto', 'per_op', 'rrto'],
            secret_key_file=str(keys.server_secret),
            authorized_clients_dir=str(keys.authorized_clients_dir),
        )
    )


def _offloader(keys, endpoint: str, mode: str) -> Offloader:
    client = ClientConfig(
        endpoint=endpoint,
        secret_key_file=str(keys.robot_secret),
        server_public_key_file=str(keys.server_public),
        request_timeout_s=30.0,
    )
    return Offloader(OffloaderConfig(mode=mode, client=client))


def test_rrto_and_per_op_over_sockets_equal_local(keys) -> None:
    model = load_model('resnet18')
    frames = [
        {'image': torch.rand(1, 3, 224, 224, generator=torch.Generator().manual_seed(i))}
        for i in range(6)
    ]
    with _server(keys) as server, _offloader(keys, server.endpoint, 'rrto') as offloader:
        assert offloader.client.wait_connected(5.0)
        outcomes = [offloader.infer('resnet18', frame) for frame in frames]
        per_op = offloader.infer('resnet18', frames[0], mode='per_op')
        stats = server.stats()
    for frame, outcome in zip(frames, outcomes, strict=True):
        assert not outcome.fell_back, outcome.fallback_reason
        assert outcome.mode_used == 'rrto'
        assert torch.equal(outcome.outputs['logits'], model(frame)['logits'])
    trips = [outcome.stats.round_trips for outcome in outcomes]
    # Recorded per operator (plus the sequence upload), then one round trip each.
    assert min(trips[:3]) > 50
    assert trips[4:] == [1, 1], trips
    # Steady state sends the frame and little else (parameters went up once).
    assert outcomes[5].stats.bytes_up < frames[5]['image'].nbytes * 1.05
    assert per_op.mode_used == 'per_op'
    assert torch.equal(per_op.outputs['logits'], model(frames[0])['logits'])
    assert per_op.stats.round_trips > 50
    assert stats.sessions == 1


def test_dead_server_falls_back_to_local_and_says_why(keys) -> None:
    model = load_model('resnet18')
    frame = {'image': torch.rand(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))}
    with _server(keys) as server:
        endpoint = server.endpoint
        offloader = _offloader(keys, endpoint, 'rrto')
        assert offloader.client.wait_connected(5.0)
        assert not offloader.infer('resnet18', frame).fell_back
    with offloader:
        outcome = offloader.infer('resnet18', frame, deadline=time.monotonic() + 5.0)
    assert outcome.fell_back
    assert outcome.mode_used == 'local'
    assert outcome.fallback_reason
    assert torch.equal(outcome.outputs['logits'], model(frame)['logits'])


_APP = textwrap.dedent(
    """
    import sys
    import torch
    from torch import nn

    torch.manual_seed(0)
    torch.set_num_threads(1)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(8, 4),
    ).eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for step in range(int(sys.argv[1])):
            out = net(torch.rand(1, 3, 32, 32, generator=generator))
            print(step, out.argmax().item(), [round(v, 6) for v in out[0].tolist()])
    """
)


def test_rrto_run_offloads_an_unmodified_program(tmp_path) -> None:
    app = tmp_path / 'app.py'
    app.write_text(_APP)
    plain = subprocess.run(
        [sys.executable, str(app), '7'], capture_output=True, text=True, timeout=120, check=True
    )
    offloaded = subprocess.run(
        [
            sys.executable, '-m', 'rrto_ros.run', '--start-edge-server',
            '--keys-dir', str(tmp_path / 'keys'), str(app), '7',
        ],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert offloaded.returncode == 0, offloaded.stderr
    assert offloaded.stdout == plain.stdout
    assert 'mode rrto' in offloaded.stderr
    summary = re.search(r'rrto: (\d+) inferences replayed, the first at #(\d+)', offloaded.stderr)
    assert summary is not None, offloaded.stderr
    replayed, first = map(int, summary.groups())
    assert replayed >= 3, summary.group(0)
    assert first <= 5, summary.group(0)
    assert 'mode rrto: 7 inferences, 7 offloaded, 0 on the robot' in offloaded.stderr


def test_rrto_run_reports_a_missing_program(tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, '-m', 'rrto_ros.run', str(tmp_path / 'nope.py')],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert 'no such program' in result.stderr


_LOADS_META_KERNELS = textwrap.dedent(
    """
    import logging, sys
    from edge_offload.models import ModelCache
    from edge_offload.modes.base import ServerModeContext
    from rrto_ros.modes import PerOpServerMode, RrtoServerMode

    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format='%(message)s')
    context = ServerModeContext(models=ModelCache(allowed={'tiny_cnn'}))
    modes = [PerOpServerMode(context), RrtoServerMode(context)]
    assert all(mode.meta_kernels_loaded.wait(120) for mode in modes)
    print('loaded', 'torch._dynamo' in sys.modules, 'sympy' in sys.modules)
    """
)


def test_server_halves_load_meta_kernels_once_in_the_background() -> None:
    # A fresh process: what PyTorch loads lazily is loaded once per process, in a thread.
    result = subprocess.run(
        [sys.executable, '-c', _LOADS_META_KERNELS],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert 'loaded True True' in lines, result.stdout
    # The server says when per_op and rrto can answer, once for both.
    ready = [line for line in lines if line.startswith('per_op and rrto ready')]
    assert len(ready) == 1, result.stdout
