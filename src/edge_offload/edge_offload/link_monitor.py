# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Link monitor: bandwidth from real offload transfers, RTT from active probes.

Plain Python (no ROS, no sockets); the edge client feeds it and the bridge publishes
its ``snapshot`` as ``offload_interfaces/LinkState``.

Bandwidth (passive). For each request that had the link to itself (no other request in
flight), the client reports bytes up, bytes down and the time from sending the request
to receiving the reply minus the server's own time. Subtracting the base RTT (the
minimum probe RTT of the last ten seconds, i.e. the propagation delay) leaves the time the
bytes spent being serialised onto the link. A request is attributed to the direction
that carried most of its bytes; the time the other direction needed is subtracted at
that direction's current estimate (or, with no estimate yet, both directions are
assumed equal). The estimate is total bits over total transfer time of the samples in
the last ``window_s`` seconds; with no sample in the window the last estimate is held
and ``sample_count`` is zero.

RTT (active). The client sends a small PING every few hundred milliseconds; the RTT is
the mean of the answered probes in ``rtt_window_s`` and the loss ratio the share of
probes older than ``probe_timeout_s`` that got no answer.
"""

from __future__ import annotations

import collections
import math
import statistics
import threading
import time
from dataclasses import dataclass

# The LinkState SOURCE_* constants.
SOURCE_UNKNOWN = 0
SOURCE_PASSIVE = 1
SOURCE_ACTIVE_PROBE = 2
SOURCE_COMBINED = 3

# Samples shorter than this (after removing the RTT) measure timer noise, not bandwidth.
_MIN_TRANSFER_S = 0.002
_MIN_TRANSFER_BYTES = 16 * 1024


@dataclass(frozen=True)
class LinkEstimate:
    """The monitor's view of the link (the fields of ``offload_interfaces/LinkState``)."""

    connected: bool
    uplink_bandwidth_bps: float
    downlink_bandwidth_bps: float
    rtt_s: float
    rtt_stddev_s: float
    loss_ratio: float
    window_s: float
    sample_count: int
    source: int


@dataclass
class _TransferSample:
    at: float
    bits: float
    seconds: float


class _DirectionEstimate:
    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.samples: collections.deque[_TransferSample] = collections.deque(maxlen=4096)
        self.held_bps = math.nan

    def add(self, at: float, bits: float, seconds: float) -> None:
        self.samples.append(_TransferSample(at, bits, seconds))

    def estimate(self, now: float) -> tuple[float, int]:
        while self.samples and self.samples[0].at < now - self.window_s:
            self.samples.popleft()
        if not self.samples:
            return self.held_bps, 0
        seconds = sum(sample.seconds for sample in self.samples)
        self.held_bps = sum(sample.bits for sample in self.samples) / seconds
        return self.held_bps, len(self.samples)


class LinkEstimator:
    """Thread-safe estimator of one robot-to-server link."""

    def __init__(
        self,
        window_s: float = 1.0,
        rtt_window_s: float = 2.0,
        probe_timeout_s: float = 1.0,
        base_rtt_window_s: float = 10.0,
    ) -> None:
        if min(window_s, rtt_window_s, probe_timeout_s, base_rtt_window_s) <= 0:
            raise ValueError('windows and the probe timeout must be > 0')
        self.window_s = window_s
        self.rtt_window_s = rtt_window_s
        self.base_rtt_window_s = base_rtt_window_s
        self.probe_timeout_s = probe_timeout_s
        self._lock = threading.Lock()
        self._uplink = _DirectionEstimate(window_s)
        self._downlink = _DirectionEstimate(window_s)
        self._rtts: collections.deque[tuple[float, float]] = collections.deque(maxlen=4096)
        self._probes_sent: collections.deque[float] = collections.deque(maxlen=4096)
        self._probes_answered: collections.deque[float] = collections.deque(maxlen=4096)
        self._connected = False

    def set_connected(self, connected: bool) -> None:
        """Record whether the server is reachable now."""
        with self._lock:
            self._connected = connected

    def record_probe_sent(self, now: float | None = None) -> None:
        """Record that an RTT probe was sent (for the loss ratio)."""
        with self._lock:
            self._probes_sent.append(time.monotonic() if now is None else now)

    def record_rtt(self, rtt_s: float, now: float | None = None) -> None:
        """Record an answered probe's round-trip time."""
        if not math.isfinite(rtt_s) or rtt_s < 0:
            return
        now = time.monotonic() if now is None else now
        with self._lock:
            self._rtts.append((now, rtt_s))
            self._probes_answered.append(now - rtt_s)

    def base_rtt_s(self, now: float | None = None) -> float:
        """Return the smallest RTT of the last ``base_rtt_window_s`` (0: none measured).

        Probes queue behind requests on a busy link, so the propagation delay is the
        minimum over a window several times longer than the RTT window.
        """
        now = time.monotonic() if now is None else now
        with self._lock:
            return self._base_rtt(now)

    def _base_rtt(self, now: float) -> float:
        recent = [rtt for at, rtt in self._rtts if at >= now - self.base_rtt_window_s]
        if not recent and self._rtts:
            recent = [self._rtts[-1][1]]
        return min(recent, default=0.0)

    def record_transfer(
        self, bytes_up: int, bytes_down: int, seconds: float, now: float | None = None
    ) -> None:
        """Record a request/reply exchange: its bytes and its time minus server time."""
        if bytes_up + bytes_down < _MIN_TRANSFER_BYTES or not math.isfinite(seconds):
            return
        now = time.monotonic() if now is None else now
        with self._lock:
            on_wire_s = seconds - self._base_rtt(now)
            if on_wire_s < _MIN_TRANSFER_S:
                return
            up_bps, _ = self._uplink.estimate(now)
            down_bps, _ = self._downlink.estimate(now)
            if bytes_up >= bytes_down:
                main, main_bits, other_bits, other_bps = (
                    self._uplink,
                    8.0 * bytes_up,
                    8.0 * bytes_down,
                    down_bps,
                )
            else:
                main, main_bits, other_bits, other_bps = (
                    self._downlink,
                    8.0 * bytes_down,
                    8.0 * bytes_up,
                    up_bps,
                )
            if math.isfinite(other_bps) and other_bps > 0:
                main_s = on_wire_s - other_bits / other_bps
                if main_s >= _MIN_TRANSFER_S:
                    main.add(now, main_bits, main_s)
                    return
            # No usable estimate for the other direction: assume both run at one rate.
            main.add(now, main_bits + other_bits, on_wire_s)

    def snapshot(self, now: float | None = None) -> LinkEstimate:
        """Return the current estimate."""
        now = time.monotonic() if now is None else now
        with self._lock:
            up_bps, up_count = self._uplink.estimate(now)
            down_bps, down_count = self._downlink.estimate(now)
            rtts = [rtt for at, rtt in self._rtts if at >= now - self.rtt_window_s]
            cutoff = now - self.probe_timeout_s
            start = cutoff - self.rtt_window_s
            sent = sum(1 for at in self._probes_sent if start <= at < cutoff)
            answered = sum(1 for at in self._probes_answered if start <= at < cutoff)
            loss = 0.0 if sent == 0 else max(0.0, min(1.0, 1.0 - answered / sent))
            has_transfers = up_count + down_count > 0
            if has_transfers and rtts:
                source = SOURCE_COMBINED
            elif has_transfers:
                source = SOURCE_PASSIVE
            elif rtts:
                source = SOURCE_ACTIVE_PROBE
            else:
                source = SOURCE_UNKNOWN
            return LinkEstimate(
                connected=self._connected,
                uplink_bandwidth_bps=up_bps,
                downlink_bandwidth_bps=down_bps,
                rtt_s=statistics.fmean(rtts) if rtts else math.nan,
                rtt_stddev_s=statistics.pstdev(rtts) if len(rtts) > 1 else math.nan,
                loss_ratio=loss,
                window_s=self.window_s,
                sample_count=up_count + down_count + len(rtts),
                source=source,
            )
