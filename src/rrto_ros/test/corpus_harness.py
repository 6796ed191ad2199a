# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Run a corpus program locally, ``per_op`` or ``rrto``, and compare the runs bit for bit.

The server half runs in this process (``LoopbackTransport`` to a fresh ``OpService`` per
run): the same CPU kernels as local inference, so every output, every input the program
wrote in place and the final module state must be equal bit for bit.

:func:`_call` is the one place that knows how an inference is offloaded (the grad mode,
``offload_modules(session)``, timing, the session's counters). When the launcher's
runtime falls back to local inference on a refusal, only it changes: a fallback then
shows up in ``ModeRun.fallbacks`` (the reason) instead of ``ModeRun.errors``.
"""

from __future__ import annotations

import collections
import contextlib
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rrto_corpus import CorpusProgram  # noqa: E402

from rrto_ros.remote import RemoteSession, RemoteTensor  # noqa: E402
from rrto_ros.rrto import RrtoSession  # noqa: E402
from rrto_ros.run import offload_modules  # noqa: E402
from rrto_ros.service import LoopbackTransport, OpService  # noqa: E402

torch.set_num_threads(1)

MODES = ('local', 'per_op', 'rrto')

_GRAD_MODES = {
    'no_grad': torch.no_grad,
    'inference_mode': torch.inference_mode,
    'none': contextlib.nullcontext,
}


@dataclass
class ModeRun:
    """One program run in one mode, inference by inference."""

    mode: str  # 'local' | 'per_op' | 'rrto'
    #: Per inference: the output pytree, every tensor a host tensor (None if it raised).
    outputs: list[Any] = field(default_factory=list)
    #: Final ``state_dict()`` (host tensors) plus every tensor attribute of every submodule
    #: (``'attr:<qualname>.<name>'``, the root module's qualname is ``<root>``).
    state: dict[str, Any] = field(default_factory=dict)
    ms: list[float] = field(default_factory=list)  # wall ms per inference
    round_trips: list[int] = field(default_factory=list)  # session.stats.calls delta
    #: Whether the inference was replayed: a replayed pass completed
    #: (``replay_stats.passes_replayed`` grew) and no operator went per operator.
    replayed: list[bool] = field(default_factory=list)
    errors: list[str | None] = field(default_factory=list)  # what the inference raised
    #: Per inference: the positional arguments after the call (programs write in place).
    args_after: list[Any] = field(default_factory=list)
    #: Per inference: the runtime's reason for running it locally (None: it did not).
    fallbacks: list[str | None] = field(default_factory=list)
    #: Per inference: the per-operator requests (``exec``) the session sent.
    exec_requests: list[int] = field(default_factory=list)
    abort_reasons: list[str] = field(default_factory=list)  # rrto: the latest aborts


@dataclass
class _Outcome:
    output: Any
    args_after: Any
    error: str | None
    fallback: str | None
    ms: float
    round_trips: int
    replayed: bool
    exec_requests: int


class _CountingTransport:
    """Counts the session's requests by kind (``exec``, ``fetch``, ``replay``, ...)."""

    def __init__(self, inner: LoopbackTransport) -> None:
        self.inner = inner
        self.counts: collections.Counter[str] = collections.Counter()

    def __call__(
        self, op: str, fields: dict[str, Any], tensors: dict[str, torch.Tensor]
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        self.counts[op] += 1
        return self.inner(op, fields, tensors)


@dataclass
class _Remote:
    session: RemoteSession
    transport: _CountingTransport


def _host(value: Any) -> Any:
    """Return ``value`` with every tensor a fresh host tensor (a host read for handles)."""
    if isinstance(value, RemoteTensor):
        return value.cpu().detach()
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, list):
        return [_host(item) for item in value]
    if isinstance(value, tuple):
        items = [_host(item) for item in value]
        return type(value)(*items) if hasattr(value, '_fields') else tuple(items)
    if isinstance(value, dict):
        return {key: _host(item) for key, item in value.items()}
    return value


def _passes_replayed(session: RemoteSession | None) -> int:
    return session.replay_stats.passes_replayed if isinstance(session, RrtoSession) else 0


def _call(
    program: CorpusProgram, model: nn.Module, args: tuple, remote: _Remote | None
) -> _Outcome:
    """Run one inference of ``program`` locally (no session) or offloaded; never raises.

    THE seam to the offloading runtime: the grad mode, ``offload_modules(session)``, the
    host reads of the outputs (part of the inference: they are its last round trip),
    timing and the session's counters are all here. Today a refusal raises (no fallback);
    a runtime that falls back to local inference sets ``fallback`` to its reason instead
    of ``error`` being set.
    """
    session = remote.session if remote is not None else None
    calls_before = session.stats.calls if session is not None else 0
    replayed_before = _passes_replayed(session)
    execs_before = remote.transport.counts['exec'] if remote is not None else 0
    output = error = fallback = None
    start = time.perf_counter()
    try:
        with _GRAD_MODES[program.grad_mode]():
            if session is None:
                raw = program.invoke(model, args)
            else:
                with offload_modules(session):
                    raw = program.invoke(model, args)
        output = _host(raw)
        del raw
    except Exception as exc:  # noqa: BLE001 - recorded; the next inference goes on
        error = f'{type(exc).__name__}: {exc}'
    elapsed_ms = (time.perf_counter() - start) * 1e3
    try:
        args_after = _host(args)
    except Exception as exc:  # noqa: BLE001 - a handle the server lost
        args_after = f'<unreadable: {type(exc).__name__}: {exc}>'
    execs = remote.transport.counts['exec'] - execs_before if remote is not None else 0
    return _Outcome(
        output=output,
        args_after=args_after,
        error=error,
        fallback=fallback,
        ms=elapsed_ms,
        round_trips=(session.stats.calls - calls_before) if session is not None else 0,
        replayed=_passes_replayed(session) > replayed_before and execs == 0,
        exec_requests=execs,
    )


def _collect_state(model: nn.Module) -> dict[str, Any]:
    state: dict[str, Any] = {}

    def read(key: str, tensor: torch.Tensor) -> None:
        try:
            state[key] = _host(tensor)
        except Exception as exc:  # noqa: BLE001 - compared as a difference
            state[key] = f'<unreadable: {type(exc).__name__}: {exc}>'

    for key, tensor in model.state_dict(keep_vars=True).items():
        read(key, tensor)
    for qualname, module in model.named_modules():
        for name, value in vars(module).items():
            if isinstance(value, torch.Tensor):
                read(f'attr:{qualname or "<root>"}.{name}', value)
    return state


def _remote(mode: str) -> _Remote | None:
    if mode == 'local':
        return None
    transport = _CountingTransport(LoopbackTransport(OpService()))
    if mode == 'per_op':
        session = RemoteSession(transport)
    elif mode == 'rrto':
        session = RrtoSession(transport)
    else:
        raise ValueError(f'unknown mode {mode!r}; choose from {MODES}')
    session.reset_remote()
    return _Remote(session, transport)


def run_mode(program: CorpusProgram, mode: str) -> ModeRun:
    """Build ``program`` afresh and run its inferences in ``mode``."""
    remote = _remote(mode)
    model = program.build()
    model.train(program.train)
    run = ModeRun(mode)
    for index in range(program.inferences):
        outcome = _call(program, model, program.make_input(index), remote)
        run.outputs.append(outcome.output)
        run.args_after.append(outcome.args_after)
        run.errors.append(outcome.error)
        run.fallbacks.append(outcome.fallback)
        run.ms.append(outcome.ms)
        run.round_trips.append(outcome.round_trips)
        run.replayed.append(outcome.replayed)
        run.exec_requests.append(outcome.exec_requests)
    run.state = _collect_state(model)
    if remote is not None and isinstance(remote.session, RrtoSession):
        run.abort_reasons = list(remote.session.replay_stats.abort_reasons)
    return run


# -- comparison -----------------------------------------------------------------------------


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.is_nested:
        tensor = torch.nested.to_padded_tensor(tensor, 0.0)
    return tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8)


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, float):
        if math.isnan(a) and math.isnan(b):
            return True
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, complex):
        return _same_scalar(a.real, b.real) and _same_scalar(a.imag, b.imag)
    return a == b


def _tensor_difference(a: torch.Tensor, b: torch.Tensor) -> str | None:
    if a.dtype != b.dtype:
        return f'dtype {a.dtype} vs {b.dtype}'
    if a.shape != b.shape:
        return f'shape {tuple(a.shape)} vs {tuple(b.shape)}'
    bits_a, bits_b = _bits(a), _bits(b)
    if torch.equal(bits_a, bits_b):
        return None
    size = max(1, a.element_size())
    flat_a, flat_b = a.detach().reshape(-1), b.detach().reshape(-1)
    differ = (bits_a != bits_b).view(-1, size).any(1) if a.numel() else bits_a != bits_b
    first = int(differ.nonzero()[0, 0])
    return (
        f'values differ at {int(differ.sum())} of {a.numel()} elements; first at flat '
        f'index {first}: {flat_a[first].item()!r} vs {flat_b[first].item()!r}'
    )


def bit_equal(a: Any, b: Any, path: str = '') -> str | None:
    """Return None if ``a`` and ``b`` are equal bit for bit, else the first difference.

    Tensors: same dtype, shape and bytes (NaN-, complex- and bfloat16-safe). Scalars:
    same type and value (NaN equals NaN, 0.0 differs from -0.0). Lists, tuples and dicts
    recursively.
    """
    where = path or 'value'
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return f'{where}: {type(a).__name__} vs {type(b).__name__}'
        difference = _tensor_difference(a, b)
        return None if difference is None else f'{where}: {difference}'
    if type(a) is not type(b):
        return f'{where}: {type(a).__name__} vs {type(b).__name__}'
    if isinstance(a, list | tuple):
        if len(a) != len(b):
            return f'{where}: length {len(a)} vs {len(b)}'
        for index, (item_a, item_b) in enumerate(zip(a, b, strict=True)):
            difference = bit_equal(item_a, item_b, f'{path}[{index}]')
            if difference is not None:
                return difference
        return None
    if isinstance(a, dict):
        if list(a) != list(b):
            missing = sorted(set(a) ^ set(b), key=str)
            return f'{where}: keys differ ({", ".join(map(str, missing[:4]))})'
        for key in a:
            difference = bit_equal(a[key], b[key], f'{path}[{key!r}]')
            if difference is not None:
                return difference
        return None
    if isinstance(a, float | complex | int | bool | str | type(None)):
        return None if _same_scalar(a, b) else f'{where}: {a!r} vs {b!r}'
    return None if a == b else f'{where}: {a!r} vs {b!r}'


def compare_runs(reference: ModeRun, run: ModeRun, *, state: bool = True) -> list[str]:
    """Return every way ``run`` differs from ``reference``, one line each (first first).

    An inference that raised is one difference; outputs and the arguments after the call
    are compared per inference; the final state once (unless ``state`` is False).
    """
    problems = []
    for index, error in enumerate(run.errors):
        label = f'{run.mode}: inference {index + 1}'
        if error is not None:
            problems.append(f'{label} raised {_first_line(error)}')
            continue
        difference = bit_equal(reference.outputs[index], run.outputs[index], 'output')
        if difference is None:
            difference = bit_equal(reference.args_after[index], run.args_after[index], 'args')
        if difference is not None:
            problems.append(f'{label}: {difference}')
    if state:
        difference = bit_equal(reference.state, run.state, 'state')
        if difference is not None:
            problems.append(f'{run.mode}: final {difference}')
    return problems


def refusal_problems(program: CorpusProgram, reference: ModeRun, run: ModeRun) -> list[str]:
    """Return how ``run`` of a ``refused`` program fails to refuse ``program.refused_op``.

    Each inference must either raise an error naming the operator, or (a runtime with
    fallback) report a fallback reason naming it and produce outputs equal to local.
    Anything else (no refusal, a refusal of another operator) is a problem.
    """
    problems = []
    for index, (error, fallback) in enumerate(zip(run.errors, run.fallbacks, strict=True)):
        label = f'{run.mode}: inference {index + 1}'
        reason = error if error is not None else fallback
        if reason is None:
            problems.append(f'{label} ran offloaded without refusing {program.refused_op}')
        elif program.refused_op not in reason:
            problems.append(
                f'{label} failed without naming {program.refused_op}: {_first_line(reason)}'
            )
        elif error is None:
            difference = bit_equal(reference.outputs[index], run.outputs[index], 'output')
            if difference is None:
                difference = bit_equal(reference.args_after[index], run.args_after[index], 'args')
            if difference is not None:
                problems.append(f'{label} fell back but differs: {difference}')
    if not problems and all(error is None for error in run.errors):
        difference = bit_equal(reference.state, run.state, 'state')
        if difference is not None:
            problems.append(f'{run.mode}: every inference fell back, but final {difference}')
    return problems


def replay_start(run: ModeRun) -> int | None:
    """Return the 1-based index of the first replayed inference (None: never replayed)."""
    return next((index + 1 for index, done in enumerate(run.replayed) if done), None)


def replay_problems(run: ModeRun, latest_start: int = 5, round_trips: int = 1) -> list[str]:
    """Return why ``run`` (rrto) misses: replay by ``latest_start``, then ``round_trips``.

    Every inference from the first replayed one on must take at most ``round_trips``
    round trips (1, or one per outermost module call: ``steady_round_trips``).
    """
    start = replay_start(run)
    if start is None:
        why = f' (aborts: {run.abort_reasons[-1]})' if run.abort_reasons else ''
        return [f'rrto never replayed; round trips {run.round_trips}{why}']
    problems = []
    if start > latest_start:
        problems.append(f'rrto replayed from inference {start}, after {latest_start}')
    late = [
        (index + 1, trips)
        for index, trips in enumerate(run.round_trips)
        if index + 1 >= start and trips > round_trips
    ]
    if late:
        problems.append(
            f'rrto: from replay start {start} on, inferences took more than {round_trips} '
            f'round trip(s) (inference, trips): {late[:6]}'
        )
    return problems


# -- the table ------------------------------------------------------------------------------


def _first_line(text: str, limit: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else text
    return line if len(line) <= limit else line[: limit - 3] + '...'


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float('nan')


def _steady_round_trips(run: ModeRun) -> float:
    replayed = [trips for trips, done in zip(run.round_trips, run.replayed, strict=True) if done]
    return _median(replayed or run.round_trips[-3:])


def _equal_cell(program: CorpusProgram, local: ModeRun, run: ModeRun) -> str:
    total = len(run.errors)
    if program.expect == 'refused':
        problems = refusal_problems(program, local, run)
        return 'refused' if not problems else f'no ({len(problems)} problems)'
    errors = sum(error is not None for error in run.errors)
    if errors:
        return f'error {errors}/{total}'
    differing = sum(
        bit_equal(local.outputs[i], run.outputs[i]) is not None
        or bit_equal(local.args_after[i], run.args_after[i]) is not None
        for i in range(total)
    )
    if differing:
        return f'no {differing}/{total}'
    if bit_equal(local.state, run.state) is not None:
        return 'state differs'
    return 'yes'


def _note(program: CorpusProgram, runs: dict[str, ModeRun]) -> str:
    parts = []
    if program.expect == 'refused':
        parts.append(f'refuses {program.refused_op}')
    if program.why:
        parts.append(program.why)
    local = runs.get('local')
    for mode in ('per_op', 'rrto'):
        run = runs.get(mode)
        if run is None:
            continue
        if program.expect == 'refused':
            problems = refusal_problems(program, local, run) if local is not None else []
            if problems:
                parts.append(_first_line(problems[0], 110))
            continue
        first = next((error for error in run.errors if error is not None), None)
        if first is not None:
            parts.append(f'{mode} error: {_first_line(first, 90)}')
    rrto = runs.get('rrto')
    if rrto is not None and rrto.abort_reasons and program.expect == 'replay':
        parts.append(f'last abort: {_first_line(rrto.abort_reasons[-1], 90)}')
    return '; '.join(parts).replace('|', '\\|')


def corpus_table(results: list[tuple[CorpusProgram, dict[str, ModeRun]]]) -> str:
    """Return a markdown table of corpus results (``(program, {mode: run})`` pairs)."""
    header = (
        '| program | expect | replay start | RTs / steady inference | ms local | ms per_op '
        '| ms rrto | equal per_op | equal rrto | note |'
    )
    lines = [header, '|' + '---|' * 10]
    for program, runs in results:
        local, per_op, rrto = runs.get('local'), runs.get('per_op'), runs.get('rrto')
        start = replay_start(rrto) if rrto is not None else None
        cells = [
            program.name,
            program.expect,
            '-' if start is None else str(start),
            '-' if rrto is None else f'{_steady_round_trips(rrto):g}',
            *('-' if run is None else f'{_median(run.ms):.2f}' for run in (local, per_op, rrto)),
            *(
                '-' if run is None or local is None else _equal_cell(program, local, run)
                for run in (per_op, rrto)
            ),
            _note(program, runs),
        ]
        lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)
