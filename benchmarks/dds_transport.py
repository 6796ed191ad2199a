# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Measure what moving tensors between ROS 2 processes costs (the app <-> bridge hop).

Every offload request travels from an application node to the offload bridge as an
``Offload`` goal holding ``TensorBlob`` messages, so this hop is paid before any
network transfer. The benchmark sends TensorBlob messages of camera-frame sizes to a
relay process and back (two DDS hops, reliable QoS, localhost only), and times the
NumPy <-> TensorBlob conversion on its own. It prints a table and writes a CSV and a
plot under --out.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

# (label, shape, dtype): a tiny control message and common camera / model input sizes.
PAYLOADS = [
    ('1 KiB control', (1024,), np.uint8),
    ('640x480 mono8', (480, 640), np.uint8),
    ('640x480 rgb8', (480, 640, 3), np.uint8),
    ('1x3x640x640 f32', (1, 3, 640, 640), np.float32),
]


def _relay_main() -> None:
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from offload_interfaces.msg import TensorBlob

    qos = QoSProfile(depth=4, reliability=ReliabilityPolicy.RELIABLE)
    try:
        rclpy.init()
        node = rclpy.create_node('dds_transport_relay')
        publisher = node.create_publisher(TensorBlob, 'bench_out', qos)
        node.create_subscription(TensorBlob, 'bench_in', publisher.publish, qos)
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        rclpy.try_shutdown()


def _percentile_ms(samples: list[float], q: float) -> float:
    return float(np.percentile(samples, q) * 1e3)


def _measure(rounds: int, out_dir: Path) -> list[dict]:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from edge_offload.tensor_blob import from_tensor_blob, to_tensor_blob
    from edge_offload_testing import spin_until, wait_for_publishers, wait_for_subscribers
    from offload_interfaces.msg import TensorBlob

    relay_log = (out_dir / 'relay.log').open('wb')
    relay = subprocess.Popen(
        [sys.executable, __file__, '--relay'], stdout=relay_log, stderr=subprocess.STDOUT
    )
    rows = []
    try:
        rclpy.init()
        node = rclpy.create_node('dds_transport_bench')
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        qos = QoSProfile(depth=4, reliability=ReliabilityPolicy.RELIABLE)
        received: list[TensorBlob] = []
        publisher = node.create_publisher(TensorBlob, 'bench_in', qos)
        subscription = node.create_subscription(TensorBlob, 'bench_out', received.append, qos)
        if not (
            wait_for_subscribers(executor, publisher, timeout_s=30.0)
            and wait_for_publishers(executor, subscription, timeout_s=30.0)
        ):
            raise RuntimeError(f'relay did not connect; see {out_dir / "relay.log"}')

        rng = np.random.default_rng(0)
        for label, shape, dtype in PAYLOADS:
            array = (rng.random(shape) * 255).astype(dtype)
            pack_s, unpack_s, round_trip_s = [], [], []
            # One warm-up exchange per size: the first large sample allocates buffers.
            for attempt in range(rounds + 1):
                started = time.perf_counter()
                blob = to_tensor_blob('bench', array)
                packed = time.perf_counter()
                received.clear()
                publisher.publish(blob)
                if not spin_until(executor, lambda: received, timeout_s=30.0, poll_s=0.5):
                    raise RuntimeError(f'{label}: no echo within 30 s')
                arrived = time.perf_counter()
                echoed = from_tensor_blob(received[0])
                unpacked = time.perf_counter()
                if not np.array_equal(echoed, array):
                    raise RuntimeError(f'{label}: payload changed in transit')
                if attempt:
                    pack_s.append(packed - started)
                    round_trip_s.append(arrived - packed)
                    unpack_s.append(unpacked - arrived)
            megabytes = array.nbytes / 1e6
            rows.append(
                {
                    'payload': label,
                    'bytes': array.nbytes,
                    'pack_ms_p50': _percentile_ms(pack_s, 50),
                    'round_trip_ms_mean': float(np.mean(round_trip_s) * 1e3),
                    'round_trip_ms_p50': _percentile_ms(round_trip_s, 50),
                    'round_trip_ms_p95': _percentile_ms(round_trip_s, 95),
                    'unpack_ms_p50': _percentile_ms(unpack_s, 50),
                    # Two hops per round trip.
                    'throughput_MBps': 2 * megabytes / float(np.median(round_trip_s)),
                }
            )
    finally:
        relay.terminate()
        relay.wait(timeout=10)
        relay_log.close()
        rclpy.try_shutdown()
    return rows


def _write_outputs(rows: list[dict], out_dir: Path) -> None:
    with (out_dir / 'dds_transport.csv').open('w', newline='') as csv_file:
        writer = csv.DictWriter(csv_file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    labels = [row['payload'] for row in rows]
    axis.bar(labels, [row['round_trip_ms_p50'] for row in rows], label='round trip p50')
    axis.errorbar(
        labels,
        [row['round_trip_ms_p50'] for row in rows],
        yerr=[
            [0] * len(rows),
            [row['round_trip_ms_p95'] - row['round_trip_ms_p50'] for row in rows],
        ],
        fmt='none',
        ecolor='black',
        capsize=4,
        label='to p95',
    )
    axis.set_yscale('log')
    axis.set_ylabel('milliseconds (log)')
    axis.set_title('TensorBlob round trip between two ROS 2 processes (2 DDS hops)')
    axis.legend()
    figure.tight_layout()
    figure.savefig(out_dir / 'dds_transport.png', dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--rounds', type=int, default=30, help='exchanges per payload size')
    parser.add_argument(
        '--out', type=Path, default=Path('results/dds_transport'), help='output folder'
    )
    parser.add_argument('--relay', action='store_true', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.relay:
        _relay_main()
        return 0

    from edge_offload_testing import reserve_domain_id

    args.out.mkdir(parents=True, exist_ok=True)
    with reserve_domain_id() as domain_id:
        os.environ['ROS_DOMAIN_ID'] = str(domain_id)
        os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
        print(
            'Set-up: ROS 2 Kilted rclpy on Fast DDS, two processes on this machine '
            f'(localhost discovery, domain {domain_id}), reliable QoS depth 4; '
            f'{os.cpu_count()} CPUs, Python {platform.python_version()}, '
            f'{args.rounds} exchanges per size after one warm-up; no emulated link.'
        )
        rows = _measure(args.rounds, args.out)

    header = (
        f'{"payload":<17} {"bytes":>9} {"pack p50":>9} {"RTT mean":>9} {"RTT p50":>9} '
        f'{"RTT p95":>9} {"unpack":>8} {"MB/s":>7}'
    )
    print(header)
    print('-' * len(header))
    for row in rows:
        print(
            f'{row["payload"]:<17} {row["bytes"]:>9} {row["pack_ms_p50"]:>7.2f}ms '
            f'{row["round_trip_ms_mean"]:>7.2f}ms {row["round_trip_ms_p50"]:>7.2f}ms '
            f'{row["round_trip_ms_p95"]:>7.2f}ms {row["unpack_ms_p50"]:>6.2f}ms '
            f'{row["throughput_MBps"]:>7.1f}'
        )
    _write_outputs(rows, args.out)
    print(f'wrote {args.out / "dds_transport.csv"} and {args.out / "dds_transport.png"}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
