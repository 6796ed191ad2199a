# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Time LOPInfer's offline work per model: capture, profile, and a full 31-bucket table.

Set-up (printed): this CPU, 1 torch thread for profiling, ``--workers`` planner
processes, the device factor given (19 by default, the seeds' KAPAO ratio; the profile
then includes the in-situ robot calibration run, about factor x one forward). Plans stop
on iteration counts, so the tables (not the times) are the same on any machine. Models
are randomly initialised: planning does not depend on weights. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import time

import torch

from edge_offload.models import load_model
from lopinfer_ros.graph import capture
from lopinfer_ros.locality import analyse
from lopinfer_ros.modes import make_plan_table
from lopinfer_ros.profiler import profile_graph

MODELS = 'kapao_s,kapao_s_net,vgg19,resnet152,densenet121,convnext_tiny,mobilenet_v2'


def _inputs(name: str) -> list[torch.Tensor]:
    model = load_model(name)
    if name.startswith('kapao_') and not name.endswith('_net'):
        generator = torch.Generator().manual_seed(0)
        return [torch.randint(0, 256, (1, 3, 480, 640), generator=generator).byte()]
    return list(model.spec.example_inputs().values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--models', default=MODELS, help='comma-separated zoo models')
    parser.add_argument('--device-factor', type=float, default=19.0)
    parser.add_argument('--workers', type=int, default=2, help='planner processes')
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(
        f'# LOPInfer planning time: device factor {args.device_factor}, {args.workers} '
        'planner processes, 1 torch thread, 31 buckets (0-30 MB/s)',
        flush=True,
    )
    print('| model | input | operators | local | capture s | profile s | plan s | table |')
    print('|---|---|---|---|---|---|---|---|')
    for name in args.models.split(','):
        model = load_model(name)
        inputs = _inputs(name)
        started = time.perf_counter()
        graph = capture(model.module, inputs)
        infos = analyse(graph)
        captured = time.perf_counter() - started
        started = time.perf_counter()
        profile = profile_graph(graph, infos, inputs, device_factor=args.device_factor)
        profiled = time.perf_counter() - started
        started = time.perf_counter()
        table = make_plan_table(
            name,
            graph,
            infos,
            inputs,
            device_factor=args.device_factor,
            workers=args.workers,
            profile=profile,
        )
        planned = time.perf_counter() - started
        operators = len(graph.nodes) - graph.num_inputs
        local = sum(1 for info in infos[graph.num_inputs :] if not info.atomic)
        sources = sorted({entry.source for entry in table.entries.values()})
        print(
            f'| {name} | {list(inputs[0].shape)} {str(inputs[0].dtype).removeprefix("torch.")} '
            f'| {operators} | {local} | {captured:.1f} | {profiled:.1f} | {planned:.1f} '
            f'| best: {", ".join(sources)} |',
            flush=True,
        )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
