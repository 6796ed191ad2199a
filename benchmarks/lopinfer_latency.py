# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Benchmark LOPInfer against device-only, server-only and layer partitioning.

Set-up (printed with the results): robot and edge server share this machine's CPU (no
GPU), one torch thread each. The robot is the ``lopinfer`` mode of the Python API
(``Offloader``, the bridge's code) in this process; the edge server runs headless in its
own process; the link emulator (constant rate both ways, ``--rtt-ms`` round trip, or the
indoor/outdoor mahimahi traces) runs in a third process between them. The robot is slowed
by ``--device-factor`` (each robot operator is followed by a sleep of factor - 1 times its
measured time; 19 by default, the seeds' KAPAO device/server ratio 394 ms / 21 ms). All
four systems run through the same LOP runtime with the plan of their column of the plan
table: device-only, server-only, layer_split (best layer partition per bucket, DSCCS
style) and lopinfer (LOSS). At constant rates the bucket is the emulated rate (as the
paper's ``tc`` sweep: a known rate); over traces it comes from the link monitor. Models
are randomly initialised: latency only.

The default workload is the KAPAO-S people pipeline as the robot runs it (and as the
paper measured it: a small input up, a few KB of people down): a uint8 VGA frame, the
letterbox to 512x640, the network, then NMS as one opaque operator on whichever side
the plan puts it. With random weights NMS keeps almost nothing, so its cost here is a
lower bound. ``--model kapao_s_net`` benchmarks the raw network instead (640x640 float
input, the dense 5.8 MB prediction back to the robot).

Outputs: the planning time; the simulator's predicted latency for every bucket; the
simulated latency over the traces (one sample per 0.5 s trace step: the bucket is the
step's bandwidth, floored, and the plan is simulated at that bandwidth); the real runs
(mean, std, p95 over ``--repeats``, modes interleaved so that they see the same load)
with the simulator's prediction and its error. CSV to ``--out`` and plots when
matplotlib is installed. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from edge_offload.api import Offloader, OffloaderConfig
from edge_offload.client import ClientConfig
from edge_offload.link_traces import PACKET_BYTES, DeliveryTrace
from edge_offload.models import load_model
from edge_offload_testing.offload import (
    HeadlessServer,
    make_test_keys,
    start_link_emulator_process,
)
from lopinfer_ros.graph import capture
from lopinfer_ros.locality import analyse
from lopinfer_ros.modes import LopInferMode, make_plan_table
from lopinfer_ros.plan_table import bucket_for, build_table
from lopinfer_ros.problem import LinkModel
from lopinfer_ros.profiler import build_problem, profile_graph
from lopinfer_ros.simulator import simulate

MODES = ('device_only', 'server_only', 'layer_split', 'lopinfer')
TRACES = {
    'indoor': Path(__file__).resolve().parents[1] / 'src/edge_offload/traces/indoor_93mbps.trace',
    'outdoor': Path(__file__).resolve().parents[1]
    / 'src/edge_offload/traces/outdoor_73mbps.trace',
}


def say(text: str = '') -> None:
    print(text, flush=True)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def summary(values: list[float]) -> dict[str, float]:
    return {
        'mean_ms': 1e3 * statistics.fmean(values),
        'std_ms': 1e3 * (statistics.stdev(values) if len(values) > 1 else 0.0),
        'p95_ms': 1e3 * percentile(values, 0.95),
    }


def start_server(keys, model: str) -> HeadlessServer:
    """Start the headless edge server with the lopinfer and layer_split modes."""
    arguments = ['--modes', 'lopinfer,layer_split', '--worker-threads', '2']
    arguments += ['--torch-threads', '1', '--log-level', 'WARNING']
    return HeadlessServer(keys, [model], *arguments)


def trace_bandwidths(path: Path, step_s: float = 0.5) -> list[float]:
    """Return the trace's bandwidth (bytes/s) in consecutive ``step_s`` windows."""
    trace = DeliveryTrace.load(path)
    counts = [0] * max(1, int(trace.period_s / step_s))
    for at_ms in trace.timestamps_ms:
        index = int(at_ms / (step_s * 1e3))
        if index < len(counts):
            counts[index] += 1
    return [count * PACKET_BYTES / step_s for count in counts]


PAPER_SERVER_S = 0.0210  # the seeds' KAPAO forward on the GPU server (spec 5.10)
PAPER_DEVICE_S = 0.3944  # and on the Jetson


def simulate_paper_speeds(model: str, graph, infos, profile, link_template: LinkModel):
    """Plan and simulate the same graph at the seeds' server and device forward times.

    This CPU runs the server about ten times slower than the seeds' GPU, which makes
    every system here compute-bound on the server. Scaling the profile (server times
    divided, robot times multiplied, so that the whole forward takes 21 ms and 394 ms)
    shows what the planner finds where transfer and compute are as in the paper.
    """
    server_s = sum(seconds[-1] for _, seconds in profile['nodes'])
    speedup = server_s / PAPER_SERVER_S
    factor = PAPER_DEVICE_S / server_s
    problem = build_problem(
        model, graph, infos, profile, device_factor=factor, server_speedup=speedup
    )
    buckets = [2, 4, 9, 10, 11, 12, 16, 30]
    table = build_table(problem, link_template, buckets=buckets, progress=False)
    rows = []
    for bucket in buckets:
        link = dataclasses.replace(link_template, bandwidth_bytes_per_s=bucket * 1e6)
        row = {'bucket_MBps': bucket}
        for mode in MODES:
            row[mode] = 1e3 * simulate(problem, table.plan(mode, bucket), link).makespan_s
        row['lopinfer/layer_split'] = f'{row["lopinfer"] / row["layer_split"]:.3f}'
        rows.append(row)
    return speedup, factor, rows


def simulate_sweeps(problem, table, link_template: LinkModel, traces: dict[str, list[float]]):
    """Predicted latency per bucket and over the traces, for every system."""
    rows = []
    for bucket in range(31):
        bandwidth = max(bucket, 0.25) * 1e6
        link = LinkModel(
            bandwidth_bytes_per_s=bandwidth,
            latency_s=link_template.latency_s,
            per_message_s=link_template.per_message_s,
            per_byte_s=link_template.per_byte_s,
        )
        row = {'bucket_MBps': bucket}
        for mode in MODES:
            row[mode] = 1e3 * simulate(problem, table.plan(mode, bucket), link).makespan_s
        rows.append(row)
    trace_rows = []
    for name, bandwidths in traces.items():
        for mode in MODES:
            values = []
            for bandwidth in bandwidths:
                link = LinkModel(
                    bandwidth_bytes_per_s=max(bandwidth, 1.0),
                    latency_s=link_template.latency_s,
                    per_message_s=link_template.per_message_s,
                    per_byte_s=link_template.per_byte_s,
                )
                plan = table.plan(mode, bucket_for(bandwidth))
                values.append(simulate(problem, plan, link).makespan_s)
            trace_rows.append(
                {'trace': name, 'mode': mode, 'samples': len(values), **summary(values)}
            )
    return rows, trace_rows


def real_runs(
    keys,
    server: HeadlessServer,
    model: str,
    inputs,
    links,
    args,
    plan_dir: Path,
    problem,
    table,
    link_template,
):
    """Run every system over every emulated link; return per (link, mode) rows."""
    rows = []
    for label, rtt_s, rate_bps, trace in links:
        emulator, port = start_link_emulator_process(server.port, rtt_s, rate_bps, trace=trace)
        try:
            offloaders = {}
            for mode in MODES:
                options = {
                    'device_factor': args.device_factor,
                    'plan_dir': str(plan_dir),
                    'plan_kind': mode,
                    'fixed_bandwidth_bytes_per_s': rate_bps / 8 if trace is None else 0.0,
                }
                config = OffloaderConfig(
                    mode='lopinfer',
                    local_models=[model],
                    client=ClientConfig(
                        endpoint=f'tcp://127.0.0.1:{port}',
                        secret_key_file=str(keys.robot_secret),
                        server_public_key_file=str(keys.server_public),
                        request_timeout_s=120.0,
                        # At 1 MB/s a 4.9 MB input holds the link (and the pings queued
                        # behind it) for 5 s: the default 3 s liveness would disconnect.
                        liveness_timeout_s=30.0,
                    ),
                    mode_options={'lopinfer': options},
                )
                offloaders[mode] = Offloader(config)
            for offloader in offloaders.values():
                if not offloader.client.wait_connected(15.0):
                    raise RuntimeError(offloader.client.state_reason)
            times = {mode: [] for mode in MODES}
            fallbacks = dict.fromkeys(MODES, 0)
            for mode, offloader in offloaders.items():  # warm-up: captures, first plans
                if mode != 'device_only':
                    offloader.infer(
                        model, inputs, mode='lopinfer', deadline=time.monotonic() + 120.0
                    )
            for _ in range(args.repeats):
                for mode, offloader in offloaders.items():
                    if mode == 'device_only' and label != links[0][0]:
                        continue  # it uses no link: measured on the first link only
                    started = time.perf_counter()
                    outcome = offloader.infer(
                        model, inputs, mode='lopinfer', deadline=time.monotonic() + 120.0
                    )
                    elapsed = time.perf_counter() - started
                    if outcome.fell_back:
                        fallbacks[mode] += 1
                        say(f'  {label} {mode}: fell back: {outcome.fallback_reason}')
                        continue
                    times[mode].append(elapsed)
            for offloader in offloaders.values():
                offloader.close()
            for mode in MODES:
                if not times[mode]:
                    continue
                row = {'link': label, 'mode': mode, 'runs': len(times[mode])}
                row.update(summary(times[mode]))
                row['fallbacks'] = fallbacks[mode]
                if trace is None:
                    bucket = bucket_for(rate_bps / 8)
                    link = LinkModel(
                        bandwidth_bytes_per_s=rate_bps / 8,
                        latency_s=rtt_s / 2,
                        per_message_s=link_template.per_message_s,
                        per_byte_s=link_template.per_byte_s,
                    )
                    predicted = simulate(problem, table.plan(mode, bucket), link).makespan_s
                    row['simulated_ms'] = 1e3 * predicted
                    row['sim_error_pct'] = (
                        100 * (1e3 * predicted - row['mean_ms']) / row['mean_ms']
                    )
                rows.append(row)
                say(
                    f'  {label:>24} {mode:>12}: {row["mean_ms"]:8.1f} ms '
                    f'(std {row["std_ms"]:.1f}, p95 {row["p95_ms"]:.1f})'
                    + (f' sim {row["simulated_ms"]:.1f}' if 'simulated_ms' in row else '')
                )
        finally:
            emulator.terminate()
            emulator.wait(10)
    return rows


def write_csv(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    names = list(dict.fromkeys(key for row in rows for key in row))
    with path.open('w', newline='') as handle:
        writer = csv.DictWriter(handle, fieldnames=names)
        writer.writeheader()
        writer.writerows(rows)


def markdown(rows: list[dict], columns: list[str]) -> str:
    def fmt(value):
        return f'{value:.1f}' if isinstance(value, float) else str(value)

    lines = ['| ' + ' | '.join(columns) + ' |', '|' + '---|' * len(columns)]
    lines += ['| ' + ' | '.join(fmt(row.get(c, '')) for c in columns) + ' |' for row in rows]
    return '\n'.join(lines)


def plot(sweep_rows, real_rows, out: Path) -> None:
    try:
        import matplotlib  # noqa: PLC0415
    except ImportError:
        say('matplotlib is not installed: no plots (pip install matplotlib)')
        return
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, axis = plt.subplots(figsize=(7, 4.5))
    buckets = [row['bucket_MBps'] for row in sweep_rows]
    for mode in MODES:
        axis.plot(buckets, [row[mode] for row in sweep_rows], label=f'{mode} (simulated)')
    for mode in MODES:
        points = [
            (float(r['link'].split()[0]), r['mean_ms'])
            for r in real_rows
            if r['mode'] == mode and r['link'].endswith('MB/s')
        ]
        if points:
            axis.scatter(*zip(*points, strict=True), marker='o', label=f'{mode} (real)')
    axis.set_xlabel('bandwidth (MB/s)')
    axis.set_ylabel('latency (ms)')
    axis.set_yscale('log')
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(out / 'lopinfer_latency.png', dpi=120)
    say(f'plot: {out / "lopinfer_latency.png"}')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument(
        '--model',
        default='kapao_s',
        help='zoo model (kapao_s: the people pipeline, uint8 image to people, NMS included; '
        'kapao_s_net: the raw network on a 640x640 float image, dense 5.8 MB output)',
    )
    parser.add_argument(
        '--input-shape',
        default='1,3,480,640',
        help='input shape for models that take any image size (default: a VGA frame)',
    )
    parser.add_argument('--device-factor', type=float, default=19.0)
    parser.add_argument('--rates', default='1,2,4,8,16,30', help='MB/s, comma-separated')
    parser.add_argument('--traces', default='indoor,outdoor')
    parser.add_argument('--rtt-ms', type=float, default=2.6)
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--workers', type=int, default=2, help='planner processes')
    parser.add_argument('--out', type=Path, default=Path('results/lopinfer_latency'))
    parser.add_argument('--quick', action='store_true', help='rates 4,10; no traces; 2 runs')
    args = parser.parse_args(argv)
    if args.quick:
        args.rates, args.traces, args.repeats = '4,10', '', 2
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    model = load_model(args.model)
    inputs = model.spec.example_inputs()
    if any(None in spec.shape for spec in model.spec.inputs.values()):
        shape = tuple(int(size) for size in args.input_shape.split(','))
        generator = torch.Generator().manual_seed(0)
        inputs = {
            name: torch.randint(0, 256, shape, generator=generator).to(spec.dtype)
            for name, spec in model.spec.inputs.items()
        }
    tensors = list(inputs.values())
    graph = capture(model.module, tensors)
    infos = analyse(graph)
    local = sum(
        1 for n, i in zip(graph.nodes, infos, strict=True) if n.op != 'input' and not i.atomic
    )
    say(
        f'# LOPInfer benchmark: {args.model}, input {[list(t.shape) for t in tensors]}, '
        f'{len(graph.nodes) - 1} operators ({local} local)'
    )
    say(
        f'set-up: robot and server on this CPU (1 torch thread each, no GPU), device factor '
        f'{args.device_factor}, RTT {args.rtt_ms} ms, rates {args.rates} MB/s, traces '
        f'{args.traces or "none"}, {args.repeats} runs per system and link'
    )
    started = time.monotonic()
    profile = profile_graph(
        graph, infos, tensors, progress=False, device_factor=args.device_factor
    )
    profiled_s = time.monotonic() - started
    started = time.monotonic()
    table = make_plan_table(
        args.model,
        graph,
        infos,
        tensors,
        device_factor=args.device_factor,
        latency_s=args.rtt_ms / 2e3,
        workers=args.workers,
        progress=False,
        profile=profile,
    )
    planned_s = time.monotonic() - started
    plan_dir = args.out / 'plans'
    mode = LopInferMode.__new__(LopInferMode)
    mode.options = {'plan_dir': str(plan_dir)}
    path = mode.table_path(args.model, graph)
    path.parent.mkdir(parents=True, exist_ok=True)
    table.save(path)
    say(
        f'profiling {profiled_s:.1f} s; planning 31 buckets with {args.workers} workers: '
        f'{planned_s:.1f} s'
    )
    problem = build_problem(args.model, graph, infos, profile, device_factor=args.device_factor)
    serialisation = profile['serialisation']
    link_template = LinkModel(
        bandwidth_bytes_per_s=1e6,
        latency_s=args.rtt_ms / 2e3,
        per_message_s=serialisation['per_message_s'],
        per_byte_s=serialisation['per_byte_s'],
    )
    traces = {name: trace_bandwidths(TRACES[name]) for name in args.traces.split(',') if name}
    sweep_rows, trace_rows = simulate_sweeps(problem, table, link_template, traces)
    say('\n## Simulated latency per bucket (ms)')
    say(markdown(sweep_rows, ['bucket_MBps', *MODES]))
    if trace_rows:
        say('\n## Simulated over the traces (one sample per 0.5 s step)')
        say(markdown(trace_rows, ['trace', 'mode', 'samples', 'mean_ms', 'std_ms', 'p95_ms']))
    speedup, factor, paper_rows = simulate_paper_speeds(
        args.model, graph, infos, profile, link_template
    )
    say(
        f"\n## Simulated only, at the seeds' speeds (server {1e3 * PAPER_SERVER_S:.0f} ms, "
        f"device {1e3 * PAPER_DEVICE_S:.0f} ms per forward: this profile's server times / "
        f'{speedup:.1f}, robot x {factor:.2f}, loop timings)'
    )
    say(markdown(paper_rows, ['bucket_MBps', *MODES, 'lopinfer/layer_split']))
    links = [
        (f'{rate:g} MB/s', args.rtt_ms / 1e3, rate * 8e6, None)
        for rate in (float(r) for r in args.rates.split(',') if r)
    ]
    links += [(f'{name} trace', args.rtt_ms / 1e3, 0.0, TRACES[name]) for name in traces]
    say('\n## Real runs')
    with tempfile.TemporaryDirectory() as directory:
        keys = make_test_keys(Path(directory))
        server = start_server(keys, args.model)
        try:
            real_rows = real_runs(
                keys,
                server,
                args.model,
                inputs,
                links,
                args,
                plan_dir,
                problem,
                table,
                link_template,
            )
        finally:
            server.stop()
    say('\n## Real runs (ms)')
    say(
        markdown(
            real_rows,
            [
                'link',
                'mode',
                'runs',
                'mean_ms',
                'std_ms',
                'p95_ms',
                'simulated_ms',
                'sim_error_pct',
                'fallbacks',
            ],
        )
    )
    by = {(r['link'], r['mode']): r for r in real_rows}
    device = next((r['mean_ms'] for r in real_rows if r['mode'] == 'device_only'), None)
    say('\n## Ratios (real means)')
    ratio_rows = []
    for label, *_ in links:
        lop, ls, so = (by.get((label, m)) for m in ('lopinfer', 'layer_split', 'server_only'))
        if not (lop and ls and so and device):
            continue
        ratio_rows.append(
            {
                'link': label,
                'lopinfer/layer_split': f'{lop["mean_ms"] / ls["mean_ms"]:.3f}',
                'lopinfer/slower(device,server)': (
                    f'{lop["mean_ms"] / max(device, so["mean_ms"]):.3f}'
                ),
            }
        )
    say(markdown(ratio_rows, ['link', 'lopinfer/layer_split', 'lopinfer/slower(device,server)']))
    write_csv(args.out / 'simulated_buckets.csv', sweep_rows)
    write_csv(args.out / 'simulated_traces.csv', trace_rows)
    write_csv(args.out / 'real_runs.csv', real_rows)
    write_csv(args.out / 'ratios.csv', ratio_rows)
    plot(sweep_rows, real_rows, args.out)
    return 0


if __name__ == '__main__':
    sys.exit(main())
