# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Benchmark: a long mutation-fuzz run against the edge server, beside a good robot.

Set-up (printed with the results): the edge server runs headless in its own process
(``edge_offload_server``, CURVE on loopback, ``--max-message-bytes``, ``--worker-threads``
workers of ``--torch-threads`` intra-op threads). Two robots with different keys, both
in this process:

* the *fuzzer*, an authenticated DEALER, sends ``--frames`` messages from the
  structure-aware mutation fuzzer (``edge_offload_testing.protocol_fuzz``, seeded by
  ``--seed``) as fast as the server answers them (at most 32 unanswered), with a valid
  HELLO every 16 so its session stays open and CALLs reach the ``nnto`` mode;
* the *good robot*, an ``EdgeClient`` on its own I/O thread, calls ``tiny_cnn`` on one
  fixed 1x3x64x64 image every ``--good-period-ms`` and checks each answer against its
  first, bit for bit (``torch.equal``).

A server *death* is the process exiting, taking no message for 10 s, or failing 3 good
calls in a row (each may take ``--good-timeout-s``): the server is then restarted, the
last 64 cases sent are written to ``--dump-dir`` for replay
(``protocol_fuzz.load_cases``), and the run goes on. *Unexpected exceptions* are answers
that show the server caught an exception other than ``ProtocolError`` (its last-resort
handler) or failed internally. Resident memory and open fds of the server are sampled,
once every answer has come, at the start, after ``--warmup-frames``, every tenth of the
run and at the end.

    python benchmarks/server_fuzz.py                      # 100,000 frames, seed 30
    python benchmarks/server_fuzz.py --frames 20000 --seed 7
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

from edge_offload_testing import authorize_robot, make_test_keys, start_headless_server
from edge_offload_testing.protocol_fuzz import (
    FuzzRun,
    FuzzSender,
    GoodClient,
    GoodClientStats,
    ProtocolFuzzer,
    fuzz_server,
    percentile,
    save_cases,
)


def _start_server(keys, args):
    return start_headless_server(
        keys,
        ['tiny_cnn'],
        '--max-message-bytes',
        str(args.max_message_bytes),
        '--worker-threads',
        str(args.worker_threads),
        '--torch-threads',
        str(args.torch_threads),
        '--log-level',
        'ERROR',
    )


def _stop(process) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10.0)
        except Exception:  # noqa: BLE001 - it must go either way
            process.kill()
            process.wait()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its tables."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--frames', type=int, default=100_000, help='fuzzed messages to send')
    parser.add_argument('--seed', type=int, default=30)
    parser.add_argument(
        '--warmup-frames', type=int, help='default: a tenth of --frames, at most 10,000'
    )
    parser.add_argument('--max-message-bytes', type=int, default=1024 * 1024)
    parser.add_argument('--worker-threads', type=int, default=2)
    parser.add_argument('--torch-threads', type=int, default=1)
    parser.add_argument('--good-period-ms', type=float, default=20.0)
    parser.add_argument('--good-timeout-s', type=float, default=10.0)
    parser.add_argument(
        '--no-frame-oversize',
        action='store_true',
        help='leave out the mutation that makes the server drop the connection',
    )
    parser.add_argument('--dump-dir', type=Path, default=Path('results/server_fuzz'))
    args = parser.parse_args(argv)
    if args.warmup_frames is None:
        args.warmup_frames = min(10_000, args.frames // 10)
    torch.set_num_threads(1)
    keys = make_test_keys(Path(tempfile.mkdtemp(prefix='server-fuzz-')) / 'keys')
    fuzzer_secret = authorize_robot(keys, 'fuzzer')
    fuzzer = ProtocolFuzzer(
        args.seed,
        max_message_bytes=args.max_message_bytes,
        frame_oversize=not args.no_frame_oversize,
    )
    print(  # noqa: T201
        f'set-up: loopback, CURVE, one headless edge_offload_server process '
        f'({args.worker_threads} workers x {args.torch_threads} torch threads, '
        f'max_message_bytes {args.max_message_bytes}); in this process: the fuzzer '
        f'(DEALER, seed {args.seed}, <= 32 unanswered) and the good robot (EdgeClient, '
        f'tiny_cnn 1x3x64x64 every {args.good_period_ms:g} ms, timeout '
        f'{args.good_timeout_s:g} s); {os.cpu_count()} cores shared by all',
        flush=True,
    )
    runs: list[FuzzRun] = []
    good_stats = GoodClientStats()
    codes: collections.Counter[str] = collections.Counter()
    unexpected: collections.Counter[str] = collections.Counter()
    deaths: list[str] = []
    reference = None
    remaining = args.frames
    started = time.monotonic()
    life = 0
    while remaining > 0:
        life += 1
        process, endpoint = _start_server(keys, args)
        good = GoodClient(
            endpoint,
            keys.robot_secret,
            keys.server_public,
            period_s=args.good_period_ms / 1e3,
            timeout_s=args.good_timeout_s,
            reference=reference,
        )
        good.start()
        good.connected.wait(30.0)
        sender = FuzzSender(endpoint, fuzzer_secret, keys.server_public)
        try:
            run = fuzz_server(
                fuzzer,
                sender,
                process,
                remaining,
                warmup_frames=args.warmup_frames if life == 1 else 0,
                sample_every=max(1, args.frames // 10),
                good=good,
                stop_after_good_failures=3,
            )
        finally:
            good.stop()
            sender.close()
            _stop(process)
        reference = good.reference
        runs.append(run)
        remaining -= run.frames_sent
        seen = good.snapshot()
        good_stats.answers += seen.answers
        good_stats.mismatches += seen.mismatches
        good_stats.failures += seen.failures
        good_stats.latencies_s += seen.latencies_s
        codes.update(sender.codes)
        unexpected.update(text[:160] for text in sender.unexpected)
        if run.failure is not None:
            args.dump_dir.mkdir(parents=True, exist_ok=True)
            dump = args.dump_dir / f'death_{len(deaths) + 1}_seed{args.seed}.json'
            save_cases(dump, run.recent)
            deaths.append(f'after {args.frames - remaining} frames: {run.failure} ({dump})')
            print(f'server death: {deaths[-1]}', file=sys.stderr, flush=True)  # noqa: T201
            if run.frames_sent == 0:
                break  # it dies on start: nothing more to learn
    elapsed = time.monotonic() - started
    _print_tables(args, runs, good_stats, codes, unexpected, deaths, elapsed)
    failed = deaths or unexpected or good_stats.failures or good_stats.mismatches
    return 1 if failed else 0


def _print_tables(args, runs, good, codes, unexpected, deaths, elapsed) -> None:
    sent = sum(run.frames_sent for run in runs)
    by_kind: collections.Counter[str] = collections.Counter()
    by_seed: collections.Counter[str] = collections.Counter()
    for run in runs:
        by_kind.update(run.by_kind)
        by_seed.update(run.by_seed)
    hellos = sum(run.hellos for run in runs)
    answers = sum(run.answers for run in runs)
    out = sys.stdout
    out.write(
        f'\nframes sent {sent} (+{hellos} session HELLOs) in {elapsed:.1f} s: '
        f'{sent / elapsed:.0f} frames/s; answers {answers}; server lives {len(runs)}\n'
    )
    out.write(f'\n{"mutation kind":<20}{"frames":>9}{"share":>8}   (a frame may have 1-3)\n')
    for kind, count in sorted(by_kind.items(), key=lambda item: -item[1]):
        out.write(f'{kind:<20}{count:>9}{count / max(sent, 1):>8.1%}\n')
    out.write(f'\n{"seed message":<20}{"frames":>9}\n')
    for seed, count in sorted(by_seed.items(), key=lambda item: -item[1]):
        out.write(f'{seed:<20}{count:>9}\n')
    out.write(f'\n{"answer":<28}{"count":>9}\n')
    for code, count in sorted(codes.items(), key=lambda item: -item[1]):
        out.write(f'{code:<28}{count:>9}\n')
    out.write(f'\nserver deaths: {len(deaths)}\n')
    for death in deaths:
        out.write(f'  {death}\n')
    out.write(f'unexpected server exceptions: {sum(unexpected.values())}\n')
    for text, count in unexpected.most_common(10):
        out.write(f'  {count:>6} x {text}\n')
    latencies = good.latencies_s
    out.write(
        f'\ngood robot: {good.answers} answers, {good.mismatches} mismatches, '
        f'{len(good.failures)} failures; latency p50 {percentile(latencies, 0.5) * 1e3:.1f} ms, '
        f'p99 {percentile(latencies, 0.99) * 1e3:.1f} ms, '
        f'max {max(latencies, default=float("nan")) * 1e3:.1f} ms\n'
    )
    for failure in good.failures[:10]:
        out.write(f'  {failure}\n')
    out.write(f'\n{"server resources":<24}{"frames":>9}{"RSS MB":>9}{"fds":>6}\n')
    for life, run in enumerate(runs, start=1):
        prefix = f'#{life} ' if len(runs) > 1 else ''
        for sample in run.samples:
            out.write(
                f'{prefix + sample.label:<24}{sample.frames:>9}'
                f'{sample.rss_bytes / 1e6:>9.1f}{sample.fds:>6}\n'
            )
    first = runs[0].samples if runs else []
    labels = [sample.label for sample in first]
    if 'after warm-up' in labels and first[-1].label == 'end':
        warm = first[labels.index('after warm-up')]
        later = first[labels.index('after warm-up') :]
        out.write(
            f'after warm-up -> end: RSS {(first[-1].rss_bytes - warm.rss_bytes) / 1e6:+.1f} MB '
            f'(max {(max(s.rss_bytes for s in later) - warm.rss_bytes) / 1e6:+.1f} MB), '
            f'fds {first[-1].fds - warm.fds:+d}\n'
        )


if __name__ == '__main__':
    sys.exit(main())
