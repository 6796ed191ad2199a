# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Random, malformed and truncated frames never crash, hang or grow the edge server.

The server runs headless in its own process. An authenticated robot (the strongest
attacker short of a stolen server key: its frames reach the protocol decoder) sends
hypothesis-generated messages; an unauthenticated peer writes raw bytes to the TCP
port. Afterwards the server must still answer a real request, and its resident memory
must not have grown beyond allocator noise.
"""

from __future__ import annotations

import socket
import time

import msgpack
import pytest
import torch
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_offload import protocol
from edge_offload.client import ClientConfig, EdgeClient
from edge_offload.keys import load_public_key, load_secret_key_pair
from edge_offload.testing import make_test_keys, resident_memory_bytes, start_headless_server

# Frames of a valid CALL, to truncate and corrupt.
_VALID = protocol.encode(
    protocol.Message(
        protocol.CALL,
        7,
        {'mode': 'nnto', 'op': 'infer', 'args': {'model': 'tiny_cnn'}},
        {'image': torch.rand(1, 3, 64, 64)},
    )
)
_VALID = [bytes(frame) for frame in _VALID]

plain_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
headers = st.fixed_dictionaries(
    {
        'v': st.sampled_from([protocol.PROTOCOL_VERSION, 0, 2, 'x']),
        't': st.sampled_from(sorted(protocol.MESSAGE_TYPES) + ['nope']),
        'id': st.integers(min_value=-5, max_value=2**64 - 1) | st.text(max_size=3),
        'f': plain_values,
        'x': st.lists(
            st.tuples(
                st.text(max_size=4),
                st.sampled_from(sorted(protocol.TORCH_DTYPES) + ['complex']),
                st.lists(st.integers(min_value=-2, max_value=70), max_size=4),
            ).map(list)
            | plain_values,
            max_size=3,
        ),
    }
)
random_messages = st.lists(st.binary(max_size=512), min_size=1, max_size=5)
structured_messages = st.tuples(
    headers.map(lambda header: msgpack.packb(header, use_bin_type=True)),
    st.lists(st.binary(max_size=256), max_size=3),
).map(lambda pair: [pair[0], *pair[1]])
truncated_messages = st.tuples(
    st.integers(min_value=0, max_value=len(_VALID) - 1),
    st.integers(min_value=0, max_value=len(_VALID[0]) + len(_VALID[1])),
    st.booleans(),
).map(
    lambda cut: [
        *(_VALID[: cut[0]]),
        _VALID[cut[0]][: cut[1]],
        *(_VALID[cut[0] + 1 :] if cut[2] else []),
    ]
)
fuzz_messages = st.one_of(random_messages, structured_messages, truncated_messages)


@pytest.fixture(scope='module')
def headless_server(tmp_path_factory):
    """Start ``edge_offload_server`` in its own process; yield (process, endpoint, keys)."""
    keys = make_test_keys(tmp_path_factory.mktemp('fuzz_keys'))
    process, endpoint = start_headless_server(
        keys, ['tiny_cnn'], '--max-message-bytes', str(1024 * 1024)
    )
    yield process, endpoint, keys
    process.terminate()
    process.wait(timeout=10.0)


def _fuzz_socket(endpoint: str, keys) -> tuple[zmq.Context, zmq.Socket]:
    context = zmq.Context()
    sock = context.socket(zmq.DEALER)
    sock.linger = 0
    sock.sndtimeo = 10_000  # a server that stopped reading fails the test, never hangs it
    own = load_secret_key_pair(keys.robot_secret)
    sock.curve_secretkey = own.secret
    sock.curve_publickey = own.public
    sock.curve_serverkey = load_public_key(keys.server_public)
    sock.connect(endpoint)
    return context, sock


def _assert_serves(endpoint: str, keys) -> None:
    config = ClientConfig(
        endpoint=endpoint,
        secret_key_file=str(keys.robot_secret),
        server_public_key_file=str(keys.server_public),
    )
    with EdgeClient(config) as client:
        assert client.wait_connected(10.0), client.state_reason
        image = torch.rand(1, 3, 64, 64)
        reply = client.call('nnto', 'infer', {'model': 'tiny_cnn'}, {'image': image}, timeout_s=10)
        assert reply.tensors['features'].shape == (1, 16)


def _drain(sock: zmq.Socket) -> int:
    answered = 0
    while sock.poll(0):
        sock.recv_multipart()
        answered += 1
    return answered


def test_random_and_truncated_frames(headless_server):
    process, endpoint, keys = headless_server
    context, sock = _fuzz_socket(endpoint, keys)
    answered = 0

    @settings(
        max_examples=1500,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(frames=fuzz_messages)
    def throw(frames):
        nonlocal answered
        sock.send_multipart(frames)
        answered += _drain(sock)

    try:
        # Warm-up: one real inference (torch's first run sets up its thread pool and caches:
        # about 20 MB that hypothesis may or may not reach in its own warm-up), then the
        # imports, allocator pools and hypothesis caches.
        _assert_serves(endpoint, keys)
        throw()
        rss_before = resident_memory_bytes(process.pid)
        for _ in range(2):
            throw()
        time.sleep(0.5)
        answered += _drain(sock)
        rss_after = resident_memory_bytes(process.pid)
    finally:
        sock.close()
        context.term()
    assert process.poll() is None, 'the server died'
    assert answered > 1000, 'the server stopped answering'
    _assert_serves(endpoint, keys)
    growth = rss_after - rss_before
    assert growth < 8 * 1024 * 1024, f'resident memory grew by {growth / 1e6:.1f} MB'


@settings(max_examples=150, deadline=None, database=None)
@given(garbage=st.binary(min_size=1, max_size=4096))
def test_raw_bytes_from_an_unauthenticated_peer(headless_server, garbage):
    process, endpoint, _ = headless_server
    host, port = endpoint.removeprefix('tcp://').rsplit(':', 1)
    with socket.create_connection((host, int(port)), timeout=5.0) as raw:
        try:
            raw.sendall(garbage)
        except OSError:
            pass  # the server may already have closed the connection: that is fine
    assert process.poll() is None


def test_server_still_serves_after_raw_bytes(headless_server):
    _, endpoint, keys = headless_server
    _assert_serves(endpoint, keys)
