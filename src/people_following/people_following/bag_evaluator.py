# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``bag_evaluate``: compute a recorded run's metrics from its bag, offline.

    bag_evaluate BAG --out DIR [--check METRICS_JSON] [--no-plots] [--namespace NS]
    bag_evaluate BAG --out DIR --replay [--rate realtime|max] [--graph-args '--follow ...']

Reads a rosbag2 bag (a folder, or an ``.mcap``/``.db3`` file; sqlite3 and MCAP) with
``rosbags``, takes each message's log time as its receive time, and computes
:class:`people_following.run_metrics.RunMetrics` through the same decoding path as the bag
recorder (:class:`people_following.bag_recorder_node.RawMetricsFeed`: rclpy deserialization into
the message classes named by the bag's types). Writes ``DIR/metrics.json``,
``DIR/metrics.csv`` (flattened ``key,value``) and ``DIR/metrics.png``. With ``--check``
it compares the result with a metrics file (for example the one ``bag_recorder`` wrote
with ``metrics_file``): prints ``reproduced`` and exits 0 when equal, else prints the
differing keys and exits 1. A missing or unreadable bag (or check file) exits 2.
Messages of types that cannot be imported are counted but not analysed (one warning
per type). A progress bar shows on a terminal (``--quiet`` hides it).

With ``--replay`` it first plays the bag's recorded inputs (``/image_raw``,
``/camera_info``, ``/imu``) through the graph (:mod:`people_following.graph_runner`, the launch
file's nodes in one process) at the recorded pace or as fast as possible, records what
the graph computes now into ``DIR/replay_bag`` (with ``DIR/replay_bag.metrics.json``) and
evaluates that bag: the same run under another mode, model or link, offline.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from people_following.run_metrics import (
    RunMetrics,
    differences,
    plot,
    to_json,
    write_csv,
    write_json,
)

PROG = 'bag_evaluate'


class BagError(RuntimeError):
    """The bag does not exist or cannot be read."""


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _warn(text: str) -> None:
    print(f'{PROG}: warning: {text}', file=sys.stderr)


def evaluate_bag(path: Path | str, *, namespace: str = '', progress: bool = False) -> RunMetrics:
    """Return the :class:`RunMetrics` of every message in the bag at ``path``."""
    # Imported here: --help and argument errors answer without loading rclpy.
    from rosbags.rosbag2 import Reader
    from tqdm import tqdm

    from people_following.bag_recorder_node import RawMetricsFeed

    path = Path(path).expanduser()
    if not path.exists():
        raise BagError(f'bag {path} does not exist')
    if path.is_dir() and not (path / 'metadata.yaml').is_file():
        raise BagError(f'{path} is not a rosbag2 bag (the folder has no metadata.yaml)')
    feed = RawMetricsFeed(RunMetrics(namespace), _warn)
    try:
        with Reader(path) as reader:
            with tqdm(
                total=reader.message_count, unit='msg', desc=path.name, disable=not progress
            ) as bar:
                for connection, log_time_ns, raw in reader.messages():
                    feed.add(connection.topic, connection.msgtype, log_time_ns, raw)
                    bar.update(1)
    except Exception as error:  # noqa: BLE001 - rosbags and the CDR decoder raise many types
        raise BagError(f'bag {path} cannot be read: {_first_line(error)}') from None
    return feed.metrics


def build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description='Compute the metrics of a recorded run (latency, FPS, link, offload mode, '
        'tracks, commands) from its rosbag2 bag.',
    )
    parser.add_argument('bag', type=Path, help='bag folder, or its .mcap/.db3 file')
    parser.add_argument(
        '--out', type=Path, required=True, help='folder for metrics.json, .csv and .png'
    )
    parser.add_argument(
        '--check', type=Path, default=None, metavar='METRICS_JSON',
        help='compare with this metrics file: exit 0 when reproduced, 1 when not',
    )  # fmt: skip
    parser.add_argument('--no-plots', action='store_true', help='do not write metrics.png')
    parser.add_argument(
        '--namespace', default='', help="the run's ROS namespace (topics are relative to it)"
    )
    parser.add_argument('--quiet', action='store_true', help='no progress bar')
    replay = parser.add_argument_group(
        'replay',
        "re-run the bag's camera (and IMU) through the graph (kapao_tracking), record what it "
        'computes now in OUT/replay_bag and evaluate that',
    )
    replay.add_argument('--replay', action='store_true', help='replay through the graph')
    replay.add_argument(
        '--rate', choices=('realtime', 'max'), default='realtime',
        help='realtime keeps the recorded timing; max plays as fast as possible',
    )  # fmt: skip
    replay.add_argument(
        '--graph-args', default='', metavar='ARGS',
        help="further kapao_tracking options, e.g. '--follow --start-edge-server "
        "--keys-dir keys --mode lopinfer'",
    )  # fmt: skip
    return parser


def replay_bag(bag: Path, out: Path, rate: str, graph_args: list[str]) -> Path:
    """Run ``bag``'s inputs through the graph, recording to ``out/replay_bag``; return it."""
    from rosbags.rosbag2 import Reader

    from people_following import graph_runner  # rclpy and the nodes: only for replays
    from people_following.bag_recorder_node import INPUT_TOPICS

    if not bag.is_dir():
        raise BagError(f'bag {bag} is not a bag folder')
    recorded = out / 'replay_bag'
    if recorded.exists():
        raise BagError(f'{recorded} exists: choose another --out')
    out.mkdir(parents=True, exist_ok=True)
    with Reader(bag) as reader:
        topics = {connection.topic for connection in reader.connections}
    inputs = [topic if topic in topics else '' for topic, _ in INPUT_TOPICS]
    if not inputs[0]:
        raise BagError(f'bag {bag} has no {INPUT_TOPICS[0][0]} to replay')
    code = graph_runner.main(
        [
            '--source', 'bag', '--uri', str(bag), '--bag-topics', ','.join(inputs),
            '--rate-mode', rate, '--reliable-sensor-qos', '--record-bag', str(recorded),
            # People detection only, as recorded runs are replayed, unless graph_args follow.
            '--no-follow', *graph_args,
        ]
    )  # fmt: skip
    if code != 0:
        raise BagError(f'the graph failed on {bag} (exit code {code}); see its log above')
    return recorded


def main(argv: list[str] | None = None) -> int:
    """Evaluate a bag; return 0 (done or reproduced), 1 (not reproduced) or 2 (bad input)."""
    args = build_parser().parse_args(argv)
    expected = None
    if args.check is not None:
        try:
            expected = json.loads(args.check.read_text())
        except (OSError, ValueError) as error:
            print(f'{PROG}: cannot read {args.check}: {_first_line(error)}', file=sys.stderr)
            return 2
    progress = not args.quiet and sys.stderr.isatty()
    try:
        bag = args.bag
        if args.replay:
            bag = replay_bag(bag, args.out, args.rate, shlex.split(args.graph_args))
        run = evaluate_bag(bag, namespace=args.namespace, progress=progress)
    except BagError as error:
        print(f'{PROG}: {error}', file=sys.stderr)
        return 2
    metrics = run.result()
    if not run.messages:
        _warn(f'bag {args.bag} has no messages: the metrics are empty')
    written = [
        write_json(metrics, args.out / 'metrics.json'),
        write_csv(metrics, args.out / 'metrics.csv'),
    ]
    if not args.no_plots:
        written.append(plot(run, args.out / 'metrics.png', title=str(args.bag)))
    print(f'{run.messages} messages; wrote ' + ', '.join(str(path) for path in written))
    if expected is None:
        return 0
    lines = differences(expected, json.loads(to_json(metrics)))
    if not lines:
        print('reproduced')
        return 0
    print(f'not reproduced: {len(lines)} differences from {args.check}')
    for line in lines:
        print(f'  {line}')
    return 1


if __name__ == '__main__':
    sys.exit(main())
