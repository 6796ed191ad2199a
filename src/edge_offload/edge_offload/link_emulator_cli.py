# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``edge_offload_link_emulator``: run the user-space link emulator in front of a TCP server.

Prints ``link_emulator listening on HOST:PORT`` once it accepts connections and runs until
SIGINT or SIGTERM (``python -m edge_offload.link_emulator_cli --help``).
"""

from __future__ import annotations

import argparse
import logging
import math
import signal
import threading
from pathlib import Path

from edge_offload.link_emulator import LinkEmulator
from edge_offload.link_shaping import (
    DEFAULT_QUEUE_BYTES,
    DOWNLINK,
    UPLINK,
    LinkEmulatorConfig,
)
from edge_offload.link_traces import DeliveryTrace

_LOGGER = logging.getLogger('edge_offload.link_emulator')  # also when run with -m


def _host_port(text: str) -> tuple[str, int]:
    host, separator, port_text = text.rpartition(':')
    if host.startswith('[') and host.endswith(']'):
        host = host[1:-1]
    if not separator or not host:
        raise argparse.ArgumentTypeError(f'expected HOST:PORT, got {text!r}')
    try:
        port = int(port_text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'bad port in {text!r}') from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f'port out of range 0..65535 in {text!r}')
    return host, port


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'not a number: {text!r}') from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f'must be > 0, got {text}')
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'not a number: {text!r}') from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f'must be >= 0, got {text}')
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'not an integer: {text!r}') from None
    if value < 1:
        raise argparse.ArgumentTypeError(f'must be >= 1, got {text}')
    return value


def _trace_file(text: str) -> DeliveryTrace:
    if not Path(text).is_file():
        raise argparse.ArgumentTypeError(f'trace file not found: {text}')
    try:
        return DeliveryTrace.load(text)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise argparse.ArgumentTypeError(f'bad trace file: {exc}') from None


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='edge_offload_link_emulator',
        description='Relay TCP connections through an emulated link (bandwidth, delay, '
        "jitter; mahimahi traces). Omit a direction's rate and trace for unlimited bandwidth.",
    )
    parser.add_argument(
        '--listen', type=_host_port, default=('127.0.0.1', 0), metavar='HOST:PORT',
        help='address to accept connections on (port 0: any free port; default 127.0.0.1:0)',
    )  # fmt: skip
    parser.add_argument(
        '--upstream', type=_host_port, required=True, metavar='HOST:PORT',
        help='server every accepted connection is relayed to',
    )  # fmt: skip
    parser.add_argument('--rtt-ms', type=_non_negative_float, default=0.0,
                        help='round-trip delay, split equally between the directions')  # fmt: skip
    parser.add_argument('--jitter-ms', type=_non_negative_float, default=0.0,
                        help='standard deviation of each one-way delay')  # fmt: skip
    for direction in (UPLINK, DOWNLINK):
        group = parser.add_mutually_exclusive_group()
        group.add_argument(f'--{direction}-mbps', type=_positive_float, metavar='MBPS',
                           help=f'constant {direction} rate in Mbit/s')  # fmt: skip
        group.add_argument(f'--{direction}-trace', type=_trace_file, metavar='FILE',
                           help=f'mahimahi trace for the {direction}')  # fmt: skip
    parser.add_argument('--queue-bytes', type=_positive_int, default=DEFAULT_QUEUE_BYTES,
                        help='bottleneck queue of each direction in bytes')  # fmt: skip
    parser.add_argument('--seed', type=int, default=0, help='seed of the jitter')
    parser.add_argument('--log-level', default='INFO',
                        choices=['DEBUG', 'INFO', 'WARNING', 'ERROR'])  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the link emulator until SIGINT or SIGTERM; return the exit status."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.upstream[1] == 0:
        parser.error('argument --upstream: the upstream port must not be 0')
    logging.basicConfig(
        level=args.log_level, format='%(asctime)s %(levelname)s %(name)s: %(message)s'
    )
    config = LinkEmulatorConfig.from_rtt(
        args.upstream[0],
        args.upstream[1],
        listen_host=args.listen[0],
        listen_port=args.listen[1],
        rtt_s=args.rtt_ms / 1000.0,
        jitter_s=args.jitter_ms / 1000.0,
        uplink_bps=None if args.uplink_mbps is None else args.uplink_mbps * 1e6,
        downlink_bps=None if args.downlink_mbps is None else args.downlink_mbps * 1e6,
        uplink_trace=args.uplink_trace,
        downlink_trace=args.downlink_trace,
        queue_bytes=args.queue_bytes,
        seed=args.seed,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    emulator = LinkEmulator(config)
    try:
        try:
            emulator.start()
        except OSError as exc:
            _LOGGER.error('cannot start: %s', exc)
            return 1
        host, port = emulator.address
        print(f'link_emulator listening on {host}:{port}', flush=True)
        while not stop.wait(1.0):
            pass
        _LOGGER.info('stopping on signal')
        return 0
    finally:
        emulator.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == '__main__':
    raise SystemExit(main())
