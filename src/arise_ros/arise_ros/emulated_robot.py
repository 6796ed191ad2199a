# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""A light emulated ARISE robot (the dissertation's Python emulated client).

It runs a camera clock at ``fps``, offloads the frames its plan names over the real,
authenticated edge protocol (real sockets, the server's real model), and emulates the rest:
local tracking costs nothing here, and the accuracy of a tracked result is looked up, not
measured (``drop = rate × stride``, with the robot's scene drop ``rate``, which can change
mid-run with ``--rate-change``). So one machine hosts many of them.

Every frame has a result: the newest server result tracked forward while the robot is
admitted, the robot's local model otherwise. The summary (JSON, ``--summary``) says how
many frames each source served, the longest time without a fresh result, the statuses it
went through, and its mean accuracy drop against the reference setup.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import threading
import time
from pathlib import Path
from typing import NoReturn

import torch

from arise_ros.accuracy import frames_for
from arise_ros.client import LOCAL_STATUSES, AriseMembership, FleetDirectoryClient, RobotTask
from edge_offload.client import ClientConfig, EdgeClient
from edge_offload.stop_signals import StopRequest, finish_process

_logger = logging.getLogger('arise_emulated_robot')
# Status changes kept for the summary (a robot running for hours changes often).
_STATUSES_KEPT = 64


def _frame(height: int, width: int, frame_id: int) -> dict[str, torch.Tensor]:
    # A cheap deterministic image: the emulated robot's camera, not a scene.
    generator = torch.Generator().manual_seed(frame_id % 997)
    image = torch.randint(0, 256, (1, 3, height, width), generator=generator, dtype=torch.uint8)
    return {'image': image}


def run(args: argparse.Namespace, stop: StopRequest | threading.Event | None = None) -> dict:
    """Run the robot until ``args.duration_s`` (0: until ``stop`` is set); return its summary."""
    stop = stop or threading.Event()

    def make_client(endpoint: str) -> EdgeClient:
        return EdgeClient(
            ClientConfig(
                endpoint=endpoint,
                client_name=args.name,
                secret_key_file=args.secret_key_file,
                server_public_key_file=args.server_public_key_file,
                liveness_timeout_s=args.liveness_timeout_s,
                ping_interval_s=min(0.2, args.liveness_timeout_s / 3),
            )
        )

    statuses: list[tuple[float, str]] = []
    started = time.monotonic()

    def on_status(status: str, reason: str) -> None:
        statuses.append((round(time.monotonic() - started, 3), status))
        del statuses[:-_STATUSES_KEPT]

    task = RobotTask(args.name, args.fps, args.sla, args.uplink_s, args.downlink_s, args.rate)
    directory = None
    if args.fleet_endpoint:
        directory = FleetDirectoryClient(make_client(args.fleet_endpoint))
    endpoints = [endpoint for endpoint in args.endpoint.split(',') if endpoint]
    session = AriseMembership(
        endpoints, make_client, task, on_status, args.connect_timeout_s, directory
    )
    session.start(0)
    lock = threading.Lock()
    newest_result = {'frame': None, 'at': None}
    counts = {'frames': 0, 'offloaded': 0, 'server_results': 0, 'local_frames': 0, 'failed': 0}
    # Frames still unanswered when the robot leaves are dropped with its session: counted
    # apart, not as failed calls (no frame of the run went without a result for them).
    counts['unanswered_at_leave'] = 0
    leaving = threading.Event()

    failures: list[str] = []
    in_flight: list = []

    results_by_endpoint: dict[str, int] = {}

    def on_reply(frame_id: int, endpoint: str, future) -> None:
        try:
            future.result()
        except Exception as error:  # noqa: BLE001 - counted; the robot carries on locally
            with lock:
                if leaving.is_set():
                    counts['unanswered_at_leave'] += 1
                    return
                counts['failed'] += 1
                if len(failures) < 10:
                    failures.append(f'frame {frame_id}: {error}')
            return
        with lock:
            counts['server_results'] += 1
            results_by_endpoint[endpoint] = results_by_endpoint.get(endpoint, 0) + 1
            if newest_result['frame'] is None or frame_id > newest_result['frame']:
                newest_result['frame'] = frame_id
                newest_result['at'] = time.monotonic()

    rate = args.rate
    change_at, change_rate = (None, None)
    if args.rate_change:
        when, _, value = args.rate_change.partition(':')
        change_at, change_rate = float(when), float(value)
    reference_e2e = frames_for(
        args.uplink_s + args.reference_latency_s + args.downlink_s, args.fps
    )
    # A running sum: a robot may run for hours.
    drop_sum, drop_count = 0.0, 0
    last_fresh = time.monotonic()
    longest_gap = 0.0
    period = 1.0 / args.fps
    frame_id = 0
    next_tick = time.monotonic()
    while not stop.is_set() and (
        args.duration_s == 0 or time.monotonic() - started < args.duration_s
    ):
        now = time.monotonic()
        if change_at is not None and now - started >= change_at and rate != change_rate:
            rate = change_rate
            session.report(rate)
        status = session.status
        counts['frames'] += 1
        with lock:
            held = newest_result['frame']
        if status in LOCAL_STATUSES or held is None:
            # The local model answers this frame (emulated: its cost is not spent here).
            counts['local_frames'] += 1
            last_fresh = now
        else:
            stride = max(0, frame_id - held)
            drop_sum += rate * (stride - reference_e2e)
            drop_count += 1
            with lock:
                fresh_at = newest_result['at']
            last_fresh = max(last_fresh, fresh_at or last_fresh)
        longest_gap = max(longest_gap, now - last_fresh)
        if session.wants(frame_id):
            future = session.offload(
                frame_id, _frame(args.height, args.width, frame_id), drop_rate=rate
            )
            if future is not None:
                counts['offloaded'] += 1
                in_flight.append(future)
                del in_flight[:-64]
                future.add_done_callback(
                    lambda f, fid=frame_id, at=session.endpoint: on_reply(fid, at, f)
                )
        frame_id += 1
        next_tick += period
        time.sleep(max(0.0, next_tick - time.monotonic()))
    # The frames already sent come back before the robot leaves (a second at most; half
    # that when stopped by a signal, inside the stop's budget).
    wait_until = time.monotonic() + (0.5 if stop.is_set() else 1.0)
    for future in in_flight:
        try:
            future.result(max(0.0, wait_until - time.monotonic()))
        except Exception:  # noqa: BLE001, S110 - counted by on_reply
            pass
    leaving.set()
    session.leave()
    return {
        'name': args.name,
        **counts,
        'statuses': statuses,
        'results_by_endpoint': results_by_endpoint,
        'failures': failures,
        'longest_gap_s': round(longest_gap, 3),
        'mean_drop': drop_sum / drop_count if drop_count else 0.0,
        'sla': args.sla,
        'rate_end': rate,
        'plan_interval': session.plan().interval,
    }


def main(argv: list[str] | None = None) -> NoReturn:
    """Run one emulated robot (console script ``arise_emulated_robot``)."""
    parser = argparse.ArgumentParser(
        prog='arise_emulated_robot', description='An emulated ARISE robot on the real protocol.'
    )
    parser.add_argument(
        '--endpoint', default='', help='server endpoint(s), comma-separated: the next on loss'
    )
    parser.add_argument(
        '--fleet-endpoint',
        default='',
        help="the fleet's front door (arise_fleet): it names the servers with room",
    )
    parser.add_argument('--secret-key-file', required=True)
    parser.add_argument('--server-public-key-file', required=True)
    parser.add_argument('--name', default='emulated')
    parser.add_argument('--fps', type=float, default=30.0)
    parser.add_argument('--sla', type=float, default=0.04, help='accuracy drop (AbsRel) SLA')
    parser.add_argument('--rate', type=float, default=0.004, help='scene drop rate per frame')
    parser.add_argument('--rate-change', default='', help='T:RATE, the scene rate after T s')
    parser.add_argument('--uplink-s', type=float, default=0.005)
    parser.add_argument('--downlink-s', type=float, default=0.002)
    parser.add_argument('--reference-latency-s', type=float, default=0.01)
    parser.add_argument('--height', type=int, default=96)
    parser.add_argument('--width', type=int, default=128)
    parser.add_argument(
        '--duration-s', type=float, default=10.0, help='how long to run; 0 = until SIGINT/SIGTERM'
    )
    parser.add_argument('--liveness-timeout-s', type=float, default=1.5)
    parser.add_argument('--connect-timeout-s', type=float, default=5.0)
    parser.add_argument('--summary', type=Path, help='write the JSON summary here')
    parser.add_argument('--log-level', default='WARNING')
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format='[%(levelname)s] %(message)s')
    if not args.endpoint and not args.fleet_endpoint:
        parser.error('give --endpoint, --fleet-endpoint or both')
    if not (math.isfinite(args.fps) and args.fps > 0 and args.duration_s >= 0):
        parser.error('--fps must be positive and --duration-s at least 0')
    # SIGINT (Ctrl-C, ros2 launch) and SIGTERM end the run: the robot leaves its server,
    # prints its summary and exits 0, as the suite's nodes do.
    stop = StopRequest(f'arise_emulated_robot {args.name}')
    summary = run(args, stop)
    text = json.dumps(summary)
    if args.summary:
        args.summary.write_text(text)
    print(text, flush=True)  # noqa: T201 - the summary is the output
    finish_process(args.name, 0, stop)


if __name__ == '__main__':
    sys.exit(main())
