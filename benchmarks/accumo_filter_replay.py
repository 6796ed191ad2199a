# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The odometry filter's settings on recorded schedules: Kalman + VO t_err, run by run.

Reads the ``runs.json`` that ``accumo_evaluate`` wrote for a set (given as ``SET=DIR``,
``DIR`` holding ``runs.json`` and the evaluator's ``cache/`` of server depth maps) and
the set's bags (``--datasets SET=PATH``). For every run of the chosen schedulers it takes
the frames the run offloaded odometry at and replays them through
:class:`accumo_ros.tools.odometry_eval.FusedOdometryRun` (the same ESKF, keyframes and
server VO as the pipeline) under each filter setting, with one fixed odometry latency:
a side-by-side comparison of the filter on the same schedules, not a rerun of the
scheduler (whose choices would change with the filter). Prints each run's t_err and
largest position error per setting, then per setting the mean, the median, the worst and
the runs above 20 % and 10 %, overall and for the high/high rooms. Nothing is asserted.
``--vo-prior`` is VO's (default ``motion``, the robot's; the tables measured before it was
an option used ``gyro``), ``--imu-calibration`` the robot's IMU calibration (default none;
``3:0.05`` emulates one to 3 mg and 0.05 °/s), ``--categories`` limits the rooms.

Settings are ``NAME:ROBUST:TILT_DEG[:RECOVERY]`` (ROBUST 0 = no robust weight, TILT_DEG 0 =
no level-ground prior, RECOVERY the refusals in a row before the filter reopens its
velocity, 0 = never; default the filter's).

    python benchmarks/accumo_filter_replay.py --datasets s15=results/accumo_s15 \
        --runs s15=results/accumo_s15_16mbit --latency 14 \
        --settings before:0:0,level:0:1,robust:3:0,both:3:1
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from accumo_ros.metrics import kitti_errors
from accumo_ros.simulation.sequence_bag import read_sequence_bag
from accumo_ros.tasks.imu_filter import DEFAULT_MAX_CONSECUTIVE_REJECTIONS, LevelGroundPrior
from accumo_ros.tasks.visual_odometry import KeyframePolicy
from accumo_ros.tools.evaluate import T_ERR_LIMIT
from accumo_ros.tools.odometry_eval import (
    SEGMENT_STEP,
    FusedOdometryRun,
    VoCache,
    add_imu_calibration_argument,
    add_vo_prior_argument,
    emulated_calibration,
    imu_noise_of,
    vo_prior_flags,
)

ODOMETRY_CODES = (1, 2)  # the evaluator's per-frame record: 1 odometry, 2 both tasks
DEFAULT_SCHEDULERS = 'rr,wrr:2:1,accumo'


Setting = tuple[str, float | None, LevelGroundPrior | None, int | None]


def parse_setting(text: str) -> Setting:
    """``NAME:ROBUST:TILT_DEG[:RECOVERY]`` -> (name, robust, prior, rejections in a row)."""
    name, robust, tilt, *recovery = text.split(':')
    robust_value = float(robust) or None
    prior = LevelGroundPrior(math.radians(float(tilt))) if float(tilt) > 0 else None
    rejections = int(recovery[0]) if recovery else DEFAULT_MAX_CONSECUTIVE_REJECTIONS
    return name, robust_value, prior, rejections or None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--datasets', nargs='+', required=True, help='SET=PATH of its bags')
    parser.add_argument('--runs', nargs='+', required=True, help='SET=DIR of accumo_evaluate')
    parser.add_argument('--latency', type=int, default=14, help='odometry latency, frames')
    parser.add_argument('--schedulers', default=DEFAULT_SCHEDULERS)
    parser.add_argument('--settings', default='before:0:0,level:0:1,robust:3:0,both:3:1')
    parser.add_argument('--categories', default='', help='comma-separated; default all rooms')
    add_vo_prior_argument(parser)
    add_imu_calibration_argument(parser)
    args = parser.parse_args(argv)
    categories = set(filter(None, args.categories.split(',')))
    datasets = dict(item.split('=', 1) for item in args.datasets)
    settings = [parse_setting(text) for text in args.settings.split(',')]
    schedulers = set(args.schedulers.split(','))
    print(
        f'odometry latency {args.latency} frames; settings: {args.settings}; VO prior '
        f'{args.vo_prior}; IMU calibration {args.imu_calibration or "none"} (m/s², rad/s)'
    )
    errors: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for item in args.runs:
        name, directory = item.split('=', 1)
        runs = json.loads((Path(directory) / 'runs.json').read_text())['runs']
        names = {r['sequence'] for r in runs if not categories or r['category'] in categories}
        for sequence_name in sorted(names):
            sequence = read_sequence_bag(Path(datasets[name]) / sequence_name)
            server = np.load(Path(directory) / 'cache' / f'{sequence_name}.npz')['server']
            truth = sequence.frame_poses()
            vo = VoCache(
                sequence,
                lambda _s, index, maps=server: maps[index],
                **vo_prior_flags(args.vo_prior),
            )
            calibration = (
                None
                if args.imu_calibration is None
                else emulated_calibration(sequence, *args.imu_calibration)
            )
            for run in runs:
                if run['sequence'] != sequence_name or run['scheduler'] not in schedulers:
                    continue
                offloads = np.flatnonzero(np.isin(run['offloaded'], ODOMETRY_CODES))
                line = (
                    f'{name} {sequence_name:12s} {run["scheduler"]:8s} {run["weights"]!s:11s} '
                    f'phase {run.get("phase", 0):2d}'
                )
                for setting, robust, prior, rejections in settings:
                    replay = FusedOdometryRun(
                        sequence,
                        vo,
                        offloads,
                        args.latency,
                        imu_noise_of(sequence),
                        KeyframePolicy(),
                        robust_distance_sq=robust,
                        level_ground=prior,
                        imu_calibration=calibration,
                    )
                    replay.filter.max_consecutive_rejections = rejections
                    replay.run_to(len(truth))
                    t_err = kitti_errors(truth, replay.poses, step=SEGMENT_STEP).t_err
                    worst = np.linalg.norm(replay.poses[:, :3, 3] - truth[:, :3, 3], axis=1).max()
                    errors[setting].append((run['category'], t_err))
                    line += f' | {setting} {100 * t_err:6.1f} % {worst:5.2f} m'
                print(line, flush=True)
    print()
    print('| setting | runs | mean | median | worst | > 20 % | > 10 % | high/high mean | worst |')
    print('|---|---|---|---|---|---|---|---|---|')
    for setting, *_ in settings:
        values = np.array([e for _, e in errors[setting]])
        high = np.array([e for c, e in errors[setting] if c == 'high_high'])
        print(
            f'| {setting} | {len(values)} | {100 * values.mean():.1f} % '
            f'| {100 * np.median(values):.1f} % | {100 * values.max():.1f} % '
            f'| {(values > T_ERR_LIMIT).sum()} | {(values > 0.1).sum()} '
            f'| {100 * high.mean():.1f} % | {100 * high.max():.1f} % |'
        )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
