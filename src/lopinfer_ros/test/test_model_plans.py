# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Every planned split of the benchmark models gives the model's own output.

For KAPAO-S, VGG-19, ResNet-152, DenseNet-121, ConvNeXt-T and MobileNetV2: capture,
profile (one timed run per width), plan buckets 1, 10 and 30 MB/s with the 19x device
factor, and run the lopinfer and layer_split plans plus two random splits with both sides
in this process. A slice may run other conv kernels than the whole tensor (different
widths pick different algorithms and summation orders), so outputs are compared within
float32 rounding relative to the output's scale, and classifiers must keep their top-1.
"""

from __future__ import annotations

import random

import pytest
import torch

from edge_offload.models import load_model
from lopinfer_ros.graph import capture
from lopinfer_ros.locality import analyse
from lopinfer_ros.plan_table import build_table
from lopinfer_ros.problem import LinkModel
from lopinfer_ros.profiler import build_problem, profile_graph
from lopinfer_ros.schedule import run_split_locally
from lopinfer_ros.testing import random_plan

torch.set_num_threads(1)
MODELS = ['kapao_s_net', 'vgg19', 'resnet152', 'densenet121', 'convnext_tiny', 'mobilenet_v2']


def _close(got: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    scale = float(expected.abs().max())
    error = float((got - expected).abs().max())
    assert error <= 1e-4 * max(scale, 1.0), f'{what}: max error {error} at scale {scale}'
    if expected.dim() == 2 and expected.shape[0] == 1:  # classifier logits: same top-1
        assert int(got.argmax()) == int(expected.argmax()), what


@pytest.mark.parametrize('name', MODELS)
def test_planned_and_random_splits_equal_local(name):
    model = load_model(name)
    generator = torch.Generator().manual_seed(0)
    inputs = [
        torch.rand(t.shape, generator=generator) for t in model.spec.example_inputs().values()
    ]
    graph = capture(model.module, inputs)
    infos = analyse(graph)
    expected = graph.run(inputs)
    reference = model.module(*inputs)
    assert torch.equal(expected[0], reference if torch.is_tensor(reference) else reference[0])
    profile = profile_graph(graph, infos, inputs, repeats=1)
    problem = build_problem(name, graph, infos, profile, device_factor=19.0)
    table = build_table(
        problem,
        LinkModel(bandwidth_bytes_per_s=1e6),
        buckets=[1, 10, 30],
        workers=1,
        progress=False,
        device_factor=19.0,
        time_budget_s=0.3,
    )
    plans = {
        f'{kind}@{bucket}': table.plan(kind, bucket)
        for kind in ('lopinfer', 'layer_split')
        for bucket in (1, 10, 30)
    }
    rng = random.Random(name)
    plans.update({f'random{i}': random_plan(infos, rng) for i in range(2)})
    for label, plan in plans.items():
        outputs = run_split_locally(graph, infos, plan, inputs)
        for got, want in zip(outputs, expected, strict=True):
            _close(got, want, f'{name} {label}')
