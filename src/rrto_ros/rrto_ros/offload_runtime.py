# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Offload an unmodified program's module calls, and answer every one of them.

``ModuleOffloader`` wraps ``torch.nn.Module.__call__`` (what ``python -m rrto_ros.run``
installs): each outermost module call is one *inference*. It runs inside a
``RemoteSession`` (``per_op``) or ``RrtoSession`` (``rrto``), its outputs are read back
before the call returns, and the module state it changed is brought back into the
program's modules (``RemoteSession.sync_host_state``). So an inference is a transaction:
host tensors in, host tensors out, nothing of it left only on the server.

When offloading fails (the server is gone, stalled, restarted, refuses an operator, or
the replay broke), the inference is undone on the robot (the session's writes into host
tensors, the modules' attributes) and run again locally, so the program sees the answer
local inference gives, never the error. The failed session is dropped; the next
inference opens a fresh one (``reset``, parameters uploaded again, recording from the
start) as soon as the client is connected again. A module the server refuses (an
operator it will not run) runs locally for ``retry_refused_s`` before it is tried again.

Every inference makes an :class:`InferenceRecord` (where it ran, why, round trips,
bytes, replay state); :class:`OffloadSummary` adds them up for the exit report.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from torch import nn
from torch.utils import _pytree as pytree

from edge_offload.errors import DeadlineMissedError, ServerUnavailableError
from rrto_ros.remote import RemoteSession, RemoteTensor
from rrto_ros.rrto import RrtoSession

EDGE = 'edge'
ROBOT = 'robot'

DEFAULT_RETRY_REFUSED_S = 60.0


@dataclass
class InferenceRecord:
    """One outermost module call: where it ran and what it cost."""

    index: int  # 1-based, in call order
    module: str  # the module's class name
    where: str  # EDGE or ROBOT
    reason: str  # why it ran on the robot ('' when offloaded)
    round_trips: int
    bytes_up: int
    bytes_down: int
    replay: str  # the RRTO state after the call ('' for per_op and local)
    replayed: bool  # answered by a replayed pass
    ms: float

    def line(self) -> str:
        """Return the record as one human-readable line."""
        text = (
            f'#{self.index} {self.module}: {self.where} {self.ms:.1f} ms, '
            f'{self.round_trips} round trips, {_size(self.bytes_up)} up, '
            f'{_size(self.bytes_down)} down'
        )
        if self.replay:
            text += f', rrto {"replayed" if self.replayed else self.replay}'
        if self.reason:
            text += f' (ran on the robot: {self.reason})'
        return text


def _size(count: int) -> str:
    if count >= 1e6:
        return f'{count / 1e6:.1f} MB'
    if count >= 1e3:
        return f'{count / 1e3:.1f} kB'
    return f'{count} B'


@dataclass
class OffloadSummary:
    """What offloading did over a run (for the launcher's exit report)."""

    mode: str
    inferences: int = 0
    offloaded: int = 0
    local: int = 0
    sessions: int = 0  # sessions opened (1 + recoveries)
    round_trips: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    replayed: int = 0
    first_replayed: int | None = None  # index of the first replayed inference
    fallbacks: collections.Counter = field(default_factory=collections.Counter)
    replay_note: str = ''  # why RRTO is not replaying, when it is not

    def add(self, record: InferenceRecord) -> None:
        """Count one inference."""
        self.inferences += 1
        self.round_trips += record.round_trips
        self.bytes_up += record.bytes_up
        self.bytes_down += record.bytes_down
        if record.where == EDGE:
            self.offloaded += 1
        else:
            self.local += 1
            self.fallbacks[record.reason] += 1
        if record.replayed:
            self.replayed += 1
            if self.first_replayed is None:
                self.first_replayed = record.index

    def lines(self) -> list[str]:
        """Return the report, one line each."""
        lines = [
            f'mode {self.mode}: {self.inferences} inferences, {self.offloaded} offloaded, '
            f'{self.local} on the robot; {self.round_trips} round trips, '
            f'{_size(self.bytes_up)} up, {_size(self.bytes_down)} down; '
            f'{self.sessions} edge sessions'
        ]
        if self.mode == 'rrto':
            if self.replayed:
                lines.append(
                    f'rrto: {self.replayed} inferences replayed, the first at #'
                    f'{self.first_replayed}'
                )
            if self.replay_note:
                lines.append(f'rrto: {self.replay_note}')
        for reason, count in self.fallbacks.most_common():
            lines.append(f'on the robot {count}x: {reason}')
        return lines


def _transport_failure(error: BaseException) -> bool:
    """Whether ``error`` says the server or the link failed (not what was asked of it)."""
    return isinstance(error, ServerUnavailableError | DeadlineMissedError | ConnectionError)


class _ModuleState:
    """A shallow copy of a module tree's attributes: what a failed inference restores.

    ``forward`` may rebind attributes (``self.state = ...``, ``self.calls += 1``); the
    local run that replaces a failed offloaded one must start from the same values.
    Containers an attribute holds are not copied.
    """

    def __init__(self, module: nn.Module) -> None:
        self._saved = [
            (sub, *map(dict, (sub.__dict__, sub._parameters, sub._buffers, sub._modules)))
            for sub in module.modules()
        ]

    def restore(self) -> None:
        for sub, attributes, parameters, buffers, modules in self._saved:
            sub.__dict__.clear()
            sub.__dict__.update(attributes)
            for table, saved in (
                (sub._parameters, parameters),
                (sub._buffers, buffers),
                (sub._modules, modules),
            ):
                table.clear()
                table.update(saved)


class ModuleOffloader:
    """Runs each outermost ``nn.Module`` call offloaded, or locally when that fails.

    Args:
        open_session: Returns a new session whose server side is fresh (it sent
            ``reset``); raises when the server cannot be reached.
        mode: ``per_op`` or ``rrto`` (for the report).
        is_connected: Whether the client is connected now; while it is not, inferences
            run locally without trying the server.
        on_inference: Called with every :class:`InferenceRecord`.
        fallback: Run a failed inference locally (True) or raise the error (False).
        retry_refused_s: How long a module the server refused runs locally before it
            is offloaded again.

    """

    def __init__(
        self,
        open_session: Callable[[], RemoteSession],
        *,
        mode: str = 'rrto',
        is_connected: Callable[[], bool] = lambda: True,
        on_inference: Callable[[InferenceRecord], None] | None = None,
        fallback: bool = True,
        retry_refused_s: float = DEFAULT_RETRY_REFUSED_S,
    ) -> None:
        self._open_session = open_session
        self._is_connected = is_connected
        self._on_inference = on_inference
        self.fallback = fallback
        self.retry_refused_s = retry_refused_s
        self.summary = OffloadSummary(mode)
        self.session: RemoteSession | None = None
        self._refused: weakref.WeakKeyDictionary[nn.Module, tuple[float, str]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.RLock()
        self._inside = threading.local()
        self._original: Callable[..., Any] | None = None
        self._unavailable_reason = 'edge server not connected'
        self._fresh = False
        # Bumped when the connection is lost: a session opened before may have lost its
        # server half (a restarted server), so the next inference opens a fresh one.
        self._connection_epoch = 0
        self._session_epoch = 0

    # -- installing ---------------------------------------------------------------------

    def __enter__(self) -> ModuleOffloader:
        self._original = original = nn.Module.__call__
        offloader = self

        def call(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
            if getattr(offloader._inside, 'active', False):
                return original(module, *args, **kwargs)
            return offloader.infer(module, *args, **kwargs)

        nn.Module.__call__ = call
        return self

    def __exit__(self, *exc: object) -> None:
        if self._original is not None:
            nn.Module.__call__ = self._original
            self._original = None
        self.summary.replay_note = self._replay_note()

    # -- one inference ------------------------------------------------------------------

    def infer(self, module: nn.Module, *args: Any, **kwargs: Any) -> Any:
        """Run ``module(*args, **kwargs)`` on the edge server, or here if that fails."""
        original = self._original or nn.Module.__call__
        with self._lock, self._inside_call():
            started = time.perf_counter()
            index = self.summary.inferences + 1
            reason = self._local_reason(module)
            session, record_from = None, None
            if not reason:
                try:
                    session = self._session()
                except Exception as error:  # noqa: BLE001 - any failure means: run here
                    reason = self._failed(error, module, fresh=True)
            if session is not None:
                record_from = (session.stats.copy(), _replayed(session))
                saved = _ModuleState(module)
                fresh = self._fresh
                try:
                    outputs = self._offloaded(session, module, original, args, kwargs)
                except Exception as error:
                    session.rollback()
                    saved.restore()
                    reason = self._failed(error, module, fresh=fresh)
                    if not self.fallback:
                        raise
                else:
                    session.commit()
                    self._record(index, module, EDGE, '', session, record_from, started)
                    return outputs
            outputs = original(module, *args, **kwargs)
            self._record(index, module, ROBOT, reason, session, record_from, started)
            return outputs

    @staticmethod
    def _offloaded(
        session: RemoteSession, module: nn.Module, original: Callable, args: tuple, kwargs: dict
    ) -> Any:
        session.register_module(module)
        with session.active():
            outputs = original(module, *args, **kwargs)
            # Read back inside the pass: the reads are part of the recorded sequence,
            # so a replayed inference brings them in its one round trip.
            return pytree.tree_map_only(RemoteTensor, session.fetch, outputs)

    @contextlib.contextmanager
    def _inside_call(self) -> Iterator[None]:
        self._inside.active = True
        try:
            yield
        finally:
            self._inside.active = False

    def _local_reason(self, module: nn.Module) -> str:
        refused = self._refused.get(module)
        if refused is not None:
            until, why = refused
            if time.monotonic() < until:
                return why
            del self._refused[module]
        if self.session is None and not self._is_connected():
            return self._unavailable_reason
        return ''

    def connection_lost(self) -> None:
        """Note that the connection dropped (the client's state listener calls this).

        Safe from any thread: it only bumps a counter the next inference reads.
        """
        self._connection_epoch += 1

    def _session(self) -> RemoteSession:
        epoch = self._connection_epoch  # before the reset: a later loss drops it again
        if self.session is not None and self._session_epoch != epoch:
            self.session = None
        self._fresh = self.session is None
        if self.session is None:
            self.session = self._open_session()
            self._session_epoch = epoch
            self.summary.sessions += 1
        return self.session

    def _failed(self, error: BaseException, module: nn.Module, fresh: bool) -> str:
        """Drop the session after ``error``; return why the inference runs locally."""
        self.session = None  # its server values may not be what the robot thinks
        text = _describe(error)
        if _transport_failure(error):
            self._unavailable_reason = f'edge server unavailable ({text})'
            return f'edge server unavailable ({text})'
        if fresh:
            # It failed on a session opened for it, not after a restart or a replay that
            # broke: the server (or the wire) will refuse it again.
            why = f'refused: {text}'
            self._refused[module] = (time.monotonic() + self.retry_refused_s, why)
            return why
        return f'offloading failed: {text}'

    def _record(
        self,
        index: int,
        module: nn.Module,
        where: str,
        reason: str,
        session: RemoteSession | None,
        record_from: tuple | None,
        started: float,
    ) -> None:
        round_trips = bytes_up = bytes_down = 0
        replay, replayed = '', False
        if session is not None and record_from is not None:
            spent = session.stats.minus(record_from[0])
            round_trips, bytes_up, bytes_down = spent.calls, spent.bytes_up, spent.bytes_down
            if isinstance(session, RrtoSession):
                replay = session.state.value
                replayed = where == EDGE and _replayed(session) > record_from[1]
        record = InferenceRecord(
            index,
            type(module).__name__,
            where,
            reason,
            round_trips,
            bytes_up,
            bytes_down,
            replay,
            replayed,
            (time.perf_counter() - started) * 1e3,
        )
        self.summary.add(record)
        if self._on_inference is not None:
            self._on_inference(record)

    def _replay_note(self) -> str:
        session = self.session
        if not isinstance(session, RrtoSession):
            return ''
        return session.replay_note()


def _replayed(session: RemoteSession) -> int:
    return session.replay_stats.passes_replayed if isinstance(session, RrtoSession) else 0


def _describe(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    first = text.splitlines()[0]
    return first if len(first) <= 300 else first[:297] + '...'
