# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""GPU end of the wire protocol: sessions, limits, and the server halves of the modes.

``EdgeServer`` binds a ZeroMQ ROUTER socket. Each robot says HELLO and gets an isolated
session: its own per-mode state and its own in-flight budget. CALLs run on worker threads
fed by a ``FairScheduler`` (least worker time first, one worker kept free for the other
robots while several are connected); the I/O thread only moves frames, answers PINGs at
once (so RTT probes do not wait behind inference) and answers every malformed, oversized
or unexpected message with an ERROR. No exception raised by one message ends the serving
loop: it is answered with ``invalid_input`` and the reason, logged (rate-limited), and
serving goes on. ``serving`` is true only while the I/O thread is alive; ``failure`` says
why it ended if it ever does, and ``restart`` brings it back.

A mode may defer its reply: ``handle`` returns a ``concurrent.futures.Future`` and the
worker is free at once; the reply is sent when the future completes (from any thread), and
the call counts against the session's in-flight budget until then. A session that closes
or expires, or a server that stops, cancels its deferred calls' futures (a result that
still comes is dropped).

Limits. Each robot is known by its CURVE public key (its ZAP user id).

* before login: ``handshake_timeout_s`` closes a connection that has not finished the
  security handshake, and the process's open-file limit is raised to its hard limit at
  start, so idle connections cannot lock real robots out;
* sessions: ``max_clients`` in all and ``max_sessions_per_key`` per key (HELLO beyond
  them gets ``server_full``, unless a session of the same key has been silent for
  ``stale_session_s``: a restarted robot takes over its old session's slot; the same
  client instance reconnecting takes over its own session);
* calls: ``max_inflight_per_client`` per session and ``max_inflight_per_key`` per key,
  ``max_bytes_per_s_per_key`` of received payload per key (a token bucket), and
  ``max_batch_per_call`` on the batch a mode says a call carries; past any of them the
  call is answered ``busy`` or ``too_large`` with the limit named;
* messages: ``max_message_bytes`` in either direction (the socket drops larger frames
  before they are buffered);
* replies: a robot that does not read its replies gets them queued, up to
  ``max_pending_replies_per_client``; past that its session is closed and the drop is
  counted and logged. Replies are never dropped silently.

Sessions silent for ``session_timeout_s`` are closed (once no call of theirs is running
on a worker; deferred calls do not keep a silent session open). With ``security='curve'``
only robots whose public key file is in ``authorized_clients_dir`` complete the
handshake; others are refused by ZeroMQ's authentication handler and logged.
``edge_offload_server`` (``main``) runs it headless.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import functools
import json
import logging
import math
import signal
import socket
import statistics
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
import yaml
import zmq
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils.monitor import recv_monitor_message

from edge_offload import protocol
from edge_offload.fair_scheduler import FairScheduler, QueueFullError, SchedulerClosedError
from edge_offload.keys import (
    KeyFileError,
    expand_path,
    load_secret_key_pair,
    validate_transport,
)
from edge_offload.models import ModelCache
from edge_offload.modes.base import (
    ModeStatus,
    ServerCall,
    ServerMode,
    ServerModeContext,
    ServerReply,
    available_server_modes,
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
# How long ``stop`` waits for calls still running on workers.
_WORKER_JOIN_S = 5.0
_IO_JOIN_S = 5.0  # the I/O thread notices a stop within one 100 ms poll, unless loaded


@dataclass
class ServerConfig:
    """Settings of an edge server (also the ROS parameters of the edge_server node)."""

    endpoint: str = 'tcp://127.0.0.1:5555'
    server_id: str = 'edge_server'
    models: list[str] = field(default_factory=lambda: ['tiny_cnn'])
    modes: list[str] = field(default_factory=lambda: ['nnto'])
    # Settings of server modes, by mode name (e.g. ``{'arise': {'policy': 'planned'}}``);
    # each mode validates its own.
    mode_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    security: str = 'curve'
    allow_plaintext: bool = False
    secret_key_file: str = '~/.local/share/edge_offload/keys/server.key_secret'  # noqa: S105
    authorized_clients_dir: str = '~/.local/share/edge_offload/keys/authorized_clients'
    max_clients: int = 16
    max_sessions_per_key: int = 4
    max_inflight_per_client: int = 4
    max_inflight_per_key: int = 8
    max_bytes_per_s_per_key: float = 256e6
    max_batch_per_call: int = 32
    max_message_bytes: int = protocol.DEFAULT_MAX_MESSAGE_BYTES
    max_pending_replies_per_client: int = 256
    worker_threads: int = 2
    torch_threads: int = 0
    session_timeout_s: float = 10.0
    stale_session_s: float = 2.0
    handshake_timeout_s: float = 2.0

    def validate(self) -> None:
        """Raise ValueError if a setting is invalid."""
        validate_transport(self.endpoint, self.security, self.allow_plaintext)
        if not self.models and not self.modes:
            raise ValueError('a server needs models to serve, or modes that need none')
        stray = sorted(set(self.mode_options) - set(self.modes))
        if stray:
            raise ValueError(f'mode_options for modes this server does not serve: {stray}')
        for name in (
            'max_clients',
            'max_sessions_per_key',
            'max_inflight_per_client',
            'max_inflight_per_key',
            'max_batch_per_call',
            'max_pending_replies_per_client',
            'worker_threads',
        ):
            if getattr(self, name) < 1:
                raise ValueError(f'{name} must be >= 1')
        if self.max_inflight_per_key < self.max_inflight_per_client:
            raise ValueError(
                f'max_inflight_per_key ({self.max_inflight_per_key}) must be >= '
                f'max_inflight_per_client ({self.max_inflight_per_client}): one session of a '
                'key may use its whole budget'
            )
        if self.max_message_bytes < 1024:
            raise ValueError('max_message_bytes must be >= 1024')
        for name in ('session_timeout_s', 'stale_session_s', 'handshake_timeout_s'):
            if not getattr(self, name) > 0:
                raise ValueError(f'{name} must be > 0')
        if self.torch_threads < 0 or self.max_bytes_per_s_per_key < 0:
            raise ValueError('torch_threads and max_bytes_per_s_per_key must be >= 0')

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> ServerConfig:
        """Build a config from a parameter map; unknown keys are an error."""
        known = {item.name for item in fields(cls)}
        values = dict(values)
        # ``<mode>.<option>`` (as ROS parameters name them) goes to that mode's options. A
        # parameter file may set the options of a registered mode it does not serve (the
        # node declares them all); those are not this server's and are left out.
        modes = values.get('modes', cls().modes)
        options = {name: dict(opts) for name, opts in values.pop('mode_options', {}).items()}
        dotted = [key for key in values if '.' in key]
        registered = set(available_server_modes()) if dotted else set()
        for key in dotted:
            mode, _, option = key.partition('.')
            if mode in modes and option:
                options.setdefault(mode, {})[option] = values.pop(key)
            elif mode in registered and option:
                del values[key]
        values['mode_options'] = options
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
    replies_undelivered_total: int
    queued: int
    uptime_s: float
    models: dict[str, ModelLatency]


@dataclass
class _Session:
    session_id: str
    identity: bytes
    client_name: str
    last_seen: float
    key: str = ''
    instance: str = ''
    inflight: int = 0
    mode_states: dict[str, Any] = field(default_factory=dict)
    # Futures of deferred replies still to send; each also counts in ``inflight``.
    deferred: set[concurrent.futures.Future] = field(default_factory=set)


@dataclass
class _QueuedCall:
    """A CALL accepted for a worker."""

    session: _Session
    mode: ServerMode
    call: ServerCall
    received: float


class _TokenBucket:
    """Bytes a robot key may send: ``rate`` per second, bursts up to ``capacity``."""

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.tokens = capacity
        self.updated = now

    def take(self, amount: float, now: float) -> bool:
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if amount > self.tokens:
            return False
        self.tokens -= amount
        return True


class _LogThrottle:
    """Let each kind of event be logged at most once per ``period_s``, counting the rest."""

    _MAX_KINDS = 256

    def __init__(self, period_s: float = 10.0) -> None:
        self.period_s = period_s
        self._last: dict[str, float] = {}
        self._suppressed: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def allow(self, kind: str) -> tuple[bool, bool, int]:
        """Return (log it now, first time of this kind, occurrences not logged since)."""
        now = time.monotonic()
        with self._lock:
            last = self._last.get(kind)
            if last is not None and now - last < self.period_s:
                self._suppressed[kind] += 1
                return False, False, 0
            if last is None and len(self._last) >= self._MAX_KINDS:
                self._last.pop(next(iter(self._last)))
            self._last[kind] = now
            return True, last is None, self._suppressed.pop(kind, 0)


class EdgeServer:
    """Serve the configured models to many robots over one ROUTER socket."""

    def __init__(self, config: ServerConfig) -> None:
        config.validate()
        self.config = config
        if config.torch_threads:
            torch.set_num_threads(config.torch_threads)
        self.models = ModelCache(allowed=set(config.models))
        self.models.preload(config.models)  # unknown model names fail here, at configure
        self._modes: dict[str, ServerMode] = {}
        for name in config.modes:
            mode_context = ServerModeContext(
                models=self.models, logger=_logger, options=dict(config.mode_options.get(name, {}))
            )
            self._modes[name] = load_server_mode_class(name)(mode_context)
        if not config.models and any(mode.needs_models for mode in self._modes.values()):
            raise ValueError(
                'models must name at least one model: modes '
                f'{sorted(n for n, m in self._modes.items() if m.needs_models)} run models'
            )
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
        # Replies to robots that are not reading, in order, waiting for room in their pipe.
        self._blocked: dict[bytes, collections.deque[list]] = {}
        self._buckets: dict[str, _TokenBucket] = {}
        self._latencies: dict[str, collections.deque[float]] = {}
        self._counters = collections.Counter()
        self._throttle = _LogThrottle()
        self._scheduler: FairScheduler[_QueuedCall] | None = None
        self._workers: list[threading.Thread] = []
        self._context: zmq.Context | None = None
        self._socket: zmq.Socket | None = None
        self._monitor: zmq.Socket | None = None
        self._auth: ThreadAuthenticator | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._wake_reader: socket.socket | None = None
        self._wake_writer: socket.socket | None = None
        self._started_at = 0.0
        self._failure: str | None = None
        self.endpoint = ''

    # -- life cycle ------------------------------------------------------------------

    def served_mode(self, name: str) -> ServerMode:
        """Return the instance of server mode ``name`` this server serves (KeyError if none).

        For the process that embeds the server: a fleet manager feeding a mode its data,
        a replica reading a mode's load.
        """
        return self._modes[name]

    def start(self) -> str:
        """Bind and start serving; return the bound endpoint (port 0 is resolved)."""
        if self.serving:
            return self.endpoint
        if self._thread is not None:
            self.stop()  # the I/O thread ended by itself: release what it left
        config = self.config
        _raise_open_file_limit()
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
        # A connection that has not finished the security handshake by then is closed:
        # idle pre-login connections hold a file descriptor only this long.
        sock.handshake_ivl = max(1, int(config.handshake_timeout_s * 1000))
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
            self._monitor.close(linger=0)
            self._stop_auth()
            self._context.term()
            self._context = None
            raise OSError(f'cannot bind edge server to {config.endpoint}: {error}') from None
        self._socket = sock
        self.endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._wake_reader.setblocking(False)
        self._wake_writer.setblocking(False)
        self._scheduler = FairScheduler(config.worker_threads, config.max_inflight_per_key)
        self._workers = [
            threading.Thread(
                target=self._worker_loop,
                args=(self._scheduler,),
                name=f'edge-server-worker-{index}',
                daemon=True,
            )
            for index in range(config.worker_threads)
        ]
        for worker in self._workers:
            worker.start()
        self._stopping.clear()
        self._failure = None
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
        self._thread.join(timeout=_IO_JOIN_S)
        # Terminating the context blocks until every socket is closed, and the I/O thread
        # closes its own as it exits: while it is still in a step, leave the context to
        # the process's exit rather than hang the shutdown (it was seen under load).
        io_thread_done = not self._thread.is_alive()
        self._thread = None
        # Queued calls are dropped; one already running (a model on a worker) cannot be
        # interrupted: its reply has nowhere to go, but it is waited for (a while) below,
        # since a process that exits with a thread inside a torch kernel aborts.
        if self._scheduler is not None:
            self._scheduler.close()
            self._scheduler = None
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
            deferred = [future for session in sessions for future in _detach_deferred(session)]
            self._outbox.clear()
            self._blocked.clear()
            self._buckets.clear()
        for future in deferred:
            future.cancel()
        for session in sessions:
            self._close_session_states(session)
        for mode in self._modes.values():
            try:
                mode.stop()
            except Exception as error:  # noqa: BLE001 - one mode must not block the stop
                self._log_failure(f'stopping mode {mode.name}', error)
        self._stop_auth()
        for sock in (self._wake_reader, self._wake_writer):
            if sock is not None:
                sock.close()
        self._wake_reader = self._wake_writer = None
        if self._context is not None:
            if io_thread_done:
                self._context.term()
            else:
                _logger.warning(
                    'edge server %s: the I/O thread did not stop within %.0f s; its sockets '
                    'are left to the process exit',
                    self.config.server_id,
                    _IO_JOIN_S,
                )
            self._context = None
        deadline = time.monotonic() + _WORKER_JOIN_S
        for worker in self._workers:
            worker.join(timeout=max(0.0, deadline - time.monotonic()))
        busy = sum(worker.is_alive() for worker in self._workers)
        self._workers = []
        if busy:
            _logger.warning(
                'edge server %s stopped with %d call(s) still running after %.0f s',
                self.config.server_id,
                busy,
                _WORKER_JOIN_S,
            )
        _logger.info('edge server %s stopped', self.config.server_id)

    def restart(self) -> str:
        """Stop (after a failure, say) and serve again on the configured endpoint."""
        self.stop()
        return self.start()

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
        """Return whether the I/O thread is alive and serving (not merely created)."""
        thread = self._thread
        return thread is not None and thread.is_alive() and not self._stopping.is_set()

    @property
    def failure(self) -> str | None:
        """Return why serving ended by itself, or None (never started, serving, stopped)."""
        return self._failure

    def stats(self) -> ServerStats:
        """Return current load, counters and per-model latency."""
        with self._lock:
            models = {}
            for name, samples in self._latencies.items():
                ordered = sorted(samples)
                models[name] = ModelLatency(
                    count=self._counters[f'model:{name}'],
                    mean_s=statistics.fmean(ordered),
                    p50_s=percentile(ordered, 0.50),
                    p95_s=percentile(ordered, 0.95),
                    max_s=ordered[-1],
                )
            scheduler = self._scheduler
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
                replies_undelivered_total=self._counters['undelivered'],
                queued=scheduler.queued() if scheduler is not None else 0,
                uptime_s=time.monotonic() - self._started_at if self._started_at else 0.0,
                models=models,
            )

    def mode_diagnostics(self) -> list[ModeStatus]:
        """Return every served mode's statuses (a mode whose report fails says so)."""
        statuses: list[ModeStatus] = []
        for name, mode in list(self._modes.items()):
            try:
                statuses.extend(mode.diagnostics())
            except Exception as error:  # noqa: BLE001 - one mode's bug must not hide the rest
                _logger.exception('mode %s: diagnostics failed', name)
                statuses.append(
                    ModeStatus(f'{name} mode', 'error', f'diagnostics failed: {error}')
                )
        return statuses

    # -- I/O thread ------------------------------------------------------------------

    def _wake(self) -> None:
        writer = self._wake_writer
        if writer is None:
            return
        try:
            writer.send(b'\0')
        except (BlockingIOError, OSError):
            pass

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self._socket, zmq.POLLIN)
        poller.register(self._monitor, zmq.POLLIN)
        poller.register(self._wake_reader.fileno(), zmq.POLLIN)
        next_sweep = time.monotonic() + 1.0
        failures_in_a_row = 0
        try:
            while not self._stopping.is_set():
                try:
                    self._serve_once(poller)
                    if time.monotonic() >= next_sweep:
                        self._expire_sessions()
                        next_sweep = time.monotonic() + 1.0
                    failures_in_a_row = 0
                except zmq.ContextTerminated:
                    raise
                except Exception as error:  # noqa: BLE001 - serving goes on after one failure
                    failures_in_a_row += 1
                    self._log_failure('serving loop', error)
                    if failures_in_a_row >= 100:
                        raise  # failing on every turn: not one bad message; give up, loudly
                    time.sleep(min(0.01, 0.001 * failures_in_a_row))
        except Exception as error:  # noqa: BLE001 - say why serving stopped
            self._failure = f'{type(error).__name__}: {error}'
            _logger.exception('edge server I/O thread failed: not serving any more')
        finally:
            self._socket.disable_monitor()
            self._monitor.close(linger=0)
            self._socket.close(linger=0)

    def _serve_once(self, poller: zmq.Poller) -> None:
        events = dict(poller.poll(5 if self._blocked else 100))
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

    def _log_failure(self, where: str, error: BaseException) -> None:
        """Log an unexpected exception: a traceback the first time, then rate-limited."""
        kind = f'{where}: {type(error).__name__}'
        log_now, first, suppressed = self._throttle.allow(kind)
        if not log_now:
            return
        more = f' ({suppressed} more like it not logged)' if suppressed else ''
        _logger.error(
            '%s failed: %s: %s%s',
            where,
            type(error).__name__,
            error,
            more,
            exc_info=(type(error), error, error.__traceback__) if first else None,
        )

    def _on_monitor_events(self) -> None:
        while True:
            try:
                event = recv_monitor_message(self._monitor, flags=zmq.NOBLOCK)
            except zmq.Again:
                return
            kind = event['event']
            if kind == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
                # Closed or timed out before finishing the handshake: a port scan, a robot
                # that went away mid-handshake, or idle connections holding descriptors.
                counter, level = 'handshakes_incomplete', logging.INFO
                why = (
                    'a connection closed or timed out before finishing the security '
                    f'handshake (limit {self.config.handshake_timeout_s:g} s)'
                )
            elif kind == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                counter, level = 'auth_failures', logging.WARNING
                why = 'refused a robot: its key is not authorised'
            else:
                counter, level = 'auth_failures', logging.WARNING
                why = f'refused a connection: {_handshake_protocol_error(event["value"])}'
            with self._lock:
                self._counters[counter] += 1
                count = self._counters[counter]
            # Time-based: a flood of idle connections must not flood the log too.
            if self._throttle.allow(f'handshake: {why}')[0]:
                _logger.log(
                    level, '%s on %s (%d so far)', why, _text(event.get('endpoint')), count
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
            try:
                self._on_message(
                    identity, _peer_key(frames[1]), [frame.buffer for frame in frames[1:]]
                )
            except Exception as error:  # noqa: BLE001 - one message must not stop serving
                self._on_message_failed(identity, 0, error)

    def _count_malformed(self, what: str) -> None:
        with self._lock:
            self._counters['malformed'] += 1
            count = self._counters['malformed']
        if _should_log(count):
            _logger.warning('rejected %s (%d malformed messages so far)', what, count)

    def _on_message_failed(self, identity: bytes, request_id: int, error: Exception) -> None:
        """Answer a message whose handling raised, log it (rate-limited) and go on."""
        with self._lock:
            self._counters['errors'] += 1
        self._log_failure('handling a message', error)
        self._send(
            identity,
            protocol.error_message(
                request_id,
                protocol.E_INVALID_INPUT,
                f'the server could not handle this message: {type(error).__name__}: {error}',
            ),
        )

    def _on_message(self, identity: bytes, key: str, buffers: list[memoryview]) -> None:
        try:
            message = protocol.decode(buffers, max_message_bytes=self.config.max_message_bytes)
        except protocol.ProtocolError as error:
            self._count_malformed(f'a message: {error}')
            self._send(identity, protocol.error_message(0, error.code, error.message))
            return
        try:
            self._dispatch(identity, key, message)
        except protocol.ProtocolError as error:
            self._count_malformed(f'a {message.type} message: {error}')
            self._send(
                identity, protocol.error_message(message.request_id, error.code, error.message)
            )
        except Exception as error:  # noqa: BLE001 - one message must not stop serving
            self._on_message_failed(identity, message.request_id, error)

    def _dispatch(self, identity: bytes, key: str, message: protocol.Message) -> None:
        now = time.monotonic()
        with self._lock:
            session = self._sessions.get(identity)
            if session is not None:
                session.last_seen = now
        if message.type == protocol.HELLO:
            self._on_hello(identity, key, message, now)
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

    def _on_hello(self, identity: bytes, key: str, message: protocol.Message, now: float) -> None:
        name = message.fields.get('client_name')
        name = name[:64] if isinstance(name, str) and name else 'robot'
        instance = message.fields.get('instance')
        instance = instance[:64] if isinstance(instance, str) else ''
        config = self.config
        replaced: _Session | None = None
        refusal = ''
        with self._lock:
            session = self._sessions.get(identity)
            if session is None and instance:
                session = self._take_over_own_session(identity, key, instance, now)
            if session is None:
                same_key = [other for other in self._sessions.values() if other.key == key]
                if len(same_key) >= config.max_sessions_per_key:
                    refusal = f'{config.max_sessions_per_key} sessions of this robot key open'
                elif len(self._sessions) >= config.max_clients:
                    refusal = f'{config.max_clients} robots connected'
                if refusal:
                    # A restarted robot takes over the slot of its own silent session.
                    replaced = self._stale_session(same_key, now)
                    if replaced is not None:
                        refusal = ''
                        del self._sessions[replaced.identity]
                        deferred = _detach_deferred(replaced)
                if refusal:
                    self._counters['rejected'] += 1
                else:
                    self._session_numbers += 1
                    session = _Session(
                        session_id=f'{name}#{self._session_numbers}',
                        identity=identity,
                        client_name=name,
                        last_seen=now,
                        key=key,
                        instance=instance,
                    )
                    self._sessions[identity] = session
                    self._scheduler.connect(key)
                    _logger.info('session %s opened', session.session_id)
        if replaced is not None:
            for future in deferred:
                future.cancel()
            self._scheduler.disconnect(replaced.key)
            _logger.info(
                'session %s closed: replaced by %s of the same robot key (silent %.1f s)',
                replaced.session_id,
                session.session_id,
                now - replaced.last_seen,
            )
            self._close_session_states(replaced)
        if refusal:
            self._send(
                identity,
                protocol.error_message(0, protocol.E_SERVER_FULL, f'server full: {refusal}'),
            )
            return
        self._send(
            identity,
            protocol.Message(
                protocol.WELCOME,
                0,
                {
                    'server_id': config.server_id,
                    'session_id': session.session_id,
                    'models': list(config.models),
                    'modes': list(self._modes),
                    'max_inflight': config.max_inflight_per_client,
                    'max_message_bytes': config.max_message_bytes,
                },
            ),
        )

    def _take_over_own_session(
        self, identity: bytes, key: str, instance: str, now: float
    ) -> _Session | None:
        """Move this client instance's session to its new connection (lock held)."""
        for old_identity, session in self._sessions.items():
            if session.key == key and session.instance == instance:
                del self._sessions[old_identity]
                self._blocked.pop(old_identity, None)
                session.identity = identity
                session.last_seen = now
                self._sessions[identity] = session
                _logger.info('session %s moved to a new connection', session.session_id)
                return session
        return None

    def _stale_session(self, sessions: list[_Session], now: float) -> _Session | None:
        """Return the longest-silent idle session of ``sessions`` past stale_session_s."""
        stale = [
            session
            for session in sessions
            if now - session.last_seen >= self.config.stale_session_s
            and session.inflight == len(session.deferred)
        ]
        return min(stale, key=lambda session: session.last_seen, default=None)

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
        call = ServerCall(op, args, message.tensors, session.session_id, request_id)
        config = self.config
        batch = mode.call_batch(call)
        if batch > config.max_batch_per_call:
            self._reject(
                session,
                request_id,
                protocol.E_TOO_LARGE,
                f'a batch of {batch} is more than this server takes in one call '
                f'(max_batch_per_call {config.max_batch_per_call})',
            )
            return
        refusal = self._admit(session, message.payload_bytes(), received)
        if refusal:
            self._send(
                session.identity, protocol.error_message(request_id, protocol.E_BUSY, refusal)
            )
            return
        if mode_name not in session.mode_states:
            session.mode_states[mode_name] = mode.open_session(session.session_id)
        try:
            self._scheduler.put(session.key, _QueuedCall(session, mode, call, received))
        except (QueueFullError, SchedulerClosedError) as error:
            with self._lock:
                session.inflight -= 1
            stopping = isinstance(error, SchedulerClosedError)
            self._send(
                session.identity,
                protocol.error_message(
                    request_id,
                    protocol.E_SHUTTING_DOWN if stopping else protocol.E_BUSY,
                    'server stopping' if stopping else f'queue full: {error}',
                ),
            )

    def _admit(self, session: _Session, payload_bytes: int, now: float) -> str:
        """Count the call in flight and return '', or return why it is refused (busy)."""
        config = self.config
        with self._lock:
            key_inflight = sum(
                other.inflight for other in self._sessions.values() if other.key == session.key
            )
            bucket = self._buckets.get(session.key)
            if bucket is None and config.max_bytes_per_s_per_key:
                capacity = max(config.max_message_bytes, config.max_bytes_per_s_per_key)
                bucket = self._buckets[session.key] = _TokenBucket(
                    config.max_bytes_per_s_per_key, capacity, now
                )
            if session.inflight >= config.max_inflight_per_client:
                refusal = f'{config.max_inflight_per_client} requests already in flight'
            elif key_inflight >= config.max_inflight_per_key:
                refusal = (
                    f'{config.max_inflight_per_key} requests of this robot key already in flight'
                )
            elif bucket is not None and not bucket.take(payload_bytes, now):
                refusal = (
                    f'this robot key sends more than '
                    f'{config.max_bytes_per_s_per_key / 1e6:g} MB/s (max_bytes_per_s_per_key)'
                )
            else:
                refusal = ''
                session.inflight += 1
                self._counters['requests'] += 1
            if refusal:
                self._counters['rejected'] += 1
        return refusal

    def _reject(self, session: _Session, request_id: int, code: str, text: str) -> None:
        with self._lock:
            self._counters['errors'] += 1
        self._send(session.identity, protocol.error_message(request_id, code, text))

    # -- workers ---------------------------------------------------------------------

    def _worker_loop(self, scheduler: FairScheduler[_QueuedCall]) -> None:
        while True:
            ticket = scheduler.take()
            if ticket is None:
                return
            try:
                self._work(ticket.item)
            except BaseException as error:  # noqa: BLE001 - a worker must outlive one call
                self._log_failure('worker', error)
            finally:
                scheduler.finish(ticket)

    def _session_open(self, session: _Session) -> bool:
        """Return whether ``session`` still serves (call with the lock held)."""
        return not self._stopping.is_set() and self._sessions.get(session.identity) is session

    def _work(self, queued: _QueuedCall) -> None:
        """Run one call on a worker thread and queue its reply, or defer it to a future."""
        session, mode, call, received = (
            queued.session,
            queued.mode,
            queued.call,
            queued.received,
        )
        with self._lock:
            if not self._session_open(session):
                session.inflight -= 1  # closed while queued: nobody to answer
                return
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
            if self._session_open(session):
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
            session_open = self._session_open(session)
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
            self._log_failure(f'a {mode.name} call (session {session.session_id})', error)
            with self._lock:
                self._counters['errors'] += 1
            frames = protocol.encode(
                protocol.error_message(
                    call.request_id, protocol.E_INTERNAL, f'{type(error).__name__}: {error}'
                )
            )
        return frames

    # -- replies -----------------------------------------------------------------------

    def _send(self, identity: bytes, message: protocol.Message) -> None:
        with self._lock:
            self._outbox.append([identity, *protocol.encode(message)])

    def _flush_outbox(self) -> None:
        # Robots that were not reading get their waiting replies first, in order.
        for identity in list(self._blocked):
            backlog = self._blocked[identity]
            while backlog and self._try_send(backlog[0]):
                backlog.popleft()
            if not backlog:
                del self._blocked[identity]
        while True:
            with self._lock:
                if not self._outbox:
                    return
                frames = self._outbox.popleft()
            identity = frames[0]
            if identity in self._blocked or not self._try_send(frames):
                self._hold_reply(identity, frames)

    def _try_send(self, frames: list) -> bool:
        """Send one reply; False if the robot's pipe is full (retry later)."""
        try:
            self._socket.send_multipart(frames, flags=zmq.NOBLOCK, copy=False)
        except zmq.Again:
            return False
        except zmq.ZMQError as error:
            why = (
                'the robot has disconnected'
                if error.errno == zmq.EHOSTUNREACH
                else f'cannot send: {error}'
            )
            self._count_undelivered(1, why)
        return True

    def _hold_reply(self, identity: bytes, frames: list) -> None:
        backlog = self._blocked.setdefault(identity, collections.deque())
        backlog.append(frames)
        limit = self.config.max_pending_replies_per_client
        if len(backlog) > limit:
            self._blocked.pop(identity, None)
            self._count_undelivered(
                len(backlog), f'the robot did not read its replies ({limit} waiting)'
            )
            self._close_session(identity, f'not reading its replies ({limit} waiting)')

    def _count_undelivered(self, count: int, why: str) -> None:
        with self._lock:
            self._counters['undelivered'] += count
            total = self._counters['undelivered']
        log_now, _, suppressed = self._throttle.allow(f'undelivered: {why}')
        if log_now:
            _logger.warning(
                'dropped %d repl%s: %s (%d undelivered in all)',
                count + suppressed,
                'y' if count + suppressed == 1 else 'ies',
                why,
                total,
            )

    # -- sessions ----------------------------------------------------------------------

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
            if self._scheduler is not None:
                self._scheduler.disconnect(session.key)
            _logger.info('session %s closed: %s', session.session_id, why)
            self._close_session_states(session)

    def _close_session_states(self, session: _Session) -> None:
        for mode_name, state in session.mode_states.items():
            try:
                self._modes[mode_name].close_session(state)
            except Exception:  # noqa: BLE001 - closing one mode must not skip the others
                _logger.exception('closing %s state of %s failed', mode_name, session.session_id)


def _peer_key(frame: zmq.Frame) -> str:
    """Return who sent ``frame``: its CURVE key (ZAP user id), else its address."""
    for name in ('User-Id', 'Peer-Address'):
        try:
            value = frame.get(name)
        except zmq.ZMQError:
            continue
        if value:
            return str(value)
    return 'anonymous'


def _handshake_protocol_error(code: int) -> str:
    """Say what a ZMTP handshake protocol error code means for an operator."""
    mismatch = getattr(zmq, 'PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH', None)
    crypto = getattr(zmq, 'PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC', None)
    if code == mismatch:
        return 'security mechanism mismatch (a plaintext robot on a CURVE server?)'
    if code == crypto:
        return "the robot's handshake did not decrypt (it has the wrong server key?)"
    return f'security handshake protocol error 0x{code:x}'


def _text(value: object) -> str:
    return value.decode(errors='replace') if isinstance(value, bytes) else str(value)


def _raise_open_file_limit() -> None:
    """Raise the soft open-file limit to the hard one: each connection holds a descriptor."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 16)
    target = min(target, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as error:
            _logger.warning('cannot raise the open-file limit from %d: %s', soft, error)
        else:
            _logger.info('open-file limit raised from %d to %d', soft, target)


def _detach_deferred(session: _Session) -> list[concurrent.futures.Future]:
    """Take a closing session's deferred calls out of flight (call with the server lock)."""
    deferred = list(session.deferred)
    session.deferred.clear()
    session.inflight -= len(deferred)
    return deferred


def percentile(ordered: list[float], fraction: float) -> float:
    """Return the nearest-rank ``fraction`` percentile of sorted ``ordered`` (nan if empty)."""
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
    """Return ``node_name``'s ``ros__parameters`` from a ROS 2 parameter YAML file.

    Nested mappings are flattened to dotted names, as ROS does (``arise: {max_batch: 4}``
    is the parameter ``arise.max_batch``).
    """
    sections = load_parameter_file(path)
    if node_name not in sections and WILDCARD not in sections:
        raise ParameterFileError(f'{path} has no ros__parameters for {node_name}')
    return _flatten(node_parameters(sections, node_name))


def _flatten(values: Mapping[str, Any], prefix: str = '') -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f'{prefix}{key}.'))
        else:
            flat[f'{prefix}{key}'] = value
    return flat


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
    parser.add_argument('--max-sessions-per-key', type=int)
    parser.add_argument('--max-inflight-per-client', type=int)
    parser.add_argument('--max-inflight-per-key', type=int)
    parser.add_argument('--max-bytes-per-s-per-key', type=float)
    parser.add_argument('--max-batch-per-call', type=int)
    parser.add_argument('--max-message-bytes', type=int)
    parser.add_argument('--handshake-timeout-s', type=float)
    parser.add_argument(
        '--mode-option',
        action='append',
        default=[],
        metavar='MODE.NAME=VALUE',
        help='a server mode option, e.g. arise.policy=reactive (repeatable; YAML values)',
    )
    parser.add_argument(
        '--stats-period-s', type=float, default=0.0, help='log load and latency every N s'
    )
    parser.add_argument(
        '--stats-file',
        type=Path,
        help="also append them, with the modes' statuses, as one JSON line per period "
        '(for benchmarks: it grows by a line each period)',
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
            'max_sessions_per_key': args.max_sessions_per_key,
            'max_inflight_per_client': args.max_inflight_per_client,
            'max_inflight_per_key': args.max_inflight_per_key,
            'max_bytes_per_s_per_key': args.max_bytes_per_s_per_key,
            'max_batch_per_call': args.max_batch_per_call,
            'max_message_bytes': args.max_message_bytes,
            'handshake_timeout_s': args.handshake_timeout_s,
        }
        values.update({key: value for key, value in overrides.items() if value is not None})
        for item in args.mode_option:
            key, separator, text = item.partition('=')
            if not separator or '.' not in key:
                raise ValueError(f'--mode-option {item!r}: expected MODE.NAME=VALUE')
            values[key] = yaml.safe_load(text)
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
    started = time.monotonic()
    try:
        while not stop.wait(args.stats_period_s or 3600.0):
            if args.stats_period_s:
                stats = asdict(server.stats())
                _logger.info('stats: %s', stats)
                if args.stats_file:
                    line = {
                        't': round(time.monotonic() - started, 3),
                        'stats': stats,
                        'modes': [asdict(status) for status in server.mode_diagnostics()],
                    }
                    with args.stats_file.open('a') as stream:
                        stream.write(json.dumps(line, default=str) + '\n')
    finally:
        server.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
