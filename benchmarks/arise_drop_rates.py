# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Each generated sequence's scene drop rate, for the ARISE capacity simulation's robots.

Set-up (printed): AccuMO's generated sequences (60 fps, 416x128, ground-truth depth and
poses; ``accumo_generate`` makes them), the trained server depth net's maps (the
evaluator's cache, or computed), AccuMO's depth tracker (forward warping with the true pose
change). Per sequence, the server map of each of ``--sources`` frames spread over it is
warped ``s`` frames ahead for every stride in ``--strides``; the mean AbsRel against the
server's map of that frame (the dissertation's drop, "relative to DNN inference") and
against ground truth is the drop curve. The rate is its slope from ``--reference`` (the
reference setup's result age, which the SLA is measured above) to ``--far`` frames.
Printed: the curves and rates; ``--out`` writes the rates as CSV, the input of
``arise_capacity.py --rates-file``. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from accumo_ros.simulation.dataset import load_index
from accumo_ros.simulation.sequence_bag import read_sequence_bag
from arise_ros.scene_drop import SceneRate, TrackedMapErrors, drop_curve, server_maps, write_rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('datasets', nargs='+', type=Path, help='accumo_generate folders')
    parser.add_argument('--strides', default='1,2,3,4,6,8,12,16,20')
    parser.add_argument('--reference', type=int, default=2, help='frames (60 fps)')
    parser.add_argument('--far', type=int, default=12, help='frames (60 fps)')
    parser.add_argument('--sources', type=int, default=25, help='source frames per sequence')
    parser.add_argument('--cache', type=Path, default=Path('results/accumo_depth_cache'))
    parser.add_argument('--out', type=Path, help='write the rates here (CSV)')
    args = parser.parse_args(argv)
    strides = sorted({int(v) for v in args.strides.split(',')} | {args.reference, args.far})
    if args.far <= args.reference:
        parser.error('--far must be longer than --reference')
    setup = (
        f'drop curve over {args.sources} source frames per sequence, strides '
        f'{",".join(map(str, strides))}; rate = slope from stride {args.reference} to '
        f'{args.far}; AccuMO depth tracker with the true pose change; trained server net'
    )
    print(f'set-up: {setup}')
    print(
        '\n| sequence | category | against | '
        + ' | '.join(f'AbsRel at {s}' for s in strides)
        + ' | rate per frame |'
    )
    print('|---|---|---|' + '---|' * (len(strides) + 1))
    rates = []
    started = time.monotonic()
    for folder in args.datasets:
        for entry in load_index(folder):
            sequence = read_sequence_bag(folder / entry.name)
            server = server_maps(folder, entry.name, sequence.rgb, args.cache)
            curve = drop_curve(TrackedMapErrors(sequence, server), strides, args.sources)
            rate = {
                truth: curve.rate(args.reference, args.far, truth) for truth in ('server', 'gt')
            }
            name = f'{folder.name}/{entry.name}'
            for truth, label in (('server', 'server map'), ('gt', 'ground truth')):
                cells = ' | '.join(f'{curve.at(s, truth):.4f}' for s in strides)
                print(
                    f'| {name} | {sequence.category} | {label} | {cells} | {rate[truth]:.5f} |',
                    flush=True,
                )
            rates.append(SceneRate(name, sequence.category, rate['server'], rate['gt']))
    print(f'\nruntime: {time.monotonic() - started:.0f} s')
    for truth in ('server', 'gt'):
        values = sorted(getattr(r, f'rate_{truth}') for r in rates)
        print(
            f'{truth}: {len(values)} rates, {values[0]:.5f}-{values[-1]:.5f}, '
            f'median {values[len(values) // 2]:.5f} ({values[-1] / values[0]:.1f}x spread)'
        )
    if args.out:
        given = sys.argv[1:] if argv is None else argv
        command = 'python benchmarks/arise_drop_rates.py ' + shlex.join(given)
        write_rates(args.out, rates, f'{command}\n{setup}')
        print(f'wrote {args.out}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
