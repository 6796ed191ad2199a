# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Benchmark: one robot floods the edge server with heavy calls; another must not suffer.

Set-up (printed with the results): the edge server runs headless in its own process
(``edge_offload_server``, CURVE on loopback, ``--worker-threads`` workers, each model
computing with ``--torch-threads`` intra-op threads). Two robots with different keys:

* the *light* robot (this process, an ``EdgeClient``) calls ``tiny_cnn`` on one 64x64
  image, one call at a time, ``--calls`` times;
* the *heavy* robot (its own process, so its encoding does not share this process's
  interpreter lock) keeps ``--heavy-inflight`` ``resnet18`` calls of batch
  ``--heavy-batch`` at 224x224 in flight for as long as the light robot measures, and
  counts its answers and refusals.

The light robot is measured twice, side by side in one run: alone, then under the
flood. The claim checked: under the flood its p99 stays within 2x of its unloaded p99
and it gets every answer. Both robots and the server share this machine's cores (no
GPU). Models are randomly initialised: only latency is measured.

    python benchmarks/server_fairness.py            # prints the table
    python benchmarks/server_fairness.py --calls 400 --heavy-batch 32
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from edge_offload.client import ClientConfig, EdgeClient
from edge_offload.modes.base import OffloadError
from edge_offload_testing import authorize_robot, make_test_keys, start_headless_server


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def _client(endpoint: str, secret: Path, server_public: Path, name: str) -> EdgeClient:
    return EdgeClient(
        ClientConfig(
            endpoint=endpoint,
            client_name=name,
            secret_key_file=str(secret),
            server_public_key_file=str(server_public),
            request_timeout_s=120.0,
        )
    )


def _heavy_robot(
    endpoint: str,
    secret: str,
    server_public: str,
    batch: int,
    inflight: int,
    stop: multiprocessing.Event,
    counts: multiprocessing.Array,
) -> None:
    """Keep ``inflight`` heavy calls in flight until ``stop``; count answers, refusals."""
    torch.set_num_threads(1)
    images = {'image': torch.rand(batch, 3, 224, 224)}
    with _client(endpoint, Path(secret), Path(server_public), 'heavy') as client:
        if not client.wait_connected(30.0):
            return
        futures = []
        while not stop.is_set():
            futures = [future for future in futures if not future.done()]
            while len(futures) < inflight:
                try:
                    futures.append(client.submit('nnto', 'infer', {'model': 'resnet18'}, images))
                except OffloadError:
                    break
            time.sleep(0.005)
            for future in list(futures):
                if future.done():
                    try:
                        future.result(0)
                        counts[0] += 1
                    except OffloadError:
                        counts[1] += 1


def _measure_light(client: EdgeClient, calls: int) -> tuple[list[float], int]:
    image = {'image': torch.rand(1, 3, 64, 64)}
    latencies = []
    failures = 0
    for _ in range(calls):
        started = time.perf_counter()
        try:
            client.call('nnto', 'infer', {'model': 'tiny_cnn'}, image, timeout_s=60.0)
        except OffloadError as error:
            failures += 1
            print(f'  light robot call failed: {error}', file=sys.stderr)  # noqa: T201
            continue
        latencies.append(time.perf_counter() - started)
    return latencies, failures


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--calls', type=int, default=1000, help='light robot calls per phase')
    parser.add_argument('--heavy-batch', type=int, default=32)
    parser.add_argument('--heavy-inflight', type=int, default=4)
    parser.add_argument('--worker-threads', type=int, default=2)
    parser.add_argument('--torch-threads', type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    keys = make_test_keys(Path(tempfile.mkdtemp(prefix='fairness-')) / 'keys')
    heavy_secret = authorize_robot(keys, 'heavy')
    server, endpoint = start_headless_server(
        keys,
        ['tiny_cnn', 'resnet18'],
        '--worker-threads',
        str(args.worker_threads),
        '--torch-threads',
        str(args.torch_threads),
        '--max-inflight-per-client',
        str(max(4, args.heavy_inflight)),
        '--max-inflight-per-key',
        str(max(8, args.heavy_inflight)),
        '--max-batch-per-call',
        str(max(32, args.heavy_batch)),
    )
    print(  # noqa: T201
        f'set-up: loopback, CURVE; server {args.worker_threads} workers x '
        f'{args.torch_threads} torch threads; {os.cpu_count()} cores shared by server and '
        f'both robots; light robot: tiny_cnn 1x3x64x64, one call at a time, {args.calls} '
        f'calls per phase; heavy robot: resnet18 {args.heavy_batch}x3x224x224 '
        f'({args.heavy_batch * 3 * 224 * 224 * 4 / 1e6:.0f} MB a call), '
        f'{args.heavy_inflight} in flight'
    )
    try:
        with _client(endpoint, keys.robot_secret, keys.server_public, 'light') as light:
            if not light.wait_connected(30.0):
                print('light robot could not connect', file=sys.stderr)  # noqa: T201
                return 1
            _measure_light(light, 20)  # warm-up
            alone, alone_failures = _measure_light(light, args.calls)
            context = multiprocessing.get_context('spawn')
            stop = context.Event()
            counts = context.Array('i', [0, 0])
            heavy = context.Process(
                target=_heavy_robot,
                args=(
                    endpoint,
                    str(heavy_secret),
                    str(keys.server_public),
                    args.heavy_batch,
                    args.heavy_inflight,
                    stop,
                    counts,
                ),
            )
            heavy.start()
            time.sleep(5.0)  # the flood is under way: every worker could be busy
            flooded, flooded_failures = _measure_light(light, args.calls)
            stop.set()
            heavy.join(timeout=60.0)
            if heavy.is_alive():
                heavy.kill()
    finally:
        server.terminate()
        server.wait(timeout=10.0)
    rows = [('alone', alone, alone_failures), ('heavy robot flooding', flooded, flooded_failures)]
    print(  # noqa: T201
        f'\n{"light robot":<22}{"answers":>10}{"failed":>8}{"p50 ms":>9}{"p99 ms":>9}{"max ms":>9}'
    )
    for name, samples, failures in rows:
        print(  # noqa: T201
            f'{name:<22}{len(samples):>10}{failures:>8}'
            f'{statistics.median(samples) * 1e3:>9.1f}{_percentile(samples, 0.99) * 1e3:>9.1f}'
            f'{max(samples) * 1e3:>9.1f}'
        )
    ratio = _percentile(flooded, 0.99) / _percentile(alone, 0.99)
    print(  # noqa: T201
        f'\nheavy robot: {counts[0]} answers, {counts[1]} refused or failed while measured'
        f'\nlight robot p99 under the flood / alone: {ratio:.2f}x (target <= 2x); '
        f'every answer: {"yes" if not flooded_failures else "NO"}'
    )
    return 0 if ratio <= 2.0 and not flooded_failures else 1


if __name__ == '__main__':
    sys.exit(main())
