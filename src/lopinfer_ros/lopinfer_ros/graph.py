# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Capture the operator graph of an unmodified model (``TorchFunctionMode``).

One forward pass on an example input records every torch function that produces a tensor
from the model's input: the function, its arguments (with references to earlier nodes and
to constants: parameters, buffers and tensors computed only from them) and the output's
shape and dtype. Both sides of LOPInfer re-run that recorded graph instead of the model's
Python code, operator by operator, on slices.

A graph holds for one input shape (a plan is per shape anyway). Programs whose flow
depends on tensor values (``item``, ``bool``, ``nonzero``, in-place writes into inputs)
cannot be recorded this way: ``capture`` refuses them with ``CaptureError`` saying where.

Such a part can still be kept if it is a submodule whose class sets ``lopinfer_opaque =
True`` (a post-processing step such as NMS): it is recorded as ONE opaque node that calls
the submodule, runs whole on one side and may return a tensor of data-dependent shape
(the graph records the example's shape, which only sizes the planner's estimate).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 - the usual name
from torch.overrides import TorchFunctionMode, resolve_name
from torch.utils import _pytree as pytree


class CaptureError(RuntimeError):
    """The model cannot be recorded as a static operator graph."""


@dataclass(frozen=True)
class Ref:
    """An argument that is the output of graph node ``node``."""

    node: int


@dataclass(frozen=True)
class Const:
    """An argument that is the graph's constant number ``index``."""

    index: int


@dataclass
class OpNode:
    """One recorded operator call (``op`` is a short stable name, e.g. ``conv2d``)."""

    index: int
    op: str
    func: Callable[..., Any] | None
    args: tuple
    kwargs: dict[str, Any]
    inputs: tuple[int, ...]
    shape: tuple[int, ...]
    dtype: torch.dtype
    # Its shape depends on the data (an opaque node or a consumer of one): ``shape`` is
    # the example's, and the graph hash counts only its rank.
    dynamic: bool = False

    @property
    def nbytes(self) -> int:
        """Bytes of this node's whole output."""
        count = 1
        for size in self.shape:
            count *= size
        return count * torch.empty((), dtype=self.dtype).element_size()


@dataclass
class OpGraph:
    """A recorded forward pass: input nodes first, then operators in execution order."""

    nodes: list[OpNode]
    constants: list[torch.Tensor]
    outputs: list[int]
    output_spec: Any = None
    num_inputs: int = 0
    hash: str = field(default='')

    def resolve(self, value: Any, values: Sequence[torch.Tensor | None]) -> Any:
        """Replace ``Ref``/``Const`` leaves in ``value`` with tensors."""
        if isinstance(value, Ref):
            tensor = values[value.node]
            if tensor is None:
                raise RuntimeError(f'node {value.node} was released before its use')
            return tensor
        if isinstance(value, Const):
            return self.constants[value.index]
        if isinstance(value, (list, tuple)):
            return type(value)(self.resolve(item, values) for item in value)
        if isinstance(value, dict):
            return {key: self.resolve(item, values) for key, item in value.items()}
        return value

    def run(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Run the whole graph on ``inputs`` (the reference for every sliced run)."""
        values = self.run_all(inputs)
        return [values[index] for index in self.outputs]

    def run_all(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Run the whole graph and return every node's output."""
        if len(inputs) != self.num_inputs:
            raise ValueError(f'graph takes {self.num_inputs} inputs, got {len(inputs)}')
        values: list[torch.Tensor | None] = [None] * len(self.nodes)
        for index, tensor in enumerate(inputs):
            values[index] = tensor
        with torch.inference_mode():
            for node in self.nodes[self.num_inputs :]:
                args = self.resolve(node.args, values)
                kwargs = self.resolve(node.kwargs, values)
                values[node.index] = node.func(*args, **kwargs)
        return values

    def unflatten(self, outputs: Sequence[torch.Tensor]) -> Any:
        """Return ``outputs`` in the structure the module returned them."""
        return pytree.tree_unflatten(list(outputs), self.output_spec)


# Functions whose in-place form we record as the out-of-place one: a sliced run must
# never write into a buffer another consumer still reads.
_INPLACE_DUNDERS = {
    '__iadd__': '__add__',
    '__isub__': '__sub__',
    '__imul__': '__mul__',
    '__itruediv__': '__truediv__',
}
# Reading a tensor's value into Python makes the rest of the pass depend on it.
_VALUE_READS = frozenset(
    {
        'item',
        'tolist',
        'nonzero',
        'argwhere',
        '__bool__',
        '__int__',
        '__float__',
        '__index__',
        'numpy',
        'masked_select',
        'unique',
    }
)
_IN_PLACE_WRITES = frozenset({'__setitem__', 'copy_', 'index_put_', 'masked_fill_'})
# Functions that only read metadata.
_METADATA = frozenset(
    {'dim', 'size', 'numel', 'element_size', 'is_contiguous', 'stride', '__len__', '__get__'}
)


def op_name(func: Callable[..., Any]) -> str:
    """Return a short stable name for a torch function (``conv2d``, ``add``, ``getitem``)."""
    if func is F.max_pool2d:
        return 'max_pool2d'
    if func is F.max_pool1d:
        return 'max_pool1d'
    if func is F.adaptive_max_pool2d:
        return 'adaptive_max_pool2d'
    name = getattr(func, '__name__', '') or resolve_name(func) or repr(func)
    name = name.rsplit('.', 1)[-1]
    name = _INPLACE_DUNDERS.get(name, name)
    if name.startswith('__') and name.endswith('__'):
        name = name[2:-2]
        if name.startswith('r') and name[1:] in ('add', 'sub', 'mul', 'truediv', 'pow'):
            name = 'r' + name[1:]
    if name.endswith('_') and not name.endswith('__'):
        name = name[:-1]
    return name


def _out_of_place(func: Callable[..., Any]) -> Callable[..., Any]:
    name = getattr(func, '__name__', '')
    if name in _INPLACE_DUNDERS:
        return getattr(torch.Tensor, _INPLACE_DUNDERS[name])
    if name.endswith('_') and not name.endswith('__') and hasattr(torch.Tensor, name[:-1]):
        return getattr(torch.Tensor, name[:-1])
    return func


OPAQUE_ATTRIBUTE = 'lopinfer_opaque'


def is_opaque(module: Any) -> bool:
    """Return True for a submodule that is recorded as one opaque operator."""
    return isinstance(module, nn.Module) and bool(getattr(type(module), OPAQUE_ATTRIBUTE, False))


class _Recorder(TorchFunctionMode):
    def __init__(self, inputs: Sequence[torch.Tensor]) -> None:
        super().__init__()
        self.suspended = 0  # > 0 while an opaque submodule runs
        self.nodes: list[OpNode] = []
        self.constants: list[torch.Tensor] = []
        self._node_of: dict[int, int] = {}
        self._const_of: dict[int, int] = {}
        self._keep: list[torch.Tensor] = []  # ids stay unique while we hold the tensors
        for tensor in inputs:
            self._add_node('input', None, (), {}, (), tensor)

    def _add_node(self, op, func, args, kwargs, inputs, tensor) -> None:
        index = len(self.nodes)
        dynamic = op.startswith('opaque:') or any(self.nodes[i].dynamic for i in inputs)
        self.nodes.append(
            OpNode(
                index,
                op,
                func,
                args,
                kwargs,
                inputs,
                tuple(tensor.shape),
                tensor.dtype,
                dynamic,
            )
        )
        self._node_of[id(tensor)] = index
        self._keep.append(tensor)

    def _const(self, tensor: torch.Tensor) -> Const:
        index = self._const_of.get(id(tensor))
        if index is None:
            index = len(self.constants)
            self.constants.append(tensor.detach())
            self._const_of[id(tensor)] = index
            self._keep.append(tensor)
        return Const(index)

    def _template(self, value: Any, inputs: list[int]) -> tuple[Any, bool]:
        if isinstance(value, torch.Tensor):
            node = self._node_of.get(id(value))
            if node is not None:
                if node not in inputs:
                    inputs.append(node)
                return Ref(node), True
            return self._const(value), False
        if isinstance(value, (list, tuple)):
            items = [self._template(item, inputs) for item in value]
            return type(value)(item for item, _ in items), any(live for _, live in items)
        if isinstance(value, dict):
            items = {key: self._template(item, inputs) for key, item in value.items()}
            return {k: v for k, (v, _) in items.items()}, any(live for _, live in items.values())
        if isinstance(value, (torch.dtype, torch.device, torch.Size, slice, type(Ellipsis))):
            return value, False
        if value is None or isinstance(value, (bool, int, float, str, complex)):
            return value, False
        if isinstance(value, torch.memory_format):
            return value, False
        raise CaptureError(f'cannot record an argument of type {type(value).__name__}')

    def record_opaque(self, module: nn.Module, args: tuple, kwargs: dict, result: Any) -> Any:
        """Record a call of an opaque submodule as one node."""
        if self.suspended:
            return result  # nested inside another opaque module
        inputs: list[int] = []
        template_args, live_args = self._template(args, inputs)
        template_kwargs, live_kwargs = self._template(kwargs, inputs)
        if not (live_args or live_kwargs):
            return result  # computed from constants only; its ops were folded
        if not isinstance(result, torch.Tensor):
            raise CaptureError(
                f'opaque module {type(module).__name__} must return one tensor, '
                f'got {type(result).__name__}'
            )
        op = f'opaque:{type(module).__name__}'
        self._add_node(op, module, template_args, template_kwargs, tuple(inputs), result)
        return result

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = getattr(func, '__name__', '')
        result = func(*args, **kwargs)
        if self.suspended:
            return result
        if name in _METADATA or not (
            isinstance(result, torch.Tensor)
            or any(isinstance(x, torch.Tensor) for x in pytree.tree_leaves(result))
        ):
            live = any(
                isinstance(x, torch.Tensor) and id(x) in self._node_of
                for x in pytree.tree_leaves((args, kwargs))
            )
            if live and name in _VALUE_READS:
                raise CaptureError(
                    f'{resolve_name(func) or name} reads a value computed from the input: '
                    'the pass is not a static graph'
                )
            return result
        inputs: list[int] = []
        template_args, live_args = self._template(args, inputs)
        template_kwargs, live_kwargs = self._template(kwargs, inputs)
        if not (live_args or live_kwargs):
            # Computed from parameters and constants only: fold it.
            for leaf in pytree.tree_leaves(result):
                if isinstance(leaf, torch.Tensor):
                    self._const(leaf)
            return result
        if name in _VALUE_READS or name in _IN_PLACE_WRITES:
            raise CaptureError(f'{resolve_name(func) or name} on the input is not recordable')
        if not isinstance(result, torch.Tensor):
            raise CaptureError(
                f'{resolve_name(func) or name} returns several tensors from the input; '
                'only single-tensor operators are recordable'
            )
        if 'inplace' in template_kwargs:
            template_kwargs['inplace'] = False
        op = op_name(func)
        if op in ('hardtanh', 'relu', 'relu6', 'elu', 'leaky_relu', 'dropout', 'threshold'):
            template_args = _drop_positional_inplace(op, template_args)
        self._add_node(
            op, _out_of_place(func), template_args, template_kwargs, tuple(inputs), result
        )
        return result


def _recording_forward(module: nn.Module, recorder: _Recorder) -> Callable[..., Any]:
    forward = type(module).forward.__get__(module)

    def recorded(*args: Any, **kwargs: Any) -> Any:
        recorder.suspended += 1
        try:
            result = forward(*args, **kwargs)
        finally:
            recorder.suspended -= 1
        return recorder.record_opaque(module, args, kwargs, result)

    return recorded


def _drop_positional_inplace(op: str, args: tuple) -> tuple:
    # F.hardtanh(x, min, max, inplace) and F.dropout(x, p, training, inplace) pass it last.
    positions = {'hardtanh': 3, 'dropout': 3, 'relu': 1, 'relu6': 1, 'leaky_relu': 2}
    position = positions.get(op)
    if position is not None and len(args) > position and isinstance(args[position], bool):
        return (*args[:position], False, *args[position + 1 :])
    return args


def _structure_hash(graph: OpGraph) -> str:
    digest = hashlib.sha256()
    for node in graph.nodes:
        shape = ('dynamic', len(node.shape)) if node.dynamic else node.shape
        digest.update(
            repr((node.op, shape, str(node.dtype), node.inputs, _plain(node.args))).encode()
        )
    for tensor in graph.constants:
        digest.update(repr((tuple(tensor.shape), str(tensor.dtype))).encode())
    digest.update(repr(graph.outputs).encode())
    return digest.hexdigest()[:16]


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_plain(item) for item in value)
    if isinstance(value, dict):
        return tuple(sorted((key, _plain(item)) for key, item in value.items()))
    if isinstance(value, (Ref, Const, int, float, bool, str)) or value is None:
        return value
    return repr(value)


def capture(module: nn.Module | Callable[..., Any], inputs: Sequence[torch.Tensor]) -> OpGraph:
    """Record ``module(*inputs)`` as an ``OpGraph`` (the module is run once, no grad)."""
    inputs = [tensor.detach() for tensor in inputs]
    recorder = _Recorder(inputs)
    opaque = [m for m in module.modules() if is_opaque(m)] if isinstance(module, nn.Module) else []
    patched = [(submodule, submodule.__dict__.get('forward')) for submodule in opaque]
    for submodule in opaque:
        submodule.forward = _recording_forward(submodule, recorder)
    try:
        with torch.inference_mode(), recorder:
            result = module(*inputs)
    finally:
        for submodule, previous in patched:
            if previous is None:
                del submodule.forward  # back to the class's forward
            else:
                submodule.forward = previous
    leaves, spec = pytree.tree_flatten(result)
    outputs = []
    for leaf in leaves:
        node = recorder._node_of.get(id(leaf)) if isinstance(leaf, torch.Tensor) else None
        if node is None:
            raise CaptureError('every output must be a tensor computed from the input')
        outputs.append(node)
    graph = OpGraph(
        nodes=recorder.nodes,
        constants=recorder.constants,
        outputs=outputs,
        output_spec=spec,
        num_inputs=len(inputs),
    )
    graph.hash = _structure_hash(graph)
    return graph
