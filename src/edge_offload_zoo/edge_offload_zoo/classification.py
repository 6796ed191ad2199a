# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""ImageNet classification benchmark networks, written in plain torch.

VGG-19 (with and without batch norm), ResNet-18/50/152, DenseNet-121, ConvNeXt-Tiny and
MobileNetV2, each laid out exactly as torchvision defines it: the ``state_dict`` keys and
shapes are identical (a torchvision checkpoint loads with ``strict=True``), the parameter
counts are torchvision's, and the default initialisation follows torchvision's scheme.

The forward passes use ordinary modules and operators only (convolution, batch norm, ReLU,
pooling, linear, ``cat``, ``add``, layer norm, GELU, permute), so that the aten operators
they dispatch can be intercepted and split. Stochastic depth and dropout are the identity in
eval mode; DenseNet has no memory-efficient checkpointing.

The ``ModelSpec`` factories at the end (``vgg19``, ``resnet50``, ...) take 1x3x224x224
float32 images and give 1000 logits; the models are randomly initialised.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import partial

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from edge_offload.models import ModelSpec, TensorSpec

__all__ = [
    'VGG',
    'ResNet',
    'BasicBlock',
    'Bottleneck',
    'DenseNet',
    'ConvNeXt',
    'MobileNetV2',
    'vgg19',
    'vgg19_bn',
    'resnet18',
    'resnet50',
    'resnet152',
    'densenet121',
    'convnext_tiny',
    'mobilenet_v2',
]

NUM_CLASSES = 1000
IMAGE_INPUT = {'image': TensorSpec((None, 3, 224, 224))}


# ---------------------------------------------------------------------------------------
# Shared building blocks (torchvision.ops.misc and torchvision.ops.stochastic_depth).


class ConvNormActivation(nn.Sequential):
    """Convolution, optional norm and optional activation: torchvision's Conv2dNormActivation.

    Its children are numbered ``0`` (conv), ``1`` (norm) and ``2`` (activation), as in
    torchvision; the convolution has a bias only when there is no norm layer, unless
    ``bias`` says otherwise.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int = 3,
        stride: int = 1,
        padding: int | None = None,
        groups: int = 1,
        norm_layer: Callable[..., nn.Module] | None = nn.BatchNorm2d,
        activation_layer: Callable[..., nn.Module] | None = nn.ReLU,
        dilation: int = 1,
        inplace: bool | None = True,
        bias: bool | None = None,
    ) -> None:
        if padding is None:
            padding = (kernel_size - 1) // 2 * dilation
        if bias is None:
            bias = norm_layer is None
        layers: list[nn.Module] = [
            nn.Conv2d(
                in_channels,
                out_channels,
                kernel_size,
                stride,
                padding,
                dilation=dilation,
                groups=groups,
                bias=bias,
            )
        ]
        if norm_layer is not None:
            layers.append(norm_layer(out_channels))
        if activation_layer is not None:
            params = {} if inplace is None else {'inplace': inplace}
            layers.append(activation_layer(**params))
        super().__init__(*layers)
        self.out_channels = out_channels


class Permute(nn.Module):
    """Permute the dimensions of a tensor (torchvision.ops.misc.Permute)."""

    def __init__(self, dims: Sequence[int]) -> None:
        super().__init__()
        self.dims = list(dims)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.permute(x, self.dims)


class StochasticDepth(nn.Module):
    """Drop whole residual branches in training; the identity in eval mode.

    torchvision.ops.StochasticDepth: ``mode`` is ``'row'`` (one draw per sample) or
    ``'batch'`` (one draw for the batch).
    """

    def __init__(self, p: float, mode: str) -> None:
        super().__init__()
        if p < 0.0 or p > 1.0:
            raise ValueError(f'drop probability has to be between 0 and 1, but got {p}')
        if mode not in ('batch', 'row'):
            raise ValueError(f"mode has to be either 'batch' or 'row', but got {mode}")
        self.p = p
        self.mode = mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        survival_rate = 1.0 - self.p
        size = [x.shape[0]] + [1] * (x.ndim - 1) if self.mode == 'row' else [1] * x.ndim
        noise = torch.empty(size, dtype=x.dtype, device=x.device).bernoulli_(survival_rate)
        if survival_rate > 0.0:
            noise.div_(survival_rate)
        return x * noise

    def extra_repr(self) -> str:
        return f'p={self.p}, mode={self.mode}'


def _make_divisible(v: float, divisor: int, min_value: int | None = None) -> int:
    """Round ``v`` to a multiple of ``divisor``, never going below 90% of ``v``."""
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


# ---------------------------------------------------------------------------------------
# VGG (torchvision.models.vgg).

_VGG_CFGS: dict[str, list[str | int]] = {
    'A': [64, 'M', 128, 'M', 256, 256, 'M', 512, 512, 'M', 512, 512, 'M'],
    'B': [64, 64, 'M', 128, 128, 'M', 256, 256, 'M', 512, 512, 'M', 512, 512, 'M'],
    'D': [64, 64, 'M', 128, 128, 'M', 256, 256, 256, 'M', 512, 512, 512, 'M', 512, 512, 512, 'M'],
    'E': [
        64,
        64,
        'M',
        128,
        128,
        'M',
        256,
        256,
        256,
        256,
        'M',
        512,
        512,
        512,
        512,
        'M',
        512,
        512,
        512,
        512,
        'M',
    ],  # fmt: skip
}


def _vgg_features(cfg: list[str | int], batch_norm: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    in_channels = 3
    for v in cfg:
        if v == 'M':
            layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
        else:
            v = int(v)
            conv2d = nn.Conv2d(in_channels, v, kernel_size=3, padding=1)
            if batch_norm:
                layers += [conv2d, nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
            else:
                layers += [conv2d, nn.ReLU(inplace=True)]
            in_channels = v
    return nn.Sequential(*layers)


class VGG(nn.Module):
    """VGG (Simonyan and Zisserman, 2015), as torchvision.models.VGG."""

    def __init__(
        self,
        features: nn.Module,
        num_classes: int = NUM_CLASSES,
        init_weights: bool = True,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        self.features = features
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(True),
            nn.Dropout(p=dropout),
            nn.Linear(4096, 4096),
            nn.ReLU(True),
            nn.Dropout(p=dropout),
            nn.Linear(4096, num_classes),
        )
        if init_weights:
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode='fan_out', nonlinearity='relu')
                    if m.bias is not None:
                        nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, 0, 0.01)
                    nn.init.constant_(m.bias, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)


def build_vgg19(num_classes: int = NUM_CLASSES) -> VGG:
    """Return VGG-19 (configuration E) without batch norm."""
    return VGG(_vgg_features(_VGG_CFGS['E'], batch_norm=False), num_classes=num_classes)


def build_vgg19_bn(num_classes: int = NUM_CLASSES) -> VGG:
    """Return VGG-19 (configuration E) with batch norm."""
    return VGG(_vgg_features(_VGG_CFGS['E'], batch_norm=True), num_classes=num_classes)


# ---------------------------------------------------------------------------------------
# ResNet (torchvision.models.resnet; the V1.5 bottleneck, stride in the 3x3 conv).


def _conv3x3(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, 3, stride=stride, padding=1, bias=False)


def _conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, 1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a residual connection (ResNet-18/34)."""

    expansion = 1

    def __init__(
        self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None
    ) -> None:
        super().__init__()
        self.conv1 = _conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided), 1x1 expand, with a residual connection (ResNet-50+)."""

    expansion = 4

    def __init__(
        self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None
    ) -> None:
        super().__init__()
        width = planes
        self.conv1 = _conv1x1(inplanes, width)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = _conv3x3(width, width, stride)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = _conv1x1(width, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    """ResNet (He et al., 2016), as torchvision.models.ResNet (groups=1, no dilation)."""

    def __init__(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        layers: Sequence[int],
        num_classes: int = NUM_CLASSES,
        zero_init_residual: bool = False,
    ) -> None:
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2)
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2)
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out', nonlinearity='relu')
            elif isinstance(m, nn.BatchNorm2d | nn.GroupNorm):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, Bottleneck):
                    nn.init.constant_(m.bn3.weight, 0)
                elif isinstance(m, BasicBlock):
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        planes: int,
        blocks: int,
        stride: int = 1,
    ) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                _conv1x1(self.inplanes, planes * block.expansion, stride),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers: list[nn.Module] = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)
        x = self.layer4(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


def build_resnet18(num_classes: int = NUM_CLASSES) -> ResNet:
    """Return ResNet-18."""
    return ResNet(BasicBlock, [2, 2, 2, 2], num_classes=num_classes)


def build_resnet50(num_classes: int = NUM_CLASSES) -> ResNet:
    """Return ResNet-50."""
    return ResNet(Bottleneck, [3, 4, 6, 3], num_classes=num_classes)


def build_resnet152(num_classes: int = NUM_CLASSES) -> ResNet:
    """Return ResNet-152."""
    return ResNet(Bottleneck, [3, 8, 36, 3], num_classes=num_classes)


# ---------------------------------------------------------------------------------------
# DenseNet (torchvision.models.densenet, without memory-efficient checkpointing).


class _DenseLayer(nn.Module):
    def __init__(
        self, num_input_features: int, growth_rate: int, bn_size: int, drop_rate: float
    ) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(num_input_features)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(
            num_input_features, bn_size * growth_rate, kernel_size=1, stride=1, bias=False
        )
        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(
            bn_size * growth_rate, growth_rate, kernel_size=3, stride=1, padding=1, bias=False
        )
        self.drop_rate = float(drop_rate)

    def forward(self, prev_features: list[torch.Tensor]) -> torch.Tensor:
        concated_features = torch.cat(prev_features, 1)
        bottleneck_output = self.conv1(self.relu1(self.norm1(concated_features)))
        new_features = self.conv2(self.relu2(self.norm2(bottleneck_output)))
        if self.drop_rate > 0:
            new_features = F.dropout(new_features, p=self.drop_rate, training=self.training)
        return new_features


class _DenseBlock(nn.ModuleDict):
    def __init__(
        self,
        num_layers: int,
        num_input_features: int,
        bn_size: int,
        growth_rate: int,
        drop_rate: float,
    ) -> None:
        super().__init__()
        for i in range(num_layers):
            layer = _DenseLayer(
                num_input_features + i * growth_rate,
                growth_rate=growth_rate,
                bn_size=bn_size,
                drop_rate=drop_rate,
            )
            self.add_module(f'denselayer{i + 1}', layer)

    def forward(self, init_features: torch.Tensor) -> torch.Tensor:
        features = [init_features]
        for layer in self.values():
            features.append(layer(features))
        return torch.cat(features, 1)


class _Transition(nn.Sequential):
    def __init__(self, num_input_features: int, num_output_features: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(num_input_features)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(
            num_input_features, num_output_features, kernel_size=1, stride=1, bias=False
        )
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)


class DenseNet(nn.Module):
    """DenseNet-BC (Huang et al., 2017), as torchvision.models.DenseNet."""

    def __init__(
        self,
        growth_rate: int = 32,
        block_config: Sequence[int] = (6, 12, 24, 16),
        num_init_features: int = 64,
        bn_size: int = 4,
        drop_rate: float = 0,
        num_classes: int = NUM_CLASSES,
    ) -> None:
        super().__init__()
        self.features = nn.Sequential(
            OrderedDict(
                [
                    (
                        'conv0',
                        nn.Conv2d(
                            3, num_init_features, kernel_size=7, stride=2, padding=3, bias=False
                        ),
                    ),
                    ('norm0', nn.BatchNorm2d(num_init_features)),
                    ('relu0', nn.ReLU(inplace=True)),
                    ('pool0', nn.MaxPool2d(kernel_size=3, stride=2, padding=1)),
                ]
            )
        )
        num_features = num_init_features
        for i, num_layers in enumerate(block_config):
            block = _DenseBlock(
                num_layers=num_layers,
                num_input_features=num_features,
                bn_size=bn_size,
                growth_rate=growth_rate,
                drop_rate=drop_rate,
            )
            self.features.add_module(f'denseblock{i + 1}', block)
            num_features = num_features + num_layers * growth_rate
            if i != len(block_config) - 1:
                trans = _Transition(num_features, num_features // 2)
                self.features.add_module(f'transition{i + 1}', trans)
                num_features = num_features // 2
        self.features.add_module('norm5', nn.BatchNorm2d(num_features))
        self.classifier = nn.Linear(num_features, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.Linear):
                nn.init.constant_(m.bias, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.features(x)
        out = F.relu(features, inplace=True)
        out = F.adaptive_avg_pool2d(out, (1, 1))
        out = torch.flatten(out, 1)
        return self.classifier(out)


def build_densenet121(num_classes: int = NUM_CLASSES) -> DenseNet:
    """Return DenseNet-121."""
    return DenseNet(32, (6, 12, 24, 16), 64, num_classes=num_classes)


# ---------------------------------------------------------------------------------------
# ConvNeXt (torchvision.models.convnext).


class LayerNorm2d(nn.LayerNorm):
    """Layer norm over the channels of an NCHW tensor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class CNBlock(nn.Module):
    """Depthwise 7x7, layer norm, MLP with GELU, layer scale and a residual connection."""

    def __init__(self, dim: int, layer_scale: float, stochastic_depth_prob: float) -> None:
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim, bias=True),
            Permute([0, 2, 3, 1]),
            nn.LayerNorm(dim, eps=1e-6),
            nn.Linear(in_features=dim, out_features=4 * dim, bias=True),
            nn.GELU(),
            nn.Linear(in_features=4 * dim, out_features=dim, bias=True),
            Permute([0, 3, 1, 2]),
        )
        self.layer_scale = nn.Parameter(torch.ones(dim, 1, 1) * layer_scale)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, 'row')

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result = self.layer_scale * self.block(x)
        result = self.stochastic_depth(result)
        result += x
        return result


class ConvNeXt(nn.Module):
    """ConvNeXt (Liu et al., 2022), as torchvision.models.ConvNeXt.

    ``block_setting`` lists ``(input_channels, out_channels or None, num_layers)`` per stage.
    """

    def __init__(
        self,
        block_setting: Sequence[tuple[int, int | None, int]],
        stochastic_depth_prob: float = 0.0,
        layer_scale: float = 1e-6,
        num_classes: int = NUM_CLASSES,
    ) -> None:
        super().__init__()
        if not block_setting:
            raise ValueError('The block_setting should not be empty')
        norm_layer = partial(LayerNorm2d, eps=1e-6)
        layers: list[nn.Module] = [
            ConvNormActivation(
                3,
                block_setting[0][0],
                kernel_size=4,
                stride=4,
                padding=0,
                norm_layer=norm_layer,
                activation_layer=None,
                bias=True,
            )
        ]
        total_stage_blocks = sum(num_layers for _, _, num_layers in block_setting)
        stage_block_id = 0
        for input_channels, out_channels, num_layers in block_setting:
            stage: list[nn.Module] = []
            for _ in range(num_layers):
                sd_prob = stochastic_depth_prob * stage_block_id / (total_stage_blocks - 1.0)
                stage.append(CNBlock(input_channels, layer_scale, sd_prob))
                stage_block_id += 1
            layers.append(nn.Sequential(*stage))
            if out_channels is not None:
                layers.append(
                    nn.Sequential(
                        norm_layer(input_channels),
                        nn.Conv2d(input_channels, out_channels, kernel_size=2, stride=2),
                    )
                )
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        last_in, last_out, _ = block_setting[-1]
        last_channels = last_out if last_out is not None else last_in
        self.classifier = nn.Sequential(
            norm_layer(last_channels), nn.Flatten(1), nn.Linear(last_channels, num_classes)
        )

        for m in self.modules():
            if isinstance(m, nn.Conv2d | nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = self.avgpool(x)
        return self.classifier(x)


def build_convnext_tiny(num_classes: int = NUM_CLASSES) -> ConvNeXt:
    """Return ConvNeXt-Tiny (stochastic depth 0.1 in training, as torchvision)."""
    block_setting = [(96, 192, 3), (192, 384, 3), (384, 768, 9), (768, None, 3)]
    return ConvNeXt(block_setting, stochastic_depth_prob=0.1, num_classes=num_classes)


# ---------------------------------------------------------------------------------------
# MobileNetV2 (torchvision.models.mobilenetv2).


class InvertedResidual(nn.Module):
    """Expand (1x1), depthwise 3x3, project (1x1, linear); residual when shapes allow."""

    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f'stride should be 1 or 2 instead of {stride}')
        self.stride = stride
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = self.stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(
                ConvNormActivation(inp, hidden_dim, kernel_size=1, activation_layer=nn.ReLU6)
            )
        layers.extend(
            [
                ConvNormActivation(
                    hidden_dim,
                    hidden_dim,
                    stride=stride,
                    groups=hidden_dim,
                    activation_layer=nn.ReLU6,
                ),
                nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
                nn.BatchNorm2d(oup),
            ]
        )
        self.conv = nn.Sequential(*layers)
        self.out_channels = oup
        self._is_cn = stride > 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.use_res_connect:
            return x + self.conv(x)
        return self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 (Sandler et al., 2018), as torchvision.models.MobileNetV2."""

    def __init__(
        self,
        num_classes: int = NUM_CLASSES,
        width_mult: float = 1.0,
        round_nearest: int = 8,
        dropout: float = 0.2,
    ) -> None:
        super().__init__()
        input_channel = 32
        last_channel = 1280
        inverted_residual_setting = [
            # t, c, n, s
            [1, 16, 1, 1],
            [6, 24, 2, 2],
            [6, 32, 3, 2],
            [6, 64, 4, 2],
            [6, 96, 3, 1],
            [6, 160, 3, 2],
            [6, 320, 1, 1],
        ]
        input_channel = _make_divisible(input_channel * width_mult, round_nearest)
        self.last_channel = _make_divisible(last_channel * max(1.0, width_mult), round_nearest)
        features: list[nn.Module] = [
            ConvNormActivation(3, input_channel, stride=2, activation_layer=nn.ReLU6)
        ]
        for t, c, n, s in inverted_residual_setting:
            output_channel = _make_divisible(c * width_mult, round_nearest)
            for i in range(n):
                stride = s if i == 0 else 1
                features.append(InvertedResidual(input_channel, output_channel, stride, t))
                input_channel = output_channel
        features.append(
            ConvNormActivation(
                input_channel, self.last_channel, kernel_size=1, activation_layer=nn.ReLU6
            )
        )
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout),
            nn.Linear(self.last_channel, num_classes),
        )

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out')
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d | nn.GroupNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, (1, 1))
        x = torch.flatten(x, 1)
        return self.classifier(x)


def build_mobilenet_v2(num_classes: int = NUM_CLASSES) -> MobileNetV2:
    """Return MobileNetV2 (width 1.0)."""
    return MobileNetV2(num_classes=num_classes)


# ---------------------------------------------------------------------------------------
# ModelSpec factories, registered under the ``edge_offload.models`` entry-point group.


def _spec(name: str, build: Callable[[], nn.Module], title: str) -> ModelSpec:
    return ModelSpec(
        name=name,
        build=build,
        inputs=IMAGE_INPUT,
        outputs=('logits',),
        trained=False,
        description=(
            f'{title} (torchvision layout), randomly initialised; '
            'for latency/offloading experiments'
        ),
    )


def vgg19() -> ModelSpec:
    """Return the spec of VGG-19 on Nx3x224x224 images (randomly initialised)."""
    return _spec('vgg19', build_vgg19, 'VGG-19')


def vgg19_bn() -> ModelSpec:
    """Return the spec of VGG-19 with batch norm on Nx3x224x224 images."""
    return _spec('vgg19_bn', build_vgg19_bn, 'VGG-19-BN')


def resnet18() -> ModelSpec:
    """Return the spec of ResNet-18 on Nx3x224x224 images (randomly initialised)."""
    return _spec('resnet18', build_resnet18, 'ResNet-18')


def resnet50() -> ModelSpec:
    """Return the spec of ResNet-50 on Nx3x224x224 images (randomly initialised)."""
    return _spec('resnet50', build_resnet50, 'ResNet-50')


def resnet152() -> ModelSpec:
    """Return the spec of ResNet-152 on Nx3x224x224 images (randomly initialised)."""
    return _spec('resnet152', build_resnet152, 'ResNet-152')


def densenet121() -> ModelSpec:
    """Return the spec of DenseNet-121 on Nx3x224x224 images (randomly initialised)."""
    return _spec('densenet121', build_densenet121, 'DenseNet-121')


def convnext_tiny() -> ModelSpec:
    """Return the spec of ConvNeXt-Tiny on Nx3x224x224 images (randomly initialised)."""
    return _spec('convnext_tiny', build_convnext_tiny, 'ConvNeXt-Tiny')


def mobilenet_v2() -> ModelSpec:
    """Return the spec of MobileNetV2 on Nx3x224x224 images (randomly initialised)."""
    return _spec('mobilenet_v2', build_mobilenet_v2, 'MobileNetV2')
