# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Graph capture, locality classes and the exact footprint rule (spec 2.2-2.4)."""

import random
import sys
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

from lopinfer_ros.graph import CaptureError, capture
from lopinfer_ros.locality import analyse
from lopinfer_ros.schedule import run_split_locally

# The test folder is not a package: the helpers sit beside this file.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan_fixtures import random_plan  # noqa: E402


class _Block(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, x):
        return self.op(x)


def _random_block(rng: random.Random):
    kind = rng.choice(['conv', 'conv', 'max', 'avg', 'up', 'slice', 'adaptive'])
    k, s, d = rng.randint(1, 5), rng.randint(1, 3), rng.randint(1, 2)
    p = rng.randint(0, (d * (k - 1)) // 2)
    if kind == 'conv':
        groups = rng.choice([1, 2])
        return nn.Conv2d(4, 4, (rng.randint(1, 3), k), (1, s), (1, p), (1, d), groups), kind
    if kind == 'max':
        p = min(p, k // 2)
        ceil = rng.choice([False, True])
        return nn.MaxPool2d((2, k), (1, s), (0, p), (1, d), ceil_mode=ceil), kind
    if kind == 'avg':
        p = min(p, k // 2)
        return nn.AvgPool2d((2, k), (1, s), (1, p), ceil_mode=False, count_include_pad=True), kind
    if kind == 'up':
        return nn.Upsample(scale_factor=rng.choice([2, 3]), mode='nearest'), kind
    if kind == 'slice':
        start = rng.randint(0, 2)
        step = rng.randint(1, 3)
        return _Block(lambda x: x[..., start::step]), kind
    return nn.AdaptiveAvgPool2d((5, rng.choice([1, 2, 4]))), kind


@pytest.mark.parametrize('seed', range(40))
def test_sliced_block_chains_equal_full_execution(seed):
    rng = random.Random(seed)
    torch.manual_seed(seed)
    while True:  # draw until the chain accepts the input size
        layers = []
        for _ in range(rng.randint(1, 3)):
            layer, kind = _random_block(rng)
            layers.append(layer)
            if kind == 'adaptive':
                break
        model = nn.Sequential(*layers).eval()
        x = torch.randn(1, 4, 6, rng.randint(12, 40))
        try:
            model(x)
            break
        except RuntimeError:
            continue
    graph = capture(model, [x])
    infos = analyse(graph)
    for node, info in zip(graph.nodes, infos, strict=True):
        # adaptive pooling is local only for an integral ratio on the split axis
        ratio_ok = node.op != 'adaptive_avg_pool2d' or (
            graph.nodes[node.inputs[0]].shape[3] % node.shape[3] == 0
        )
        assert info.atomic == (not ratio_ok), node.op
    expected = graph.run([x])[0]
    assert torch.equal(expected, model(x))
    for _ in range(5):
        plan = random_plan(infos, rng)
        got = run_split_locally(graph, infos, plan, [x])[0]
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('seed', range(12))
def test_footprint_is_exact(seed):
    """Perturbing a column changes an output column iff it lies in that column's footprint."""
    rng = random.Random(100 + seed)
    torch.manual_seed(seed)
    layer, _ = _random_block(rng)
    if isinstance(layer, nn.Upsample | _Block | nn.AdaptiveAvgPool2d):
        layer = nn.Conv2d(4, 4, (1, rng.randint(1, 5)), (1, rng.randint(1, 3)), (0, 1), (1, 2))
    x = torch.randn(1, 4, 3, 30)
    graph = capture(layer.eval(), [x])
    infos = analyse(graph)
    node = graph.nodes[1]
    base = graph.run([x])[0]
    for j in range(infos[1].width):
        lo, hi = infos[1].rule.need(0, j, j + 1)
        for column in range(30):
            bumped = x.clone()
            bumped[..., column] += 1000.0
            changed = not torch.equal(graph.run([bumped])[0][..., j], base[..., j])
            if changed:
                assert lo <= column < hi, (node.op, j, column, (lo, hi))


def test_spec_worked_example_halo():
    """Spec 2.4: conv3x3 -> conv3x3 -> maxpool2, W = 112, split at pool column 28."""
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, 1, 1), nn.Conv2d(4, 4, 3, 1, 1), nn.MaxPool2d(2, 2)
    ).eval()
    graph = capture(model, [torch.zeros(1, 3, 112, 112)])
    infos = analyse(graph)
    pool, conv2, conv1 = infos[3].rule, infos[2].rule, infos[1].rule
    # robot: pool [0, 28) <- conv2 [0, 56) <- conv1 [0, 57) <- input [0, 58)
    assert pool.need(0, 0, 28) == (0, 56)
    assert conv2.need(0, 0, 56) == (0, 57)
    assert conv1.need(0, 0, 57) == (0, 58)
    # server: pool [28, 56) <- conv2 [56, 112) <- conv1 [55, 112) <- input [54, 112)
    assert pool.need(0, 28, 56) == (56, 112)
    assert conv2.need(0, 56, 112) == (55, 112)
    assert conv1.need(0, 55, 112) == (54, 112)


class _Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.LayerNorm(8)
        self.fc = nn.Linear(8 * 6 * 10, 5)

    def forward(self, x):
        y = self.conv(x)
        y = self.norm(y.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)  # LN over channels: local
        z = torch.softmax(y, dim=1)  # softmax over channels: local
        w = torch.softmax(y, dim=3)  # softmax over the split axis: global
        pooled = F.adaptive_avg_pool2d(z + w, 1)
        return self.fc(torch.flatten(y, 1)), pooled


def test_locality_classes():
    graph = capture(_Head().eval(), [torch.randn(1, 3, 6, 10)])
    infos = analyse(graph)
    kinds = {(node.op, info.atomic) for node, info in zip(graph.nodes, infos, strict=True)}
    assert ('conv2d', False) in kinds
    assert ('layer_norm', False) in kinds
    assert ('permute', False) in kinds
    assert ('softmax', False) in kinds  # over channels
    assert ('softmax', True) in kinds  # over the split axis
    assert ('flatten', True) in kinds  # merges the split axis away
    assert ('linear', True) in kinds  # the batch-1 head after it
    permuted = next(i for n, i in zip(graph.nodes, infos, strict=True) if n.op == 'permute')
    assert permuted.split == 2  # W moved from axis 3 to axis 2
    x = torch.randn(1, 3, 6, 10)
    expected = graph.run([x])
    for seed in range(5):
        got = run_split_locally(graph, infos, random_plan(infos, random.Random(seed)), [x])
        for a, b in zip(got, expected, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


class _ValueDependent(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x


def test_value_dependent_programs_are_refused():
    with pytest.raises(CaptureError, match='static graph'):
        capture(_ValueDependent(), [torch.ones(1, 3, 4, 4)])


def test_inplace_ops_are_recorded_out_of_place():
    class InPlace(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 3, padding=1)

        def forward(self, x):
            y = self.conv(x)
            z = F.relu(y, inplace=True)
            z += x
            return z

    model = InPlace().eval()
    x = torch.randn(1, 3, 5, 9)
    graph = capture(model, [x])
    assert [n.op for n in graph.nodes] == ['input', 'conv2d', 'relu', 'add']
    torch.testing.assert_close(graph.run([x])[0], model(x))


class _KeepPositive(nn.Module):
    """A value-dependent step (boolean mask: data-dependent output size)."""

    lopinfer_opaque = True

    def forward(self, scores):
        flat = scores.flatten()
        return flat[flat > 0][:, None] * 2


class _ConvThenSelect(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 2, 3, padding=1)
        self.select = _KeepPositive()

    def forward(self, image):
        x = F.pad(image.float(), (0, 0, 2, 1), value=114.0) / 255.0  # letterbox rows only
        kept = self.select(self.conv(x))
        return kept[:, 0] + 1


def test_opaque_submodule_is_one_atomic_node_with_data_dependent_output():
    model = _ConvThenSelect().eval()
    image = torch.randint(0, 256, (1, 3, 6, 10), dtype=torch.uint8)
    graph = capture(model, [image])
    infos = analyse(graph)
    ops = [node.op for node in graph.nodes]
    assert ops[:6] == ['input', 'float', 'pad', 'div', 'conv2d', 'opaque:_KeepPositive']
    by_op = {node.op: info for node, info in zip(graph.nodes, infos, strict=True)}
    assert by_op['pad'].split == 3  # rows padded, not columns
    assert by_op['conv2d'].split == 3
    assert by_op['opaque:_KeepPositive'].atomic
    # The recorded graph runs the submodule itself: another input, another output size.
    other = torch.randint(0, 256, (1, 3, 6, 10), dtype=torch.uint8)
    for x in (image, other):
        expected = model(x)
        torch.testing.assert_close(graph.run([x])[0], expected, rtol=0, atol=0)
        for seed in range(4):
            plan = random_plan(infos, random.Random(seed))
            got = run_split_locally(graph, infos, plan, [x])[0]
            assert got.shape == expected.shape
            torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    # The output size depends on the data, so the graph hash does not: both sides agree.
    again = capture(model, [torch.zeros_like(image)])
    assert again.nodes[5].shape != graph.nodes[5].shape
    assert again.hash == graph.hash
    assert again.nodes[5].dynamic
    assert not again.nodes[4].dynamic
    # Capture restores the submodule's own forward.
    assert 'forward' not in model.select.__dict__


def test_padding_the_split_axis_is_a_barrier():
    class PadColumns(nn.Module):
        def forward(self, x):
            return F.pad(x, (1, 2)) * 2

    graph = capture(PadColumns(), [torch.randn(1, 3, 4, 6)])
    infos = analyse(graph)
    assert [(n.op, i.atomic) for n, i in zip(graph.nodes, infos, strict=True)][1] == ('pad', True)


def test_opaque_module_must_return_one_tensor():
    class Pair(nn.Module):
        lopinfer_opaque = True

        def forward(self, x):
            return x[x > 0], x

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.pair = Pair()

        def forward(self, x):
            return self.pair(x * 2)[0]

    with pytest.raises(CaptureError, match='must return one tensor'):
        capture(Outer(), [torch.randn(1, 3, 4, 4)])
