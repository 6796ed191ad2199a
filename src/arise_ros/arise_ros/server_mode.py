# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The ``arise`` server mode: the edge server's ARISE half.

Registered under ``edge_offload.server_modes``, so an edge server serves it when ``arise`` is
in its ``modes``; robots reach it through the authenticated edge protocol like every mode.
Ops (CALL fields; numbers are plain msgpack values):

* ``join`` ``{fps, sla, frame_id, uplink_s, downlink_s[, drop_rate, name]}``: ask to be
  served. The robot waits for admission (next scheduler run); the reply says ``waiting``
  or refuses with a reason (``full``: the waiting list is full).
* ``plan`` ``{after}``: a long poll. Answers with the robot's newest plan once its sequence
  is above ``after``: ``status`` (``admitted``, ``waiting``, ``evicted``, ``left``), ``seq``,
  ``interval``, ``batch_size``, ``frames`` (the frame ids to offload, in order),
  ``estimated_drop`` and ``sla``.
* ``infer`` ``{frame_id[, drop_rate, result_frame]}`` with the model's input tensors: one
  frame, run in the batch its plan put it in; the reply carries the model's outputs. The
  optional fields update the robot's drop rate and the newest result it holds.
* ``report`` ``{drop_rate[, result_frame]}``: the same update without a frame.
* ``leave``: stop being served.

A robot is its session: the scheduler's client id is the session id the server gave the
authenticated connection, so no robot can act for another. Every 200 ms the scheduler
plans the next second; the batch executor follows the plan.

Options (``ServerConfig.mode_options['arise']``; the ``edge_server`` node's ``arise.*``
parameters): see :data:`OPTION_SPECS`.

Diagnostics (:meth:`AriseServerMode.diagnostics`, on the node's ``/diagnostics``): one fleet
status (robots admitted and waiting, evictions, scheduler run time, batches, mean batch size
and the server's idle share since the last report, where the latency profile came from) and
one status per robot (its SLA, interval, batch size, the plan's estimated drop, its
reported drop rate, frames and results, and its served drop), WARN while it waits or when
its estimate or its served drop is over its SLA. The served drop is what the results the
server really sent gave the robot over the last 10 s of its admission (its
reported drop rate times the tracking stride of every frame, less the reference setup's):
the plan's estimate checked against what happened, so a robot whose frames come late or
not at all shows up even while its plan looks fine.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import math
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from arise_ros.batch_executor import BatchExecutor, ExecutorBusyError
from arise_ros.latency_profile import (
    BatchLatencyProfile,
    ProfileError,
    load_profile,
    measure_profile,
    observed_scale,
)
from arise_ros.scheduler import (
    RECENT_RESULTS,
    AriseScheduler,
    ClientState,
    Plan,
    SchedulerConfig,
    client_drop,
    reference_for,
)
from edge_offload import protocol
from edge_offload.models import InvalidInputError, UnknownModelError
from edge_offload.modes.base import (
    ModeOption,
    ModeStatus,
    ServerCall,
    ServerMode,
    ServerModeContext,
    ServerReply,
)
from edge_offload.server import percentile

OPTION_SPECS: tuple[ModeOption, ...] = (
    ModeOption('model', 'accumo_depth', 'Model-zoo name every ARISE robot offloads'),
    ModeOption('max_batch', 8, 'Largest batch the scheduler plans', 1, 64),
    ModeOption('policy', 'planned', "'planned' (ARISE) or 'reactive' (ARISE-α: no coordination)"),
    ModeOption('period_s', 0.2, 'Scheduler period, seconds', 0.01, 5.0),
    ModeOption('horizon_s', 1.0, 'How far each plan looks ahead, seconds', 0.05, 30.0),
    ModeOption(
        'verify_past_s',
        2.0,
        "Seconds of each robot's real results verify weighs with the plan (0: the plan only)",
        0.0,
        30.0,
    ),
    ModeOption(
        'profile_file',
        '',
        "Batch latency profile to load (YAML from a GPU server, say); '' = measure at start-up",
    ),
    ModeOption(
        'profile_image',
        [96, 128],
        'Frame size [height, width] the start-up profile is measured on',
    ),
    ModeOption('max_clients', 64, 'Robots admitted and waiting together', 1, 4096),
)
OPTION_DEFAULTS: dict[str, Any] = {option.name: option.default for option in OPTION_SPECS}
# Scheduler run times kept for the diagnostics' percentiles.
_RUN_TIMES_KEPT = 256
# Results kept per robot for its served drop (a 10 s window at up to 200 results/s).
_SERVED_KEPT = 2048
_SERVED_WINDOW_S = 10.0
# Largest frame list a plan reply carries (a 1 s horizon at 240 fps, every frame).
_MAX_PLAN_FRAMES = 240


@dataclass
class _Robot:
    """One session's ARISE state on the server."""

    client_id: str
    name: str = ''
    joined: bool = False
    status: str = 'new'
    seq: int = 0
    reply: dict[str, Any] | None = None
    poll: concurrent.futures.Future | None = None
    poll_after: int = 0
    # When it was last admitted, and (sent, frame id) of its newest results since then.
    admitted_s: float | None = None
    served: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=_SERVED_KEPT))


def _option(options: Mapping[str, Any], name: str) -> Any:
    return options.get(name, OPTION_DEFAULTS[name])


class AriseServerMode(ServerMode):
    """Admit, plan and batch the depth requests of many robots."""

    name = 'arise'
    option_specs = OPTION_SPECS

    def __init__(self, context: ServerModeContext) -> None:
        super().__init__(context)
        options = dict(context.options)
        unknown = sorted(set(options) - set(OPTION_DEFAULTS))
        if unknown:
            raise ValueError(f'unknown arise options: {unknown}; known: {sorted(OPTION_DEFAULTS)}')
        self.model_name = str(_option(options, 'model'))
        self.max_batch = int(_option(options, 'max_batch'))
        self.policy = str(_option(options, 'policy'))
        self.period_s = float(_option(options, 'period_s'))
        self.max_clients = int(_option(options, 'max_clients'))
        if self.policy not in ('planned', 'reactive'):
            raise ValueError(f"arise policy must be 'planned' or 'reactive', not {self.policy!r}")
        if not 1 <= self.max_batch <= 64 or not 0.01 <= self.period_s <= 5.0:
            raise ValueError('arise max_batch must be 1..64 and period_s 0.01..5 s')
        if self.max_clients < 1:
            raise ValueError('arise max_clients must be at least 1')
        try:
            self.model = context.models.get(self.model_name)
        except UnknownModelError as error:
            raise ValueError(f'arise model: {error}') from None
        # The profile measured (or loaded) at start-up, and the one the scheduler plans with:
        # the first scaled by what the batches really take while serving.
        self.base_profile = self._profile(options)
        self.profile = self.base_profile
        self.profile_scale = 1.0
        self.scheduler_config = SchedulerConfig(
            horizon_s=float(_option(options, 'horizon_s')),
            verify_past_s=float(_option(options, 'verify_past_s')),
            max_waiting=self.max_clients,
        )
        self._lock = threading.Lock()
        self._served_lock = threading.Lock()  # every robot's `served` results
        self._robots: dict[str, _Robot] = {}
        self._scheduler = AriseScheduler(
            self.profile, self.scheduler_config, proactive=self.policy == 'planned'
        )
        self._executor: BatchExecutor | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        # For the diagnostics (all under self._lock).
        self._run_times_s: deque[float] = deque(maxlen=_RUN_TIMES_KEPT)
        self._counts = {'evicted': 0, 'refused': 0, 'admitted': 0}
        self._window = (time.monotonic(), 0.0, 0, 0)  # when, busy_s, batches, requests

    def _profile(self, options: Mapping[str, Any]) -> BatchLatencyProfile:
        path = str(_option(options, 'profile_file'))
        if path:
            profile = load_profile(path)
            if profile.max_batch < self.max_batch:
                raise ProfileError(
                    f'{path} has batch sizes up to {profile.max_batch}, fewer than max_batch '
                    f'{self.max_batch}'
                )
            return BatchLatencyProfile(
                profile.model,
                {n: profile.latency(n) for n in range(1, self.max_batch + 1)},
                profile.source,
            )
        height, width = (int(v) for v in _option(options, 'profile_image'))
        examples = self.model.spec.example_inputs()
        frame = {
            name: torch.zeros((1, 3, height, width), dtype=tensor.dtype)
            if tensor.dim() == 4
            else tensor
            for name, tensor in examples.items()
        }

        def run(size: int) -> None:
            self.model.run_batch([frame] * size)

        return measure_profile(
            self.model_name,
            run,
            self.max_batch,
            f'measured at start-up on this server, {height}x{width} frames, '
            f'{torch.get_num_threads()} torch threads',
            repeats=3,
            warmup=1,
        )

    # --- the server's calls -------------------------------------------------------------

    def open_session(self, session_id: str) -> _Robot:
        return _Robot(session_id)

    def close_session(self, state: _Robot) -> None:
        with self._lock:
            self._forget(state, 'left')

    def call_batch(self, call: ServerCall) -> int:
        return 1

    def handle(self, state: _Robot, call: ServerCall) -> ServerReply | concurrent.futures.Future:
        handler = {
            'join': self._join,
            'plan': self._plan,
            'infer': self._infer,
            'report': self._report,
            'leave': self._leave,
        }.get(call.op)
        if handler is None:
            raise protocol.ProtocolError(protocol.E_BAD_REQUEST, f'arise has no op {call.op!r}')
        return handler(state, call)

    def _join(self, robot: _Robot, call: ServerCall) -> ServerReply:
        fields = call.fields
        try:
            client = ClientState(
                robot.client_id,
                fps=_number(fields, 'fps'),
                sla=_number(fields, 'sla'),
                uplink_s=_number(fields, 'uplink_s'),
                downlink_s=_number(fields, 'downlink_s'),
                frame_id_now=int(_number(fields, 'frame_id')),
                now_s=time.monotonic(),
                drop_rate=_optional_rate(fields),
                arrival_window=self.scheduler_config.arrival_window,
            )
        except ValueError as error:
            raise protocol.ProtocolError(protocol.E_BAD_REQUEST, f'arise join: {error}') from None
        name = fields.get('name', '')
        with self._lock:
            if robot.joined:
                raise protocol.ProtocolError(protocol.E_BAD_REQUEST, 'this session has joined')
            if len(self._robots) >= self.max_clients or not self._scheduler.request_admission(
                client
            ):
                self._counts['refused'] += 1
                return ServerReply(fields={'status': 'refused', 'reason': 'full'})
            robot.joined = True
            robot.status = 'waiting'
            robot.name = name if isinstance(name, str) else ''
            self._robots[robot.client_id] = robot
            self._start()
        return ServerReply(fields={'status': 'waiting'})

    def _plan(self, robot: _Robot, call: ServerCall) -> ServerReply | concurrent.futures.Future:
        after = call.fields.get('after', 0)
        if not isinstance(after, int):
            raise protocol.ProtocolError(protocol.E_BAD_REQUEST, 'arise plan: after is an int')
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if not robot.joined:
                raise protocol.ProtocolError(protocol.E_BAD_REQUEST, 'join before asking a plan')
            if robot.reply is not None and robot.seq > after:
                return ServerReply(fields=dict(robot.reply))
            if robot.poll is not None:
                _answer(robot.poll, robot.reply or {'status': robot.status, 'seq': robot.seq})
            robot.poll, robot.poll_after = future, after
        return future

    def _infer(self, robot: _Robot, call: ServerCall) -> concurrent.futures.Future:
        frame_id = call.fields.get('frame_id')
        if not isinstance(frame_id, int):
            raise protocol.ProtocolError(protocol.E_BAD_REQUEST, 'arise infer needs a frame_id')
        self._update(robot, call.fields)
        with self._lock:
            client = self._scheduler.clients.get(robot.client_id)
            if client is not None:
                client.record_arrival(frame_id, time.monotonic())
            executor = self._executor
        if executor is None:
            raise protocol.ProtocolError(protocol.E_BAD_REQUEST, 'join before sending frames')
        try:
            self.model.validate(call.tensors)
        except InvalidInputError as error:
            raise protocol.ProtocolError(protocol.E_INVALID_INPUT, str(error)) from None
        try:
            done = executor.submit(robot.client_id, frame_id, call.tensors)
        except ExecutorBusyError as error:
            raise protocol.ProtocolError(protocol.E_BUSY, str(error)) from None
        reply: concurrent.futures.Future = concurrent.futures.Future()
        started = time.monotonic()

        def forward(result: concurrent.futures.Future) -> None:
            if not reply.set_running_or_notify_cancel():
                return
            error = result.exception()
            if error is not None:
                reply.set_exception(error)
                return
            # Its own lock: a reply must not wait for a scheduler run holding self._lock.
            with self._served_lock:
                robot.served.append((time.monotonic(), frame_id))
            reply.set_result(
                ServerReply(
                    tensors=result.result(),
                    fields={'frame_id': frame_id},
                    compute_time_s=time.monotonic() - started,
                    model=self.model_name,
                )
            )

        done.add_done_callback(forward)
        return reply

    def _report(self, robot: _Robot, call: ServerCall) -> ServerReply:
        self._update(robot, call.fields)
        return ServerReply(fields={'status': robot.status})

    def _leave(self, robot: _Robot, call: ServerCall) -> ServerReply:
        with self._lock:
            self._forget(robot, 'left')
        return ServerReply(fields={'status': 'left'})

    def _update(self, robot: _Robot, fields: Mapping[str, Any]) -> None:
        rate = _optional_rate(fields)
        result_frame = fields.get('result_frame')
        with self._lock:
            client = self._scheduler.clients.get(robot.client_id) or self._scheduler.waiting.get(
                robot.client_id
            )
            if client is None:
                return
            if rate is not None:
                client.drop_rate = rate
            if isinstance(result_frame, int):
                client.last_result_frame = result_frame

    def _forget(self, robot: _Robot, status: str) -> None:
        """Drop a robot from the scheduler (call with the lock held)."""
        self._scheduler.remove(robot.client_id)
        self._robots.pop(robot.client_id, None)
        robot.joined = False
        robot.status = status
        if robot.poll is not None:
            _answer(robot.poll, {'status': status, 'seq': robot.seq + 1})
            robot.poll = None

    # --- the scheduler's thread ---------------------------------------------------------

    def _start(self) -> None:
        """Start the executor and the scheduler thread (call with the lock held)."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._executor = BatchExecutor(
            self.model.run_batch,
            self.max_batch,
            self.policy,
            max_pending=4 * self.max_clients,
            profile=self.profile,
            grace_fraction=self.scheduler_config.grace_fraction,
        )
        self._thread = threading.Thread(target=self._loop, name='arise-scheduler', daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._lock:
            thread, executor = self._thread, self._executor
            self._thread = self._executor = None
            self._stop.set()
            for robot in list(self._robots.values()):
                self._forget(robot, 'left')
        if thread is not None:
            thread.join(2.0)
        if executor is not None:
            executor.close()

    def _loop(self) -> None:
        next_run = time.monotonic()
        while not self._stop.wait(max(0.0, next_run - time.monotonic())):
            next_run += self.period_s
            try:
                self._run_once()
            except Exception as error:  # noqa: BLE001 - the next run tries again
                self.context.logger.error('arise scheduler run failed: %s', error)
            next_run = max(next_run, time.monotonic())

    def _track_latency(self, executor: BatchExecutor) -> None:
        """Plan with the profile scaled by what the batches really take (lock held).

        A profile measured on an idle server, or on another machine, is off once the server
        is loaded: batches then run later than planned, requests queue, and every robot's
        results come later than its plan said (see :func:`observed_scale`).
        """
        scale = observed_scale(self.base_profile, executor.recent_batches(), self.profile_scale)
        if scale is None:
            return
        self.context.logger.info(
            'arise: batches take %.2fx the profile; planning with that', scale
        )
        self.profile_scale = scale
        self.profile = self.base_profile.scaled(scale, 'as measured while serving')
        self._scheduler.set_profile(self.profile)
        executor.set_profile(self.profile)

    def _run_once(self) -> None:
        with self._lock:
            if self._executor is not None:
                self._track_latency(self._executor)
            self._report_results()
            started = time.perf_counter()
            plan = self._scheduler.run(time.monotonic())
            self._run_times_s.append(time.perf_counter() - started)
            self._counts['admitted'] += len(plan.admitted)
            executor = self._executor
            for client_id in plan.evicted:
                robot = self._robots.get(client_id)
                if robot is not None:
                    self._counts['evicted'] += 1
                    self.context.logger.info(
                        'arise: evicted %s (%s): its SLA no longer fits', robot.name, client_id
                    )
                    self._publish(robot, {'status': 'evicted'})
                    self._forget(robot, 'evicted')
            for client_id, robot in self._robots.items():
                if client_id in plan.clients:
                    self._publish(robot, _plan_fields(plan, client_id))
                elif robot.status != 'waiting':
                    # A waiting robot hears again only when that changes, not every run.
                    self._publish(robot, {'status': 'waiting'})
        if executor is not None:
            executor.set_plan(plan.batches)

    def _report_results(self) -> None:
        """Give verify each admitted robot's real results, not the plans' (lock held).

        A plan says when a result should be back; what the robots got (late, or never,
        on a server slower than its plan) is what their accuracy followed.
        """
        since = time.monotonic() - self.scheduler_config.verify_past_s
        for client_id, robot in self._robots.items():
            client = self._scheduler.clients.get(client_id)
            if client is None:
                continue
            newest: list[tuple[float, int]] = []
            with self._served_lock:
                # The results verify will weigh, and the one before them.
                for sent, frame in itertools.islice(reversed(robot.served), RECENT_RESULTS):
                    newest.append((sent + client.downlink_s, frame))
                    if sent < since:
                        break
            client.results_reported = True
            client.recent_results.clear()
            client.recent_results.extend(reversed(newest))

    def _publish(self, robot: _Robot, fields: dict[str, Any]) -> None:
        robot.seq += 1
        if fields['status'] == 'admitted' and robot.status != 'admitted':
            robot.admitted_s = time.monotonic()
            with self._served_lock:
                robot.served.clear()
        robot.status = fields['status']
        robot.reply = {**fields, 'seq': robot.seq}
        if robot.poll is not None and robot.seq > robot.poll_after:
            _answer(robot.poll, robot.reply)
            robot.poll = None

    # --- load, for the fleet's load balancer ------------------------------------------------

    def load(self) -> dict[str, Any]:
        """Return robots admitted and waiting, the current plan's idle share, the capacity.

        The idle share is the part of the plan's horizon no batch is planned in (1.0 before
        the first plan): the room a newcomer could use.
        """
        with self._lock:
            plan = self._scheduler.plan
            admitted = sum(robot.status == 'admitted' for robot in self._robots.values())
            waiting = sum(robot.status == 'waiting' for robot in self._robots.values())
        idle = 1.0
        if plan is not None and plan.horizon_end_s > plan.created_s:
            busy = sum(batch.latency_s for batch in plan.batches)
            idle = max(0.0, 1.0 - busy / (plan.horizon_end_s - plan.created_s))
        return {
            'admitted': admitted,
            'waiting': waiting,
            'idle_share': idle,
            'max_clients': self.max_clients,
        }

    # --- diagnostics ----------------------------------------------------------------------

    def diagnostics(self) -> list[ModeStatus]:
        """Return the fleet's status and one per robot (see the module docstring)."""
        with self._lock:
            robots = list(self._robots.values())
            plan = self._scheduler.plan
            clients = dict(self._scheduler.clients) | dict(self._scheduler.waiting)
            run_times = sorted(self._run_times_s)
            counts = dict(self._counts)
            executor = self._executor
            now = time.monotonic()
            window_values = {}
            if executor is not None:
                stats = executor.stats
                then, busy_then, batches_then, requests_then = self._window
                span = now - then
                batches = stats.batches - batches_then
                requests = stats.requests - requests_then
                window_values = {
                    'batches per s': f'{batches / span:.1f}' if span > 0 else '0.0',
                    'mean batch size': f'{requests / batches:.2f}' if batches else '0.00',
                    'idle share': f'{max(0.0, 1.0 - (stats.busy_s - busy_then) / span):.2f}'
                    if span > 0
                    else '1.00',
                    'late requests total': stats.late_requests,
                    'unplanned requests total': stats.unplanned_requests,
                }
                self._window = (now, stats.busy_s, stats.batches, stats.requests)
        admitted = sum(robot.status == 'admitted' for robot in robots)
        waiting = sum(robot.status == 'waiting' for robot in robots)
        fleet = ModeStatus(
            'arise fleet',
            'ok',
            f'{admitted} robot(s) admitted, {waiting} waiting',
            {
                'admitted': admitted,
                'waiting': waiting,
                'admissions total': counts['admitted'],
                'evictions total': counts['evicted'],
                'refusals total': counts['refused'],
                'policy': self.policy,
                'model': self.model_name,
                'max batch': self.max_batch,
                'scheduler runs kept': len(run_times),
                'scheduler run p50 ms': _milliseconds(percentile(run_times, 0.5)),
                'scheduler run p99 ms': _milliseconds(percentile(run_times, 0.99)),
                **window_values,
                'latency profile': self.base_profile.source,
                'profile scale (measured / profiled)': f'{self.profile_scale:.2f}',
            },
        )
        statuses = [fleet]
        for robot in sorted(robots, key=lambda r: (r.name, r.client_id)):
            client = clients.get(robot.client_id)
            served = self._served_drop(robot, client, now)
            statuses.append(_robot_status(robot, client, plan, served))
        return statuses

    def _served_drop(
        self, robot: _Robot, client: ClientState | None, now_s: float
    ) -> float | None:
        """Return the drop the results really sent gave an admitted robot lately, if known.

        Each result is back one downlink after it was sent; every frame captured in the
        window is tracked from the newest result back before its capture.
        """
        if client is None or robot.status != 'admitted' or robot.admitted_s is None:
            return None
        rate = client.drop_rate
        if rate is None:
            return None
        start = max(robot.admitted_s, now_s - _SERVED_WINDOW_S)
        with self._served_lock:
            back = [(sent + client.downlink_s, frame) for sent, frame in robot.served]
        # The window's results, and the newest one before it (what the robot held then).
        before = [item for item in back if item[0] <= start]
        results = before[-1:] + [item for item in back if item[0] > start]
        end_frame = client.first_frame_captured_after(now_s) - 1
        if end_frame < client.first_frame_captured_after(start):
            return None
        reference = reference_for(client, self.profile, self.scheduler_config.reference_interval)
        if not results:
            # Nothing back yet: as verify counts a newcomer, it holds a result from just
            # before its admission.
            held = client.first_frame_captured_after(robot.admitted_s) - reference.e2e_frames
            results = [(-math.inf, held)]
        return client_drop(client, rate, reference, results, start, end_frame)


def _robot_status(
    robot: _Robot, client: ClientState | None, plan: Plan | None, served_drop: float | None
) -> ModeStatus:
    label = robot.name or robot.client_id
    values: dict[str, Any] = {'session': robot.client_id, 'status': robot.status}
    own = plan.clients.get(robot.client_id) if plan is not None else None
    if client is not None:
        values['sla'] = f'{client.sla:.4f}'
        values['fps'] = f'{client.fps:g}'
        values['reported drop rate'] = (
            'none yet' if client.drop_rate is None else f'{client.drop_rate:.5f}'
        )
        values['newest result frame'] = (
            'none' if client.last_result_frame is None else client.last_result_frame
        )
    level, message = 'ok', robot.status
    if own is not None:
        values['interval (frames)'] = own.interval
        values['batch size'] = own.batch_size
        values['estimated drop'] = f'{own.estimated_drop:.4f}'
        values['planned frames'] = len(own.requests)
        message = (
            f'admitted: every {own.interval} frames, batch {own.batch_size}, estimated drop '
            f'{own.estimated_drop:.4f} of SLA {own.sla:.4f}'
        )
        values[f'served drop (last {_SERVED_WINDOW_S:g} s)'] = (
            'none yet' if served_drop is None else f'{served_drop:.4f}'
        )
        if own.estimated_drop > own.sla:
            level = 'warn'
            message += ' (over its SLA)'
        elif served_drop is not None and served_drop > own.sla:
            level = 'warn'
            message += f'; served drop {served_drop:.4f} is over its SLA'
    elif robot.status == 'waiting':
        level, message = 'warn', 'waiting for admission: running locally'
    return ModeStatus(f'arise robot {label}', level, message, values)


def _milliseconds(seconds: float) -> str:
    return 'none yet' if math.isnan(seconds) else f'{seconds * 1e3:.3f}'


def _plan_fields(plan: Plan, client_id: str) -> dict[str, Any]:
    own = plan.clients[client_id]
    return {
        'status': 'admitted',
        'interval': own.interval,
        'batch_size': own.batch_size,
        'frames': [r.frame_id for r in own.requests][:_MAX_PLAN_FRAMES],
        'estimated_drop': float(own.estimated_drop),
        'sla': float(own.sla),
    }


def _answer(future: concurrent.futures.Future, fields: dict[str, Any]) -> None:
    if future.set_running_or_notify_cancel():
        future.set_result(ServerReply(fields=dict(fields)))


def _number(fields: Mapping[str, Any], name: str) -> float:
    value = fields.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f'{name} must be a number')
    if not math.isfinite(value):
        raise ValueError(f'{name} must be finite')
    return float(value)


def _optional_rate(fields: Mapping[str, Any]) -> float | None:
    if 'drop_rate' not in fields:
        return None
    rate = _number(fields, 'drop_rate')
    if rate < 0.0 or rate > 1.0:
        raise protocol.ProtocolError(protocol.E_BAD_REQUEST, 'drop_rate must be in [0, 1]')
    return rate
