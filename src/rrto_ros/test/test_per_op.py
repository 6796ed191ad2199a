# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Per-operator offloading: every aten op of an unmodified model runs in an OpExecutor.

The transport here calls the server's OpService in-process (what the edge server does
with a decoded message), so these tests pin the interception, handles, caching and host reads;
outputs must equal local inference bit for bit (same CPU kernels on both sides).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edge_offload.models import load_model
from rrto_ros import op_codec
from rrto_ros.executor import ExecutorError, OpExecutor
from rrto_ros.remote import RemoteSession, RemoteTensor
from rrto_ros.service import LoopbackTransport, OpService

torch.set_num_threads(1)


def _session() -> tuple[RemoteSession, OpExecutor]:
    service = OpService()
    return RemoteSession(LoopbackTransport(service)), service.executor


@pytest.mark.parametrize('name', ['resnet50', 'vgg19', 'kapao_s', 'blazepose_people'])
def test_per_op_equals_local_and_caches_parameters(name: str, model_inputs) -> None:
    model = load_model(name)
    inputs = model_inputs(name)
    expected = model(inputs)
    session, executor = _session()
    session.register_module(model.module)
    counts = []
    for _ in range(2):
        before = session.stats.copy()
        # Fresh input tensors every pass, as frames arrive.
        fresh = {k: v.clone() for k, v in inputs.items()}
        with session.active():
            outputs = model(fresh)
        got = {k: v.cpu() if isinstance(v, RemoteTensor) else v for k, v in outputs.items()}
        counts.append(session.stats.minus(before))
        for key, value in expected.items():
            assert torch.equal(got[key], value), f'{name}.{key} differs from local'
    first, second = counts
    assert second.ops > 10
    # One round trip per operator and per fetch (scalar results ride their op's reply).
    assert second.ops < second.calls <= second.ops + second.host_reads
    assert second.host_reads >= len(expected)
    # Parameters went up once: the second pass uploads only what changes per frame.
    assert second.uploads < first.uploads
    assert second.bytes_up < first.bytes_up / 2
    assert executor.ops_run >= first.ops + second.ops


def test_host_reads_and_control_flow() -> None:
    session, _ = _session()
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    with session.active():
        y = (x * 2).sum(dim=1)
        assert isinstance(y, RemoteTensor)
        before = session.stats.host_reads
        assert y[0].item() == 6.0  # .item() is a host read
        assert bool(y[1] > 20) is True  # data-dependent control flow reads too
        assert session.stats.host_reads == before + 2
    assert y.tolist() == [6.0, 24.0]
    np.testing.assert_array_equal(np.asarray(y), [6.0, 24.0])
    assert y.cpu().dtype == torch.float32
    assert repr(y) == repr(torch.tensor([6.0, 24.0]))  # what local prints
    # Ops on handles go to the server after the block too.
    assert torch.equal((y + 1).cpu(), torch.tensor([7.0, 25.0]))


def test_in_place_ops_keep_the_handle() -> None:
    session, _ = _session()
    with session.active():
        y = torch.zeros(3) + 1
        z = y.add_(2)
    assert z is y
    assert y.tolist() == [3.0, 3.0, 3.0]


def test_views_of_inputs_stay_local_until_used() -> None:
    session, _ = _session()
    x = torch.ones(2, 3)
    with session.active():
        array = x.numpy()  # detaches: must not become a handle without storage
        view = x.view(3, 2)
    assert not isinstance(view, RemoteTensor)
    np.testing.assert_array_equal(array, np.ones((2, 3)))
    assert session.stats.calls == 0


def test_conversions_of_inputs_run_on_the_server() -> None:
    # ``to``, ``reshape`` and ``contiguous`` may alias or copy: a copy is a computation,
    # so the image goes up as uint8 (1 byte a pixel), not as the float it becomes.
    transport = LoopbackTransport(OpService())
    sent: list[torch.Tensor] = []

    def spy(op: str, fields: dict, tensors: dict) -> tuple:
        sent.extend(t for name, t in tensors.items() if name.startswith('u'))
        return transport(op, fields, tensors)

    session = RemoteSession(spy)
    image = torch.arange(48, dtype=torch.uint8).reshape(1, 3, 4, 4)
    # Models run in inference mode, where ``to`` reaches the dispatcher undecomposed.
    with torch.inference_mode(), session.active():
        same = image.to(torch.uint8)  # no conversion: the input itself, nothing sent
        assert same is image
        assert session.stats.calls == 0
        scaled = image.float() / 255
        flat = image.permute(0, 2, 3, 1).reshape(-1)  # not viewable: copies on the server
        contiguous = image.permute(0, 2, 3, 1).contiguous()
    assert isinstance(scaled, RemoteTensor)
    assert isinstance(flat, RemoteTensor)
    # Once: the server holds a pass's input until the pass ends, and the later reads of
    # the unchanged image name it.
    assert [t.dtype for t in sent] == [torch.uint8]
    assert torch.equal(scaled.cpu(), image.float() / 255)
    assert torch.equal(flat.cpu(), image.permute(0, 2, 3, 1).reshape(-1))
    assert torch.equal(contiguous.cpu(), image.permute(0, 2, 3, 1).contiguous())


def test_released_handles_free_server_memory() -> None:
    session, executor = _session()
    with session.active():
        for _ in range(50):
            y = torch.ones(1000) * 3
            del y
    assert executor.num_values < 10


@pytest.mark.parametrize(
    'name', ['aten.from_file.default', 'os.system.default', 'aten.conv2d', 'aten.nope.default']
)
def test_server_refuses_unknown_or_denied_operators(name: str) -> None:
    with pytest.raises(op_codec.OpCodecError):
        op_codec.resolve_op(name)
    with pytest.raises(ExecutorError):
        OpExecutor().execute(name, [], {}, 1)


@pytest.mark.parametrize(
    'tree',
    [
        [{'T': 'x'}],
        [{'zz': 1}],
        [{'d': 'object'}],
        [{'T': 1, 'd': 'float32'}],
        [[[[[[[[[[1]]]]]]]]]],
    ],
)
def test_malformed_argument_trees_are_rejected(tree: list) -> None:
    executor = OpExecutor()
    executor.upload(1, torch.ones(2))
    with pytest.raises((op_codec.OpCodecError, ExecutorError)):
        executor.execute('aten.add.Tensor', tree, {}, 2)


def test_unknown_value_ids_and_id_reuse_are_refused() -> None:
    executor = OpExecutor()
    with pytest.raises(ExecutorError, match='no value 7'):
        executor.execute('aten.neg.default', [{'T': 7}], {}, 8)
    executor.upload(1, torch.ones(2))
    with pytest.raises(ExecutorError, match='already in use'):
        executor.upload(1, torch.ones(2))


def test_byte_budget_refuses_before_allocating() -> None:
    executor = OpExecutor(max_bytes=1024)
    with pytest.raises(ExecutorError, match='bytes'):
        executor.execute('aten.zeros.default', [[1 << 20]], {}, 1)
    assert executor.num_values == 0
    assert executor.bytes_held == 0
    _, created = executor.execute('aten.zeros.default', [[16]], {}, 1)
    assert created == 1
    assert executor.bytes_held == 64


def test_operator_errors_come_back_as_executor_errors() -> None:
    session, _ = _session()
    with session.active(), pytest.raises(RuntimeError, match='mm'):
        torch.ones(2, 3) @ torch.ones(2, 3)


def test_oversized_call_blob_is_refused() -> None:
    with pytest.raises(op_codec.OpCodecError, match='limit'):
        op_codec.unpack(b'\x00' * (op_codec.MAX_BLOB_BYTES + 1))
    with pytest.raises(op_codec.OpCodecError, match='msgpack'):
        op_codec.unpack(b'\xc1')
