# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Wire protocol between the offload bridge (robot) and the edge server.

One protocol message is one ZeroMQ multipart message::

    frame 0      msgpack map: the header (version, type, request id, fields, tensor table)
    frame 1..n   one raw little-endian, row-major buffer per tensor in the header's table

The header is decoded with msgpack limits and checked field by field against this
module's schema before anything uses it: each field's type before its value (no
membership test or comparison on a value not yet known to be a str or an int), each
declared size, in Python ints, before anything is allocated for it. Tensor frames must
match the dtype and shape their table entry declares, byte for byte. Nothing received is
unpickled or evaluated. ``decode`` raises ``ProtocolError``, and nothing else, for any
frames: with an error code and a message that says what was wrong (never the repr of a
received container), so the server can answer it instead of crashing.

The module is plain Python (no sockets): ``client`` and ``server`` move the frames.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack
import torch

PROTOCOL_VERSION = 1

# Message types. A client opens a session with HELLO (answered by WELCOME), keeps it
# alive with PING/PONG (the RTT probe), sends work as CALL (answered by REPLY or ERROR)
# and ends it with BYE. The server may send ERROR for any message it cannot accept.
HELLO = 'hello'
WELCOME = 'welcome'
PING = 'ping'
PONG = 'pong'
CALL = 'call'
REPLY = 'reply'
ERROR = 'error'
BYE = 'bye'
MESSAGE_TYPES = frozenset({HELLO, WELCOME, PING, PONG, CALL, REPLY, ERROR, BYE})

# Error codes carried by ERROR messages and ProtocolError.
E_MALFORMED = 'malformed'
E_VERSION = 'version_mismatch'
E_TOO_LARGE = 'too_large'
E_NO_SESSION = 'no_session'
E_SERVER_FULL = 'server_full'
E_BUSY = 'busy'
E_UNKNOWN_MODE = 'unknown_mode'
E_UNKNOWN_MODEL = 'unknown_model'
E_INVALID_INPUT = 'invalid_input'
E_BAD_REQUEST = 'bad_request'
E_SHUTTING_DOWN = 'shutting_down'
E_INTERNAL = 'internal'
ERROR_CODES = frozenset(
    {
        E_MALFORMED,
        E_VERSION,
        E_TOO_LARGE,
        E_NO_SESSION,
        E_SERVER_FULL,
        E_BUSY,
        E_UNKNOWN_MODE,
        E_UNKNOWN_MODEL,
        E_INVALID_INPUT,
        E_BAD_REQUEST,
        E_SHUTTING_DOWN,
        E_INTERNAL,
    }
)

# Hard ceilings that hold whatever the configuration says: they bound the work a
# single header can cause before the configured limits are checked.
MAX_HEADER_BYTES = 64 * 1024
MAX_TENSORS = 256
MAX_TENSOR_NDIM = 8
MAX_NAME_CHARS = 256
MAX_ARGS = 64
MAX_TEXT_CHARS = 4096
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_MAX_REQUEST_ID = 2**64 - 1
_MAX_DIM = 2**40
# Declared tensor bytes never exceed this, whatever max_message_bytes says: element
# counts and strides then fit torch's int64.
_MAX_DECLARED_BYTES = 2**62

# Wire dtype name -> torch dtype. Buffers are little-endian (every supported host is).
TORCH_DTYPES: dict[str, torch.dtype] = {
    'float32': torch.float32,
    'float16': torch.float16,
    'bfloat16': torch.bfloat16,
    'float64': torch.float64,
    'uint8': torch.uint8,
    'int8': torch.int8,
    'int16': torch.int16,
    'int32': torch.int32,
    'int64': torch.int64,
    'bool': torch.bool,
    'complex64': torch.complex64,
    'complex128': torch.complex128,
}
# torch dtype -> wire dtype name: what the protocol can carry.
WIRE_DTYPE_NAMES = {dtype: name for name, dtype in TORCH_DTYPES.items()}
_ITEM_BYTES = {dtype: torch.empty((), dtype=dtype).element_size() for dtype in WIRE_DTYPE_NAMES}


class ProtocolError(Exception):
    """A message that violates the protocol, with the error code to answer it with."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f'{self.code}: {self.message}'


@dataclass
class Message:
    """One protocol message, decoded.

    ``fields`` holds the type-specific header fields (plain msgpack values: str, int,
    float, bool, None, lists and str-keyed maps of those); ``tensors`` the named tensors
    in wire order.
    """

    type: str
    request_id: int = 0
    fields: dict[str, Any] = field(default_factory=dict)
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)

    def payload_bytes(self) -> int:
        """Return the bytes the tensors occupy on the wire."""
        return sum(tensor_nbytes(tensor) for tensor in self.tensors.values())


def tensor_nbytes(tensor: torch.Tensor) -> int:
    """Return the bytes of ``tensor``'s elements."""
    return tensor.numel() * tensor.element_size()


def _tensor_buffer(tensor: torch.Tensor) -> memoryview:
    """Return a zero-copy byte view of a CPU tensor (made contiguous if needed)."""
    flat = tensor.detach().to('cpu').contiguous().reshape(-1)
    if flat.numel() == 0:
        return memoryview(b'')
    return memoryview(flat.view(torch.uint8).numpy())


def encode(message: Message) -> list[bytes | memoryview]:
    """Return the frames of ``message``: the msgpack header, then one buffer per tensor."""
    if message.type not in MESSAGE_TYPES:
        raise ValueError(f'unknown message type {message.type!r}')
    table = []
    buffers: list[bytes | memoryview] = []
    for name, tensor in message.tensors.items():
        try:
            wire_dtype = WIRE_DTYPE_NAMES[tensor.dtype]
        except KeyError:
            raise ValueError(f'tensor {name!r} has unsupported dtype {tensor.dtype}') from None
        table.append([name, wire_dtype, list(tensor.shape)])
        buffers.append(_tensor_buffer(tensor))
    header = {
        'v': PROTOCOL_VERSION,
        't': message.type,
        'id': message.request_id,
        'f': message.fields,
        'x': table,
    }
    return [msgpack.packb(header, use_bin_type=True), *buffers]


def frames_nbytes(frames: Sequence[bytes | memoryview]) -> int:
    """Return the total size of ``frames`` in bytes."""
    return sum(memoryview(frame).nbytes for frame in frames)


def _reject_ext(code: int, data: bytes) -> Any:
    raise ProtocolError(E_MALFORMED, f'msgpack extension type {code} is not allowed')


def _check_plain_value(value: Any, where: str, depth: int = 0) -> None:
    """Accept only plain data in header fields, bounded in depth and size."""
    if depth > 4:
        raise ProtocolError(E_MALFORMED, f'{where} is nested too deeply')
    if value is None or isinstance(value, bool | int | float):
        return
    if isinstance(value, str):
        if len(value) > MAX_TEXT_CHARS:
            raise ProtocolError(E_MALFORMED, f'{where} is longer than {MAX_TEXT_CHARS} chars')
        return
    if isinstance(value, list):
        if len(value) > MAX_ARGS:
            raise ProtocolError(E_MALFORMED, f'{where} has more than {MAX_ARGS} items')
        for index, item in enumerate(value):
            _check_plain_value(item, f'{where}[{index}]', depth + 1)
        return
    if isinstance(value, dict):
        if len(value) > MAX_ARGS:
            raise ProtocolError(E_MALFORMED, f'{where} has more than {MAX_ARGS} keys')
        for key, item in value.items():
            if not isinstance(key, str):
                raise ProtocolError(E_MALFORMED, f'{where} has a non-string key')
            _check_plain_value(item, f'{where}.{key[:40]}', depth + 1)
        return
    raise ProtocolError(E_MALFORMED, f'{where} has unsupported type {type(value).__name__}')


def _show(value: Any) -> str:
    """Return a short, safe description of a received value for an error message.

    Never the ``repr`` of a container: a received list may be nested a thousand deep
    (``repr`` would raise RecursionError) or be tens of kilobytes long.
    """
    if isinstance(value, str):
        text = repr(value[:40])
        return text if len(value) <= 40 else text[:-1] + '...' + text[-1]
    if value is None or isinstance(value, bool | int | float):
        text = repr(value)
        return text if len(text) <= 40 else text[:37] + '...'
    return f'a {type(value).__name__}'


def _is_int(value: Any) -> bool:
    """Return whether ``value`` is an int (bool, a subclass of int, is not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _frame_views(frames: Any) -> list[memoryview]:
    """Return a memoryview of each frame (raise ProtocolError for a non-buffer)."""
    if isinstance(frames, str | bytes | bytearray | memoryview):
        raise ProtocolError(E_MALFORMED, 'a message is a list of frames, not one buffer')
    try:
        frames = list(frames)
    except TypeError:
        raise ProtocolError(E_MALFORMED, 'a message is a list of frames') from None
    views = []
    for index, frame in enumerate(frames):
        try:
            view = memoryview(frame)
            view.nbytes  # noqa: B018 - raises ValueError for a released view
        except (TypeError, ValueError):
            raise ProtocolError(E_MALFORMED, f'frame {index} is not a byte buffer') from None
        views.append(view)
    return views


def _flat_bytes(view: memoryview, index: int) -> memoryview:
    """Return ``view`` as one C-contiguous run of unsigned bytes (copied if strided)."""
    try:
        if not view.c_contiguous:
            view = memoryview(view.tobytes())
        if view.format != 'B' or view.ndim != 1:
            view = view.cast('B')
    except (TypeError, ValueError, BufferError):
        raise ProtocolError(E_MALFORMED, f'frame {index} is not a byte buffer') from None
    return view


def _decode_header(frame: memoryview) -> dict[str, Any]:
    size = frame.nbytes
    if size > MAX_HEADER_BYTES:
        raise ProtocolError(
            E_TOO_LARGE, f'header is {size} bytes; the limit is {MAX_HEADER_BYTES}'
        )
    try:
        header = msgpack.unpackb(
            frame,
            raw=False,
            use_list=True,
            strict_map_key=True,
            ext_hook=_reject_ext,
            max_str_len=MAX_TEXT_CHARS,
            max_bin_len=0,
            max_array_len=max(MAX_TENSORS, MAX_ARGS),
            max_map_len=MAX_ARGS,
            max_ext_len=0,
        )
    except ProtocolError:
        raise
    except (
        ValueError,  # also msgpack's UnpackValueError, StackError and UnicodeDecodeError
        TypeError,
        RecursionError,  # msgpack's pure-Python fallback on deep nesting
        msgpack.ExtraData,
        msgpack.FormatError,
        msgpack.StackError,
    ):
        raise ProtocolError(E_MALFORMED, 'header is not a valid msgpack map') from None
    if not isinstance(header, dict):
        raise ProtocolError(E_MALFORMED, 'header is not a msgpack map')
    return header


@dataclass(frozen=True)
class _TableEntry:
    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    nbytes: int


def _parse_tensor_table(table: Any, max_message_bytes: int) -> list[_TableEntry]:
    """Check the tensor table entry by entry, types before values, sizes before use.

    Every declared shape, with its zero dimensions counted as one, must fit
    ``max_message_bytes`` (all shapes together): a zero-size tensor must not declare
    dimensions whose product overflows torch's int64 strides, or that a model would
    allocate for.
    """
    if not isinstance(table, list):
        raise ProtocolError(E_MALFORMED, 'tensor table is not a list')
    if len(table) > MAX_TENSORS:
        raise ProtocolError(E_TOO_LARGE, f'more than {MAX_TENSORS} tensors in one message')
    limit = min(max_message_bytes, _MAX_DECLARED_BYTES)
    declared = 0
    entries = []
    names: set[str] = set()
    for index, entry in enumerate(table):
        if not (isinstance(entry, list) and len(entry) == 3):
            raise ProtocolError(E_MALFORMED, f'tensor entry {index} is not [name, dtype, shape]')
        name, wire_dtype, shape = entry
        if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME_CHARS:
            raise ProtocolError(E_MALFORMED, f'tensor entry {index} has an invalid name')
        if name in names:
            raise ProtocolError(E_MALFORMED, f'tensor name {_show(name)} appears twice')
        names.add(name)
        if not isinstance(wire_dtype, str):
            raise ProtocolError(
                E_MALFORMED, f'tensor {_show(name)} dtype is {_show(wire_dtype)}, not a string'
            )
        dtype = TORCH_DTYPES.get(wire_dtype)
        if dtype is None:
            raise ProtocolError(
                E_MALFORMED, f'tensor {_show(name)} has unknown dtype {_show(wire_dtype)}'
            )
        if not isinstance(shape, list) or len(shape) > MAX_TENSOR_NDIM:
            raise ProtocolError(
                E_MALFORMED,
                f'tensor {_show(name)} shape is not a list of <= {MAX_TENSOR_NDIM} dims',
            )
        for dim in shape:
            if not _is_int(dim) or not 0 <= dim < _MAX_DIM:
                raise ProtocolError(
                    E_MALFORMED, f'tensor {_show(name)} has invalid dimension {_show(dim)}'
                )
        # Python ints: no overflow. Zero dimensions count as one for the bound.
        declared += math.prod(max(dim, 1) for dim in shape) * _ITEM_BYTES[dtype]
        if declared > limit:
            raise ProtocolError(
                E_TOO_LARGE,
                f'tensor {_show(name)} declares shape {shape}: the declared shapes '
                f'(zero dimensions counted as 1) exceed the {limit}-byte message limit',
            )
        nbytes = math.prod(shape) * _ITEM_BYTES[dtype]
        entries.append(_TableEntry(name, dtype, tuple(shape), nbytes))
    return entries


def _tensor_from_buffer(entry: _TableEntry, view: memoryview, index: int) -> torch.Tensor:
    """Return the tensor of ``entry`` copied out of its frame ``view``."""
    if view.nbytes != entry.nbytes:
        raise ProtocolError(
            E_MALFORMED,
            f'tensor {_show(entry.name)}: {view.nbytes} bytes received, {entry.nbytes} '
            f'expected for {list(entry.shape)} {entry.dtype}',
        )
    if entry.nbytes == 0:
        return torch.empty(entry.shape, dtype=entry.dtype)  # shape bounded by the table check
    storage = bytearray(_flat_bytes(view, index))  # one copy: the tensor owns writable memory
    if entry.dtype is torch.bool and torch.frombuffer(storage, dtype=torch.uint8).gt(1).any():
        raise ProtocolError(E_MALFORMED, f'tensor {_show(entry.name)}: a bool byte is not 0 or 1')
    return torch.frombuffer(storage, dtype=entry.dtype).reshape(entry.shape)


def decode(
    frames: Sequence[bytes | memoryview],
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> Message:
    """Decode and validate the frames of one message.

    Every header field's type is checked before its value is used, and every size
    before anything is allocated for it. Tensors are copied out of the frames, so the
    result owns its memory.

    Raises:
        ProtocolError: the frames are not a valid message of this protocol version, or
            they are larger than ``max_message_bytes``. Nothing else, whatever the
            frames hold.

    """
    views = _frame_views(frames)
    if not views:
        raise ProtocolError(E_MALFORMED, 'empty message')
    total = sum(view.nbytes for view in views)
    if total > max_message_bytes:
        raise ProtocolError(
            E_TOO_LARGE, f'message is {total} bytes; the limit is {max_message_bytes}'
        )
    header = _decode_header(_flat_bytes(views[0], 0))
    version = header.get('v')
    if not _is_int(version):
        raise ProtocolError(E_MALFORMED, f'protocol version is {_show(version)}, not an integer')
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            E_VERSION,
            f'protocol version {_show(version)} is not supported (this is {PROTOCOL_VERSION})',
        )
    message_type = header.get('t')
    if not isinstance(message_type, str):
        raise ProtocolError(E_MALFORMED, f'message type is {_show(message_type)}, not a string')
    if message_type not in MESSAGE_TYPES:
        raise ProtocolError(E_MALFORMED, f'unknown message type {_show(message_type)}')
    request_id = header.get('id')
    if not _is_int(request_id):
        raise ProtocolError(E_MALFORMED, 'request id is not an integer')
    if not 0 <= request_id <= _MAX_REQUEST_ID:
        raise ProtocolError(E_MALFORMED, 'request id is out of range')
    fields = header.get('f', {})
    if not isinstance(fields, dict):
        raise ProtocolError(E_MALFORMED, 'fields are not a map')
    _check_plain_value(fields, 'fields')
    table = _parse_tensor_table(header.get('x', []), max_message_bytes)
    buffers = views[1:]
    if len(buffers) != len(table):
        raise ProtocolError(
            E_MALFORMED, f'header lists {len(table)} tensors but {len(buffers)} buffers follow'
        )
    tensors = {
        entry.name: _tensor_from_buffer(entry, view, index)
        for index, (entry, view) in enumerate(zip(table, buffers, strict=True), start=1)
    }
    return Message(message_type, request_id, fields, tensors)


def error_message(request_id: int, code: str, text: str) -> Message:
    """Build the ERROR message that answers request ``request_id``."""
    return Message(ERROR, request_id, {'code': code, 'message': text[:MAX_TEXT_CHARS]})


def require_field(message: Message, name: str, kind: type | tuple[type, ...]) -> Any:
    """Return ``message.fields[name]`` if it has type ``kind``; else raise ProtocolError."""
    value = message.fields.get(name)
    if isinstance(value, bool) and kind in (int, float):
        value = None
    if not isinstance(value, kind):
        raise ProtocolError(E_BAD_REQUEST, f'{message.type} needs field {name!r}')
    return value


def float_fields(values: Mapping[str, float]) -> dict[str, float]:
    """Return ``values`` as plain floats (for stats fields)."""
    return {key: float(value) for key, value in values.items()}
