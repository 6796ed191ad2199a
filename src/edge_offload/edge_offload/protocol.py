# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Wire protocol between the offload bridge (robot) and the edge server.

One protocol message is one ZeroMQ multipart message::

    frame 0      msgpack map: the header (version, type, request id, fields, tensor table)
    frame 1..n   one raw little-endian, row-major buffer per tensor in the header's table

The header is decoded with msgpack limits and checked field by field against this
module's schema before anything uses it; tensor frames must match the dtype and shape
their table entry declares, byte for byte. Nothing received is unpickled or evaluated.
Every violation raises ``ProtocolError`` with an error code and a message that says what
was wrong, so the server can answer it instead of crashing.

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
}
_WIRE_DTYPES = {dtype: name for name, dtype in TORCH_DTYPES.items()}


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
            wire_dtype = _WIRE_DTYPES[tensor.dtype]
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
            _check_plain_value(item, f'{where}.{key}', depth + 1)
        return
    raise ProtocolError(E_MALFORMED, f'{where} has unsupported type {type(value).__name__}')


def _decode_header(frame: bytes | memoryview) -> dict[str, Any]:
    size = memoryview(frame).nbytes
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
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError):
        raise ProtocolError(E_MALFORMED, 'header is not a valid msgpack map') from None
    if not isinstance(header, dict):
        raise ProtocolError(E_MALFORMED, 'header is not a msgpack map')
    return header


def _parse_tensor_table(table: Any) -> list[tuple[str, torch.dtype, tuple[int, ...]]]:
    if not isinstance(table, list):
        raise ProtocolError(E_MALFORMED, 'tensor table is not a list')
    if len(table) > MAX_TENSORS:
        raise ProtocolError(E_TOO_LARGE, f'more than {MAX_TENSORS} tensors in one message')
    entries = []
    names = set()
    for index, entry in enumerate(table):
        if not (isinstance(entry, list) and len(entry) == 3):
            raise ProtocolError(E_MALFORMED, f'tensor entry {index} is not [name, dtype, shape]')
        name, wire_dtype, shape = entry
        if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME_CHARS:
            raise ProtocolError(E_MALFORMED, f'tensor entry {index} has an invalid name')
        if name in names:
            raise ProtocolError(E_MALFORMED, f'tensor name {name!r} appears twice')
        names.add(name)
        if wire_dtype not in TORCH_DTYPES:
            raise ProtocolError(E_MALFORMED, f'tensor {name!r} has unknown dtype {wire_dtype!r}')
        if not isinstance(shape, list) or len(shape) > MAX_TENSOR_NDIM:
            raise ProtocolError(
                E_MALFORMED, f'tensor {name!r} shape is not a list of <= {MAX_TENSOR_NDIM} dims'
            )
        for dim in shape:
            if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim < 2**40:
                raise ProtocolError(E_MALFORMED, f'tensor {name!r} has invalid dimension {dim!r}')
        entries.append((name, TORCH_DTYPES[wire_dtype], tuple(shape)))
    return entries


def decode(
    frames: Sequence[bytes | memoryview],
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> Message:
    """Decode and validate the frames of one message.

    Tensors are copied out of the frames, so the result owns its memory.

    Raises:
        ProtocolError: the frames are not a valid message of this protocol version, or
            they are larger than ``max_message_bytes``.

    """
    if not frames:
        raise ProtocolError(E_MALFORMED, 'empty message')
    total = frames_nbytes(frames)
    if total > max_message_bytes:
        raise ProtocolError(
            E_TOO_LARGE, f'message is {total} bytes; the limit is {max_message_bytes}'
        )
    header = _decode_header(frames[0])
    version = header.get('v')
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            E_VERSION,
            f'protocol version {version!r} is not supported (this is {PROTOCOL_VERSION})',
        )
    message_type = header.get('t')
    if message_type not in MESSAGE_TYPES:
        raise ProtocolError(E_MALFORMED, f'unknown message type {message_type!r}')
    request_id = header.get('id')
    if isinstance(request_id, bool) or not isinstance(request_id, int):
        raise ProtocolError(E_MALFORMED, 'request id is not an integer')
    if not 0 <= request_id <= _MAX_REQUEST_ID:
        raise ProtocolError(E_MALFORMED, 'request id is out of range')
    fields = header.get('f', {})
    if not isinstance(fields, dict):
        raise ProtocolError(E_MALFORMED, 'fields are not a map')
    _check_plain_value(fields, 'fields')
    table = _parse_tensor_table(header.get('x', []))
    buffers = frames[1:]
    if len(buffers) != len(table):
        raise ProtocolError(
            E_MALFORMED, f'header lists {len(table)} tensors but {len(buffers)} buffers follow'
        )
    tensors = {}
    for (name, dtype, shape), buffer in zip(table, buffers, strict=True):
        view = memoryview(buffer)
        itemsize = torch.empty((), dtype=dtype).element_size()
        expected = math.prod(shape) * itemsize
        if view.nbytes != expected:
            raise ProtocolError(
                E_MALFORMED,
                f'tensor {name!r}: {view.nbytes} bytes received, {expected} expected '
                f'for {list(shape)} {dtype}',
            )
        storage = bytearray(view)  # one copy: the tensor must own writable memory
        if expected == 0:
            tensors[name] = torch.empty(shape, dtype=dtype)
        else:
            tensors[name] = torch.frombuffer(storage, dtype=dtype).reshape(shape)
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
