# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Structure-aware mutation fuzzer of protocol messages, and a harness to aim it at a server.

``ProtocolFuzzer`` starts from valid messages of every message type (the robot's HELLO,
PING, an ``nnto`` CALL of ``tiny_cnn`` and BYE, and the server-only WELCOME, PONG, REPLY
and ERROR, which a robot may send too) and mutates them where they are structured: header
fields replaced by values of other types, keys dropped or added, versions, message types,
request ids, dtypes and shapes, tensor tables against buffer counts, CALL arguments the
mode reads, images re-encoded consistently in wrong dtypes, ranks and sizes (so they pass
the decoder and reach the model), buffers truncated or extended; and below the structure:
bit flips, truncations and splices of the msgpack header, extra, empty, dropped, swapped
and split frames, oversized headers and messages. A case applies one to three mutations;
``FuzzCase.kinds`` names them. Given a seed, the cases are the same on every run.

``FuzzSender`` is an authenticated DEALER that sends cases and counts the answers;
``GoodClient`` is a well-behaved robot (``EdgeClient``) that calls ``tiny_cnn`` on one
fixed image in a loop beside it and checks every answer against the first, bit for bit;
``process_resources`` reads a server's resident memory and open file descriptors.
``test_server_fuzz`` and ``benchmarks/server_fuzz.py`` use them.
"""

from __future__ import annotations

import base64
import collections
import copy
import json
import math
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import torch
import zmq

from edge_offload import protocol
from edge_offload.client import ClientConfig, EdgeClient
from edge_offload.errors import OffloadError
from edge_offload.keys import load_public_key, load_secret_key_pair
from edge_offload_testing.offload import resident_memory_bytes

# tiny_cnn's input (edge_offload.models.tiny_cnn): image [N, 3, 64, 64] float32.
IMAGE_SHAPE = (1, 3, 64, 64)
GOOD_CALL_FIELDS = {'mode': 'nnto', 'op': 'infer', 'args': {'model': 'tiny_cnn'}}

# Valid messages the cases start from, and how often each is picked.
SEED_WEIGHTS = {
    'hello': 12,
    'ping': 10,
    'call': 36,
    'bye': 3,
    'welcome': 8,
    'pong': 6,
    'reply': 15,
    'error': 10,
}
VALID_FRACTION = 0.03  # cases sent unmutated
# How the server words its answer to a message whose handling raised something other
# than ProtocolError (server._on_message_failed): a crash its safety net caught.
UNEXPECTED_FAILURE_PREFIX = 'the server could not handle this message'
_MISSING = object()  # a mutation's value: remove the key
_OTHER_IMAGE_DTYPES = (
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.uint8,
    torch.int64,
    torch.bool,
)
_DIMS = (0, 1, 2, 3, 7, 64, 2**31, 2**32, 2**62)

_NAMES = (
    'v',
    't',
    'id',
    'f',
    'x',
    'mode',
    'op',
    'args',
    'model',
    'image',
    'client_name',
    'pid',
    'instance',
    'code',
    'message',
)
_STRINGS = ('', 'call', 'float32', 'tiny_cnn', 'nnto', 'infer', 'image', 'hello', '\u00e9\u2603')
_DTYPE_NAMES = tuple(protocol.TORCH_DTYPES)
_WIRE_NAMES = {dtype: name for name, dtype in protocol.TORCH_DTYPES.items()}
_BAD_DTYPES = ('complex64', 'float8_e4m3fn', 'Float32', 'float32 ', '', 'str', 'object', 'f4')


def _message_frames(header: dict[str, Any], *buffers: bytes, raw: bytes = b'') -> list[bytes]:
    packed = msgpack.packb(header, use_bin_type=True)
    if raw:  # the header's '\x00raw' string stands for raw msgpack bytes
        packed = packed.replace(msgpack.packb('\x00raw'), raw, 1)
    return [packed, *buffers]


def _call_header(**table: Any) -> dict[str, Any]:
    return {'v': 1, 't': 'call', 'id': 1, 'f': copy.deepcopy(GOOD_CALL_FIELDS), **table}


_DEEP_LIST = b'\x91' * 1000 + b'\x01'  # [[[...1]]], 1000 deep: repr() raises RecursionError
_IMAGE_BYTES = bytes(4 * math.prod(IMAGE_SHAPE))

# Messages that once crashed the server's decoder (issue 30), each with the error code
# the server must answer it with. The first five are the issue's: a message type that is
# a list (or a map), a dtype that is a list or a map, a zero-size shape whose other dims
# overflow torch's strides. Then what the fuzzer found beside them: a received value
# nested 1000 deep whose repr (in an error message) raised RecursionError, and two
# invalid messages the decoder accepted (version True, a bool tensor byte of 2).
KNOWN_CRASHERS: dict[str, tuple[list[bytes], str]] = {
    'type is a list': (_message_frames({'v': 1, 't': ['call'], 'id': 1}), protocol.E_MALFORMED),
    'type is a map': (_message_frames({'v': 1, 't': {'call': 1}, 'id': 1}), protocol.E_MALFORMED),
    'dtype is a list': (
        _message_frames(_call_header(x=[['image', ['float32'], list(IMAGE_SHAPE)]]), _IMAGE_BYTES),
        protocol.E_MALFORMED,
    ),
    'dtype is a map': (
        _message_frames(
            _call_header(x=[['image', {'float32': 1}, list(IMAGE_SHAPE)]]), _IMAGE_BYTES
        ),
        protocol.E_MALFORMED,
    ),
    'zero-size shape with huge dims': (
        _message_frames(_call_header(x=[['image', 'float32', [0, 2**39, 2**39, 2**39]]]), b''),
        protocol.E_TOO_LARGE,
    ),
    'version nested 1000 deep': (
        _message_frames({'v': '\x00raw', 't': 'ping', 'id': 1}, raw=_DEEP_LIST),
        protocol.E_MALFORMED,
    ),
    'dimension nested 1000 deep': (
        _message_frames(_call_header(x=[['image', 'float32', ['\x00raw']]]), b'', raw=_DEEP_LIST),
        protocol.E_MALFORMED,
    ),
    'version is true': (_message_frames({'v': True, 't': 'ping', 'id': 1}), protocol.E_MALFORMED),
    'bool byte 2': (
        _message_frames(_call_header(x=[['image', 'bool', [2]]]), b'\x01\x02'),
        protocol.E_MALFORMED,
    ),
}


@dataclass(frozen=True)
class FuzzCase:
    """One fuzzed message: the valid message it started from, the mutations, the frames."""

    seed: str
    kinds: tuple[str, ...]
    frames: list[bytes]

    def to_json(self) -> dict[str, Any]:
        """Return the case as JSON-able data (frames base64-encoded)."""
        return {
            'seed': self.seed,
            'kinds': list(self.kinds),
            'frames': [base64.b64encode(frame).decode() for frame in self.frames],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FuzzCase:
        """Return the case that ``to_json`` wrote."""
        frames = [base64.b64decode(frame) for frame in data['frames']]
        return cls(data['seed'], tuple(data['kinds']), frames)


def save_cases(path: Path, cases: list[FuzzCase]) -> None:
    """Write ``cases`` to ``path`` as JSON (to replay a failure)."""
    path.write_text(json.dumps([case.to_json() for case in cases]))


def load_cases(path: Path) -> list[FuzzCase]:
    """Read the cases ``save_cases`` wrote."""
    return [FuzzCase.from_json(item) for item in json.loads(path.read_text())]


@dataclass
class _Draft:
    """A message being mutated: its header (any msgpack-able value) and tensor buffers."""

    header: Any
    buffers: list[bytes]
    # Placeholder string -> raw msgpack bytes spliced in for it after packing (values
    # nested deeper than msgpack's packer allows).
    raw: dict[str, bytes] = field(default_factory=dict)

    def table(self) -> list | None:
        """Return the header's tensor table if it is still a list, else None."""
        if isinstance(self.header, dict) and isinstance(self.header.get('x'), list):
            return self.header['x']
        return None

    def fields(self) -> dict | None:
        """Return the header's field map if it is still a map, else None."""
        if isinstance(self.header, dict) and isinstance(self.header.get('f'), dict):
            return self.header['f']
        return None


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    """Return the wire bytes of ``tensor`` (little-endian, row-major)."""
    flat = tensor.contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b''


# A mutation of a draft (True when it applied), and one of the packed frames (None: none).
_DraftMutation = Callable[[_Draft, str], bool]
_FrameMutation = Callable[[list[bytes]], list[bytes] | None]


def _seed_messages(
    image: torch.Tensor, instance: str, max_message_bytes: int
) -> dict[str, protocol.Message]:
    """Return the valid message of every type that the cases start from, by seed name."""
    return {
        'hello': protocol.Message(
            protocol.HELLO, 0, {'client_name': 'fuzzer', 'pid': 4242, 'instance': instance}
        ),
        'ping': protocol.Message(protocol.PING, 1),
        'call': protocol.Message(
            protocol.CALL, 2, copy.deepcopy(GOOD_CALL_FIELDS), {'image': image}
        ),
        'bye': protocol.Message(protocol.BYE, 3),
        'welcome': protocol.Message(
            protocol.WELCOME,
            0,
            {
                'server_id': 'edge_server',
                'session_id': 'fuzzer#1',
                'models': ['tiny_cnn'],
                'modes': ['nnto'],
                'max_inflight': 4,
                'max_message_bytes': max_message_bytes,
            },
        ),
        'pong': protocol.Message(protocol.PONG, 1),
        'reply': protocol.Message(
            protocol.REPLY,
            2,
            {'args': {}, 'compute_s': 0.001, 'server_s': 0.002},
            {'features': torch.zeros(1, 16)},
        ),
        'error': protocol.error_message(2, protocol.E_INVALID_INPUT, 'not this time'),
    }


class ProtocolFuzzer:
    """Deterministic, structure-aware mutations of valid protocol messages.

    ``max_message_bytes`` is the server's limit: re-encoded images stay within it, and
    the oversize mutations go just past it. ``frame_oversize`` enables the mutation that
    sends one frame over the limit (the server's socket then drops the connection; the
    DEALER reconnects, and its session is lost).
    """

    def __init__(
        self,
        seed: int,
        *,
        max_message_bytes: int = 1024 * 1024,
        frame_oversize: bool = True,
    ) -> None:
        self.random = random.Random(seed)  # noqa: S311 - reproducible cases, not cryptography
        self.max_message_bytes = max_message_bytes
        self._placeholders = 0
        generator = torch.Generator().manual_seed(self.random.getrandbits(32))
        self.image = torch.rand(IMAGE_SHAPE, generator=generator)
        instance = f'{self.random.getrandbits(64):016x}'
        self.seeds: dict[str, protocol.Message] = _seed_messages(
            self.image, instance, max_message_bytes
        )
        self._seed_frames = {
            name: [bytes(frame) for frame in protocol.encode(message)]
            for name, message in self.seeds.items()
        }
        draft_mutations = self._draft_mutation_table()
        frame_mutations = self._frame_mutation_table(frame_oversize)
        self._draft_mutations = {name: function for name, _, function in draft_mutations}
        self._frame_mutations = {name: function for name, _, function in frame_mutations}
        self._mutation_names = [name for name, _, _ in draft_mutations + frame_mutations]
        self._mutation_weights = [weight for _, weight, _ in draft_mutations + frame_mutations]

    def _draft_mutation_table(self) -> list[tuple[str, float, _DraftMutation]]:
        """Return the mutations of a message's structure: (name, weight, mutation).

        The order is part of the cases: ``next_case`` draws names by index, so a reordered
        table gives other cases for the same seed.
        """
        return [
            ('field_type', 10, self._field_type),
            ('drop_key', 4, self._drop_key),
            ('add_key', 4, self._add_key),
            ('version', 3, self._version),
            ('msg_type', 4, self._msg_type),
            ('request_id', 3, self._request_id),
            ('fields_limits', 3, self._fields_limits),
            ('deep_nesting', 2, self._deep_nesting),
            ('dtype', 6, self._dtype),
            ('shape', 8, self._shape),
            ('table', 6, self._table),
            ('tensor_name', 3, self._tensor_name),
            ('args', 10, self._args),
            ('image', 12, self._image),
            ('hello_fields', 6, self._hello_fields),
            ('buffer_truncate', 3, self._buffer_truncate),
            ('buffer_extend', 3, self._buffer_extend),
            ('buffer_flip', 2, self._buffer_flip),
            ('bool_bytes', 2, self._bool_bytes),
        ]

    def _frame_mutation_table(
        self, frame_oversize: bool
    ) -> list[tuple[str, float, _FrameMutation]]:
        """Return the mutations of the packed frames: (name, weight, mutation).

        Ordered after the draft mutations in the draw, as the draft table is (see there).
        """
        frame_mutations: list[tuple[str, float, _FrameMutation]] = [
            ('header_bitflip', 6, self._header_bitflip),
            ('header_truncate', 4, self._header_truncate),
            ('header_extend', 2, self._header_extend),
            ('header_splice', 4, self._header_splice),
            ('header_garbage', 3, self._header_garbage),
            ('header_oversize', 0.5, self._header_oversize),
            ('extra_frames', 3, self._extra_frames),
            ('empty_frames', 3, self._empty_frames),
            ('drop_frame', 2, self._drop_frame),
            ('swap_frames', 1.5, self._swap_frames),
            ('split_frame', 1.5, self._split_frame),
            ('message_oversize', 0.3, self._message_oversize),
        ]
        if frame_oversize:
            frame_mutations.append(('frame_oversize', 0.1, self._frame_oversize))
        return frame_mutations

    @property
    def kinds(self) -> list[str]:
        """Return the names of every mutation this fuzzer applies."""
        return ['valid', *self._mutation_names]

    def seed_frames(self, name: str) -> list[bytes]:
        """Return the frames of the valid seed message ``name``."""
        return list(self._seed_frames[name])

    def cases(self, count: int) -> Iterator[FuzzCase]:
        """Yield ``count`` cases."""
        for _ in range(count):
            yield self.next_case()

    def next_case(self) -> FuzzCase:
        """Return the next fuzzed message."""
        rng = self.random
        seed = rng.choices(list(SEED_WEIGHTS), list(SEED_WEIGHTS.values()))[0]
        if rng.random() < VALID_FRACTION:
            return FuzzCase(seed, ('valid',), self.seed_frames(seed))
        message = self.seeds[seed]
        draft = _Draft(
            header={
                'v': protocol.PROTOCOL_VERSION,
                't': message.type,
                'id': message.request_id,
                'f': copy.deepcopy(message.fields),
                'x': [
                    [name, _WIRE_NAMES[tensor.dtype], list(tensor.shape)]
                    for name, tensor in message.tensors.items()
                ],
            },
            buffers=list(self._seed_frames[seed][1:]),
        )
        wanted = 1 + (rng.random() < 0.3) + (rng.random() < 0.1)
        kinds: list[str] = []
        frame_steps = []
        for _ in range(wanted * 8):
            if len(kinds) == wanted:
                break
            name = rng.choices(self._mutation_names, self._mutation_weights)[0]
            if name in self._draft_mutations:
                if self._draft_mutations[name](draft, seed):
                    kinds.append(name)
            else:
                kinds.append(name)
                frame_steps.append(self._frame_mutations[name])
        frames = [self._pack(draft), *draft.buffers]
        for step in frame_steps:
            frames = step(frames or [b''])
        frames = frames or [b'']
        return FuzzCase(seed, tuple(kinds) or ('valid',), frames)

    # -- values ------------------------------------------------------------------------

    def _pack(self, draft: _Draft) -> bytes:
        packed = msgpack.packb(draft.header, use_bin_type=True)
        for placeholder, raw in draft.raw.items():
            packed = packed.replace(msgpack.packb(placeholder), raw, 1)
        return packed

    def _odd_value(self, avoid: Any = None) -> Any:
        """Return a msgpack-able value, preferably not of ``avoid``'s type."""
        rng = self.random
        kinds = ['list', 'map', 'str', 'huge', 'negative', 'float', 'none', 'bool', 'nested']
        kinds += ['bin', 'int_key_map', 'small_int']
        for _ in range(4):
            kind = rng.choice(kinds)
            value = self._value_of(kind)
            if type(value) is not type(avoid):
                return value
        return value

    def _value_of(self, kind: str) -> Any:
        rng = self.random
        if kind == 'list':
            return rng.choice([[], [1], ['call'], ['float32'], [[1, 2]], [None] * 3])
        if kind == 'map':
            return rng.choice([{}, {'a': 1}, {'v': 1}, {'model': 'tiny_cnn'}, {'': None}])
        if kind == 'str':
            return rng.choice([*_STRINGS, 'x' * 4096, 'x' * 4097, '\x00', 'x' * 300])
        if kind == 'huge':
            return rng.choice([2**31, 2**32, 2**39, 2**40, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1])
        if kind == 'negative':
            return rng.choice([-1, -2, -(2**31), -(2**63)])
        if kind == 'float':
            return rng.choice([0.0, -0.0, 1.0, 1.5, math.nan, math.inf, -math.inf, 1e308, 5e-324])
        if kind == 'none':
            return None
        if kind == 'bool':
            return rng.choice([True, False])
        if kind == 'nested':
            return rng.choice([[[['x']]], {'a': {'b': [1, {'c': None}]}}, [{}, [], [[{}]]]])
        if kind == 'bin':
            return rng.choice([b'', b'\x00', b'float32', bytes(64)])
        if kind == 'int_key_map':
            return rng.choice([{1: 2}, {None: 1}, {1.5: 'x'}])
        return rng.choice([0, 1, 2, 3, 7, 255, 256])

    def _deep_value(self, draft: _Draft, depth: int) -> Any:
        """Return a list or map nested ``depth`` deep (spliced in raw past the packer)."""
        rng = self.random
        opener = rng.choice([b'\x91', b'\x81\xa1a'])  # [x] or {'a': x}
        leaf = rng.choice([b'\x01', b'\xc0', b'\xa4call'])
        if depth < 400:
            return msgpack.unpackb(opener * depth + leaf, strict_map_key=False)
        self._placeholders += 1
        placeholder = f'\x00raw{self._placeholders}\x00'
        draft.raw[placeholder] = opener * depth + leaf
        return placeholder

    # -- header mutations -----------------------------------------------------------------

    def _paths(self, value: Any, depth: int = 0) -> list[tuple[Any, Any]]:
        """Return (container, key) of every value inside ``value``, 5 levels deep."""
        paths: list[tuple[Any, Any]] = []
        if depth > 4:
            return paths
        items = value.items() if isinstance(value, dict) else enumerate(value)
        if not isinstance(value, dict | list):
            return paths
        for key, item in items:
            paths.append((value, key))
            if isinstance(item, dict | list):
                paths.extend(self._paths(item, depth + 1))
        return paths

    def _field_type(self, draft: _Draft, seed: str) -> bool:
        paths = self._paths(draft.header)
        if not paths:
            return False
        container, key = self.random.choice(paths)
        container[key] = self._odd_value(avoid=container[key])
        return True

    def _drop_key(self, draft: _Draft, seed: str) -> bool:
        paths = [(c, k) for c, k in self._paths(draft.header) if isinstance(c, dict)]
        if not paths:
            return False
        container, key = self.random.choice(paths)
        del container[key]
        return True

    def _add_key(self, draft: _Draft, seed: str) -> bool:
        maps = [draft.header] if isinstance(draft.header, dict) else []
        maps += [c[k] for c, k in self._paths(draft.header) if isinstance(c[k], dict)]
        if not maps:
            return False
        target = self.random.choice(maps)
        rng = self.random
        key = rng.choice([*_NAMES, 'zz', '', 'x' * 100])
        target[key] = self._odd_value() if rng.random() < 0.7 else self._value_of('small_int')
        return True

    def _set_header(self, draft: _Draft, key: str, value: Any) -> bool:
        if not isinstance(draft.header, dict):
            return False
        if value is _MISSING:
            draft.header.pop(key, None)
        else:
            draft.header[key] = value
        return True

    def _version(self, draft: _Draft, seed: str) -> bool:
        value = self.random.choice(
            [0, 2, -1, 255, 2**64 - 1, 1.0, True, '1', [1], {'v': 1}, None, _MISSING]
        )
        return self._set_header(draft, 'v', value)

    def _msg_type(self, draft: _Draft, seed: str) -> bool:
        rng = self.random
        value = rng.choice(
            [
                *sorted(protocol.MESSAGE_TYPES),
                'CALL',
                'launch',
                '',
                'call\x00',
                ['call'],
                {'call': 1},
                1,
                None,
                True,
                _MISSING,
            ]
        )
        return self._set_header(draft, 't', value)

    def _request_id(self, draft: _Draft, seed: str) -> bool:
        value = self.random.choice(
            [-1, 0, 2**63, 2**64 - 1, -(2**63), 1.5, '7', None, True, [7], {'id': 7}, _MISSING]
        )
        return self._set_header(draft, 'id', value)

    def _fields_limits(self, draft: _Draft, seed: str) -> bool:
        rng = self.random
        choice = rng.randrange(7)
        if choice == 0:  # nested to the limit, or one past it
            value: Any = 1
            for _ in range(rng.choice([3, 4, 5])):
                value = {'a': value}
        elif choice == 1:
            value = {f'k{index}': index for index in range(rng.choice([63, 64, 65]))}
        elif choice == 2:
            value = {'list': list(range(rng.choice([64, 65, 256])))}
        elif choice == 3:
            value = {'text': 'x' * rng.choice([4096, 4097])}
        elif choice == 4:
            value = {1: 'int key'}
        elif choice == 5:
            value = {'b': b'bytes'}
        else:
            value = rng.choice([[], 'fields', None, 1, [{'mode': 'nnto'}], _MISSING])
        if isinstance(value, dict) and draft.fields() is not None and rng.random() < 0.5:
            draft.fields().update(value)
            return True
        return self._set_header(draft, 'f', value)

    def _deep_nesting(self, draft: _Draft, seed: str) -> bool:
        paths = self._paths(draft.header)
        if not paths:
            return False
        container, key = self.random.choice(paths)
        container[key] = self._deep_value(draft, self.random.choice([6, 100, 390, 999, 1030]))
        return True

    def _pick_entry(self, draft: _Draft) -> tuple[list, int] | None:
        table = draft.table()
        if not table:
            return None
        index = self.random.randrange(len(table))
        if not isinstance(table[index], list) or len(table[index]) != 3:
            return None
        return table, index

    def _dtype(self, draft: _Draft, seed: str) -> bool:
        picked = self._pick_entry(draft)
        if picked is None:
            return False
        table, index = picked
        rng = self.random
        table[index][1] = rng.choice(
            [
                *_DTYPE_NAMES,
                *_BAD_DTYPES,
                ['float32'],
                {'float32': 1},
                {'dtype': 'float32'},
                None,
                4,
                True,
                1.5,
            ]
        )
        return True

    def _shape(self, draft: _Draft, seed: str) -> bool:
        picked = self._pick_entry(draft)
        if picked is None:
            return False
        table, index = picked
        rng = self.random
        big = 2**39
        old = table[index][2] if isinstance(table[index][2], list) else []
        numel = math.prod(old) if all(isinstance(d, int) for d in old) else 1
        numel = numel if 0 <= numel < 2**40 else 1
        shapes = [
            [],
            [0],
            [big] * 3,
            [0, big, big, big],
            [big, 0, big],
            [0, 2**20, 2**20],
            [0] * 8,
            [0] * 9,
            [-1],
            [1, -3, 64, 64],
            [2**40],
            [2**40 - 1],
            [2**63],
            [2**64 - 1],
            [1.0, 3, 64, 64],
            ['1', 3],
            [None],
            [[1]],
            [True, 3, 64, 64],
            [1] * 9,
            [1] * 64,
            [numel],  # same element count, other rank: the decoder accepts these
            [1, 1, numel],
            [*old[::-1]],
            [2**20, 2**20],
            'shape',
            None,
            {'0': 1},
            [
                rng.choice([0, 1, 2, 3, 7, 64, 2**31, 2**32, 2**62])
                for _ in range(rng.randrange(11))
            ],
        ]
        table[index][2] = rng.choice(shapes)
        return True

    def _table(self, draft: _Draft, seed: str) -> bool:
        rng = self.random
        table = draft.table()
        if table is None:
            return False
        choice = rng.randrange(12)
        if choice == 0:  # an entry without a buffer
            table.append(['extra', 'uint8', [4]])
        elif choice == 1:  # a buffer without an entry
            draft.buffers.append(b'\x00' * rng.choice([0, 4, 64]))
        elif choice == 2 and table:  # an entry dropped, its buffer kept
            table.pop(rng.randrange(len(table)))
        elif choice == 3 and draft.buffers:  # a buffer dropped, its entry kept
            draft.buffers.pop(rng.randrange(len(draft.buffers)))
        elif choice == 4 and table and draft.buffers:  # the same name twice
            table.append(copy.deepcopy(table[0]))
            draft.buffers.append(draft.buffers[0])
        elif choice == 5 and table and isinstance(table[0], list):  # wrong arity
            table[0] = rng.choice([table[0][:2], [*table[0], 1], [], table[0][:1]])
        elif choice == 6 and table:  # an entry that is not a list
            table[0] = rng.choice(['image', {'name': 'image'}, None, 3])
        elif choice == 7:  # a table that is not a list
            draft.header['x'] = rng.choice([{}, 'x', None, 5, {'image': ['float32', [1]]}])
        elif choice == 8:  # more entries than msgpack lets through
            draft.header['x'] = [[f't{i}', 'uint8', [1]] for i in range(257)]
            draft.buffers = [b'\x00'] * 257
        elif choice == 9:  # the most tensors allowed, all empty
            draft.header['x'] = [[f't{i}', 'uint8', [0]] for i in range(protocol.MAX_TENSORS)]
            draft.buffers = [b''] * protocol.MAX_TENSORS
        elif choice == 10:  # zero-size tensors whose declared shapes add up past the limit
            count = rng.choice([2, 16, 64])
            dim = max(1, self.max_message_bytes // count // 2)
            draft.header['x'] = [[f't{i}', 'uint8', [0, dim, 4]] for i in range(count)]
            draft.buffers = [b''] * count
        else:  # tensors in the table of a message that has none
            table.append(['x', 'float32', [2]])
            draft.buffers.append(bytes(8))
        return True

    def _tensor_name(self, draft: _Draft, seed: str) -> bool:
        picked = self._pick_entry(draft)
        if picked is None:
            return False
        table, index = picked
        table[index][0] = self.random.choice(
            ['', 'x' * 256, 'x' * 257, 1, None, ['image'], 'IMAGE', 'image\x00', 'img', 'features']
        )
        return True

    def _args(self, draft: _Draft, seed: str) -> bool:
        fields = draft.fields()
        if seed != 'call' or fields is None:
            return False
        rng = self.random
        args = fields.get('args')
        choice = rng.randrange(9)
        if choice == 0:
            fields['args'] = rng.choice([[], ['tiny_cnn'], 'tiny_cnn', None, 1])
        elif choice in (1, 2) and isinstance(args, dict):
            args['model'] = rng.choice(
                [
                    ['tiny_cnn'],
                    {'name': 'tiny_cnn'},
                    1,
                    None,
                    '',
                    'resnet18',  # registered, not loaded on the server
                    'no_such_model',
                    'x' * 4096,
                    'tiny_cnn\x00',
                    'TINY_CNN',
                    True,
                ]
            )
        elif choice == 3 and isinstance(args, dict):
            args.pop('model', None)
            if rng.random() < 0.5:
                args['models'] = 'tiny_cnn'
        elif choice == 4:
            fields['mode'] = rng.choice(['rrto', 'NNTO', '', ['nnto'], None, 3, {'nnto': 1}])
        elif choice == 5:
            fields['op'] = rng.choice(['train', '', 'INFER', ['infer'], None, 0])
        elif choice == 6:
            key = rng.choice(['mode', 'op', 'args'])
            fields.pop(key, None)
        elif choice == 7 and isinstance(args, dict):
            args[rng.choice(['extra', 'image', 'batch', ''])] = self._odd_value()
        else:
            self._remove_tensor(draft, 'image')
        return True

    def _remove_tensor(self, draft: _Draft, name: str) -> None:
        table = draft.table()
        if table is None:
            return
        for index, entry in enumerate(table):
            if isinstance(entry, list) and entry and entry[0] == name:
                del table[index]
                if index < len(draft.buffers):
                    del draft.buffers[index]
                return

    def _put_tensor(self, draft: _Draft, name: str, tensor: torch.Tensor) -> None:
        """Put ``tensor`` in the table and buffers, consistently (the decoder accepts it)."""
        table = draft.table()
        if table is None:
            return
        entry = [name, _WIRE_NAMES[tensor.dtype], list(tensor.shape)]
        for index, old in enumerate(table):
            if isinstance(old, list) and old and old[0] == name and index < len(draft.buffers):
                table[index] = entry
                draft.buffers[index] = _tensor_bytes(tensor)
                return
        table.append(entry)
        draft.buffers.insert(len(table) - 1, _tensor_bytes(tensor))

    def _image(self, draft: _Draft, seed: str) -> bool:
        if seed != 'call' or draft.table() is None:
            return False
        rng = self.random
        image = self.image
        budget = int(self.max_message_bytes * 0.8)
        choice = rng.randrange(8)
        if choice == 0:  # same shape, another dtype
            dtype = rng.choice(
                [
                    torch.float64,
                    torch.float16,
                    torch.bfloat16,
                    torch.uint8,
                    torch.int64,
                    torch.bool,
                ]
            )
            image = (image * 255).to(dtype) if not dtype.is_floating_point else image.to(dtype)
        elif choice == 1:  # another rank
            image = image.reshape(
                rng.choice([(3, 64, 64), (1, 1, 3, 64, 64), (12288,), (1, 3, 4096), (64, 64, 3)])
            )
            if rng.random() < 0.2:
                image = image.reshape(-1)[0]  # a scalar
        elif choice == 2:  # large spatial size within the byte limit
            itemsize = rng.choice([1, 4])
            side = int(math.sqrt(budget / 3 / itemsize))
            shape = rng.choice([(1, 3, side, side), (1, 3, 1, budget // 3 // itemsize)])
            dtype = torch.uint8 if itemsize == 1 else torch.float32
            image = torch.ones(shape, dtype=dtype)
        elif choice == 3:  # small, empty or degenerate sizes
            shape = rng.choice(
                [(1, 3, 32, 32), (1, 3, 1, 1), (1, 3, 0, 0), (0, 3, 64, 64), (1, 0, 64, 64)]
            )
            image = torch.zeros(shape)
        elif choice == 4:  # batches: valid ones, and one past max_batch_per_call
            batch = rng.choice([2, 4, min(16, budget // image.numel() // 4), 33])
            if batch * image.numel() * 4 > budget:
                image = torch.zeros(batch, 3, 4, 4)
            else:
                image = image.expand(batch, -1, -1, -1).contiguous()
        elif choice == 5:  # valid shape, hostile values
            image = image.clone()
            image.view(-1)[: rng.randrange(1, 64)] = rng.choice(
                [math.nan, math.inf, -math.inf, 3e38, 1e-45]
            )
        elif choice == 6:  # a second input beside the image
            self._put_tensor(draft, rng.choice(['extra', 'mask']), torch.zeros(1, 3))
            return True
        else:  # a non-contiguous source (encode makes it contiguous)
            image = image.transpose(2, 3)
        self._put_tensor(draft, 'image', image)
        return True

    def _hello_fields(self, draft: _Draft, seed: str) -> bool:
        fields = draft.fields()
        if seed != 'hello' or fields is None:
            return False
        rng = self.random
        key = rng.choice(['client_name', 'pid', 'instance'])
        value = rng.choice(
            [
                ['fuzzer'],
                {'name': 'x'},
                1,
                -1,
                2**64 - 1,
                None,
                True,
                '',
                'x' * 4096,
                '\x00',
                'robot\nnewline',
                1.5,
                _MISSING,
            ]
        )
        if value is _MISSING:
            fields.pop(key, None)
        else:
            fields[key] = value
        return True

    # -- buffer mutations -----------------------------------------------------------------

    def _buffer_truncate(self, draft: _Draft, seed: str) -> bool:
        candidates = [index for index, buffer in enumerate(draft.buffers) if buffer]
        if not candidates:
            return False
        index = self.random.choice(candidates)
        buffer = draft.buffers[index]
        draft.buffers[index] = buffer[: self.random.randrange(len(buffer))]
        return True

    def _buffer_extend(self, draft: _Draft, seed: str) -> bool:
        if not draft.buffers:
            return False
        rng = self.random
        index = rng.randrange(len(draft.buffers))
        buffer = draft.buffers[index]
        if rng.random() < 0.2 and 2 * len(buffer) < self.max_message_bytes:
            draft.buffers[index] = buffer * 2
        else:
            draft.buffers[index] = buffer + rng.randbytes(rng.choice([1, 2, 3, 4, 7, 64]))
        return True

    def _buffer_flip(self, draft: _Draft, seed: str) -> bool:
        candidates = [index for index, buffer in enumerate(draft.buffers) if buffer]
        if not candidates:
            return False
        rng = self.random
        index = rng.choice(candidates)
        data = bytearray(draft.buffers[index])
        for _ in range(rng.randrange(1, 17)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        draft.buffers[index] = bytes(data)
        return True

    def _bool_bytes(self, draft: _Draft, seed: str) -> bool:
        picked = self._pick_entry(draft)
        if picked is None or picked[1] >= len(draft.buffers):
            return False
        table, index = picked
        shape = table[index][2]
        if not (isinstance(shape, list) and all(isinstance(d, int) for d in shape)):
            return False
        count = math.prod(shape)
        if not 0 <= count <= 65536:
            return False
        table[index][1] = 'bool'
        values = [0, 1] if self.random.random() < 0.4 else [0, 1, 2, 255]
        draft.buffers[index] = bytes(self.random.choices(values, k=count))
        return True

    # -- frame mutations ------------------------------------------------------------------

    def _header_bitflip(self, frames: list[bytes]) -> list[bytes]:
        rng = self.random
        data = bytearray(frames[0])
        if not data:
            return frames
        for _ in range(rng.choice([1, 1, 2, 4, 8])):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return [bytes(data), *frames[1:]]

    def _header_truncate(self, frames: list[bytes]) -> list[bytes]:
        header = frames[0]
        return [header[: self.random.randrange(len(header) + 1)], *frames[1:]]

    def _header_extend(self, frames: list[bytes]) -> list[bytes]:
        rng = self.random
        tail = rng.choice([rng.randbytes(rng.randrange(1, 17)), frames[0], b'\xc0', b'\x00'])
        return [frames[0] + tail, *frames[1:]]

    def _header_splice(self, frames: list[bytes]) -> list[bytes]:
        rng = self.random
        header = frames[0]
        at = rng.randrange(len(header) + 1)
        token = rng.choice(
            [
                b'\xc1',  # never used
                b'\xd4\x01\x00',  # fixext 1
                b'\xc7\x00\x05',  # ext 8, empty
                b'\xd6\xff\x00\x00\x00\x00',  # timestamp 32
                b'\xd7\xff' + b'\xff' * 8,  # timestamp 64, out of range
                b'\xc4\x01x',  # bin 8
                b'\xdd\xff\xff\xff\xff',  # array 32 of 2**32-1 items
                b'\xdf\xff\xff\xff\xff',  # map 32 of 2**32-1 pairs
                b'\xdb\xff\xff\xff\xff',  # str 32 of 2**32-1 bytes
                b'\xcf' + b'\xff' * 8,  # uint 64
                b'\xd3\x80' + b'\x00' * 7,  # int 64 minimum
                b'\xcb\x7f\xf8' + b'\x00' * 6,  # float 64 NaN
                b'\xa2\xff\xfe',  # str of invalid UTF-8
                b'\x91' * 64,  # arrays opened, never closed
            ]
        )
        if rng.random() < 0.5 and at < len(header):  # overwrite instead of insert
            return [header[:at] + token + header[at + len(token) :], *frames[1:]]
        return [header[:at] + token + header[at:], *frames[1:]]

    def _header_garbage(self, frames: list[bytes]) -> list[bytes]:
        rng = self.random
        header = rng.choice(
            [
                b'',
                rng.randbytes(rng.randrange(1, 65)),
                msgpack.packb([1, 2]),
                msgpack.packb(1),
                msgpack.packb('hello'),
                msgpack.packb(None),
                msgpack.packb({}),
                msgpack.packb({'v': 1}),
                b'\x80',  # empty map: no version
                json.dumps({'v': 1, 't': 'ping', 'id': 1}).encode(),
            ]
        )
        return [header, *frames[1:]]

    def _header_oversize(self, frames: list[bytes]) -> list[bytes]:
        rng = self.random
        target = protocol.MAX_HEADER_BYTES + rng.choice([-1, 0, 1, 64])
        header = {'v': 1, 't': 'ping', 'id': 1, 'f': {}, 'x': [], 'pad': []}
        while len(msgpack.packb(header)) < target - 4100:
            header['pad'].append('p' * 4000)
        packed = msgpack.packb(header)
        header['pad'].append('p' * max(0, target - len(packed) - 3))
        return [msgpack.packb(header), *frames[1:]]

    def _extra_frames(self, frames: list[bytes]) -> list[bytes]:
        rng = self.random
        extra = [
            rng.choice([rng.randbytes(rng.randrange(65)), frames[0], b'\x00' * 4])
            for _ in range(rng.randrange(1, 4))
        ]
        return [*frames, *extra]

    def _empty_frames(self, frames: list[bytes]) -> list[bytes]:
        rng = self.random
        frames = list(frames)
        if rng.random() < 0.3:
            frames[0] = b''
            return frames
        for _ in range(rng.randrange(1, 4)):
            frames.insert(rng.randrange(len(frames) + 1), b'')
        return frames

    def _drop_frame(self, frames: list[bytes]) -> list[bytes]:
        frames = list(frames)
        del frames[self.random.randrange(len(frames))]
        return frames

    def _swap_frames(self, frames: list[bytes]) -> list[bytes]:
        if len(frames) < 2:
            return [b'', frames[0]]
        frames = list(frames)
        a, b = self.random.sample(range(len(frames)), 2)
        frames[a], frames[b] = frames[b], frames[a]
        return frames

    def _split_frame(self, frames: list[bytes]) -> list[bytes]:
        rng = self.random
        index = rng.randrange(len(frames))
        frame = frames[index]
        at = rng.randrange(len(frame) + 1)
        return [*frames[:index], frame[:at], frame[at:], *frames[index + 1 :]]

    def _message_oversize(self, frames: list[bytes]) -> list[bytes]:
        part = bytes(self.max_message_bytes // 2 + 1)
        return [*frames, part, part]

    def _frame_oversize(self, frames: list[bytes]) -> list[bytes]:
        return [*frames, bytes(self.max_message_bytes + self.random.choice([1, 1024]))]


# -- harness --------------------------------------------------------------------------


def process_resources(pid: int) -> tuple[int, int]:
    """Return (resident memory bytes, open file descriptors) of process ``pid``."""
    return resident_memory_bytes(pid), len(os.listdir(f'/proc/{pid}/fd'))


class FuzzSender:
    """An authenticated robot's DEALER that sends fuzzed messages and drains the answers.

    ``send`` raises ``zmq.Again`` when the server has not taken a message for
    ``send_timeout_s``: a server that stopped reading fails a run, never hangs it.
    """

    def __init__(
        self,
        endpoint: str,
        secret_key_file: Path,
        server_public_key_file: Path,
        *,
        send_timeout_s: float = 10.0,
    ) -> None:
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.DEALER)
        self.socket.linger = 0
        self.socket.sndtimeo = int(send_timeout_s * 1000)
        own = load_secret_key_pair(secret_key_file)
        self.socket.curve_secretkey = own.secret
        self.socket.curve_publickey = own.public
        self.socket.curve_serverkey = load_public_key(server_public_key_file)
        self.socket.connect(endpoint)
        self.answers = 0
        self.codes: collections.Counter[str] = collections.Counter()
        self.unexpected: list[str] = []

    def send(self, frames: list[bytes]) -> None:
        """Send one message (its frames)."""
        self.socket.send_multipart(frames, copy=len(frames[0]) < 65536 if frames else True)

    def drain(self, wait_s: float = 0.0) -> int:
        """Receive every answer waiting (the first within ``wait_s``); return how many."""
        count = 0
        timeout_ms = int(wait_s * 1000)
        while self.socket.poll(timeout_ms):
            self._classify(self.socket.recv_multipart())
            count += 1
            timeout_ms = 0
        self.answers += count
        return count

    def _classify(self, frames: list[bytes]) -> None:
        """Count an answer by type and error code; keep the server's unexpected failures."""
        try:
            answer = protocol.decode(frames)
        except protocol.ProtocolError as error:
            self.codes[f'undecodable answer: {error.code}'] += 1
            self.unexpected.append(f'undecodable answer: {error}')
            return
        if answer.type != protocol.ERROR:
            self.codes[answer.type] += 1
            return
        code = answer.fields.get('code')
        text = answer.fields.get('message')
        self.codes[f'error {code}'] += 1
        # The server's safety nets: an exception nothing expected (see server._on_message).
        if code == protocol.E_INTERNAL or (
            isinstance(text, str) and text.startswith(UNEXPECTED_FAILURE_PREFIX)
        ):
            self.unexpected.append(f'{code}: {text}')

    def settle(self, quiet_s: float = 0.3, limit_s: float = 10.0) -> None:
        """Drain until no answer came for ``quiet_s`` (at most ``limit_s``)."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline and self.drain(quiet_s):
            pass

    def close(self) -> None:
        """Close the socket and its context."""
        self.socket.close(linger=0)
        self.context.term()


@dataclass
class GoodClientStats:
    """What the well-behaved robot saw."""

    answers: int = 0
    mismatches: int = 0
    failures: list[str] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)


class GoodClient(threading.Thread):
    """A well-behaved robot: calls tiny_cnn on one fixed image in a loop, checks each answer.

    ``reference`` (or else the first answer) is what every answer must equal, bit for
    bit (``torch.equal``). Each call may take ``timeout_s``; a call that fails (timed
    out, refused, not connected) is recorded in ``stats.failures``, and
    ``consecutive_failures`` counts those since the last answer.
    """

    def __init__(
        self,
        endpoint: str,
        secret_key_file: Path,
        server_public_key_file: Path,
        *,
        period_s: float = 0.02,
        timeout_s: float = 10.0,
        reference: torch.Tensor | None = None,
    ) -> None:
        super().__init__(name='good-client', daemon=True)
        self.config = ClientConfig(
            endpoint=endpoint,
            client_name='good-robot',
            secret_key_file=str(secret_key_file),
            server_public_key_file=str(server_public_key_file),
            request_timeout_s=timeout_s,
        )
        self.period_s = period_s
        self.timeout_s = timeout_s
        self.inputs = {'image': good_image()}
        self.reference = reference
        self.stats = GoodClientStats()
        self.consecutive_failures = 0
        self.connected = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._started_at = time.monotonic()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop calling; wait for the thread."""
        self._stopping.set()
        self.join(timeout_s)

    def snapshot(self) -> GoodClientStats:
        """Return a copy of the stats so far."""
        with self._lock:
            return GoodClientStats(
                self.stats.answers,
                self.stats.mismatches,
                list(self.stats.failures),
                list(self.stats.latencies_s),
            )

    def run(self) -> None:
        """Call until stopped."""
        with EdgeClient(self.config) as client:
            if not client.wait_connected(30.0):
                self._fail(f'never connected: {client.state_reason}')
                self.connected.set()
                return
            self.connected.set()
            while not self._stopping.is_set():
                started = time.monotonic()
                try:
                    reply = client.call(
                        'nnto',
                        'infer',
                        {'model': 'tiny_cnn'},
                        self.inputs,
                        timeout_s=self.timeout_s,
                    )
                except OffloadError as error:
                    self._fail(
                        f'at {started - self._started_at:.1f} s: {type(error).__name__}: {error}'
                    )
                    self._stopping.wait(0.5)
                    continue
                elapsed = time.monotonic() - started
                features = reply.tensors.get('features')
                with self._lock:
                    if self.reference is None and features is not None:
                        self.reference = features
                    self.stats.answers += 1
                    self.stats.latencies_s.append(elapsed)
                    if features is None or not torch.equal(features, self.reference):
                        self.stats.mismatches += 1
                    self.consecutive_failures = 0
                self._stopping.wait(self.period_s)

    def _fail(self, why: str) -> None:
        with self._lock:
            self.stats.failures.append(why)
            self.consecutive_failures += 1


def percentile(samples: list[float], fraction: float) -> float:
    """Return the ``fraction`` quantile of ``samples`` (nearest rank); NaN if empty."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def good_image() -> torch.Tensor:
    """Return the good robot's fixed tiny_cnn input."""
    return torch.rand(IMAGE_SHAPE, generator=torch.Generator().manual_seed(7))


@dataclass
class ResourceSample:
    """A server's resident memory and open file descriptors after ``frames`` frames."""

    label: str
    frames: int
    rss_bytes: int
    fds: int


@dataclass
class FuzzRun:
    """What ``fuzz_server`` sent and saw."""

    frames_sent: int = 0
    by_kind: collections.Counter[str] = field(default_factory=collections.Counter)
    by_seed: collections.Counter[str] = field(default_factory=collections.Counter)
    hellos: int = 0
    answers: int = 0
    elapsed_s: float = 0.0
    samples: list[ResourceSample] = field(default_factory=list)
    failure: str | None = None
    recent: list[FuzzCase] = field(default_factory=list)


def fuzz_server(
    fuzzer: ProtocolFuzzer,
    sender: FuzzSender,
    process: Any,
    frames: int,
    *,
    warmup_frames: int = 0,
    hello_every: int = 16,
    sample_every: int = 0,
    good: GoodClient | None = None,
    stop_after_good_failures: int = 1,
    recent: int = 64,
    window: int = 32,
) -> FuzzRun:
    """Send ``frames`` fuzzed messages to the server ``process`` (a ``Popen``) and watch it.

    A valid HELLO goes first and every ``hello_every`` cases (not counted as frames), so
    the fuzzer's session is open most of the time and CALLs reach the modes. The server's
    resident memory and fds are sampled at the start, after ``warmup_frames`` (if > 0),
    every ``sample_every`` frames (if > 0) and at the end, each time once every answer has
    come. At most about ``window`` messages are unanswered at a time: a backlog would be
    lost whole when a mutation makes the server drop the connection. The run stops early,
    saying why in ``failure``, when the process exits, when it takes no message for the
    sender's timeout, or when ``good`` has failed ``stop_after_good_failures`` calls in a
    row; ``recent`` keeps the last cases sent.
    """
    run = FuzzRun()
    ring: collections.deque[FuzzCase] = collections.deque(maxlen=recent)

    def sample(label: str) -> None:
        sender.settle()
        run.samples.append(ResourceSample(label, run.frames_sent, *process_resources(process.pid)))

    started = time.monotonic()
    sample('start')
    unanswered = 0  # messages sent whose answer has not come yet (an estimate)
    for index in range(frames):
        try:
            if index % hello_every == 0:
                sender.send(fuzzer.seed_frames('hello'))
                run.hellos += 1
            case = fuzzer.next_case()
            ring.append(case)
            sender.send(case.frames)
        except zmq.Again:
            run.failure = 'the server took no message for the send timeout'
            break
        run.frames_sent += 1
        run.by_seed[case.seed] += 1
        for kind in case.kinds:
            run.by_kind[kind] += 1
        unanswered += 1 + (index % hello_every == 0) - sender.drain()
        while unanswered > window:
            answered = sender.drain(0.2)
            # Nothing for 0.2 s: the rest will not be answered (BYE, a dropped connection).
            unanswered = unanswered - answered if answered else 0
        if index % 32 == 0 or index == frames - 1:
            if process.poll() is not None:
                run.failure = f'the server exited with status {process.returncode}'
                break
            if good is not None and good.consecutive_failures >= stop_after_good_failures:
                run.failure = f'good calls failed: {good.stats.failures[-3:]}'
                break
        if warmup_frames and run.frames_sent == warmup_frames:
            sample('after warm-up')
        elif sample_every and run.frames_sent % sample_every == 0 and index < frames - 1:
            sample(f'after {run.frames_sent}')
    if process.poll() is None:
        sample('end')
    elif run.failure is None:
        run.failure = f'the server exited with status {process.returncode}'
    run.elapsed_s = time.monotonic() - started
    run.answers = sender.answers
    run.recent = list(ring)
    return run
