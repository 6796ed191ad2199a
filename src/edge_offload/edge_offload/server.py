# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""GPU end of the wire protocol: sessions, limits, and the server halves of the modes.

``EdgeServer`` binds a ZeroMQ ROUTER socket. Each robot says HELLO and gets an isolated
session: its own per-mode state and its own in-flight budget. CALLs run on a bounded
worker pool; the I/O thread only moves frames, answers PINGs at once (so RTT probes do
not wait behind inference) and answers every malformed, oversized or unexpected message
with an ERROR instead of failing.

A mode may defer its reply: ``handle`` returns a ``concurrent.futures.Future`` and the
worker is free at once; the reply is sent when the future completes (from any thread), and
the call counts against the session's in-flight budget until then. A session that closes
or expires, or a server that stops, cancels its deferred calls' futures (a result that
still comes is dropped).

Limits: ``max_clients`` sessions (HELLO beyond it gets ``server_full``),
``max_inflight_per_client`` calls per session (beyond it ``busy``), ``max_message_bytes``
per message in either direction (the socket drops larger frames before they are
buffered), and sessions silent for ``session_timeout_s`` are closed (once no call of theirs
is running on a worker; deferred calls do not keep a silent session open).

With ``security='curve'`` only robots whose public key file is in
``authorized_clients_dir`` complete the handshake; others are refused by ZeroMQ's
authentication handler and logged. ``edge_offload_server`` (``main``) runs it headless.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import functools
import logging
import math
import signal
import socket
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
import zmq
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils.monitor import recv_monitor_message

from edge_offload import protocol
from edge_offload.keys import (
    KeyFileError,
    expand_path,
    load_secret_key_pair,
    validate_transport,
)
from edge_offload.models import ModelCache
from edge_offload.modes.base import (
    ServerCall,
    ServerMode,
    ServerModeContext,
    ServerReply,
    load_server_mode_class,
)
from edge_offload.parameter_files import (
    WILDCARD,
    ParameterFileError,
    load_parameter_file,
    node_parameters,
)

_logger = logging.getLogger(__name__)
_LATENCY_SAMPLES = 256


@dataclass
class ServerConfig:
    """Settings of an edge server (also the ROS parameters of the edge_server node)."""

    endpoint: str = 'tcp://127.0.0.1:5555'
    server_id: str = 'edge_server'
    models: list[str] = field(default_factory=lambda: ['tiny_cnn'])
    modes: list[str] = field(default_factory=lambda: ['nnto'])
    security: str = 'curve'
    allow_plaintext: bool = False
    secret_key_file: str = '~/.local/share/edge_offload/keys/server.key_secret'  # noqa: S105
    authorized_clients_dir: str = '~/.local/share/edge_offload/keys/authorized_clients'
    max_clients: int = 16
    max_inflight_per_client: int = 4
    max_message_bytes: int = protocol.DEFAULT_MAX_MESSAGE_BYTES
    worker_threads: int = 2
    torch_threads: int = 0
    session_timeout_s: float = 10.0

    def validate(self) -> None:
        """Raise ValueError if a setting is invalid."""
        validate_transport(self.endpoint, self.security, self.allow_plaintext)
        if not self.models:
            raise ValueError('models must name at least one model')
        for name in ('max_clients', 'max_inflight_per_client', 'worker_threads'):
            if getattr(self, name) < 1:
                raise ValueError(f'{name} must be >= 1')
        if self.max_message_bytes < 1024:
            raise ValueError('max_message_bytes must be >= 1024')
        if self.session_timeout_s <= 0 or self.torch_threads < 0:
            raise ValueError('session_timeout_s must be > 0 and torch_threads >= 0')

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> ServerConfig:
        """Build a config from a parameter map; unknown keys are an error."""
        known = {item.name for item in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f'unknown edge server parameters: {unknown}')
        config = cls(**values)
        config.models = list(config.models)
        config.modes = list(config.modes)
        return config


@dataclass
class ModelLatency:
    """Server compute time of one model over its recent requests, seconds."""

    count: int
    mean_s: float
    p50_s: float
    p95_s: float
    max_s: float


@dataclass
class ServerStats:
    """Load and health of the server (published as diagnostics)."""

    endpoint: str
    sessions: int
    inflight: int
    worker_threads: int
    requests_total: int
    errors_total: int
    rejected_total: int
    malformed_total: int
    auth_failures_total: int
    uptime_s: float
    models: dict[str, ModelLatency]


@dataclass
class _Session:
    session_id: str
    identity: bytes
    client_name: str
    last_seen: float
    inflight: int = 0
    mode_states: dict[str, Any] = field(default_factory=dict)
    # Futures of deferred replies still to send; each also counts in ``inflight``.
    deferred: set[concurrent.futures.Future] = field(default_factory=set)


class EdgeServer:
    """Serve the configured models to many robots over one ROUTER socket."""

    def __init__(self, config: ServerConfig) -> None:
        config.validate()
        self.config = config
        if config.torch_threads:
            torch.set_num_threads(config.torch_threads)
        self.models = ModelCache(allowed=set(config.models))
        self.models.preload(config.models)  # unknown model names fail here, at configure
        mode_context = ServerModeContext(models=self.models, logger=_logger)
        self._modes: dict[str, ServerMode] = {}
        for name in config.modes:
            self._modes[name] = load_server_mode_class(name)(mode_context)
        self._key_pair = None
        if config.security == 'curve':
            self._key_pair = load_secret_key_pair(config.secret_key_file)
            clients_dir = expand_path(config.authorized_clients_dir)
            if not clients_dir.is_dir() or not any(clients_dir.glob('*.key')):
                raise KeyFileError(
                    f'no authorised robot keys (*.key) in {clients_dir}: create them with '
                    '`edge_offload_keygen`'
                )
        self._lock = threading.Lock()
        self._sessions: dict[bytes, _Session] = {}
        self._session_numbers = 0
        self._outbox: collections.deque[list] = collections.deque()
        self._latencies: dict[str, collections.deque[float]] = {}
        self._counters = collections.Counter()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._context: zmq.Context | None = None
        self._socket: zmq.Socket | None = None
        self._monitor: zmq.Socket | None = None
        self._auth: ThreadAuthenticator | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._wake_reader: socket.socket | None = None
        self._wake_writer: socket.socket | None = None
        self._started_at = 0.0
        self.endpoint = ''

    # -- life cycle ------------------------------------------------------------------

    def start(self) -> str:
        """Bind and start serving; return the bound endpoint (port 0 is resolved)."""
        if self._thread is not None:
            return self.endpoint
        config = self.config
        self._context = zmq.Context()
        sock = self._context.socket(zmq.ROUTER)
        sock.linger = 0
        sock.router_mandatory = 1  # a reply to a vanished robot raises instead of vanishing
        hwm = max(64, config.max_clients * config.max_inflight_per_client * 4)
        sock.sndhwm = hwm
        sock.rcvhwm = hwm
        sock.maxmsgsize = config.max_message_bytes
        sock.heartbeat_ivl = 1000
        sock.heartbeat_timeout = 5000
        if self._key_pair is not None:
            self._auth = ThreadAuthenticator(self._context, log=_logger.getChild('auth'))
            self._auth.start()
            self._auth.configure_curve(
                domain='*', location=str(expand_path(config.authorized_clients_dir))
            )
            sock.curve_server = True
            sock.curve_secretkey = self._key_pair.secret
            sock.curve_publickey = self._key_pair.public
        self._monitor = sock.get_monitor_socket(
            zmq.EVENT_HANDSHAKE_FAILED_AUTH
            | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
            | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
        )
        try:
            sock.bind(config.endpoint)
        except zmq.ZMQError as error:
            sock.close(linger=0)
            self._stop_auth()
            self._context.term()
            raise OSError(f'cannot bind edge server to {config.endpoint}: {error}') from None
        self._socket = sock
        self.endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._wake_reader.setblocking(False)
        self._wake_writer.setblocking(False)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=config.worker_threads, thread_name_prefix='edge-server-worker'
        )
        self._stopping.clear()
        self._started_at = time.monotonic()
        self._thread = threading.Thread(target=self._run, name='edge-server-io', daemon=True)
        self._thread.start()
        _logger.info(
            'edge server %s listening on %s (%s; models %s; modes %s)',
            config.server_id,
            self.endpoint,
            'CURVE authentication' if self._key_pair else 'PLAINTEXT, unauthenticated',
            ', '.join(config.models),
            ', '.join(self._modes),
        )
        return self.endpoint

    def stop(self) -> None:
        """Stop serving, close every session and release the socket (idempotent)."""
        if self._thread is None:
            return
        self._stopping.set()
        self._wake()
        self._thread.join(timeout=1.0)
        self._thread = None
        # Queued computations are cancelled; one already running (a model on a worker)
        # cannot be interrupted and is not waited for: its reply has nowhere to go.
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
            deferred = [future for session in sessions for future in _detach_deferred(session)]
            self._outbox.clear()
        for future in deferred:
            future.cancel()
        for session in sessions:
            self._close_session_states(session)
        self._stop_auth()
        for sock in (self._wake_reader, self._wake_writer):
            if sock is not None:
                sock.close()
        if self._context is not None:
            self._context.term()
            self._context = None
        _logger.info('edge server %s stopped', self.config.server_id)

    def _stop_auth(self) -> None:
        if self._auth is not None:
            self._auth.stop()
            self._auth = None

    def __enter__(self) -> EdgeServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def serving(self) -> bool:
        """Return whether the server is bound and serving."""
        return self._thread is not None

    def stats(self) -> ServerStats:
        """Return current load, counters and per-model latency."""
        with self._lock:
            models = {}
            for name, samples in self._latencies.items():
                ordered = sorted(samples)
                models[name] = ModelLatency(
                    count=self._counters[f'model:{name}'],
                    mean_s=statistics.fmean(ordered),
                    p50_s=_percentile(ordered, 0.50),
                    p95_s=_percentile(ordered, 0.95),
                    max_s=ordered[-1],
                )
            return ServerStats(
                endpoint=self.endpoint,
                sessions=len(self._sessions),
                inflight=sum(session.inflight for session in self._sessions.values()),
                worker_threads=self.config.worker_threads,
                requests_total=self._counters['requests'],
                errors_total=self._counters['errors'],
                rejected_total=self._counters['rejected'],
                malformed_total=self._counters['malformed'],
                auth_failures_total=self._counters['auth_failures'],
                uptime_s=time.monotonic() - self._started_at if self._started_at else 0.0,
                models=models,
            )

    # -- I/O thread ------------------------------------------------------------------

    def _wake(self) -> None:
        if self._wake_writer is None:
            return
        try:
            self._wake_writer.send(b'\0')
        except (BlockingIOError, OSError):
            pass

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self._socket, zmq.POLLIN)
        poller.register(self._monitor, zmq.POLLIN)
        poller.register(self._wake_reader.fileno(), zmq.POLLIN)
        next_sweep = time.monotonic() + 1.0
        try:
            while not self._stopping.is_set():
                events = dict(poller.poll(100))
                if self._wake_reader.fileno() in events:
                    try:
                        while self._wake_reader.recv(4096):
                            pass
                    except (BlockingIOError, OSError):
                        pass
                if self._monitor in events:
                    self._on_monitor_events()
                if self._socket in events:
                    self._on_messages()
                self._flush_outbox()
                if time.monotonic() >= next_sweep:
                    self._expire_sessions()
                    next_sweep = time.monotonic() + 1.0
        except Exception:  # noqa: BLE001 - log why serving stopped
            _logger.exception('edge server I/O thread failed')
        finally:
            self._socket.disable_monitor()
            self._monitor.close(linger=0)
            self._socket.close(linger=0)

    def _on_monitor_events(self) -> None:
        while True:
            try:
                event = recv_monitor_message(self._monitor, flags=zmq.NOBLOCK)
            except zmq.Again:
                return
            with self._lock:
                self._counters['auth_failures'] += 1
                count = self._counters['auth_failures']
            if _should_log(count):
                _logger.warning(
                    'refused a robot on %s: %s (%d refusals so far)',
                    event.get('endpoint', b'?'),
                    'its key is not authorised'
                    if event['event'] == zmq.EVENT_HANDSHAKE_FAILED_AUTH
                    else 'security handshake failed (plaintext or wrong server key?)',
                    count,
                )

    def _on_messages(self) -> None:
        for _ in range(256):  # bounded batch, so replies are flushed between batches
            try:
                frames = self._socket.recv_multipart(flags=zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            if len(frames) < 2:
                self._count_malformed('a message without a routing identity or header')
                continue
            identity = frames[0].bytes
            self._on_message(identity, [frame.buffer for frame in frames[1:]])

    def _count_malformed(self, what: str) -> None:
        with self._lock:
            self._counters['malformed'] += 1
            count = self._counters['malformed']
        if _should_log(count):
            _logger.warning('rejected %s (%d malformed messages so far)', what, count)

    def _on_message(self, identity: bytes, buffers: list[memoryview]) -> None:
        try:
            message = protocol.decode(buffers, max_message_bytes=self.config.max_message_bytes)
        except protocol.ProtocolError as error:
            self._count_malformed(f'a message: {error}')
            self._send(identity, protocol.error_message(0, error.code, error.message))
            return
        now = time.monotonic()
        with self._lock:
            session = self._sessions.get(identity)
            if session is not None:
                session.last_seen = now
        if message.type == protocol.HELLO:
            self._on_hello(identity, message, now)
        elif message.type == protocol.BYE:
            self._close_session(identity, 'said bye')
        elif session is None:
            self._send(
                identity,
                protocol.error_message(
                    message.request_id, protocol.E_NO_SESSION, 'no session: send hello first'
                ),
            )
        elif message.type == protocol.PING:
            self._send(identity, protocol.Message(protocol.PONG, message.request_id))
        elif message.type == protocol.CALL:
            self._on_call(session, message, now)
        else:
            self._count_malformed(f'an unexpected {message.type} message')
            self._send(
                identity,
                protocol.error_message(
                    message.request_id,
                    protocol.E_BAD_REQUEST,
                    f'{message.type} is not a request',
                ),
            )

    def _on_hello(self, identity: bytes, message: protocol.Message, now: float) -> None:
        name = message.fields.get('client_name')
        name = name if isinstance(name, str) and name else 'robot'
        with self._lock:
            session = self._sessions.get(identity)
            if session is None:
                if len(self._sessions) >= self.config.max_clients:
                    self._counters['rejected'] += 1
                    refused = True
                else:
                    refused = False
                    self._session_numbers += 1
                    session = _Session(
                        session_id=f'{name[:64]}#{self._session_numbers}',
                        identity=identity,
                        client_name=name[:64],
                        last_seen=now,
                    )
                    self._sessions[identity] = session
                    _logger.info('session %s opened', session.session_id)
            else:
                refused = False
        if refused:
            self._send(
                identity,
                protocol.error_message(
                    0,
                    protocol.E_SERVER_FULL,
                    f'server full: {self.config.max_clients} robots connected',
                ),
            )
            return
        self._send(
            identity,
            protocol.Message(
                protocol.WELCOME,
                0,
                {
                    'server_id': self.config.server_id,
                    'session_id': session.session_id,
                    'models': list(self.config.models),
                    'modes': list(self._modes),
                    'max_inflight': self.config.max_inflight_per_client,
                    'max_message_bytes': self.config.max_message_bytes,
                },
            ),
        )

    def _on_call(self, session: _Session, message: protocol.Message, received: float) -> None:
        request_id = message.request_id
        mode_name = message.fields.get('mode')
        op = message.fields.get('op')
        args = message.fields.get('args', {})
        if not isinstance(mode_name, str) or not isinstance(op, str) or not isinstance(args, dict):
            self._reject(session, request_id, protocol.E_BAD_REQUEST, 'call needs mode, op, args')
            return
        mode = self._modes.get(mode_name)
        if mode is None:
            self._reject(
                session,
                request_id,
                protocol.E_UNKNOWN_MODE,
                f'mode {mode_name!r} is not served here; modes: {sorted(self._modes)}',
            )
            return
        with self._lock:
            if session.inflight >= self.config.max_inflight_per_client:
                self._counters['rejected'] += 1
                busy = True
            else:
                busy = False
                session.inflight += 1
                self._counters['requests'] += 1
                state_missing = mode_name not in session.mode_states
        if busy:
            self._send(
                session.identity,
                protocol.error_message(
                    request_id,
                    protocol.E_BUSY,
                    f'{self.config.max_inflight_per_client} requests already in flight',
                ),
            )
            return
        if state_missing:
            session.mode_states[mode_name] = mode.open_session(session.session_id)
        call = ServerCall(op, args, message.tensors, session.session_id, request_id)
        try:
            self._pool.submit(self._work, session, mode, call, received)
        except RuntimeError:  # pool shut down: the server is stopping
            with self._lock:
                session.inflight -= 1
            self._send(
                session.identity,
                protocol.error_message(request_id, protocol.E_SHUTTING_DOWN, 'server stopping'),
            )

    def _reject(self, session: _Session, request_id: int, code: str, text: str) -> None:
        with self._lock:
            self._counters['errors'] += 1
        self._send(session.identity, protocol.error_message(request_id, code, text))

    def _work(self, session: _Session, mode: ServerMode, call: ServerCall, received: float):
        """Run one call on a worker thread and queue its reply, or defer it to a future."""
        try:
            outcome = mode.handle(session.mode_states.get(mode.name), call)
        except Exception as error:  # noqa: BLE001 - answered with an ERROR below
            outcome = error
        except BaseException:
            with self._lock:
                session.inflight -= 1
            raise
        if isinstance(outcome, concurrent.futures.Future):
            self._defer(session, mode, call, received, outcome)
            return
        frames = self._reply_frames(session, mode, call, received, outcome)
        with self._lock:
            session.inflight -= 1
            self._outbox.append([session.identity, *frames])
        self._wake()

    def _defer(
        self,
        session: _Session,
        mode: ServerMode,
        call: ServerCall,
        received: float,
        future: concurrent.futures.Future,
    ) -> None:
        """Send the reply when ``future`` completes; the call stays in flight until then."""
        with self._lock:
            session_open = (
                not self._stopping.is_set() and self._sessions.get(session.identity) is session
            )
            if session_open:
                session.deferred.add(future)
            else:
                session.inflight -= 1
        if not session_open:
            future.cancel()  # nobody to answer; a result that still comes is dropped
            return
        future.add_done_callback(
            functools.partial(self._on_deferred_done, session, mode, call, received)
        )

    def _on_deferred_done(
        self,
        session: _Session,
        mode: ServerMode,
        call: ServerCall,
        received: float,
        future: concurrent.futures.Future,
    ) -> None:
        """Queue the reply of a completed deferred call (runs on the completing thread)."""
        with self._lock:
            if future not in session.deferred:
                return  # the session closed or the server stopped: drop the result
        outcome: ServerReply | BaseException
        if future.cancelled():
            outcome = RuntimeError('the mode cancelled its deferred reply')
        else:
            error = future.exception()
            outcome = error if error is not None else future.result()
        frames = self._reply_frames(session, mode, call, received, outcome)
        with self._lock:
            if future not in session.deferred:
                return  # closed while the reply was encoded
            session.deferred.discard(future)
            session.inflight -= 1
            self._outbox.append([session.identity, *frames])
        self._wake()

    def _reply_frames(
        self,
        session: _Session,
        mode: ServerMode,
        call: ServerCall,
        received: float,
        outcome: ServerReply | BaseException,
    ) -> list:
        """Encode a mode's reply (or what it raised) as REPLY or ERROR frames."""
        try:
            if isinstance(outcome, BaseException):
                raise outcome
            reply = outcome
            answer = protocol.Message(
                protocol.REPLY,
                call.request_id,
                {
                    'args': reply.fields,
                    'compute_s': reply.compute_time_s,
                    'server_s': time.monotonic() - received,
                },
                reply.tensors,
            )
            frames = protocol.encode(answer)
            size = protocol.frames_nbytes(frames)
            if size > self.config.max_message_bytes:
                raise protocol.ProtocolError(
                    protocol.E_TOO_LARGE,
                    f'reply is {size} bytes; max_message_bytes is {self.config.max_message_bytes}',
                )
            if reply.model:
                with self._lock:
                    samples = self._latencies.setdefault(
                        reply.model, collections.deque(maxlen=_LATENCY_SAMPLES)
                    )
                    samples.append(reply.compute_time_s)
                    self._counters[f'model:{reply.model}'] += 1
        except protocol.ProtocolError as error:
            with self._lock:
                self._counters['errors'] += 1
            frames = protocol.encode(
                protocol.error_message(call.request_id, error.code, error.message)
            )
        except BaseException as error:  # noqa: BLE001 - one bad request must not stop the server
            _logger.error(
                'session %s: %s call failed',
                session.session_id,
                mode.name,
                exc_info=(type(error), error, error.__traceback__),
            )
            with self._lock:
                self._counters['errors'] += 1
            frames = protocol.encode(
                protocol.error_message(
                    call.request_id, protocol.E_INTERNAL, f'{type(error).__name__}: {error}'
                )
            )
        return frames

    def _send(self, identity: bytes, message: protocol.Message) -> None:
        with self._lock:
            self._outbox.append([identity, *protocol.encode(message)])

    def _flush_outbox(self) -> None:
        while True:
            with self._lock:
                if not self._outbox:
                    return
                frames = self._outbox.popleft()
            try:
                self._socket.send_multipart(frames, flags=zmq.NOBLOCK, copy=False)
            except zmq.ZMQError as error:
                # The robot is gone (EHOSTUNREACH) or not reading (EAGAIN): drop the reply.
                _logger.debug('dropped a reply: %s', error)

    def _expire_sessions(self) -> None:
        cutoff = time.monotonic() - self.config.session_timeout_s
        with self._lock:
            # Deferred calls do not keep a silent session: expiring cancels them.
            idle = [
                identity
                for identity, session in self._sessions.items()
                if session.last_seen < cutoff and session.inflight == len(session.deferred)
            ]
        for identity in idle:
            self._close_session(identity, f'silent for {self.config.session_timeout_s:.0f} s')

    def _close_session(self, identity: bytes, why: str) -> None:
        with self._lock:
            session = self._sessions.pop(identity, None)
            deferred = _detach_deferred(session) if session is not None else []
        for future in deferred:
            future.cancel()  # a result that still comes is dropped
        if session is not None:
            _logger.info('session %s closed: %s', session.session_id, why)
            self._close_session_states(session)

    def _close_session_states(self, session: _Session) -> None:
        for mode_name, state in session.mode_states.items():
            try:
                self._modes[mode_name].close_session(state)
            except Exception:  # noqa: BLE001 - closing one mode must not skip the others
                _logger.exception('closing %s state of %s failed', mode_name, session.session_id)


def _detach_deferred(session: _Session) -> list[concurrent.futures.Future]:
    """Take a closing session's deferred calls out of flight (call with the server lock)."""
    deferred = list(session.deferred)
    session.deferred.clear()
    session.inflight -= len(deferred)
    return deferred


def _percentile(ordered: list[float], fraction: float) -> float:
    if not ordered:
        return math.nan
    index = min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))
    return ordered[index]


def _should_log(count: int) -> bool:
    """Log the first ten occurrences, then every hundredth (no log floods)."""
    return count <= 10 or count % 100 == 0


# ---------------------------------------------------------------------------------------
# Headless console script.

NODE_NAME = 'edge_server'
# Parameters of the ROS node that the headless server does not use.
NODE_ONLY_PARAMETERS = frozenset({'diagnostics_period_s'})


def load_params_file(path: str | Path, node_name: str) -> dict[str, Any]:
    """Return ``node_name``'s ``ros__parameters`` from a ROS 2 parameter YAML file."""
    sections = load_parameter_file(path)
    if node_name not in sections and WILDCARD not in sections:
        raise ParameterFileError(f'{path} has no ros__parameters for {node_name}')
    return node_parameters(sections, node_name)


def main(argv: list[str] | None = None) -> int:
    """Run an edge server without ROS (console script ``edge_offload_server``)."""
    parser = argparse.ArgumentParser(
        prog='edge_offload_server',
        description='Serve models to offloading robots, without ROS (for benchmarks).',
    )
    parser.add_argument('--params-file', help='ROS 2 parameter YAML with an edge_server section')
    parser.add_argument('--endpoint', help='bind endpoint, e.g. tcp://0.0.0.0:5555')
    parser.add_argument('--models', help='comma-separated model names to load')
    parser.add_argument('--modes', help='comma-separated server modes to load')
    parser.add_argument('--secret-key-file', help='server NAME.key_secret file')
    parser.add_argument('--authorized-clients-dir', help='folder of authorised robot .key files')
    parser.add_argument('--allow-plaintext', action='store_true', help='serve without CURVE')
    parser.add_argument('--worker-threads', type=int)
    parser.add_argument('--torch-threads', type=int)
    parser.add_argument('--max-clients', type=int)
    parser.add_argument('--max-inflight-per-client', type=int)
    parser.add_argument('--max-message-bytes', type=int)
    parser.add_argument(
        '--stats-period-s', type=float, default=0.0, help='log load and latency every N s'
    )
    parser.add_argument('--log-level', default='INFO')
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format='[%(levelname)s] [%(name)s]: %(message)s'
    )
    values: dict[str, Any] = {}
    try:
        if args.params_file:
            values = load_params_file(args.params_file, NODE_NAME)
            for name in NODE_ONLY_PARAMETERS:
                values.pop(name, None)
        overrides = {
            'endpoint': args.endpoint,
            'models': args.models.split(',') if args.models else None,
            'modes': args.modes.split(',') if args.modes else None,
            'secret_key_file': args.secret_key_file,
            'authorized_clients_dir': args.authorized_clients_dir,
            'worker_threads': args.worker_threads,
            'torch_threads': args.torch_threads,
            'max_clients': args.max_clients,
            'max_inflight_per_client': args.max_inflight_per_client,
            'max_message_bytes': args.max_message_bytes,
        }
        values.update({key: value for key, value in overrides.items() if value is not None})
        if args.allow_plaintext:
            values.update(security='plaintext', allow_plaintext=True)
        config = ServerConfig.from_mapping(values)
        server = EdgeServer(config)
        endpoint = server.start()
    except (ValueError, KeyError, OSError, KeyFileError) as error:
        _logger.error('cannot start the edge server: %s', error)
        return 1
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    print(f'edge_server listening on {endpoint}', flush=True)  # noqa: T201 - for scripts
    try:
        while not stop.wait(args.stats_period_s or 3600.0):
            if args.stats_period_s:
                _logger.info('stats: %s', asdict(server.stats()))
    finally:
        server.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
