# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The robot's half of ARISE: join a server, follow its plan, keep tracking in between.

``AriseSession`` wraps an authenticated ``EdgeClient``. It joins with the robot's task and
SLA, keeps the newest plan from a long poll on its own thread, says for each new frame
whether the plan wants it (``wants``), sends it (``offload``, non-blocking) and reports the
robot's drop rate. A robot that the server has not admitted, has evicted, or cannot reach
runs locally; ``status`` says which, and ``on_status`` hears each change (the load balancer
uses it to move the robot). Nothing here blocks the caller's frame loop.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from edge_offload.client import CallFuture, EdgeClient
from edge_offload.errors import DeadlineMissedError, OffloadError

MODE = 'arise'
# Statuses in which the robot offloads nothing and runs its local model.
LOCAL_STATUSES = frozenset({'new', 'waiting', 'evicted', 'refused', 'lost', 'left'})

_logger = logging.getLogger('arise_ros.client')
# The most servers a directory answer is read for.
_MAX_DIRECTORY_SERVERS = 64
_IN_FLIGHT_KEPT = 64
# The edge server's default max_inflight_per_client.
DEFAULT_MAX_IN_FLIGHT = 4
# At most one warning this often about frames held back.
_HELD_BACK_LOG_PERIOD_S = 5.0
# How long a robot leaving a server that evicted or refused it lets its frames come back.
_LEAVE_GRACE_S = 1.0
# How long an evicted robot with no other server to try runs locally before asking again.
_EVICTED_BACKOFF_S = 5.0


@dataclass
class RobotTask:
    """What a robot declares when it joins."""

    name: str
    fps: float
    sla: float
    uplink_s: float
    downlink_s: float
    drop_rate: float | None = None


@dataclass
class PlanView:
    """The robot's copy of its newest plan."""

    status: str = 'new'
    seq: int = 0
    interval: int = 0
    batch_size: int = 0
    frames: list[int] = field(default_factory=list)
    estimated_drop: float = 0.0
    sla: float = 0.0


class AriseSession:
    """One robot's membership of one ARISE server."""

    def __init__(
        self,
        client: EdgeClient,
        task: RobotTask,
        on_status: Callable[[str, str], None] | None = None,
        poll_timeout_s: float = 3.0,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    ) -> None:
        if not 1 <= max_in_flight <= _IN_FLIGHT_KEPT:
            raise ValueError(f'max_in_flight must be in [1, {_IN_FLIGHT_KEPT}]')
        self._client = client
        self.task = task
        # A frame is not sent while this many are unanswered: the server refuses more
        # (its max_inflight_per_client) and a robot that far behind is better served by
        # its newest frame later than by a refusal now.
        self.max_in_flight = max_in_flight
        self.frames_held_back = 0
        self._held_back_logged_s = -math.inf
        # The newest frames sent (bounded), so that a robot leaving a server can let them
        # come back first.
        self._in_flight: deque[CallFuture] = deque(maxlen=_IN_FLIGHT_KEPT)
        self._on_status = on_status
        self._poll_timeout_s = poll_timeout_s
        self._lock = threading.Lock()
        self._plan = PlanView()
        self._sent_up_to = -1
        self._reason = ''
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def status(self) -> str:
        with self._lock:
            return self._plan.status

    @property
    def reason(self) -> str:
        with self._lock:
            return self._reason

    def plan(self) -> PlanView:
        with self._lock:
            return PlanView(**{**self._plan.__dict__, 'frames': list(self._plan.frames)})

    def join(self, frame_id_now: int, timeout_s: float = 5.0) -> str:
        """Ask to be served; return ``waiting`` or ``refused`` (or ``lost``)."""
        fields: dict[str, Any] = {
            'name': self.task.name,
            'fps': self.task.fps,
            'sla': self.task.sla,
            'frame_id': int(frame_id_now),
            'uplink_s': self.task.uplink_s,
            'downlink_s': self.task.downlink_s,
        }
        if self.task.drop_rate is not None:
            fields['drop_rate'] = self.task.drop_rate
        try:
            reply = self._client.call(MODE, 'join', fields, timeout_s=timeout_s)
        except OffloadError as error:
            self._set_status('lost', f'join failed: {error}')
            return 'lost'
        status = reply.fields.get('status', 'refused')
        self._set_status(status, str(reply.fields.get('reason', '')))
        if status == 'waiting':
            self._stop.clear()
            self._thread = threading.Thread(target=self._poll_loop, name='arise-plan', daemon=True)
            self._thread.start()
        return status

    def wants(self, frame_id: int) -> bool:
        """Return whether the plan has this frame offloaded.

        The first frame at or after each planned frame is sent, so that a frame the camera
        skipped does not lose its slot.
        """
        with self._lock:
            if self._plan.status != 'admitted':
                return False
            frames = self._plan.frames
            index = bisect.bisect_right(frames, self._sent_up_to)
            return index < len(frames) and frames[index] <= frame_id

    def offload(
        self,
        frame_id: int,
        tensors: Mapping[str, torch.Tensor],
        drop_rate: float | None = None,
        result_frame: int | None = None,
    ) -> CallFuture | None:
        """Send one frame; return the call's future, or None when it could not be sent."""
        fields: dict[str, Any] = {'frame_id': int(frame_id)}
        if drop_rate is not None:
            fields['drop_rate'] = float(drop_rate)
        if result_frame is not None:
            fields['result_frame'] = int(result_frame)
        with self._lock:
            self._sent_up_to = max(self._sent_up_to, int(frame_id))
            unanswered = sum(not future.done() for future in self._in_flight)
            if unanswered >= self.max_in_flight:
                self.frames_held_back += 1
                now = time.monotonic()
                log = now - self._held_back_logged_s >= _HELD_BACK_LOG_PERIOD_S
                if log:
                    self._held_back_logged_s = now
        if unanswered >= self.max_in_flight:
            if log:
                _logger.warning(
                    '%s: frame %d not sent: %d frames unanswered (the server is behind its '
                    'plan; %d held back so far)',
                    self.task.name,
                    frame_id,
                    unanswered,
                    self.frames_held_back,
                )
            return None
        try:
            future = self._client.submit(MODE, 'infer', fields, tensors)
        except OffloadError as error:
            _logger.warning('%s: frame %d not sent: %s', self.task.name, frame_id, error)
            return None
        with self._lock:
            self._in_flight.append(future)
        return future

    def wait_in_flight(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the frames sent to be answered (or to fail)."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            pending = [future for future in self._in_flight if not future.done()]
        for future in pending:
            try:
                future.result(max(0.0, deadline - time.monotonic()))
            except Exception:  # noqa: BLE001, S110 - the caller of offload hears of it
                pass

    def report(self, drop_rate: float, result_frame: int | None = None) -> None:
        """Tell the server the robot's drop rate (fire and forget)."""
        fields: dict[str, Any] = {'drop_rate': float(drop_rate)}
        if result_frame is not None:
            fields['result_frame'] = int(result_frame)
        try:
            self._client.submit(MODE, 'report', fields)
        except OffloadError:
            pass  # the poll loop notices a lost server and says so

    def leave(self) -> None:
        self._stop.set()
        try:
            self._client.call(MODE, 'leave', {}, timeout_s=1.0)
        except OffloadError:
            pass
        self._set_status('left', 'left')
        if self._thread is not None:
            self._thread.join(self._poll_timeout_s + 1.0)

    # --- the plan's long poll -------------------------------------------------------------

    def _poll_loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                after = self._plan.seq
            try:
                reply = self._client.call(
                    MODE, 'plan', {'after': after}, timeout_s=self._poll_timeout_s
                )
            except DeadlineMissedError:
                # A long poll with nothing new (a robot still waiting): ask again. A server
                # that is gone fails the call through the connection's liveness instead.
                continue
            except OffloadError as error:
                if self._stop.is_set():
                    return
                self._set_status('lost', f'no plan from the server: {error}')
                return
            self._apply(reply.fields)
            if self.status in ('evicted', 'left'):
                return

    def _apply(self, fields: Mapping[str, Any]) -> None:
        status = fields.get('status')
        if not isinstance(status, str):
            return
        frames = fields.get('frames', [])
        with self._lock:
            self._plan = PlanView(
                status=self._plan.status,  # _set_status below reports the change
                seq=int(fields.get('seq', self._plan.seq)),
                interval=int(fields.get('interval', 0)),
                batch_size=int(fields.get('batch_size', 0)),
                frames=sorted(int(f) for f in frames if isinstance(f, int)),
                estimated_drop=float(fields.get('estimated_drop', 0.0)),
                sla=float(fields.get('sla', self.task.sla)),
            )
        self._set_status(status, '')

    def _set_status(self, status: str, reason: str) -> None:
        with self._lock:
            changed = status != self._plan.status
            self._plan.status = status
            self._reason = reason
        if changed:
            _logger.info('%s: ARISE status %s %s', self.task.name, status, reason)
            if self._on_status is not None:
                self._on_status(status, reason)


class FleetDirectoryClient:
    """Ask the fleet's front door (the ``fleet`` mode) which ARISE servers to try."""

    def __init__(self, client: EdgeClient, timeout_s: float = 1.0) -> None:
        self._client = client
        self._timeout_s = timeout_s

    def where(self, avoid: str = '') -> list[str]:
        """Return the servers to try, best first; raises OffloadError when it cannot say."""
        # The first question may come before the connection is up (the robot just started).
        self._client.wait_connected(self._timeout_s)
        reply = self._client.call('fleet', 'where', {'avoid': avoid}, timeout_s=self._timeout_s)
        servers = reply.fields.get('servers')
        if not isinstance(servers, list) or not all(
            isinstance(endpoint, str) and endpoint.startswith('tcp://') for endpoint in servers
        ):
            raise OffloadError(f'the fleet front door answered {servers!r}, not endpoints')
        return servers[:_MAX_DIRECTORY_SERVERS]

    def close(self) -> None:
        self._client.close()


class AriseMembership:
    """A robot's place in a fleet of ARISE servers: one server at a time, the next on loss.

    It joins the first server that takes it. When that server is lost, evicts the robot or
    refuses it, the robot runs locally (``status`` says why) while a background thread
    joins another; frame ids stay the robot's own. The servers to try, in order: those the
    fleet's ``directory`` (its load balancer) names, when there is one, then ``endpoints``
    (a fixed list, the fallback when the directory cannot be reached), the one left last.
    ``make_client`` builds the authenticated ``EdgeClient`` for an endpoint.
    """

    MOVE_ON = frozenset({'lost', 'evicted', 'refused'})

    def __init__(
        self,
        endpoints: list[str],
        make_client: Callable[[str], EdgeClient],
        task: RobotTask,
        on_status: Callable[[str, str], None] | None = None,
        connect_timeout_s: float = 2.0,
        directory: FleetDirectoryClient | None = None,
    ) -> None:
        if not endpoints and directory is None:
            raise ValueError('a robot needs a server endpoint or a fleet directory')
        self._endpoints = list(endpoints)
        self._directory = directory
        self._make_client = make_client
        self.task = task
        self._on_status = on_status
        self._connect_timeout_s = connect_timeout_s
        self._lock = threading.Lock()
        self._client: EdgeClient | None = None
        self._session: AriseSession | None = None
        self._frame_now = 0
        self._moving = threading.Event()
        self._stop = threading.Event()
        self.endpoint = ''

    @property
    def status(self) -> str:
        with self._lock:
            session = self._session
        if self._moving.is_set() or session is None:
            return 'lost'
        return session.status

    def plan(self) -> PlanView:
        with self._lock:
            session = self._session
        return PlanView() if session is None else session.plan()

    def start(self, frame_id_now: int) -> None:
        """Join the first server on the list that takes the robot, trying each once.

        When none does (none is up yet, say), the robot runs locally and a background
        thread keeps trying the list every second; :meth:`leave` stops it.
        """
        self._frame_now = frame_id_now
        self._move_on('start', '', rounds=1)
        if self._moving.is_set() and not self._stop.is_set():
            threading.Thread(
                target=self._move_on, args=('start', ''), name='arise-move', daemon=True
            ).start()

    def wants(self, frame_id: int) -> bool:
        self._frame_now = frame_id
        with self._lock:
            session = self._session
        return session is not None and not self._moving.is_set() and session.wants(frame_id)

    def offload(self, frame_id: int, tensors, **fields) -> CallFuture | None:
        with self._lock:
            session = self._session
            rate = fields.get('drop_rate')
            if rate is not None and rate != self.task.drop_rate:
                self.task = dataclasses.replace(self.task, drop_rate=float(rate))
        return None if session is None else session.offload(frame_id, tensors, **fields)

    def report(self, drop_rate: float) -> None:
        """Tell the server the robot's drop rate; the next join declares it too."""
        with self._lock:
            session = self._session
            # A robot that joins (again) with a stale rate is admitted, then evicted at its
            # first frame, again and again.
            self.task = dataclasses.replace(self.task, drop_rate=float(drop_rate))
        if session is not None:
            session.report(drop_rate)

    def leave(self) -> None:
        with self._lock:
            self._stop.set()
            session, client = self._session, self._client
        if session is not None:
            session.leave()
        if client is not None:
            client.close()
        if self._directory is not None:
            self._directory.close()

    def _heard(self, status: str, reason: str) -> None:
        if self._on_status is not None:
            self._on_status(status, reason)
        if status in self.MOVE_ON and not self._stop.is_set() and not self._moving.is_set():
            self._moving.set()
            # Not on the poll thread that told us: joining the next server blocks.
            threading.Thread(
                target=self._move_on, args=(status, reason), name='arise-move', daemon=True
            ).start()

    def _move_on(self, status: str, reason: str, rounds: int | None = None) -> None:
        """Join the next server that takes the robot; retry the list each second.

        ``rounds`` bounds the passes over the list (None: until joined or stopped); the
        robot stays "moving" (running locally) when they run out.
        """
        self._moving.set()
        with self._lock:
            old, old_session = self._client, self._session
            self._session = self._client = None
        if old_session is not None and status in ('evicted', 'refused'):
            # The server is alive and serves the frames it has: let them come back.
            old_session.wait_in_flight(_LEAVE_GRACE_S)
        if old is not None:
            old.close()
        left = self.endpoint
        if status == 'evicted' and left and len(self._candidates(left)) <= 1:
            # Its SLA no longer fits there: asking again at once gets it admitted when a
            # plan has room for a moment and evicted at the next run, every few hundred ms.
            # With no other server, it runs locally for a while first.
            self._stop.wait(_EVICTED_BACKOFF_S)
        while not self._stop.is_set() and (rounds is None or rounds > 0):
            if rounds is not None:
                rounds -= 1
            for endpoint in self._candidates(left):
                if self._stop.is_set():
                    return
                if self._try_join(endpoint, status, reason):
                    return
            _logger.warning(
                '%s: no ARISE server takes this robot; running locally', self.task.name
            )
            if rounds is None:
                self._stop.wait(1.0)

    def _candidates(self, left: str) -> list[str]:
        """Return the servers to try now: the directory's, then the fixed list, ``left`` last."""
        named: list[str] = []
        if self._directory is not None:
            try:
                named = self._directory.where(left)
            except OffloadError as error:
                _logger.warning(
                    '%s: the fleet directory did not answer (%s)%s',
                    self.task.name,
                    error,
                    '; trying the fixed list' if self._endpoints else '',
                )
        start = self._endpoints.index(left) + 1 if left in self._endpoints else 0
        fixed = self._endpoints[start:] + self._endpoints[:start]
        ordered = list(dict.fromkeys(named + fixed))
        if left in ordered:
            ordered.remove(left)
            ordered.append(left)
        return ordered

    def _try_join(self, endpoint: str, status: str, reason: str) -> bool:
        client = self._make_client(endpoint)
        if not client.wait_connected(self._connect_timeout_s):
            client.close()
            return False
        with self._lock:
            task = self.task
        session = AriseSession(client, task, on_status=self._heard)
        # _moving stays set through the join, so what the join reports starts no new move.
        if session.join(self._frame_now) != 'waiting':
            client.close()
            return False
        with self._lock:
            stopped = self._stop.is_set()
            if not stopped:
                self._client, self._session, self.endpoint = client, session, endpoint
        if stopped:  # leave() ran while this join was under way
            session.leave()
            client.close()
            return True
        self._moving.clear()
        if session.status in self.MOVE_ON:  # it went while the join was being settled
            self._heard(session.status, session.reason)
        _logger.info('%s: joined %s (after %s %s)', self.task.name, endpoint, status, reason)
        return True
