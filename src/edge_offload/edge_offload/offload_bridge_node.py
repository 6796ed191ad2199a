# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``offload_bridge``: the robot side of offloading as a ROS 2 lifecycle node.

Serves the ``offload`` action (``offload_interfaces/action/Offload``): each goal names a
model and carries its inputs; the result holds the outputs, the mode that produced them,
whether the bridge fell back to local inference and why, and what it cost.

* Goals run in parallel on ``parallel_goals`` worker threads, fed by a bounded queue of
  ``max_queued_goals``; a goal that finds the queue full is aborted at once with
  ``ERROR_QUEUE_FULL``. The action callbacks never block the executor: the execute
  callback awaits a future that a worker completes.
* ``mode`` (a parameter, changeable at run time) selects the offloading mode for goals
  that name none. When the server is unreachable, refuses this robot's key, errs, or
  misses the part of the deadline left after a local run, the bridge runs the model
  locally and says so in the result, in ``/diagnostics`` and in its log
  (``fallback_to_local: false`` turns that into ``ERROR_SERVER_UNAVAILABLE``). The
  connection reconnects by itself; offloading resumes when the server is back.
* A goal still queued at its deadline ends with ``ERROR_DEADLINE_EXCEEDED``; a result
  that is ready only after the deadline keeps its outputs and carries the same code.
* A goal without a deadline gives the server a time limit derived from measured round
  trips (``edge_offload.request_timeout``): per model and mode, ``request_timeout_factor``
  times the 95th percentile of the last 20 successful round trips, clamped to
  [``request_timeout_s``, ``max_request_timeout_s``]; ``request_timeout_s`` alone before
  anything is measured. Replies that come after the bridge gave up on them (the server
  keeps computing and answers) are measured too, so a server honestly slower than
  ``request_timeout_s`` costs fallbacks only until its first answer is in, not one per
  frame: a fixed limit made the robot recompute every such frame locally while the server
  was still computing it. A dead or silent server is still detected by pings
  (``liveness_timeout_s``), which fail the request at once, whatever its limit. A goal
  with a deadline keeps it (the server gets the part left after a local run). The limits
  are in ``/diagnostics`` (``request_timeout_s.<model>.<mode>``, with
  ``round_trip_p95_s.<model>.<mode>`` and ``late_replies_measured``) and a notable change
  (25 %) is logged, at most once per 5 s per model and mode.
* ``torch_threads`` > 0 sets torch's intra-op threads (``torch.set_num_threads``, for the
  whole bridge process) for local inference at configure; 0 keeps torch's default
  (usually one per core). On a robot whose cores the edge server or other nodes share,
  fewer threads keep a local run from starving them.
* Inputs are refused by their sizes alone, as the goal is accepted and before anything
  copies them: an image declaring more than ``max_image_bytes`` (``height * step``, its
  payload, or what its encoding implies) or a tensor over ``max_message_bytes`` ends with
  ``ERROR_INPUT_TOO_LARGE``; an image outside the sizes the model declares
  (``edge_offload.models.SizeLimits``: a 1x100000 frame that OpenCV asserts on, a
  4000x4000 frame that only costs time) ends with ``ERROR_INVALID_INPUT``. Either way the
  result says why, the log says so (throttled) and ``/diagnostics`` counts it; the model
  never runs, locally or on the server.
* rclpy deserialises a goal whole before the bridge sees it, and Fast DDS keeps the
  buffer it reassembled the largest goal request into (rmw_fastrtps' history memory
  policy, preallocated with realloc) for as long as the action server exists. After a
  refused goal of ``_RELEASE_AFTER_BYTES`` or more, the bridge drops the goal's payload at
  once and, as soon as no goal has been in flight for ``_RELEASE_QUIET_S``, recreates its
  action server, which gives that buffer back to the OS (measured: 192 MB goal, RSS back
  to within a few MB). Results of finished goals are then no longer kept for late
  ``get_result`` calls (as after rclpy's result timeout), clients see the server gone for
  a tick (``server_is_ready()`` false), and a goal sent in that instant is lost.
* The link monitor publishes ``link_state`` (``offload_interfaces/LinkState``) at
  ``link_state_rate_hz``.

configure connects (in the background) and builds and warms up the models named in
``models``; activate starts accepting goals; deactivate rejects new goals; cleanup
closes the connection. ``autostart`` does configure + activate at start-up.
"""

from __future__ import annotations

import functools
import math
import queue
import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.exceptions import InvalidHandle
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.task import Future

from edge_offload import protocol
from edge_offload.api import LOCAL_MODE, Offloader, OffloaderConfig
from edge_offload.client import ClientConfig
from edge_offload.diagnostics import (
    create_diagnostics_publisher,
    diagnostic_array,
    diagnostic_status,
)
from edge_offload.errors import ErrorCode, OffloadError
from edge_offload.image_convert import (
    ImageFormatError,
    ImageTooLargeError,
    check_image_size,
    image_tensor_shape,
    image_to_tensor,
)
from edge_offload.keys import KeyFileError
from edge_offload.models import InvalidInputError, ModelSpec, UnknownModelError, model_spec
from edge_offload.modes.base import Stage, available_modes, load_mode_class
from edge_offload.request_timeout import DEFAULT_CEILING_S, DEFAULT_FACTOR, RequestTimeouts
from edge_offload.ros_logging import forward_python_logging
from edge_offload.ros_node_main import run_lifecycle_node
from edge_offload.ros_params import ParamSpec, declare_parameters, parameter_values
from edge_offload.ros_params import mode_option_parameters as option_parameters
from edge_offload.stamps import stamp_seconds
from edge_offload.tensor_blob import TensorBlobError, from_tensor_blob, to_tensor_blob
from offload_interfaces.action import Offload
from offload_interfaces.msg import LinkState

_KEYS = '~/.local/share/edge_offload/keys'
PARAMETERS = (
    ParamSpec('server_endpoint', 'tcp://127.0.0.1:5555', 'Edge server endpoint to connect to'),
    ParamSpec('client_name', 'robot', 'Name this robot gives the server (logs, sessions)'),
    ParamSpec('mode', 'nnto', 'Offloading mode for goals that name none (run-time switchable)'),
    ParamSpec('fallback_to_local', True, 'Run locally when the chosen mode cannot finish'),
    ParamSpec('security', 'curve', "'curve' (authenticated) or 'plaintext'"),
    ParamSpec('allow_plaintext', False, "Must be true for security 'plaintext'"),
    ParamSpec('secret_key_file', f'{_KEYS}/robot.key_secret', "This robot's NAME.key_secret"),
    ParamSpec('server_public_key_file', f'{_KEYS}/server.key', "The server's public NAME.key"),
    ParamSpec('models', ['tiny_cnn'], 'Models built and warmed up at configure; others refused'),
    ParamSpec('max_queued_goals', 16, 'Goals waiting or running before new ones abort', 1, 4096),
    ParamSpec('parallel_goals', 2, 'Goals processed at the same time', 1, 64),
    ParamSpec(
        'request_timeout_s',
        10.0,
        'Server time limit for goals without deadline before any round trip is measured, '
        'and the floor of the measured limit, s',
        0.01,
    ),
    ParamSpec(
        'request_timeout_factor',
        DEFAULT_FACTOR,
        'Measured limit: this times the p95 of the last round trips (per model and mode)',
        1.0,
        100.0,
    ),
    ParamSpec(
        'max_request_timeout_s',
        DEFAULT_CEILING_S,
        'Measured limit never exceeds this (>= request_timeout_s), s',
        0.01,
        3600.0,
    ),
    ParamSpec(
        'max_message_bytes',
        protocol.DEFAULT_MAX_MESSAGE_BYTES,
        'Largest request or reply on the wire, and largest input tensor, bytes',
        1024,
        2**31,
    ),
    ParamSpec(
        'max_image_bytes',
        64 * 1024 * 1024,
        'Largest image in a goal: height x step, its payload or what its encoding implies, '
        'bytes; a larger one is refused (ERROR_INPUT_TOO_LARGE) before anything copies it',
        1024,
        2**31,
    ),
    ParamSpec('ping_interval_s', 0.2, 'Active RTT probe period', 0.01, 10.0),
    ParamSpec('liveness_timeout_s', 3.0, 'Server silent this long counts as lost', 0.1, 600.0),
    ParamSpec('link_state_rate_hz', 5.0, 'LinkState publishing rate', 0.1, 100.0),
    ParamSpec('link_window_s', 1.0, 'Bandwidth estimation window', 0.1, 60.0),
    ParamSpec('diagnostics_period_s', 1.0, 'Diagnostics publishing period', 0.05, 60.0),
    ParamSpec(
        'torch_threads',
        0,
        'torch intra-op threads for local inference, set at configure (0 = torch default)',
        0,
        256,
    ),
    ParamSpec('autostart', False, 'Configure and activate at start-up', read_only=True),
)


def mode_option_parameters() -> tuple[ParamSpec, ...]:
    """Return ``<mode>.<option>`` parameters for every registered mode's options."""
    return option_parameters(available_modes(), load_mode_class, 'mode')


# How long release() waits for the goal workers to finish a run in progress.
_WORKER_JOIN_S = 0.5
# Parameters applied at once; the others take effect at the next configure.
_RUNTIME_PARAMETERS = frozenset({'mode', 'fallback_to_local'})
# A refused goal carrying this much makes the bridge give DDS's goal buffer back (see above).
_RELEASE_AFTER_BYTES = 16 * 1024 * 1024
# ... once no goal has been received, in flight or answered for this long.
_RELEASE_QUIET_S = 1.0
_RELEASE_CHECK_PERIOD_S = 0.25
# The longest the bridge waits for rclpy to destroy the old action server.
_RETIRE_TIMEOUT_S = 2.0
_REFUSAL_LOG_PERIOD_S = 5.0


@dataclass
class _Job:
    goal_handle: ServerGoalHandle
    accepted_at: float
    deadline: float | None
    done: Future = field(default_factory=Future)
    cancel: threading.Event = field(default_factory=threading.Event)
    rejected_reason: str = ''


class OffloadBridgeNode(LifecycleNode):
    """Serve the Offload action through the configured offloading mode."""

    def __init__(self, **kwargs) -> None:
        super().__init__('offload_bridge', **kwargs)
        declare_parameters(self, PARAMETERS)
        self._mode_parameters = mode_option_parameters()
        declare_parameters(self, self._mode_parameters)
        # The robot-side parts: offloader, client, keys, modes (their logger is 'edge_offload').
        forward_python_logging(
            self, ('edge_offload', 'edge_offload.api', 'edge_offload.client', 'edge_offload.keys')
        )
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._offloader: Offloader | None = None
        self._active = False
        self._jobs: queue.Queue[_Job | None] | None = None
        self._workers: list[threading.Thread] = []
        self._action_server: ActionServer | None = None
        self._status_publishers: list = []
        self._status_timers: list = []
        self._result_ready_guard = None
        self._server_id = ''
        self._max_input_bytes = protocol.DEFAULT_MAX_MESSAGE_BYTES
        self._max_image_bytes = 64 * 1024 * 1024
        self._image_limit_name = 'max_image_bytes'
        self._goal_lock = threading.Lock()
        self._job_of_goal: dict[bytes, _Job] = {}
        # Goals refused by their inputs' sizes, by error code name; the last reason.
        self._refusals: dict[str, int] = {'inputs_too_large': 0, 'inputs_refused': 0}
        self._last_refusal = ''
        self._refusal_logged_at: dict[str, float] = {}
        self._last_goal_activity = 0.0
        self._release_pending = False
        self._retiring_action_server: tuple[ActionServer, float] | None = None
        self._action_server_releases = 0
        self._release_lock = threading.Lock()
        self._request_timeouts: RequestTimeouts | None = None
        self._models: list[str] = []
        # torch's own thread count, restored by a configure with torch_threads 0.
        self._default_torch_threads = torch.get_num_threads()

    # -- parameters --------------------------------------------------------------------

    def _on_set_parameters(self, parameters: list[Parameter]) -> SetParametersResult:
        for parameter in parameters:
            if parameter.name == 'mode':
                modes = available_modes()
                if parameter.value not in modes:
                    return SetParametersResult(
                        successful=False,
                        reason=f'unknown mode {parameter.value!r}; available: {modes}',
                    )
                if self._offloader is not None:
                    self._offloader.set_mode(parameter.value)
                    self.get_logger().info(f'mode switched to {parameter.value}')
            elif parameter.name == 'fallback_to_local' and self._offloader is not None:
                self._offloader.config.fallback_to_local = bool(parameter.value)
            elif parameter.name == 'security' and parameter.value not in ('curve', 'plaintext'):
                return SetParametersResult(
                    successful=False, reason="security must be 'curve' or 'plaintext'"
                )
            elif parameter.name in ('request_timeout_s', 'max_request_timeout_s'):
                limits = {
                    name: self.get_parameter(name).value
                    for name in ('request_timeout_s', 'max_request_timeout_s')
                }
                limits.update(
                    (item.name, item.value) for item in parameters if item.name in limits
                )
                if limits['max_request_timeout_s'] < limits['request_timeout_s']:
                    return SetParametersResult(
                        successful=False,
                        reason=f'max_request_timeout_s ({limits["max_request_timeout_s"]}) '
                        f'must be >= request_timeout_s ({limits["request_timeout_s"]})',
                    )
            elif self._offloader is not None and parameter.name not in _RUNTIME_PARAMETERS:
                self.get_logger().info(f'{parameter.name} takes effect at the next configure')
        return SetParametersResult(successful=True)

    # -- lifecycle ---------------------------------------------------------------------

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Connect to the server (in the background) and warm up the local models."""
        values = parameter_values(self, PARAMETERS)
        try:
            self._offloader, request_timeouts = self._make_offloader(values)
        except (ValueError, KeyError, KeyFileError) as error:
            self.get_logger().error(f'configure failed: {error}')
            return TransitionCallbackReturn.FAILURE
        self._request_timeouts = request_timeouts
        if self._offloader.client is not None:
            self._offloader.client.set_request_timing(request_timeouts)
        self._models = list(values['models'])
        torch.set_num_threads(values['torch_threads'] or self._default_torch_threads)
        try:
            warm_up = self._offloader.warm_up(values['models'])
        except UnknownModelError as error:
            self.get_logger().error(f'configure failed: {error}')
            self._offloader.close()
            self._offloader = None
            return TransitionCallbackReturn.FAILURE
        self._server_id = values['server_endpoint']
        self._max_input_bytes = values['max_message_bytes']
        # An image is never let through larger than the wire limit either.
        self._max_image_bytes = min(values['max_image_bytes'], values['max_message_bytes'])
        self._image_limit_name = (
            'max_image_bytes'
            if values['max_image_bytes'] <= values['max_message_bytes']
            else 'max_message_bytes'
        )
        self._start_status_timers(values)
        self._result_ready_guard = self.create_guard_condition(lambda: None)
        self._jobs = queue.Queue(maxsize=values['max_queued_goals'])
        self._workers = [
            threading.Thread(
                target=self._work, args=(self._jobs,), name=f'offload-worker-{index}', daemon=True
            )
            for index in range(values['parallel_goals'])
        ]
        for worker in self._workers:
            worker.start()
        self._action_server = self._create_action_server()
        timings = ', '.join(f'{name} {seconds * 1e3:.0f} ms' for name, seconds in warm_up.items())
        self.get_logger().info(
            f'configured: mode {values["mode"]}, server {values["server_endpoint"]}, '
            f'local warm-up {timings}, torch threads {torch.get_num_threads()}, '
            f'server time limit {request_timeouts.floor_s:g} s until measured '
            f'(then {request_timeouts.factor:g} x p95, at most {request_timeouts.ceiling_s:g} s)'
        )
        return TransitionCallbackReturn.SUCCESS

    def _make_offloader(self, values: dict) -> tuple[Offloader, RequestTimeouts]:
        """Return the offloader and request timing the parameters describe (may raise)."""
        mode_options: dict[str, dict] = {}
        for name, value in parameter_values(self, self._mode_parameters).items():
            mode, option = name.split('.', 1)
            mode_options.setdefault(mode, {})[option] = value
        request_timeouts = RequestTimeouts(
            values['request_timeout_s'],
            values['max_request_timeout_s'],
            values['request_timeout_factor'],
        )
        client_config = ClientConfig(
            endpoint=values['server_endpoint'],
            client_name=values['client_name'],
            security=values['security'],
            allow_plaintext=values['allow_plaintext'],
            secret_key_file=values['secret_key_file'],
            server_public_key_file=values['server_public_key_file'],
            max_message_bytes=values['max_message_bytes'],
            request_timeout_s=values['request_timeout_s'],
            ping_interval_s=values['ping_interval_s'],
            liveness_timeout_s=values['liveness_timeout_s'],
        )
        offloader = Offloader(
            OffloaderConfig(
                mode=values['mode'],
                fallback_to_local=values['fallback_to_local'],
                client=client_config,
                local_models=values['models'],
                link_window_s=values['link_window_s'],
                mode_options=mode_options,
            )
        )
        return offloader, request_timeouts

    def _start_status_timers(self, values: dict) -> None:
        """Publish ``link_state`` and ``/diagnostics``; release finished goals' buffers."""
        timer_group = MutuallyExclusiveCallbackGroup()
        link_publisher = self.create_publisher(LinkState, 'link_state', 10)
        diagnostics_publisher = create_diagnostics_publisher(self)
        self._status_publishers = [link_publisher, diagnostics_publisher]
        self._status_timers = [
            self.create_timer(
                1.0 / values['link_state_rate_hz'],
                lambda: link_publisher.publish(self._link_state()),
                callback_group=timer_group,
            ),
            self.create_timer(
                values['diagnostics_period_s'],
                lambda: self._publish_diagnostics(diagnostics_publisher),
                callback_group=timer_group,
            ),
            self.create_timer(
                _RELEASE_CHECK_PERIOD_S, self._release_goal_buffers, callback_group=timer_group
            ),
        ]

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Start accepting goals."""
        self._active = True
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Reject new goals (queued ones still finish)."""
        self._active = False
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Close the connection and release workers, timers and the action server."""
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Release everything."""
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def release(self) -> None:
        """Stop the workers, close the connection, destroy ROS entities (idempotent)."""
        with self._release_lock:
            self._active = False
            jobs, self._jobs = self._jobs, None
            workers, self._workers = self._workers, []
            if jobs is not None:
                # Queued goals end as cancelled; then one stop marker per worker.
                while True:
                    try:
                        job = jobs.get_nowait()
                    except queue.Empty:
                        break
                    if job is not None:
                        job.done.set_result(
                            _error_result(ErrorCode.CANCELED, 'bridge shutting down')
                        )
                for _ in workers:
                    jobs.put(None)
            # A worker inside a model run cannot be interrupted: wait a little, not for it
            # (the workers are daemon threads, so exit does not wait either).
            deadline = time.monotonic() + _WORKER_JOIN_S
            for worker in workers:
                worker.join(timeout=max(0.0, deadline - time.monotonic()))
            if self._action_server is not None:
                self._action_server.destroy()
                self._action_server = None
            self._retiring_action_server = None
            for timer in self._status_timers:
                self.destroy_timer(timer)
            for publisher in self._status_publishers:
                self.destroy_publisher(publisher)
            self._status_timers, self._status_publishers = [], []
            if self._result_ready_guard is not None:
                self.destroy_guard_condition(self._result_ready_guard)
                self._result_ready_guard = None
            if self._offloader is not None:
                self._offloader.close()
                self._offloader = None
            self._request_timeouts = None

    # -- action ------------------------------------------------------------------------

    def _create_action_server(self) -> ActionServer:
        return ActionServer(
            self,
            Offload,
            'offload',
            execute_callback=self._execute,
            goal_callback=self._on_goal,
            handle_accepted_callback=self._on_accepted,
            cancel_callback=self._on_cancel,
            callback_group=ReentrantCallbackGroup(),
        )

    def _on_goal(self, goal: Offload.Goal) -> GoalResponse:
        with self._goal_lock:
            self._last_goal_activity = time.monotonic()
        if not self._active or self._offloader is None:
            self.get_logger().warning(f'rejected a goal for {goal.model!r}: bridge not active')
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _on_accepted(self, goal_handle: ServerGoalHandle) -> None:
        now = time.monotonic()
        deadline_s = stamp_seconds(goal_handle.request.deadline)
        job = _Job(goal_handle, now, now + deadline_s if deadline_s > 0 else None)
        with self._goal_lock:
            self._job_of_goal[bytes(goal_handle.goal_id.uuid)] = job
        refusal = self._refuse_inputs(goal_handle.request)
        if refusal is not None:
            job.done.set_result(refusal)
            goal_handle.execute()
            return
        jobs = self._jobs
        try:
            if jobs is None:
                raise queue.Full
            jobs.put_nowait(job)
        except queue.Full:
            job.rejected_reason = 'offload queue full: too many goals waiting'
            job.done.set_result(
                _error_result(ErrorCode.QUEUE_FULL, job.rejected_reason, queue_time_s=0.0)
            )
        goal_handle.execute()

    def _on_cancel(self, goal_handle: ServerGoalHandle) -> CancelResponse:
        with self._goal_lock:
            job = self._job_of_goal.get(bytes(goal_handle.goal_id.uuid))
        if job is not None:
            job.cancel.set()
        return CancelResponse.ACCEPT

    async def _execute(self, goal_handle: ServerGoalHandle) -> Offload.Result:
        key = bytes(goal_handle.goal_id.uuid)
        with self._goal_lock:
            job = self._job_of_goal[key]
        try:
            result = await job.done
        finally:
            with self._goal_lock:
                del self._job_of_goal[key]
                self._last_goal_activity = time.monotonic()
        if result.error_code == Offload.Result.ERROR_CANCELED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        elif result.error_code == Offload.Result.ERROR_NONE:
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return result

    def _work(self, jobs: queue.Queue[_Job | None]) -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            try:
                result = self._run(job)
            except Exception as error:  # noqa: BLE001 - every goal must get a result
                self.get_logger().error(f'goal failed unexpectedly: {error!r}')
                result = _error_result(ErrorCode.INTERNAL, repr(error))
            job.done.set_result(result)
            if self._result_ready_guard is not None:
                self._result_ready_guard.trigger()

    def _run(self, job: _Job) -> Offload.Result:
        goal: Offload.Goal = job.goal_handle.request
        started = time.monotonic()
        queue_time_s = started - job.accepted_at
        if job.cancel.is_set():
            return _error_result(ErrorCode.CANCELED, 'cancelled while queued', queue_time_s)
        if job.deadline is not None and started >= job.deadline:
            return _error_result(
                ErrorCode.DEADLINE_EXCEEDED,
                f'deadline passed while queued ({queue_time_s:.3f} s in the queue)',
                queue_time_s,
            )
        try:
            inputs = self._decode_inputs(goal)
        except OffloadError as error:
            return _error_result(error.code, str(error), queue_time_s)
        offloader = self._offloader
        if offloader is None:
            return _error_result(ErrorCode.SERVER_UNAVAILABLE, 'bridge shutting down')

        def progress(stage: Stage, bytes_up: int, bytes_down: int) -> None:
            feedback = Offload.Feedback(
                stage=int(stage),
                bytes_up=bytes_up,
                bytes_down=bytes_down,
                elapsed_s=time.monotonic() - job.accepted_at,
            )
            job.goal_handle.publish_feedback(feedback)

        try:
            outcome = offloader.infer(
                goal.model,
                inputs,
                mode=goal.mode or None,
                deadline=job.deadline,
                cancel=job.cancel,
                progress=progress,
            )
        except OffloadError as error:
            return _error_result(error.code, str(error), queue_time_s)
        result = Offload.Result(
            mode_used=outcome.mode_used,
            fell_back=outcome.fell_back,
            fallback_reason=outcome.fallback_reason,
        )
        try:
            result.outputs = [
                to_tensor_blob(name, _to_numpy(tensor)) for name, tensor in outcome.outputs.items()
            ]
        except TensorBlobError as error:
            return _error_result(ErrorCode.INTERNAL, f'cannot pack outputs: {error}')
        if outcome.late:
            late_by = time.monotonic() - job.deadline
            result.error_code = Offload.Result.ERROR_DEADLINE_EXCEEDED
            result.error_message = f'result ready {late_by:.3f} s after the deadline'
        stats = outcome.stats
        result.stats.bytes_up = stats.bytes_up
        result.stats.bytes_down = stats.bytes_down
        result.stats.round_trips = stats.round_trips
        result.stats.queue_time_s = queue_time_s
        result.stats.local_compute_time_s = stats.local_compute_time_s
        result.stats.server_compute_time_s = stats.server_compute_time_s
        result.stats.total_time_s = stats.total_time_s
        return result

    def _check_input_sizes(self, goal: Offload.Goal) -> None:
        """Raise OffloadError for inputs refused by their sizes alone (nothing is copied)."""
        for blob in goal.inputs:
            if len(blob.data) > self._max_input_bytes:
                raise OffloadError(
                    f'input tensor {blob.name!r} is {len(blob.data)} bytes; the limit is '
                    f'{self._max_input_bytes} (max_message_bytes)',
                    ErrorCode.INPUT_TOO_LARGE,
                )
        if len(goal.images) != len(goal.image_input_names):
            raise OffloadError(
                f'{len(goal.images)} images but {len(goal.image_input_names)} image input names',
                ErrorCode.INVALID_INPUT,
            )
        spec = _model_spec(goal.model)
        for name, image in zip(goal.image_input_names, goal.images, strict=True):
            try:
                check_image_size(
                    image.height,
                    image.width,
                    image.encoding,
                    image.step,
                    len(image.data),
                    self._max_image_bytes,
                )
                if spec is not None:
                    spec.check_input_shape(
                        name, image_tensor_shape(image.height, image.width, image.encoding)
                    )
            except ImageTooLargeError as error:
                raise OffloadError(
                    f'image {name!r}: {error} ({self._image_limit_name})',
                    ErrorCode.INPUT_TOO_LARGE,
                ) from None
            except (ImageFormatError, InvalidInputError) as error:
                raise OffloadError(f'image {name!r}: {error}', ErrorCode.INVALID_INPUT) from None

    def _refuse_inputs(self, goal: Offload.Goal) -> Offload.Result | None:
        """Return the error result of a goal refused by its inputs' sizes, else None.

        A refused goal's payload is dropped at once (the goal handle keeps its request until
        rclpy's result timeout), and a large one schedules ``_release_goal_buffers``.
        """
        try:
            self._check_input_sizes(goal)
        except OffloadError as error:
            # Only the code and the text leave this block: the exception's traceback holds
            # the frames that hold the goal's images, and a reference cycle through it kept
            # a refused 192 MB frame alive until the garbage collector happened to run.
            code, reason = error.code, str(error)
        else:
            return None
        payload = sum(len(blob.data) for blob in goal.inputs)
        payload += sum(len(image.data) for image in goal.images)
        goal.inputs, goal.images = [], []
        kind = 'inputs_too_large' if code is ErrorCode.INPUT_TOO_LARGE else 'inputs_refused'
        now = time.monotonic()
        with self._goal_lock:
            self._refusals[kind] += 1
            count = self._refusals[kind]
            self._last_refusal = reason
            if payload >= _RELEASE_AFTER_BYTES:
                self._release_pending = True
            # Throttled per kind, so a stream of one kind does not hide the other.
            log = now - self._refusal_logged_at.get(kind, -math.inf) >= _REFUSAL_LOG_PERIOD_S
            if log:
                self._refusal_logged_at[kind] = now
        if log:
            self.get_logger().warning(
                f'refused a goal for {goal.model!r} before running it ({count} {kind} so '
                f'far): {reason}'
            )
        return _error_result(code, reason)

    def _release_goal_buffers(self) -> None:
        """Recreate the action server after a large refused goal, once goals are quiet.

        Fast DDS keeps the buffer it reassembled a goal request into, grown to the largest
        request, until the goal service's reader is destroyed: recreating the action server
        is the one way rclpy has to give it back. Goals in flight belong to the old server,
        so this waits until none is and none came or ended in ``_RELEASE_QUIET_S``. The new
        server is created only once the old one is really gone (rclpy defers destruction
        while the executor waits on it): a reader created first would share, and keep, the
        topic's buffers.
        """
        now = time.monotonic()
        with self._goal_lock:
            retiring = self._retiring_action_server
            if retiring is not None:
                server, since = retiring
                if not _destroyed(server) and now - since < _RETIRE_TIMEOUT_S:
                    return
                self._retiring_action_server = None
                self._action_server = self._create_action_server()
                self._action_server_releases += 1
                self.get_logger().info(
                    'recreated the offload action server: the buffer of a large refused goal '
                    'went back to the OS'
                )
                return
            quiet = now - self._last_goal_activity >= _RELEASE_QUIET_S
            if not self._release_pending or self._job_of_goal or not quiet:
                return
            if self._action_server is None:
                return
            self._release_pending = False
            server, self._action_server = self._action_server, None
            server.destroy()
            self._retiring_action_server = (server, now)

    def _decode_inputs(self, goal: Offload.Goal) -> dict[str, torch.Tensor]:
        inputs: dict[str, torch.Tensor] = {}
        try:
            for blob in goal.inputs:
                array = from_tensor_blob(blob, max_bytes=self._max_input_bytes)
                inputs[blob.name] = torch.from_numpy(array)
        except TensorBlobError as error:
            too_large = 'over the limit' in str(error)
            code = ErrorCode.INPUT_TOO_LARGE if too_large else ErrorCode.INVALID_INPUT
            raise OffloadError(f'input tensor: {error}', code) from None
        for name, image in zip(goal.image_input_names, goal.images, strict=True):
            try:
                inputs[name] = image_to_tensor(
                    image.height,
                    image.width,
                    image.encoding,
                    image.is_bigendian,
                    image.step,
                    image.data,
                    dtype=_image_input_dtype(goal.model, name),
                )
            except ImageFormatError as error:
                raise OffloadError(f'image {name!r}: {error}', ErrorCode.INVALID_INPUT) from None
        return inputs

    # -- status ------------------------------------------------------------------------

    def _link_state(self) -> LinkState:
        message = LinkState()
        message.header.stamp = self.get_clock().now().to_msg()
        offloader = self._offloader
        message.server_id = self._server_id
        if offloader is None:
            message.uplink_bandwidth_bps = message.downlink_bandwidth_bps = math.nan
            message.rtt_s = message.rtt_stddev_s = math.nan
            return message
        estimate = offloader.link_estimate()
        message.connected = estimate.connected
        message.uplink_bandwidth_bps = estimate.uplink_bandwidth_bps
        message.downlink_bandwidth_bps = estimate.downlink_bandwidth_bps
        message.rtt_s = estimate.rtt_s
        message.rtt_stddev_s = estimate.rtt_stddev_s
        message.loss_ratio = estimate.loss_ratio
        message.window_s = estimate.window_s
        message.sample_count = estimate.sample_count
        message.source = estimate.source
        return message

    def _publish_diagnostics(self, publisher) -> None:
        self._log_request_timeout_changes()
        publisher.publish(self._diagnostics())

    def _log_request_timeout_changes(self) -> None:
        """Log each notable change of a measured server time limit (throttled)."""
        timeouts = self._request_timeouts
        if timeouts is None:
            return
        for change in timeouts.notable_changes():
            self.get_logger().info(
                f'server time limit for {change.model or "calls"} in {change.mode}: '
                f'{change.previous_s:.2f} s -> {change.limit_s:.2f} s (p95 round trip '
                f'{change.quantile_s:.3f} s over the last {change.samples})'
            )

    def _request_timeout_values(self, mode: str) -> dict[str, str]:
        """Return the diagnostics entries of the server time limits.

        Every measured (model, mode), and each configured model in the default mode
        (unless that is ``local``, which asks the server nothing).
        """
        timeouts = self._request_timeouts
        if timeouts is None:
            return {}
        estimates = {(item.model, item.mode): item for item in timeouts.estimates()}
        for model in self._models if mode != LOCAL_MODE else ():
            if (model, mode) not in estimates:
                estimates[(model, mode)] = timeouts.estimate(model, mode)
        values = {}
        for (model, call_mode), item in sorted(estimates.items()):
            name = f'{model or "-"}.{call_mode}'
            values[f'request_timeout_s.{name}'] = f'{item.limit_s:.3f}'
            if item.samples:
                values[f'round_trip_p95_s.{name}'] = f'{item.quantile_s:.3f}'
        values['late_replies_measured'] = str(timeouts.late_replies)
        return values

    def _diagnostics(self) -> DiagnosticArray:
        offloader = self._offloader
        if offloader is None:
            return diagnostic_array(self, [])
        status = offloader.status()
        link = offloader.link_estimate()
        connected = status.connection == 'connected'
        if not self._active:
            level, text = DiagnosticStatus.WARN, 'inactive: goals are rejected'
        elif connected:
            level, text = DiagnosticStatus.OK, f'offloading in {status.mode}'
        elif offloader.config.fallback_to_local:
            level = DiagnosticStatus.WARN
            text = f'falling back to local inference: {status.connection_reason}'
        else:
            level = DiagnosticStatus.ERROR
            text = f'edge server unavailable, fallback disabled: {status.connection_reason}'
        jobs = self._jobs
        values = {
            'mode': status.mode,
            'server': self._server_id,
            'connection': status.connection,
            'connection_reason': status.connection_reason,
            'requests': status.requests,
            'offloaded': status.offloaded,
            'fallbacks': status.fallbacks,
            'failures': status.failures,
            'last_fallback_reason': status.last_fallback_reason,
            **self._refusals,
            'last_refusal_reason': self._last_refusal,
            'action_server_releases': self._action_server_releases,
            'queued_goals': jobs.qsize() if jobs is not None else 0,
            'uplink_mbps': f'{link.uplink_bandwidth_bps / 1e6:.2f}',
            'downlink_mbps': f'{link.downlink_bandwidth_bps / 1e6:.2f}',
            'rtt_ms': f'{link.rtt_s * 1e3:.2f}',
            **self._request_timeout_values(status.mode),
        }
        status = diagnostic_status(
            f'{self.get_name()}: offloading', level, text, values, hardware_id=self._server_id
        )
        return diagnostic_array(self, [status])


def _destroyed(server: ActionServer) -> bool:
    """Return True once rclpy has really destroyed ``server``'s handle (it defers that)."""
    try:
        return not server._handle.pointer  # noqa: SLF001 - rclpy has no public query
    except InvalidHandle:
        return True


def _to_numpy(tensor: torch.Tensor) -> np.ndarray:
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.to(torch.float32)
    return tensor.numpy()


@functools.lru_cache(maxsize=64)
def _model_spec(model: str) -> ModelSpec | None:
    """Return the spec of ``model`` (None when unknown: the inference itself says so)."""
    try:
        return model_spec(model)
    except UnknownModelError:
        return None


@functools.lru_cache(maxsize=64)
def _image_input_dtype(model: str, input_name: str) -> torch.dtype:
    """Return the dtype the model wants for an image input (uint8 models get raw pixels)."""
    try:
        spec = model_spec(model).inputs.get(input_name)
    except UnknownModelError:
        return torch.float32  # the inference itself reports the unknown model
    return torch.float32 if spec is None else spec.dtype


def _error_result(code: ErrorCode, message: str, queue_time_s: float = 0.0) -> Offload.Result:
    result = Offload.Result(error_code=int(code), error_message=message)
    result.stats.queue_time_s = queue_time_s
    return result


def main(args: list[str] | None = None) -> int:
    """Run the offload bridge node until shutdown."""
    return run_lifecycle_node(
        OffloadBridgeNode, 'offload_bridge', lambda node: node.release(), args, num_threads=4
    )


if __name__ == '__main__':
    sys.exit(main())
