# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The zoo listing: parameters, FLOPs, latency, and failures shown as reasons."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from edge_offload.assets import AssetMissingError
from edge_offload.models import ModelSpec, TensorSpec, build_model
from edge_offload_zoo import zoo_cli

torch.set_num_threads(1)


def _conv_flops(c_in: int, c_out: int, kernel: int, out_hw: int) -> int:
    return 2 * c_in * c_out * kernel * kernel * out_hw * out_hw


# TinyCnn on 1x3x64x64: four stride-2 3x3 convs (64 -> 32 -> 16 -> 8 -> 4), then 64 -> 16.
TINY_CNN_FLOPS = (
    _conv_flops(3, 16, 3, 32)
    + _conv_flops(16, 32, 3, 16)
    + _conv_flops(32, 32, 3, 8)
    + _conv_flops(32, 64, 3, 4)
    + 2 * 64 * 16
)
TINY_CNN_PARAMS = (3 * 9 + 1) * 16 + (16 * 9 + 1) * 32 + (32 * 9 + 1) * 32 + (32 * 9 + 1) * 64
TINY_CNN_PARAMS += (64 + 1) * 16


def _failing_spec(exc: Exception) -> ModelSpec:
    def build() -> nn.Module:
        raise exc

    return ModelSpec(
        name='broken',
        build=build,
        inputs={'image': TensorSpec((None, 3, 8, 8))},
        outputs=('out',),
        trained=True,
    )


def test_main_measures_tiny_cnn_and_resnet18(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / 'zoo.json'
    argv = ['--models', 'tiny_cnn,resnet18', '--runs', '2', '--warmup', '1', '--json', str(out)]
    assert zoo_cli.main(argv) == 0
    document = json.loads(out.read_text(encoding='utf-8'))
    assert document['host']['threads'] == 1
    assert document['host']['torch'] == torch.__version__
    assert document['settings'] == {'runs': 2, 'warmup': 1, 'threads': 1}
    models = {entry['name']: entry for entry in document['models']}
    assert list(models) == ['tiny_cnn', 'resnet18']
    assert models['tiny_cnn']['parameters'] == TINY_CNN_PARAMS
    assert models['resnet18']['parameters'] == 11_689_512
    assert models['tiny_cnn']['flops'] == TINY_CNN_FLOPS
    assert models['resnet18']['flops'] > 3e9
    for entry in models.values():
        assert entry['error'] is None
        assert entry['trained'] is False
        assert entry['latency_runs'] == 2
        assert entry['latency_mean_ms'] > 0
        assert entry['latency_p50_ms'] > 0
    captured = capsys.readouterr()
    assert 'torch thread' in captured.out
    assert '11,689,512' in captured.out
    assert '[2/2] resnet18' in captured.err
    assert torch.get_num_threads() == 1


def test_no_latency_leaves_latency_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / 'zoo.json'
    assert zoo_cli.main(['--models', 'tiny_cnn', '--no-latency', '--json', str(out)]) == 0
    (entry,) = json.loads(out.read_text(encoding='utf-8'))['models']
    assert entry['latency_mean_ms'] is None
    assert entry['flops'] == TINY_CNN_FLOPS
    assert 'tiny_cnn' in capsys.readouterr().out


def test_unknown_model_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert zoo_cli.main(['--models', 'tiny_cnn,no_such_net', '--no-latency']) == 2
    err = capsys.readouterr().err
    assert 'unknown model(s): no_such_net' in err
    assert 'tiny_cnn' in err  # the registered names are listed


@pytest.mark.parametrize('argv', [['--runs', '0'], ['--warmup', '-1'], ['--threads', '0']])
def test_bad_numbers_are_usage_errors(argv: list[str]) -> None:
    assert zoo_cli.main(['--models', 'tiny_cnn', *argv]) == 2


def test_build_failure_is_reported_not_raised() -> None:
    spec = _failing_spec(AssetMissingError('weights/kapao.pt not found; run make setup'))
    report = zoo_cli.profile_spec(spec, runs=1, warmup=0)
    assert report.name == 'broken'
    assert report.trained is True
    assert report.inputs == 'image Nx3x8x8 float32'
    assert report.error == 'AssetMissingError: weights/kapao.pt not found; run make setup'
    assert report.parameters is None
    assert report.latency_mean_ms is None
    table = zoo_cli.format_table([report], zoo_cli.host_info(1), runs=1, warmup=0)
    assert 'broken' in table
    assert 'not built: AssetMissingError: weights/kapao.pt not found' in table


def test_failing_model_keeps_exit_code_zero(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model that fails to build is listed with its reason among the working ones."""
    real_spec = zoo_cli.model_spec

    def spec_of(name: str) -> ModelSpec:
        if name == 'broken':
            return _failing_spec(RuntimeError('needs OpenCV'))
        return real_spec(name)

    monkeypatch.setattr(zoo_cli, 'available_models', lambda: {'broken': None, 'tiny_cnn': None})
    monkeypatch.setattr(zoo_cli, 'model_spec', spec_of)
    out = tmp_path / 'zoo.json'
    assert zoo_cli.main(['--runs', '1', '--warmup', '0', '--json', str(out)]) == 0
    models = {m['name']: m for m in json.loads(out.read_text(encoding='utf-8'))['models']}
    assert models['broken']['error'] == 'RuntimeError: needs OpenCV'
    assert models['tiny_cnn']['error'] is None
    assert models['tiny_cnn']['flops'] == TINY_CNN_FLOPS
    assert 'needs OpenCV' in capsys.readouterr().out


def test_spec_that_fails_to_load_is_reported() -> None:
    def spec_of(name: str) -> ModelSpec:
        raise ModuleNotFoundError(f"No module named 'cv2' (loading {name})")

    report = zoo_cli.profile_model('kapao_like', spec_of=spec_of)
    assert report.error == "ModuleNotFoundError: No module named 'cv2' (loading kapao_like)"
    assert report.trained is None


def test_flops_failure_is_a_reason_not_a_crash() -> None:
    class Opaque(nn.Module):
        def forward(self, image: torch.Tensor) -> torch.Tensor:
            return image.sum(dim=(2, 3))  # nothing FlopCounterMode counts

    class Raising(nn.Module):
        def forward(self, image: torch.Tensor) -> torch.Tensor:
            raise RuntimeError('cv2.dnn failed')

    inputs = {'image': TensorSpec((None, 3, 8, 8))}
    opaque = zoo_cli.profile_spec(ModelSpec('opaque', Opaque, inputs, ('out',)), runs=1)
    assert opaque.flops is None
    assert 'no FLOP-counted' in opaque.flops_error
    assert opaque.latency_mean_ms > 0
    raising = zoo_cli.profile_spec(ModelSpec('raising', Raising, inputs, ('out',)), runs=1)
    assert raising.error is None
    assert raising.parameters == 0
    assert raising.flops_error == 'RuntimeError: cv2.dnn failed'
    assert raising.latency_error == 'RuntimeError: cv2.dnn failed'


def test_pure_functions() -> None:
    model = build_model(
        ModelSpec('lin', lambda: nn.Linear(4, 3), {'x': TensorSpec((2, 4))}, ('y',))
    )
    assert zoo_cli.count_parameters(model.module) == 15
    assert zoo_cli.count_flops(model, model.spec.example_inputs()) == 2 * 2 * 4 * 3
    calls = []
    stats = zoo_cli.measure_latency(lambda: calls.append(1), runs=3, warmup=2)
    assert len(calls) == 5
    assert stats.runs == 3
    assert 0 <= stats.min_ms <= stats.p50_ms <= stats.max_ms
    with pytest.raises(ValueError, match='runs'):
        zoo_cli.measure_latency(lambda: None, runs=0, warmup=0)
