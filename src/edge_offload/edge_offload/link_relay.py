# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The link emulator's relay thread: ``select()`` over the sockets, timers, shaped links.

:class:`RelayLoop` is everything that runs on the emulator's one thread: it accepts
clients, connects them upstream, reads each direction into its :class:`ShapedLink`, sends
what the link's delivery opportunities carry onto a delay line of timers, and writes due
bytes to the far socket. :class:`edge_offload.link_emulator.LinkEmulator` starts it and
hands it run-time changes through its command queue. The link model and its rules are in
:mod:`edge_offload.link_emulator`'s docstring.
"""

from __future__ import annotations

import errno
import heapq
import itertools
import logging
import queue
import selectors
import socket
import time
from collections import deque
from typing import Any

from edge_offload.link_shaping import DOWNLINK, UPLINK, ShapedLink, describe
from edge_offload.link_traces import PACKET_BYTES, DeliveryTrace

_LOGGER = logging.getLogger('edge_offload.link_emulator')  # also when run with -m

# A chunk released in one wake-up is scheduled in pieces of at most this many bytes.
_PIECE_BYTES = 8 * PACKET_BYTES
# A link with a backlog wakes about this often; never later than its delay allows, nor more
# often than every _MIN_BATCH_S when the delay is shorter. An idle link that receives bytes
# wakes at its next opportunity.
_BATCH_S = 0.001
_MIN_BATCH_S = 0.0005
# select() returns some time after its timeout (about 0.2 ms in small VMs): the loop learns
# how late (a moving average, at most this much) and asks to wake that much earlier.
_MAX_OVERSHOOT_S = 0.0005
_OVERSHOOT_GAIN = 0.1
_CONNECT_TIMEOUT_S = 10.0
# select() handles file descriptors below FD_SETSIZE (1024) only.
_MAX_FD = 1023

_DELIVER = 0
_EOF = 1
_WAKE = 2
_CONNECT_TIMEOUT = 3


class _Pipe:
    """One direction of one connection: src socket -> link -> dst socket."""

    __slots__ = (
        'conn', 'link', 'src', 'dst', 'reading', 'src_eof', 'eof_at', 'eof_scheduled',
        'fin_pending', 'done', 'queued', 'in_flight', 'out', 'out_bytes', 'write_blocked',
        'last_delivery',
    )  # fmt: skip

    def __init__(
        self, conn: _Connection, link: ShapedLink, src: socket.socket, dst: socket.socket
    ):
        self.conn = conn
        self.link = link
        self.src = src
        self.dst = dst
        self.reading = False
        self.src_eof = False
        self.eof_at = 0.0
        self.eof_scheduled = False
        self.fin_pending = False
        self.done = False
        self.queued = 0  # bytes of this pipe in the link queue
        self.in_flight = 0  # bytes past the queue, not yet due at dst
        self.out: deque = deque()  # due bytes not yet written to dst
        self.out_bytes = 0
        self.write_blocked = False
        self.last_delivery = 0.0


class _Connection:
    __slots__ = ('ident', 'client', 'upstream', 'up', 'down', 'connected', 'closed', 'masks')

    def __init__(
        self,
        ident: int,
        client: socket.socket,
        upstream: socket.socket,
        uplink: ShapedLink,
        downlink: ShapedLink,
    ):
        self.ident = ident
        self.client = client
        self.upstream = upstream
        self.up = _Pipe(self, uplink, client, upstream)
        self.down = _Pipe(self, downlink, upstream, client)
        self.connected = False
        self.closed = False
        self.masks = {client: 0, upstream: 0}


_LISTENER = object()
_WAKER = object()


_LISTENER = object()
_WAKER = object()


class RelayLoop:
    """The relay's single thread (see the module docstring); built by ``LinkEmulator.start``."""

    def __init__(
        self,
        links: dict[str, ShapedLink],
        listener: socket.socket,
        upstream_addr: tuple[int, Any],
        commands: queue.SimpleQueue,
    ) -> None:
        self._links = links
        self._listener = listener
        self._upstream_addr = upstream_addr
        self._commands = commands
        self._waker_r, self._waker_w = socket.socketpair()
        self._waker_r.setblocking(False)
        self._waker_w.setblocking(False)
        self._selector = selectors.SelectSelector()  # select() times sub-millisecond waits
        self._selector.register(listener, selectors.EVENT_READ, _LISTENER)
        self._selector.register(self._waker_r, selectors.EVENT_READ, _WAKER)
        self._timers: list[tuple] = []
        self._sequence = itertools.count()
        self.connections: set[_Connection] = set()
        self._next_ident = itertools.count(1)
        self.stopping = False
        self.accepted = 0
        self.failed = 0

    def wake(self) -> None:
        """Make ``select()`` return now (from any thread)."""
        try:
            self._waker_w.send(b'\0')
        except (BlockingIOError, OSError):
            pass  # a wake-up is pending already, or the loop is gone

    def change_bandwidth(
        self, link: ShapedLink, rate_bps: float | None, trace: DeliveryTrace | None
    ) -> None:
        """Give ``link`` a new bandwidth from now on (on the loop's thread)."""
        now = time.monotonic()
        self._advance(link, now)  # what the old bandwidth sent until now
        link.set_bandwidth(rate_bps, trace, now)
        if link.wake_at is not None:
            link.wake_at = None  # the pending wake-up was for the old schedule
        if link.schedule.unlimited:
            self._flush_unlimited(link, now)
        self._schedule_wake(link, now, batch=True)
        self._resume_paused(link)
        _LOGGER.info('%s bandwidth set to %s', link.name, describe(link))

    def run(self) -> None:
        """Relay until ``stopping``; then close every socket."""
        selector = self._selector
        timers = self._timers
        overshoot = 0.0
        try:
            while not self.stopping:
                timeout = None
                if timers:
                    now = time.monotonic()
                    timeout = max(0.0, timers[0][0] - now - overshoot)
                events = selector.select(timeout)
                if timeout and not events:
                    late = time.monotonic() - now - timeout
                    late = min(max(late, 0.0), _MAX_OVERSHOOT_S)
                    overshoot += _OVERSHOOT_GAIN * (late - overshoot)
                # Woken early, the next select() has a zero timeout until the timer is due.
                for key, mask in events:
                    self._dispatch(key, mask)
                self._run_commands()
                self._run_timers()
        except Exception:
            _LOGGER.exception('link emulator loop failed')
        finally:
            self._close_all()

    def _dispatch(self, key: selectors.SelectorKey, mask: int) -> None:
        data = key.data
        if data is _LISTENER:
            self._accept()
            return
        if data is _WAKER:
            try:
                while self._waker_r.recv(4096):
                    pass
            except BlockingIOError:
                pass
            return
        conn: _Connection = data
        if conn.closed:
            return
        sock = key.fileobj
        try:
            if not conn.connected:
                self._finish_connect(conn)
                return
            if mask & selectors.EVENT_WRITE:
                self._flush(conn.down if sock is conn.client else conn.up)
            if mask & selectors.EVENT_READ and not conn.closed:
                self._read(conn.up if sock is conn.client else conn.down)
        except OSError as exc:
            self._close(conn, f'{type(exc).__name__}: {exc}', error=True)
        except Exception:
            _LOGGER.exception('connection %d: unexpected error', conn.ident)
            self._close(conn, 'internal error', error=True)

    def _run_commands(self) -> None:
        while True:
            try:
                function, future = self._commands.get_nowait()
            except queue.Empty:
                return
            try:
                function()
            except Exception as exc:  # handed back to the calling thread
                future.set_exception(exc)
            else:
                future.set_result(None)

    def _push(self, when: float, kind: int, target: object, data: object = None) -> None:
        heapq.heappush(self._timers, (when, next(self._sequence), kind, target, data))

    def _run_timers(self) -> None:
        timers = self._timers
        now = time.monotonic()
        while timers and timers[0][0] <= now and not self.stopping:
            when, _, kind, target, data = heapq.heappop(timers)
            if kind == _WAKE:
                if target.wake_at == when:
                    target.wake_at = None
                    self._advance(target, now)
                    self._schedule_wake(target, now, batch=True)
                    self._resume_paused(target)
                continue
            conn = target if kind == _CONNECT_TIMEOUT else target.conn
            if conn.closed:
                continue
            try:
                if kind == _DELIVER:
                    self._deliver(target, data)
                elif kind == _EOF:
                    target.fin_pending = True
                    if not target.out:
                        self._finish(target)
                elif not conn.connected:
                    self.failed += 1
                    self._close(conn, 'upstream connect timed out', error=True)
            except OSError as exc:
                self._close(conn, f'{type(exc).__name__}: {exc}', error=True)
            except Exception:
                _LOGGER.exception('connection %d: unexpected error', conn.ident)
                self._close(conn, 'internal error', error=True)

    # -- connections ------------------------------------------------------------------------

    def _accept(self) -> None:
        while True:
            try:
                client, peer = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                _LOGGER.warning('accept failed: %s', exc)
                return
            self.accepted += 1
            family, sockaddr = self._upstream_addr
            try:
                upstream = socket.socket(family, socket.SOCK_STREAM)
            except OSError as exc:
                _LOGGER.warning('cannot open an upstream socket: %s', exc)
                self.failed += 1
                client.close()
                continue
            if max(client.fileno(), upstream.fileno()) > _MAX_FD:
                _LOGGER.error('too many open files for select(); refusing a connection')
                self.failed += 1
                client.close()
                upstream.close()
                continue
            conn = _Connection(
                next(self._next_ident), client, upstream, self._links[UPLINK],
                self._links[DOWNLINK],
            )  # fmt: skip
            self.connections.add(conn)
            _LOGGER.debug('connection %d from %s', conn.ident, peer)
            for sock in (client, upstream):
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            result = upstream.connect_ex(sockaddr)
            if result == 0:
                self._connected(conn)
            elif result in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY):
                self._refresh(conn, upstream)
                self._push(time.monotonic() + _CONNECT_TIMEOUT_S, _CONNECT_TIMEOUT, conn)
            else:
                self.failed += 1
                self._close(conn, f'upstream connect failed: {errno.errorcode.get(result)}')

    def _finish_connect(self, conn: _Connection) -> None:
        result = conn.upstream.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if result in (errno.EINPROGRESS, errno.EALREADY):
            return
        if result:
            self.failed += 1
            self._close(
                conn, f'upstream connect failed: {errno.errorcode.get(result, result)}', True
            )
            return
        self._connected(conn)

    def _connected(self, conn: _Connection) -> None:
        conn.connected = True
        _LOGGER.debug('connection %d: upstream connected', conn.ident)
        self._refresh(conn, conn.upstream)
        self._update_reading(conn.up)
        self._update_reading(conn.down)

    def _refresh(self, conn: _Connection, sock: socket.socket) -> None:
        """Register ``sock`` for the events its pipes wait for."""
        if conn.closed:
            return
        if sock is conn.upstream and not conn.connected:
            mask = selectors.EVENT_WRITE
        else:
            source, destination = (
                (conn.up, conn.down) if sock is conn.client else (conn.down, conn.up)
            )
            mask = (selectors.EVENT_READ if source.reading else 0) | (
                selectors.EVENT_WRITE if destination.write_blocked else 0
            )
        old = conn.masks[sock]
        if mask == old:
            return
        if not old:
            self._selector.register(sock, mask, conn)
        elif not mask:
            self._selector.unregister(sock)
        else:
            self._selector.modify(sock, mask, conn)
        conn.masks[sock] = mask

    def _update_reading(self, pipe: _Pipe) -> None:
        """Read from the pipe's source while the link and the destination have room."""
        conn = pipe.conn
        link = pipe.link
        wanted = (
            conn.connected
            and not conn.closed
            and not pipe.src_eof
            and pipe.out_bytes < link.queue_limit
        )
        room = link.has_room()
        if wanted and not room:
            link.paused.add(pipe)
        else:
            link.paused.discard(pipe)
        reading = wanted and room
        if reading != pipe.reading:
            pipe.reading = reading
            self._refresh(conn, pipe.src)

    def _resume_paused(self, link: ShapedLink) -> None:
        if link.paused and link.has_room():
            for pipe in list(link.paused):
                self._update_reading(pipe)

    def _close(self, conn: _Connection, reason: str, error: bool = False) -> None:
        if conn.closed:
            return
        conn.closed = True
        for sock in (conn.client, conn.upstream):
            if conn.masks[sock]:
                self._selector.unregister(sock)
                conn.masks[sock] = 0
            sock.close()
        for pipe in (conn.up, conn.down):
            link = pipe.link
            link.queued_bytes -= pipe.queued
            link.in_flight_bytes -= pipe.in_flight + pipe.out_bytes
            pipe.queued = pipe.in_flight = pipe.out_bytes = 0
            pipe.out.clear()
            link.paused.discard(pipe)
        self.connections.discard(conn)
        log = _LOGGER.warning if error else _LOGGER.debug
        log('connection %d closed: %s', conn.ident, reason)
        if not self.stopping:
            for link in self._links.values():
                self._resume_paused(link)

    def _close_all(self) -> None:
        self.stopping = True
        for conn in list(self.connections):
            self._close(conn, 'emulator stopped')
        for sock in (self._listener, self._waker_r, self._waker_w):
            if sock is not None:
                sock.close()
        if self._selector is not None:
            self._selector.close()
        while True:
            try:
                _, future = self._commands.get_nowait()
            except queue.Empty:
                break
            future.set_exception(RuntimeError('the link emulator is stopped'))

    # -- data path --------------------------------------------------------------------------

    def _read(self, pipe: _Pipe) -> None:
        link = pipe.link
        now = time.monotonic()
        self._advance(link, now)  # opportunities until now cannot carry these bytes
        if not link.has_room():
            self._update_reading(pipe)
            return
        try:
            data = pipe.src.recv(link.read_size)
        except BlockingIOError:
            return
        if not data:
            pipe.src_eof = True
            pipe.eof_at = now
            self._update_reading(pipe)
            self._maybe_schedule_eof(pipe)
            return
        if link.schedule.unlimited:
            self._transmit(link, pipe, data, now)
        else:
            backlog = bool(link.chunks)
            link.chunks.append([pipe, data, 0])
            link.queued_bytes += len(data)
            pipe.queued += len(data)
            self._schedule_wake(link, now, batch=backlog)
        self._update_reading(pipe)

    def _advance(self, link: ShapedLink, now: float) -> None:
        """Send the queued bytes that the opportunities until ``now`` carry."""
        schedule = link.schedule
        if schedule.unlimited:
            return
        count = schedule.count_until(now)
        if count <= link.next_index:
            return
        first = link.next_index
        link.next_index = count
        chunks = link.chunks
        budget = (count - first) * PACKET_BYTES
        sent = 0
        while chunks and sent < budget:
            entry = chunks[0]
            pipe, data, offset = entry
            if pipe.conn.closed:
                chunks.popleft()  # its bytes left the counters when it closed
                continue
            take = min(len(data) - offset, budget - sent, _PIECE_BYTES - sent % _PIECE_BYTES)
            if offset + take == len(data):
                chunks.popleft()
                piece = data if offset == 0 else data[offset:]
            else:
                entry[2] = offset + take
                piece = data[offset : offset + take]
            sent += take
            pipe.queued -= take
            link.queued_bytes -= take
            departure = schedule.time_of(first + (sent - 1) // PACKET_BYTES)
            self._transmit(link, pipe, piece, departure)
            if pipe.src_eof and not pipe.queued:
                self._maybe_schedule_eof(pipe)
        # Opportunities the queue could not use are wasted.

    def _flush_unlimited(self, link: ShapedLink, now: float) -> None:
        """Send everything queued at once (the link just became unlimited)."""
        while link.chunks:
            pipe, data, offset = link.chunks.popleft()
            if pipe.conn.closed:
                continue
            piece = data[offset:]
            pipe.queued -= len(piece)
            link.queued_bytes -= len(piece)
            self._transmit(link, pipe, piece, now)
            if pipe.src_eof and not pipe.queued:
                self._maybe_schedule_eof(pipe)

    def _transmit(self, link: ShapedLink, pipe: _Pipe, piece: bytes, departure: float) -> None:
        """Put bytes that left the queue at ``departure`` on the delay line."""
        delivery = max(departure + link.one_way_delay(), pipe.last_delivery)
        pipe.last_delivery = delivery
        pipe.in_flight += len(piece)
        link.in_flight_bytes += len(piece)
        self._push(delivery, _DELIVER, pipe, piece)

    def _schedule_wake(self, link: ShapedLink, now: float, batch: bool) -> None:
        if not link.chunks or link.schedule.unlimited:
            return
        wake = next_opportunity = link.schedule.time_of(link.next_index)
        if batch:
            # Up to _BATCH_S, but before the delivery of the first byte is due.
            slack = max(link.delay_s - 3 * link.jitter_s, _MIN_BATCH_S)
            wake = max(next_opportunity, min(now + _BATCH_S, next_opportunity + slack))
        wake += 1e-6  # past the opportunity despite rounding
        if link.wake_at is not None and link.wake_at <= wake:
            return
        link.wake_at = wake
        self._push(wake, _WAKE, link)

    def _deliver(self, pipe: _Pipe, piece: bytes) -> None:
        pipe.in_flight -= len(piece)
        pipe.out.append(piece)
        pipe.out_bytes += len(piece)
        if not pipe.write_blocked:
            self._flush(pipe)

    def _flush(self, pipe: _Pipe) -> None:
        """Write due bytes to the destination until it would block."""
        link = pipe.link
        out = pipe.out
        blocked = False
        while out:
            buffer = out[0]
            try:
                sent = pipe.dst.send(buffer)
            except BlockingIOError:
                sent = 0
            pipe.out_bytes -= sent
            link.in_flight_bytes -= sent
            link.relayed_bytes += sent
            if sent < len(buffer):
                out[0] = memoryview(buffer)[sent:]
                blocked = True
                break
            out.popleft()
        if blocked != pipe.write_blocked:
            pipe.write_blocked = blocked
            self._refresh(pipe.conn, pipe.dst)
        if blocked:
            return
        if pipe.fin_pending:
            self._finish(pipe)
            if pipe.conn.closed:
                return
        if not pipe.reading:
            self._update_reading(pipe)
        self._resume_paused(link)

    def _maybe_schedule_eof(self, pipe: _Pipe) -> None:
        """Relay the source's end of stream after its last byte."""
        if pipe.eof_scheduled or pipe.queued:
            return
        pipe.eof_scheduled = True
        when = max(pipe.last_delivery, pipe.eof_at + pipe.link.delay_s)
        self._push(when, _EOF, pipe)

    def _finish(self, pipe: _Pipe) -> None:
        if pipe.done:
            return
        pipe.done = True
        pipe.dst.shutdown(socket.SHUT_WR)
        conn = pipe.conn
        if conn.up.done and conn.down.done:
            self._close(conn, 'both directions ended')
