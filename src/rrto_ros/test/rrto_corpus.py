# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""A differential test corpus for ``per_op`` and ``rrto`` offloading (issue 31).

Each :class:`CorpusProgram` is a small, unmodified PyTorch program: a seeded model, a
deterministic input per inference index, the grad mode its inferences run under, and
what offloading it must achieve (``expect``):

* ``replay``: the operator stream is the same every inference, so RRTO must find the
  inference sequence and replay it (one round trip per inference), bit-equal to local;
* ``offload``: offloaded and bit-equal to local in both modes, but RRTO cannot replay
  every inference (``why`` says why: sizes change with the data, a branch flips, a pass
  reads the previous pass's result);
* ``refused``: an operator the server refuses or cannot run bit-equal (random numbers,
  denied or non-aten operators); the error (or, once the runtime falls back to local
  inference, the fallback reason) must name ``refused_op``.

The models are tiny (a few KB of weights, inputs of a few hundred values): the corpus
pins behaviour, not speed. ``corpus_harness`` runs a program in each mode and compares.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - the usual name
from torch import nn

GRAD_MODES = ('no_grad', 'inference_mode', 'none')
EXPECTS = ('replay', 'offload', 'refused')

#: Every category the corpus must cover (``test_corpus`` checks the union of the tags).
REQUIRED_TAGS = frozenset(
    {
        # model families
        'mlp',
        'conv',
        'unet',
        'skip',
        'upsample',
        'transformer',
        'batch_first',
        'seq_first',
        'padding_mask',
        'attn_mask',
        'rnn',
        'lstm',
        'gru',
        'attention',
        'causal_mask',
        # normalisation
        'batchnorm',
        'batchnorm_train',
        'layernorm',
        'groupnorm',
        'instancenorm',
        # buffers and in-place updates
        'buffer_counter',
        'buffer_ema',
        'buffer_view_write',
        'index_put',
        'masked_fill',
        'clamp_input',
        'inplace_input',
        'buffer_reassigned',
        'attr_state',
        # views and aliasing
        'views',
        'as_strided',
        'alias_write',
        # control flow
        'branch_period_1',
        'branch_period_2',
        'branch_period_3',
        'branch_period_4',
        'branch_period_8',
        'branch_random',
        'branch_rebind',
        'branch_inplace',
        'python_state_branch',
        # dynamic shapes and host reads
        'nonzero',
        'bool_mask_index',
        'unique',
        'topk_item',
        'host_read',
        'print',
        # dtypes
        'int',
        'bool',
        'half',
        'bfloat16',
        'complex',
        # indexing and sorting
        'scatter_gather',
        'sort',
        # randomness and refusals
        'rng',
        'dropout',
        'denied_op',
        'custom_op',
        # how the model is called
        'linear_first',
        'called_twice',
        'two_modules',
        'train',
        'grad',
    }
)


@dataclass(frozen=True)
class CorpusProgram:
    """One program of the corpus (see the module docstring for ``expect``)."""

    name: str
    build: Callable[[], nn.Module]
    make_input: Callable[[int], tuple]
    grad_mode: str = 'no_grad'
    inferences: int = 8
    expect: str = 'replay'
    why: str = ''
    refused_op: str = ''
    train: bool = False
    tags: frozenset[str] = frozenset()
    #: Round trips a replayed inference may take: 1, or one per outermost module call
    #: (the launcher reads each call's outputs back before it returns).
    steady_round_trips: int = 1
    #: How one inference calls the model; default ``model(*args)``. Programs that call
    #: the model twice, or two top-level modules in turn, say so here.
    call: Callable[[nn.Module, tuple], Any] | None = None

    def invoke(self, model: nn.Module, args: tuple) -> Any:
        """Run one inference's calls (the grad mode and session are the caller's)."""
        if self.call is None:
            return model(*args)
        return self.call(model, args)


# -- helpers --------------------------------------------------------------------------------


def _built(seed: int, factory: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        torch.manual_seed(seed)
        return factory()

    return build


def _gen(seed: int, index: int) -> torch.Generator:
    return torch.Generator().manual_seed(1_000_003 * seed + index)


def _uniform(seed: int, *shape: int, low: float = 0.0, high: float = 1.0, dtype=None):
    def make(index: int) -> tuple:
        value = low + (high - low) * torch.rand(*shape, generator=_gen(seed, index))
        return (value if dtype is None else value.to(dtype),)

    return make


def _flip_sign(period: int) -> Callable[[int], bool]:
    return lambda index: (index // period) % 2 == 0


def _random_sign(seed: int) -> Callable[[int], bool]:
    return lambda index: bool(torch.randint(0, 2, (), generator=_gen(seed + 7, index)))


def _signed(seed: int, shape: tuple[int, ...], positive: Callable[[int], bool]):
    """Return inputs whose sum is positive when ``positive(index)``, else negative."""

    def make(index: int) -> tuple:
        magnitude = torch.rand(*shape, generator=_gen(seed, index)) + 0.1
        return (magnitude if positive(index) else -magnitude,)

    return make


class _NullWriter:
    """Where the programs' ``print`` goes: the host read happens, the text is dropped."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


_SINK = _NullWriter()


# -- MLPs, conv nets, U-Nets ---------------------------------------------------------------


class MLP2(nn.Module):
    """Two Linear layers: the first aten operator (``aten.t``) reads only a weight."""

    def __init__(self, d_in: int = 16, hidden: int = 32, d_out: int = 8) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def _conv_block(c_in: int, c_out: int, norm: bool) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(c_in, c_out, 3, padding=1)]
    if norm:
        layers.append(nn.BatchNorm2d(c_out))
    layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class TinyUNet(nn.Module):
    """Two-level U-Net: pooling down, transposed conv or bilinear up, concatenated skips."""

    def __init__(self, ch: int = 4, norm: bool = False, bilinear: bool = False) -> None:
        super().__init__()
        self.enc1 = _conv_block(1, ch, norm)
        self.enc2 = _conv_block(ch, 2 * ch, norm)
        self.pool = nn.MaxPool2d(2)
        self.bilinear = bilinear
        if bilinear:
            self.up = nn.Conv2d(2 * ch, ch, 1)
        else:
            self.up = nn.ConvTranspose2d(2 * ch, ch, 2, stride=2)
        self.dec = _conv_block(2 * ch, ch, norm)
        self.head = nn.Conv2d(ch, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        if self.bilinear:
            u = self.up(F.interpolate(e2, scale_factor=2, mode='bilinear', align_corners=False))
        else:
            u = self.up(e2)
        d = self.dec(torch.cat([u, e1], dim=1))
        return self.head(d) + x  # global residual


class ResBlock(nn.Module):
    """Conv, BatchNorm, residual add, pixel shuffle up, nearest interpolation."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.shuffle = nn.PixelShuffle(2)
        self.out = nn.Conv2d(2, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.stem(x))
        h = F.relu(h + self.conv2(F.relu(self.bn1(self.conv1(h)))))
        up = self.shuffle(h)
        return self.out(F.interpolate(up, scale_factor=0.5, mode='nearest'))


class SmallCNN(nn.Module):
    """A conv net with a global pool and a linear head (input read first)."""

    def __init__(self, c_in: int = 3, classes: int = 4) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.head = nn.Linear(8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.conv2(F.relu(self.conv1(x))))
        return self.head(h.mean(dim=(2, 3)))


class Tanh8(nn.Module):
    """8 -> 8, so the model can be applied to its own output."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.fc(self.norm(x)))


class EncoderHead(nn.Module):
    """Two top-level modules the program calls in turn, with host-side glue between."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = SmallCNN(3, 8)
        self.head = Tanh8()


def _call_twice(model: nn.Module, args: tuple) -> tuple:
    first, second = args
    return model(first), model(second)


def _call_chained(model: nn.Module, args: tuple) -> torch.Tensor:
    (x,) = args
    return model(model(x))


def _call_encoder_then_head(model: nn.Module, args: tuple) -> tuple:
    (x,) = args
    features = model.encoder(x)
    glue = features.relu() * 0.5  # runs outside any module: on the server, on a handle
    return model.head(glue), features


# -- transformers and attention -----------------------------------------------------------


class Transformer(nn.Module):
    """nn.TransformerEncoder with a padding mask or a causal attention mask."""

    def __init__(
        self,
        batch_first: bool,
        causal: bool = False,
        nested: bool = True,
        project_first: bool = False,
    ) -> None:
        super().__init__()
        self.batch_first = batch_first
        self.causal = causal
        self.project_first = project_first
        self.proj = nn.Linear(8, 16) if project_first else nn.Identity()
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=batch_first)
        self.encoder = nn.TransformerEncoder(
            layer, num_layers=2, enable_nested_tensor=nested and batch_first
        )

    def forward(self, x: torch.Tensor, pad: torch.Tensor | None = None) -> torch.Tensor:
        if self.project_first:  # x: (batch * seq, 8) rows: Linear reads a weight first
            x = self.proj(x).view(2, 6, 16)
        if self.causal:
            seq = x.shape[1] if self.batch_first else x.shape[0]
            mask = nn.Transformer.generate_square_subsequent_mask(seq)
            return self.encoder(x, mask=mask, is_causal=True)
        return self.encoder(x, src_key_padding_mask=pad)


def _padded_tokens(seed: int, batch_first: bool):
    def make(index: int) -> tuple:
        x = torch.rand(2, 6, 16, generator=_gen(seed, index))
        pad = torch.zeros(2, 6, dtype=torch.bool)
        pad[1, 4:] = True  # the second sequence is 4 tokens long
        return (x if batch_first else x.transpose(0, 1).contiguous(), pad)

    return make


class CausalSelfAttention(nn.Module):
    """softmax(QK^T / sqrt(d)) V by hand, heads split with views, a causal mask buffer."""

    def __init__(self, d: int = 16, heads: int = 2, max_len: int = 8) -> None:
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.register_buffer('mask', torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, d = x.shape
        q, k, v = self.qkv(self.norm(x)).split(d, dim=2)
        q, k, v = (
            t.view(batch, seq, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v)
        )
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        scores = scores.masked_fill(~self.mask[:seq, :seq], float('-inf'))
        attended = torch.softmax(scores, dim=-1) @ v
        return x + self.out(attended.transpose(1, 2).contiguous().view(batch, seq, d))


class MaskedAttention(nn.Module):
    """Single-head attention with a key padding mask given as a bool input."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.scale = d**-0.5

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = x * 1.0  # reads the input first
        scores = torch.einsum('bqd,bkd->bqk', self.q(x), self.k(x)) * self.scale
        scores = torch.where(keep[:, None, :], scores, torch.finfo(scores.dtype).min)
        weights = F.softmax(scores, dim=-1)
        return torch.bmm(weights, self.v(x)), weights


def _masked_tokens(seed: int):
    def make(index: int) -> tuple:
        x = torch.rand(2, 5, 16, generator=_gen(seed, index))
        keep = torch.tensor([[True] * 5, [True, True, True, False, False]])
        return x, keep

    return make


# -- recurrent nets ----------------------------------------------------------------------


class RNNs(nn.Module):
    """nn.RNN, nn.LSTM or nn.GRU over a short sequence; initial state as inputs or zeros."""

    def __init__(self, kind: str, layers: int = 1, given_state: bool = False) -> None:
        super().__init__()
        self.kind = kind
        self.given_state = given_state
        cls = {'rnn': nn.RNN, 'lstm': nn.LSTM, 'gru': nn.GRU}[kind]
        self.rnn = cls(8, 16, num_layers=layers, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor, *state: torch.Tensor) -> tuple:
        x = x - 0.5  # reads the input first
        if self.given_state:
            out, last = self.rnn(x, tuple(state) if self.kind == 'lstm' else state[0])
        else:
            out, last = self.rnn(x)
        return self.head(out[:, -1]), last


def _sequence_with_state(seed: int, lstm: bool):
    def make(index: int) -> tuple:
        gen = _gen(seed, index)
        x = torch.rand(2, 5, 8, generator=gen)
        h0 = torch.rand(1, 2, 16, generator=gen) - 0.5
        if lstm:
            return x, h0, torch.rand(1, 2, 16, generator=gen) - 0.5
        return x, h0

    return make


class StatefulLSTM(nn.Module):
    """An LSTM whose (h, c) carry over inferences as plain tensor attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 16, batch_first=True)
        self.h = torch.zeros(1, 1, 16)
        self.c = torch.zeros(1, 1, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, (self.h, self.c) = self.lstm(x * 1.0, (self.h, self.c))
        return out[:, -1]


# -- normalisation ------------------------------------------------------------------------


class Norms(nn.Module):
    """BatchNorm2d, GroupNorm, InstanceNorm2d and LayerNorm in a row."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.gn = nn.GroupNorm(2, 8)
        self.inorm = nn.InstanceNorm2d(8, affine=True)
        self.ln = nn.LayerNorm(8 * 6 * 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inorm(self.gn(F.relu(self.bn(self.conv(x)))))
        return self.ln(h.flatten(1))


class BatchNorm1dNet(nn.Module):
    """BatchNorm1d first: in train mode it updates running stats in place every pass."""

    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(8)
        self.fc = nn.Linear(8, 4)
        self.bn2 = nn.BatchNorm1d(4, affine=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn2(self.fc(self.bn(x)))


class TrackedInstanceNorm(nn.Module):
    """InstanceNorm1d with track_running_stats and LayerNorm without affine."""

    def __init__(self) -> None:
        super().__init__()
        self.inorm = nn.InstanceNorm1d(4, track_running_stats=True, affine=True)
        self.conv = nn.Conv1d(4, 4, 3, padding=1)
        self.ln = nn.LayerNorm(10, elementwise_affine=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(self.conv(self.inorm(x)))


# -- buffers and in-place updates ----------------------------------------------------------


class CounterBuffer(nn.Module):
    """``self.count.add_(1)`` every pass; the output reads the count."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(2, 2, 3, padding=1)
        self.register_buffer('count', torch.zeros((), dtype=torch.int64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1)
        return self.conv(x) + self.count.to(x.dtype)


class EmaBuffer(nn.Module):
    """An EMA of the batch mean, ``mul_`` then ``add_`` with alpha, in place."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer('ema', torch.zeros(8))
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.ema.mul_(0.9).add_(x.mean(0), alpha=0.1)
        return self.fc(x - self.ema)


class ViewWriteBuffer(nn.Module):
    """A buffer written through views: ``buf[0] += 1`` and ``buf[:, :2].copy_(...)``."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer('buf', torch.zeros(3, 4))
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.buf[0] += 1
        self.buf[:, :2].copy_(x[:3, :2])
        return self.fc(x) + self.buf.sum(0)


class IndexPutBuffer(nn.Module):
    """A histogram buffer updated with ``index_put_(..., accumulate=True)``."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer('hist', torch.zeros(10))
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> tuple:
        self.hist.index_put_((idx,), torch.ones(idx.shape[0]), accumulate=True)
        return self.fc(x) * self.hist[:4], self.hist.clone()


def _with_index(seed: int):
    def make(index: int) -> tuple:
        gen = _gen(seed, index)
        return torch.rand(3, 4, generator=gen), torch.randint(0, 10, (6,), generator=gen)

    return make


class MaskedFill(nn.Module):
    """``masked_fill_`` on an intermediate and on a bool buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 4, 3, padding=1)
        self.register_buffer('seen', torch.zeros(4, dtype=torch.bool))

    def forward(self, x: torch.Tensor) -> tuple:
        h = self.conv(x)
        h.masked_fill_(h < 0, 0.0)
        self.seen.masked_fill_(h.amax(dim=(0, 2)) > 0.5, True)
        return h, self.seen.clone()


class ClampInput(nn.Module):
    """``clamp_`` on the input tensor itself (the caller's tensor changes)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.clamp_(-0.5, 0.5)
        return self.fc(x)


class InplaceInput(nn.Module):
    """In-place on the input, on a view of it, and the input returned."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(2, 2, 1)

    def forward(self, x: torch.Tensor) -> tuple:
        x.mul_(2).add_(1)
        x[:, 0].zero_()
        xt = x.transpose(1, 2)  # write through one view, read through the input
        xt[:, 1].sub_(0.25)
        return self.conv(x), x


class ReassignedBuffer(nn.Module):
    """A registered buffer reassigned every pass: ``self.state = f(self.state, x)``."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer('state', torch.zeros(1, 8))
        self.conv = nn.Conv1d(1, 1, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        drive = torch.tanh(self.conv(x[:, None])[:, 0])
        self.state = 0.5 * self.state + 0.5 * drive
        return self.state * 2


class AttrRecurrent(nn.Module):
    """A plain tensor attribute (not a buffer) as recurrent state."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.rec = nn.Linear(16, 16, bias=False)
        self.h = torch.zeros(1, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.h = torch.tanh(self.inp(x * 1.0) + self.rec(self.h))
        return self.h.sum(1)


# -- views and aliasing --------------------------------------------------------------------


class ViewsAliasing(nn.Module):
    """transpose/view/expand/as_strided/unbind/split/chunk; writes through one view."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(4, 4, 1)

    def forward(self, x: torch.Tensor) -> tuple:
        h = self.conv(x[None])[0]  # (4, 8)
        t = h.t()
        v = h.view(2, 16)
        t[0].add_(1.0)  # h[:, 0] += 1, read below through v and the chunks
        e = h[:, :1].expand(4, 8)
        s = torch.as_strided(h, (3, 4), (8, 1), 2)
        a, b = h.chunk(2, dim=0)
        parts = h.unbind(1)
        c, d = h.split([3, 5], dim=1)
        c.mul_(2)  # through a split view
        s.add_(0.5)  # through an as_strided window
        return v.sum(1), e + s.sum(), a - b, parts[0] * parts[-1], d.clone(), h


class DiagonalWrite(nn.Module):
    """A strided diagonal view written in place, read back through a reshape."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer('eye', torch.eye(4))

    def forward(self, x: torch.Tensor) -> tuple:
        m = x @ self.eye + 0.0  # reads the input first: a fresh (4, 4) value
        m.diagonal().fill_(1.0)
        flat = m.reshape(16)
        flat[::5].mul_(3.0)  # the same diagonal again, through another view
        return m.triu(), flat.unflatten(0, (2, 8)).sum(1)


# -- data-dependent control flow -----------------------------------------------------------


class SignBranch(nn.Module):
    """``if x.sum() > 0``: a host read picks one of two operator streams."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positive = x.sum() > 0
        h = self.a(x)
        if positive:
            y = torch.relu(h) * 2
        else:
            y = torch.sigmoid(self.b(h))
        return y + 1


class RebindBranch(nn.Module):
    """One path rebinds ``h = tanh(h) * h``; the other goes on with the old ``h``."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> tuple:
        positive = x.sum() > 0
        h = self.a(x)
        if positive:
            h = torch.tanh(h) * h
        return self.b(h), h


class InplaceBranch(nn.Module):
    """The positive path writes in place into ``h``, which both paths use afterwards."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positive = x.sum() > 0
        h = self.a(x)
        if positive:
            h.mul_(2).add_(1)
        return self.b(h) + h


class InplaceBufferBranch(nn.Module):
    """The positive path accumulates into a buffer the output reads."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.register_buffer('acc', torch.zeros(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positive = x.sum() > 0
        h = self.a(x)
        if positive:
            self.acc.add_(h.mean(0))
        return h * 0.5 + self.acc


class CounterBranch(nn.Module):
    """The branch depends on Python state only: ``self.calls`` (no host read)."""

    def __init__(self, period: int) -> None:
        super().__init__()
        self.period = period
        self.calls = 0
        self.conv = nn.Conv1d(1, 2, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        h = self.conv(x)
        if (self.calls // self.period) % 2:
            return h.relu().sum(1)
        return h.tanh().mean(1) * 3


# -- dynamic shapes and host reads ---------------------------------------------------------


class Nonzero(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple:
        idx = torch.nonzero(x > 0.5)
        return idx.float().mean(0), x[idx[:, 0], idx[:, 1]].sum(), idx


class BoolMaskIndex(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(1.5))

    def forward(self, x: torch.Tensor) -> tuple:
        positive = x[x > 0]
        return positive * self.scale, positive.numel()


class Unique(nn.Module):
    def forward(self, tokens: torch.Tensor) -> tuple:
        values, inverse, counts = torch.unique(
            tokens, sorted=True, return_inverse=True, return_counts=True
        )
        return values, inverse, counts.float() / tokens.numel()


class TopkItem(nn.Module):
    """``k`` comes from the data through ``.item()``."""

    def forward(self, x: torch.Tensor) -> tuple:
        k = int((x > 0.5).sum().item()) + 1
        values, indices = torch.topk(x.flatten(), k)
        return values, indices, k


class MaskedSelectSteady(nn.Module):
    """A data-dependent size that is the same every inference (a permuted input)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        picked = torch.masked_select(x, x > 0)
        return self.fc(picked[:, None]).sum(0)


def _permuted(seed: int):
    base = torch.linspace(-1.0, 1.0, 16)

    def make(index: int) -> tuple:
        return (base[torch.randperm(16, generator=_gen(seed, index))].reshape(4, 4),)

    return make


class HostReadsLogged(nn.Module):
    """``.item()``, ``.tolist()``, ``float(t)`` and ``print(t)`` mid-forward; logged only."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(2, 4, 3, padding=1)
        self.conv2 = nn.Conv1d(4, 2, 3, padding=1)
        self.log: list = []

    def forward(self, x: torch.Tensor) -> tuple:
        h = torch.relu(self.conv1(x))
        mean = h.mean().item()
        row = h[0, 0, :3].tolist()
        peak = float(h.max())
        print('corpus host read:', h[0, :, 0], file=_SINK)
        self.log = [mean, row, peak]
        return self.conv2(h), mean, row, peak


class HostReadFeedsScalar(nn.Module):
    """``float(t)`` read mid-forward becomes an operator argument: new every inference."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(2, 2, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = float(x.abs().mean())
        return self.conv(x) * scale + scale


# -- dtypes --------------------------------------------------------------------------------


class IntBool(nn.Module):
    """Embedding lookups, int64 arithmetic, bool masks and logic, argmax, cumsum."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 8)

    def forward(self, tokens: torch.Tensor) -> tuple:
        e = self.emb(tokens)
        big = tokens > 10
        odd = (tokens % 2).bool()
        both = torch.logical_and(big, ~odd)
        signed = torch.where(big[..., None], e, -e)
        arith = (tokens * 3 // 2 - 7).to(torch.int32).cumsum(-1)
        return signed.argmax(-1), both, arith, both.sum(-1), tokens.max()


class HalfNet(nn.Module):
    """float16 weights and activations."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(16)
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)
        self.half()

    def forward(self, x: torch.Tensor) -> tuple:
        h = self.fc2(F.gelu(self.fc1(self.norm(x))))
        return h, h.float().softmax(-1)


class BFloat16Conv(nn.Module):
    """bfloat16 convolutions and a float32 result."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(2, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 2, 3, padding=1)
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> tuple:
        h = self.conv2(F.silu(self.conv1(x.to(torch.bfloat16))))
        return h, h.float().mean((2, 3))


class Spectral(nn.Module):
    """A conv front end, ``torch.fft.rfft`` (complex), ``abs``, angle and back."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 2, 3, padding=1)

    def forward(self, x: torch.Tensor) -> tuple:
        spectrum = torch.fft.rfft(self.conv(x), dim=-1)
        filtered = spectrum * torch.linspace(1.0, 0.0, spectrum.shape[-1])
        return spectrum.abs(), spectrum.angle(), torch.fft.irfft(filtered, n=x.shape[-1])


# -- indexing and sorting ------------------------------------------------------------------


class ScatterGather(nn.Module):
    """gather, scatter, scatter_add, index_select, index_put and index_add."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.rand(8))

    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> tuple:
        g = torch.gather(x, 1, idx)
        s = torch.zeros(4, 8).scatter(1, idx, g * 2)
        sa = torch.zeros(4, 8).scatter_add(1, idx, torch.ones_like(g))
        sel = torch.index_select(x, 0, idx[:, 0] % 4)
        put = x.index_put((idx[:, 0] % 4, idx[:, 1]), torch.tensor(1.0), accumulate=True)
        added = torch.zeros(8).index_add(0, idx[:, 2], self.w[:4])
        return g, s, sa, sel, put, added


def _scatter_input(seed: int):
    def make(index: int) -> tuple:
        gen = _gen(seed, index)
        return torch.rand(4, 8, generator=gen), torch.randint(0, 8, (4, 3), generator=gen)

    return make


class Sorting(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple:
        values, order = x.sort(dim=1, descending=True)
        ranks = x.argsort(dim=0)
        top_v, top_i = x.topk(3, dim=1)
        kth, kth_i = x.kthvalue(2, dim=1)
        return values, order, ranks, top_v, top_i, kth, kth_i, x.flatten().msort()


# -- randomness and operators the server refuses -------------------------------------------


class SeededNoise(nn.Module):
    """``torch.randn(..., generator=self.gen)`` inside forward."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(2, 2, 3, padding=1)
        self.gen = torch.Generator().manual_seed(1234)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        noise = torch.randn(x.shape, generator=self.gen)
        return self.conv(x + 0.1 * noise)


class DropoutNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(2, 4, 3, padding=1)
        self.drop = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.conv(x))


class SetStorage(nn.Module):
    """``Tensor.set_`` (denied on the server: it swaps a tensor's storage)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(2, 2, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv(x)
        alias = torch.empty(0)
        alias.set_(h)
        return alias * 2


def _register_custom_op() -> Any:
    try:
        return torch.ops.rrto_corpus.scale.default
    except (AttributeError, RuntimeError):
        pass

    @torch.library.custom_op('rrto_corpus::scale', mutates_args=())
    def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
        return x * factor

    return torch.ops.rrto_corpus.scale.default


_CORPUS_SCALE = _register_custom_op()


class CustomOp(nn.Module):
    """A non-aten operator (``rrto_corpus::scale``) in the middle of the model."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(2, 2, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _CORPUS_SCALE(self.conv(x), 0.5).relu()


# -- the corpus ----------------------------------------------------------------------------


def _programs() -> list[CorpusProgram]:
    p = CorpusProgram
    t = frozenset
    programs = [
        # MLPs whose first aten operator reads only a weight
        p('mlp2_no_grad', _built(1, MLP2), _uniform(1, 4, 16), 'no_grad',
          tags=t({'mlp', 'linear_first'})),
        p('mlp2_inference_mode', _built(2, MLP2), _uniform(2, 4, 16), 'inference_mode',
          tags=t({'mlp', 'linear_first'})),
        p('mlp2_grad', _built(3, MLP2), _uniform(3, 4, 16), 'none',
          tags=t({'mlp', 'linear_first', 'grad'})),
        p('mlp2_train_grad', _built(4, MLP2), _uniform(4, 4, 16, low=-1.0), 'none', train=True,
          tags=t({'mlp', 'linear_first', 'grad', 'train'})),
        # conv nets, U-Nets
        p('unet_transposed', _built(5, TinyUNet), _uniform(5, 1, 1, 16, 16), 'inference_mode',
          tags=t({'conv', 'unet', 'skip', 'upsample'})),
        p('unet_bilinear_bn_train', _built(6, lambda: TinyUNet(norm=True, bilinear=True)),
          _uniform(6, 2, 1, 16, 16), 'no_grad', train=True,
          tags=t({'conv', 'unet', 'skip', 'upsample', 'batchnorm', 'batchnorm_train',
                  'train'})),
        p('unet_bn_eval_grad', _built(7, lambda: TinyUNet(norm=True)), _uniform(7, 1, 1, 8, 8),
          'none', tags=t({'conv', 'unet', 'skip', 'upsample', 'batchnorm', 'grad'})),
        p('resblock_pixelshuffle', _built(8, ResBlock), _uniform(8, 1, 3, 8, 8), 'no_grad',
          tags=t({'conv', 'skip', 'upsample', 'batchnorm'})),
        p('small_cnn', _built(9, SmallCNN), _uniform(9, 2, 3, 8, 8), 'inference_mode',
          tags=t({'conv'})),
        # transformers
        p('transformer_batch_first_padmask_grad', _built(10, lambda: Transformer(True)),
          _padded_tokens(10, True), 'none',
          tags=t({'transformer', 'batch_first', 'padding_mask', 'grad'})),
        p('transformer_batch_first_padmask_fused',
          _built(11, lambda: Transformer(True, nested=False)),
          _padded_tokens(11, True), 'no_grad',
          tags=t({'transformer', 'batch_first', 'padding_mask'})),
        p('transformer_batch_first_padmask_nested', _built(12, lambda: Transformer(True)),
          _padded_tokens(12, True), 'inference_mode', expect='refused',
          refused_op='aten._nested_tensor_from_mask',
          why='the eval fast path makes a nested tensor, which has no strides to mirror',
          tags=t({'transformer', 'batch_first', 'padding_mask'})),
        p('transformer_seq_first_padmask', _built(13, lambda: Transformer(False)),
          _padded_tokens(13, False), 'inference_mode',
          tags=t({'transformer', 'seq_first', 'padding_mask'})),
        p('transformer_seq_first_causal', _built(14, lambda: Transformer(False, causal=True)),
          _uniform(14, 6, 2, 16), 'no_grad',
          tags=t({'transformer', 'seq_first', 'attn_mask', 'causal_mask'})),
        p('transformer_batch_first_causal_grad',
          _built(15, lambda: Transformer(True, causal=True)),
          _uniform(15, 2, 6, 16), 'none',
          tags=t({'transformer', 'batch_first', 'attn_mask', 'causal_mask', 'grad'})),
        p('transformer_linear_first_no_grad',
          _built(16, lambda: Transformer(True, causal=True, project_first=True)),
          _uniform(16, 12, 8), 'no_grad',
          tags=t({'transformer', 'batch_first', 'attn_mask', 'linear_first'})),
        # attention by hand
        p('attention_causal_manual', _built(17, CausalSelfAttention), _uniform(17, 2, 6, 16),
          'no_grad', tags=t({'attention', 'causal_mask', 'views'})),
        p('attention_padding_manual', _built(18, MaskedAttention), _masked_tokens(18),
          'inference_mode', tags=t({'attention', 'padding_mask', 'bool'})),
        # recurrent nets
        p('rnn_tanh', _built(19, lambda: RNNs('rnn')), _uniform(19, 2, 5, 8), 'no_grad',
          tags=t({'rnn'})),
        p('lstm_given_state', _built(20, lambda: RNNs('lstm', given_state=True)),
          _sequence_with_state(20, True), 'inference_mode', tags=t({'rnn', 'lstm'})),
        p('gru_two_layers_grad', _built(21, lambda: RNNs('gru', layers=2)),
          _uniform(21, 2, 5, 8), 'none', tags=t({'rnn', 'gru', 'grad'})),
        p('gru_given_state', _built(22, lambda: RNNs('gru', given_state=True)),
          _sequence_with_state(22, False), 'no_grad', tags=t({'rnn', 'gru'})),
        p('lstm_state_attribute', _built(23, StatefulLSTM), _uniform(23, 1, 4, 8),
          'inference_mode', tags=t({'rnn', 'lstm', 'attr_state'})),
        # normalisation
        p('norms_eval', _built(24, Norms), _uniform(24, 2, 3, 6, 6), 'inference_mode',
          tags=t({'conv', 'batchnorm', 'groupnorm', 'instancenorm', 'layernorm'})),
        p('norms_train_grad', _built(25, Norms), _uniform(25, 2, 3, 6, 6), 'none', train=True,
          tags=t({'conv', 'batchnorm', 'batchnorm_train', 'groupnorm', 'instancenorm',
                  'layernorm', 'train', 'grad'})),
        p('batchnorm1d_train', _built(26, BatchNorm1dNet), _uniform(26, 6, 8), 'no_grad',
          train=True, tags=t({'batchnorm', 'batchnorm_train', 'train'})),
        p('batchnorm1d_train_inference_mode', _built(27, BatchNorm1dNet), _uniform(27, 6, 8),
          'inference_mode', train=True, tags=t({'batchnorm', 'batchnorm_train', 'train'})),
        p('instancenorm_tracked_train', _built(28, TrackedInstanceNorm),
          _uniform(28, 2, 4, 10), 'no_grad', train=True,
          tags=t({'instancenorm', 'layernorm', 'train'})),
        p('instancenorm_tracked_train_inference_mode', _built(73, TrackedInstanceNorm),
          _uniform(73, 2, 4, 10), 'inference_mode', train=True,
          tags=t({'instancenorm', 'layernorm', 'train'})),
        # buffers and in-place updates
        p('buffer_counter', _built(29, CounterBuffer), _uniform(29, 1, 2, 6), 'no_grad',
          tags=t({'buffer_counter', 'int'})),
        p('buffer_ema', _built(30, EmaBuffer), _uniform(30, 4, 8), 'inference_mode',
          tags=t({'buffer_ema'})),
        p('buffer_view_write', _built(31, ViewWriteBuffer), _uniform(31, 4, 4), 'none',
          tags=t({'buffer_view_write', 'views', 'grad'})),
        p('buffer_index_put', _built(32, IndexPutBuffer), _with_index(32), 'no_grad',
          tags=t({'index_put', 'int'})),
        p('masked_fill_inplace', _built(33, MaskedFill), _uniform(33, 2, 1, 6, low=-1.0),
          'inference_mode', tags=t({'masked_fill', 'bool'})),
        p('clamp_input_inplace', _built(34, ClampInput), _uniform(34, 2, 8, low=-1.0),
          'no_grad', tags=t({'clamp_input', 'inplace_input', 'linear_first'})),
        p('inplace_on_input', _built(35, InplaceInput), _uniform(35, 1, 2, 4), 'inference_mode',
          tags=t({'inplace_input', 'views', 'alias_write'})),
        p('buffer_reassigned', _built(36, ReassignedBuffer), _uniform(36, 1, 8), 'no_grad',
          tags=t({'buffer_reassigned'})),
        p('attr_recurrent_state', _built(37, AttrRecurrent), _uniform(37, 1, 8), 'none',
          tags=t({'attr_state', 'grad'})),
        # views and aliasing
        p('views_aliasing', _built(38, ViewsAliasing), _uniform(38, 4, 8), 'no_grad',
          tags=t({'views', 'as_strided', 'alias_write'})),
        p('views_diagonal_write', _built(39, DiagonalWrite), _uniform(39, 4, 4),
          'inference_mode', tags=t({'views', 'alias_write'})),
        # data-dependent control flow: flips driven by the input's values
        p('branch_period_1', _built(40, SignBranch), _signed(40, (2, 8), _flip_sign(1)),
          'no_grad', expect='offload', why='the branch flips every inference',
          tags=t({'branch_period_1', 'host_read'})),
        p('branch_period_2', _built(41, SignBranch), _signed(41, (2, 8), _flip_sign(2)),
          'inference_mode', expect='offload', why='the branch flips every 2 inferences',
          tags=t({'branch_period_2', 'host_read'})),
        p('branch_period_3', _built(42, SignBranch), _signed(42, (2, 8), _flip_sign(3)),
          'none', inferences=12, expect='offload', why='the branch flips every 3 inferences',
          tags=t({'branch_period_3', 'host_read', 'grad'})),
        p('branch_period_4', _built(43, SignBranch), _signed(43, (2, 8), _flip_sign(4)),
          'no_grad', inferences=16, expect='offload',
          why='the branch flips every 4 inferences: 1 replay per run at best',
          tags=t({'branch_period_4', 'host_read'})),
        p('branch_period_8', _built(44, SignBranch), _signed(44, (2, 8), _flip_sign(8)),
          'inference_mode', inferences=24, expect='offload',
          why='the branch flips every 8 inferences: replays within each run of 8',
          tags=t({'branch_period_8', 'host_read'})),
        p('branch_random', _built(45, SignBranch), _signed(45, (2, 8), _random_sign(45)),
          'no_grad', inferences=16, expect='offload', why='the branch flips at random',
          tags=t({'branch_random', 'host_read'})),
        p('branch_rebind_period_4', _built(46, RebindBranch),
          _signed(46, (2, 8), _flip_sign(4)), 'no_grad', inferences=16, expect='offload',
          why='the branch flips every 4 inferences',
          tags=t({'branch_rebind', 'branch_period_4', 'host_read'})),
        p('branch_inplace_period_4', _built(47, InplaceBranch),
          _signed(47, (2, 8), _flip_sign(4)), 'inference_mode', inferences=16,
          expect='offload', why='the branch flips every 4 inferences',
          tags=t({'branch_inplace', 'branch_period_4', 'host_read'})),
        p('branch_inplace_buffer_period_4', _built(48, InplaceBufferBranch),
          _signed(48, (2, 8), _flip_sign(4)), 'no_grad', inferences=16, expect='offload',
          why='the branch flips every 4 inferences',
          tags=t({'branch_inplace', 'branch_period_4', 'host_read'})),
        p('branch_inplace_period_1', _built(49, InplaceBranch),
          _signed(49, (2, 8), _flip_sign(1)), 'none', expect='offload',
          why='the branch flips every inference',
          tags=t({'branch_inplace', 'branch_period_1', 'host_read', 'grad'})),
        # flips driven by Python state only
        p('python_counter_period_1', _built(50, lambda: CounterBranch(1)),
          _uniform(50, 1, 1, 8), 'no_grad', expect='offload',
          why='self.calls flips the branch every inference',
          tags=t({'python_state_branch'})),
        p('python_counter_period_4', _built(51, lambda: CounterBranch(4)),
          _uniform(51, 1, 1, 8), 'inference_mode', inferences=16, expect='offload',
          why='self.calls flips the branch every 4 inferences',
          tags=t({'python_state_branch'})),
        # dynamic shapes
        p('nonzero_dynamic', _built(52, Nonzero), _uniform(52, 4, 4), 'no_grad',
          expect='offload', why='nonzero: the result size changes with the data',
          tags=t({'nonzero', 'int'})),
        p('bool_mask_index', _built(53, BoolMaskIndex), _uniform(53, 12, low=-1.0),
          'inference_mode', expect='offload', why='x[x > 0]: the size changes with the data',
          tags=t({'bool_mask_index', 'bool'})),
        p('unique_counts', _built(54, Unique),
          lambda i: (torch.randint(0, 20, (8,), generator=_gen(54, i)),), 'no_grad',
          expect='offload', why='unique: the size changes with the data',
          tags=t({'unique', 'int'})),
        p('topk_k_from_item', _built(55, TopkItem), _uniform(55, 3, 4), 'none',
          expect='offload', why='k comes from .item(): new sizes and arguments',
          tags=t({'topk_item', 'host_read', 'sort', 'grad'})),
        p('masked_select_steady_size', _built(56, MaskedSelectSteady), _permuted(56),
          'no_grad', tags=t({'bool_mask_index', 'bool'})),
        # host reads in the middle
        p('host_reads_logged', _built(57, HostReadsLogged), _uniform(57, 1, 2, 6),
          'inference_mode', tags=t({'host_read', 'print'})),
        p('host_read_feeds_scalar', _built(58, HostReadFeedsScalar), _uniform(58, 1, 2, 6),
          'no_grad', expect='offload',
          why='a value read mid-forward is the next operator argument',
          tags=t({'host_read'})),
        # dtypes
        p('int_bool_embedding', _built(59, IntBool),
          lambda i: (torch.randint(0, 20, (2, 6), generator=_gen(59, i)),), 'inference_mode',
          tags=t({'int', 'bool'})),
        p('half_mlp', _built(60, HalfNet), _uniform(60, 2, 16, dtype=torch.float16), 'no_grad',
          tags=t({'half', 'layernorm'})),
        p('bfloat16_conv', _built(61, BFloat16Conv), _uniform(61, 1, 2, 6, 6), 'inference_mode',
          tags=t({'bfloat16', 'conv'})),
        p('complex_fft', _built(62, Spectral), _uniform(62, 1, 1, 16), 'none',
          tags=t({'complex', 'grad'})),
        # indexing and sorting
        p('scatter_gather', _built(63, ScatterGather), _scatter_input(63), 'no_grad',
          tags=t({'scatter_gather', 'index_put', 'int'})),
        p('sorting', _built(64, Sorting), _uniform(64, 3, 5), 'inference_mode',
          tags=t({'sort', 'int'})),
        # randomness: cannot run bit-equal on the server
        # Random operators run on the robot's generators (the server's would draw other
        # numbers); what they make goes up with the next upload.
        p('randn_seeded_generator', _built(65, SeededNoise), _uniform(65, 1, 2, 6), 'no_grad',
          tags=t({'rng'})),
        p('dropout_train_no_grad', _built(66, DropoutNet), _uniform(66, 1, 2, 6), 'no_grad',
          train=True, tags=t({'rng', 'dropout', 'train'})),
        p('dropout_train_inference_mode', _built(67, DropoutNet), _uniform(67, 1, 2, 6),
          'inference_mode', train=True, tags=t({'rng', 'dropout', 'train'})),
        # operators the server refuses
        p('denied_set_storage', _built(68, SetStorage), _uniform(68, 1, 2, 6), 'no_grad',
          expect='refused', refused_op='aten.set_', why='set_ is denied on the server',
          tags=t({'denied_op'})),
        p('custom_non_aten_op', _built(69, CustomOp), _uniform(69, 1, 2, 6), 'inference_mode',
          expect='refused', refused_op='rrto_corpus.scale',
          why='the server runs aten operators only', tags=t({'custom_op'})),
        # the model called twice per inference; two top-level modules in turn
        p('called_twice_per_inference', _built(70, SmallCNN),
          lambda i: (torch.rand(1, 3, 8, 8, generator=_gen(70, i)),
                     torch.rand(1, 3, 8, 8, generator=_gen(170, i))),
          'no_grad', call=_call_twice, steady_round_trips=2,
          tags=t({'called_twice', 'conv'})),
        p('called_twice_chained', _built(71, Tanh8), _uniform(71, 2, 8), 'none',
          call=_call_chained, steady_round_trips=2,
          tags=t({'called_twice', 'layernorm', 'grad'})),
        p('two_modules_in_sequence', _built(72, EncoderHead), _uniform(72, 1, 3, 8, 8),
          'inference_mode', call=_call_encoder_then_head, steady_round_trips=2,
          tags=t({'two_modules', 'conv', 'layernorm'})),
    ]  # fmt: skip
    return programs


PROGRAMS: list[CorpusProgram] = _programs()
BY_NAME: dict[str, CorpusProgram] = {program.name: program for program in PROGRAMS}
