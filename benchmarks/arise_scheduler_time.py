# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Time one run of ARISE's scheduler (Step 1 + simulate / adjust / verify / apply).

Set-up (printed): this CPU, one Python thread; ``--clients`` admitted robots with SLAs
drawn from [0.02, 0.06] and drop rates from [0.0005, 0.002] per frame (all 50 fit), at ``--fps``; a
GPU-like batch latency curve (``7 + 3·bs`` ms, batch sizes 1-16: the shape of the
dissertation's Fig. 3.12, not a measurement); a 1 s horizon every 200 ms. Two cases: no
robot waiting (one plan per run), and robots waiting (each run also tries to admit one, a
second plan). The first 20 runs (admission) are not timed. Nothing is asserted; the table
is the output.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from arise_ros.latency_profile import gpu_like_profile
from arise_ros.scheduler import AriseScheduler, ClientState, SchedulerConfig, plan_stats

GPU_LIKE = gpu_like_profile()


def _fleet(count: int, fps: float, seed: int) -> list[ClientState]:
    rng = random.Random(seed)  # noqa: S311 - a seeded, reproducible fleet
    return [
        ClientState(
            f'r{index}',
            fps,
            rng.uniform(0.02, 0.06),
            0.008,
            0.004,
            rng.randrange(10_000),
            0.0,
            drop_rate=rng.uniform(0.0005, 0.002),
        )
        for index in range(count)
    ]


def measure(count: int, fps: float, waiting: int, runs: int, seed: int) -> dict:
    scheduler = AriseScheduler(GPU_LIKE, SchedulerConfig(max_admissions_per_run=count))
    fleet = _fleet(count + waiting, fps, seed)
    for client in fleet[:count]:
        scheduler.request_admission(client)
    for step in range(20):
        scheduler.run(step * 0.2)
    for client in fleet[count:]:
        # Robots that will not fit: each run tries one and refuses it.
        client.drop_rate = 0.05
        scheduler.request_admission(client)
    times = []
    plan = None
    for step in range(20, 20 + runs):
        started = time.perf_counter()
        plan = scheduler.run(step * 0.2)
        times.append(time.perf_counter() - started)
    times.sort()
    stats = plan_stats(plan.batches)
    return {
        'admitted': len(scheduler.clients),
        'requests': stats.requests,
        'p50_ms': 1e3 * statistics.median(times),
        'p99_ms': 1e3 * times[min(len(times) - 1, int(0.99 * len(times)))],
        'max_ms': 1e3 * times[-1],
        'mean_batch': stats.mean_batch_size,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--clients', default='10,25,50', help='comma-separated fleet sizes')
    parser.add_argument('--fps', type=float, default=30.0)
    parser.add_argument('--runs', type=int, default=500)
    parser.add_argument('--seed', type=int, default=1)
    args = parser.parse_args(argv)
    print(f'set-up: {GPU_LIKE.source}; fps {args.fps:g}; horizon 1 s; {args.runs} timed runs')
    print(
        '| clients | waiting | admitted | requests/plan | mean batch | p50 ms | p99 ms | max ms |'
    )
    print('|---|---|---|---|---|---|---|---|')
    for count in (int(value) for value in args.clients.split(',')):
        for waiting in (0, 5):
            row = measure(count, args.fps, waiting, args.runs, args.seed)
            print(
                f'| {count} | {waiting} | {row["admitted"]} | {row["requests"]} | '
                f'{row["mean_batch"]:.2f} | {row["p50_ms"]:.2f} | {row["p99_ms"]:.2f} | '
                f'{row["max_ms"]:.2f} |'
            )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
