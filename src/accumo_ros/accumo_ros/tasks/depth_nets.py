# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO's two monocular depth networks: the server estimator and the on-device lite model.

The dissertation offloads depth to AdaBins on the server and falls back to FastDepth on the
phone (§2.4): AbsRel 0.12–0.17 against 0.35. No pretrained monocular depth weights exist
offline, so both networks here are **randomly initialised** and trained from scratch by
:mod:`accumo_ros.tools.train_depth` on the suite's own synthetic sequences, supervised by their
exact ground-truth depth:

* :class:`ServerDepthNet` (``kind='server'``): a compact U-Net (residual encoder down to 1/32,
  a global-context vector at the bottleneck, bilinear-upsampling decoder with concatenated
  skips), fed the full 416×128 frame and predicting at 1/2 resolution, like AdaBins.
* :class:`LiteDepthNet` (``kind='lite'``): FastDepth (Wofk et al., ICRA 2019) at half width:
  a MobileNet-v1 encoder of depthwise-separable convolutions and the NNConv5 decoder
  (5×5 depthwise-separable convolution then ×2 nearest upsampling, five times, with additive
  skips from the encoder at 1/2, 1/4 and 1/8), fed 112×32: the release fed FastDepth
  224×64 while the server saw 832×256 frames, the same ratios (0.27 of the width, 1/4 of
  the height) of our 416×128 frames.

Both train on the default data set's 8 train rooms plus 64 rooms of a training-only set
(the dissertation trained on 20 further videos). On the 8 rooms alone the server net learnt
the rooms' textures (train AbsRel 0.03, held-out 0.146) and was barely better than the lite
net (0.158); with the 72 rooms it reaches 0.053 held-out against the lite net's 0.096.

Both nets output **log-depth** squashed by a sigmoid into ``[ln 0.1, ln 80]``, so depth is
always positive and inside the 0–80 m range of AccuMO's AbsRel mask, and the loss works on
log-depth directly. Upsampling back to the image resolution is bilinear on log-depth.
Images are normalised with the ImageNet mean and std, as FastDepth's were.

Weights are files written by :func:`save_depth_weights`: a plain dict
``{'metadata': {...}, 'state_dict': {...}}`` of float16 tensors and plain values, which
``torch.load(..., weights_only=True)`` reads without unpickling arbitrary objects.
:func:`load_depth_net` checks the metadata against the network it builds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - the conventional name
from torch import nn

DepthKind = Literal['server', 'lite']
KINDS: tuple[str, ...] = ('server', 'lite')
MIN_DEPTH_M = 0.1
MAX_DEPTH_M = 80.0
_LOG_MIN = math.log(MIN_DEPTH_M)
_LOG_MAX = math.log(MAX_DEPTH_M)
# A start near the scenes' typical depth, so the first steps learn structure, not an offset.
INITIAL_DEPTH_M = 5.0
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
WEIGHTS_DIR = Path(__file__).resolve().parents[1] / 'weights'
WEIGHTS_FORMAT = 'accumo_depth_weights/1'
# How the packaged weights are made (named in the errors): the data sets, then 60 CPU minutes
# of training in all, 2 threads.
DATA_COMMANDS = (
    'accumo_generate --output results/accumo_dataset',
    'accumo_generate --output results/accumo_train --seed 1 --holdout none '
    '--per-category 16 --duration 10 --fps 10',
)
TRAINING_COMMANDS = {
    'server': (
        'accumo_train_depth --dataset results/accumo_dataset '
        '--extra-train results/accumo_train --kind server --minutes 45 --every 3 '
        '--output src/accumo_ros/accumo_ros/weights/depth_server.pt'
    ),
    'lite': (
        'accumo_train_depth --dataset results/accumo_dataset '
        '--extra-train results/accumo_train --kind lite --minutes 15 --every 3 '
        '--output src/accumo_ros/accumo_ros/weights/depth_lite.pt'
    ),
}
# predict() runs this many frames per forward pass, to bound memory on long batches.
_PREDICT_CHUNK = 16


class DepthWeightsError(ValueError):
    """A weights file does not belong to the network it is loaded into."""


def _conv_bn_relu(
    c_in: int, c_out: int, kernel: int = 3, stride: int = 1, groups: int = 1
) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    )


class _ResidualBlock(nn.Module):
    """ResNet basic block; a strided 1×1 projection when the shape changes."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = _conv_bn_relu(c_in, c_out, 3, stride)
        self.conv2 = nn.Sequential(
            nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False), nn.BatchNorm2d(c_out)
        )
        self.project = (
            nn.Identity()
            if stride == 1 and c_in == c_out
            else nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)
            )
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv2(self.conv1(x)) + self.project(x), inplace=True)


class _DepthHead(nn.Module):
    """1×1 or 3×3 convolution to one channel, squashed into ``[ln 0.1, ln 80]``."""

    def __init__(self, c_in: int, kernel: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, 1, kernel, 1, kernel // 2)
        share = (math.log(INITIAL_DEPTH_M) - _LOG_MIN) / (_LOG_MAX - _LOG_MIN)
        nn.init.constant_(self.conv.bias, math.log(share / (1.0 - share)))
        # Small weights: the untrained net starts close to the constant initial depth.
        nn.init.normal_(self.conv.weight, std=1e-3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _LOG_MIN + (_LOG_MAX - _LOG_MIN) * torch.sigmoid(self.conv(x))


class DepthNet(nn.Module):
    """Base of both nets: normalisation, resizing and :meth:`predict`."""

    architecture: str
    input_size: tuple[int, int]  # (width, height) the net is fed
    metadata: dict[str, Any] | None = None  # the weights file's, once loaded

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer('mean', torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), False)
        self.register_buffer('std', torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), False)

    def forward_log(self, x: torch.Tensor) -> torch.Tensor:
        """Return log-depth (N, 1, h, w) at the net's output resolution for normalised input."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return depth in metres (N, 1, H, W) at the resolution of the normalised input."""
        log_depth = self.forward_log(x)
        return torch.exp(upsample_log_depth(log_depth, (x.shape[-2], x.shape[-1])))

    def prepare(self, rgb: torch.Tensor) -> torch.Tensor:
        """Turn (N, 3, H, W) float RGB in [0, 1] into the normalised net input.

        Resizes to :attr:`input_size` (bilinear, antialiased when shrinking) and applies the
        ImageNet mean and std.
        """
        width, height = self.input_size
        if rgb.shape[-2:] != (height, width):
            rgb = F.interpolate(
                rgb, size=(height, width), mode='bilinear', align_corners=False, antialias=True
            )
        return (rgb - self.mean) / self.std

    def predict(self, rgb: np.ndarray | torch.Tensor) -> np.ndarray:
        """Estimate depth in metres for uint8 RGB images at their own resolution.

        ``rgb`` is (H, W, 3) or (N, H, W, 3) uint8; the result is float32 (H, W) or
        (N, H, W), positive and within [0.1, 80] m. Runs in eval mode without gradients,
        then restores the training mode.
        """
        frames = torch.as_tensor(np.asarray(rgb))
        single = frames.dim() == 3
        if single:
            frames = frames[None]
        if frames.dim() != 4 or frames.shape[-1] != 3 or frames.dtype != torch.uint8:
            raise ValueError(
                f'expected uint8 (H, W, 3) or (N, H, W, 3) RGB, got {tuple(frames.shape)} '
                f'{frames.dtype}'
            )
        size = (frames.shape[1], frames.shape[2])
        was_training = self.training
        self.eval()
        outputs = []
        try:
            with torch.inference_mode():
                for chunk in frames.split(_PREDICT_CHUNK):
                    x = self.prepare(chunk.permute(0, 3, 1, 2).float() / 255.0)
                    log_depth = upsample_log_depth(self.forward_log(x), size)
                    outputs.append(torch.exp(log_depth)[:, 0])
        finally:
            self.train(was_training)
        depth = torch.cat(outputs).numpy().astype(np.float32, copy=False)
        return depth[0] if single else depth


def upsample_log_depth(log_depth: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Resize (N, 1, h, w) log-depth to ``size`` = (H, W) bilinearly (no-op when equal)."""
    if log_depth.shape[-2:] == size:
        return log_depth
    return F.interpolate(log_depth, size=size, mode='bilinear', align_corners=False)


class ServerDepthNet(DepthNet):
    """The server estimator: a compact U-Net at full resolution (AdaBins' stand-in).

    Encoder: a stride-2 stem and residual stages to 1/4, 1/8, 1/16 and 1/32, with a global
    average-pooled context added back at 1/32 (so every pixel sees the whole room's scale).
    Decoder: bilinear ×2 upsampling, concatenation with the encoder skip, one or two 3×3
    conv-BN-ReLU, up to 1/2 resolution; a 3×3 log-depth head. About 2.2 M parameters and
    0.8 G multiply-accumulates at 416×128.
    Randomly initialised: train it with :mod:`accumo_ros.tools.train_depth`.
    """

    architecture = 'accumo_server_unet_v1'
    default_input_size = (416, 128)
    stem_channels = (16, 24)
    # Per encoder stage (1/4 … 1/32): output channels and residual blocks. One block at 1/4
    # and single decoder convs at 1/4 and 1/2 keep the high-resolution cost down (CPU).
    stage_channels = (48, 64, 96, 192)
    stage_blocks = (1, 2, 2, 2)
    # Per decoder stage (1/16 … 1/2): output channels and 3×3 convolutions.
    decoder_channels = (96, 64, 32, 16)
    decoder_convs = (2, 2, 1, 1)

    def __init__(self, input_size: tuple[int, int] | None = None) -> None:
        super().__init__()
        self.input_size = tuple(input_size or self.default_input_size)
        first, channels = self.stem_channels
        self.stem = nn.Sequential(_conv_bn_relu(3, first, 3, 2), _conv_bn_relu(first, channels))
        skip_channels = [channels]
        self.stages = nn.ModuleList()
        for out, blocks in zip(self.stage_channels, self.stage_blocks, strict=True):
            layers = [_ResidualBlock(channels, out, 2)]
            layers += [_ResidualBlock(out, out, 1) for _ in range(blocks - 1)]
            self.stages.append(nn.Sequential(*layers))
            skip_channels.append(out)
            channels = out
        skip_channels.pop()  # the bottleneck is no skip
        self.context = nn.Sequential(nn.Conv2d(channels, channels, 1), nn.ReLU(inplace=True))
        self.up = nn.ModuleList()
        for skip, out, convs in zip(
            reversed(skip_channels), self.decoder_channels, self.decoder_convs, strict=True
        ):
            layers = [_conv_bn_relu(channels + skip, out)]
            layers += [_conv_bn_relu(out, out) for _ in range(convs - 1)]
            self.up.append(nn.Sequential(*layers))
            channels = out
        self.head = _DepthHead(channels, 3)

    def forward_log(self, x: torch.Tensor) -> torch.Tensor:
        """Return log-depth at 1/2 of the input resolution."""
        skips = [self.stem(x)]
        for stage in self.stages:
            skips.append(stage(skips[-1]))
        y = skips.pop()
        y = y + self.context(F.adaptive_avg_pool2d(y, 1))
        for block in self.up:
            skip = skips.pop()
            y = F.interpolate(y, size=skip.shape[-2:], mode='bilinear', align_corners=False)
            y = block(torch.cat([y, skip], dim=1))
        return self.head(y)


def _depthwise_separable(c_in: int, c_out: int, kernel: int, stride: int) -> nn.Sequential:
    return nn.Sequential(
        _conv_bn_relu(c_in, c_in, kernel, stride, groups=c_in), _conv_bn_relu(c_in, c_out, 1)
    )


class LiteDepthNet(DepthNet):
    """The on-device local algorithm: FastDepth (MobileNet + NNConv5) at half width.

    Encoder (MobileNet v1, width 0.5): a 3×3 stride-2 conv, then 13 depthwise-separable
    blocks to 1/32. Decoder (NNConv5): five 5×5 depthwise-separable convolutions, each
    followed by ×2 nearest upsampling, adding the encoder features at 1/8, 1/4 and 1/2
    (FastDepth's additive skips), and a 1×1 log-depth head at the input resolution.
    About 1.0 M parameters and 0.015 G multiply-accumulates at 112×32. Randomly initialised
    (FastDepth starts from ImageNet weights, which are not available offline): train it with
    :mod:`accumo_ros.tools.train_depth`.
    """

    architecture = 'accumo_lite_fastdepth_w050_v1'
    default_input_size = (112, 32)
    width = 0.5
    # MobileNet v1's (channels, stride) after the stem (block 0); FastDepth's skips are the
    # outputs of blocks 1, 3 and 5 (1/2, 1/4, 1/8).
    _mobilenet = (
        (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
        (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1),
    )  # fmt: skip
    _skip_blocks = (1, 3, 5)
    _sixteenth = 6  # the first block at 1/16

    def __init__(self, input_size: tuple[int, int] | None = None) -> None:
        super().__init__()
        self.input_size = tuple(input_size or self.default_input_size)

        def scaled(channels: int) -> int:
            return int(channels * self.width)

        blocks = [_conv_bn_relu(3, scaled(32), 3, 2)]
        channels = scaled(32)
        for out, stride in self._mobilenet:
            blocks.append(_depthwise_separable(channels, scaled(out), 3, stride))
            channels = scaled(out)
        self.encoder = nn.ModuleList(blocks)
        self.decoder = nn.ModuleList()
        for out in (512, 256, 128, 64, 32):
            self.decoder.append(_depthwise_separable(channels, scaled(out), 5, 1))
            channels = scaled(out)
        self.head = _DepthHead(channels, 1)

    def forward_log(self, x: torch.Tensor) -> torch.Tensor:
        """Return log-depth at the input resolution."""
        size = x.shape[-2:]
        features = []
        for block in self.encoder:
            x = block(x)
            features.append(x)
        # Each decoder stage upsamples to the next finer encoder size rather than by ×2:
        # widths like 112 are not multiples of 32, so the encoder rounds sizes up.
        targets = [features[self._sixteenth].shape[-2:]]
        targets += [features[index].shape[-2:] for index in reversed(self._skip_blocks)]
        targets.append(size)
        skips = [None] + [features[index] for index in reversed(self._skip_blocks)] + [None]
        for block, target, skip in zip(self.decoder, targets, skips, strict=True):
            x = F.interpolate(block(x), size=target, mode='nearest')
            if skip is not None:
                x = x + skip
        return self.head(x)


NETS: dict[str, type[DepthNet]] = {'server': ServerDepthNet, 'lite': LiteDepthNet}


def build_depth_net(kind: DepthKind, input_size: tuple[int, int] | None = None) -> DepthNet:
    """Build a randomly initialised network of ``kind`` (``server`` or ``lite``)."""
    if kind not in NETS:
        raise ValueError(f'unknown depth net kind {kind!r}; use one of {KINDS}')
    return NETS[kind](input_size)


def default_weights_path(kind: DepthKind) -> Path:
    """Return the packaged weights file of ``kind``: ``weights/depth_<kind>.pt``."""
    return WEIGHTS_DIR / f'depth_{kind}.pt'


def count_parameters(net: nn.Module) -> int:
    """Return the number of parameters (weights and biases; not BN running statistics)."""
    return sum(p.numel() for p in net.parameters())


def conv_macs(net: DepthNet, input_size: tuple[int, int] | None = None) -> int:
    """Count the multiply-accumulates of the convolutions for one frame (a FLOP proxy).

    Runs one forward pass of a zero image of ``input_size`` (default: the net's own) and sums
    ``output pixels × output channels × input channels / groups × kernel area`` over every
    ``Conv2d``; BN, activations and resizing are left out.
    """
    width, height = input_size or net.input_size
    total = 0

    def hook(module: nn.Conv2d, _inputs: tuple, output: torch.Tensor) -> None:
        nonlocal total
        kernel = module.kernel_size[0] * module.kernel_size[1]
        total += output[0].numel() * module.in_channels // module.groups * kernel

    handles = [m.register_forward_hook(hook) for m in net.modules() if isinstance(m, nn.Conv2d)]
    was_training = net.training
    net.eval()
    try:
        with torch.inference_mode():
            net.forward_log(torch.zeros(1, 3, height, width))
    finally:
        for handle in handles:
            handle.remove()
        net.train(was_training)
    return total


def weights_metadata(net: DepthNet, kind: DepthKind, **extra: Any) -> dict[str, Any]:  # noqa: ANN401
    """Return the metadata stored with weights: identity of the net plus ``extra`` facts."""
    return {
        'format': WEIGHTS_FORMAT,
        'kind': kind,
        'architecture': net.architecture,
        'input_size': list(net.input_size),
        'parameters': count_parameters(net),
        **extra,
    }


def round_to_float16(net: nn.Module) -> None:
    """Round the net's floating-point parameters and buffers to float16 values, in place.

    Weights are stored as float16 (half the size; the loss of accuracy is far below the nets'
    errors). Rounding the live net too makes it compute exactly what the file loads to, so
    the held-out figures stored with the weights are the stored weights' own.
    """
    with torch.no_grad():
        for tensor in net.state_dict().values():
            if tensor.is_floating_point():
                tensor.copy_(tensor.to(torch.float16))


def save_depth_weights(net: DepthNet, path: Path | str, metadata: Mapping[str, Any]) -> None:
    """Write ``{'metadata': ..., 'state_dict': ...}`` (tensors and plain values only).

    Floating-point tensors are stored as float16, after :func:`round_to_float16` rounded the
    live net the same way.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    round_to_float16(net)
    state = {
        key: value.detach().cpu().to(torch.float16 if value.is_floating_point() else value.dtype)
        for key, value in net.state_dict().items()
    }
    torch.save({'metadata': dict(metadata), 'state_dict': state}, path)


def read_depth_weights(path: Path | str) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """Read a weights file safely (``weights_only=True``); return (metadata, state_dict)."""
    document = torch.load(Path(path), map_location='cpu', weights_only=True)
    if (
        not isinstance(document, dict)
        or not isinstance(document.get('metadata'), dict)
        or not isinstance(document.get('state_dict'), dict)
        or document['metadata'].get('format') != WEIGHTS_FORMAT
    ):
        raise DepthWeightsError(
            f'{path} is not an AccuMO depth weights file ({WEIGHTS_FORMAT}: a dict with '
            "'metadata' and 'state_dict'); write it with accumo_ros.tools.train_depth"
        )
    return document['metadata'], document['state_dict']


def load_depth_net(kind: DepthKind, weights_path: Path | str | None = None) -> DepthNet:
    """Build the ``kind`` network and load its trained weights, in eval mode.

    ``weights_path`` defaults to :func:`default_weights_path`. Raises FileNotFoundError
    (naming the training command) when the file is missing, and DepthWeightsError when its
    metadata names another kind, architecture or input size.
    """
    if kind not in NETS:
        raise ValueError(f'unknown depth net kind {kind!r}; use one of {KINDS}')
    path = Path(weights_path) if weights_path is not None else default_weights_path(kind)
    if not path.is_file():
        raise FileNotFoundError(
            f'depth weights {path} do not exist; no pretrained weights are available offline, '
            'so generate the data sets and train them from the repository root with:\n  '
            + '\n  '.join([*DATA_COMMANDS, TRAINING_COMMANDS[kind]])
        )
    metadata, state_dict = read_depth_weights(path)
    net = build_depth_net(kind)
    expected = {
        'kind': kind,
        'architecture': net.architecture,
        'input_size': list(net.input_size),
    }
    found = {key: metadata.get(key) for key in expected}
    if found != expected:
        raise DepthWeightsError(
            f'{path} holds weights for {found}, but {kind!r} needs {expected}; retrain with:\n'
            f'  {TRAINING_COMMANDS[kind]}'
        )
    # load_state_dict copies the float16 tensors into the float32 parameters.
    net.load_state_dict(state_dict)
    net.metadata = metadata
    return net.eval()
