# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Complex tensors offload bit-equal; dtypes the wire cannot carry fail clearly, by name.

Before, ``torch.fft.rfft`` failed with ``KeyError: 'complex64'`` in the codec after the
server had already run the operator. The wire now carries complex64 and complex128; a
dtype it cannot carry (complex32) is refused with an error that names the operator,
before the robot mirrors anything: as an argument on the robot, as a result on the server.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from edge_offload import protocol
from rrto_ros.remote import RemoteError, RemoteSession, RemoteTensor
from rrto_ros.rrto import ReplayState, RrtoSession
from rrto_ros.service import LoopbackTransport, OpService

torch.set_num_threads(1)


class Spectral(nn.Module):
    """A conv front end, then a real FFT: complex intermediates and outputs."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv1d(1, 2, 3, padding=1)

    def forward(self, signal: torch.Tensor) -> tuple[torch.Tensor, ...]:
        spectrum = torch.fft.rfft(self.conv(signal), dim=-1)
        return spectrum.abs(), torch.view_as_real(spectrum), spectrum * 1j


def _host(outputs: tuple) -> tuple:
    return tuple(t.cpu() if isinstance(t, RemoteTensor) else t for t in outputs)


def test_complex_tensors_cross_the_wire_unchanged():
    value = torch.randn(3, 5, dtype=torch.complex64)
    message = protocol.Message(
        protocol.CALL, 1, {}, {'a': value, 'b': value.to(torch.complex128)[:, 1:]}
    )
    decoded = protocol.decode(protocol.encode(message))
    assert torch.equal(decoded.tensors['a'], value)
    assert torch.equal(decoded.tensors['b'], value.to(torch.complex128)[:, 1:])


@pytest.mark.parametrize('mode', ['per_op', 'rrto'])
def test_a_complex_program_is_bit_equal_and_replays(mode):
    module = Spectral().eval()
    signal = torch.rand(1, 1, 32)
    with torch.no_grad():
        expected = module(signal)
    service = OpService()
    transport = LoopbackTransport(service)
    session = RemoteSession(transport) if mode == 'per_op' else RrtoSession(transport)
    session.register_module(module)
    round_trips = []
    for _ in range(6):
        before = session.stats.copy()
        with torch.no_grad(), session.active():
            got = _host(module(signal.clone()))
        round_trips.append(session.stats.minus(before).calls)
        assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
    if mode == 'rrto':
        assert session.state is ReplayState.ARMED
        assert round_trips[4:] == [1, 1]


def test_a_complex_scalar_read_on_the_host_is_exact():
    module = Spectral().eval()
    signal = torch.rand(1, 1, 32)
    with torch.no_grad():
        expected = torch.fft.rfft(module.conv(signal), dim=-1)[0, 1, 3].item()
    session = RemoteSession(LoopbackTransport(OpService()))
    session.register_module(module)
    with torch.no_grad(), session.active():
        got = torch.fft.rfft(module.conv(signal), dim=-1)[0, 1, 3].item()
    assert isinstance(got, complex)
    assert got == expected


class ToComplex32(nn.Module):
    def forward(self, values: torch.Tensor) -> torch.Tensor:
        return (values * 2).to(torch.complex32)


class ViewAsComplex32(nn.Module):
    def forward(self, values: torch.Tensor) -> torch.Tensor:
        return torch.view_as_complex(values.half().reshape(2, 2).contiguous())


@pytest.mark.parametrize(
    ('module', 'operator'),
    [(ToComplex32(), 'aten._to_copy'), (ViewAsComplex32(), 'aten.view_as_complex')],
)
def test_a_dtype_the_wire_cannot_carry_is_refused_naming_the_operator(module, operator):
    service = OpService()
    session = RrtoSession(LoopbackTransport(service))
    session.register_module(module)
    with torch.no_grad(), session.active(), pytest.raises(RemoteError) as refused:
        module(torch.rand(4))
    assert operator in str(refused.value)
    assert 'complex32' in str(refused.value)
    assert 'wire protocol cannot carry' in str(refused.value) or 'cannot be sent' in str(
        refused.value
    )
