# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Fuzzed, malformed and truncated messages never crash, hang or grow the edge server.

The server runs headless in its own process (CURVE on loopback, a 1 MB message limit).
An authenticated robot (the strongest attacker short of a stolen server key: its frames
reach the protocol decoder and the modes) sends the structure-aware mutation fuzzer's
messages (``edge_offload_testing.protocol_fuzz``) while a well-behaved robot with another
key calls ``tiny_cnn`` beside it and must get the same answer, bit for bit, every time;
an unauthenticated peer writes raw bytes to the TCP port. The server must stay alive, keep
answering, never need its last-resort exception handler, and hold its resident memory
and file descriptors flat. ``benchmarks/server_fuzz.py`` is the long run.
"""

from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_offload import protocol
from edge_offload.client import ClientConfig, EdgeClient
from edge_offload_testing import authorize_robot, make_test_keys, start_headless_server
from edge_offload_testing.protocol_fuzz import (
    KNOWN_CRASHERS,
    FuzzSender,
    GoodClient,
    ProtocolFuzzer,
    fuzz_server,
    percentile,
)

MAX_MESSAGE_BYTES = 1024 * 1024
FUZZ_SEED = 30  # issue 30
FUZZ_FRAMES = 20_000  # about 15 s on two cores
# Resident memory may move this much after the warm-up: freed message buffers (up to
# 1 MB) stay in glibc's per-thread arenas and its raised mmap threshold, and torch caches
# per input shape. 13,333 frames after the warm-up: a leak of 640 bytes a message shows.
RSS_TOLERANCE_BYTES = 8 * 1024 * 1024


@pytest.fixture(scope='module')
def headless_server(tmp_path_factory):
    """Start ``edge_offload_server`` in its own process, with keys for two robots."""
    keys = make_test_keys(tmp_path_factory.mktemp('fuzz_keys'))
    fuzzer_secret = authorize_robot(keys, 'fuzzer')
    process, endpoint = start_headless_server(
        keys, ['tiny_cnn'], '--max-message-bytes', str(MAX_MESSAGE_BYTES)
    )
    yield SimpleNamespace(
        process=process, endpoint=endpoint, keys=keys, fuzzer_secret=fuzzer_secret
    )
    process.terminate()
    process.wait(timeout=10.0)


def _assert_serves(server) -> None:
    config = ClientConfig(
        endpoint=server.endpoint,
        secret_key_file=str(server.keys.robot_secret),
        server_public_key_file=str(server.keys.server_public),
    )
    with EdgeClient(config) as client:
        assert client.wait_connected(10.0), client.state_reason
        image = torch.rand(1, 3, 64, 64)
        reply = client.call('nnto', 'infer', {'model': 'tiny_cnn'}, {'image': image}, timeout_s=10)
        assert reply.tensors['features'].shape == (1, 16)


def _answer(sender: FuzzSender, frames: list[bytes]) -> protocol.Message:
    sender.send(frames)
    assert sender.socket.poll(10_000), 'no answer within 10 s'
    return protocol.decode(sender.socket.recv_multipart())


@pytest.mark.parametrize('name', sorted(KNOWN_CRASHERS))
def test_messages_that_crashed_the_server_are_answered(headless_server, name):
    frames, code = KNOWN_CRASHERS[name]
    sender = FuzzSender(
        headless_server.endpoint, headless_server.fuzzer_secret, headless_server.keys.server_public
    )
    try:
        hello = ProtocolFuzzer(0).seed_frames('hello')
        assert _answer(sender, hello).type == protocol.WELCOME
        answer = _answer(sender, frames)
    finally:
        sender.close()
    assert answer.type == protocol.ERROR
    assert answer.fields['code'] == code, answer.fields
    assert headless_server.process.poll() is None, 'the server died'
    _assert_serves(headless_server)


def test_mutation_fuzz_beside_a_good_robot(headless_server):
    server = headless_server
    good = GoodClient(
        server.endpoint, server.keys.robot_secret, server.keys.server_public, timeout_s=10.0
    )
    good.start()
    assert good.connected.wait(30.0)
    sender = FuzzSender(server.endpoint, server.fuzzer_secret, server.keys.server_public)
    try:
        run = fuzz_server(
            ProtocolFuzzer(FUZZ_SEED, max_message_bytes=MAX_MESSAGE_BYTES),
            sender,
            server.process,
            FUZZ_FRAMES,
            warmup_frames=FUZZ_FRAMES // 3,
            sample_every=FUZZ_FRAMES // 6,
            good=good,
        )
    finally:
        good.stop()
        sender.close()
    seen = good.snapshot()
    suspects = [case.kinds for case in run.recent[-8:]]
    assert run.failure is None, f'{run.failure}; last cases sent: {suspects}'
    assert server.process.poll() is None, 'the server died'
    assert run.frames_sent == FUZZ_FRAMES
    # Unanswered: BYEs, and what was in flight when a frame over the limit made the
    # server drop the connection (at most the fuzzer's window of 32 each time).
    assert run.answers > 0.8 * FUZZ_FRAMES, 'the server stopped answering'
    unexpected = sorted(set(sender.unexpected))
    assert not unexpected, f'the server caught exceptions it did not expect: {unexpected[:5]}'
    assert seen.failures == [], 'good calls failed'
    assert seen.mismatches == 0, 'a good call got a different answer'
    assert seen.answers >= 100
    assert percentile(seen.latencies_s, 0.99) < 2.0
    labels = [sample.label for sample in run.samples]
    after_warmup = run.samples[labels.index('after warm-up') :]
    warm = after_warmup[0]
    assert after_warmup[-1].label == 'end'
    for sample in after_warmup:
        # One connection may be between a drop and its reconnect at a sample.
        assert abs(sample.fds - warm.fds) <= 1, run.samples
        assert sample.rss_bytes - warm.rss_bytes < RSS_TOLERANCE_BYTES, run.samples
    _assert_serves(server)


@settings(max_examples=150, deadline=None, database=None)
@given(garbage=st.binary(min_size=1, max_size=4096))
def test_raw_bytes_from_an_unauthenticated_peer(headless_server, garbage):
    host, port = headless_server.endpoint.removeprefix('tcp://').rsplit(':', 1)
    with socket.create_connection((host, int(port)), timeout=5.0) as raw:
        try:
            raw.sendall(garbage)
        except OSError:
            pass  # the server may already have closed the connection: that is fine
    assert headless_server.process.poll() is None


def test_server_still_serves_after_raw_bytes(headless_server):
    _assert_serves(headless_server)
