# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Measure AccuMO's offload latencies through the edge server; write them for the fast mode.

Set-up (printed, and written as the YAML's ``source``): the headless edge server
(``edge_offload_server``, CURVE on) serves the trained ``accumo_depth`` and
``accumo_odometry`` models in its own process; the robot side is ``Offloader`` in nnto
mode, the code the offload bridge runs, through ``LinkEmulator`` at ``--rate-mbit`` each way
and ``--rtt-ms``. Inputs are real frames of a generated sequence: one RGB frame for depth,
a frame pair 4 frames apart with the intrinsics and the gyro's rotation over the pair for
odometry. Robot and server share this
machine's CPU cores and there is no GPU, so the server times are a CPU's, not an edge GPU's.

The YAML (``--out``) has per task the end-to-end latencies (``latency_ms``: request to
result on the robot) and the server compute times (``server_ms``), the format
``accumo_evaluate --latencies`` draws offload latencies from:

    python benchmarks/accumo_offload_latency.py --dataset results/accumo_dataset
    accumo_evaluate --dataset results/accumo_dataset --output results/accumo_eval_measured
        --latencies results/accumo/offload_latencies.yaml (one command)
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import yaml

from accumo_ros.models import rotation_prior_input, translation_prior_input
from accumo_ros.simulation.dataset import split_paths
from accumo_ros.simulation.sequence_bag import read_sequence_bag
from accumo_ros.tasks.imu_filter import gyro_rotation
from edge_offload.api import Offloader, OffloaderConfig
from edge_offload.client import ClientConfig
from edge_offload.link_emulator import LinkEmulator, LinkEmulatorConfig
from edge_offload_testing import make_test_keys, start_headless_server

ROOT = Path(__file__).resolve().parent.parent
TASK_MODELS = {'depth': 'accumo_depth', 'odometry': 'accumo_odometry'}
VO_PAIR_GAP = 4  # frames between the two images of an odometry request
WARM_UPS = 3


def _image(rgb: np.ndarray) -> torch.Tensor:
    """(H, W, 3) uint8 → the models' (1, 3, H, W) uint8 tensor."""
    return torch.from_numpy(np.ascontiguousarray(rgb)).permute(2, 0, 1)[None].contiguous()


def measure(
    offloader: Offloader, model: str, requests: list[dict[str, torch.Tensor]]
) -> tuple[list[float], list[float]]:
    """Run the requests, the first WARM_UPS unrecorded; return end-to-end and server ms."""
    latency_ms, server_ms = [], []
    for index, inputs in enumerate(requests):
        started = time.perf_counter()
        outcome = offloader.infer(model, inputs, mode='nnto')
        elapsed = time.perf_counter() - started
        if outcome.fell_back:
            raise RuntimeError(f'{model}: the offload fell back ({outcome.fallback_reason})')
        if index >= WARM_UPS:
            latency_ms.append(round(elapsed * 1e3, 3))
            server_ms.append(round(outcome.stats.server_compute_time_s * 1e3, 3))
    return latency_ms, server_ms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dataset', type=Path, default=ROOT / 'results' / 'accumo_dataset')
    parser.add_argument('--requests', type=int, default=60, help='requests per task')
    parser.add_argument('--rate-mbit', type=float, default=93.0, help='link rate each way')
    parser.add_argument('--rtt-ms', type=float, default=2.6, help='link round-trip time')
    parser.add_argument('--torch-threads', type=int, default=1, help='server torch threads')
    parser.add_argument(
        '--out', type=Path, default=ROOT / 'results' / 'accumo' / 'offload_latencies.yaml'
    )
    args = parser.parse_args(argv)
    if args.requests < 1 or args.rate_mbit <= 0 or args.rtt_ms < 0:
        parser.error('--requests and --rate-mbit must be positive, --rtt-ms >= 0')

    # A test set made with --holdout none has only a train split: any sequence will do.
    paths = split_paths(args.dataset, 'heldout') or split_paths(args.dataset, 'train')
    if not paths:
        parser.error(f'no sequences in {args.dataset} (an accumo_generate folder)')
    path = paths[0]
    sequence = read_sequence_bag(path)
    intrinsics = sequence.intrinsics
    camera = torch.tensor(
        [intrinsics.fx, intrinsics.fy, intrinsics.cx, intrinsics.cy], dtype=torch.float32
    )
    frames = len(sequence.frame_times)
    poses = sequence.frame_poses()
    step = max(1, (frames - VO_PAIR_GAP) // (args.requests + WARM_UPS))
    starts = list(range(0, frames - VO_PAIR_GAP, step))[: args.requests + WARM_UPS]
    inputs = {
        'depth': [{'image': _image(sequence.rgb[i])} for i in starts],
        'odometry': [
            {
                'image_1': _image(sequence.rgb[i]),
                'image_2': _image(sequence.rgb[i + VO_PAIR_GAP]),
                'intrinsics': camera,
                # The gyro's rotation over the pair, as the scheduler node sends it.
                'rotation_prior': torch.from_numpy(
                    rotation_prior_input(
                        gyro_rotation(
                            sequence.imu_times,
                            sequence.angular_velocity,
                            float(sequence.frame_times[i]),
                            float(sequence.frame_times[i + VO_PAIR_GAP]),
                        )
                    )
                ),
                # The filter's predicted translation; here the true one (latency only).
                'translation_prior': torch.from_numpy(
                    translation_prior_input(
                        (np.linalg.inv(poses[i]) @ poses[i + VO_PAIR_GAP])[:3, 3]
                    )
                ),
            }
            for i in starts
        ],
    }
    source = (
        f'measured by benchmarks/accumo_offload_latency.py on {time.strftime("%Y-%m-%d")}: '
        f'nnto through LinkEmulator at {args.rate_mbit:g} Mbit/s each way, '
        f"{args.rtt_ms:g} ms RTT; edge server on this machine's CPU ({os.cpu_count()} cores "
        f'shared with the robot side, {args.torch_threads} torch thread(s), no GPU); '
        f'{path.name} frames {intrinsics.width}x{intrinsics.height}'
    )
    print(f'set-up: {source}')  # noqa: T201
    document: dict[str, object] = {'source': source}
    with tempfile.TemporaryDirectory() as keys_dir:
        keys = make_test_keys(Path(keys_dir))
        server, endpoint = start_headless_server(
            keys,
            list(TASK_MODELS.values()),
            '--modes',
            'nnto',
            '--worker-threads',
            '1',
            '--torch-threads',
            str(args.torch_threads),
            '--log-level',
            'WARNING',
        )
        try:
            port = int(endpoint.rsplit(':', 1)[1])
            link = LinkEmulatorConfig.from_rtt(
                '127.0.0.1',
                port,
                rtt_s=args.rtt_ms / 1e3,
                uplink_bps=args.rate_mbit * 1e6,
                downlink_bps=args.rate_mbit * 1e6,
            )
            with LinkEmulator(link) as emulator:
                client = ClientConfig(
                    endpoint=f'tcp://127.0.0.1:{emulator.port}',
                    secret_key_file=str(keys.robot_secret),
                    server_public_key_file=str(keys.server_public),
                    request_timeout_s=30.0,
                )
                config = OffloaderConfig(
                    mode='nnto',
                    fallback_to_local=False,
                    client=client,
                    local_models=list(TASK_MODELS.values()),
                )
                with Offloader(config) as offloader:
                    if not offloader.client.wait_connected(10.0):
                        raise RuntimeError(offloader.client.state_reason)
                    for task, model in TASK_MODELS.items():
                        latency_ms, server_ms = measure(offloader, model, inputs[task])
                        document[task] = {'latency_ms': latency_ms, 'server_ms': server_ms}
        finally:
            server.terminate()
            server.wait(timeout=10.0)
    print('| task | n | latency mean ms | p50 | p95 | server p50 ms |')  # noqa: T201
    print('|---|---|---|---|---|---|')  # noqa: T201
    for task in TASK_MODELS:
        latency = sorted(document[task]['latency_ms'])
        p95 = latency[min(len(latency) - 1, round(0.95 * (len(latency) - 1)))]
        print(  # noqa: T201
            f'| {task} | {len(latency)} | {statistics.fmean(latency):.1f} | '
            f'{statistics.median(latency):.1f} | {p95:.1f} | '
            f'{statistics.median(document[task]["server_ms"]):.1f} |'
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(yaml.safe_dump(document, sort_keys=False, width=100))
    print(f'latencies -> {args.out}')  # noqa: T201
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
