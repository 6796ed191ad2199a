# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The link model of :mod:`edge_offload.link_emulator`: configuration, bandwidth, delay.

One direction of the emulated link is a :class:`ShapedLink`: a FIFO byte queue drained at
delivery opportunities (a constant rate, a mahimahi ``DeliveryTrace`` or unlimited), and a
one-way delay with truncated-normal jitter. No sockets: the emulator's event loop moves the
bytes.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edge_offload.link_traces import PACKET_BYTES, DeliveryTrace

UPLINK = 'uplink'
DOWNLINK = 'downlink'

DEFAULT_QUEUE_BYTES = 2_000_000
# Bytes a direction may hold past its bottleneck queue (delay line and unsent backlog): a
# memory cap that only binds for unlimited links or rate x delay products above it.
MAX_IN_FLIGHT_BYTES = 64 * 1024 * 1024

_BITS_PER_OPPORTUNITY = PACKET_BYTES * 8
_READ_BYTES = 65536


@dataclass(frozen=True)
class DirectionConfig:
    """One direction of the emulated link.

    ``rate_bps`` (constant rate) and ``trace`` are exclusive; with neither the bandwidth is
    unlimited. ``delay_s`` is the one-way delay; ``jitter_s`` the standard deviation of the
    one-way delay (normal, truncated at zero delay).
    """

    rate_bps: float | None = None
    trace: DeliveryTrace | None = None
    delay_s: float = 0.0
    jitter_s: float = 0.0
    queue_bytes: int = DEFAULT_QUEUE_BYTES

    def __post_init__(self) -> None:
        """Check that the values describe a link."""
        check_bandwidth(self.rate_bps, self.trace)
        check_delay(self.delay_s, self.jitter_s)
        if isinstance(self.queue_bytes, bool) or not isinstance(self.queue_bytes, int):
            raise TypeError(f'queue_bytes must be an int, got {self.queue_bytes!r}')
        if self.queue_bytes < 1:
            raise ValueError(f'queue_bytes must be >= 1, got {self.queue_bytes}')


@dataclass(frozen=True)
class LinkEmulatorConfig:
    """Where the emulator listens, where it relays to, and the link in each direction."""

    listen_host: str
    listen_port: int
    upstream_host: str
    upstream_port: int
    uplink: DirectionConfig = field(default_factory=DirectionConfig)
    downlink: DirectionConfig = field(default_factory=DirectionConfig)
    # Seeds the jitter; None draws fresh entropy.
    seed: int | None = 0

    def __post_init__(self) -> None:
        """Check the ports."""
        if not 0 <= self.listen_port <= 65535:
            raise ValueError(f'listen_port must be in 0..65535, got {self.listen_port}')
        if not 1 <= self.upstream_port <= 65535:
            raise ValueError(f'upstream_port must be in 1..65535, got {self.upstream_port}')

    @classmethod
    def from_rtt(
        cls,
        upstream_host: str,
        upstream_port: int,
        *,
        listen_host: str = '127.0.0.1',
        listen_port: int = 0,
        rtt_s: float = 0.0,
        jitter_s: float = 0.0,
        uplink_bps: float | None = None,
        downlink_bps: float | None = None,
        uplink_trace: DeliveryTrace | None = None,
        downlink_trace: DeliveryTrace | None = None,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
        seed: int | None = 0,
    ) -> LinkEmulatorConfig:
        """Build a config with ``rtt_s / 2`` of delay each way and ``jitter_s`` on each way."""
        check_delay(rtt_s, jitter_s)
        return cls(
            listen_host=listen_host,
            listen_port=listen_port,
            upstream_host=upstream_host,
            upstream_port=upstream_port,
            uplink=DirectionConfig(uplink_bps, uplink_trace, rtt_s / 2, jitter_s, queue_bytes),
            downlink=DirectionConfig(
                downlink_bps, downlink_trace, rtt_s / 2, jitter_s, queue_bytes
            ),
            seed=seed,
        )


@dataclass(frozen=True)
class LinkStats:
    """Counters of a running emulator (a snapshot)."""

    connections_accepted: int
    connections_active: int
    # Accepted connections closed because the upstream could not be reached.
    connections_failed: int
    # Bytes written to the destination sockets.
    uplink_bytes: int
    downlink_bytes: int
    # Bytes waiting in the bottleneck queue for a delivery opportunity.
    uplink_queued_bytes: int
    downlink_queued_bytes: int
    # Bytes past the bottleneck, not yet written to their destination socket.
    uplink_in_flight_bytes: int
    downlink_in_flight_bytes: int


def check_bandwidth(rate_bps: float | None, trace: DeliveryTrace | None) -> None:
    if rate_bps is not None and trace is not None:
        raise ValueError('give a constant rate or a trace, not both')
    if rate_bps is not None and not (math.isfinite(rate_bps) and rate_bps > 0):
        raise ValueError(f'rate must be finite and > 0 bit/s, got {rate_bps}')
    if trace is not None and not isinstance(trace, DeliveryTrace):
        raise TypeError(f'trace must be a DeliveryTrace, got {type(trace).__name__}')


def check_delay(delay_s: float, jitter_s: float) -> None:
    for name, value in (('delay', delay_s), ('jitter', jitter_s)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f'{name} must be finite and >= 0 s, got {value}')


class DeliverySchedule:
    """The delivery opportunities of one direction, from the moment they were set."""

    __slots__ = ('origin', 'rate_bps', 'trace', 'interval')

    def __init__(self, origin: float, rate_bps: float | None, trace: DeliveryTrace | None):
        self.origin = origin
        self.rate_bps = rate_bps
        self.trace = trace
        self.interval = _BITS_PER_OPPORTUNITY / rate_bps if rate_bps else None

    @property
    def unlimited(self) -> bool:
        return self.trace is None and self.interval is None

    def count_until(self, t: float) -> int:
        """Return the number of opportunities at times <= t."""
        if self.trace is not None:
            return self.trace.count_until(t - self.origin)
        if t <= self.origin:
            return 0
        return math.floor((t - self.origin) / self.interval)

    def time_of(self, index: int) -> float:
        """Return the time of opportunity ``index`` (0-based)."""
        if self.trace is not None:
            return self.origin + self.trace.opportunity_time_s(index)
        return self.origin + (index + 1) * self.interval


class ShapedLink:
    """One direction: a shared FIFO byte queue drained at the delivery opportunities."""

    def __init__(self, name: str, config: DirectionConfig, rng: np.random.Generator):
        self.name = name
        self.queue_limit = config.queue_bytes
        self.read_size = min(_READ_BYTES, config.queue_bytes)
        self.delay_s = config.delay_s
        self.jitter_s = config.jitter_s
        self.schedule = DeliverySchedule(time.monotonic(), config.rate_bps, config.trace)
        self.next_index = 0  # first opportunity not yet used or wasted
        self.chunks: deque[list] = deque()  # [pipe, data, offset], oldest first
        self.queued_bytes = 0
        self.in_flight_bytes = 0
        self.relayed_bytes = 0
        self.paused: set[Any] = set()  # pipes that stopped reading because the link is full
        self.wake_at: float | None = None
        self._rng = rng
        self._normals: list[float] = []

    def set_bandwidth(self, rate_bps: float | None, trace: DeliveryTrace | None, now: float):
        self.schedule = DeliverySchedule(now, rate_bps, trace)
        self.next_index = 0

    def has_room(self) -> bool:
        if self.in_flight_bytes >= MAX_IN_FLIGHT_BYTES:
            return False
        return self.schedule.unlimited or self.queued_bytes + self.read_size <= self.queue_limit

    def one_way_delay(self) -> float:
        if not self.jitter_s:
            return self.delay_s
        for _ in range(8):  # truncated normal: draw again below zero
            if not self._normals:
                self._normals = self._rng.standard_normal(1024).tolist()
            delay = self.delay_s + self.jitter_s * self._normals.pop()
            if delay >= 0:
                return delay
        return 0.0


def describe(link: ShapedLink) -> str:
    schedule = link.schedule
    if schedule.trace is not None:
        bandwidth = f'trace {schedule.trace.source} ({schedule.trace.mean_rate_bps() / 1e6:.2f} '
        bandwidth += 'Mbit/s mean)'
    elif schedule.interval is not None:
        bandwidth = f'{schedule.rate_bps / 1e6:g} Mbit/s'
    else:
        bandwidth = 'unlimited bandwidth'
    return (
        f'{bandwidth}, delay {link.delay_s * 1e3:g} ms, jitter {link.jitter_s * 1e3:g} ms, '
        f'queue {link.queue_limit} B'
    )


# -- command line ---------------------------------------------------------------------------
