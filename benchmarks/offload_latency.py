# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Benchmark the offload substrate: protocol round trip, local vs nnto, and a soak.

Set-up (printed with the results): the edge server runs headless in its own process
(``edge_offload_server``); the robot side is the Python API (``Offloader``) in this
process, the same code the offload bridge runs. Links are emulated in user space by
``LinkEmulator`` (constant rate and RTT, or the shipped mahimahi traces). Robot and server
share this machine's CPU cores: there is no GPU, so the server computes no faster than the
robot unless ``--robot-slowdown`` emulates a slower robot (it stretches every local
compute by that factor with a sleep, and is printed). Models are randomly initialised:
only their latency is measured.

Parts:
1. raw protocol round trip on loopback (``probe`` echo; 0 B .. 1 MiB payloads);
2. ``local`` vs ``nnto`` latency (mean, p50, p95) for one model at 93 Mbit/s / 2.6 ms RTT
   and 73 Mbit/s / 5 ms RTT (the seeds' indoor and outdoor means), and on the two traces;
3. with ``--soak-s``: the ROS offload bridge and edge server nodes serve goals at
   ``--soak-rate`` per second; the resident memory of both is sampled every 10 s.

Writes CSV tables and plots to ``--out`` (default results/offload_latency).
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from edge_offload.api import Offloader, OffloaderConfig
from edge_offload.client import ClientConfig, EdgeClient
from edge_offload.link_emulator import LinkEmulator, LinkEmulatorConfig
from edge_offload.link_traces import DeliveryTrace
from edge_offload.models import model_spec
from edge_offload_testing import (
    edge_server_node_command,
    free_tcp_port,
    make_test_keys,
    offload_bridge_node_command,
    resident_memory_bytes,
    start_headless_server,
)

TRACES = Path(__file__).resolve().parents[1] / 'src' / 'edge_offload' / 'traces'


@dataclass
class Row:
    """One measured scenario."""

    part: str
    scenario: str
    link: str
    samples: list[float]
    bytes_up: int = 0
    bytes_down: int = 0
    fallbacks: int = 0

    def summary(self) -> dict[str, object]:
        ordered = sorted(self.samples)
        return {
            'part': self.part,
            'scenario': self.scenario,
            'link': self.link,
            'n': len(ordered),
            'mean_ms': statistics.fmean(ordered) * 1e3,
            'p50_ms': _percentile(ordered, 0.50) * 1e3,
            'p95_ms': _percentile(ordered, 0.95) * 1e3,
            'bytes_up': self.bytes_up,
            'bytes_down': self.bytes_down,
            'fallbacks': self.fallbacks,
        }


def _percentile(ordered: list[float], fraction: float) -> float:
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def start_server(keys, models: str, torch_threads: int) -> tuple[subprocess.Popen, int]:
    """Start the headless edge server; return the process and its port."""
    process, endpoint = start_headless_server(
        keys,
        models.split(','),
        '--modes',
        'nnto,probe',
        '--worker-threads',
        '1',
        '--torch-threads',
        str(torch_threads),
        '--log-level',
        'WARNING',
    )
    return process, int(endpoint.rsplit(':', 1)[1])


def client_config(keys, port: int) -> ClientConfig:
    return ClientConfig(
        endpoint=f'tcp://127.0.0.1:{port}',
        secret_key_file=str(keys.robot_secret),
        server_public_key_file=str(keys.server_public),
        request_timeout_s=30.0,
    )


def protocol_round_trips(keys, port: int, repeats: int) -> list[Row]:
    """Time ``probe`` echo calls on loopback for several payload sizes."""
    rows = []
    with EdgeClient(client_config(keys, port)) as client:
        if not client.wait_connected(10.0):
            raise RuntimeError(client.state_reason)
        for size in (0, 1024, 64 * 1024, 1024 * 1024):
            payload = {'blob': torch.zeros(size, dtype=torch.uint8)}
            count = repeats if size < 1024 * 1024 else max(10, repeats // 4)
            samples = []
            for _ in range(count + 5):
                started = time.perf_counter()
                reply = client.call('probe', 'echo', {}, payload)
                samples.append(time.perf_counter() - started)
            rows.append(
                Row(
                    'protocol',
                    f'probe echo {size} B',
                    'loopback',
                    samples[5:],
                    reply.bytes_up,
                    reply.bytes_down,
                )
            )
    return rows


def run_requests(
    offloader: Offloader, model: str, mode: str, count: int, slowdown: float
) -> tuple[list[float], int, int, int]:
    """Run ``count`` requests after 3 warm-ups; return latencies, bytes, fallbacks."""
    inputs = model_spec(model).example_inputs()
    samples, fallbacks = [], 0
    outcome = None
    for index in range(count + 3):
        started = time.perf_counter()
        outcome = offloader.infer(model, inputs, mode=mode)
        if slowdown > 1.0 and outcome.stats.local_compute_time_s > 0:
            time.sleep((slowdown - 1.0) * outcome.stats.local_compute_time_s)
        elapsed = time.perf_counter() - started
        if index >= 3:
            samples.append(elapsed)
            fallbacks += int(outcome.fell_back)
    return samples, outcome.stats.bytes_up, outcome.stats.bytes_down, fallbacks


def local_vs_nnto(keys, port: int, model: str, count: int, slowdown: float) -> list[Row]:
    """Measure local, then nnto through the emulator on each link setting."""
    rows = []
    with Offloader(OffloaderConfig(mode='local', local_models=[model])) as offloader:
        samples, _, _, _ = run_requests(offloader, model, 'local', count, slowdown)
        rows.append(Row('latency', f'local {model}', 'none (on the robot)', samples))
    links = [
        ('93 Mbit/s, 2.6 ms RTT', {'rtt_s': 0.0026, 'uplink_bps': 93e6, 'downlink_bps': 93e6}),
        ('73 Mbit/s, 5 ms RTT', {'rtt_s': 0.005, 'uplink_bps': 73e6, 'downlink_bps': 73e6}),
    ]
    for name, trace_file, rtt_s in (
        ('indoor trace (93 Mbit/s mean), 2.6 ms RTT', 'indoor_93mbps.trace', 0.0026),
        ('outdoor trace (73 Mbit/s mean, dips), 5 ms RTT', 'outdoor_73mbps.trace', 0.005),
    ):
        trace = DeliveryTrace.load(TRACES / trace_file)
        links.append((name, {'rtt_s': rtt_s, 'uplink_trace': trace, 'downlink_trace': trace}))
    for name, settings in links:
        with LinkEmulator(LinkEmulatorConfig.from_rtt('127.0.0.1', port, **settings)) as emulator:
            config = OffloaderConfig(
                mode='nnto', local_models=[model], client=client_config(keys, emulator.port)
            )
            with Offloader(config) as offloader:
                if not offloader.client.wait_connected(10.0):
                    raise RuntimeError(offloader.client.state_reason)
                samples, up, down, fallbacks = run_requests(
                    offloader, model, 'nnto', count, slowdown
                )
            rows.append(Row('latency', f'nnto {model}', name, samples, up, down, fallbacks))
    return rows


def soak(keys, seconds: float, rate_hz: float, out: Path) -> list[dict[str, float]]:
    """Run bridge + server nodes under a steady goal stream; sample their memory."""
    import numpy as np  # noqa: PLC0415 - only the soak needs ROS and NumPy
    import rclpy  # noqa: PLC0415
    from rclpy.action import ActionClient  # noqa: PLC0415

    from edge_offload.tensor_blob import to_tensor_blob  # noqa: PLC0415
    from edge_offload_testing import ProcessGroup, reserve_domain_id  # noqa: PLC0415
    from offload_interfaces.action import Offload  # noqa: PLC0415

    samples = []
    with reserve_domain_id() as domain_id:
        os.environ['ROS_DOMAIN_ID'] = str(domain_id)
        os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
        port = free_tcp_port()
        group = ProcessGroup(out)
        server = group.start(
            edge_server_node_command(port, keys, ['tiny_cnn']), name='soak_edge_server'
        )
        bridge = group.start(
            offload_bridge_node_command(port, keys, ['tiny_cnn']),
            name='soak_offload_bridge',
        )
        context = rclpy.Context()
        context.init(domain_id=domain_id)
        node = rclpy.create_node('soak_client', context=context)
        executor = rclpy.executors.SingleThreadedExecutor(context=context)
        executor.add_node(node)
        client = ActionClient(node, Offload, 'offload')
        counts = {'sent': 0, 'ok': 0, 'nnto': 0, 'errors': 0}

        def on_result(future) -> None:
            result = future.result().result
            counts['ok' if result.error_code == 0 else 'errors'] += 1
            counts['nnto'] += int(result.mode_used == 'nnto')

        def on_goal(future) -> None:
            handle = future.result()
            if handle.accepted:
                handle.get_result_async().add_done_callback(on_result)
            else:
                counts['errors'] += 1

        try:
            deadline = time.monotonic() + 30.0
            while not client.server_is_ready() and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.1)
            if not client.server_is_ready():
                raise RuntimeError('bridge did not start:\n' + group.output(bridge))
            image = np.random.default_rng(0).random((1, 3, 64, 64), dtype=np.float32)
            goal = Offload.Goal(model='tiny_cnn', inputs=[to_tensor_blob('image', image)])
            started = time.monotonic()
            next_goal = started
            next_sample = started
            while time.monotonic() - started < seconds:
                now = time.monotonic()
                if now >= next_goal:
                    client.send_goal_async(goal).add_done_callback(on_goal)
                    counts['sent'] += 1
                    next_goal += 1.0 / rate_hz
                if now >= next_sample:
                    samples.append(
                        {
                            't_s': now - started,
                            'bridge_rss_mb': resident_memory_bytes(bridge.pid) / 1e6,
                            'server_rss_mb': resident_memory_bytes(server.pid) / 1e6,
                            **counts,
                        }
                    )
                    latest = samples[-1]
                    print(  # noqa: T201 - progress of a long run
                        f'  soak t={now - started:6.0f} s  bridge {latest["bridge_rss_mb"]:.1f} MB'
                        f'  server {latest["server_rss_mb"]:.1f} MB  {counts}',
                        flush=True,
                    )
                    next_sample += 10.0
                executor.spin_once(timeout_sec=max(0.0, min(next_goal, next_sample) - now))
            end = time.monotonic() + 10.0
            while counts['ok'] + counts['errors'] < counts['sent'] and time.monotonic() < end:
                executor.spin_once(timeout_sec=0.05)
            samples.append(
                {
                    't_s': time.monotonic() - started,
                    'bridge_rss_mb': resident_memory_bytes(bridge.pid) / 1e6,
                    'server_rss_mb': resident_memory_bytes(server.pid) / 1e6,
                    **counts,
                }
            )
        finally:
            client.destroy()
            node.destroy_node()
            executor.shutdown()
            context.try_shutdown()
            group.stop_all()
    return samples


def write_csv(path: Path, rows: list[dict[str, object]]) -> None:
    with path.open('w', newline='') as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def print_table(rows: list[dict[str, object]]) -> None:
    print(  # noqa: T201
        f'{"scenario":<24} {"link":<48} {"n":>4} {"mean ms":>9} {"p50 ms":>9} '
        f'{"p95 ms":>9} {"bytes up":>10} {"bytes down":>10} {"fallbacks":>9}'
    )
    for row in rows:
        print(  # noqa: T201
            f'{row["scenario"]:<24} {row["link"]:<48} {row["n"]:>4} {row["mean_ms"]:>9.2f} '
            f'{row["p50_ms"]:>9.2f} {row["p95_ms"]:>9.2f} {row["bytes_up"]:>10} '
            f'{row["bytes_down"]:>10} {row["fallbacks"]:>9}'
        )


def plot(latency: list[dict[str, object]], soak_samples: list[dict[str, float]], out: Path):
    import matplotlib  # noqa: PLC0415

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, axis = plt.subplots(figsize=(9, 4))
    labels = [f'{row["scenario"]}\n{row["link"]}' for row in latency]
    axis.barh(labels, [row['p50_ms'] for row in latency], label='p50')
    axis.scatter([row['p95_ms'] for row in latency], labels, color='black', label='p95', zorder=3)
    axis.set_xlabel('latency per request, ms')
    axis.legend()
    figure.tight_layout()
    figure.savefig(out / 'local_vs_nnto.png', dpi=120)
    plt.close(figure)
    if soak_samples:
        figure, axis = plt.subplots(figsize=(7, 3.5))
        times = [sample['t_s'] for sample in soak_samples]
        axis.plot(times, [s['bridge_rss_mb'] for s in soak_samples], marker='o', label='bridge')
        axis.plot(times, [s['server_rss_mb'] for s in soak_samples], marker='o', label='server')
        axis.set_xlabel('soak time, s')
        axis.set_ylabel('resident memory, MB')
        axis.legend()
        figure.tight_layout()
        figure.savefig(out / 'soak_memory.png', dpi=120)
        plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--model', default='resnet18', help='model for local vs nnto')
    parser.add_argument('--requests', type=int, default=40, help='requests per scenario')
    parser.add_argument('--protocol-repeats', type=int, default=200)
    parser.add_argument('--torch-threads', type=int, default=1, help='robot and server each')
    parser.add_argument('--robot-slowdown', type=float, default=1.0)
    parser.add_argument('--soak-s', type=float, default=0.0, help='soak duration (0: none)')
    parser.add_argument('--soak-rate', type=float, default=30.0, help='goals per second')
    parser.add_argument('--out', type=Path, default=Path('results/offload_latency'))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.torch_threads)
    print(  # noqa: T201
        f'set-up: {os.cpu_count()} CPU cores shared by robot and server, no GPU; torch '
        f'{torch.__version__}, {args.torch_threads} torch thread(s) on each side; robot '
        f'slowdown x{args.robot_slowdown:g}; model {args.model} (random weights); CURVE on; '
        'links emulated in user space (LinkEmulator)'
    )
    with tempfile.TemporaryDirectory() as keys_dir:
        keys = make_test_keys(Path(keys_dir))
        server, port = start_server(keys, f'{args.model},tiny_cnn', args.torch_threads)
        try:
            rows = protocol_round_trips(keys, port, args.protocol_repeats)
            rows += local_vs_nnto(keys, port, args.model, args.requests, args.robot_slowdown)
        finally:
            server.terminate()
            server.wait(timeout=10.0)
        table = [row.summary() for row in rows]
        print_table(table)  # noqa: T201
        write_csv(args.out / 'latency.csv', table)
        soak_samples = []
        if args.soak_s > 0:
            print(f'soak: {args.soak_s:.0f} s at {args.soak_rate:g} goals/s (tiny_cnn, ROS nodes)')  # noqa: T201
            soak_samples = soak(keys, args.soak_s, args.soak_rate, args.out)
            write_csv(args.out / 'soak.csv', soak_samples)
            steady = [s for s in soak_samples if s['t_s'] >= 60.0] or soak_samples
            for name in ('bridge_rss_mb', 'server_rss_mb'):
                values = [sample[name] for sample in steady]
                print(  # noqa: T201
                    f'  {name}: {values[0]:.1f} MB at {steady[0]["t_s"]:.0f} s -> '
                    f'{values[-1]:.1f} MB at {steady[-1]["t_s"]:.0f} s '
                    f'(min {min(values):.1f}, max {max(values):.1f})'
                )
        plot(table, soak_samples, args.out)
    print(f'wrote {args.out}/latency.csv and plots')  # noqa: T201
    return 0


if __name__ == '__main__':
    sys.exit(main())
