# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""ARISE with emulated robots on real sockets, each behind its own emulated link.

The server is a real ``edge_offload_server`` process serving the ``arise`` mode with the
trained server depth net. Robots arrive as a Poisson process (``--arrivals`` per s) and stay
an exponential time (mean ``--stay`` s); each is an ``arise_emulated_robot`` process (real
protocol, real frames, emulated tracking: ``drop = rate × stride``, scene rates uniform in
``--rates``) connected through a link emulator of its own (one ``LinkEmulator`` per robot,
so links are independent): LTE-like or 5G-like (rates, RTT and jitter printed; they are
profiles, not traces of a real network). Each (link, policy) block runs the same arrivals;
policy ``planned`` is ARISE, ``reactive`` is ARISE-α (the same admission, no coordinated
batches). The server measures its latency profile at start-up on this CPU unless
``--profile-file`` names one.

Reported per block, after ``--warmup`` s: robots admitted at once (mean and most, from the
server's own counts every 0.5 s), robots that arrived and that were ever admitted, the
share of admitted robots whose realised mean drop met their SLA and the worst drop / SLA,
the server's mean batch size and idle share, and the longest time a robot went without a
fresh result. Writes ``summary.json`` and ``drop_cdf.png`` to ``--out``. Nothing is
asserted.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from edge_offload.keys import ensure_keys
from edge_offload.link_emulator import LinkEmulator
from edge_offload.link_shaping import LinkEmulatorConfig
from edge_offload.node_processes import free_tcp_port

# Bytes on the wire per offloaded frame (96x128 RGB) and per depth map back (float32).
FRAME_BYTES = 96 * 128 * 3 + 512
DEPTH_BYTES = 96 * 128 * 4 + 512


@dataclass(frozen=True)
class LinkProfile:
    """An emulated access link (a profile with published-typical figures, not a trace)."""

    name: str
    rtt_s: float
    jitter_s: float
    uplink_bps: float
    downlink_bps: float

    def one_way_s(self, payload_bytes: int, bps: float) -> float:
        return self.rtt_s / 2 + payload_bytes * 8 / bps


LINKS = {
    'lte': LinkProfile('LTE-like', 0.050, 0.005, 12e6, 40e6),
    '5g': LinkProfile('5G-like', 0.016, 0.002, 60e6, 200e6),
}


@dataclass(frozen=True)
class Arrival:
    index: int
    at_s: float
    stay_s: float
    rate: float


def arrivals(args: argparse.Namespace) -> list[Arrival]:
    """Return the Poisson arrivals (seeded: every block runs the same fleet)."""
    generator = random.Random(args.seed)  # noqa: S311 - a seeded workload, not a secret
    low, high = (float(v) for v in args.rates.split(','))
    result, now = [], 0.0
    while len(result) < args.max_robots:
        now += generator.expovariate(args.arrivals)
        if now >= args.duration:
            break
        stay = min(generator.expovariate(1.0 / args.stay), args.duration - now)
        result.append(Arrival(len(result), now, max(stay, 3.0), generator.uniform(low, high)))
    return result


def run_block(
    args: argparse.Namespace, link: LinkProfile, policy: str, fleet: list[Arrival], work: Path
) -> dict:
    names = [f'robot_{arrival.index}' for arrival in fleet]
    keys = ensure_keys(work / 'keys', names)
    port = free_tcp_port()
    stats_file = work / f'stats_{link.name}_{policy}.jsonl'
    stats_file.unlink(missing_ok=True)
    command = [
        *(sys.executable, '-m', 'edge_offload.server'),
        *('--endpoint', f'tcp://127.0.0.1:{port}', '--models', 'accumo_depth'),
        *('--modes', 'arise', '--mode-option', f'arise.policy={policy}'),
        *('--mode-option', f'arise.max_batch={args.max_batch}'),
        *('--secret-key-file', keys['server_secret']),
        *('--authorized-clients-dir', keys['authorized']),
        *('--torch-threads', str(args.threads), '--stats-period-s', '0.5'),
        *('--stats-file', str(stats_file), '--max-clients', '256'),
        *('--max-sessions-per-key', '2', '--log-level', 'WARNING'),
    ]
    if args.profile_file:
        command += ['--mode-option', f'arise.profile_file={args.profile_file}']
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    if 'listening' not in line:
        raise RuntimeError(f'the edge server did not start: {line!r}')
    emulators: list[LinkEmulator] = []
    robots: dict[str, subprocess.Popen] = {}
    uplink_s = link.one_way_s(FRAME_BYTES, link.uplink_bps)
    downlink_s = link.one_way_s(DEPTH_BYTES, link.downlink_bps)
    started = time.monotonic()
    try:
        for arrival in fleet:
            time.sleep(max(0.0, started + arrival.at_s - time.monotonic()))
            emulator = LinkEmulator(
                LinkEmulatorConfig.from_rtt(
                    '127.0.0.1',
                    port,
                    rtt_s=link.rtt_s,
                    jitter_s=link.jitter_s,
                    uplink_bps=link.uplink_bps,
                    downlink_bps=link.downlink_bps,
                    seed=arrival.index,
                )
            )
            emulator.start()
            emulators.append(emulator)
            name = names[arrival.index]
            robots[name] = subprocess.Popen(
                [
                    *(sys.executable, '-m', 'arise_ros.emulated_robot', '--name', name),
                    *('--endpoint', f'tcp://127.0.0.1:{emulator.port}'),
                    *('--secret-key-file', keys[f'{name}_secret']),
                    *('--server-public-key-file', keys['server_public']),
                    *('--fps', str(args.fps), '--sla', str(args.sla)),
                    *('--rate', f'{arrival.rate:.5f}', '--duration-s', f'{arrival.stay_s:.2f}'),
                    *('--uplink-s', f'{uplink_s:.4f}', '--downlink-s', f'{downlink_s:.4f}'),
                    *('--summary', str(work / f'{name}.json')),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        for robot in robots.values():
            robot.wait(timeout=args.stay * 10 + 60)
    finally:
        for robot in robots.values():
            if robot.poll() is None:
                robot.kill()
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
        for emulator in emulators:
            emulator.stop()
    return summarise(args, link, policy, fleet, names, stats_file, work)


def summarise(args, link, policy, fleet, names, stats_file: Path, work: Path) -> dict:  # noqa: ANN001
    admitted_counts, batch_sizes, idle = [], [], []
    for line in stats_file.read_text().splitlines():
        snapshot = json.loads(line)
        if snapshot['t'] < args.warmup:
            continue
        fleet_status = next(
            (m for m in snapshot['modes'] if m['name'] == 'arise fleet'), {'values': {}}
        )
        values = fleet_status['values']
        if 'admitted' in values:
            admitted_counts.append(int(values['admitted']))
        if float(values.get('mean batch size', 0) or 0) > 0:
            batch_sizes.append(float(values['mean batch size']))
        if 'idle share' in values:
            idle.append(float(values['idle share']))
    summaries = []
    for name in names:
        path = work / f'{name}.json'
        if path.is_file():
            summaries.append(json.loads(path.read_text()))
    served = [s for s in summaries if any(status == 'admitted' for _, status in s['statuses'])]
    ratios = [s['mean_drop'] / s['sla'] for s in served if s['server_results'] > 0]
    return {
        'link': link.name,
        'policy': policy,
        'arrived': len(fleet),
        'summaries': len(summaries),
        'ever_admitted': len(served),
        'admitted_mean': statistics.fmean(admitted_counts) if admitted_counts else 0.0,
        'admitted_max': max(admitted_counts, default=0),
        'within_sla': sum(r <= 1.0 for r in ratios) / len(ratios) if ratios else 0.0,
        'worst_drop_over_sla': max(ratios, default=0.0),
        'drop_over_sla': ratios,
        'mean_batch': statistics.fmean(batch_sizes) if batch_sizes else 0.0,
        'idle_share': statistics.fmean(idle) if idle else 1.0,
        'longest_gap_s': max((s['longest_gap_s'] for s in summaries), default=0.0),
        'failed_calls': sum(s['failed'] for s in summaries),
        # The first failures of each robot, by kind (the robots keep up to 10 each).
        'failure_kinds': dict(
            collections.Counter(
                failure.split(': ', 1)[-1][:80] for s in summaries for failure in s['failures']
            ).most_common(5)
        ),
        'robots': summaries,
    }


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for result in results:
        ratios = sorted(result['drop_over_sla'])
        if ratios:
            shares = [(i + 1) / len(ratios) for i in range(len(ratios))]
            axes.step(ratios, shares, where='post', label=f'{result["link"]} {result["policy"]}')
    axes.axvline(1.0, color='grey', linestyle=':')
    axes.set_xlabel('realised mean drop / SLA, per admitted robot')
    axes.set_ylabel('share of robots')
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--links', default='5g,lte')
    parser.add_argument('--policies', default='planned,reactive')
    parser.add_argument('--sla', type=float, default=0.04)
    parser.add_argument('--rates', default='0.002,0.006')
    parser.add_argument('--fps', type=float, default=30.0)
    parser.add_argument('--arrivals', type=float, default=0.5, help='robots per s (Poisson)')
    parser.add_argument('--stay', type=float, default=40.0, help='mean stay, s (exponential)')
    parser.add_argument('--duration', type=float, default=90.0)
    parser.add_argument('--warmup', type=float, default=20.0)
    parser.add_argument('--max-robots', type=int, default=60)
    parser.add_argument('--max-batch', type=int, default=8)
    parser.add_argument('--threads', type=int, default=2, help='the server’s torch threads')
    parser.add_argument('--profile-file', default='', help="'' = measured at start-up")
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--out', type=Path, default=Path('results/arise_fleet_emulated'))
    args = parser.parse_args(argv)
    # The relays log each robot's connection closing as it leaves: expected here.
    logging.getLogger('edge_offload.link_emulator').setLevel(logging.ERROR)
    fleet = arrivals(args)
    links = [LINKS[name] for name in args.links.split(',')]
    policies = args.policies.split(',')
    args.out.mkdir(parents=True, exist_ok=True)
    print(  # noqa: T201 - the set-up
        f'Set-up: one edge_offload_server (arise, accumo_depth, max batch {args.max_batch}, '
        f'{args.threads} torch threads, profile '
        f'{args.profile_file or "measured at start-up on this CPU"}); {len(fleet)} robots '
        f'arriving at {args.arrivals}/s over {args.duration:g} s (mean stay {args.stay:g} s, '
        f'seed {args.seed}), {args.fps:g} fps, SLA {args.sla}, scene rates U({args.rates}); '
        'each robot its own link emulator; counted after '
        f'{args.warmup:g} s. Links: '
        + '; '.join(
            f'{link.name} RTT {link.rtt_s * 1e3:.0f}±{link.jitter_s * 1e3:.0f} ms, up '
            f'{link.uplink_bps / 1e6:g} / down {link.downlink_bps / 1e6:g} Mbit/s'
            for link in links
        )
    )
    results = []
    with tempfile.TemporaryDirectory(prefix='arise_fleet_') as scratch:
        for link in links:
            for policy in policies:
                began = time.monotonic()
                work = Path(scratch) / f'{link.name}_{policy}'
                work.mkdir()
                result = run_block(args, link, policy, fleet, work)
                for stats in work.glob('stats_*.jsonl'):  # the server's own view, kept
                    (args.out / stats.name).write_bytes(stats.read_bytes())
                result['wall_s'] = round(time.monotonic() - began, 1)
                results.append(result)
    print(  # noqa: T201
        '\n| link | system | admitted at once (mean / most) | arrived / ever admitted | '
        'admitted within SLA | worst drop / SLA | mean batch | idle share | longest gap s '
        '| failed calls |\n|---|---|---|---|---|---|---|---|---|---|'
    )
    for r in results:
        system = 'ARISE' if r['policy'] == 'planned' else 'ARISE-α'
        print(  # noqa: T201
            f'| {r["link"]} | {system} | {r["admitted_mean"]:.1f} / {r["admitted_max"]} | '
            f'{r["arrived"]} / {r["ever_admitted"]} | {r["within_sla"] * 100:.0f} % | '
            f'{r["worst_drop_over_sla"]:.2f} | {r["mean_batch"]:.2f} | {r["idle_share"]:.2f} '
            f'| {r["longest_gap_s"]:.2f} | {r["failed_calls"]} |'
        )
    for r in results:
        if r['failure_kinds']:
            print(f'{r["link"]} {r["policy"]}: failures {r["failure_kinds"]}')  # noqa: T201
    (args.out / 'summary.json').write_text(json.dumps(results, indent=1))
    plot(results, args.out / 'drop_cdf.png')
    print(f'wrote {args.out / "summary.json"} and {args.out / "drop_cdf.png"}')  # noqa: T201
    return 0


if __name__ == '__main__':
    sys.exit(main())
