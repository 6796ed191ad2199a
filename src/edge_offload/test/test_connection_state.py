# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The client's connection life cycle as a pure state machine, under random faults.

Hypothesis drives ``ConnectionLifecycle`` through random sequences of transport events,
server answers, liveness losses and timer ticks in simulated time, and checks that it
never ends stuck: in every state but CONNECTED, CLOSED and INCOMPATIBLE a HELLO goes out
within ``max(hello_retry_s, 1 s)``, a WELCOME to it always connects, every loss of the
session fails the pending calls, and CLOSED is terminal.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_offload.connection_state import (
    RETRYING_STATES,
    ConnectionLifecycle,
    ConnectionState,
    FailPending,
    ResetTransport,
    SendHello,
    SetState,
)

TICK_S = 0.05  # the healthy phase ticks this often (EdgeClient ticks every 0.2 s or less)


class Simulation:
    """One machine in simulated time, with the checks that hold after every event."""

    def __init__(self, hello_retry_s: float, liveness_timeout_s: float) -> None:
        self.now = 100.0
        self.machine = ConnectionLifecycle(
            'tcp://edge:5555',
            hello_retry_s=hello_retry_s,
            liveness_timeout_s=liveness_timeout_s,
            now=self.now,
        )
        self.bound_s = max(hello_retry_s, 1.0)
        self.pending = 0  # calls submitted while connected and not yet failed
        self.hellos: list[float] = []
        self.resets = 0
        # Since when a HELLO is owed: the last HELLO, or entering a retrying state.
        self.owed_since = self.now

    def advance(self, dt: float) -> None:
        self.now += dt

    def submit(self) -> None:
        """Submit a call: EdgeClient accepts it only while connected."""
        if self.machine.state is ConnectionState.CONNECTED:
            self.pending += 1

    def event(self, name: str, *args: object) -> list:
        before = self.machine.state
        was_up = self.machine.transport_up
        due = before in RETRYING_STATES and self.now - self.owed_since >= self.bound_s
        actions = getattr(self.machine, f'on_{name}')(self.now, *args)
        after = self.machine.state
        kinds = [type(action) for action in actions]
        if before is ConnectionState.CLOSED:
            assert actions == [], f'CLOSED answered {name} with {actions}'
            assert after is ConnectionState.CLOSED
        # The state the owner was told is the machine's state.
        states = [action.state for action in actions if isinstance(action, SetState)]
        if states:
            assert states[-1] is after
        else:
            assert after is before
        # Every loss of the session fails the pending calls, after the state changed.
        if before is ConnectionState.CONNECTED and after is not ConnectionState.CONNECTED:
            assert FailPending in kinds, f'{name} left CONNECTED without failing calls'
            assert kinds.index(SetState) < kinds.index(FailPending)
        if FailPending in kinds:
            self.pending = 0
        assert after is ConnectionState.CONNECTED or self.pending == 0
        if ResetTransport in kinds:
            assert was_up
            assert before in RETRYING_STATES
            assert not self.machine.transport_up
            self.resets += 1
        if SendHello in kinds:
            assert after not in (ConnectionState.CLOSED, ConnectionState.INCOMPATIBLE)
            self.hellos.append(self.now)
            self.owed_since = self.now
        elif name == 'tick' and due:
            pytest.fail(
                f'no HELLO for {self.now - self.owed_since:.2f} s in {before.value} '
                f'(bound {self.bound_s} s)'
            )
        if after in RETRYING_STATES:
            if before not in RETRYING_STATES:
                self.owed_since = max(self.owed_since, self.now)  # owed from now on
            # The timer is armed: the next tick at or after this time says hello.
            assert self.machine.next_hello_at <= self.owed_since + self.bound_s + 1e-9
            assert self.machine.hello_interval_s <= self.bound_s
        else:
            assert math.isinf(self.machine.next_hello_at)
        return actions

    def heal(self) -> float:
        """Let a healthy server answer the next HELLO; return how long the HELLO took."""
        machine = self.machine
        if machine.state is ConnectionState.INCOMPATIBLE:
            # Only a new server (a new transport) gets an incompatible client going again.
            self.event('transport_down')
            self.advance(TICK_S)
        start = self.now
        hellos = len(self.hellos)
        while len(self.hellos) == hellos and machine.state is not ConnectionState.CONNECTED:
            assert self.now - start <= self.bound_s + TICK_S, 'no HELLO: stuck'
            self.advance(TICK_S)
            self.event('tick')
        self.event('welcome', 'edge')
        assert machine.state is ConnectionState.CONNECTED
        return self.now - start


EVENTS = st.one_of(
    st.tuples(st.just('transport_up')),
    st.tuples(st.just('transport_down')),
    st.tuples(st.just('auth_failed'), st.just('key not authorised')),
    st.tuples(st.just('welcome'), st.just('edge')),
    st.tuples(st.just('server_full'), st.just('server full: 1 robots connected')),
    st.tuples(st.just('no_session')),
    st.tuples(st.just('version_mismatch'), st.just('protocol version 2')),
    st.tuples(st.just('liveness_timeout'), st.floats(3.0, 30.0)),
    st.tuples(st.just('tick')),
    st.tuples(st.just('tick')),
    st.tuples(st.just('submit')),
)
STEPS = st.lists(
    st.tuples(st.floats(min_value=0.0, max_value=2.5, allow_nan=False), EVENTS), max_size=80
)


@settings(max_examples=400, deadline=None, database=None)
@given(
    hello_retry_s=st.sampled_from([0.05, 0.2, 0.5, 1.0, 2.0]),
    liveness_timeout_s=st.sampled_from([0.5, 3.0]),
    steps=STEPS,
    close_at=st.none() | st.integers(min_value=0, max_value=80),
)
def test_random_faults_never_leave_the_client_stuck(
    hello_retry_s, liveness_timeout_s, steps, close_at
):
    sim = Simulation(hello_retry_s, liveness_timeout_s)
    for index, (dt, (name, *args)) in enumerate(steps):
        if index == close_at:
            sim.event('close')
        sim.advance(dt)
        if name == 'submit':
            sim.submit()
        elif name == 'tick':
            # EdgeClient ticks at least every hello_retry_s; a tick at most this late.
            sim.event('tick')
        else:
            sim.event(name, *args)
        if name != 'tick' and sim.machine.state is not ConnectionState.CLOSED:
            sim.event('tick')  # the I/O thread ticks after every event it handled
    if sim.machine.state is ConnectionState.CLOSED:
        for name, *args in [('transport_up',), ('welcome', 'edge'), ('tick',)]:
            assert sim.event(name, *args) == []
        assert sim.machine.state is ConnectionState.CLOSED
        return
    assert sim.heal() <= sim.bound_s + TICK_S
    pending = sim.pending
    sim.submit()
    assert sim.pending == pending + 1  # calls are accepted again


@settings(max_examples=200, deadline=None, database=None)
@given(
    hello_retry_s=st.sampled_from([0.05, 0.5, 2.0]),
    steps=STEPS,
)
def test_a_healthy_server_reconnects_from_every_reachable_state(hello_retry_s, steps):
    """Heal after every prefix of the sequence, not only at its end."""
    sim = Simulation(hello_retry_s, 3.0)
    for dt, (name, *args) in steps:
        sim.advance(dt)
        if name == 'submit':
            sim.submit()
        else:
            sim.event(name, *args)
        sim.heal()
        sim.submit()


def _connected(hello_retry_s: float = 0.5, liveness_timeout_s: float = 3.0) -> Simulation:
    sim = Simulation(hello_retry_s, liveness_timeout_s)
    assert SendHello() in sim.event('transport_up')
    sim.event('welcome', 'edge')
    assert sim.machine.state is ConnectionState.CONNECTED
    return sim


def test_liveness_loss_says_hello_again_without_a_transport_event():
    """Issue 30: a robot stall of 3-5 s leaves the ZeroMQ connection up; hello anyway."""
    sim = _connected()
    sim.submit()
    actions = sim.event('liveness_timeout', 4.0)
    assert actions[:2] == [
        SetState(ConnectionState.DISCONNECTED, 'edge server silent for 4.0 s'),
        FailPending('edge server silent for 4.0 s'),
    ]
    assert actions[2:] == [SendHello()]  # at once
    sim.advance(0.5)
    assert sim.event('tick') == [SendHello()]  # and again every hello_retry_s
    sim.event('welcome', 'edge')
    assert sim.machine.state is ConnectionState.CONNECTED


def test_server_full_backs_off_to_one_second_and_connects_when_a_slot_frees():
    sim = _connected()
    sim.event('transport_down')
    sim.event('transport_up')
    gaps = []
    for _ in range(6):
        sim.event('server_full', 'server full')
        assert sim.machine.state is ConnectionState.DISCONNECTED
        assert sim.machine.reason == 'edge server refused: server full'
        start = sim.now
        while not sim.event('tick'):
            sim.advance(0.01)
        gaps.append(round(sim.now - start, 2))
    assert gaps == [0.5, 1.0, 1.0, 1.0, 1.0, 1.0]
    sim.event('welcome', 'edge')
    assert sim.machine.state is ConnectionState.CONNECTED
    assert sim.machine.hello_interval_s == 0.5  # the backoff starts over


def test_no_session_while_connected_says_hello_at_once():
    sim = _connected()
    sim.submit()
    actions = sim.event('no_session')
    assert actions == [
        SetState(ConnectionState.CONNECTING, 'edge server lost the session'),
        FailPending('edge server lost the session'),
        SendHello(),
    ]
    assert sim.event('no_session') == []  # a second one: the timer is already on it


def test_a_transport_that_never_answers_hello_is_replaced():
    sim = Simulation(0.5, 3.0)
    sim.event('transport_up')
    while True:
        sim.advance(0.2)
        actions = sim.event('tick')
        if any(isinstance(action, ResetTransport) for action in actions):
            break
    assert sim.now - 100.0 == pytest.approx(sim.machine.transport_reset_s, abs=0.2 + 1e-9)
    assert sim.machine.state is ConnectionState.DISCONNECTED
    assert 'did not answer hello' in sim.machine.reason
    # Until the new transport is up, timed hellos go on but nothing is replaced again.
    for _ in range(40):
        sim.advance(0.2)
        assert not any(isinstance(a, ResetTransport) for a in sim.event('tick'))


def test_answers_keep_the_transport():
    """A server that answers (even server_full) is there: its transport stays."""
    sim = Simulation(0.5, 3.0)
    sim.event('transport_up')
    for _ in range(50):
        sim.advance(0.5)
        actions = sim.event('tick')
        assert not any(isinstance(action, ResetTransport) for action in actions)
        if SendHello() in actions:
            sim.event('server_full', 'server full')


def test_a_refusal_is_not_overwritten_by_its_disconnect():
    sim = Simulation(0.5, 3.0)
    sim.event('auth_failed', "edge server refused this robot's key (not authorised)")
    assert sim.event('transport_down') == []
    assert sim.machine.state is ConnectionState.UNAUTHENTICATED
    sim.advance(0.5)
    assert sim.event('tick') == [SendHello()]  # harmless without a peer; keeps trying


def test_incompatible_waits_for_a_new_transport():
    sim = _connected()
    sim.event('version_mismatch', 'protocol version 2')
    for _ in range(10):
        sim.advance(1.0)
        assert sim.event('tick') == []
    assert sim.machine.state is ConnectionState.INCOMPATIBLE
    sim.event('transport_down')
    assert sim.machine.state is ConnectionState.DISCONNECTED
    assert SendHello() in sim.event('transport_up')


def test_closed_is_terminal():
    sim = _connected()
    sim.submit()
    assert sim.event('close') == [
        SetState(ConnectionState.CLOSED, 'client closed'),
        FailPending('client closed'),
    ]
    for name, *args in [
        ('transport_up',),
        ('welcome', 'edge'),
        ('server_full', 'x'),
        ('no_session',),
        ('liveness_timeout', 5.0),
        ('tick',),
        ('close',),
    ]:
        sim.advance(1.0)
        assert sim.event(name, *args) == []
    assert sim.machine.state is ConnectionState.CLOSED


def test_invalid_intervals_are_refused():
    with pytest.raises(ValueError, match='hello_retry_s'):
        ConnectionLifecycle('tcp://edge:5555', hello_retry_s=0.0, liveness_timeout_s=3.0, now=0)
