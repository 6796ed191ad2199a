# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The robot's connection life cycle as a pure state machine (no ROS, no sockets, no clock).

``ConnectionLifecycle`` takes the events of one robot-to-server connection (the transport
came up or went down, the security handshake failed, the server answered WELCOME,
``server_full``, ``no_session`` or ``version_mismatch``, the server went silent, a timer
tick with the current time, close) and returns the actions its owner carries out, in
order: set the state (with its reason), fail the pending calls, send HELLO, force a fresh
transport. ``EdgeClient`` drives it from its I/O thread; tests drive it with simulated
time.

The rule: in every state but ``CLOSED`` and ``INCOMPATIBLE`` the machine keeps trying to
(re)establish the session. Whenever it is not ``CONNECTED`` it asks for a HELLO every
``hello_retry_s`` (after ``server_full`` the interval doubles, up to
``max(hello_retry_s, 1 s)``), whether or not a transport event came: the ZeroMQ
connection may survive what the session did not (a robot stall shorter than the server's
heartbeat, a refusal), and then no transport event ever comes. Sending fails harmlessly
while no peer is connected. A transport that stays up while HELLOs get no answer at all
for ``transport_reset_s`` is replaced (disconnect and connect again). Every loss of the
session fails the pending calls at once. ``CLOSED`` is terminal; ``INCOMPATIBLE`` (the
server speaks another protocol version) waits for a new transport (a new server).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

MAX_HELLO_INTERVAL_S = 1.0  # backoff after server_full never waits longer (unless retry is)


class ConnectionState(enum.Enum):
    """Where the client's connection to its server stands."""

    CONNECTING = 'connecting'
    CONNECTED = 'connected'
    DISCONNECTED = 'disconnected'
    UNAUTHENTICATED = 'unauthenticated'
    INCOMPATIBLE = 'incompatible'
    CLOSED = 'closed'


@dataclass(frozen=True)
class SetState:
    """Move to ``state``; ``reason`` says why (for logs, status and fallback reasons)."""

    state: ConnectionState
    reason: str


@dataclass(frozen=True)
class FailPending:
    """Fail every pending call at once: the session they belong to is gone."""

    reason: str


@dataclass(frozen=True)
class SendHello:
    """Send HELLO (fails harmlessly while no peer is connected)."""


@dataclass(frozen=True)
class ResetTransport:
    """Drop the transport and connect again (a fresh connection, a fresh identity)."""

    reason: str


Action = SetState | FailPending | SendHello | ResetTransport

# States in which the machine keeps sending HELLO on its timer.
RETRYING_STATES = frozenset(
    {ConnectionState.CONNECTING, ConnectionState.DISCONNECTED, ConnectionState.UNAUTHENTICATED}
)


class ConnectionLifecycle:
    """The session life cycle of one ``EdgeClient``: events in, actions out.

    Not thread-safe: one thread (the client's I/O thread) feeds it. Every ``on_*`` method
    takes the current monotonic time and returns the actions to carry out, in order.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        hello_retry_s: float,
        liveness_timeout_s: float,
        now: float,
        transport_reset_s: float | None = None,
    ) -> None:
        if not hello_retry_s > 0 or not liveness_timeout_s > 0:
            raise ValueError('hello_retry_s and liveness_timeout_s must be > 0')
        self.hello_retry_s = hello_retry_s
        self.max_hello_interval_s = max(hello_retry_s, MAX_HELLO_INTERVAL_S)
        self.transport_reset_s = (
            max(liveness_timeout_s, 2 * self.max_hello_interval_s)
            if transport_reset_s is None
            else transport_reset_s
        )
        self._state = ConnectionState.CONNECTING
        self._reason = f'connecting to {endpoint}'
        self._transport_up = False
        self._interval_s = hello_retry_s
        self._next_hello_at = now + hello_retry_s
        # First HELLO sent on an up transport that no server message answered yet.
        self._unanswered_since: float | None = None

    # -- what it knows ---------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        """Return the current state."""
        return self._state

    @property
    def reason(self) -> str:
        """Return why the machine is in its state."""
        return self._reason

    @property
    def transport_up(self) -> bool:
        """Return whether the transport is up as far as the events told."""
        return self._transport_up

    @property
    def next_hello_at(self) -> float:
        """Return when the timer sends the next HELLO (inf when it sends none)."""
        if self._state not in RETRYING_STATES:
            return math.inf
        return self._next_hello_at

    @property
    def hello_interval_s(self) -> float:
        """Return the current interval between timed HELLOs (grows after server_full)."""
        return self._interval_s

    # -- events ----------------------------------------------------------------------

    def on_transport_up(self, now: float) -> list[Action]:
        """Handle a completed transport (security) handshake: say hello at once."""
        if self._closed():
            return []
        actions: list[Action] = []
        if self._state is ConnectionState.CONNECTED:
            # A new connection means a new identity: the old session and its calls are gone.
            actions += self._lose(ConnectionState.CONNECTING, 'connection replaced')
        self._transport_up = True
        self._unanswered_since = None
        self._interval_s = self.hello_retry_s
        actions += self._set(ConnectionState.CONNECTING, 'transport up, saying hello')
        return actions + self._hello(now)

    def on_transport_down(self, now: float) -> list[Action]:
        """Handle a lost transport (ZeroMQ reconnects by itself)."""
        if self._closed():
            return []
        was_up = self._transport_up
        self._transport_up = False
        self._unanswered_since = None
        refused = self._state in (ConnectionState.UNAUTHENTICATED, ConnectionState.INCOMPATIBLE)
        if refused and not was_up:
            return []  # the refusal that caused this disconnect says more
        return self._lose(ConnectionState.DISCONNECTED, 'connection to the edge server lost')

    def on_auth_failed(self, now: float, reason: str) -> list[Action]:
        """Handle a failed security handshake (key not authorised, wrong server key)."""
        if self._closed():
            return []
        self._transport_up = False
        self._unanswered_since = None
        return self._lose(ConnectionState.UNAUTHENTICATED, reason)

    def on_welcome(self, now: float, server_id: str) -> list[Action]:
        """Handle WELCOME: the session is established."""
        if self._closed():
            return []
        self._answered()
        self._interval_s = self.hello_retry_s
        return self._set(ConnectionState.CONNECTED, f'connected to {server_id}')

    def on_server_full(self, now: float, text: str) -> list[Action]:
        """Handle ``server_full``: try again later, backing off up to the interval cap."""
        if self._closed():
            return []
        self._answered()
        # The next HELLO stays due one interval after the last; later ones wait longer.
        self._interval_s = min(self.max_hello_interval_s, 2 * self._interval_s)
        return self._lose(ConnectionState.DISCONNECTED, f'edge server refused: {text}')

    def on_no_session(self, now: float) -> list[Action]:
        """Handle ``no_session``: the server restarted or expired this robot's session."""
        if self._closed():
            return []
        self._answered()
        if self._state is not ConnectionState.CONNECTED:
            return []  # already saying hello on the timer
        actions = self._lose(ConnectionState.CONNECTING, 'edge server lost the session')
        return actions + self._hello(now)

    def on_version_mismatch(self, now: float, text: str) -> list[Action]:
        """Handle ``version_mismatch``: wait for a new transport (a new server)."""
        if self._closed():
            return []
        self._answered()
        return self._lose(ConnectionState.INCOMPATIBLE, f'edge server: {text}')

    def on_liveness_timeout(self, now: float, silent_s: float) -> list[Action]:
        """Handle a server silent for the liveness timeout while connected."""
        if self._state is not ConnectionState.CONNECTED:
            return []
        actions = self._lose(
            ConnectionState.DISCONNECTED, f'edge server silent for {silent_s:.1f} s'
        )
        # The transport may still be fine (the robot stalled, not the server): ask again.
        return actions + self._hello(now)

    def on_tick(self, now: float) -> list[Action]:
        """Handle the timer: say hello again when due; replace a transport nobody answers."""
        if self._state not in RETRYING_STATES:
            return []
        actions: list[Action] = []
        if (
            self._transport_up
            and self._unanswered_since is not None
            and now - self._unanswered_since >= self.transport_reset_s
        ):
            silent_s = now - self._unanswered_since
            reason = f'edge server did not answer hello for {silent_s:.1f} s; reconnecting'
            self._transport_up = False
            self._unanswered_since = None
            actions += self._lose(ConnectionState.DISCONNECTED, reason)
            actions.append(ResetTransport(reason))
        if now >= self._next_hello_at:
            actions += self._hello(now)
        return actions

    def on_close(self, now: float) -> list[Action]:
        """Close for good: fail pending calls; every later event is ignored."""
        if self._closed():
            return []
        self._transport_up = False
        self._unanswered_since = None
        return self._lose(ConnectionState.CLOSED, 'client closed')

    # -- helpers ---------------------------------------------------------------------

    def _closed(self) -> bool:
        return self._state is ConnectionState.CLOSED

    def _answered(self) -> None:
        """Note an answer: a transport carries the server's messages and it is listening."""
        self._transport_up = True
        self._unanswered_since = None

    def _set(self, state: ConnectionState, reason: str) -> list[Action]:
        self._state = state
        self._reason = reason
        return [SetState(state, reason)]

    def _lose(self, state: ConnectionState, reason: str) -> list[Action]:
        """Leave the session: the state first (so no new call starts), then the calls."""
        return [*self._set(state, reason), FailPending(reason)]

    def _hello(self, now: float) -> list[Action]:
        self._next_hello_at = now + self._interval_s
        if self._transport_up and self._unanswered_since is None:
            self._unanswered_since = now
        return [SendHello()]
