# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The zoo's classification networks have torchvision's layout, size and behaviour.

Parameter counts are torchvision's published ``num_params``. The state_dict fingerprints
(number of entries and a digest of every ``key:shape`` in order) were taken from
torchvision 0.29.2's builders, so a torchvision checkpoint loads with ``strict=True``.
Big networks are built on the meta device: nothing is allocated or initialised for real.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import pytest
import torch
from torch import nn

from edge_offload.models import ModelSpec, TensorSpec, build_model
from edge_offload_zoo import classification

torch.set_num_threads(1)

SPECS: dict[str, Callable[[], ModelSpec]] = {
    'vgg19': classification.vgg19,
    'vgg19_bn': classification.vgg19_bn,
    'resnet18': classification.resnet18,
    'resnet50': classification.resnet50,
    'resnet152': classification.resnet152,
    'densenet121': classification.densenet121,
    'convnext_tiny': classification.convnext_tiny,
    'mobilenet_v2': classification.mobilenet_v2,
}

# torchvision's num_params of each model's ImageNet weights.
TORCHVISION_PARAMS = {
    'vgg19': 143_667_240,
    'vgg19_bn': 143_678_248,
    'resnet18': 11_689_512,
    'resnet50': 25_557_032,
    'resnet152': 60_192_808,
    'densenet121': 7_978_856,
    'convnext_tiny': 28_589_128,
    'mobilenet_v2': 3_504_872,
}

# (state_dict entries, sha256 prefix of '\n'.join(f'{key}:{tuple(shape)}')) of torchvision.
TORCHVISION_STATE_DICT = {
    'vgg19': (38, 'b4eb1243614e83cf'),
    'vgg19_bn': (118, 'e6e7b876b32ca010'),
    'resnet18': (122, '3e58b0798c806a0c'),
    'resnet50': (320, '781bb16f43b8f96f'),
    'resnet152': (932, '9e3321003337a848'),
    'densenet121': (727, '604b78c2bbed70c0'),
    'convnext_tiny': (182, '5c1934c7e7f217f7'),
    'mobilenet_v2': (314, '2a375ead3e9604e1'),
}

# A few torchvision state_dict names and shapes, readable when the fingerprint fails.
SPOT_CHECKS = {
    'vgg19': {
        'features.0.weight': (64, 3, 3, 3),
        'features.34.weight': (512, 512, 3, 3),
        'classifier.0.weight': (4096, 25088),
        'classifier.6.bias': (1000,),
    },
    'vgg19_bn': {
        'features.1.running_var': (64,),
        'features.49.weight': (512, 512, 3, 3),
        'classifier.6.weight': (1000, 4096),
    },
    'resnet18': {
        'conv1.weight': (64, 3, 7, 7),
        'layer1.0.conv1.weight': (64, 64, 3, 3),
        'layer2.0.downsample.0.weight': (128, 64, 1, 1),
        'layer4.1.bn2.num_batches_tracked': (),
        'fc.weight': (1000, 512),
    },
    'resnet50': {
        'layer1.0.downsample.0.weight': (256, 64, 1, 1),
        'layer3.5.conv2.weight': (256, 256, 3, 3),
        'fc.weight': (1000, 2048),
    },
    'resnet152': {
        'layer3.35.conv3.weight': (1024, 256, 1, 1),
        'layer4.2.conv3.weight': (2048, 512, 1, 1),
        'layer4.2.bn3.running_mean': (2048,),
    },
    'densenet121': {
        'features.conv0.weight': (64, 3, 7, 7),
        'features.denseblock1.denselayer1.norm1.weight': (64,),
        'features.denseblock4.denselayer16.conv2.weight': (32, 128, 3, 3),
        'features.transition3.conv.weight': (512, 1024, 1, 1),
        'features.norm5.weight': (1024,),
        'classifier.weight': (1000, 1024),
    },
    'convnext_tiny': {
        'features.0.0.weight': (96, 3, 4, 4),
        'features.0.1.weight': (96,),
        'features.1.0.block.0.weight': (96, 1, 7, 7),
        'features.1.0.block.2.weight': (96,),
        'features.1.0.block.3.weight': (384, 96),
        'features.1.0.block.5.weight': (96, 384),
        'features.1.0.layer_scale': (96, 1, 1),
        'features.2.1.weight': (192, 96, 2, 2),
        'features.5.8.block.0.weight': (384, 1, 7, 7),
        'classifier.0.weight': (768,),
        'classifier.2.weight': (1000, 768),
    },
    'mobilenet_v2': {
        'features.0.0.weight': (32, 3, 3, 3),
        'features.1.conv.0.0.weight': (32, 1, 3, 3),
        'features.1.conv.1.weight': (16, 32, 1, 1),
        'features.2.conv.0.0.weight': (96, 16, 1, 1),
        'features.17.conv.2.weight': (320, 960, 1, 1),
        'features.18.0.weight': (1280, 320, 1, 1),
        'features.18.1.running_mean': (1280,),
        'classifier.1.weight': (1000, 1280),
    },
}


def _meta_model(name: str) -> nn.Module:
    with torch.device('meta'):
        return SPECS[name]().build()


@pytest.mark.parametrize('name', sorted(SPECS))
def test_parameter_count_is_torchvision(name: str) -> None:
    model = _meta_model(name)
    assert sum(p.numel() for p in model.parameters()) == TORCHVISION_PARAMS[name]


@pytest.mark.parametrize('name', sorted(SPECS))
def test_state_dict_layout_is_torchvision(name: str) -> None:
    state = _meta_model(name).state_dict()
    for key, shape in SPOT_CHECKS[name].items():
        assert key in state, f'{name} has no {key}'
        assert tuple(state[key].shape) == shape, key
    text = '\n'.join(f'{key}:{tuple(value.shape)}' for key, value in state.items())
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    assert (len(state), digest) == TORCHVISION_STATE_DICT[name]


@pytest.mark.parametrize('name', sorted(SPECS))
def test_spec(name: str) -> None:
    spec = SPECS[name]()
    assert spec.name == name
    assert dict(spec.inputs) == {'image': TensorSpec((None, 3, 224, 224))}
    assert spec.outputs == ('logits',)
    assert spec.trained is False
    assert 'randomly initialised' in spec.description


@pytest.mark.parametrize('name', ['resnet18', 'mobilenet_v2'])
def test_forward_is_finite_and_deterministic(name: str) -> None:
    spec = SPECS[name]()
    image = spec.example_inputs()
    first = build_model(spec)(image)['logits']
    second = build_model(spec)(image)['logits']
    assert first.shape == (1, 1000)
    assert first.dtype == torch.float32
    assert torch.isfinite(first).all()
    assert first.abs().max() > 0
    torch.testing.assert_close(first, second, rtol=0, atol=0)


def test_state_dict_round_trip_strict() -> None:
    """A checkpoint of one build loads strictly into another and reproduces its outputs."""
    spec = SPECS['mobilenet_v2']()
    source = build_model(spec)
    target = build_model(
        ModelSpec(
            name=spec.name,
            build=spec.build,
            inputs=spec.inputs,
            outputs=spec.outputs,
            seed=spec.seed + 1,
        )
    )
    image = spec.example_inputs()
    assert not torch.equal(source(image)['logits'], target(image)['logits'])
    target.module.load_state_dict(source.module.state_dict(), strict=True)
    torch.testing.assert_close(source(image)['logits'], target(image)['logits'])


def test_init_scheme_matches_torchvision() -> None:
    """Spot-check the initialisers: BN ones/zeros, zero biases, ConvNeXt layer scale 1e-6."""
    model = classification.build_resnet18()
    assert torch.equal(model.bn1.weight, torch.ones(64))
    assert torch.equal(model.bn1.bias, torch.zeros(64))
    # kaiming_normal_(mode='fan_out', nonlinearity='relu'): std = sqrt(2 / (64 * 7 * 7)).
    assert model.conv1.weight.std().item() == pytest.approx((2 / (64 * 49)) ** 0.5, rel=0.1)
    with torch.device('meta'):
        convnext = classification.build_convnext_tiny()
    block = convnext.features[1][0]
    assert isinstance(block.stochastic_depth, classification.StochasticDepth)
    assert convnext.features[5][8].stochastic_depth.p == pytest.approx(0.1 * 14 / 17)


def test_stochastic_depth_is_identity_in_eval() -> None:
    layer = classification.StochasticDepth(0.5, 'row').eval()
    x = torch.randn(4, 3, 2, 2)
    assert layer(x) is x
