# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Robot end of the wire protocol: one authenticated connection to one edge server.

``EdgeClient`` owns a ZeroMQ DEALER socket on an I/O thread. Callers on any thread use
``call`` (one request, one reply, both with named tensors) or ``submit``, which queues the
request and returns a ``CallFuture`` at once, so one caller can keep many requests in
flight (a stream of tensor slices, a long-poll for the server's data). The I/O thread
sends, receives, answers the connection's life-cycle events, expires calls whose deadline
passed and sends a PING every ``ping_interval_s`` as the active RTT probe.

Connection life cycle (``connection_state.ConnectionLifecycle``, a pure state machine the
I/O thread feeds with events): the socket connects and reconnects by itself; the client
says HELLO after every successful transport handshake and, whenever it is not
``CONNECTED``, again every ``hello_retry_s`` (backing off up to 1 s after ``server_full``),
whether or not the transport dropped, and is ``CONNECTED`` once the server answers
WELCOME. So a robot that stalled, was refused or lost its session always gets back to
offloading once the server can serve it. HELLO carries ``client_name``, ``pid`` and
``instance``, a random token of this client object, so the server can tell a reconnect of
the same client from a new one. A lost connection, a failed CURVE handshake (the server
did not accept this robot's key, or its own key is not the one configured) or a server
that stays silent for ``liveness_timeout_s`` fails every pending call at once with
``ServerUnavailableError`` and moves the client out of ``CONNECTED``, so callers fall back
immediately instead of waiting for timeouts. A transport that stays up while HELLOs get
no answer is replaced. Messages are never queued for a server that is not connected
(``ZMQ_IMMEDIATE``), so nothing stale is sent after a reconnect.

Request timing (``set_request_timing``): a ``RequestTiming`` object can choose the time
limit of each call submitted without one (instead of ``request_timeout_s``) and is told
the round trip (sent to received) of every successful reply, on the I/O thread. That
includes late replies: the server keeps computing a call the client has given up on and
answers it, so the client remembers the last ``_MAX_GAVE_UP`` expired calls and reports
their replies with ``late=True`` (otherwise dropped, as before). A server slower than the
limit is measured that way, and the limit can grow to fit it. Calls that were cancelled,
or that were pending when the connection failed, are not remembered.
"""

from __future__ import annotations

import collections
import itertools
import logging
import math
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch
import zmq
from zmq.utils.monitor import recv_monitor_message

from edge_offload import protocol
from edge_offload.connection_state import (
    Action,
    ConnectionLifecycle,
    ConnectionState,
    FailPending,
    ResetTransport,
    SendHello,
    SetState,
)
from edge_offload.errors import (
    DeadlineMissedError,
    ErrorCode,
    OffloadCancelledError,
    OffloadError,
    ServerRejectedError,
    ServerUnavailableError,
)
from edge_offload.keys import load_public_key, load_secret_key_pair, validate_transport

if TYPE_CHECKING:
    from edge_offload.link_monitor import LinkEstimator

_logger = logging.getLogger(__name__)

# Wire error codes that describe the request itself, with the matching ErrorCode.
_REQUEST_ERRORS = {
    protocol.E_UNKNOWN_MODEL: ErrorCode.UNKNOWN_MODEL,
    protocol.E_INVALID_INPUT: ErrorCode.INVALID_INPUT,
    protocol.E_TOO_LARGE: ErrorCode.INPUT_TOO_LARGE,
}
_CANCEL_POLL_S = 0.02
_MAX_WAIT_S = 60.0  # one wait at most (Event.wait refuses very long timeouts)
_BYE_LINGER_MS = 200  # after BYE the socket waits this long at most for it to leave
_MAX_GAVE_UP = 256  # expired calls whose late replies are still measured


@dataclass
class ClientConfig:
    """Settings of one robot-to-server connection.

    With ``security='curve'`` (the default) both key files are required: this robot's
    ``NAME.key_secret`` and the server's public ``NAME.key``. ``security='plaintext'``
    (no authentication, no encryption) is refused unless ``allow_plaintext`` is set.
    """

    endpoint: str = 'tcp://127.0.0.1:5555'
    client_name: str = 'robot'
    security: str = 'curve'
    allow_plaintext: bool = False
    secret_key_file: str = ''
    server_public_key_file: str = ''
    max_message_bytes: int = protocol.DEFAULT_MAX_MESSAGE_BYTES
    request_timeout_s: float = 10.0
    ping_interval_s: float = 0.2
    liveness_timeout_s: float = 3.0
    hello_retry_s: float = 0.5
    max_pending_calls: int = 64
    reconnect_interval_s: float = 0.1
    # A restarted server is found within this long; a refused connect costs one SYN.
    reconnect_interval_max_s: float = 0.5

    def validate(self) -> None:
        """Raise ValueError if a setting is invalid."""
        validate_transport(self.endpoint, self.security, self.allow_plaintext)
        for name in (
            'request_timeout_s',
            'ping_interval_s',
            'liveness_timeout_s',
            'hello_retry_s',
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f'{name} must be > 0')
        if self.max_message_bytes < 1024 or self.max_pending_calls < 1:
            raise ValueError('max_message_bytes must be >= 1024 and max_pending_calls >= 1')


@dataclass
class CallReply:
    """A server's answer to ``EdgeClient.call`` and what the exchange cost."""

    fields: dict[str, Any]
    tensors: dict[str, torch.Tensor]
    bytes_up: int
    bytes_down: int
    server_time_s: float
    compute_time_s: float
    elapsed_s: float


class RequestTiming(Protocol):
    """Chooses the time limit of calls submitted without one and learns from replies.

    ``edge_offload.request_timeout.RequestTimeouts`` is one.
    """

    def timeout_for_call(self, mode: str, op: str, fields: Mapping[str, Any]) -> float:
        """Return the time limit (s, > 0) of a call submitted without ``timeout_s``."""

    def record_call(
        self, mode: str, op: str, fields: Mapping[str, Any], seconds: float, *, late: bool
    ) -> None:
        """Take the round trip of a successful reply (``late``: after the call expired)."""


@dataclass
class _PendingCall:
    frames: list
    bytes_up: int
    future: CallFuture
    deadline: float
    bytes_down: int = 0
    sent_at: float = 0.0
    received_at: float = 0.0
    handed_off: threading.Event | None = None
    # Another call shared the link during this one: its timing says little about bandwidth.
    overlapped: bool = False
    # What was asked (for request timing): the server mode, its op and the call's fields.
    mode: str = ''
    op: str = ''
    args: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class _GaveUp:
    """A call that expired after it was sent: its reply may still come, late."""

    mode: str
    op: str
    args: Mapping[str, Any]
    sent_at: float


StateListener = Callable[[ConnectionState, str], None]
DoneCallback = Callable[['CallFuture'], None]


class CallFuture:
    """The outcome of one CALL sent with ``EdgeClient.submit``: a reply or an error.

    It completes when the server answers, the connection fails, the call's deadline
    passes (the client's I/O thread expires it even if nobody waits), or it is cancelled.
    """

    def __init__(self, client: EdgeClient, request_id: int, timeout_s: float) -> None:
        self._client = client
        self._request_id = request_id
        self._timeout_s = timeout_s
        self._deadline = math.inf  # set by submit before the call is queued
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._reply: CallReply | None = None
        self._error: OffloadError | None = None
        self._callbacks: list[DoneCallback] = []

    @property
    def request_id(self) -> int:
        """Return the call's request id on the wire."""
        return self._request_id

    def done(self) -> bool:
        """Return whether the call completed (answered, failed, expired or cancelled)."""
        return self._done.is_set()

    def result(self, timeout: float | None = None) -> CallReply:
        """Wait for the reply and return it.

        ``timeout`` bounds only this wait: when it passes first, ``TimeoutError`` is raised
        and the call stays pending. The call's own deadline (``timeout_s`` of ``submit``)
        always applies.

        Raises:
            ServerUnavailableError: not connected, or the connection failed during the call.
            DeadlineMissedError: no reply within the call's ``timeout_s``.
            OffloadCancelledError: the call was cancelled.
            ServerRejectedError: the server answered with an error.
            TimeoutError: ``timeout`` passed before the call completed.

        """
        return self._wait(timeout, None)

    def cancel(self) -> bool:
        """Forget the call: its reply, if one comes, is dropped.

        Return True if the call was pending and is now cancelled (``result`` raises
        ``OffloadCancelledError``; done callbacks run on this thread), False if it had
        already completed.
        """
        return self._client._complete(
            self._request_id, error=OffloadCancelledError('request cancelled')
        )

    def add_done_callback(self, fn: DoneCallback) -> None:
        """Call ``fn(self)`` once when the call completes.

        ``fn`` runs on the thread that completes the call (the client's I/O thread for
        replies, failures and expired deadlines), or at once on this thread if the call has
        already completed. It must return quickly and must not wait for another call.
        Exceptions it raises are logged.
        """
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(fn)
                return
        self._run_callback(fn)

    def _wait(self, timeout: float | None, cancel: threading.Event | None) -> CallReply:
        limit = math.inf if timeout is None else time.monotonic() + timeout
        while True:
            now = time.monotonic()
            wait = min(self._deadline, limit) - now
            if cancel is not None:
                wait = min(wait, _CANCEL_POLL_S)
            if self._done.wait(min(max(0.0, wait), _MAX_WAIT_S)):
                break
            if cancel is not None and cancel.is_set():
                self.cancel()
                raise OffloadCancelledError('request cancelled')
            now = time.monotonic()
            if now >= self._deadline:
                self._client._expire(self)
                # Completed now, by this thread or by another that won the race.
                self._done.wait()
                break
            if now >= limit:
                raise TimeoutError(f'call {self._request_id} still pending after {timeout} s')
        if self._error is not None:
            raise self._error
        assert self._reply is not None  # noqa: S101 - one of them is set with done
        return self._reply

    def _set(self, reply: CallReply | None, error: OffloadError | None) -> None:
        with self._lock:
            self._reply = reply
            self._error = error
            callbacks, self._callbacks = self._callbacks, []
            self._done.set()
        for fn in callbacks:
            self._run_callback(fn)

    def _run_callback(self, fn: DoneCallback) -> None:
        try:
            fn(self)
        except Exception:  # noqa: BLE001 - a callback must not break the completing thread
            _logger.exception('done callback of edge call %d failed', self._request_id)


class EdgeClient:
    """An authenticated connection to one edge server, shared by every mode."""

    def __init__(self, config: ClientConfig, link: LinkEstimator | None = None) -> None:
        config.validate()
        self.config = config
        self.link = link
        self._context = zmq.Context()
        self._socket = self._make_socket()
        self._monitor = self._socket.get_monitor_socket()
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._wake_reader.setblocking(False)
        self._wake_writer.setblocking(False)
        self._lock = threading.Lock()
        self._outbox: collections.deque[tuple[int, list]] = collections.deque()
        self._pending: dict[int, _PendingCall] = {}
        # Expired calls whose late replies are measured, oldest first (bounded).
        self._gave_up: collections.OrderedDict[int, _GaveUp] = collections.OrderedDict()
        self._timing: RequestTiming | None = None
        self._next_deadline = math.inf  # earliest deadline of a pending call (or later)
        self._ids = itertools.count(1)
        self._state = ConnectionState.CONNECTING
        self._state_reason = f'connecting to {config.endpoint}'
        self._state_changed = threading.Condition(self._lock)
        self._listeners: list[StateListener] = []
        self._server_info: dict[str, Any] = {}
        self._pings: dict[int, float] = {}
        self._last_rx = 0.0
        self._instance = secrets.token_hex(8)
        # Fed by the I/O thread (and by close once that thread is gone).
        self._lifecycle_lock = threading.Lock()
        self._lifecycle = ConnectionLifecycle(
            config.endpoint,
            hello_retry_s=config.hello_retry_s,
            liveness_timeout_s=config.liveness_timeout_s,
            now=time.monotonic(),
        )
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name='edge-client-io', daemon=True)
        self._socket.connect(config.endpoint)
        self._thread.start()

    # -- public API -------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        """Return the connection state."""
        with self._lock:
            return self._state

    @property
    def state_reason(self) -> str:
        """Return why the client is in its state (for logs and status)."""
        with self._lock:
            return self._state_reason

    @property
    def instance(self) -> str:
        """Return this client object's random token (HELLO's ``instance`` field)."""
        return self._instance

    @property
    def server_info(self) -> dict[str, Any]:
        """Return the server's WELCOME fields (server id, models, modes, limits)."""
        with self._lock:
            return dict(self._server_info)

    @property
    def pending_calls(self) -> int:
        """Return how many calls are waiting for their reply."""
        with self._lock:
            return len(self._pending)

    def set_request_timing(self, timing: RequestTiming | None) -> None:
        """Let ``timing`` choose the limit of calls without one and measure replies.

        ``None`` goes back to ``request_timeout_s`` for every call.
        """
        with self._lock:
            self._timing = timing

    def add_state_listener(self, listener: StateListener) -> None:
        """Call ``listener(state, reason)`` on the I/O thread at every state change."""
        with self._lock:
            self._listeners.append(listener)

    def wait_connected(self, timeout_s: float) -> bool:
        """Block until connected or ``timeout_s`` passed; return whether connected."""
        deadline = time.monotonic() + timeout_s
        with self._state_changed:
            while self._state is not ConnectionState.CONNECTED:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._state is ConnectionState.CLOSED:
                    return False
                self._state_changed.wait(remaining)
            return True

    def submit(
        self,
        mode: str,
        op: str,
        fields: Mapping[str, Any] | None = None,
        tensors: Mapping[str, torch.Tensor] | None = None,
        *,
        timeout_s: float | None = None,
        handed_off: threading.Event | None = None,
    ) -> CallFuture:
        """Queue one CALL to ``mode``'s server half and return its future at once.

        Calls submitted from one thread are sent in that order. The call fails with
        ``DeadlineMissedError`` if no reply came within ``timeout_s`` (default: what the
        request timing chooses, else request_timeout_s), whether or not anyone waits for
        it. ``handed_off`` is set once the request has left this process's Python code
        (passed to the socket, or failed).

        Raises:
            ServerUnavailableError: not connected.
            OffloadError: the request is too large or too many calls are pending.

        """
        try:
            return self._submit(mode, op, fields, tensors, timeout_s, handed_off)
        except BaseException:
            if handed_off is not None:
                handed_off.set()
            raise

    def _submit(
        self,
        mode: str,
        op: str,
        fields: Mapping[str, Any] | None,
        tensors: Mapping[str, torch.Tensor] | None,
        timeout_s: float | None,
        handed_off: threading.Event | None,
    ) -> CallFuture:
        args = dict(fields or {})
        if timeout_s is None:
            timeout_s = self._default_timeout_s(mode, op, args)
        self._check_connected()
        body = {'mode': mode, 'op': op, 'args': args}
        request_id = next(self._ids)
        frames = protocol.encode(
            protocol.Message(protocol.CALL, request_id, body, dict(tensors or {}))
        )
        bytes_up = protocol.frames_nbytes(frames)
        if bytes_up > self.config.max_message_bytes:
            raise OffloadError(
                f'request is {bytes_up} bytes; max_message_bytes is '
                f'{self.config.max_message_bytes}',
                ErrorCode.INPUT_TOO_LARGE,
            )
        future = CallFuture(self, request_id, timeout_s)
        with self._lock:
            # Checked again under the lock: a failure in between fails only what is pending.
            self._check_connected_locked()
            if len(self._pending) >= self.config.max_pending_calls:
                raise OffloadError(
                    f'{len(self._pending)} calls already pending', ErrorCode.QUEUE_FULL
                )
            deadline = time.monotonic() + timeout_s
            future._deadline = deadline
            pending = _PendingCall(
                frames=frames,
                bytes_up=bytes_up,
                future=future,
                deadline=deadline,
                handed_off=handed_off,
                mode=mode,
                op=op,
                args=args,
            )
            if self._pending:
                pending.overlapped = True
                for other in self._pending.values():
                    other.overlapped = True
            self._pending[request_id] = pending
            self._next_deadline = min(self._next_deadline, deadline)
            self._outbox.append((request_id, frames))
        self._wake()
        return future

    def _default_timeout_s(self, mode: str, op: str, args: Mapping[str, Any]) -> float:
        with self._lock:
            timing = self._timing
        if timing is not None:
            timeout_s = timing.timeout_for_call(mode, op, args)
            if timeout_s > 0:  # also False for nan
                return timeout_s
        return self.config.request_timeout_s

    def _check_connected(self) -> None:
        with self._lock:
            self._check_connected_locked()

    def _check_connected_locked(self) -> None:
        if self._stopping.is_set():
            raise ServerUnavailableError('edge server not connected: client closed')
        if self._state is not ConnectionState.CONNECTED:
            raise ServerUnavailableError(f'edge server not connected: {self._state_reason}')

    def call(
        self,
        mode: str,
        op: str,
        fields: Mapping[str, Any] | None = None,
        tensors: Mapping[str, torch.Tensor] | None = None,
        *,
        timeout_s: float | None = None,
        cancel: threading.Event | None = None,
        handed_off: threading.Event | None = None,
    ) -> CallReply:
        """Send one CALL to ``mode``'s server half and wait for its reply.

        ``handed_off`` is set once the request has left this process's Python code (passed
        to the socket, or failed): a caller that waits in another thread can wait for it
        before it goes on with CPU work that would hold the interpreter lock.

        Raises:
            ServerUnavailableError: not connected, or the connection failed during the call.
            DeadlineMissedError: no reply within ``timeout_s`` (default: see ``submit``).
            OffloadCancelledError: ``cancel`` was set.
            ServerRejectedError: the server answered with an error.
            OffloadError: the request is too large or too many calls are pending.

        """
        try:
            future = self.submit(
                mode, op, fields, tensors, timeout_s=timeout_s, handed_off=handed_off
            )
            return future._wait(None, cancel)
        finally:
            if handed_off is not None:
                handed_off.set()

    def close(self) -> None:
        """Say BYE, stop the I/O thread and close the socket; fail pending calls."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._wake()
        self._thread.join(timeout=1.0)
        self._drive(self._lifecycle.on_close)
        self._wake_reader.close()
        self._wake_writer.close()

    def __enter__(self) -> EdgeClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- I/O thread ------------------------------------------------------------------

    def _make_socket(self) -> zmq.Socket:
        config = self.config
        sock = self._context.socket(zmq.DEALER)
        sock.linger = 0
        sock.immediate = 1  # never queue for a peer that is not connected
        sock.sndhwm = max(16, config.max_pending_calls * 2)
        sock.rcvhwm = max(16, config.max_pending_calls * 2)
        sock.maxmsgsize = config.max_message_bytes
        sock.reconnect_ivl = int(config.reconnect_interval_s * 1000)
        sock.reconnect_ivl_max = int(config.reconnect_interval_max_s * 1000)
        # ZMTP heartbeats detect a dead peer behind a silent network path.
        sock.heartbeat_ivl = int(config.liveness_timeout_s * 1000 / 3)
        sock.heartbeat_timeout = int(config.liveness_timeout_s * 1000)
        if config.security == 'curve':
            own = load_secret_key_pair(config.secret_key_file)
            sock.curve_secretkey = own.secret
            sock.curve_publickey = own.public
            sock.curve_serverkey = load_public_key(config.server_public_key_file)
        return sock

    def _wake(self) -> None:
        try:
            self._wake_writer.send(b'\0')
        except (BlockingIOError, OSError):
            pass  # a wake-up is already pending (or the client is closing)

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self._socket, zmq.POLLIN)
        poller.register(self._monitor, zmq.POLLIN)
        poller.register(self._wake_reader.fileno(), zmq.POLLIN)
        next_timer = time.monotonic()
        try:
            while not self._stopping.is_set():
                wake_at = min(next_timer, self._next_deadline)
                timeout_ms = max(0, int((wake_at - time.monotonic()) * 1000))
                events = dict(poller.poll(min(timeout_ms, 50)))
                if self._wake_reader.fileno() in events:
                    self._drain_wake()
                if self._monitor in events:
                    self._on_monitor_events()
                if self._socket in events:
                    self._on_messages()
                self._flush_outbox()
                if time.monotonic() >= self._next_deadline:
                    self._expire_due()
                if time.monotonic() >= next_timer:
                    self._on_timer()
                    next_timer = time.monotonic() + min(
                        self.config.ping_interval_s, self.config.hello_retry_s
                    )
            linger_ms = _BYE_LINGER_MS if self._send_bye() else 0
        except Exception:  # noqa: BLE001 - the I/O thread must report, not vanish
            _logger.exception('edge client I/O thread failed')
            self._set_state(ConnectionState.DISCONNECTED, 'client I/O thread failed')
            self._fail_pending(ServerUnavailableError('client I/O thread failed'))
            linger_ms = 0
        finally:
            self._socket.disable_monitor()
            self._monitor.close(linger=0)
            # Long enough for BYE to leave, so the server frees this robot's slot now.
            self._socket.close(linger=linger_ms)
            self._context.term()

    def _drain_wake(self) -> None:
        try:
            while self._wake_reader.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def _send(self, message: protocol.Message) -> bool:
        try:
            self._socket.send_multipart(protocol.encode(message), flags=zmq.NOBLOCK)
        except zmq.Again:
            return False
        return True

    def _flush_outbox(self) -> None:
        while True:
            with self._lock:
                if not self._outbox:
                    return
                request_id, frames = self._outbox.popleft()
                pending = self._pending.get(request_id)
            if pending is None:
                continue  # cancelled or timed out before it was sent
            pending.sent_at = time.monotonic()
            try:
                self._socket.send_multipart(frames, flags=zmq.NOBLOCK, copy=False)
            except zmq.Again:
                self._complete(
                    request_id,
                    error=ServerUnavailableError('edge server not connected (send failed)'),
                )
            pending.frames = []
            if pending.handed_off is not None:
                pending.handed_off.set()

    def _on_messages(self) -> None:
        while True:
            try:
                frames = self._socket.recv_multipart(flags=zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            now = time.monotonic()
            self._last_rx = now
            buffers = [frame.buffer for frame in frames]
            try:
                message = protocol.decode(buffers, max_message_bytes=self.config.max_message_bytes)
            except protocol.ProtocolError as error:
                _logger.warning('dropped a malformed message from the edge server: %s', error)
                continue
            self._on_message(message, protocol.frames_nbytes(buffers), now)

    def _on_message(self, message: protocol.Message, size: int, now: float) -> None:
        if message.type == protocol.WELCOME:
            with self._lock:
                self._server_info = dict(message.fields)
            server_id = str(message.fields.get('server_id', '?'))
            self._drive(self._lifecycle.on_welcome, server_id)
        elif message.type == protocol.PONG:
            sent = self._pings.pop(message.request_id, None)
            if sent is not None and self.link is not None:
                self.link.record_rtt(now - sent, now)
        elif message.type in (protocol.REPLY, protocol.ERROR) and message.request_id:
            with self._lock:
                pending = self._pending.get(message.request_id)
                gave_up = None
                if pending is None:
                    gave_up = self._gave_up.pop(message.request_id, None)
            if pending is None:
                self._on_late_reply(message, gave_up, now)
                return
            pending.received_at = now
            pending.bytes_down = size
            if message.type == protocol.REPLY and pending.sent_at:
                # Before the caller sees the reply: its next call gets the new limit.
                self._record_round_trip(
                    pending.mode, pending.op, pending.args or {}, now - pending.sent_at, False
                )
            self._complete(message.request_id, reply=message)
            if message.type == protocol.ERROR and message.fields.get('code') == (
                protocol.E_NO_SESSION
            ):
                self._drive(self._lifecycle.on_no_session)
        elif message.type == protocol.ERROR:
            code = message.fields.get('code')
            text = str(message.fields.get('message', ''))
            if code == protocol.E_VERSION:
                self._drive(self._lifecycle.on_version_mismatch, text)
            elif code == protocol.E_SERVER_FULL:
                self._drive(self._lifecycle.on_server_full, text)
            elif code == protocol.E_NO_SESSION:
                # The server restarted or expired the session: say hello again.
                self._drive(self._lifecycle.on_no_session)
            else:
                _logger.warning('edge server error: %s: %s', code, text)

    def _on_late_reply(
        self, message: protocol.Message, gave_up: _GaveUp | None, now: float
    ) -> None:
        """Measure the reply to a call that expired (no caller waits for it any more)."""
        if gave_up is None:
            _logger.debug('dropped late reply to request %d', message.request_id)
            return
        seconds = now - gave_up.sent_at
        _logger.debug(
            'late %s to request %d (%s %s) after %.3f s',
            message.type,
            message.request_id,
            gave_up.mode,
            gave_up.op,
            seconds,
        )
        if message.type == protocol.REPLY:
            self._record_round_trip(gave_up.mode, gave_up.op, gave_up.args, seconds, True)

    def _record_round_trip(
        self, mode: str, op: str, args: Mapping[str, Any], seconds: float, late: bool
    ) -> None:
        with self._lock:
            timing = self._timing
        if timing is None:
            return
        try:
            timing.record_call(mode, op, args, seconds, late=late)
        except Exception:  # noqa: BLE001 - a timing bug must not stop the I/O thread
            _logger.exception('request timing failed to record a round trip')

    def _on_monitor_events(self) -> None:
        while True:
            try:
                event = recv_monitor_message(self._monitor, flags=zmq.NOBLOCK)
            except zmq.Again:
                return
            kind = event['event']
            if kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._last_rx = time.monotonic()
                self._drive(self._lifecycle.on_transport_up)
            elif kind == zmq.EVENT_DISCONNECTED:
                self._drive(self._lifecycle.on_transport_down)
            elif kind == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                self._drive(
                    self._lifecycle.on_auth_failed,
                    "edge server refused this robot's key (not authorised)",
                )
            elif kind in (
                zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
                zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL,
            ):
                self._drive(
                    self._lifecycle.on_auth_failed,
                    'security handshake with the edge server failed (wrong server key or '
                    'curve/plaintext mismatch)',
                )

    def _drive(self, event: Callable[..., list[Action]], *args: Any) -> None:
        """Feed one event to the life-cycle machine and carry out its actions."""
        with self._lifecycle_lock:
            actions = event(time.monotonic(), *args)
        for action in actions:
            if isinstance(action, SetState):
                self._set_state(action.state, action.reason)
            elif isinstance(action, FailPending):
                self._pings.clear()
                self._fail_pending(ServerUnavailableError(action.reason))
            elif isinstance(action, SendHello):
                self._send(self._hello())
            elif isinstance(action, ResetTransport):
                self._reset_transport()

    def _reset_transport(self) -> None:
        """Replace the connection: a fresh transport handshake, a fresh identity."""
        endpoint = self.config.endpoint
        try:
            self._socket.disconnect(endpoint)
        except zmq.ZMQError as error:
            _logger.debug('disconnect from %s: %s', endpoint, error)
        self._socket.connect(endpoint)

    def _on_timer(self) -> None:
        now = time.monotonic()
        if self.state is ConnectionState.CONNECTED:
            silent_s = now - self._last_rx
            if silent_s > self.config.liveness_timeout_s:
                self._drive(self._lifecycle.on_liveness_timeout, silent_s)
            else:
                self._ping(now)
        self._drive(self._lifecycle.on_tick)

    def _ping(self, now: float) -> None:
        ping_id = next(self._ids)
        if self._send(protocol.Message(protocol.PING, ping_id)):
            self._pings[ping_id] = now
            if len(self._pings) > 64:  # unanswered probes: keep the newest only
                for stale in sorted(self._pings)[:-64]:
                    del self._pings[stale]
            if self.link is not None:
                self.link.record_probe_sent(now)

    def _hello(self) -> protocol.Message:
        return protocol.Message(
            protocol.HELLO,
            0,
            {
                'client_name': self.config.client_name,
                'pid': os.getpid(),
                'instance': self._instance,
            },
        )

    def _send_bye(self) -> bool:
        """Say BYE if a transport is up; return whether it was handed to the socket."""
        with self._lifecycle_lock:
            transport_up = self._lifecycle.transport_up
        return transport_up and self._send(protocol.Message(protocol.BYE, 0))

    def _complete(
        self,
        request_id: int,
        *,
        reply: protocol.Message | None = None,
        error: OffloadError | None = None,
    ) -> bool:
        """Complete a pending call; return False if it was no longer pending."""
        with self._lock:
            pending = self._pending.pop(request_id, None)
        if pending is None:
            return False
        self._resolve(pending, reply, error)
        return True

    def _expire(self, future: CallFuture) -> None:
        """Fail a call whose deadline passed; remember it if sent, to measure a late reply."""
        with self._lock:
            pending = self._pending.pop(future.request_id, None)
            if pending is None:
                return
            if pending.sent_at:
                self._gave_up[future.request_id] = _GaveUp(
                    pending.mode, pending.op, pending.args or {}, pending.sent_at
                )
                while len(self._gave_up) > _MAX_GAVE_UP:
                    self._gave_up.popitem(last=False)
        self._resolve(
            pending,
            None,
            DeadlineMissedError(f'edge server did not answer within {future._timeout_s:.3f} s'),
        )

    def _expire_due(self) -> None:
        now = time.monotonic()
        with self._lock:
            due = [call.future for call in self._pending.values() if call.deadline <= now]
            self._next_deadline = min(
                (call.deadline for call in self._pending.values() if call.deadline > now),
                default=math.inf,
            )
        for future in due:
            self._expire(future)

    def _fail_pending(self, error: OffloadError) -> None:
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
            self._outbox.clear()
            # Replies from a failed session would measure the failure, not the server.
            self._gave_up.clear()
            self._next_deadline = math.inf
        for call in pending:
            self._resolve(call, None, error)

    def _resolve(
        self,
        pending: _PendingCall,
        reply: protocol.Message | None,
        error: OffloadError | None,
    ) -> None:
        """Turn a completed call's reply into its outcome and complete its future."""
        outcome = None
        if error is None:
            assert reply is not None  # noqa: S101 - a call completes with one of them
            try:
                outcome = self._reply_outcome(pending, reply)
            except OffloadError as rejected:
                error = rejected
        pending.frames = []
        if pending.handed_off is not None:
            pending.handed_off.set()
        pending.future._set(outcome, error)

    def _reply_outcome(self, pending: _PendingCall, reply: protocol.Message) -> CallReply:
        if reply.type == protocol.ERROR:
            code = str(reply.fields.get('code', protocol.E_INTERNAL))
            text = str(reply.fields.get('message', ''))
            if code in (protocol.E_BUSY, protocol.E_SHUTTING_DOWN, protocol.E_NO_SESSION):
                raise ServerUnavailableError(f'edge server: {code}: {text}')
            raise ServerRejectedError(code, text, _REQUEST_ERRORS.get(code, ErrorCode.INTERNAL))
        server_time_s = _nonnegative(reply.fields.get('server_s'))
        elapsed_s = pending.received_at - pending.sent_at
        if self.link is not None and not pending.overlapped:
            self.link.record_transfer(
                pending.bytes_up, pending.bytes_down, elapsed_s - server_time_s, pending.sent_at
            )
        return CallReply(
            fields=reply.fields.get('args', {}) if isinstance(reply.fields, dict) else {},
            tensors=reply.tensors,
            bytes_up=pending.bytes_up,
            bytes_down=pending.bytes_down,
            server_time_s=server_time_s,
            compute_time_s=_nonnegative(reply.fields.get('compute_s')),
            elapsed_s=elapsed_s,
        )

    def _set_state(self, state: ConnectionState, reason: str) -> None:
        with self._state_changed:
            if self._state is ConnectionState.CLOSED:
                return
            changed = state is not self._state
            self._state = state
            self._state_reason = reason
            listeners = list(self._listeners)
            self._state_changed.notify_all()
        if self.link is not None:
            self.link.set_connected(state is ConnectionState.CONNECTED)
        if changed:
            if state in (ConnectionState.CONNECTED, ConnectionState.CONNECTING):
                _logger.info('edge client %s: %s', state.value, reason)
            elif state is ConnectionState.CLOSED:
                _logger.debug('edge client closed')
            else:
                _logger.warning('edge client %s: %s', state.value, reason)
            for listener in listeners:
                try:
                    listener(state, reason)
                except Exception:  # noqa: BLE001 - a listener must not stop the I/O thread
                    _logger.exception('connection state listener failed')


def _nonnegative(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return max(0.0, float(value))
