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
import sys
from pathlib import Path

import pytest
import torch

from edge_offload.models import load_model
from edge_offload_zoo.kapao import KapaoPeople, KapaoPostprocessConfig
from lopinfer_ros.graph import capture
from lopinfer_ros.locality import analyse
from lopinfer_ros.plan_table import build_table
from lopinfer_ros.problem import LinkModel
from lopinfer_ros.profiler import build_problem, profile_graph
from lopinfer_ros.schedule import run_split_locally

# The test folder is not a package: the helpers sit beside this file.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan_fixtures import random_plan  # noqa: E402

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


def test_kapao_people_pipeline_splits_equal_local():
    """The whole people pipeline: uint8 camera image, letterbox, net, NMS as one node.

    Biases are raised so that random weights yield people (shapes and equality only, not
    detections): the NMS step must then see the same prediction on every plan.
    """
    torch.manual_seed(0)
    people = KapaoPeople('s', input_size=320, config=KapaoPostprocessConfig(max_det=10)).eval()
    with torch.no_grad():
        for head in people.net.model[-1].m:
            head.bias.view(3, 57)[:, 4:6] += 20.0
    generator = torch.Generator().manual_seed(1)
    image = torch.randint(0, 256, (1, 3, 240, 320), generator=generator, dtype=torch.uint8)
    graph = capture(people, [image])
    infos = analyse(graph)
    ops = [node.op for node in graph.nodes]
    assert ops[:4] == ['input', 'float', 'pad', 'div']
    assert ops.count('opaque:KapaoPostprocess') == 1
    with torch.inference_mode():
        expected = people(image)
    assert expected[0].shape[0] >= 1
    profile = profile_graph(graph, infos, [image], repeats=1)
    problem = build_problem('kapao_s', graph, infos, profile, device_factor=19.0)
    assert problem.input_bytes == image.numel()  # the robot sends uint8 pixels
    table = build_table(
        problem,
        LinkModel(bandwidth_bytes_per_s=1e6),
        buckets=[1, 10],
        workers=1,
        progress=False,
        device_factor=19.0,
        time_budget_s=0.3,
    )
    plans = {
        f'{kind}@{b}': table.plan(kind, b) for kind in ('lopinfer', 'layer_split') for b in (1, 10)
    }
    rng = random.Random('kapao_s')
    plans.update({f'random{i}': random_plan(infos, rng) for i in range(2)})
    for label, plan in plans.items():
        got = graph.unflatten(run_split_locally(graph, infos, plan, [image]))
        assert [t.shape for t in got] == [t.shape for t in expected], label
        for a, b, what in zip(got, expected, ('boxes', 'scores', 'keypoints'), strict=True):
            _close(a, b, f'kapao_s {label} {what}')
