# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The wire protocol encodes every dtype losslessly and rejects malformed frames by code."""

from __future__ import annotations

import math

import msgpack
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_offload import protocol
from edge_offload_testing.protocol_fuzz import KNOWN_CRASHERS, SEED_WEIGHTS, ProtocolFuzzer


@pytest.mark.parametrize('dtype', list(protocol.TORCH_DTYPES.values()))
def test_round_trip_every_dtype(dtype):
    tensor = (torch.arange(24) % 7).reshape(2, 3, 4).to(dtype)
    message = protocol.Message(
        protocol.CALL, 42, {'mode': 'nnto', 'args': {'model': 'm'}}, {'x': tensor}
    )
    decoded = protocol.decode(protocol.encode(message))
    assert decoded.type == protocol.CALL
    assert decoded.request_id == 42
    assert decoded.fields == {'mode': 'nnto', 'args': {'model': 'm'}}
    assert decoded.tensors['x'].dtype == dtype
    assert torch.equal(decoded.tensors['x'], tensor)


def test_round_trip_empty_scalar_and_strided_tensors():
    tensors = {
        'empty': torch.zeros(0, 3),
        'scalar': torch.tensor(3.5),
        'transposed': torch.arange(6.0).reshape(2, 3).t(),
    }
    decoded = protocol.decode(protocol.encode(protocol.Message(protocol.REPLY, 1, {}, tensors)))
    for name, tensor in tensors.items():
        assert torch.equal(decoded.tensors[name], tensor), name
    # Decoded tensors own writable memory.
    decoded.tensors['transposed'] += 1


def _header(**overrides):
    header = {'v': protocol.PROTOCOL_VERSION, 't': protocol.PING, 'id': 1, 'f': {}, 'x': []}
    header.update(overrides)
    return msgpack.packb(header)


@pytest.mark.parametrize(
    ('frames', 'code', 'text'),
    [
        ([], protocol.E_MALFORMED, 'empty'),
        ([b'\xc1'], protocol.E_MALFORMED, 'msgpack'),
        ([msgpack.packb([1, 2])], protocol.E_MALFORMED, 'map'),
        ([_header(v=99)], protocol.E_VERSION, 'version'),
        ([_header(t='launch')], protocol.E_MALFORMED, 'type'),
        ([_header(id=-1)], protocol.E_MALFORMED, 'request id'),
        ([_header(id='7')], protocol.E_MALFORMED, 'request id'),
        ([_header(f=[1])], protocol.E_MALFORMED, 'fields'),
        ([_header(x=[['a', 'float32', [2]]])], protocol.E_MALFORMED, '1 tensors but 0'),
        ([_header(x=[['a', 'complex', [1]]]), b'12345678'], protocol.E_MALFORMED, 'dtype'),
        ([_header(x=[['a', 'float32', [2]]]), b'123'], protocol.E_MALFORMED, '3 bytes'),
        ([_header(x=[['a', 'uint8', [-1]]]), b''], protocol.E_MALFORMED, 'dimension'),
        (
            [_header(x=[['a', 'uint8', [1]], ['a', 'uint8', [1]]]), b'1', b'2'],
            'malformed',
            'twice',
        ),
        ([_header(f={'a': {'b': {'c': {'d': {'e': {'f': 1}}}}}})], protocol.E_MALFORMED, 'nested'),
        ([b'\x00' * (protocol.MAX_HEADER_BYTES + 1)], protocol.E_TOO_LARGE, 'header'),
        ([msgpack.packb({'v': 1, 't': 'ping', 'id': 1, 'f': {1: 2}})], 'malformed', 'msgpack'),
        ([msgpack.ExtType(1, b'x') and msgpack.packb(msgpack.ExtType(1, b'x'))], 'malformed', ''),
    ],
)
def test_malformed_frames_raise_protocol_error(frames, code, text):
    with pytest.raises(protocol.ProtocolError) as raised:
        protocol.decode(frames)
    assert raised.value.code == code
    assert text in raised.value.message


def test_message_over_the_configured_limit_is_too_large():
    message = protocol.Message(protocol.CALL, 1, {}, {'x': torch.zeros(1024)})
    frames = protocol.encode(message)
    with pytest.raises(protocol.ProtocolError) as raised:
        protocol.decode(frames, max_message_bytes=4000)
    assert raised.value.code == protocol.E_TOO_LARGE
    assert protocol.decode(frames, max_message_bytes=5000).tensors['x'].numel() == 1024


def test_encode_refuses_unknown_types_and_dtypes():
    with pytest.raises(ValueError, match='message type'):
        protocol.encode(protocol.Message('launch'))
    with pytest.raises(ValueError, match='dtype'):
        protocol.encode(
            protocol.Message(protocol.CALL, 1, {}, {'z': torch.zeros(2, dtype=torch.complex32)})
        )


# -- issue 30: decode raises ProtocolError, and nothing else, whatever the frames hold ------


@pytest.mark.parametrize('name', sorted(KNOWN_CRASHERS))
def test_messages_that_crashed_the_decoder_are_protocol_errors(name):
    frames, code = KNOWN_CRASHERS[name]
    with pytest.raises(protocol.ProtocolError) as raised:
        protocol.decode(frames)
    assert raised.value.code == code
    assert len(raised.value.message) < 300  # no repr of a received container


@pytest.mark.parametrize(
    ('header', 'code', 'text'),
    [
        ({'v': '1'}, protocol.E_MALFORMED, 'not an integer'),
        ({'v': 1.0}, protocol.E_MALFORMED, 'not an integer'),
        ({'v': [1]}, protocol.E_MALFORMED, 'not an integer'),
        ({'v': None}, protocol.E_MALFORMED, 'not an integer'),
        ({'v': 2**64 - 1}, protocol.E_VERSION, 'not supported'),
        ({'t': {'ping': 1}}, protocol.E_MALFORMED, 'not a string'),
        ({'t': None}, protocol.E_MALFORMED, 'not a string'),
        ({'id': True}, protocol.E_MALFORMED, 'request id'),
        ({'id': 2**64 - 1, 'x': [[['a'], 'uint8', [1]]]}, protocol.E_MALFORMED, 'name'),
        ({'x': [['a', None, [1]]]}, protocol.E_MALFORMED, 'not a string'),
        ({'x': [['a', 'uint8', [True]]]}, protocol.E_MALFORMED, 'dimension'),
        ({'x': [['a', 'uint8', [1.0]]]}, protocol.E_MALFORMED, 'dimension'),
        ({'x': [['a', 'uint8', [2**40]]]}, protocol.E_MALFORMED, 'dimension'),
        ({'x': [['a', 'uint8', [1] * 9]]}, protocol.E_MALFORMED, 'shape'),
        ({'x': [['a', 'uint8', 'abc']]}, protocol.E_MALFORMED, 'shape'),
        ({'x': [['a', 'uint8', [2**20, 2**20]]]}, protocol.E_TOO_LARGE, 'limit'),
        ({'x': [['a', 'int64', [0, 2**23 + 1]]]}, protocol.E_TOO_LARGE, 'limit'),
        (
            {'f': {'k': 'x' * 300, 'n': {'m': {'o': {'p': {'q': 1}}}}}},
            protocol.E_MALFORMED,
            'deep',
        ),
    ],
)
def test_every_field_is_type_checked_before_use(header, code, text):
    frames = [_header(**header), *([b''] * len(header.get('x', [])))]
    with pytest.raises(protocol.ProtocolError) as raised:
        protocol.decode(frames)
    assert raised.value.code == code
    assert text in raised.value.message


def test_zero_size_shapes_decode_while_their_declared_extent_fits():
    limit = 1024 * 1024
    for shape in ([0], [0, 3], [5, 0, 7], [0, limit // 4]):
        frames = [_header(x=[['a', 'float32', shape]]), b'']
        assert protocol.decode(frames, max_message_bytes=limit).tensors['a'].shape == tuple(shape)
    # Zero dimensions count as one: all shapes together must fit the message limit.
    two = [_header(x=[['a', 'float32', [0, limit // 8]], ['b', 'float32', [limit // 8, 0]]])]
    assert protocol.decode([*two, b'', b''], max_message_bytes=limit).tensors['b'].numel() == 0
    three = [_header(x=[[name, 'float32', [0, limit // 8]] for name in 'abc'])]
    with pytest.raises(protocol.ProtocolError, match='limit') as raised:
        protocol.decode([*three, b'', b'', b''], max_message_bytes=limit)
    assert raised.value.code == protocol.E_TOO_LARGE


def test_bool_tensors_take_only_zero_and_one_bytes():
    frames = [_header(x=[['a', 'bool', [3]]]), b'\x00\x01\x01']
    assert protocol.decode(frames).tensors['a'].tolist() == [False, True, True]
    with pytest.raises(protocol.ProtocolError, match='bool'):
        protocol.decode([frames[0], b'\x00\x01\xff'])


def test_frames_may_be_any_byte_buffer_and_nothing_else():
    tensor = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    frames = protocol.encode(protocol.Message(protocol.REPLY, 5, {}, {'t': tensor}))
    header, data = bytes(frames[0]), bytes(frames[1])
    spread = bytearray(2 * len(data))
    spread[::2] = data
    buffers = (
        data,
        bytearray(data),
        memoryview(bytearray(data)).cast('f'),  # items of 4 bytes
        memoryview(data).cast('B', (3, 16)),  # two dimensions
        memoryview(spread)[::2],  # not contiguous: copied
    )
    for buffer in buffers:
        decoded = protocol.decode([memoryview(header), buffer])
        assert torch.equal(decoded.tensors['t'], tensor)
    for frames in ('text', header, None, 5, [header, 'text'], [header, None], [object()]):
        with pytest.raises(protocol.ProtocolError):
            protocol.decode(frames)


# Values the decoder's msgpack settings let through (str keys, no bin), of any shape.
wire_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=4), children, max_size=5)
    ),
    max_leaves=24,
)
# And values that msgpack packs but the decoder's settings refuse.
plain_values = (
    wire_values
    | st.binary(max_size=4)
    | st.dictionaries(st.integers(-2, 2) | st.none(), wire_values, min_size=1, max_size=2)
)
dims = st.integers(min_value=0, max_value=6) | st.sampled_from([2**31, 2**39, 2**40, 2**63, -1])


def _declared_bytes(dtype, shape):
    """Return the bytes a table entry declares, or None if it declares nothing sensible."""
    if not (isinstance(dtype, str) and dtype in protocol.TORCH_DTYPES):
        return None
    if not isinstance(shape, list) or not all(type(dim) is int and dim >= 0 for dim in shape):
        return None
    return math.prod(shape) * protocol.TORCH_DTYPES[dtype].itemsize


@st.composite
def tensor_tables(draw):
    """Return a tensor table of mostly well-formed entries, and buffers that may match it."""
    entries, buffers = [], []
    for _ in range(draw(st.integers(0, 3))):
        dtype = draw(st.sampled_from(sorted(protocol.TORCH_DTYPES)) | wire_values)
        shape = draw(st.lists(dims | wire_values, max_size=4) | wire_values)
        name = draw(st.sampled_from(['a', 'b', 'image']) | wire_values)
        entries.append(draw(st.sampled_from([[name, dtype, shape], [name, dtype], name])))
        size = _declared_bytes(dtype, shape)
        if size is None or size > 256 or draw(st.booleans()):
            size = draw(st.integers(0, 16))
        buffers.append(draw(st.binary(min_size=size, max_size=size)))
    if draw(st.booleans()):
        buffers = draw(st.lists(st.binary(max_size=16), max_size=4))
    return entries, buffers


@st.composite
def headers(draw):
    """Return a msgpack map with the protocol's keys, each value well-formed or arbitrary."""
    header = draw(st.dictionaries(st.text(max_size=3), wire_values, max_size=2))
    choices = {
        'v': st.sampled_from([protocol.PROTOCOL_VERSION] * 3 + [0, 2]) | wire_values,
        't': st.sampled_from(sorted(protocol.MESSAGE_TYPES)) | wire_values,
        'id': st.integers(min_value=-1, max_value=2**64 - 1) | wire_values,
        'f': st.dictionaries(st.text(max_size=6), wire_values, max_size=4) | wire_values,
    }
    for key, values in choices.items():
        if draw(st.integers(0, 9)):
            header[key] = draw(values)
    entries, buffers = draw(tensor_tables())
    if draw(st.integers(0, 5)):
        header['x'] = entries
    elif draw(st.booleans()):
        header['x'] = draw(wire_values)
    if not draw(st.integers(0, 9)):  # somewhere, a value msgpack packs but the decoder refuses
        header[draw(st.sampled_from(['f', 'x', 'zz']))] = draw(plain_values)
    return header, buffers


@st.composite
def arbitrary_frames(draw):
    """Return frames of every sort: raw bytes, msgpack headers with buffers, memoryviews."""
    kind = draw(st.integers(0, 5))
    if kind == 0:
        frames = draw(st.lists(st.binary(max_size=64), max_size=4))
    elif kind == 1:
        frames = [msgpack.packb(draw(plain_values), use_bin_type=True)]
        frames += draw(st.lists(st.binary(max_size=16), max_size=2))
    else:
        header, buffers = draw(headers())
        packed = msgpack.packb(header, use_bin_type=True)
        if kind == 5 and packed:  # a byte of the header changed, or the header cut short
            at = draw(st.integers(0, len(packed) - 1))
            changed = bytes([packed[at] ^ draw(st.integers(1, 255))])
            packed = draw(st.sampled_from([packed[:at], packed[:at] + changed + packed[at + 1 :]]))
        frames = [packed, *buffers]
    if draw(st.booleans()):
        frames = [memoryview(frame) for frame in frames]
    return frames


def _check_decoded_or_refused(frames, max_message_bytes=protocol.DEFAULT_MAX_MESSAGE_BYTES):
    try:
        message = protocol.decode(frames, max_message_bytes=max_message_bytes)
    except protocol.ProtocolError as error:
        refused = error
    else:
        refused = None
    if refused is not None:
        assert refused.code in protocol.ERROR_CODES
        assert isinstance(refused.message, str)
        return
    # What decode accepts is a valid message: it encodes and decodes to the same.
    assert message.type in protocol.MESSAGE_TYPES
    assert 0 <= message.request_id <= 2**64 - 1
    assert message.payload_bytes() <= max_message_bytes
    again = protocol.decode(protocol.encode(message), max_message_bytes=max_message_bytes)
    assert (again.type, again.request_id) == (message.type, message.request_id)
    assert again.fields.keys() == message.fields.keys()
    assert again.tensors.keys() == message.tensors.keys()
    for name, tensor in message.tensors.items():
        assert again.tensors[name].dtype == tensor.dtype
        assert again.tensors[name].shape == tensor.shape


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames=arbitrary_frames())
def test_decode_raises_only_protocol_error_for_arbitrary_frames(frames):
    _check_decoded_or_refused(frames)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_decode_raises_only_protocol_error_for_mutated_messages(seed):
    fuzzer = ProtocolFuzzer(seed, max_message_bytes=1024 * 1024)
    for case in fuzzer.cases(50):
        _check_decoded_or_refused(case.frames, max_message_bytes=1024 * 1024)


def test_the_fuzzer_is_deterministic_and_uses_every_mutation():
    first = list(ProtocolFuzzer(5).cases(3000))
    frames = [case.frames for case in first]
    assert frames == [case.frames for case in ProtocolFuzzer(5).cases(3000)]
    assert frames != [case.frames for case in ProtocolFuzzer(6).cases(3000)]
    assert {kind for case in first for kind in case.kinds} == set(ProtocolFuzzer(5).kinds)
    assert {case.seed for case in first} == set(SEED_WEIGHTS)
    # Some cases pass the decoder (they reach the server's modes), most do not.
    decoded = 0
    for case in first:
        try:
            protocol.decode(case.frames, max_message_bytes=1024 * 1024)
        except protocol.ProtocolError:
            continue
        decoded += 1
    assert 0.05 * len(first) < decoded < 0.5 * len(first)


def _is_plain(value):
    try:
        protocol._check_plain_value(value, 'value', depth=1)
    except protocol.ProtocolError:
        return False
    return True


plain_fields = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=12,
).filter(_is_plain)


@settings(max_examples=200, deadline=None)
@given(
    dtype=st.sampled_from(list(protocol.TORCH_DTYPES.values())),
    shape=st.lists(st.integers(min_value=0, max_value=5), max_size=4),
    fields=st.dictionaries(st.text(max_size=8), plain_fields, max_size=4),
    request_id=st.integers(min_value=0, max_value=2**64 - 1),
    message_type=st.sampled_from(sorted(protocol.MESSAGE_TYPES)),
)
def test_valid_messages_round_trip(dtype, shape, fields, request_id, message_type):
    tensor = (torch.arange(math.prod(shape)) % 3).reshape(shape).to(dtype)
    permuted = tensor.permute(tuple(reversed(range(tensor.dim()))))  # strided if 2+ dims
    message = protocol.Message(message_type, request_id, fields, {'t': tensor, 'u': permuted})
    decoded = protocol.decode(protocol.encode(message))
    assert (decoded.type, decoded.request_id) == (message_type, request_id)
    assert msgpack.packb(decoded.fields) == msgpack.packb(fields)
    assert torch.equal(decoded.tensors['t'], tensor)
    assert torch.equal(decoded.tensors['u'], permuted)
