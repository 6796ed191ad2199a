# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Wire form of one aten operator call: the operator's name and its argument tree.

The robot sends ``aten.<name>.<overload>`` and a msgpack tree in which tensors are
references to values the server holds (``{'T': id}``) and the non-JSON argument types of
aten schemas (dtype, device, layout, memory format, tuple) are small tagged maps. The
server resolves the name only inside the ``aten`` namespace, refuses the operators in
``DENIED_OPS`` (file access, printing), and decodes with msgpack limits plus its own
node and depth bounds. Nothing is unpickled or evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import msgpack
import torch

from edge_offload.protocol import TORCH_DTYPES, WIRE_DTYPE_NAMES

MAX_BLOB_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 8
MAX_NODES = 200_000

# Reading files, printing on the server, or replacing a tensor's storage wholesale.
DENIED_OPS = frozenset({'from_file', '_print', 'set_', 'save', 'load'})
_IDENT = re.compile(r'^[A-Za-z_][A-Za-z0-9_]{0,127}$')

_LAYOUTS = {'strided': torch.strided, 'sparse_coo': torch.sparse_coo}
_MEMORY_FORMATS = {
    'contiguous_format': torch.contiguous_format,
    'channels_last': torch.channels_last,
    'preserve_format': torch.preserve_format,
    'channels_last_3d': torch.channels_last_3d,
}


class OpCodecError(ValueError):
    """An operator call that cannot be encoded here or accepted there."""


def op_name(func: torch._ops.OpOverload) -> str:
    """Return the wire name of ``func``: ``aten.<name>.<overload>``."""
    namespace, _, name = func._schema.name.partition('::')
    return f'{namespace}.{name}.{func._overloadname}'


def resolve_op(name: str) -> torch._ops.OpOverload:
    """Return the aten operator a wire name denotes.

    Raises:
        OpCodecError: not an ``aten.<name>.<overload>`` name, unknown, or denied.

    """
    parts = name.split('.')
    if len(parts) != 3 or parts[0] != 'aten' or not all(_IDENT.match(p) for p in parts[1:]):
        raise OpCodecError(f'operator {name[:200]!r} is not aten.<name>.<overload>')
    base, overload = parts[1], parts[2]
    if base in DENIED_OPS or base.rstrip('_') in DENIED_OPS:
        raise OpCodecError(f'operator {name!r} is not allowed on the edge server')
    try:
        packet = getattr(torch.ops.aten, base)
        func = getattr(packet, overload)
    except (AttributeError, RuntimeError):
        raise OpCodecError(f'unknown operator {name!r}') from None
    if not isinstance(func, torch._ops.OpOverload):
        raise OpCodecError(f'{name!r} is not an operator overload')
    return func


def encode_complex(value: complex) -> dict[str, list[float]]:
    """Return a Python complex scalar as its tagged msgpack form."""
    return {'c': [value.real, value.imag]}


def decode_complex(item: Any) -> complex:
    """Inverse of ``encode_complex``.

    Raises:
        OpCodecError: ``item`` is not a pair of floats.

    """
    if not (
        isinstance(item, list) and len(item) == 2 and all(isinstance(part, float) for part in item)
    ):
        raise OpCodecError('malformed complex scalar')
    return complex(item[0], item[1])


def encode_tree(value: Any, tensor_ref: Callable[[torch.Tensor], int]) -> Any:
    """Return the msgpack-ready form of an argument tree; tensors become ``tensor_ref`` ids."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, complex):
        return encode_complex(value)
    if isinstance(value, torch.Tensor):
        return {'T': tensor_ref(value)}
    if isinstance(value, list):
        return [encode_tree(v, tensor_ref) for v in value]
    if isinstance(value, tuple):
        return {'tu': [encode_tree(v, tensor_ref) for v in value]}
    if isinstance(value, torch.dtype):
        if value not in WIRE_DTYPE_NAMES:
            raise OpCodecError(
                f'dtype {str(value).removeprefix("torch.")} cannot be sent to the edge server '
                f'(the wire protocol carries {", ".join(sorted(TORCH_DTYPES))})'
            )
        return {'d': WIRE_DTYPE_NAMES[value]}
    if isinstance(value, torch.device):
        return {'D': value.type}
    if isinstance(value, torch.layout):
        return {'l': str(value).removeprefix('torch.')}
    if isinstance(value, torch.memory_format):
        return {'m': str(value).removeprefix('torch.')}
    raise OpCodecError(f'cannot send an argument of type {type(value).__name__}')


def decode_tree(
    value: Any,
    tensor: Callable[[int], torch.Tensor],
    device: torch.device,
    _depth: int = 0,
    _budget: list[int] | None = None,
) -> Any:
    """Inverse of ``encode_tree``; ``tensor(id)`` resolves references, devices map to ``device``.

    Raises:
        OpCodecError: a malformed or over-deep tree, an unknown tag or value.

    """
    budget = _budget if _budget is not None else [MAX_NODES]
    budget[0] -= 1
    if budget[0] < 0:
        raise OpCodecError(f'argument tree has more than {MAX_NODES} nodes')
    if _depth > MAX_DEPTH:
        raise OpCodecError(f'argument tree is deeper than {MAX_DEPTH}')
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        return [decode_tree(v, tensor, device, _depth + 1, budget) for v in value]
    if not (isinstance(value, dict) and len(value) == 1):
        raise OpCodecError(f'malformed argument node of type {type(value).__name__}')
    ((tag, item),) = value.items()
    try:
        if tag == 'T' and isinstance(item, int) and not isinstance(item, bool):
            return tensor(item)
        if tag == 'tu' and isinstance(item, list):
            return tuple(decode_tree(v, tensor, device, _depth + 1, budget) for v in item)
        if tag == 'c':
            return decode_complex(item)
        if tag == 'd':
            return TORCH_DTYPES[item]
        if tag == 'D' and item in ('cpu', 'cuda', 'meta'):
            return device
        if tag == 'l':
            return _LAYOUTS[item]
        if tag == 'm':
            return _MEMORY_FORMATS[item]
    except (KeyError, TypeError, ValueError):
        pass
    raise OpCodecError(f'malformed argument node {tag!r}')


def pack(value: Any) -> bytes:
    """Return ``value`` (plain data) as msgpack bytes."""
    blob = msgpack.packb(value, use_bin_type=True)
    if len(blob) > MAX_BLOB_BYTES:
        raise OpCodecError(f'encoded call is {len(blob)} bytes; the limit is {MAX_BLOB_BYTES}')
    return blob


def unpack(blob: bytes | memoryview) -> Any:
    """Decode msgpack bytes from the network with hard limits (no extensions, no bins).

    Raises:
        OpCodecError: too large or not valid msgpack.

    """
    size = memoryview(blob).nbytes
    if size > MAX_BLOB_BYTES:
        raise OpCodecError(f'encoded call is {size} bytes; the limit is {MAX_BLOB_BYTES}')
    try:
        return msgpack.unpackb(
            blob,
            raw=False,
            strict_map_key=True,
            max_bin_len=0,
            max_ext_len=0,
            max_str_len=4096,
            max_array_len=MAX_NODES,
            max_map_len=4096,
        )
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError):
        raise OpCodecError('encoded call is not valid msgpack') from None


def blob_tensor(value: Any) -> torch.Tensor:
    """Return ``pack(value)`` as a uint8 tensor (to ride in a protocol message)."""
    return torch.frombuffer(bytearray(pack(value)), dtype=torch.uint8)


def tensor_blob(tensor: torch.Tensor) -> Any:
    """Inverse of ``blob_tensor``.

    Raises:
        OpCodecError: not a 1-D uint8 tensor, or not valid msgpack.

    """
    if tensor.dtype != torch.uint8 or tensor.dim() != 1:
        raise OpCodecError('an encoded call must be a 1-D uint8 tensor')
    return unpack(tensor.numpy().tobytes())


def tagged_leaves(tree: Any, tag: str) -> list[dict]:
    """Return the one-key ``{tag: ...}`` maps in an encoded tree (e.g. ``'T'`` references)."""
    found: list[dict] = []
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            if len(item) == 1 and tag in item:
                found.append(item)
            else:
                stack.extend(item.values())
    return found
