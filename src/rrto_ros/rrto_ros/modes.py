# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The bridge's ``per_op`` and ``rrto`` offloading modes (edge_offload mode plug-ins).

Robot half: the requested zoo model runs here, unmodified, inside a ``RemoteSession``
(``per_op``) or an ``RrtoSession`` (``rrto``): every aten operator goes to the edge
server, and the outputs are fetched at the end (host reads). Server half: one
:class:`~rrto_ros.service.OpService` per robot session.

One session serves every request of a mode, one request at a time: RRTO expects one
steady operator stream (spec 3.8), so a bridge that alternates models keeps recording.
After any failure the pass's writes into the model's tensors are undone, the session is
dropped and the next request starts a fresh one (the server forgets the old values); the
offloader runs the failed request locally. A session whose connection was lost between
requests (a server killed or restarted, a session the server expired) is dropped too:
the first request after the reconnect starts afresh instead of failing on values the
server no longer has.

Both halves load what PyTorch loads lazily on first use in a thread when the mode is
created: the robot's first dispatched operator imports ``torch._dynamo``, the server's
first Python meta kernel (it sizes results before running them) ``torch._dynamo`` and
sympy, about a second each. Loaded on the first request instead, that second came after
the robot had reconnected to a restarted server, and offloading resumed 1.3-2.2 s after
the server listened (bridge fault tests). In a thread, the server listens and serves nnto
meanwhile (a synchronous load delayed nnto by as long); a per_op request that comes
before it is done waits on Python's import lock.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

import torch

from edge_offload.connection_state import ConnectionState
from edge_offload.errors import OffloadError, ServerUnavailableError
from edge_offload.modes.base import (
    InferenceRequest,
    InferenceResult,
    InferenceStats,
    OffloadMode,
    ServerCall,
    ServerMode,
    ServerModeContext,
    ServerReply,
    Stage,
)
from rrto_ros.op_codec import OpCodecError
from rrto_ros.remote import RemoteError, RemoteSession, RemoteTensor
from rrto_ros.rrto import RrtoSession
from rrto_ros.service import OpService


class _Exchange:
    """The transport of one mode: ``EdgeClient.call`` with the current request's limits."""

    def __init__(self, mode: PerOpMode) -> None:
        self.mode = mode
        self.request: InferenceRequest | None = None
        self.stats = InferenceStats()

    def __call__(
        self,
        op: str,
        fields: dict[str, Any],
        tensors: dict[str, torch.Tensor],
        *,
        handed_off: threading.Event | None = None,
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        client = self.mode.context.client
        if client is None:
            raise ServerUnavailableError('no edge server configured')
        request = self.request
        timeout_s = None
        if request is not None and request.deadline is not None:
            timeout_s = max(0.0, request.deadline - time.monotonic())
        reply = client.call(
            self.mode.name,
            op,
            fields,
            tensors,
            timeout_s=timeout_s,
            cancel=request.cancel if request is not None else None,
            handed_off=handed_off,
        )
        self.stats.bytes_up += reply.bytes_up
        self.stats.bytes_down += reply.bytes_down
        self.stats.round_trips += 1
        self.stats.server_compute_time_s += reply.compute_time_s
        return reply.fields, reply.tensors


class PerOpMode(OffloadMode):
    """Robot half of ``per_op``: one round trip per aten operator (the Cricket baseline)."""

    name = 'per_op'
    # The server runs the operators it is sent; it needs no copy of the model.
    needs_server_model = False
    session_class: ClassVar[type[RemoteSession]] = RemoteSession

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self._lock = threading.Lock()
        self._exchange = _Exchange(self)
        self.session: RemoteSession | None = None
        # Bumped whenever the connection leaves CONNECTED: the server's half of the
        # session may be gone (a new server, an expired session). A session made before
        # the latest bump is not used again.
        self._connection_epoch = 0
        self._session_epoch = 0
        if context.client is not None:
            context.client.add_state_listener(self._on_connection_state)
        _warm_up(_load_dispatch_machinery)

    def _on_connection_state(self, state: ConnectionState, reason: str) -> None:
        # The client's I/O thread: no lock here, ``infer`` may hold it waiting for a reply.
        if state is not ConnectionState.CONNECTED:
            self._connection_epoch += 1

    def _new_session(self) -> RemoteSession:
        session = self.session_class(
            self._exchange, logger=self.context.logger.getChild(self.name)
        )
        session.reset_remote()
        return session

    def infer(self, request: InferenceRequest) -> InferenceResult:
        """Run ``request`` with every operator on the edge server."""
        if self.context.client is None:
            raise ServerUnavailableError('no edge server configured')
        model = self.context.models.get(request.model)
        with self._lock:
            started = time.monotonic()
            self._exchange.request = request
            self._exchange.stats = InferenceStats()
            request.report(Stage.SERVER_COMPUTE)
            session = None
            try:
                epoch = self._connection_epoch  # before the reset: a later loss drops it
                if self.session is None or self._session_epoch != epoch:
                    self.session = self._new_session()
                    self._session_epoch = epoch
                session = self.session
                session.register_module(model.module)
                with session.active():
                    remote_outputs = model(request.inputs)
                outputs = {
                    name: value.cpu() if isinstance(value, RemoteTensor) else value
                    for name, value in remote_outputs.items()
                }
            except OffloadError:
                self._drop(session)
                raise
            except (RemoteError, OpCodecError, RuntimeError, ValueError) as error:
                self._drop(session)
                raise OffloadError(f'{self.name}: {error}') from error
            finally:
                self._exchange.request = None
            session.commit()  # the pass's writes into host tensors stand
            stats = self._exchange.stats
            stats.total_time_s = time.monotonic() - started
            stats.local_compute_time_s = max(0.0, stats.total_time_s - stats.server_compute_time_s)
            request.report(Stage.DOWNLOADING, stats.bytes_up, stats.bytes_down)
            return InferenceResult(outputs=outputs, mode=self.name, stats=stats)

    def _drop(self, session: RemoteSession | None) -> None:
        """Forget the session after a failure and undo its pass's writes to host tensors.

        The offloader runs the request locally next, on the module state from before.
        """
        self.session = None  # the server's values may not match ours any more
        if session is not None:
            session.rollback()

    def close(self) -> None:
        """Forget the session (the server drops it when the connection goes)."""
        with self._lock:
            self.session = None


class RrtoMode(PerOpMode):
    """Robot half of ``rrto``: per operator until the sequence is found, then replay."""

    name = 'rrto'
    session_class = RrtoSession


def _device() -> str:
    return 'cuda' if torch.cuda.is_available() else 'cpu'


_warm_ups: dict[Callable[[], object], threading.Event] = {}
_warm_ups_lock = threading.Lock()


def _warm_up(
    load: Callable[[], object], when_done: Callable[[float], object] | None = None
) -> threading.Event:
    """Run ``load`` in a thread, once per process, not in the way of the server's start.

    Their other modes (nnto) must not serve a second later for it; a first request that
    needs it meanwhile waits on Python's import lock. ``when_done(seconds)`` is called once
    it is loaded; the event returned is set then.
    """
    with _warm_ups_lock:
        done = _warm_ups.get(load)
        if done is not None:
            return done
        done = _warm_ups[load] = threading.Event()

    def run() -> None:
        began = time.monotonic()
        try:
            load()
        finally:
            done.set()
        if when_done is not None:
            when_done(time.monotonic() - began)

    threading.Thread(target=run, name='rrto-warm-up', daemon=True).start()
    return done


def _load_dispatch_machinery() -> None:
    """Import what the first ``__torch_dispatch__`` call would (about a second).

    PyTorch wraps a dispatch mode's handler in ``torch._disable_dynamo``, which imports
    ``torch._dynamo`` the first time it runs: the first offloaded operator, else.
    """
    importlib.import_module('torch._dynamo')


def _load_meta_kernels() -> None:
    """Run a Python meta kernel once (``mean``: it imports ``torch._dynamo`` and sympy).

    The server's executor sizes each operator's results on the meta device before running
    it (``OpExecutor.output_size``).
    """
    torch.ops.aten.mean.dim(torch.empty(1, 1, device='meta'), [1])


class PerOpServerMode(ServerMode):
    """Server half of ``per_op``: one ``OpService`` per robot session."""

    name = 'per_op'

    def __init__(self, context: ServerModeContext) -> None:
        super().__init__(context)
        self.device = _device()
        logger = context.logger
        self.meta_kernels_loaded = _warm_up(
            _load_meta_kernels,
            lambda seconds: logger.info(
                'per_op and rrto ready: PyTorch meta kernels loaded in %.2f s', seconds
            ),
        )

    def open_session(self, session_id: str) -> OpService:
        """Return a fresh value table for ``session_id``."""
        return OpService(self.device)

    def handle(self, state: OpService, call: ServerCall) -> ServerReply:
        """Answer one request of the robot's session."""
        fields, tensors, compute_s = state.handle(call.op, call.fields, call.tensors)
        return ServerReply(tensors=tensors, fields=fields, compute_time_s=compute_s)

    def close_session(self, state: OpService) -> None:
        """Drop the session's values."""
        state.handle('reset', {}, {})


class RrtoServerMode(PerOpServerMode):
    """Server half of ``rrto``: ``per_op`` plus stored sequences and their replay."""

    name = 'rrto'
