# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Run a TensorFlow Lite graph with torch ops: the project's own ``.tflite`` loader.

``load_tflite`` parses the flatbuffer with the pure-Python ``tflite`` package, folds the
weight-decoding ops (DEQUANTIZE of fp16/int8 constants, DENSIFY of sparse constants) into
plain float32 constants, and returns a ``TfliteGraphModule``: an ``nn.Module`` whose
constants are registered buffers (so it can be ``state_dict``-ed) and whose ``forward``
runs subgraph 0 op by op with torch.

Tensors keep TFLite's NHWC layout between ops. Convolutions and pools see a
``permute(0, 3, 1, 2)`` view of it, which torch treats as channels-last memory, so the
permutes cost no copies. Padding follows TensorFlow's SAME rule (the extra pixel of an odd
total goes after).

Supported ops: ADD, CONCATENATION, CONV_2D, DEPTHWISE_CONV_2D, DEPTH_TO_SPACE, LOGISTIC,
MAX_POOL_2D, PAD, RESHAPE, RESIZE_BILINEAR, plus DEQUANTIZE and DENSIFY on constants;
fused activations NONE, RELU, RELU_N1_TO_1, RELU6 and TANH. Anything else raises
``TfliteGraphError`` naming the op, when the file is loaded rather than when it runs.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import tflite
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn


class TfliteGraphError(ValueError):
    """A ``.tflite`` file that is malformed or uses something this loader does not run."""


# Ops that run in forward, and ops that are folded into constants at load time.
RUNTIME_OPS = frozenset(
    {
        'ADD',
        'CONCATENATION',
        'CONV_2D',
        'DEPTHWISE_CONV_2D',
        'DEPTH_TO_SPACE',
        'LOGISTIC',
        'MAX_POOL_2D',
        'PAD',
        'RESHAPE',
        'RESIZE_BILINEAR',
    }
)
FOLDED_OPS = frozenset({'DEQUANTIZE', 'DENSIFY'})
_MAX_ELEMENTS = 1 << 28  # per tensor: 1 GiB of float32
SUPPORTED_OPS = RUNTIME_OPS | FOLDED_OPS

_OP_NAMES = {
    value: name
    for name, value in vars(tflite.BuiltinOperator).items()
    if not name.startswith('_') and isinstance(value, int)
}
_TYPE_NAMES = {
    value: name
    for name, value in vars(tflite.TensorType).items()
    if not name.startswith('_') and isinstance(value, int)
}
_NUMPY_TYPES = {
    tflite.TensorType.FLOAT32: np.float32,
    tflite.TensorType.FLOAT16: np.float16,
    tflite.TensorType.INT32: np.int32,
    tflite.TensorType.INT64: np.int64,
    tflite.TensorType.INT16: np.int16,
    tflite.TensorType.INT8: np.int8,
    tflite.TensorType.UINT8: np.uint8,
}
_ACTIVATIONS: dict[int, Callable[[torch.Tensor], torch.Tensor] | None] = {
    tflite.ActivationFunctionType.NONE: None,
    tflite.ActivationFunctionType.RELU: torch.relu_,
    tflite.ActivationFunctionType.RELU_N1_TO_1: lambda x: x.clamp_(-1.0, 1.0),
    tflite.ActivationFunctionType.RELU6: lambda x: x.clamp_(0.0, 6.0),
    tflite.ActivationFunctionType.TANH: torch.tanh_,
}
_ACTIVATION_NAMES = {
    value: name
    for name, value in vars(tflite.ActivationFunctionType).items()
    if not name.startswith('_') and isinstance(value, int)
}


def op_name(builtin_code: int) -> str:
    """Return the TFLite name of builtin operator code ``builtin_code``."""
    return _OP_NAMES.get(builtin_code, f'<unknown builtin op {builtin_code}>')


def check_supported(name: str) -> None:
    """Raise TfliteGraphError unless this loader runs (or folds) the op ``name``."""
    if name not in SUPPORTED_OPS:
        raise TfliteGraphError(
            f'unsupported TFLite op {name}; this loader runs {", ".join(sorted(SUPPORTED_OPS))}'
        )


@dataclass
class _Node:
    """One operator of the graph, with its static options already decoded."""

    index: int
    op: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class _TensorInfo:
    name: str
    shape: tuple[int, ...]
    dtype: int


# ---------------------------------------------------------------------------------------
# Parsing


def _read_model(data: bytes) -> tflite.Model:
    if len(data) < 8 or not tflite.Model.ModelBufferHasIdentifier(data, 0):
        raise TfliteGraphError('not a TFLite flatbuffer (no TFL3 identifier)')
    return tflite.Model.GetRootAsModel(data, 0)


def _buffer_bytes(model: tflite.Model, data: bytes, index: int) -> bytes | None:
    """Return the raw bytes of buffer ``index``, or None for an empty (non-constant) one."""
    if index <= 0:
        return None  # buffer 0 is TFLite's "no data" sentinel
    if index >= model.BuffersLength():
        raise TfliteGraphError(
            f'tensor refers to buffer {index}, the file has only {model.BuffersLength()}'
        )
    buffer = model.Buffers(index)
    offset, size = buffer.Offset(), buffer.Size()
    if offset > 1:  # large models keep the bytes after the flatbuffer
        if offset + size > len(data):
            raise TfliteGraphError(f'buffer {index} lies past the end of the file')
        return data[offset : offset + size]
    if buffer.DataLength() == 0:
        return None
    return buffer.DataAsNumpy().tobytes()


def _index_vector(table: Any, kind: int) -> np.ndarray:
    vector_type = {
        tflite.SparseIndexVector.Int32Vector: tflite.Int32Vector,
        tflite.SparseIndexVector.Uint16Vector: tflite.Uint16Vector,
        tflite.SparseIndexVector.Uint8Vector: tflite.Uint8Vector,
    }.get(kind)
    if vector_type is None or table is None:
        raise TfliteGraphError(f'sparse tensor with index vector type {kind}')
    vector = vector_type()
    vector.Init(table.Bytes, table.Pos)
    return np.asarray(vector.ValuesAsNumpy(), dtype=np.int64)


def _densify(values: np.ndarray, shape: tuple[int, ...], sparsity: Any) -> np.ndarray:
    """Expand a TFLite sparse tensor (dims in traversal order, CSR or dense) to dense."""
    rank = len(shape)
    order = [int(v) for v in sparsity.TraversalOrderAsNumpy()]
    block_map = [int(v) for v in sparsity.BlockMapAsNumpy()] if sparsity.BlockMapLength() else []
    if len(order) != rank + len(block_map) or sparsity.DimMetadataLength() != len(order):
        raise TfliteGraphError('sparse tensor with inconsistent traversal metadata')
    # Walk the levels breadth-first: ``positions`` index the current level's entries,
    # ``coords`` hold each entry's coordinate on every level walked so far.
    total = int(np.prod(shape, dtype=np.int64))
    positions = np.zeros(1, dtype=np.int64)
    coords: list[np.ndarray] = []
    for level in range(len(order)):
        meta = sparsity.DimMetadata(level)
        if meta.Format() == tflite.DimensionType.DENSE:
            size = meta.DenseSize()
            if size < 0 or size * len(positions) > total:
                raise TfliteGraphError('sparse tensor with a dense level larger than its shape')
            coords = [np.repeat(c, size) for c in coords]
            coords.append(np.tile(np.arange(size, dtype=np.int64), len(positions)))
            positions = (positions[:, None] * size + np.arange(size)).reshape(-1)
        else:
            segments = _index_vector(meta.ArraySegments(), meta.ArraySegmentsType())
            indices = _index_vector(meta.ArrayIndices(), meta.ArrayIndicesType())
            if len(positions) and positions.max() + 1 >= len(segments):
                raise TfliteGraphError('sparse tensor segments shorter than its parent level')
            starts, ends = segments[positions], segments[positions + 1]
            counts = ends - starts
            if np.any(counts < 0) or (len(ends) and ends.max() > len(indices)):
                raise TfliteGraphError('sparse tensor with invalid CSR segments')
            if counts.sum() > total:
                raise TfliteGraphError('sparse tensor with more entries than its shape holds')
            coords = [np.repeat(c, counts) for c in coords]
            offsets = np.repeat(ends - np.cumsum(counts), counts)
            positions = np.arange(counts.sum(), dtype=np.int64) + offsets
            coords.append(indices[positions])
    if len(positions) and positions.max() >= values.size:
        raise TfliteGraphError('sparse tensor has fewer values than its indices need')
    expanded = [np.empty(0)] * len(order)
    for level, dim in enumerate(order):
        expanded[dim] = coords[level]
    dense_index = list(expanded[:rank])
    for block, dim in enumerate(block_map):
        block_size = sparsity.DimMetadata(order.index(rank + block)).DenseSize()
        dense_index[dim] = dense_index[dim] * block_size + expanded[rank + block]
    dense = np.zeros(shape, dtype=values.dtype)
    dense[tuple(dense_index)] = values.reshape(-1)[positions]
    return dense


def _dequantize(values: np.ndarray, quant: Any) -> np.ndarray:
    if values.dtype == np.float16:
        return values.astype(np.float32)
    if quant is None or quant.ScaleLength() == 0:
        raise TfliteGraphError(f'DEQUANTIZE of {values.dtype} without quantization scales')
    scale = quant.ScaleAsNumpy().astype(np.float32)
    zero = (
        quant.ZeroPointAsNumpy().astype(np.float32)
        if quant.ZeroPointLength()
        else np.zeros_like(scale)
    )
    if scale.size > 1:  # per-axis quantisation
        shape = [1] * values.ndim
        shape[quant.QuantizedDimension()] = scale.size
        scale, zero = scale.reshape(shape), zero.reshape(shape)
    return ((values.astype(np.float32) - zero) * scale).astype(np.float32)


def _options(op: Any, name: str) -> dict[str, Any]:
    """Decode the builtin options that ``name`` needs into a plain dict."""
    table = op.BuiltinOptions()

    def init(kind: type) -> Any:
        options = kind()
        if table is not None:
            options.Init(table.Bytes, table.Pos)
            return options
        # A missing table means all-default options; decode them from an empty table.
        raise TfliteGraphError(f'{name} without its builtin options')

    if name == 'CONV_2D':
        o = init(tflite.Conv2DOptions)
        return {
            'padding': o.Padding(),
            'stride': (o.StrideH(), o.StrideW()),
            'dilation': (o.DilationHFactor(), o.DilationWFactor()),
            'activation': o.FusedActivationFunction(),
        }
    if name == 'DEPTHWISE_CONV_2D':
        o = init(tflite.DepthwiseConv2DOptions)
        return {
            'padding': o.Padding(),
            'stride': (o.StrideH(), o.StrideW()),
            'dilation': (o.DilationHFactor(), o.DilationWFactor()),
            'activation': o.FusedActivationFunction(),
            'multiplier': o.DepthMultiplier(),
        }
    if name == 'MAX_POOL_2D':
        o = init(tflite.Pool2DOptions)
        return {
            'padding': o.Padding(),
            'stride': (o.StrideH(), o.StrideW()),
            'kernel': (o.FilterHeight(), o.FilterWidth()),
            'activation': o.FusedActivationFunction(),
        }
    if name == 'ADD':
        if table is None:
            return {'activation': tflite.ActivationFunctionType.NONE}
        return {'activation': init(tflite.AddOptions).FusedActivationFunction()}
    if name == 'CONCATENATION':
        o = init(tflite.ConcatenationOptions)
        return {'axis': o.Axis(), 'activation': o.FusedActivationFunction()}
    if name == 'DEPTH_TO_SPACE':
        return {'block': init(tflite.DepthToSpaceOptions).BlockSize()}
    if name == 'RESIZE_BILINEAR':
        if table is None:
            return {'align_corners': False, 'half_pixel_centers': False}
        o = init(tflite.ResizeBilinearOptions)
        return {'align_corners': o.AlignCorners(), 'half_pixel_centers': o.HalfPixelCenters()}
    if name == 'RESHAPE' and table is not None:
        o = init(tflite.ReshapeOptions)
        if o.NewShapeLength():
            return {'new_shape': tuple(int(v) for v in o.NewShapeAsNumpy())}
    return {}


@dataclass
class _ParsedGraph:
    tensors: list[_TensorInfo]
    nodes: list[_Node]
    constants: dict[int, np.ndarray]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


def _parse(data: bytes) -> _ParsedGraph:
    model = _read_model(data)
    if model.SubgraphsLength() < 1:
        raise TfliteGraphError('TFLite model without a subgraph')
    graph = model.Subgraphs(0)
    stored = _read_tensors(model, data, graph)
    nodes = _read_operators(model, graph, len(stored.infos))
    constants, runtime = _fold_weight_ops(nodes, stored, len(data))
    _check_float_activations(runtime, stored.infos)
    inputs, outputs = _graph_endpoints(graph, len(stored.infos))
    return _ParsedGraph(stored.infos, runtime, constants, inputs, outputs)


@dataclass
class _StoredTensors:
    """Subgraph 0's tensors as the file stores them, before the weight-decoding ops fold."""

    infos: list[_TensorInfo]
    raw: dict[int, np.ndarray]  # constants; sparse ones still flat, as stored
    sparsity: dict[int, Any]  # sparse constants' metadata, for DENSIFY
    quant: dict[int, Any]  # every tensor's quantisation table, for DEQUANTIZE


def _read_tensors(model: tflite.Model, data: bytes, graph: tflite.SubGraph) -> _StoredTensors:
    """Read every tensor's name, shape and type, and the constants' values, bounded."""
    stored = _StoredTensors([], {}, {}, {})
    for index in range(graph.TensorsLength()):
        tensor = graph.Tensors(index)
        shape = tuple(int(v) for v in tensor.ShapeAsNumpy()) if tensor.ShapeLength() else ()
        info = _TensorInfo(tensor.Name().decode(errors='replace'), shape, tensor.Type())
        # A corrupt or hostile file must not make the loader allocate without bound.
        if any(d < 0 for d in shape) or int(np.prod(shape, dtype=np.float64)) > _MAX_ELEMENTS:
            raise TfliteGraphError(f'tensor {info.name!r} has an invalid shape {list(shape)}')
        stored.infos.append(info)
        stored.quant[index] = tensor.Quantization()
        payload = _buffer_bytes(model, data, tensor.Buffer())
        if payload is None:
            continue
        dtype = _NUMPY_TYPES.get(info.dtype)
        if dtype is None:
            raise TfliteGraphError(
                f'constant tensor {info.name!r} has unsupported type '
                f'{_TYPE_NAMES.get(info.dtype, info.dtype)}'
            )
        values = np.frombuffer(payload, dtype=dtype)
        if tensor.Sparsity() is not None:
            stored.sparsity[index] = tensor.Sparsity()
            stored.raw[index] = values  # densified when its DENSIFY op is folded
            continue
        if values.size != int(np.prod(shape, dtype=np.int64)):
            raise TfliteGraphError(
                f'constant tensor {info.name!r} has {values.size} values for shape {list(shape)}'
            )
        stored.raw[index] = values.reshape(shape)
    return stored


def _read_operators(model: tflite.Model, graph: tflite.SubGraph, tensor_count: int) -> list[_Node]:
    """Return subgraph 0's operators; raise on an op this loader neither runs nor folds."""
    nodes: list[_Node] = []
    for index in range(graph.OperatorsLength()):
        op = graph.Operators(index)
        name = _operator_name(model, op, index)
        check_supported(name)
        ins = tuple(int(v) for v in op.InputsAsNumpy()) if op.InputsLength() else ()
        outs = tuple(int(v) for v in op.OutputsAsNumpy()) if op.OutputsLength() else ()
        for tensor_index in ins + outs:
            if tensor_index >= tensor_count:
                raise TfliteGraphError(
                    f'{name} (op {index}) refers to missing tensor {tensor_index}'
                )
        nodes.append(_Node(index, name, ins, outs, _options(op, name)))
    return nodes


def _operator_name(model: tflite.Model, op: tflite.Operator, index: int) -> str:
    """Return the op's TFLite name (``CUSTOM(name)`` for a custom op)."""
    code_index = op.OpcodeIndex()
    if code_index >= model.OperatorCodesLength():
        raise TfliteGraphError(f'operator {index} refers to missing opcode {code_index}')
    code = model.OperatorCodes(code_index)
    # Files since TF 2.4 keep codes >= 127 in builtin_code; the deprecated field saturates.
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    if builtin == tflite.BuiltinOperator.CUSTOM:
        custom = code.CustomCode()
        return f'CUSTOM({custom.decode(errors="replace") if custom else "?"})'
    return op_name(builtin)


def _fold_weight_ops(
    nodes: list[_Node], stored: _StoredTensors, file_size: int
) -> tuple[dict[int, np.ndarray], list[_Node]]:
    """Fold DEQUANTIZE and DENSIFY into constants; return the constants and the other ops.

    The folded ops must read constants only. Dense copies may not outgrow the file by
    much: a corrupt shape must fail here, not exhaust the memory.
    """
    tensors = stored.infos
    constants = dict(stored.raw)
    runtime: list[_Node] = []
    budget = 16 * file_size + (1 << 20)
    for node in nodes:
        if node.op not in FOLDED_OPS:
            runtime.append(node)
            continue
        budget -= int(np.prod(tensors[node.outputs[0]].shape, dtype=np.float64))
        if budget < 0:
            raise TfliteGraphError(
                f'{node.op} (op {node.index}) would expand the weights far beyond the file size'
            )
        source = node.inputs[0]
        if source not in constants:
            raise TfliteGraphError(
                f'{node.op} (op {node.index}) of a non-constant tensor is not supported'
            )
        if node.op == 'DENSIFY':
            if source not in stored.sparsity:
                raise TfliteGraphError(f'DENSIFY (op {node.index}) of a dense tensor')
            value = _densify(constants[source], tensors[source].shape, stored.sparsity[source])
        else:
            value = _dequantize(constants[source], stored.quant[source])
        constants[node.outputs[0]] = value.reshape(tensors[node.outputs[0]].shape)
    for index in stored.sparsity:
        constants.pop(index, None)  # only the densified copy is used
    return constants, runtime


def _check_float_activations(runtime: list[_Node], tensors: list[_TensorInfo]) -> None:
    """Raise unless every op that runs produces float32 (no quantised graphs)."""
    for node in runtime:
        for tensor_index in node.outputs:
            if tensors[tensor_index].dtype != tflite.TensorType.FLOAT32:
                kind = _TYPE_NAMES.get(tensors[tensor_index].dtype, tensors[tensor_index].dtype)
                raise TfliteGraphError(
                    f'{node.op} (op {node.index}) produces a {kind} tensor; only float32 '
                    'activations are supported (no quantised graphs)'
                )


def _graph_endpoints(
    graph: tflite.SubGraph, tensor_count: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Return subgraph 0's input and output tensors; raise when either is missing."""
    inputs = tuple(int(v) for v in graph.InputsAsNumpy()) if graph.InputsLength() else ()
    outputs = tuple(int(v) for v in graph.OutputsAsNumpy()) if graph.OutputsLength() else ()
    if not inputs or not outputs:
        raise TfliteGraphError('subgraph 0 has no inputs or no outputs')
    for tensor_index in inputs + outputs:
        if tensor_index >= tensor_count:
            raise TfliteGraphError(f'graph input/output refers to missing tensor {tensor_index}')
    return inputs, outputs


# ---------------------------------------------------------------------------------------
# Execution


def _same_padding(size: int, kernel: int, stride: int, dilation: int) -> tuple[int, int]:
    """Return TensorFlow's SAME padding (before, after) of one spatial dimension."""
    out = -(-size // stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def _activate(x: torch.Tensor, activation: int) -> torch.Tensor:
    """Apply a fused activation in place (every caller passes a fresh tensor)."""
    fn = _ACTIVATIONS[activation]
    return x if fn is None else fn(x)


def _pad_nchw(
    x: torch.Tensor, node: _Node, kernel: tuple[int, int], value: float = 0.0
) -> tuple[torch.Tensor, tuple[int, int]]:
    """SAME-pad ``x`` (NCHW); return it and the symmetric padding left for the op."""
    if node.options['padding'] != tflite.Padding.SAME:
        return x, (0, 0)
    stride, dilation = node.options['stride'], node.options.get('dilation', (1, 1))
    top, bottom = _same_padding(x.shape[2], kernel[0], stride[0], dilation[0])
    left, right = _same_padding(x.shape[3], kernel[1], stride[1], dilation[1])
    if top == bottom and left == right and value == 0.0:
        return x, (top, left)
    return F.pad(x, (left, right, top, bottom), value=value), (0, 0)


class TfliteGraphModule(nn.Module):
    """Subgraph 0 of a ``.tflite`` model as a torch module (NHWC tensors in and out).

    ``forward(*inputs)`` takes the graph inputs in the file's order and returns a tuple
    of the graph outputs in the file's order; ``input_names``/``output_names`` and
    ``input_shapes`` describe them.
    """

    def __init__(self, graph: _ParsedGraph, *, validate: bool = True) -> None:
        super().__init__()
        self._nodes = graph.nodes
        self._inputs = graph.inputs
        self._outputs = graph.outputs
        self._tensor_shapes = [info.shape for info in graph.tensors]
        self.input_names = tuple(graph.tensors[i].name for i in graph.inputs)
        self.output_names = tuple(graph.tensors[i].name for i in graph.outputs)
        self.input_shapes = tuple(graph.tensors[i].shape for i in graph.inputs)
        # Constants that ops read as tensors become buffers; conv weights are stored in
        # torch's OIHW layout so forward does not permute them on every call.
        self._const_buffers: dict[int, str] = {}
        self._weight_buffers: dict[int, str] = {}
        self._static: dict[int, np.ndarray] = {}
        produced = set(graph.inputs)
        for node in graph.nodes:
            for position, tensor in enumerate(node.inputs):
                if tensor < 0:
                    continue
                if tensor in graph.constants:
                    self._register_constant(node, position, tensor, graph.constants[tensor])
                elif tensor not in produced:
                    raise TfliteGraphError(
                        f'{node.op} (op {node.index}) reads tensor '
                        f'{graph.tensors[tensor].name!r} before any op produces it'
                    )
            produced.update(node.outputs)
        for tensor in graph.outputs:
            if tensor not in produced and tensor not in graph.constants:
                raise TfliteGraphError(
                    f'graph output {graph.tensors[tensor].name!r} is never produced'
                )
            if tensor in graph.constants and tensor not in self._const_buffers:
                self._add_buffer(tensor, graph.constants[tensor])
        # Free each intermediate after its last reader: peak memory stays near one layer.
        last_use: dict[int, int] = {}
        for step, node in enumerate(self._nodes):
            for tensor in node.inputs:
                last_use[tensor] = step
        keep = set(graph.outputs)
        self._release = [
            tuple(t for t in node.inputs if last_use.get(t) == step and t not in keep)
            for step, node in enumerate(self._nodes)
        ]
        for node in self._nodes:
            self._check_node(node)
        if validate:
            self._check_shapes()

    # -- construction helpers -----------------------------------------------------------

    def _add_buffer(self, tensor: int, value: np.ndarray) -> str:
        name = f'const_{tensor}'
        self.register_buffer(name, torch.from_numpy(np.ascontiguousarray(value)).clone())
        self._const_buffers[tensor] = name
        return name

    def _register_constant(self, node: _Node, position: int, tensor: int, value: Any) -> None:
        if node.op in ('CONV_2D', 'DEPTHWISE_CONV_2D') and position == 1:
            if value.ndim != 4:
                raise TfliteGraphError(f'{node.op} (op {node.index}) weight of rank {value.ndim}')
            weight = value.astype(np.float32)
            # CONV_2D is OHWI; DEPTHWISE_CONV_2D is 1HW(C*M); torch wants OIHW with groups.
            weight = (
                weight.transpose(0, 3, 1, 2)
                if node.op == 'CONV_2D'
                else weight.transpose(3, 0, 1, 2)
            )
            name = f'weight_{node.index}'
            self.register_buffer(name, torch.from_numpy(np.ascontiguousarray(weight)))
            self._weight_buffers[node.index] = name
        elif (node.op, position) in (('PAD', 1), ('RESHAPE', 1), ('RESIZE_BILINEAR', 1)):
            self._static[tensor] = np.asarray(value).astype(np.int64)
        elif np.asarray(value).dtype.kind == 'f':
            if tensor not in self._const_buffers:
                self._add_buffer(tensor, np.asarray(value, dtype=np.float32))
        else:
            raise TfliteGraphError(
                f'{node.op} (op {node.index}) reads a {np.asarray(value).dtype} constant at '
                f'input {position}, which is not supported'
            )

    def _check_node(self, node: _Node) -> None:
        activation = node.options.get('activation', tflite.ActivationFunctionType.NONE)
        if activation not in _ACTIVATIONS:
            raise TfliteGraphError(
                f'{node.op} (op {node.index}) has unsupported fused activation '
                f'{_ACTIVATION_NAMES.get(activation, activation)}'
            )
        if node.op in ('CONV_2D', 'DEPTHWISE_CONV_2D') and node.index not in self._weight_buffers:
            raise TfliteGraphError(f'{node.op} (op {node.index}) with a non-constant weight')
        if node.op == 'PAD' and (len(node.inputs) < 2 or node.inputs[1] not in self._static):
            raise TfliteGraphError(f'PAD (op {node.index}) with non-constant paddings')
        if node.op == 'RESIZE_BILINEAR':
            if node.inputs[1] not in self._static:
                raise TfliteGraphError(f'RESIZE_BILINEAR (op {node.index}) with a dynamic size')
            if not (node.options['align_corners'] or node.options['half_pixel_centers']):
                raise TfliteGraphError(
                    f'RESIZE_BILINEAR (op {node.index}) in the legacy mode (neither '
                    'align_corners nor half_pixel_centers) is not supported'
                )
        if (
            node.op == 'RESHAPE'
            and 'new_shape' not in node.options
            and (len(node.inputs) < 2 or node.inputs[1] not in self._static)
        ):
            raise TfliteGraphError(f'RESHAPE (op {node.index}) with a dynamic shape')

    def _check_shapes(self) -> None:
        """Run zeros through the graph once; every op must give its declared shape."""
        examples = [torch.zeros(shape) for shape in self.input_shapes]
        with torch.inference_mode():
            self._run(examples, check=True)

    # -- execution --------------------------------------------------------------------

    def _constant(self, tensor: int) -> torch.Tensor:
        return getattr(self, self._const_buffers[tensor])

    def _value(self, values: dict[int, torch.Tensor], tensor: int) -> torch.Tensor | None:
        if tensor in values:
            return values[tensor]
        if tensor in self._const_buffers:
            return self._constant(tensor)
        return None  # an omitted optional input (index -1) or a static operand

    def _run(
        self, inputs: Sequence[torch.Tensor], check: bool = False
    ) -> tuple[torch.Tensor, ...]:
        values: dict[int, torch.Tensor] = dict(zip(self._inputs, inputs, strict=True))
        for step, node in enumerate(self._nodes):
            args = [self._value(values, t) for t in node.inputs]
            try:
                result = _HANDLERS[node.op](self, node, args)
            except RuntimeError as error:
                if not check:
                    raise
                raise TfliteGraphError(f'{node.op} (op {node.index}) fails: {error}') from error
            if check and tuple(result.shape) != self._tensor_shapes[node.outputs[0]]:
                raise TfliteGraphError(
                    f'{node.op} (op {node.index}) gives shape {list(result.shape)}, the file '
                    f'declares {list(self._tensor_shapes[node.outputs[0]])}'
                )
            values[node.outputs[0]] = result
            for tensor in self._release[step]:
                values.pop(tensor, None)
        return tuple(
            values[t] if t in values else self._constant(t).clone() for t in self._outputs
        )

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Run the graph on NHWC float32 ``inputs``; return the outputs in file order."""
        if len(inputs) != len(self._inputs):
            raise ValueError(f'the graph takes {len(self._inputs)} inputs, got {len(inputs)}')
        for name, shape, tensor in zip(self.input_names, self.input_shapes, inputs, strict=True):
            if tuple(tensor.shape) != shape:
                raise ValueError(
                    f'input {name!r} must have shape {list(shape)}, got {list(tensor.shape)}'
                )
        return self._run([t.to(torch.float32) for t in inputs])


# One function per runtime op: (module, node, input tensors) -> output tensor (NHWC).


def _conv(module: TfliteGraphModule, node: _Node, args: list) -> torch.Tensor:
    x, _, bias = (args + [None])[:3]
    weight = getattr(module, module._weight_buffers[node.index])
    if (
        node.op == 'CONV_2D'
        and weight.shape[2:] == (1, 1)
        and weight.shape[1] == x.shape[3]
        and node.options['stride'] == (1, 1)
    ):
        # A pointwise conv is a matmul over NHWC pixels; torch's conv2d would take its
        # slow im2col path for 1x1 kernels on channels-last input.
        flat = x.reshape(-1, x.shape[3])
        matrix = weight.reshape(weight.shape[0], weight.shape[1])
        y = flat @ matrix.t() if bias is None else torch.addmm(bias, flat, matrix.t())
        return _activate(y, node.options['activation']).reshape(*x.shape[:3], -1)
    x = x.permute(0, 3, 1, 2)
    # Depthwise: one group per input channel (output c*M+m reads input c, as in torch).
    groups = x.shape[1] if node.op == 'DEPTHWISE_CONV_2D' else x.shape[1] // weight.shape[1]
    x, padding = _pad_nchw(x, node, (weight.shape[2], weight.shape[3]))
    y = F.conv2d(
        x,
        weight,
        bias,
        stride=node.options['stride'],
        padding=padding,
        dilation=node.options['dilation'],
        groups=groups,
    )
    return _activate(y, node.options['activation']).permute(0, 2, 3, 1)


def _max_pool(module: TfliteGraphModule, node: _Node, args: list) -> torch.Tensor:
    kernel = node.options['kernel']
    x, padding = _pad_nchw(args[0].permute(0, 3, 1, 2), node, kernel, value=-float('inf'))
    y = F.max_pool2d(x, kernel, node.options['stride'], padding)
    return _activate(y, node.options['activation']).permute(0, 2, 3, 1)


def _add(module: TfliteGraphModule, node: _Node, args: list) -> torch.Tensor:
    return _activate(args[0] + args[1], node.options['activation'])


def _pad(module: TfliteGraphModule, node: _Node, args: list) -> torch.Tensor:
    pads = module._static[node.inputs[1]]
    flat: list[int] = []
    for before, after in pads[::-1]:  # F.pad lists the last dimension first
        flat += [int(before), int(after)]
    return F.pad(args[0], flat)


def _reshape(module: TfliteGraphModule, node: _Node, args: list) -> torch.Tensor:
    shape = node.options.get('new_shape')
    if len(node.inputs) > 1 and node.inputs[1] in module._static:
        shape = tuple(int(v) for v in module._static[node.inputs[1]].reshape(-1))
    return args[0].reshape(shape)


def _concat(module: TfliteGraphModule, node: _Node, args: list) -> torch.Tensor:
    return _activate(torch.cat(args, dim=node.options['axis']), node.options['activation'])


def _resize(module: TfliteGraphModule, node: _Node, args: list) -> torch.Tensor:
    height, width = (int(v) for v in module._static[node.inputs[1]])
    # half_pixel_centers is torch's align_corners=False: TFLite clamps the source
    # coordinate below 0 and above size-1 exactly as torch does.
    y = F.interpolate(
        args[0].permute(0, 3, 1, 2),
        size=(height, width),
        mode='bilinear',
        align_corners=bool(node.options['align_corners']),
    )
    return y.permute(0, 2, 3, 1)


def _depth_to_space(module: TfliteGraphModule, node: _Node, args: list) -> torch.Tensor:
    x = args[0]
    block = node.options['block']
    n, h, w, c = x.shape
    out_c = c // (block * block)
    # TensorFlow's DCR order: channel index = (row_in_block * block + col_in_block) * C + c.
    y = x.reshape(n, h, w, block, block, out_c).permute(0, 1, 3, 2, 4, 5)
    return y.reshape(n, h * block, w * block, out_c)


def _logistic(module: TfliteGraphModule, node: _Node, args: list) -> torch.Tensor:
    return torch.sigmoid(args[0])


_HANDLERS: dict[str, Callable[[TfliteGraphModule, _Node, list], torch.Tensor]] = {
    'ADD': _add,
    'CONCATENATION': _concat,
    'CONV_2D': _conv,
    'DEPTHWISE_CONV_2D': _conv,
    'DEPTH_TO_SPACE': _depth_to_space,
    'LOGISTIC': _logistic,
    'MAX_POOL_2D': _max_pool,
    'PAD': _pad,
    'RESHAPE': _reshape,
    'RESIZE_BILINEAR': _resize,
}
assert set(_HANDLERS) == RUNTIME_OPS  # noqa: S101 - a table edited in one place only


Result = TypeVar('Result')
# The flatbuffer runtime reports truncation and bad offsets as low-level errors.
_FLATBUFFER_ERRORS = (
    struct.error,
    IndexError,
    ValueError,
    TypeError,
    AttributeError,
    UnicodeError,
    OverflowError,
    MemoryError,
)
# vtable slots of SubGraph's fields (schema.fbs: tensors, inputs, outputs, operators).
_SUBGRAPH_OUTPUTS_SLOT = 8
_SUBGRAPH_OPERATORS_SLOT = 10


def keep_outputs(source: str | os.PathLike[str] | bytes, names: Collection[str]) -> bytes:
    """Return a copy of a ``.tflite`` model that computes only the outputs ``names``.

    Subgraph 0's output list keeps those outputs (in the file's order) and its operator
    list only the operators they depend on, in their order; tensors, weights and
    everything else are untouched, so LiteRT and ``load_tflite`` run the copy and give
    the kept outputs bit for bit. Heads nobody reads cost nothing then: BlazePose's
    landmark net spends 45 % of its time on a 256x256 segmentation mask that the people
    pipelines never use (measured on LiteRT, one thread: 16.1 ms a run, 8.8 ms without).

    The two vectors are shortened in place (a flatbuffer vector is its length and its
    entries; an entry of the operator vector is an offset relative to its own position,
    so a moved entry is rebased). Raises TfliteGraphError for an unknown output name, a
    model of several subgraphs or one with signatures (they would name dropped outputs).
    """
    data = bytearray(read_model_bytes(source))
    return _as_graph_error(lambda: _keep_outputs(data, names))


def _keep_outputs(data: bytearray, names: Collection[str]) -> bytes:
    model = _read_model(bytes(data))
    if model.SubgraphsLength() != 1 or model.SignatureDefsLength() != 0:
        raise TfliteGraphError(
            'keep_outputs handles models of one subgraph without signatures; this one has '
            f'{model.SubgraphsLength()} subgraphs, {model.SignatureDefsLength()} signatures'
        )
    subgraph = model.Subgraphs(0)
    outputs = [int(t) for t in subgraph.OutputsAsNumpy()]
    by_name = {subgraph.Tensors(t).Name().decode(): t for t in outputs}
    unknown = sorted(set(names) - set(by_name))
    if unknown or not names:
        raise TfliteGraphError(
            f"outputs {unknown or '(none)'} are not among the model's {sorted(by_name)}"
        )
    kept = [t for t in outputs if subgraph.Tensors(t).Name().decode() in names]
    producer = {}
    for position in range(subgraph.OperatorsLength()):
        for tensor in subgraph.Operators(position).OutputsAsNumpy():
            producer[int(tensor)] = position
    needed: set[int] = set()
    pending = list(kept)
    while pending:
        position = producer.get(pending.pop())
        if position is None or position in needed:
            continue  # a graph input or a constant, or seen already
        needed.add(position)
        pending.extend(int(t) for t in subgraph.Operators(position).InputsAsNumpy() if t >= 0)
    table = subgraph._tab  # noqa: SLF001 - the generated reader exposes no vector positions
    operators = table.Vector(table.Offset(_SUBGRAPH_OPERATORS_SLOT))
    if struct.unpack_from('<I', data, operators - 4)[0] != subgraph.OperatorsLength():
        raise TfliteGraphError('malformed TFLite file: the operator vector is not where expected')
    targets = [
        operators + 4 * position + struct.unpack_from('<I', data, operators + 4 * position)[0]
        for position in range(subgraph.OperatorsLength())
    ]
    for slot, position in enumerate(sorted(needed)):
        entry = operators + 4 * slot
        struct.pack_into('<I', data, entry, targets[position] - entry)
    struct.pack_into('<I', data, operators - 4, len(needed))
    output_vector = table.Vector(table.Offset(_SUBGRAPH_OUTPUTS_SLOT))
    for slot, tensor in enumerate(kept):
        struct.pack_into('<i', data, output_vector + 4 * slot, tensor)
    struct.pack_into('<I', data, output_vector - 4, len(kept))
    return bytes(data)


def read_model_bytes(source: str | os.PathLike[str] | bytes) -> bytes:
    """Return a model's bytes from a path or bytes; TfliteGraphError when unreadable."""
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source)
    try:
        return Path(source).read_bytes()
    except OSError as error:
        raise TfliteGraphError(f'cannot read {source}: {error}') from error


def load_tflite(
    source: str | os.PathLike[str] | bytes, *, validate: bool = True
) -> TfliteGraphModule:
    """Load subgraph 0 of a ``.tflite`` file (path or bytes) as a TfliteGraphModule.

    Raises TfliteGraphError for a malformed file or an op this loader does not run;
    ``validate`` also runs zeros through the graph once to check every op's shape.
    """
    data = read_model_bytes(source)
    graph = _as_graph_error(lambda: _parse(data))
    return TfliteGraphModule(graph, validate=validate)


def _as_graph_error(read: Callable[[], Result]) -> Result:
    """Return ``read()``; the flatbuffer runtime's low-level errors become TfliteGraphError."""
    try:
        return read()
    except TfliteGraphError:
        raise
    except _FLATBUFFER_ERRORS as error:
        raise TfliteGraphError(
            f'malformed TFLite file: {type(error).__name__}: {error}'
        ) from error
