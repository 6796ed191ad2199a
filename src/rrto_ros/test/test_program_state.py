# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Offloaded programs keep the state and the outputs local inference gives (issue 31).

In-process server half (``OpService`` behind ``LoopbackTransport``), the launcher's module
wrapper (``offload_modules``): buffers written in place (directly, through views, by
reassignment), branches that flip after the sequence was found (a rebound tensor the
other path still needs, an in-place write on the recorded path, a flip by Python state
alone), models whose first operator reads only a weight, random numbers drawn inside
``forward``, a failed call leaving no stale parameter cache, and ``print`` of a tensor.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from contextlib import redirect_stdout

import pytest
import torch
from torch import nn

from rrto_ros.remote import RemoteError, RemoteSession
from rrto_ros.rrto import RrtoSession
from rrto_ros.run import offload_modules
from rrto_ros.service import LoopbackTransport, OpService

torch.set_num_threads(1)

MODES = {'per_op': RemoteSession, 'rrto': RrtoSession}


def _inputs(count: int, shape: tuple[int, ...], sign: Callable[[int], float] = lambda i: 1.0):
    return [
        torch.rand(shape, generator=torch.Generator().manual_seed(i)) * sign(i)
        for i in range(count)
    ]


def _compare(build: Callable[[], nn.Module], inputs: list, mode: str, grad=torch.no_grad):
    """Run ``build()`` locally and offloaded on ``inputs``; assert equal outputs and state.

    Returns the offloaded session.
    """
    torch.manual_seed(0)
    local = build()
    torch.manual_seed(0)
    remote = build()
    session = MODES[mode](LoopbackTransport(OpService()))
    for index, x in enumerate(inputs):
        with grad():
            expected = local(x.clone())
            with offload_modules(session):
                got = remote(x.clone())
        assert torch.equal(got, expected), f'{mode}: inference {index} differs from local'
    for (name, value), (_, want) in zip(
        remote.state_dict().items(), local.state_dict().items(), strict=True
    ):
        assert torch.equal(value, want), f'{mode}: {name} differs from local after the run'
    return session


class Counter(nn.Module):
    """State in buffers, changed in place: a counter and a moving average."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.register_buffer('count', torch.zeros(()))
        self.register_buffer('ema', torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1)
        self.ema.mul_(0.9).add_(x.mean(0), alpha=0.1)
        return self.linear(x) + self.count + self.ema


class ViewWrites(nn.Module):
    """Writes into a buffer through views of it, and reads the buffer mid-pass."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer('table', torch.zeros(3, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.table[0] += x.sum(0)
        self.table[1:, :2].copy_(x[:2, :2])
        self.table.index_put_((torch.tensor([2]),), x[0:1], accumulate=True)
        steps = int(self.table[0, 0].item() > 2.0)  # a host read of the buffer itself
        return x @ self.table.t() + steps


class Reassigned(nn.Module):
    """A buffer and a plain attribute rebound to new tensors in every pass."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer('state', torch.zeros(4))
        self.hidden = torch.zeros(4)
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.state = 0.5 * self.state + x.mean(0)
        self.hidden = torch.tanh(self.linear(self.hidden) + self.state)
        return self.hidden * 2


class Normalised(nn.Module):
    """Batch norm in training mode: running statistics updated in place."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(4)
        self.linear = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.norm(x))


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('build', [Counter, ViewWrites, Reassigned, Normalised])
def test_module_state_changed_in_forward_is_kept(mode: str, build: type[nn.Module]) -> None:
    session = _compare(build, _inputs(8, (3, 4)), mode)
    if mode == 'rrto' and build is not ViewWrites:  # ViewWrites reads the buffer mid-pass
        assert session.replay_stats.passes_replayed >= 4, session.replay_stats
    if build is Reassigned:
        # The program's state is a host tensor again: it must outlive the server.
        assert not hasattr(Reassigned().state, '_value_id')


def test_reassigned_state_is_a_host_tensor_after_the_call() -> None:
    torch.manual_seed(0)
    model = Reassigned()
    session = RemoteSession(LoopbackTransport(OpService()))
    with torch.no_grad(), offload_modules(session):
        model(torch.ones(3, 4))
    assert type(model.state) is torch.Tensor
    assert type(model.hidden) is torch.Tensor
    assert 'state' in model._buffers


class Rebind(nn.Module):
    """One path rebinds ``h``; the other still needs the old ``h`` (issue 31, item 2)."""

    def __init__(self) -> None:
        super().__init__()
        self.f = nn.Linear(4, 4)
        self.g = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.f(x)
        if h.sum() > 0:
            h = self.g(h) * h
            return h.sum(0)
        return (h * 2).sum(0)


class WriteOnRecordedPath(nn.Module):
    """The recorded path writes in place into a tensor used after the branch (item 3)."""

    def __init__(self) -> None:
        super().__init__()
        self.f = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.f(x)
        if x.sum() > 0:
            h.mul_(3)
        return h + 1


class PythonFlip(nn.Module):
    """The branch flips on Python state alone, with no host read before it."""

    def __init__(self, period: int) -> None:
        super().__init__()
        self.f = nn.Linear(4, 4)
        self.calls = 0
        self.period = period
        self.register_buffer('bias', torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.f(x) * 2
        self.calls += 1
        if (self.calls // self.period) % 2:
            h.mul_(3)
            self.bias.add_(1)
        return h + self.bias


# Positive for the first five inferences (RRTO finds that path), then flipping.
_FLIPS = [1, 1, 1, 1, 1, -1, 1, -1, -1, -1, -1, 1, 1, 1, 1, -1]


@pytest.mark.parametrize('build', [Rebind, WriteOnRecordedPath])
def test_branch_flips_after_the_sequence_was_found(build: type[nn.Module]) -> None:
    session = _compare(build, _inputs(len(_FLIPS), (3, 4), lambda i: _FLIPS[i]), 'rrto')
    stats = session.replay_stats
    assert stats.passes_replayed >= 2, stats
    assert stats.aborts >= 2, stats


@pytest.mark.parametrize('period', [1, 2, 3, 5, 8])
def test_flips_by_python_state_are_equal_or_fail_before_anything_is_wrong(period: int) -> None:
    # A write ahead of the robot into a value made ahead of it cannot be undone: the
    # inference fails with a clear error (the launcher then runs it locally), never
    # with a wrong output.
    torch.manual_seed(0)
    local = PythonFlip(period)
    torch.manual_seed(0)
    remote = PythonFlip(period)
    session = RrtoSession(LoopbackTransport(OpService()))
    failed = 0
    with offload_modules(session, fallback=True) as offloader:
        for x in _inputs(34, (3, 4)):
            with torch.no_grad():
                expected = local(x)
                got = remote(x)
            assert torch.equal(got, expected)
    for record in offloader.summary.fallbacks:
        assert 'left the recorded path' in record, record
        failed += 1
    assert torch.equal(remote.bias, local.bias)
    assert remote.calls == local.calls  # the failed offloaded attempt was undone


class TwoLayers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.net = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


@pytest.mark.parametrize(('build', 'shape'), [(TwoLayers, (2, 8)), (Encoder, (2, 5, 8))])
def test_models_starting_with_a_weight_read_replay(build, shape) -> None:
    # Under no_grad, nn.Linear starts with aten.t(weight), before its input goes up.
    torch.manual_seed(0)
    model = build().eval()
    session = RrtoSession(LoopbackTransport(OpService()))
    calls = []
    for x in _inputs(8, shape):
        before = session.stats.calls
        with torch.no_grad():
            expected = model(x)
            with offload_modules(session):
                got = model(x)
        assert torch.equal(got, expected)
        calls.append(session.stats.calls - before)
    assert session.replay_stats.passes_replayed >= 4, session.replay_stats
    assert calls[4:] == [1] * 4, calls


class Noisy(nn.Module):
    """Random numbers inside forward: a seeded generator and dropout in training mode."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.generator = torch.Generator().manual_seed(7)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        noise = torch.randn(x.shape, generator=self.generator)
        return nn.functional.dropout(self.linear(x) + noise, 0.5, training=True)


@pytest.mark.parametrize('mode', MODES)
def test_random_numbers_come_from_the_robots_generators(mode: str) -> None:
    torch.manual_seed(0)
    local = Noisy()
    torch.manual_seed(0)
    remote = Noisy()
    session = MODES[mode](LoopbackTransport(OpService()))
    for x in _inputs(6, (3, 4)):
        torch.manual_seed(1)  # dropout draws from the global generator
        with torch.no_grad():
            expected = local(x)
        torch.manual_seed(1)
        with torch.no_grad(), offload_modules(session):
            got = remote(x)
        assert torch.equal(got, expected)
    assert torch.equal(remote.generator.get_state(), local.generator.get_state())


def test_a_failed_call_leaves_no_parameter_claimed_on_the_server() -> None:
    # Item 7: the cache was filled before the call went out, so a call that never
    # reached the server left parameters the robot believed were uploaded.
    service = OpService()
    loopback = LoopbackTransport(service)
    failures = iter([True])

    def flaky(op: str, fields: dict, tensors: dict) -> tuple:
        if op == 'exec' and next(failures, False):
            raise RemoteError('the link dropped')
        return loopback(op, fields, tensors)

    model = nn.Linear(4, 2)
    session = RemoteSession(flaky)
    x = torch.rand(3, 4)
    with torch.no_grad(), offload_modules(session):
        with pytest.raises(RemoteError, match='the link dropped'):
            model(x)
        got = model(x)
    assert torch.equal(got, model(x))


class Printing(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        print(y)
        print(y.sum().item())
        return y


@pytest.mark.parametrize('mode', MODES)
def test_print_inside_forward_shows_what_local_shows(mode: str) -> None:
    x = torch.arange(4.0)
    local = io.StringIO()
    with redirect_stdout(local):
        Printing()(x)
    remote = io.StringIO()
    session = MODES[mode](LoopbackTransport(OpService()))
    with redirect_stdout(remote), offload_modules(session):
        Printing()(x)
    assert remote.getvalue() == local.getvalue()
