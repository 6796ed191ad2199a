# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""KAPAO-S/M/L (McNally et al., ECCV 2022) in plain torch, with KAPAO's post-processing.

KAPAO ("Rethinking Keypoint Representations: Modeling Keypoints and Poses as Objects for
Multi-Person Human Pose Estimation", https://github.com/wmcnally/kapao) is a YOLOv5 'P6'
detector: the backbone and neck of ``yolov5s6/m6/l6.yaml`` as vendored by the KAPAO repo
(forked from ultralytics/yolov5 at commit 5487451, so a ``Focus`` stem and ``SPP(k=3,5,7)``,
not the later 6x6-conv stem and SPPF), four output levels P3-P6 (strides 8/16/32/64, three
anchors each) and a Detect head with ``18 + 34`` classes: class 0 is the pose object,
classes 1..17 are the COCO keypoint objects, and the last 34 numbers of each anchor are the
pose object's 17 keypoint (x, y) offsets. Every anchor predicts ``5 + 18 + 34 = 57`` numbers.

``KapaoNet`` reproduces the official ``models.yolo.Model`` module tree, so its state_dict
keys and shapes are those of the official checkpoints (``model.<i>.conv.weight``,
``model.<i>.cv1.conv.weight``, ``model.<i>.m.<j>.cv1...``, ``model.33.m.<k>.weight``, the
Detect ``anchors`` and ``anchor_grid`` buffers). Its forward returns what the official
Detect returns first in eval mode: the decoded predictions ``(batch, n, 57)`` with xywh in
input pixels, sigmoid objectness and class scores and the decoded keypoint coordinates.

Using official weights
----------------------
The official checkpoints (``kapao_s_coco.pt``, ``kapao_m_coco.pt``, ``kapao_l_coco.pt``,
``kapao_*_crowdpose.pt``) are pickled YOLOv5 ``Model`` objects, which this repository never
unpickles. Convert one ONCE in the official environment (a KAPAO checkout on ``sys.path``,
its requirements installed), on a file you downloaded yourself and trust: unpickling runs
code, which is why it happens there and never on anything received over a network::

    import torch
    ckpt = torch.load('kapao_s_coco.pt', map_location='cpu', weights_only=False)
    model = ckpt['ema'] if ckpt.get('ema') else ckpt['model']
    torch.save(model.float().state_dict(), 'kapao_s_coco.state_dict.pt')

and load the plain state_dict here (``torch.load(weights_only=True)``, strict)::

    net = KapaoNet('s')
    load_kapao_state_dict(net, 'kapao_s_coco.state_dict.pt')

``load_kapao_state_dict`` also takes a ``KapaoPeople``. CrowdPose checkpoints have 14
keypoints: build ``KapaoNet('l', num_keypoints=14)`` for them.

Post-processing
---------------
``kapao_postprocess`` follows KAPAO's ``val.run_nms`` and ``val.post_process_batch``:
class-aware NMS of pose objects (``conf_thres``) and of keypoint objects (``conf_thres_kp``),
then each keypoint object replaces the nearest keypoint of its type among the pose objects
scoring above ``conf_thres_kp_person`` if it lies within ``overwrite_tol`` pixels and beats
that keypoint's current score. A fused keypoint scores its keypoint object's confidence.
KAPAO scores the pose object's own keypoints 0; the people interface reads score 0 as 'not
found', so they get the pose's score here unless ``zero_pose_keypoint_scores`` is set. The
thresholds default to those of the official ``demos/image.py``. Unlike the official code
(30 000 candidates into NMS), the candidates are capped at ``pre_nms_topk`` so that random
weights cannot blow up the runtime.

The zoo's models are randomly initialised (``trained=False``): they serve latency and
offloading experiments, never detections.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from edge_offload.models import ModelSpec, SizeLimits, TensorSpec

COCO_KEYPOINTS = 17
CROWDPOSE_KEYPOINTS = 14
MAX_STRIDE = 64
STRIDES = (8, 16, 32, 64)
# models/yolov5{s,m,l}6.yaml of the KAPAO repo (pixels, (w, h) pairs for P3/8 .. P6/64).
ANCHORS = (
    (19, 27, 44, 40, 38, 94),
    (96, 68, 86, 152, 180, 137),
    (140, 301, 303, 264, 238, 542),
    (436, 615, 739, 380, 925, 792),
)
# (depth_multiple, width_multiple) of yolov5s6/m6/l6.yaml.
VARIANTS = {'s': (0.33, 0.50), 'm': (0.67, 0.75), 'l': (1.0, 1.0)}
# The LOPInfer KAPAO benchmark loop letterboxes its fixed image (crowdpose_100024.jpg) to
# 640 (/work/shared/specs/lopinfer.md, section 5.1); KAPAO itself trains and validates at
# 1280.
DEFAULT_INPUT_SIZE = 640
PAD_VALUE = 114
# YOLOv5's class offset for batched NMS (max_wh in utils/general.non_max_suppression_kp).
_CLASS_OFFSET = 4096.0

# The layer table of models/yolov5{s,m,l}6.yaml: (from, repeats, module, args).
_LAYERS: tuple[tuple[int | tuple[int, ...], int, str, tuple], ...] = (
    (-1, 1, 'Focus', (64, 3)),  # 0-P1/2
    (-1, 1, 'Conv', (128, 3, 2)),  # 1-P2/4
    (-1, 3, 'C3', (128,)),
    (-1, 1, 'Conv', (256, 3, 2)),  # 3-P3/8
    (-1, 9, 'C3', (256,)),
    (-1, 1, 'Conv', (512, 3, 2)),  # 5-P4/16
    (-1, 9, 'C3', (512,)),
    (-1, 1, 'Conv', (768, 3, 2)),  # 7-P5/32
    (-1, 3, 'C3', (768,)),
    (-1, 1, 'Conv', (1024, 3, 2)),  # 9-P6/64
    (-1, 1, 'SPP', (1024, (3, 5, 7))),
    (-1, 3, 'C3', (1024, False)),  # 11
    (-1, 1, 'Conv', (768, 1, 1)),
    (-1, 1, 'Upsample', ()),
    ((-1, 8), 1, 'Concat', ()),  # cat backbone P5
    (-1, 3, 'C3', (768, False)),  # 15
    (-1, 1, 'Conv', (512, 1, 1)),
    (-1, 1, 'Upsample', ()),
    ((-1, 6), 1, 'Concat', ()),  # cat backbone P4
    (-1, 3, 'C3', (512, False)),  # 19
    (-1, 1, 'Conv', (256, 1, 1)),
    (-1, 1, 'Upsample', ()),
    ((-1, 4), 1, 'Concat', ()),  # cat backbone P3
    (-1, 3, 'C3', (256, False)),  # 23 (P3/8-small)
    (-1, 1, 'Conv', (256, 3, 2)),
    ((-1, 20), 1, 'Concat', ()),  # cat head P4
    (-1, 3, 'C3', (512, False)),  # 26 (P4/16-medium)
    (-1, 1, 'Conv', (512, 3, 2)),
    ((-1, 16), 1, 'Concat', ()),  # cat head P5
    (-1, 3, 'C3', (768, False)),  # 29 (P5/32-large)
    (-1, 1, 'Conv', (768, 3, 2)),
    ((-1, 12), 1, 'Concat', ()),  # cat head P6
    (-1, 3, 'C3', (1024, False)),  # 32 (P6/64-xlarge)
    ((23, 26, 29, 32), 1, 'Detect', ()),  # Detect(P3, P4, P5, P6)
)


class KapaoWeightsError(ValueError):
    """A weights file that does not fit the KAPAO network it is loaded into."""


# ---------------------------------------------------------------------------------------
# YOLOv5 building blocks (models/common.py of the vendored YOLOv5).


def _autopad(k: int, p: int | None = None) -> int:
    return k // 2 if p is None else p


class Conv(nn.Module):
    """Conv2d (no bias) + BatchNorm2d + SiLU."""

    def __init__(
        self, c1: int, c2: int, k: int = 1, s: int = 1, p: int | None = None, g: int = 1
    ) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, _autopad(k, p), groups=g, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        # Not in-place (the official sets inplace=True): hooks that keep a BN output for
        # partitioning would otherwise see it overwritten. Same numbers either way.
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    """Standard bottleneck: 1x1 conv, 3x3 conv, optional residual."""

    def __init__(
        self, c1: int, c2: int, shortcut: bool = True, g: int = 1, e: float = 0.5
    ) -> None:
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_, c2, 3, 1, g=g)
        self.add = shortcut and c1 == c2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3(nn.Module):
    """CSP bottleneck with three convolutions."""

    def __init__(
        self, c1: int, c2: int, n: int = 1, shortcut: bool = True, g: int = 1, e: float = 0.5
    ) -> None:
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c1, c_, 1, 1)
        self.cv3 = Conv(2 * c_, c2, 1)
        self.m = nn.Sequential(*(Bottleneck(c_, c_, shortcut, g, e=1.0) for _ in range(n)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), dim=1))


class SPP(nn.Module):
    """Spatial pyramid pooling (parallel max-pools), as in the KAPAO P6 yaml."""

    def __init__(self, c1: int, c2: int, k: Sequence[int] = (5, 9, 13)) -> None:
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_ * (len(k) + 1), c2, 1, 1)
        self.m = nn.ModuleList(nn.MaxPool2d(kernel_size=x, stride=1, padding=x // 2) for x in k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.cv1(x)
        return self.cv2(torch.cat([x] + [m(x) for m in self.m], 1))


class Focus(nn.Module):
    """Space-to-depth (2x2) then a Conv: the pre-v6.0 YOLOv5 stem."""

    def __init__(self, c1: int, c2: int, k: int = 1, s: int = 1) -> None:
        super().__init__()
        self.conv = Conv(c1 * 4, c2, k, s)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(
            torch.cat(
                [x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]], 1
            )
        )


class Concat(nn.Module):
    """Concatenate a list of tensors along a dimension."""

    def __init__(self, dimension: int = 1) -> None:
        super().__init__()
        self.d = dimension

    def forward(self, x: list[torch.Tensor]) -> torch.Tensor:
        return torch.cat(x, self.d)


class Detect(nn.Module):
    """KAPAO's Detect head: per level a 1x1 conv to ``3 * (5 + classes + coords)``.

    ``anchors`` (levels, 3, 2) holds the anchors in units of the level's stride and
    ``anchor_grid`` (levels, 1, 3, 1, 1, 2) in pixels, as the official buffers do; decoding
    uses ``anchor_grid``, so anchors changed by autoanchor come in with the weights.
    """

    def __init__(
        self,
        num_classes: int,
        num_coords: int,
        anchors: Sequence[Sequence[int]],
        ch: Sequence[int],
        strides: Sequence[int],
    ) -> None:
        super().__init__()
        self.nc = num_classes
        self.num_coords = num_coords
        self.no = num_classes + num_coords + 5
        self.nl = len(anchors)
        self.na = len(anchors[0]) // 2
        self.strides = tuple(float(s) for s in strides)
        # A plain attribute as in the official Detect (not in the state_dict).
        self.stride = torch.tensor(self.strides)
        a = torch.tensor(anchors, dtype=torch.float32).view(self.nl, -1, 2)
        self.register_buffer('anchors', a / self.stride.to(a.device).view(-1, 1, 1))
        self.register_buffer('anchor_grid', a.clone().view(self.nl, 1, -1, 1, 1, 2))
        self.m = nn.ModuleList(nn.Conv2d(x, self.no * self.na, 1) for x in ch)
        # Grids are built on the first inference at a given size and reused afterwards, as
        # in YOLOv5 (the 'initialising inference' that RRTO observes on KAPAO).
        self.grid: list[torch.Tensor] = [torch.zeros(1)] * self.nl

    def _grid(self, i: int, nx: int, ny: int, like: torch.Tensor) -> torch.Tensor:
        grid = self.grid[i]
        if (
            grid.shape[2:4] != (ny, nx)
            or grid.device != like.device
            or grid.is_inference() != torch.is_inference_mode_enabled()
        ):
            yv, xv = torch.meshgrid(
                torch.arange(ny, device=like.device),
                torch.arange(nx, device=like.device),
                indexing='ij',
            )
            grid = torch.stack((xv, yv), 2).view(1, 1, ny, nx, 2).float()
            self.grid[i] = grid
        return grid

    def forward(self, xs: list[torch.Tensor]) -> torch.Tensor | list[torch.Tensor]:
        raw: list[torch.Tensor] = []
        decoded: list[torch.Tensor] = []
        reps = self.num_coords // 2
        for i in range(self.nl):
            p = self.m[i](xs[i])
            bs, _, ny, nx = p.shape
            p = p.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
            if self.training:
                raw.append(p)
                continue
            grid = self._grid(i, nx, ny, p).to(p.dtype)
            stride = self.strides[i]
            anchor = self.anchor_grid[i].to(p.dtype)
            y = p.sigmoid()
            xy = (y[..., 0:2] * 2.0 - 0.5 + grid) * stride
            wh = (y[..., 2:4] * 2) ** 2 * anchor
            parts = [xy, wh, y[..., 4 : self.no - self.num_coords]]
            if self.num_coords:
                # KAPAO: offsets in [-2, 2] anchors from the grid cell's corner.
                kp = (y[..., -self.num_coords :] * 4.0 - 2.0) * anchor.repeat(1, 1, 1, 1, reps)
                parts.append(kp + (grid * stride).repeat(1, 1, 1, 1, reps))
            decoded.append(torch.cat(parts, -1).view(bs, -1, self.no))
        return raw if self.training else torch.cat(decoded, 1)


def _make_divisible(x: float, divisor: int) -> int:
    return math.ceil(x / divisor) * divisor


class KapaoNet(nn.Module):
    """KAPAO-S/M/L network: YOLOv5s6/m6/l6 backbone and neck with the KAPAO Detect head.

    The layout follows the official ``Model``: ``self.model`` is an ``nn.Sequential`` of the
    34 layers of the yaml, each with ``.i`` (index) and ``.f`` (input layers). Input is a
    float image ``(batch, 3, H, W)``, RGB in [0, 1], with H and W multiples of 64. In eval
    mode the output is ``(batch, n, 5 + classes + 2 * num_keypoints)`` decoded predictions;
    in training mode the list of raw per-level maps, as the official Detect.
    """

    def __init__(self, variant: str = 's', num_keypoints: int = COCO_KEYPOINTS) -> None:
        super().__init__()
        if variant not in VARIANTS:
            raise ValueError(
                f'unknown KAPAO variant {variant!r}; choose one of {sorted(VARIANTS)}'
            )
        self.variant = variant
        self.num_keypoints = num_keypoints
        self.num_classes = 1 + num_keypoints
        self.num_coords = 2 * num_keypoints
        self.no = 5 + self.num_classes + self.num_coords
        depth, width = VARIANTS[variant]
        self.model, self.save = self._parse(depth, width)
        self.stride = self.model[-1].stride
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                # utils/torch_utils.initialize_weights: eps is not in the state_dict but
                # changes every output, so it must match the official.
                m.eps = 1e-3
                m.momentum = 0.03
        self._initialize_biases()

    def _parse(self, depth: float, width: float) -> tuple[nn.Sequential, list[int]]:
        layers: list[nn.Module] = []
        save: list[int] = []
        ch = [3]
        for i, (f, n, kind, args) in enumerate(_LAYERS):
            n = max(round(n * depth), 1) if n > 1 else n
            c1 = ch[f] if isinstance(f, int) else 0
            if kind in ('Focus', 'Conv', 'C3', 'SPP'):
                c2 = _make_divisible(args[0] * width, 8)
            if kind == 'Focus':
                module: nn.Module = Focus(c1, c2, *args[1:])
            elif kind == 'Conv':
                module = Conv(c1, c2, *args[1:])
            elif kind == 'C3':
                module = C3(c1, c2, n, *args[1:])
            elif kind == 'SPP':
                module = SPP(c1, c2, *args[1:])
            elif kind == 'Upsample':
                module, c2 = nn.Upsample(None, 2, 'nearest'), c1
            elif kind == 'Concat':
                module, c2 = Concat(1), sum(ch[x] for x in f)
            else:  # Detect
                module = Detect(
                    self.num_classes, self.num_coords, ANCHORS, [ch[x] for x in f], STRIDES
                )
                c2 = 0
            module.i, module.f = i, f
            save.extend(x % i for x in ((f,) if isinstance(f, int) else f) if x != -1)
            layers.append(module)
            if i == 0:
                ch = []
            ch.append(c2)
        return nn.Sequential(*layers), sorted(set(save))

    def _initialize_biases(self) -> None:
        # models/yolo.Model._initialize_biases: priors of 8 objects per 640 image and
        # 0.6 / classes for the class scores, so random weights score near zero.
        detect = self.model[-1]
        with torch.no_grad():
            for conv, s in zip(detect.m, detect.strides, strict=True):
                b = conv.bias.view(detect.na, -1)
                b[:, 4] += math.log(8 / (640 / s) ** 2)
                b[:, 5 : 5 + detect.nc] += math.log(0.6 / (detect.nc - 0.99))

    def forward(self, image: torch.Tensor) -> torch.Tensor | list[torch.Tensor]:
        if image.dim() != 4 or image.shape[1] != 3:
            raise ValueError(
                f'KAPAO takes images of shape (batch, 3, H, W), got {list(image.shape)}'
            )
        height, width = image.shape[-2:]
        if height % MAX_STRIDE or width % MAX_STRIDE or not height or not width:
            raise ValueError(
                f'KAPAO input sides must be positive multiples of {MAX_STRIDE} (its largest '
                f'stride, P6/64), got {height}x{width}; letterbox the image first '
                '(KapaoPeople does)'
            )
        x: torch.Tensor | list[torch.Tensor] = image
        outputs: list[torch.Tensor | None] = []
        for m in self.model:
            if m.f != -1:
                x = (
                    outputs[m.f]
                    if isinstance(m.f, int)
                    else [x if j == -1 else outputs[j] for j in m.f]
                )
            x = m(x)
            outputs.append(x if m.i in self.save else None)
        return x


# ---------------------------------------------------------------------------------------
# Loading official weights.

# Training-only entries the official Model may carry (autobalance loss weights).
_TRAINING_ONLY_KEYS = frozenset({'loss_coeffs'})


def _describe(keys: Sequence[str], limit: int = 12) -> str:
    shown = ', '.join(keys[:limit])
    return shown + (f', ... ({len(keys) - limit} more)' if len(keys) > limit else '')


def load_kapao_state_dict(net: nn.Module, path: str | Path) -> nn.Module:
    """Load a plain KAPAO state_dict file (see the module docstring) into ``net``, strictly.

    ``net`` is a ``KapaoNet`` or a ``KapaoPeople``. Raises ``KapaoWeightsError`` naming the
    missing and unexpected keys and the shape mismatches when the file does not fit.
    """
    target = net.net if isinstance(net, KapaoPeople) else net
    try:
        state = torch.load(Path(path), map_location='cpu', weights_only=True)
    except Exception as error:  # weights_only rejects pickled objects with various errors
        raise KapaoWeightsError(
            f'{path} is not a plain state_dict that torch.load(weights_only=True) can read '
            f'({type(error).__name__}: {error}). An official KAPAO checkpoint is a pickled '
            'YOLOv5 Model: convert it once in the official environment with '
            "torch.save(ckpt['model'].float().state_dict(), 'name.state_dict.pt')"
        ) from error
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise KapaoWeightsError(f'{path} does not hold a state_dict (a dict of tensors)')
    state = {k: v for k, v in state.items() if k not in _TRAINING_ONLY_KEYS}
    expected = target.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    mismatched = sorted(
        f'{k}: file {tuple(state[k].shape)} vs model {tuple(expected[k].shape)}'
        for k in set(expected) & set(state)
        if state[k].shape != expected[k].shape
    )
    if missing or unexpected or mismatched:
        problems = []
        if missing:
            problems.append(f'missing keys ({len(missing)}): {_describe(missing)}')
        if unexpected:
            problems.append(f'unexpected keys ({len(unexpected)}): {_describe(unexpected)}')
        if mismatched:
            problems.append(f'shape mismatches ({len(mismatched)}): {_describe(mismatched)}')
        raise KapaoWeightsError(
            f'{path} does not fit KapaoNet({target.variant!r}, '
            f'num_keypoints={target.num_keypoints}): ' + '; '.join(problems)
        )
    target.load_state_dict(state, strict=True)
    return net


# ---------------------------------------------------------------------------------------
# Post-processing (utils/general.non_max_suppression_kp, val.run_nms, val.post_process_batch).


@dataclass(frozen=True)
class KapaoPostprocessConfig:
    """Thresholds of KAPAO's post-processing; defaults from the official demos/image.py."""

    conf_thres: float = 0.7  # pose objects
    iou_thres: float = 0.45
    conf_thres_kp: float = 0.5  # keypoint objects
    iou_thres_kp: float = 0.45
    conf_thres_kp_person: float = 0.2  # poses that keypoint objects may be fused into
    overwrite_tol: float = 25.0  # pixels of the original image
    use_kp_dets: bool = True
    # True: KAPAO's convention (pose keypoints score 0 unless fused); False: the pose score.
    zero_pose_keypoint_scores: bool = False
    max_det: int = 300  # per NMS call, as the official
    pre_nms_topk: int = 1000  # candidates into NMS (official: 30000)


def xywh2xyxy(x: torch.Tensor) -> torch.Tensor:
    """Convert (n, 4) center-size boxes to corners."""
    xy, half = x[:, 0:2], x[:, 2:4] / 2
    return torch.cat((xy - half, xy + half), 1)


def box_iou(box1: torch.Tensor, box2: torch.Tensor) -> torch.Tensor:
    """Return the (n, m) IoU matrix of xyxy boxes."""
    area1 = (box1[:, 2] - box1[:, 0]) * (box1[:, 3] - box1[:, 1])
    area2 = (box2[:, 2] - box2[:, 0]) * (box2[:, 3] - box2[:, 1])
    lt = torch.max(box1[:, None, :2], box2[:, :2])
    rb = torch.min(box1[:, None, 2:], box2[:, 2:])
    inter = (rb - lt).clamp(min=0).prod(2)
    return inter / (area1[:, None] + area2 - inter)


def nms(
    boxes: torch.Tensor, scores: torch.Tensor, iou_thres: float, max_det: int | None = None
) -> torch.Tensor:
    """Greedy NMS like ``torchvision.ops.nms``: indices of kept boxes, by falling score.

    A box is dropped when its IoU with a kept, higher-scoring box exceeds ``iou_thres``.
    The loop runs once per kept box, so at most ``max_det`` times.
    """
    order = torch.argsort(scores, descending=True, stable=True)
    keep: list[torch.Tensor] = []
    limit = order.numel() if max_det is None else max_det
    while order.numel() and len(keep) < limit:
        best = order[0]
        keep.append(best)
        rest = order[1:]
        if not rest.numel():
            break
        iou = box_iou(boxes[best].unsqueeze(0), boxes[rest])[0]
        order = rest[iou <= iou_thres]
    if not keep:
        return torch.zeros(0, dtype=torch.long, device=boxes.device)
    return torch.stack(keep)


def batched_nms(
    boxes: torch.Tensor,
    scores: torch.Tensor,
    classes: torch.Tensor,
    iou_thres: float,
    max_det: int | None = None,
) -> torch.Tensor:
    """Class-aware NMS: boxes of different classes never suppress each other."""
    # YOLOv5's trick: shift each class to its own region of the plane.
    offset = classes.to(boxes.dtype)[:, None] * _CLASS_OFFSET
    return nms(boxes + offset, scores, iou_thres, max_det)


def non_max_suppression_kp(
    prediction: torch.Tensor,
    conf_thres: float,
    iou_thres: float,
    classes: Sequence[int] | None = None,
    num_coords: int = 2 * COCO_KEYPOINTS,
    max_det: int = 300,
    pre_nms_topk: int = 1000,
) -> torch.Tensor:
    """NMS of one image's decoded predictions ``(n, 5 + classes + coords)``.

    Returns ``(k, 6 + coords)`` rows ``[x1, y1, x2, y2, conf, class, coords...]`` with
    conf = objectness * best class score, as KAPAO's ``non_max_suppression_kp``.
    """
    if not 0 <= conf_thres <= 1 or not 0 <= iou_thres <= 1:
        raise ValueError(f'thresholds must be in [0, 1], got {conf_thres}, {iou_thres}')
    x = prediction[prediction[:, 4] > conf_thres]
    empty = prediction.new_zeros((0, 6 + num_coords))
    if not x.shape[0]:
        return empty
    end = x.shape[1] - num_coords
    cls_conf = x[:, 5:end] * x[:, 4:5]
    conf, j = cls_conf.max(1, keepdim=True)
    x = torch.cat((xywh2xyxy(x[:, :4]), conf, j.to(x.dtype), x[:, end:]), 1)
    x = x[conf.view(-1) > conf_thres]
    if classes is not None:
        wanted = torch.tensor(list(classes), device=x.device, dtype=x.dtype)
        x = x[(x[:, 5:6] == wanted).any(1)]
    if not x.shape[0]:
        return empty
    if x.shape[0] > pre_nms_topk:
        x = x[torch.topk(x[:, 4], pre_nms_topk).indices]
    i = batched_nms(x[:, :4], x[:, 4], x[:, 5], iou_thres, max_det)
    return x[i]


def scale_coords(
    img1_shape: Sequence[int], coords: torch.Tensor, img0_shape: Sequence[int]
) -> torch.Tensor:
    """Map (n, 2k) x/y coordinates from the letterboxed to the original image, clipped.

    Gain and padding are recomputed from the shapes, as KAPAO's ``scale_coords``. Unlike the
    official (which clips only the first four columns), every point is clipped.
    """
    h1, w1 = float(img1_shape[0]), float(img1_shape[1])
    h0, w0 = float(img0_shape[0]), float(img0_shape[1])
    gain = min(h1 / h0, w1 / w0)
    pad_x, pad_y = (w1 - w0 * gain) / 2, (h1 - h0 * gain) / 2
    xy = coords.reshape(coords.shape[0], -1, 2)
    x = ((xy[..., 0] - pad_x) / gain).clamp(0, w0)
    y = ((xy[..., 1] - pad_y) / gain).clamp(0, h0)
    return torch.stack((x, y), -1).reshape(coords.shape[0], -1)


def fuse_keypoint_objects(
    pose_scores: torch.Tensor,
    poses: torch.Tensor,
    kp_dets: torch.Tensor,
    conf_thres_kp_person: float,
    overwrite_tol: float,
) -> torch.Tensor:
    """Fuse keypoint objects into pose objects as KAPAO's ``post_process_batch`` does.

    ``poses`` (n, K, 3) [x, y, score] and ``kp_dets`` (k, >=6) [x1, y1, x2, y2, conf, class]
    are in the same (original image) pixels. In order, each keypoint object of class c
    replaces keypoint c - 1 of the nearest pose among those scoring above
    ``conf_thres_kp_person`` when the distance is below ``overwrite_tol`` and its
    confidence beats the keypoint's score. Returns the updated copy of ``poses``.
    """
    poses = poses.clone()
    candidates = torch.nonzero(pose_scores > conf_thres_kp_person).flatten()
    if not candidates.numel() or not kp_dets.shape[0]:
        return poses
    centers = (kp_dets[:, 0:2] + kp_dets[:, 2:4]) / 2
    for (x, y), conf, cls in zip(
        centers.tolist(), kp_dets[:, 4].tolist(), kp_dets[:, 5].tolist(), strict=True
    ):
        k = int(cls) - 1
        if not 0 <= k < poses.shape[1]:
            continue
        kps = poses[candidates, k]
        dist = torch.hypot(kps[:, 0] - x, kps[:, 1] - y)
        match = int(torch.argmin(dist))
        if conf > float(kps[match, 2]) and float(dist[match]) < overwrite_tol:
            poses[candidates[match], k] = torch.tensor([x, y, conf], dtype=poses.dtype)
    return poses


def kapao_postprocess(
    prediction: torch.Tensor,
    input_shape: Sequence[int],
    original_shape: Sequence[int] | None = None,
    config: KapaoPostprocessConfig | None = None,
    num_keypoints: int = COCO_KEYPOINTS,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Turn one image's KapaoNet output into people.

    ``prediction`` is ``(1, n, 5 + 1 + K + 2K)`` or ``(n, ...)`` in the pixels of the
    network input of size ``input_shape`` (H, W); coordinates are mapped back to
    ``original_shape`` (H0, W0) as a letterbox of it (default: no letterbox). Returns
    ``boxes`` (N, 4) xyxy, ``scores`` (N,) and ``keypoints`` (N, K, 3) [x, y, score].
    """
    cfg = config or KapaoPostprocessConfig()
    if prediction.dim() == 3:
        if prediction.shape[0] != 1:
            raise ValueError(f'one image at a time, got a batch of {prediction.shape[0]}')
        prediction = prediction[0]
    prediction = prediction.float()
    original_shape = tuple(input_shape) if original_shape is None else tuple(original_shape)
    num_coords = 2 * num_keypoints
    common = {
        'num_coords': num_coords,
        'max_det': cfg.max_det,
        'pre_nms_topk': cfg.pre_nms_topk,
    }
    person = non_max_suppression_kp(
        prediction, cfg.conf_thres, cfg.iou_thres, classes=[0], **common
    )
    if not person.shape[0]:
        return (
            prediction.new_zeros((0, 4)),
            prediction.new_zeros((0,)),
            prediction.new_zeros((0, num_keypoints, 3)),
        )
    scores = person[:, 4].clone()
    boxes = scale_coords(input_shape, person[:, :4], original_shape).round()
    xy = scale_coords(input_shape, person[:, -num_coords:], original_shape)
    poses = torch.cat(
        (xy.view(-1, num_keypoints, 2), xy.new_zeros((xy.shape[0], num_keypoints, 1))), -1
    )
    if cfg.use_kp_dets:
        kp = non_max_suppression_kp(
            prediction,
            cfg.conf_thres_kp,
            cfg.iou_thres_kp,
            classes=range(1, 1 + num_keypoints),
            **common,
        )
        if kp.shape[0]:
            kp_boxes = scale_coords(input_shape, kp[:, :4], original_shape)
            kp = torch.cat((kp_boxes, kp[:, 4:6]), 1)
            poses = fuse_keypoint_objects(
                scores, poses, kp, cfg.conf_thres_kp_person, cfg.overwrite_tol
            )
    if not cfg.zero_pose_keypoint_scores:
        # After fusion, which compares against KAPAO's zero scores; fused ones are > 0.
        own = poses[..., 2] == 0
        poses[..., 2] = torch.where(own, scores[:, None].expand_as(own), poses[..., 2])
    return boxes, scores, poses


# ---------------------------------------------------------------------------------------
# The people pipeline and the zoo entries.


def letterbox_shape(
    height: int, width: int, size: int, auto: bool = True, stride: int = MAX_STRIDE
) -> tuple[tuple[int, int], tuple[int, int, int, int]]:
    """Return KAPAO/YOLOv5's letterbox: resized (h, w) and padding (left, right, top, bottom).

    Keeps the aspect ratio to fit ``size``; with ``auto`` pads only up to the next multiple
    of ``stride`` (``LoadImages(auto=True)`` in the demos), else to ``size`` x ``size``.
    """
    r = min(size / height, size / width)
    new_w, new_h = int(round(width * r)), int(round(height * r))
    dw, dh = size - new_w, size - new_h
    if auto:
        dw, dh = dw % stride, dh % stride
    dw, dh = dw / 2, dh / 2
    top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
    left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
    return (new_h, new_w), (left, right, top, bottom)


class KapaoPostprocess(nn.Module):
    """``kapao_postprocess`` as a module that returns one packed tensor.

    ``forward`` returns ``(N, 4 + 1 + 3K)``: box xyxy, score and K keypoints [x, y, score]
    per person (``unpack`` splits it). Its flow depends on the scores (thresholds, NMS),
    so graph capture (LOPInfer) records it as one opaque operator that runs whole on one
    side: the side holding the dense prediction sends a few KB of people instead.
    """

    lopinfer_opaque = True

    def __init__(
        self, config: KapaoPostprocessConfig | None = None, num_keypoints: int = COCO_KEYPOINTS
    ) -> None:
        super().__init__()
        self.config = config or KapaoPostprocessConfig()
        self.num_keypoints = num_keypoints

    def forward(
        self,
        prediction: torch.Tensor,
        input_shape: Sequence[int],
        original_shape: Sequence[int] | None = None,
    ) -> torch.Tensor:
        boxes, scores, keypoints = kapao_postprocess(
            prediction, input_shape, original_shape, self.config, self.num_keypoints
        )
        return torch.cat((boxes, scores[:, None], keypoints.flatten(1)), 1)

    def unpack(self, packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Return ``(boxes (N, 4), scores (N,), keypoints (N, K, 3))`` of a packed tensor."""
        return (
            packed[:, :4].contiguous(),
            packed[:, 4].contiguous(),
            packed[:, 5:].reshape(-1, self.num_keypoints, 3),
        )


class KapaoPeople(nn.Module):
    """KAPAO people detector: uint8 RGB image in, people out.

    ``forward(image)`` takes ONE tensor ``(1, 3, H, W)`` uint8 RGB, letterboxes it to
    ``input_size`` (keeping the aspect, pad 114; bilinear resize in torch instead of
    cv2.INTER_LINEAR), runs ``KapaoNet`` and ``kapao_postprocess`` and returns
    ``(boxes (N, 4) xyxy, scores (N,), keypoints (N, K, 3))`` in the pixels of ``image``;
    N may be 0.
    """

    def __init__(
        self,
        variant: str = 's',
        input_size: int = DEFAULT_INPUT_SIZE,
        config: KapaoPostprocessConfig | None = None,
        num_keypoints: int = COCO_KEYPOINTS,
        auto: bool = True,
    ) -> None:
        super().__init__()
        if input_size <= 0 or input_size % MAX_STRIDE:
            raise ValueError(
                f'input_size must be a positive multiple of {MAX_STRIDE}, got {input_size}'
            )
        self.net = KapaoNet(variant, num_keypoints)
        self.postprocess = KapaoPostprocess(config, num_keypoints)
        self.input_size = input_size
        self.auto = auto

    @property
    def config(self) -> KapaoPostprocessConfig:
        """The post-processing thresholds."""
        return self.postprocess.config

    def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if image.dtype != torch.uint8 or image.dim() != 4 or image.shape[:2] != (1, 3):
            raise ValueError(
                f'KapaoPeople takes one uint8 RGB image (1, 3, H, W), got '
                f'{image.dtype} {list(image.shape)}'
            )
        height, width = int(image.shape[2]), int(image.shape[3])
        if not height or not width:
            raise ValueError(f'empty image {height}x{width}')
        (new_h, new_w), pad = letterbox_shape(height, width, self.input_size, self.auto)
        x = image.float()
        if (new_h, new_w) != (height, width):
            x = F.interpolate(x, size=(new_h, new_w), mode='bilinear', align_corners=False)
            x = x.round().clamp(0, 255)  # cv2.resize of a uint8 image yields uint8
        x = F.pad(x, pad, value=float(PAD_VALUE)) / 255.0
        prediction = self.net(x)
        packed = self.postprocess(prediction, tuple(x.shape[-2:]), (height, width))
        return self.postprocess.unpack(packed)


# Frames the KAPAO people pipelines take: the letterbox rounds a side to zero rows past
# 1280:1 (a 1x4096 frame failed in F.interpolate), and an empty frame is an error; above
# DCI 4K a frame costs conversion and uplink and gains nothing, the net sees
# DEFAULT_INPUT_SIZE either way.
PEOPLE_INPUT_LIMITS = SizeLimits(max_side=4096, max_pixels=4096 * 2160, max_aspect_ratio=64.0)


def _people_spec(variant: str) -> ModelSpec:
    return ModelSpec(
        name=f'kapao_{variant}',
        build=functools.partial(KapaoPeople, variant, DEFAULT_INPUT_SIZE),
        inputs={'image': TensorSpec((1, 3, None, None), torch.uint8, PEOPLE_INPUT_LIMITS)},
        outputs=('boxes', 'scores', 'keypoints'),
        trained=False,
        description=(
            f'KAPAO-{variant.upper()} people pipeline (letterbox to {DEFAULT_INPUT_SIZE}, '
            'YOLOv5-P6 KAPAO net, NMS, keypoint-object fusion); weights are random: '
            'latency and offloading only, never detections'
        ),
    )


def _net_spec(variant: str) -> ModelSpec:
    size = DEFAULT_INPUT_SIZE
    return ModelSpec(
        name=f'kapao_{variant}_net',
        build=functools.partial(KapaoNet, variant),
        inputs={'image': TensorSpec((1, 3, size, size))},
        outputs=('predictions',),
        trained=False,
        description=(
            f'raw KAPAO-{variant.upper()} network on {size}x{size} float images, decoded '
            'predictions (1, n, 57); weights are random: latency and partitioning only'
        ),
    )


def kapao_s() -> ModelSpec:
    """Return the spec of the KAPAO-S people pipeline (randomly initialised)."""
    return _people_spec('s')


def kapao_m() -> ModelSpec:
    """Return the spec of the KAPAO-M people pipeline (randomly initialised)."""
    return _people_spec('m')


def kapao_l() -> ModelSpec:
    """Return the spec of the KAPAO-L people pipeline (randomly initialised)."""
    return _people_spec('l')


def kapao_s_net() -> ModelSpec:
    """Return the spec of the raw KAPAO-S network on 640x640 (randomly initialised)."""
    return _net_spec('s')


def kapao_m_net() -> ModelSpec:
    """Return the spec of the raw KAPAO-M network on 640x640 (randomly initialised)."""
    return _net_spec('m')


def kapao_l_net() -> ModelSpec:
    """Return the spec of the raw KAPAO-L network on 640x640 (randomly initialised)."""
    return _net_spec('l')
