# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The wire protocol encodes every dtype losslessly and rejects malformed frames by code."""

from __future__ import annotations

import msgpack
import pytest
import torch

from edge_offload import protocol


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
            protocol.Message(protocol.CALL, 1, {}, {'z': torch.zeros(2, dtype=torch.complex64)})
        )
