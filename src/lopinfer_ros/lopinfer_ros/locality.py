# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Locality analysis: which operators can run on column slices, and how (spec 2.2-2.4).

Every tensor has at most one split axis (``split``): the W axis of NCHW images at the
input, followed through permutes, views and flattens while it survives as its own axis.
A node whose output keeps a split axis is *local*: output columns ``[a, b)`` need an exact
interval of each input's columns (the footprint) and can be computed from just those.
Everything else is *atomic* (a barrier): it needs its inputs whole and runs on one side.

Classes (spec 2.2): element-wise (activations, batch norm, broadcasting arithmetic, casts,
layer norm and linear over a non-split axis, channel concat, permute/view/flatten that
keep the axis), block-wise (conv2d incl. groups and dilation, max/avg pooling incl.
``ceil_mode`` for max, nearest upsampling by an integer factor, adaptive pooling with an
integral ratio, strided slicing). The footprint of a block op for output columns
``[a, b)`` is ``[a*s - p, (b-1)*s - p + d*(k-1)]`` clipped to the input (spec 2.4); a
slice is run with explicit border padding (zeros, or -inf for max pooling) only where the
window leaves the whole tensor, and with no padding on the split axis, so interior
columns see real neighbours. ``run_slice`` output equals the same columns of the full
output (checked numerically by the tests on random configurations).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn import functional as F  # noqa: N812 - the usual name

from lopinfer_ros.graph import Const, OpGraph, OpNode, Ref

Interval = tuple[int, int]


@dataclass
class NodeInfo:
    """How a node can be sliced: its split axis, width and per-input footprints."""

    split: int | None
    width: int
    rule: Rule

    @property
    def atomic(self) -> bool:
        """True for a barrier: the node runs whole on one side."""
        return self.split is None


class Rule:
    """Footprint and sliced execution of one node (the atomic default)."""

    reason = ''

    def __init__(self, graph: OpGraph, node: OpNode, infos: Sequence[NodeInfo]) -> None:
        self.graph = graph
        self.node = node
        self.infos = infos

    def split(self) -> int | None:
        """Return the output's split axis, or None (atomic)."""
        return None

    def need(self, k: int, a: int, b: int) -> Interval:
        """Return the columns of input ``k`` (``node.inputs[k]``) that columns [a, b) need."""
        return (0, self.infos[self.node.inputs[k]].width)

    def call(self, args: tuple, kwargs: dict, a: int, b: int, pieces: dict[int, Piece]) -> Any:
        """Run the node's function on the resolved (sliced) arguments."""
        return self.node.func(*args, **kwargs)


@dataclass
class Piece:
    """Columns ``[lo, hi)`` of node ``node``'s output, held as ``tensor`` (None: atomic)."""

    tensor: torch.Tensor
    lo: int
    hi: int


# --------------------------------------------------------------------------------------
# helpers


def _norm_dim(dim: int, ndim: int) -> int:
    return dim + ndim if dim < 0 else dim


def _arg(node: OpNode, position: int, name: str, default: Any) -> Any:
    if len(node.args) > position:
        return node.args[position]
    return node.kwargs.get(name, default)


def _pair(value: Any) -> tuple[int, int]:
    if isinstance(value, (list, tuple)):
        return (int(value[0]), int(value[-1])) if len(value) in (1, 2) else (None, None)
    return (int(value), int(value))


def _refs(value: Any) -> list[Ref]:
    if isinstance(value, Ref):
        return [value]
    if isinstance(value, (list, tuple)):
        return [ref for item in value for ref in _refs(item)]
    if isinstance(value, dict):
        return [ref for item in value.values() for ref in _refs(item)]
    return []


def _consts(value: Any) -> list[Const]:
    if isinstance(value, Const):
        return [value]
    if isinstance(value, (list, tuple)):
        return [c for item in value for c in _consts(item)]
    if isinstance(value, dict):
        return [c for item in value.values() for c in _consts(item)]
    return []


def _narrow(tensor: torch.Tensor, dim: int, lo: int, hi: int) -> torch.Tensor:
    return tensor.narrow(dim, lo, hi - lo)


def _replace(value: Any, fn: Callable[[Any], Any]) -> Any:
    """Rebuild ``value`` with ``fn`` applied to its Ref and Const leaves."""
    if isinstance(value, (Ref, Const)):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_replace(item, fn) for item in value)
    if isinstance(value, dict):
        return {key: _replace(item, fn) for key, item in value.items()}
    return value


# --------------------------------------------------------------------------------------
# element-wise family


class ElementwiseRule(Rule):
    """Output column j needs column j of every operand that has the split axis."""

    # ops whose first argument is the data and the other tensors are parameters
    data_only = False

    def _out_split(self) -> int | None:
        node, ndim = self.node, len(self.node.shape)
        operands = self._operands()
        out_split = None
        for ref in operands:
            info = self.infos[ref.node]
            if info.split is None:
                continue
            aligned = info.split + ndim - len(self.graph.nodes[ref.node].shape)
            if out_split is None:
                out_split = aligned
            elif aligned != out_split:
                return None
        if out_split is None:
            return None
        width = node.shape[out_split]
        for ref in operands:
            info = self.infos[ref.node]
            shape = self.graph.nodes[ref.node].shape
            aligned_size = _aligned_size(shape, ndim, out_split)
            if info.split is None:
                if aligned_size not in (None, 1):
                    return None  # an atomic operand varies along the split axis
            elif aligned_size != width:
                return None  # a split operand broadcast along its own split axis
        return out_split

    def _operands(self) -> list[Ref]:
        if self.data_only:
            return _refs(self.node.args[:1] or list(self.node.kwargs.values())[:1])
        return _refs(self.node.args) + _refs(self.node.kwargs)

    def split(self) -> int | None:
        """Return the aligned split axis shared by the operands."""
        if self.data_only:
            first = _refs(self.node.args[:1])
            if len(first) != 1 or _refs(self.node.args[1:]) or _refs(self.node.kwargs):
                return None
        return self._out_split()

    def need(self, k: int, a: int, b: int) -> Interval:
        """Return [a, b) for split operands, everything for broadcast ones."""
        producer = self.node.inputs[k]
        info = self.infos[producer]
        if info.split is None:
            return (0, info.width)
        return (a, b)

    def slice_const(self, tensor: torch.Tensor, split: int, a: int, b: int) -> torch.Tensor:
        """Narrow a constant that varies along the output's split axis."""
        ndim = len(self.node.shape)
        size = _aligned_size(tuple(tensor.shape), ndim, split)
        if size in (None, 1) or self.data_only:
            return tensor
        return _narrow(tensor, split - (ndim - tensor.dim()), a, b)


def _aligned_size(shape: tuple[int, ...], ndim: int, dim: int) -> int | None:
    index = dim - (ndim - len(shape))
    return shape[index] if 0 <= index < len(shape) else None


class ParamRule(ElementwiseRule):
    """Element-wise with per-feature parameters on one axis (batch norm: channels)."""

    data_only = True
    forbidden: Callable[[int, int, OpNode], bool] = staticmethod(lambda split, ndim, node: False)

    def split(self) -> int | None:
        """Return the data's split axis unless the parameters live on it."""
        split = super().split()
        if split is None or self.forbidden(split, len(self.node.shape), self.node):
            return None
        return split


def _batch_norm_forbidden(split: int, ndim: int, node: OpNode) -> bool:
    return split == 1


def _layer_norm_forbidden(split: int, ndim: int, node: OpNode) -> bool:
    shape = _arg(node, 1, 'normalized_shape', ())
    count = len(shape) if isinstance(shape, (list, tuple)) else 1
    return split >= ndim - count


def _last_axis_forbidden(split: int, ndim: int, node: OpNode) -> bool:
    return split == ndim - 1


def _softmax_forbidden(split: int, ndim: int, node: OpNode) -> bool:
    dim = _arg(node, 1, 'dim', None)
    return dim is None or _norm_dim(dim, ndim) == split


def _param_rule(forbidden: Callable[[int, int, OpNode], bool]) -> type[ParamRule]:
    return type('ParamRule', (ParamRule,), {'forbidden': staticmethod(forbidden)})


# --------------------------------------------------------------------------------------
# shape family: the split axis moves or survives


class PermuteRule(ElementwiseRule):
    """``permute``: the split axis moves to where the permutation puts it."""

    data_only = True

    def _dims(self) -> list[int]:
        rest = list(self.node.args[1:])
        dims = rest[0] if len(rest) == 1 and isinstance(rest[0], (list, tuple)) else rest
        dims = dims or self.node.kwargs.get('dims', ())
        return [_norm_dim(int(d), len(self.node.shape)) for d in dims]

    def split(self) -> int | None:
        """Return the new position of the input's split axis."""
        (ref,) = _refs(self.node.args[:1])
        source = self.infos[ref.node].split
        if source is None:
            return None
        return self._dims().index(source)


class ViewRule(ElementwiseRule):
    """``view``/``reshape``/``flatten``/``unflatten``: local while the axis stays whole."""

    data_only = True

    def split(self) -> int | None:
        """Return the output axis that is exactly the input's split axis, if any."""
        refs = _refs(self.node.args[:1])
        if len(refs) != 1 or _refs(self.node.args[1:]):
            return None
        source_info = self.infos[refs[0].node]
        if source_info.split is None:
            return None
        shape_in = self.graph.nodes[refs[0].node].shape
        s = source_info.split
        before, size, after = math.prod(shape_in[:s]), shape_in[s], math.prod(shape_in[s + 1 :])
        out = self.node.shape
        for k in range(len(out)):
            if (
                math.prod(out[:k]) == before
                and out[k] == size
                and math.prod(out[k + 1 :]) == after
            ):
                return k
        return None

    def call(self, args: tuple, kwargs: dict, a: int, b: int, pieces: dict[int, Piece]) -> Any:
        """Reshape to the recorded shape with the split axis ``b - a`` wide."""
        shape = list(self.node.shape)
        shape[self.infos[self.node.index].split] = b - a
        return torch.reshape(args[0], shape)


class RepeatRule(ElementwiseRule):
    """``repeat`` with factor 1 on the split axis."""

    data_only = True

    def split(self) -> int | None:
        """Return the aligned split axis if it is not repeated."""
        (ref,) = _refs(self.node.args[:1])
        source = self.infos[ref.node].split
        if source is None:
            return None
        rest = list(self.node.args[1:])
        sizes = rest[0] if len(rest) == 1 and isinstance(rest[0], (list, tuple)) else rest
        out = source + len(sizes) - len(self.graph.nodes[ref.node].shape)
        return out if sizes[out] == 1 else None


class CatRule(ElementwiseRule):
    """``cat`` along any axis but the split axis (e.g. channel concat)."""

    def split(self) -> int | None:
        """Return the shared split axis when the concat axis is another one."""
        split = self._out_split()
        if split is None:
            return None
        dim = _arg(self.node, 1, 'dim', 0)
        if _norm_dim(int(dim), len(self.node.shape)) == split:
            return None
        return split

    def slice_const(self, tensor: torch.Tensor, split: int, a: int, b: int) -> torch.Tensor:
        """Narrow constant pieces of the concat to the same columns."""
        return _narrow(tensor, split, a, b)


class GetitemRule(Rule):
    """Basic indexing (slices, ``...``, ints, None) that slices or keeps the split axis."""

    def _parse(self) -> tuple[list[Any], int, int] | None:
        refs = _refs(self.node.args[:1])
        if len(refs) != 1 or _refs(self.node.args[1:]) or _consts(self.node.args[1:]):
            return None
        source = self.infos[refs[0].node].split
        if source is None:
            return None
        ndim_in = len(self.graph.nodes[refs[0].node].shape)
        index = self.node.args[1]
        index = list(index) if isinstance(index, tuple) else [index]
        if any(not isinstance(i, (slice, int, type(None), type(Ellipsis))) for i in index):
            return None
        consumed = sum(1 for i in index if isinstance(i, (slice, int)))
        if index.count(Ellipsis) > 1:
            return None
        if Ellipsis in index:
            e = index.index(Ellipsis)
            index = index[:e] + [slice(None)] * (ndim_in - consumed) + index[e + 1 :]
        else:
            index = index + [slice(None)] * (ndim_in - consumed)
        in_dim = out_dim = 0
        for position, item in enumerate(index):
            if item is None:
                out_dim += 1
                continue
            if in_dim == source:
                if not isinstance(item, slice):
                    return None
                return index, position, out_dim
            in_dim += 1
            if isinstance(item, slice):
                out_dim += 1
        return None

    def _start_step(self) -> tuple[int, int]:
        index, position, _ = self._parse()
        ref = _refs(self.node.args[:1])[0]
        size = self.graph.nodes[ref.node].shape[self.infos[ref.node].split]
        start, _, step = index[position].indices(size)
        return start, step

    def split(self) -> int | None:
        """Return where the split axis lands, if it is sliced with a positive step."""
        parsed = self._parse()
        if parsed is None:
            return None
        index, position, out_dim = parsed
        step = index[position].step
        if step is not None and step < 1:
            return None
        return out_dim

    def need(self, k: int, a: int, b: int) -> Interval:
        """Return the strided input columns of output columns [a, b)."""
        start, step = self._start_step()
        return (start + a * step, start + (b - 1) * step + 1)

    def call(self, args: tuple, kwargs: dict, a: int, b: int, pieces: dict[int, Piece]) -> Any:
        """Index the slice with the split-axis slice shifted to its local columns."""
        index, position, _ = self._parse()
        start, step = self._start_step()
        lo = self.need(0, a, b)[0]
        local = start + a * step - lo
        index = list(index)
        index[position] = slice(local, local + (b - a - 1) * step + 1, step)
        return args[0][tuple(index)]


# --------------------------------------------------------------------------------------
# block family


class BlockRule(Rule):
    """A sliding window on the split axis: conv2d, pooling, nearest upsampling."""

    pad_value = 0.0

    def __init__(self, graph: OpGraph, node: OpNode, infos: Sequence[NodeInfo]) -> None:
        super().__init__(graph, node, infos)
        self.window: tuple[int, int, int, int] | None = None  # kernel, stride, dilation, pad
        self.axis = -1

    def _source(self) -> tuple[Ref, int] | None:
        refs = _refs(self.node.args[:1])
        if len(refs) != 1:
            return None
        split = self.infos[refs[0].node].split
        if split is None or split < 2 or len(self.node.shape) != 4:
            return None
        return refs[0], split

    def params(self, axis: int) -> tuple[int, int, int, int] | None:
        """Return (kernel, stride, dilation, left pad) on ``axis`` or None (atomic)."""
        raise NotImplementedError

    def split(self) -> int | None:
        """Return the spatial split axis (unchanged) when the window is supported."""
        source = self._source()
        if source is None or _refs(self.node.args[1:]) or _refs(self.node.kwargs):
            return None
        self.axis = source[1]
        self.window = self.params(self.axis - 2)
        return None if self.window is None else self.axis

    def _raw(self, a: int, b: int) -> Interval:
        k, s, d, p = self.window
        return (a * s - p, (b - 1) * s - p + d * (k - 1) + 1)

    def need(self, k: int, a: int, b: int) -> Interval:
        """Return the clipped input window of output columns [a, b) (spec 2.4)."""
        width = self.infos[self.node.inputs[0]].width
        lo, hi = self._raw(a, b)
        return (max(0, lo), min(width, hi))

    def padded(self, tensor: torch.Tensor, a: int, b: int) -> torch.Tensor:
        """Pad the slice where its window leaves the whole tensor (true borders only)."""
        width = self.infos[self.node.inputs[0]].width
        lo, hi = self._raw(a, b)
        left, right = max(0, -lo), max(0, hi - width)
        if not (left or right):
            return tensor
        pad = [0, 0, 0, 0]
        pad[0 if self.axis == 3 else 2] = left
        pad[1 if self.axis == 3 else 3] = right
        return F.pad(tensor, pad, value=self.pad_value)

    def with_zero_pad(self, value: Any) -> Any:
        """Return the padding argument with the split axis' padding set to zero."""
        pair = list(_pair(value))
        pair[self.axis - 2] = 0
        return tuple(pair)

    def crop(self, output: torch.Tensor, a: int, b: int) -> torch.Tensor:
        """Keep the ``b - a`` wanted columns."""
        return _narrow(output, self.axis, 0, b - a)


class Conv2dRule(BlockRule):
    """``conv2d(input, weight, bias, stride, padding, dilation, groups)``."""

    def _conv_args(self) -> list[Any]:
        names = ('input', 'weight', 'bias', 'stride', 'padding', 'dilation', 'groups')
        defaults = (None, None, None, 1, 0, 1, 1)
        return [
            _arg(self.node, i, n, dflt)
            for i, (n, dflt) in enumerate(zip(names, defaults, strict=True))
        ]

    def split(self) -> int | None:
        """Return the spatial split axis when the weights are constants."""
        source = self._source()
        if source is None or any(_refs(v) for v in self._conv_args()[1:]):
            return None
        self.axis = source[1]
        self.window = self.params(self.axis - 2)
        return None if self.window is None else self.axis

    def params(self, axis: int) -> tuple[int, int, int, int] | None:
        """Return the kernel, stride, dilation and left padding on ``axis``."""
        _, weight, _, stride, padding, dilation, _ = self._conv_args()
        kernel = self.graph.constants[weight.index].shape[2 + axis]
        s, d = _pair(stride)[axis], _pair(dilation)[axis]
        if isinstance(padding, str):
            if padding == 'valid':
                p = 0
            else:  # 'same': PyTorch puts the odd extra pixel on the right
                p = d * (kernel - 1) // 2
                if any(d2 * (k2 - 1) % 2 for d2, k2 in self._both_axes()):
                    return None
        else:
            p = _pair(padding)[axis]
        return (kernel, s, d, p)

    def _both_axes(self) -> list[tuple[int, int]]:
        _, weight, _, _, _, dilation, _ = self._conv_args()
        shape = self.graph.constants[weight.index].shape
        return [(_pair(dilation)[i], shape[2 + i]) for i in range(2)]

    def call(self, args: tuple, kwargs: dict, a: int, b: int, pieces: dict[int, Piece]) -> Any:
        """Run the conv with explicit border padding and none on the split axis."""
        values = self._conv_args()
        resolved = list(args) + [None] * (7 - len(args))
        for i, name in enumerate(('input', 'weight', 'bias', 'stride', 'padding', 'dilation')):
            if name in kwargs:
                resolved[i] = kwargs[name]
        x, weight, bias = resolved[0], resolved[1], resolved[2]
        padding = values[4]
        if isinstance(padding, str):
            padding = tuple(d * (k - 1) // 2 for d, k in self._both_axes())
        out = F.conv2d(
            self.padded(x, a, b),
            weight,
            bias,
            values[3],
            self.with_zero_pad(padding),
            values[5],
            values[6],
        )
        return self.crop(out, a, b)


class MaxPoolRule(BlockRule):
    """``max_pool2d`` (any kernel, stride, padding, dilation, ``ceil_mode``)."""

    pad_value = float('-inf')
    names = ('input', 'kernel_size', 'stride', 'padding', 'dilation', 'ceil_mode')
    defaults = (None, None, None, 0, 1, False)

    def _values(self) -> list[Any]:
        return [
            _arg(self.node, i, n, dflt)
            for i, (n, dflt) in enumerate(zip(self.names, self.defaults, strict=True))
        ]

    def params(self, axis: int) -> tuple[int, int, int, int] | None:
        """Return the window on ``axis``; refuse returned indices."""
        if _arg(self.node, 6, 'return_indices', False):
            return None
        _, kernel, stride, padding, dilation, _ = self._values()
        stride = kernel if stride is None or stride == [] else stride
        return (
            _pair(kernel)[axis],
            _pair(stride)[axis],
            _pair(dilation)[axis],
            _pair(padding)[axis],
        )

    def call(self, args: tuple, kwargs: dict, a: int, b: int, pieces: dict[int, Piece]) -> Any:
        """Pool the -inf-padded slice with no padding on the split axis."""
        x = args[0] if args else kwargs['input']
        _, kernel, stride, padding, dilation, ceil_mode = self._values()
        stride = kernel if stride is None or stride == [] else stride
        out = F.max_pool2d(
            self.padded(x, a, b),
            kernel,
            stride,
            self.with_zero_pad(padding),
            dilation,
            ceil_mode,
        )
        return self.crop(out, a, b)


class AvgPoolRule(BlockRule):
    """``avg_pool2d`` without ``ceil_mode`` (border padding counts as zeros or is absent)."""

    names = (
        'input',
        'kernel_size',
        'stride',
        'padding',
        'ceil_mode',
        'count_include_pad',
        'divisor_override',
    )
    defaults = (None, None, None, 0, False, True, None)

    def _values(self) -> list[Any]:
        return [
            _arg(self.node, i, n, dflt)
            for i, (n, dflt) in enumerate(zip(self.names, self.defaults, strict=True))
        ]

    def params(self, axis: int) -> tuple[int, int, int, int] | None:
        """Return the window on ``axis``, or None when slicing would change divisors."""
        _, kernel, stride, padding, ceil_mode, include_pad, _ = self._values()
        stride = kernel if stride is None or stride == [] else stride
        p = _pair(padding)[axis]
        if ceil_mode or (p and not include_pad):
            return None
        return (_pair(kernel)[axis], _pair(stride)[axis], 1, p)

    def call(self, args: tuple, kwargs: dict, a: int, b: int, pieces: dict[int, Piece]) -> Any:
        """Pool the zero-padded slice with no padding on the split axis."""
        x = args[0] if args else kwargs['input']
        _, kernel, stride, padding, ceil_mode, include_pad, divisor = self._values()
        stride = kernel if stride is None or stride == [] else stride
        out = F.avg_pool2d(
            self.padded(x, a, b),
            kernel,
            stride,
            self.with_zero_pad(padding),
            ceil_mode,
            include_pad,
            divisor,
        )
        return self.crop(out, a, b)


class AdaptivePoolRule(BlockRule):
    """Adaptive pooling whose input size is a multiple of its output size on the axis."""

    def params(self, axis: int) -> tuple[int, int, int, int] | None:
        """Return the equivalent fixed window (kernel = stride = ratio)."""
        source = self._source()
        size_in = self.graph.nodes[source[0].node].shape[2 + axis]
        size_out = self.node.shape[2 + axis]
        if size_in % size_out:
            return None
        ratio = size_in // size_out
        return (ratio, ratio, 1, 0)

    def call(self, args: tuple, kwargs: dict, a: int, b: int, pieces: dict[int, Piece]) -> Any:
        """Pool the slice to ``b - a`` columns on the split axis."""
        size = list(self.node.shape[2:])
        size[self.axis - 2] = b - a
        return self.node.func(args[0], tuple(size))


class PadRule(ElementwiseRule):
    """``F.pad`` that leaves the split axis alone is column-wise (letterbox padding).

    Padding the split axis changes its width, which the shared width check refuses.
    """

    data_only = True


class InterpolateRule(BlockRule):
    """Nearest upsampling by an integer factor: output column j reads input j // f."""

    def params(self, axis: int) -> tuple[int, int, int, int] | None:
        """Return None unless the mode is nearest with an integral factor."""
        mode = _arg(self.node, 3, 'mode', 'nearest')
        if mode != 'nearest':
            return None
        source = self._source()
        size_in = self.graph.nodes[source[0].node].shape[2 + axis]
        size_out = self.node.shape[2 + axis]
        if size_out % size_in:
            return None
        self.factor = size_out // size_in
        return (1, 1, 1, 0)

    def need(self, k: int, a: int, b: int) -> Interval:
        """Return ``[a // f, (b - 1) // f + 1)``."""
        return (a // self.factor, (b - 1) // self.factor + 1)

    def call(self, args: tuple, kwargs: dict, a: int, b: int, pieces: dict[int, Piece]) -> Any:
        """Upsample the slice and keep the wanted columns."""
        x = args[0] if args else kwargs['input']
        lo = a // self.factor
        size = list(self.node.shape[2:])
        size[self.axis - 2] = x.shape[self.axis] * self.factor
        out = F.interpolate(x, size=tuple(size), mode='nearest')
        return _narrow(out, self.axis, a - lo * self.factor, b - lo * self.factor)


# --------------------------------------------------------------------------------------
# registry

_UNARY = (
    'relu',
    'relu6',
    'silu',
    'gelu',
    'sigmoid',
    'tanh',
    'hardtanh',
    'hardswish',
    'hardsigmoid',
    'mish',
    'leaky_relu',
    'elu',
    'dropout',
    'contiguous',
    'float',
    'half',
    'to',
    'clamp',
    'clip',
    'round',
    'neg',
    'abs',
    'exp',
    'sqrt',
    'rsqrt',
    'clone',
    'detach',
)
_BINARY = (
    'add',
    'sub',
    'mul',
    'div',
    'truediv',
    'radd',
    'rsub',
    'rmul',
    'rtruediv',
    'pow',
    'rpow',
    'maximum',
    'minimum',
    'where',
)

RULES: dict[str, type[Rule]] = {name: ElementwiseRule for name in (*_UNARY, *_BINARY)}
RULES.update(
    {
        'batch_norm': _param_rule(_batch_norm_forbidden),
        'layer_norm': _param_rule(_layer_norm_forbidden),
        'linear': _param_rule(_last_axis_forbidden),
        'softmax': _param_rule(_softmax_forbidden),
        'log_softmax': _param_rule(_softmax_forbidden),
        'permute': PermuteRule,
        'view': ViewRule,
        'reshape': ViewRule,
        'flatten': ViewRule,
        'unflatten': ViewRule,
        'repeat': RepeatRule,
        'cat': CatRule,
        'getitem': GetitemRule,
        'conv2d': Conv2dRule,
        'max_pool2d': MaxPoolRule,
        'avg_pool2d': AvgPoolRule,
        'adaptive_avg_pool2d': AdaptivePoolRule,
        'adaptive_max_pool2d': AdaptivePoolRule,
        'interpolate': InterpolateRule,
        'pad': PadRule,
    }
)


def input_split(shape: tuple[int, ...]) -> int | None:
    """Return the split axis of a model input: W of an NCHW image, else none."""
    return 3 if len(shape) == 4 and shape[3] > 1 else None


def analyse(graph: OpGraph) -> list[NodeInfo]:
    """Return the slicing information of every node, in graph order."""
    infos: list[NodeInfo] = []
    for node in graph.nodes:
        if node.op == 'input':
            split = input_split(node.shape)
            width = node.shape[split] if split is not None else 1
            infos.append(NodeInfo(split, width, Rule(graph, node, infos)))
            continue
        rule_class = RULES.get(node.op, Rule)
        rule = rule_class(graph, node, infos)
        split = rule.split()
        if split is not None and node.shape[split] < 1:
            split = None
        if split is None and type(rule) is not Rule:
            rule = Rule(graph, node, infos)
        width = node.shape[split] if split is not None else 1
        infos.append(NodeInfo(split, width, rule))
    return infos


def run_slice(
    graph: OpGraph,
    infos: Sequence[NodeInfo],
    node: OpNode,
    pieces: dict[int, Piece],
    a: int,
    b: int,
) -> torch.Tensor:
    """Compute columns [a, b) of ``node`` from ``pieces`` (producer -> held columns).

    Each piece must cover what the footprint of [a, b) needs of it; atomic producers
    and atomic nodes use whole tensors.
    """
    info = infos[node.index]
    rule = info.rule
    narrowed: dict[int, torch.Tensor] = {}
    for k, producer in enumerate(node.inputs):
        piece = pieces[producer]
        producer_info = infos[producer]
        if producer_info.split is None:
            narrowed[producer] = piece.tensor
            continue
        lo, hi = rule.need(k, a, b) if not info.atomic else (0, producer_info.width)
        if lo < piece.lo or hi > piece.hi:
            raise RuntimeError(
                f'node {node.index} ({node.op}) columns [{a}, {b}) need [{lo}, {hi}) of node '
                f'{producer}, which holds [{piece.lo}, {piece.hi})'
            )
        narrowed[producer] = _narrow(
            piece.tensor, producer_info.split, lo - piece.lo, hi - piece.lo
        )

    def leaf(value: Ref | Const) -> Any:
        if isinstance(value, Ref):
            return narrowed[value.node]
        tensor = graph.constants[value.index]
        if info.atomic or not isinstance(rule, ElementwiseRule):
            return tensor
        return rule.slice_const(tensor, info.split, a, b)

    args = _replace(node.args, leaf)
    kwargs = _replace(node.kwargs, leaf)
    return rule.call(args, kwargs, a, b, pieces)
