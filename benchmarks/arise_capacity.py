# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Capacity of one edge server under ARISE and the baselines, side by side in one run.

Plan-level simulation (``arise_ros.fleet_sim``): the server takes exactly its profile's
latency per batch, links fixed delays. Set-up (printed): robots at ``--fps`` arrive as a
Poisson process (``--arrivals`` per s, mean stay ``--stay`` s), one SLA per block. Each
robot's scene drop rate (AbsRel per frame of tracking stride) is one of those measured on
the 20 generated sequences (``--rates-file``, by default ``benchmarks/data/
arise_drop_rates.csv`` from ``arise_drop_rates.py``; 60 fps, their frame rate), or uniform
in ``--rates`` where that is given (the earlier set-up: ``--fps 30 --rates 0.002,0.006
--duration 60 --warmup 15``). Two profiles: a GPU-like curve (``7 + 3·bs`` ms, batch sizes
1-16, the shape of the dissertation's Fig. 3.12, not a measurement) and the trained server
depth net measured on this CPU (96x128 frames, batch sizes 1-8). Each robot's camera has
its own phase. Static's robot count, interval and batch size are searched on three pilot
fleets (other draws from the same ranges), then run over this fleet. The dynamic baselines
run twice: taking and shedding robots on pending requests, as the dissertation's do
(§3.6.3), and with ARISE's own verify (stronger); ARISE is compared with the best of the
dissertation's (Static included) and with the best of all. Reported per system: mean
concurrent robots (after ``--warmup`` s); the same counting only the robots whose realised
drop over their stay met their SLA (those it supported: the ratios compare these); the share
of its robots that met it; the worst realised drop / SLA; mean batch size; server idle
share; and the mean scene drop rate of the robots it held (below the fleet's mean where
admission kept the cheaper scenes and sent the costly ones to the back of the waiting list).
ARISE's note: its load, the server time a second its robots would take at their Step 1
interval and batch size and at the ones it planned (shorter where verify tightened a robot),
grace included (near 100 %, no packing fits another robot at those settings); and the Step 1
bound, the robots drawn from the fleet's ranges that fill the server at Step 1's settings.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

from arise_ros.fleet_sim import ADMISSIONS, FleetSpec, run_dynamic, run_static, step1_bound
from arise_ros.latency_profile import BatchLatencyProfile, gpu_like_profile, measure_profile
from arise_ros.scene_drop import TRUTHS, read_rates
from arise_ros.scheduler import SchedulerConfig

GPU_LIKE = gpu_like_profile()
MEASURED_RATES = Path(__file__).resolve().parent / 'data' / 'arise_drop_rates.csv'
MEASURED_FPS = 60.0  # the generated sequences' frame rate, at which the rates were measured


def cpu_profile(threads: int) -> BatchLatencyProfile:
    from edge_offload.models import load_model

    torch.set_num_threads(threads)
    model = load_model('accumo_depth')
    frame = {'image': torch.zeros((1, 3, 96, 128), dtype=torch.uint8)}
    return measure_profile(
        'accumo_depth',
        lambda size: model.run_batch([frame] * size),
        8,
        f'server depth net measured on this CPU, 96x128, {threads} torch threads',
        repeats=3,
        warmup=1,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--slas', default='0.02,0.04,0.06')
    parser.add_argument(
        '--rates', help='low,high: rates uniform in it, instead of the measured ones'
    )
    parser.add_argument(
        '--rates-file',
        type=Path,
        default=MEASURED_RATES,
        help='measured rates (arise_drop_rates.py --out; by default the 20 generated '
        'sequences, at 60 fps): each robot draws one of them',
    )
    parser.add_argument(
        '--rates-truth',
        choices=TRUTHS,
        default='server',
        help="which measured rate: against the server's maps (the dissertation's) or ground truth",
    )
    parser.add_argument('--fps', type=float, default=60.0)
    parser.add_argument('--arrivals', type=float, default=6.0)
    parser.add_argument('--stay', type=float, default=60.0)
    parser.add_argument('--duration', type=float, default=180.0)
    parser.add_argument('--warmup', type=float, default=30.0)
    parser.add_argument('--uplink', type=float, default=0.009, help='s; 5G-like by default')
    parser.add_argument('--downlink', type=float, default=0.004)
    parser.add_argument('--profiles', default='gpu_like,cpu')
    parser.add_argument('--threads', type=int, default=2)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument(
        '--headroom', type=float, default=None, help='admission headroom (default: the config)'
    )
    args = parser.parse_args(argv)
    if args.rates:
        low, high = (float(v) for v in args.rates.split(','))
        choices: tuple[float, ...] = ()
    else:
        low, high = FleetSpec().rate_range  # unused: the measured rates are drawn
        try:
            choices = read_rates(args.rates_file, args.rates_truth)
        except (OSError, ValueError) as error:
            parser.error(f'--rates-file: {error}')
        if args.fps != MEASURED_FPS:
            print(f'note: the measured rates are per frame at {MEASURED_FPS:g} fps')
    rates = FleetSpec(rate_range=(low, high), rate_choices=choices)
    rates_text = f'{rates.describe_rates()}, mean {rates.mean_rate():.4f}'
    if choices:
        shown = os.path.relpath(args.rates_file)
        rates_text += f' against {args.rates_truth} ({shown})'
    profiles = {}
    for name in args.profiles.split(','):
        profiles[name] = GPU_LIKE if name == 'gpu_like' else cpu_profile(args.threads)
    print(
        f'set-up: {args.fps:g} fps; {rates_text}; arrivals {args.arrivals}/s, '
        f'mean stay {args.stay} s, {args.duration} s simulated, first {args.warmup} s not '
        f'counted; uplink {args.uplink * 1e3:g} ms, downlink {args.downlink * 1e3:g} ms; '
        f'seed {args.seed}; admission headroom '
        f'{args.headroom if args.headroom is not None else SchedulerConfig().admission_headroom}'
    )
    for name, profile in profiles.items():
        latencies = ', '.join(
            f'{n}: {1e3 * profile.latency(n):.1f}' for n in range(1, profile.max_batch + 1)
        )
        print(f'\nprofile {name}: {profile.source}; ms by batch size {{{latencies}}}')
        print(
            '\n| SLA | system | admission | robots | robots within SLA | in SLA | '
            'worst drop/SLA | mean batch | idle | mean rate held | '
            "ARISE vs the dissertation's baselines; vs all | note |"
        )
        print('|---|---|---|---|---|---|---|---|---|---|---|---|')
        for sla in (float(v) for v in args.slas.split(',')):
            spec = FleetSpec(
                fps=args.fps,
                sla_range=(sla, sla),
                rate_range=(low, high),
                rate_choices=choices,
                uplink_s=args.uplink,
                downlink_s=args.downlink,
                arrivals_per_s=args.arrivals,
                mean_stay_s=args.stay,
                duration_s=args.duration,
                warmup_s=args.warmup,
                seed=args.seed,
            )
            started = time.perf_counter()
            config = SchedulerConfig(max_waiting=100_000, max_admissions_per_run=8)
            if args.headroom is not None:
                config = SchedulerConfig(
                    max_waiting=100_000, max_admissions_per_run=8, admission_headroom=args.headroom
                )
            static, interval = run_static(profile, spec, config=config)
            results = [static] + [
                run_dynamic(
                    system, profile, spec, interval=interval, config=config, admission=admission
                )
                for admission in ADMISSIONS
                for system in ('clipper', 'chameleon', 'arise_alpha')
            ]
            admissions = ['fixed count'] + [a for a in ADMISSIONS for _ in range(3)]
            arise = run_dynamic('arise', profile, spec, config=config)
            # The dissertation's baselines: Static and the pending-request ones.
            theirs = max(
                (r for r, a in zip(results, admissions, strict=True) if a != 'verify'),
                key=lambda r: r.mean_clients_within_sla,
            )
            best = max(results, key=lambda r: r.mean_clients_within_sla)
            for result, admission in [*zip(results, admissions, strict=True), (arise, 'verify')]:
                worst = max(
                    (result.drops[c] / result.slas[c] for c in result.drops if result.slas[c]),
                    default=0.0,
                )
                ratio = note = ''
                if result.system == 'static':
                    note = result.detail
                elif result.system == 'clipper':
                    note = f'interval {interval}'
                if result is arise:
                    ratio = (
                        f'{arise.mean_clients_within_sla / theirs.mean_clients_within_sla:.2f}x '
                        f'({theirs.system}); '
                        f'{arise.mean_clients_within_sla / best.mean_clients_within_sla:.2f}x '
                        f'({best.system}, {admissions[results.index(best)]})'
                    )
                    bound = step1_bound(profile, spec, config)
                    note = (
                        f'load {100 * result.step1_load:.0f} % at Step 1 settings, '
                        f'{100 * result.planned_load:.0f} % as planned; '
                        f'Step 1 bound {bound:.1f}'
                    )
                print(
                    f'| {sla:g} | {result.system} | {admission} | {result.mean_clients:.1f} | '
                    f'{result.mean_clients_within_sla:.1f} | '
                    f'{100 * result.within_sla:.0f} % of {len(result.drops)} | {worst:.2f} | '
                    f'{result.mean_batch:.2f} | {100 * result.idle_fraction:.0f} % | '
                    f'{result.held_rate:.4f} | {ratio} | '
                    f'{note} |'
                )
            print(f'<!-- SLA {sla:g}: {time.perf_counter() - started:.0f} s -->')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
