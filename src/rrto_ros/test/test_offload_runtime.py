# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The launcher answers every inference: locally when offloading fails, then offloads again.

``ModuleOffloader`` over an in-process server half whose link the test breaks: the link
drops in the middle of a pass, the client says it is not connected, the server refuses an
operator. Every answer and the module state must equal local inference, the failed pass
must leave nothing behind (host tensors it wrote, attributes it rebound), and a fresh
session (parameters uploaded again, recording afresh) must take over once the link is back.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from edge_offload.errors import ServerUnavailableError
from rrto_ros.offload_runtime import EDGE, ROBOT, InferenceRecord, ModuleOffloader
from rrto_ros.remote import RemoteSession
from rrto_ros.rrto import RrtoSession
from rrto_ros.service import LoopbackTransport, OpService

torch.set_num_threads(1)


class Link:
    """A loopback link that fails every request after ``fail_after`` more of them."""

    def __init__(self) -> None:
        self.service = OpService()
        self.loopback = LoopbackTransport(self.service)
        self.fail_after: int | None = None
        self.connected = True
        self.sent = 0

    def __call__(self, op: str, fields: dict, tensors: dict) -> tuple:
        if self.fail_after is not None:
            if self.fail_after <= 0:
                raise ServerUnavailableError('connection to the edge server lost')
            self.fail_after -= 1
        self.sent += 1
        return self.loopback(op, fields, tensors)

    def restart(self) -> None:
        """Stand for a new server process: it knows nothing of the robot."""
        self.service = OpService()
        self.loopback = LoopbackTransport(self.service)
        self.fail_after = None
        self.connected = True


class Stateful(nn.Module):
    """Writes into its input, a buffer and an attribute, with a host read in the middle."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
        self.register_buffer('seen', torch.zeros(4))
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        x.clamp_(min=0.1)  # in place, into the program's own tensor
        self.seen.add_(x.mean(0))
        y = self.net(x)
        if y.sum() > 0:
            y = y * 2
        return y + self.seen


def _offloader(link: Link, mode: str, records: list) -> ModuleOffloader:
    def open_session() -> RemoteSession:
        session = RrtoSession(link) if mode == 'rrto' else RemoteSession(link)
        session.reset_remote()
        return session

    return ModuleOffloader(
        open_session, mode=mode, is_connected=lambda: link.connected, on_inference=records.append
    )


def _input(index: int) -> torch.Tensor:
    return torch.randn(3, 4, generator=torch.Generator().manual_seed(index))


@pytest.mark.parametrize('mode', ['per_op', 'rrto'])
def test_every_inference_is_answered_and_equal_through_faults(mode: str) -> None:
    torch.manual_seed(0)
    local = Stateful()
    torch.manual_seed(0)
    remote = Stateful()
    link, records = Link(), []
    # Local inference first: inside the block every module call is offloaded.
    expected_inputs, expected_outputs = [], []
    for index in range(24):
        x = _input(index)
        with torch.no_grad():
            expected_outputs.append(local(x))
        expected_inputs.append(x)
    # (inference, what happens to the link just before it)
    faults = {6: 'drop mid-pass', 7: 'disconnected', 9: 'restarted', 16: 'drop at once'}
    with _offloader(link, mode, records) as offloader:
        for index in range(24):
            fault = faults.get(index)
            if fault == 'drop mid-pass':
                # A replayed pass (rrto) sends its one request after the robot answered
                # its first steps from the record: the link drops in the middle of it.
                link.fail_after = 0 if mode == 'rrto' else 3
            elif fault == 'disconnected':
                link.connected = False
            elif fault == 'restarted':
                link.restart()
                offloader.connection_lost()  # what the client's state listener says
            elif fault == 'drop at once':
                link.fail_after = 0
            elif index == 17:
                link.fail_after = None
            x = _input(index)
            with torch.no_grad():
                got = remote(x)
            assert torch.equal(got, expected_outputs[index]), index
            assert torch.equal(x, expected_inputs[index]), index  # its in-place write, once
    assert remote.calls == local.calls == 24
    assert torch.equal(remote.seen, local.seen)
    where = [r.where for r in records]
    assert where[:6] == [EDGE] * 6, where
    assert where[6:9] == [ROBOT] * 3, where  # dropped, then not connected (no attempt)
    assert where[9:16] == [EDGE] * 7, where
    assert where[16] == ROBOT, where
    assert where[17:] == [EDGE] * 7, where
    assert 'edge server unavailable' in records[6].reason, records[6]
    assert records[7].round_trips == 0, records[7]  # not tried while disconnected
    summary = offloader.summary
    assert (summary.inferences, summary.offloaded, summary.local) == (24, 20, 4)
    assert summary.sessions == 3  # the first, after the restart, after the last drop
    if mode == 'rrto':
        # Recording starts afresh on the new session and replay resumes.
        assert any(r.replayed for r in records[9:16]), records
        assert all(r.replayed for r in records[-3:]), records
        # Three host reads: the input written in place, the branch, the outputs.
        assert records[-1].round_trips <= 3


class Refused(nn.Module):
    """Uses an operator the edge server never runs (``set_``)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        holder = torch.empty(0)
        holder.set_(y.clone())
        return holder + 1


def test_a_module_the_server_refuses_runs_locally_and_says_why() -> None:
    torch.manual_seed(0)
    model = Refused()
    link, records = Link(), []
    with torch.no_grad():
        expected = [model(_input(index)) for index in range(4)]
    with _offloader(link, 'rrto', records) as offloader:
        for index in range(4):
            with torch.no_grad():
                got = model(_input(index))
            assert torch.equal(got, expected[index])
    assert [r.where for r in records] == [ROBOT] * 4
    assert 'set_' in records[0].reason, records[0]
    assert records[0].reason.startswith('refused'), records[0]
    assert records[1].round_trips == 0  # not tried again within retry_refused_s
    lines = offloader.summary.lines()
    assert any('on the robot 4x: refused' in line for line in lines), lines


def test_a_record_is_one_json_line_and_one_readable_line() -> None:
    record = InferenceRecord(3, 'Net', ROBOT, 'edge server unavailable (x)', 0, 0, 0, '', False, 2)
    assert json.loads(json.dumps(record.__dict__))['where'] == ROBOT
    assert record.line() == (
        '#3 Net: robot 2.0 ms, 0 round trips, 0 B up, 0 B down '
        '(ran on the robot: edge server unavailable (x))'
    )


def test_errors_reach_the_program_without_fallback() -> None:
    link = Link()
    link.fail_after = 0
    offloader = ModuleOffloader(lambda: RemoteSession(link), fallback=False)
    with offloader, pytest.raises(ServerUnavailableError):
        nn.Linear(2, 2)(torch.ones(1, 2))


def test_a_server_restart_between_inferences_costs_no_local_inference() -> None:
    # The client reports the lost connection: the next inference opens a fresh session
    # at once instead of failing on values the new server does not have.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    with torch.no_grad():
        expected = [model(_input(index)) for index in range(6)]
    link, records = Link(), []
    with _offloader(link, 'rrto', records) as offloader:
        for index in range(6):
            if index == 3:
                link.restart()
                offloader.connection_lost()
            with torch.no_grad():
                assert torch.equal(model(_input(index)), expected[index])
    assert [r.where for r in records] == [EDGE] * 6, records
    assert offloader.summary.sessions == 2
