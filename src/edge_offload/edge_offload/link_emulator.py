# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""User-space TCP link emulator: a relay that shapes bandwidth and adds delay and jitter.

``LinkEmulator`` listens on a TCP port; for every accepted connection it connects to the
upstream server and relays bytes both ways. Uplink is client -> upstream, downlink is
upstream -> client. Each direction is one emulated bottleneck link shared by all
connections (one FIFO byte queue and one scheduler per direction), modelled on mahimahi:

* **Bandwidth.** At each delivery opportunity up to ``PACKET_BYTES`` (1500) bytes leave the
  queue; an opportunity that finds the queue empty is wasted. Opportunities come from a
  ``DeliveryTrace`` (a mahimahi trace, replayed cyclically from the moment it was set), or
  every ``1500 * 8 / rate`` seconds for a constant rate, or the link is unlimited.
* **Delay.** Bytes that leave the queue at time ``t`` reach the far socket at
  ``t + delay + jitter``, with jitter drawn from a normal distribution of the given standard
  deviation, truncated so the delay stays >= 0. Bytes are never reordered: a chunk is never
  delivered before the chunk ahead of it in the same stream.
* **Queue.** The bottleneck queue holds at most ``queue_bytes``; when it is full the relay
  stops reading the sending socket, so TCP flow control pushes back on the sender. Nothing
  is ever dropped (this relays byte streams, not packets).

The scheduler is batched: on each wake-up it counts the opportunities since the last one
and releases that many bytes, each chunk stamped with the exact time of the opportunity
that carried its last byte, so a late wake-up delays nothing beyond the configured delay.
While a link is busy it wakes about once a millisecond; with a one-way delay under 0.5 ms,
bytes may arrive up to 0.5 ms late. One thread runs everything (``select``, so at most
about 500 simultaneous connections).

Not emulated: the TCP handshake (the client's connect completes at once; the relay
connects upstream without delay), packet loss, and the kernel socket buffers on either side
of the relay (they hold data beyond ``queue_bytes``). Half-close is relayed: when one side
shuts down its sending direction, the relay delivers what is queued, then shuts down the
other socket's sending direction; the pair is closed when both directions have ended, or at
once on an error (upstream refused, connection reset), which is logged.

Run-time changes (``set_uplink``, ``set_downlink``, ``set_delay``) apply to bytes that have
not left the queue yet. The CLI (``edge_offload_link_emulator``, in
:mod:`edge_offload.link_emulator_cli`) runs one in front of a server; the link model is in
:mod:`edge_offload.link_shaping`, the relay thread in :mod:`edge_offload.link_relay`.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from types import TracebackType

import numpy as np

from edge_offload.link_relay import RelayLoop
from edge_offload.link_shaping import (
    DOWNLINK,
    UPLINK,
    LinkEmulatorConfig,
    LinkStats,
    ShapedLink,
    check_bandwidth,
    check_delay,
    describe,
)
from edge_offload.link_traces import DeliveryTrace

__all__ = ['LinkEmulator', 'LinkEmulatorConfig', 'LinkStats']

_LOGGER = logging.getLogger('edge_offload.link_emulator')  # also when run with -m
_COMMAND_TIMEOUT_S = 10.0
_STOP_TIMEOUT_S = 10.0


class LinkEmulator:
    """A TCP relay that emulates a bottleneck link in each direction (see the module doc)."""

    def __init__(self, config: LinkEmulatorConfig) -> None:
        self.config = config
        seeds = [None, None] if config.seed is None else [[config.seed, 0], [config.seed, 1]]
        self._links = {
            UPLINK: ShapedLink(UPLINK, config.uplink, np.random.default_rng(seeds[0])),
            DOWNLINK: ShapedLink(DOWNLINK, config.downlink, np.random.default_rng(seeds[1])),
        }
        self._loop: RelayLoop | None = None
        self._thread: threading.Thread | None = None
        self._address: tuple[str, int] | None = None
        self._commands: queue.SimpleQueue = queue.SimpleQueue()
        self._stopped = False

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Bind the listening socket, resolve the upstream and start relaying."""
        if self._thread is not None or self._stopped:
            raise RuntimeError('a LinkEmulator can be started once')
        config = self.config
        family, _, _, _, sockaddr = socket.getaddrinfo(
            config.upstream_host, config.upstream_port, type=socket.SOCK_STREAM
        )[0]
        listen_info = socket.getaddrinfo(
            config.listen_host, config.listen_port, type=socket.SOCK_STREAM,
            flags=socket.AI_PASSIVE,
        )[0]  # fmt: skip
        listener = socket.socket(listen_info[0], socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(listen_info[4])
            listener.listen(128)
            listener.setblocking(False)
        except OSError:
            listener.close()
            raise
        self._address = (config.listen_host, listener.getsockname()[1])
        self._loop = RelayLoop(self._links, listener, (family, sockaddr), self._commands)
        now = time.monotonic()
        for link in self._links.values():
            link.set_bandwidth(link.schedule.rate_bps, link.schedule.trace, now)
        self._thread = threading.Thread(target=self._loop.run, name='link_emulator', daemon=True)
        self._thread.start()
        _LOGGER.info(
            'link emulator on %s:%d -> %s:%d; uplink %s; downlink %s',
            *self._address, config.upstream_host, config.upstream_port,
            describe(self._links[UPLINK]), describe(self._links[DOWNLINK]),
        )  # fmt: skip

    def stop(self) -> None:
        """Close every connection and the listening socket, and end the relay thread."""
        if self._stopped:
            return
        self._stopped = True
        thread = self._thread
        if thread is None:
            return
        self._loop.stopping = True
        self._loop.wake()
        thread.join(_STOP_TIMEOUT_S)
        if thread.is_alive():
            _LOGGER.error('link emulator thread did not stop within %.0f s', _STOP_TIMEOUT_S)
        _LOGGER.info('link emulator on %s:%d stopped', *self._address)

    def __enter__(self) -> LinkEmulator:
        """Start the emulator (unless started) and return it."""
        if self._thread is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop the emulator."""
        self.stop()

    @property
    def address(self) -> tuple[str, int]:
        """Return the (host, port) the emulator listens on; the port is the bound one."""
        if self._address is None:
            raise RuntimeError('the emulator is not started')
        return self._address

    @property
    def port(self) -> int:
        """Return the bound listening port."""
        return self.address[1]

    # -- run-time control -------------------------------------------------------------------

    def set_uplink(
        self, rate_bps: float | None = None, trace: DeliveryTrace | None = None
    ) -> None:
        """Change the uplink bandwidth (None and None: unlimited) from now on."""
        self._set_bandwidth(UPLINK, rate_bps, trace)

    def set_downlink(
        self, rate_bps: float | None = None, trace: DeliveryTrace | None = None
    ) -> None:
        """Change the downlink bandwidth (None and None: unlimited) from now on."""
        self._set_bandwidth(DOWNLINK, rate_bps, trace)

    def set_delay(self, rtt_s: float, jitter_s: float = 0.0) -> None:
        """Set ``rtt_s / 2`` of delay and ``jitter_s`` of jitter on each direction."""
        check_delay(rtt_s, jitter_s)

        def apply() -> None:
            for link in self._links.values():
                link.delay_s = rtt_s / 2
                link.jitter_s = jitter_s

        self._call_in_loop(apply)

    def schedule_start(self, direction: str) -> float:
        """Return the ``time.monotonic()`` at which ``direction``'s bandwidth schedule began.

        A trace's time 0 is that moment; it is reset by ``start`` and by ``set_uplink`` /
        ``set_downlink``.
        """
        return self._link(direction).schedule.origin

    def stats(self) -> LinkStats:
        """Return a snapshot of the counters."""
        up, down = self._links[UPLINK], self._links[DOWNLINK]
        loop = self._loop
        return LinkStats(
            connections_accepted=0 if loop is None else loop.accepted,
            connections_active=0 if loop is None else len(loop.connections),
            connections_failed=0 if loop is None else loop.failed,
            uplink_bytes=up.relayed_bytes,
            downlink_bytes=down.relayed_bytes,
            uplink_queued_bytes=up.queued_bytes,
            downlink_queued_bytes=down.queued_bytes,
            uplink_in_flight_bytes=up.in_flight_bytes,
            downlink_in_flight_bytes=down.in_flight_bytes,
        )

    def _link(self, direction: str) -> ShapedLink:
        try:
            return self._links[direction]
        except KeyError:
            raise ValueError(f'direction must be {UPLINK!r} or {DOWNLINK!r}') from None

    def _set_bandwidth(
        self, direction: str, rate_bps: float | None, trace: DeliveryTrace | None
    ) -> None:
        check_bandwidth(rate_bps, trace)
        link = self._link(direction)

        def apply() -> None:
            if self._loop is None:  # not started: start() sets the schedule's time 0
                link.set_bandwidth(rate_bps, trace, time.monotonic())
            else:
                self._loop.change_bandwidth(link, rate_bps, trace)

        self._call_in_loop(apply)

    def _call_in_loop(self, function: Callable[[], None]) -> None:
        thread = self._thread
        if thread is None or not thread.is_alive() or thread is threading.current_thread():
            function()
            return
        future: Future = Future()
        self._commands.put((function, future))
        self._loop.wake()
        future.result(_COMMAND_TIMEOUT_S)
