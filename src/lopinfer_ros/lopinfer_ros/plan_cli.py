# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``lopinfer_plan``: profile a zoo model and build its plan table (0-30 MB/s buckets).

::

    lopinfer_plan kapao_s_net --device-factor 19 --workers 2
    lopinfer_plan kapao_s --input-shape 1,3,480,640          # splits KAPAO's network

Writes ``<plan-dir>/<model>_<graph hash>.json`` (the file the ``lopinfer`` and
``layer_split`` modes look for) and prints the predicted latency per bucket.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from edge_offload.models import load_model
from lopinfer_ros.graph import CaptureError, capture
from lopinfer_ros.locality import analyse
from lopinfer_ros.modes import DEFAULT_OPTIONS, LopInferMode, make_plan_table
from lopinfer_ros.plan_table import MODES, PlanTable
from lopinfer_ros.profiler import profile_graph


def build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser."""
    parser = argparse.ArgumentParser(prog='lopinfer_plan', description=__doc__.split('\n')[0])
    parser.add_argument('model', help='zoo model name (e.g. kapao_s_net, vgg19)')
    parser.add_argument(
        '--input-shape',
        default='',
        help='comma-separated input shape (default: the model spec example input)',
    )
    parser.add_argument(
        '--device-factor',
        type=float,
        default=19.0,
        help='emulated robot slowdown over this machine (default 19, the seeds KAPAO ratio)',
    )
    parser.add_argument(
        '--server-speedup', type=float, default=1.0, help='server speed over this machine'
    )
    parser.add_argument('--workers', type=int, default=2, help='planner processes')
    parser.add_argument(
        '--plan-dir', default=DEFAULT_OPTIONS['plan_dir'], help='where plan tables are written'
    )
    parser.add_argument('--repeats', type=int, default=3, help='timed runs per operator width')
    parser.add_argument('--torch-threads', type=int, default=1, help='torch threads to profile')
    parser.add_argument(
        '--network-attribute',
        default=DEFAULT_OPTIONS['network_attribute'],
        help='submodule to split when the model is not a static graph',
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line."""
    args = build_parser().parse_args(argv)
    torch.set_num_threads(args.torch_threads)
    model = load_model(args.model)
    inputs = list(model.spec.example_inputs().values())
    if args.input_shape:
        shape = [int(s) for s in args.input_shape.split(',')]
        inputs = [torch.zeros(shape, dtype=inputs[0].dtype)]
    module, key = model.module, args.model
    sub = getattr(module, args.network_attribute, None) if args.network_attribute else None
    if isinstance(sub, torch.nn.Module):
        captured: list = []

        def record(_module, module_args, _output):
            captured.append([a.detach() for a in module_args])

        handle = sub.register_forward_hook(record)
        with torch.inference_mode():
            module(*inputs)
        handle.remove()
        module, inputs, key = sub, captured[0], f'{args.model}.{args.network_attribute}'
    try:
        graph = capture(module, inputs)
    except CaptureError as error:
        print(f'lopinfer_plan: {args.model} is not splittable: {error}', file=sys.stderr)
        return 2
    infos = analyse(graph)
    local = sum(
        1
        for node, info in zip(graph.nodes, infos, strict=True)
        if node.op != 'input' and not info.atomic
    )
    print(
        f'{key}: {len(graph.nodes) - graph.num_inputs} operators ({local} local, '
        f'{len(graph.nodes) - graph.num_inputs - local} global), input '
        f'{[list(t.shape) for t in inputs]}, graph {graph.hash}'
    )
    started = time.monotonic()
    profile = profile_graph(
        graph,
        infos,
        inputs,
        repeats=args.repeats,
        progress=True,
        device_factor=args.device_factor,
    )
    profiled = time.monotonic() - started
    started = time.monotonic()
    table = make_plan_table(
        key,
        graph,
        infos,
        inputs,
        device_factor=args.device_factor,
        server_speedup=args.server_speedup,
        workers=args.workers,
        progress=True,
        profile=profile,
    )
    planned = time.monotonic() - started
    mode = LopInferMode.__new__(LopInferMode)
    mode.options = dict(DEFAULT_OPTIONS, plan_dir=args.plan_dir)
    path = mode.table_path(key, graph)
    path.parent.mkdir(parents=True, exist_ok=True)
    table.save(path)
    print(f'profiled in {profiled:.1f} s, planned 31 buckets in {planned:.1f} s -> {path}')
    print(describe(table))
    return 0


def describe(table: PlanTable) -> str:
    """Return the predicted latency (ms) of every bucket and system as a text table."""
    lines = [f'{"MB/s":>5} ' + ' '.join(f'{mode:>12}' for mode in MODES) + '  lopinfer from']
    for bucket in sorted(table.entries):
        entry = table.entries[bucket]
        cells = ' '.join(f'{1e3 * entry.makespan_s[mode]:12.1f}' for mode in MODES)
        lines.append(f'{bucket:>5} {cells}  {entry.source}')
    return '\n'.join(lines)


if __name__ == '__main__':
    sys.exit(main())
