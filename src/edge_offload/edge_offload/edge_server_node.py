# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``edge_server``: the edge server as a ROS 2 lifecycle node.

configure  loads the models and the server key, checks every setting
activate   binds the socket and starts serving robots
deactivate stops serving (sessions close; robots fall back until reactivated)
cleanup    releases the models

Diagnostics (``/diagnostics``, ``diagnostic_msgs/DiagnosticArray``) report the load
(sessions, requests in flight, worker threads), counters of requests, errors, rejected
and malformed messages and refused robots, and each model's server compute latency
(mean, p50, p95 over its last 256 requests). With ``autostart`` the node configures and
activates itself, for runs without a lifecycle manager.

Supervision: at every diagnostics period an active node checks that the server's serving
loop is alive. If it died, the node reports ERROR with the reason, logs it and restarts
the loop in place (robots reconnect by themselves); after three failed restarts in a row
it deactivates, so the lifecycle state says "not serving" too.
"""

from __future__ import annotations

import sys

from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from edge_offload import protocol
from edge_offload.diagnostics import (
    create_diagnostics_publisher,
    diagnostic_array,
    diagnostic_status,
)
from edge_offload.keys import KeyFileError
from edge_offload.models import UnknownModelError
from edge_offload.modes.base import available_server_modes, load_server_mode_class
from edge_offload.ros_logging import forward_python_logging
from edge_offload.ros_node_main import run_lifecycle_node
from edge_offload.ros_params import (
    ParamSpec,
    declare_parameters,
    mode_option_parameters,
    parameter_values,
)
from edge_offload.server import EdgeServer, ServerConfig

_DEFAULTS = ServerConfig()
PARAMETERS = (
    ParamSpec('endpoint', _DEFAULTS.endpoint, 'ZeroMQ endpoint to bind, e.g. tcp://0.0.0.0:5555'),
    ParamSpec('server_id', _DEFAULTS.server_id, 'Name robots see in WELCOME and diagnostics'),
    ParamSpec('models', list(_DEFAULTS.models), 'Model-zoo names to load at configure'),
    ParamSpec('modes', list(_DEFAULTS.modes), 'Server halves of offloading modes to load'),
    ParamSpec('security', _DEFAULTS.security, "'curve' (authenticated) or 'plaintext'"),
    ParamSpec('allow_plaintext', False, "Must be true for security 'plaintext'"),
    ParamSpec('secret_key_file', _DEFAULTS.secret_key_file, "This server's NAME.key_secret"),
    ParamSpec(
        'authorized_clients_dir',
        _DEFAULTS.authorized_clients_dir,
        'Folder of the public .key files of the robots allowed to connect',
    ),
    ParamSpec('max_clients', _DEFAULTS.max_clients, 'Robots served at once', 1, 4096),
    ParamSpec(
        'max_sessions_per_key',
        _DEFAULTS.max_sessions_per_key,
        'Sessions one robot key may hold at once',
        1,
        4096,
    ),
    ParamSpec(
        'max_inflight_per_client',
        _DEFAULTS.max_inflight_per_client,
        'Requests one session may have in flight',
        1,
        1024,
    ),
    ParamSpec(
        'max_inflight_per_key',
        _DEFAULTS.max_inflight_per_key,
        'Requests all sessions of one robot key may have in flight',
        1,
        4096,
    ),
    ParamSpec(
        'max_bytes_per_s_per_key',
        _DEFAULTS.max_bytes_per_s_per_key,
        'Request payload one robot key may send per second (0 = unlimited)',
        0.0,
        1e12,
    ),
    ParamSpec(
        'max_batch_per_call',
        _DEFAULTS.max_batch_per_call,
        'Largest batch one call may ask for (the mode says what a call carries)',
        1,
        65536,
    ),
    ParamSpec(
        'max_pending_replies_per_client',
        _DEFAULTS.max_pending_replies_per_client,
        'Replies queued for a robot that is not reading before its session is closed',
        1,
        65536,
    ),
    ParamSpec(
        'max_message_bytes',
        _DEFAULTS.max_message_bytes,
        'Largest message accepted or sent, bytes',
        1024,
        2**31,
    ),
    ParamSpec('worker_threads', _DEFAULTS.worker_threads, 'Requests computed in parallel', 1, 256),
    ParamSpec('torch_threads', 0, 'torch intra-op threads (0 = torch default)', 0, 256),
    ParamSpec(
        'session_timeout_s',
        _DEFAULTS.session_timeout_s,
        'Close silent sessions after',
        0.1,
        3600.0,
    ),
    ParamSpec(
        'stale_session_s',
        _DEFAULTS.stale_session_s,
        'A new session of the same robot key may take over one silent this long',
        0.1,
        3600.0,
    ),
    ParamSpec(
        'handshake_timeout_s',
        _DEFAULTS.handshake_timeout_s,
        'Close connections that have not finished the security handshake after',
        0.1,
        60.0,
    ),
    ParamSpec('diagnostics_period_s', 1.0, 'Diagnostics publishing period', 0.05, 60.0),
    ParamSpec('autostart', False, 'Configure and activate at start-up', read_only=True),
)
# Failed restarts of a dead serving loop, in a row, before the node deactivates.
_MAX_RESTART_FAILURES = 3
_SERVER_FIELDS = {spec.name for spec in PARAMETERS} - {'diagnostics_period_s', 'autostart'}
_LEVELS = {
    'ok': DiagnosticStatus.OK,
    'warn': DiagnosticStatus.WARN,
    'error': DiagnosticStatus.ERROR,
}


def server_mode_option_parameters() -> tuple[ParamSpec, ...]:
    """Return ``<mode>.<option>`` parameters for every registered server mode's options."""
    return mode_option_parameters(available_server_modes(), load_server_mode_class, 'server mode')


class EdgeServerNode(LifecycleNode):
    """Serve models to offloading robots; lifecycle-managed."""

    def __init__(self, **kwargs) -> None:
        super().__init__('edge_server', **kwargs)
        declare_parameters(self, PARAMETERS)
        self._mode_parameters = server_mode_option_parameters()
        declare_parameters(self, self._mode_parameters)
        forward_python_logging(self, 'edge_offload.server')
        self._server: EdgeServer | None = None
        self._diagnostics_publisher = None
        self._diagnostics_timer = None
        self._active = False
        self._restarts = 0
        self._restart_failures = 0
        self._last_failure = ''

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Load models and keys; fail with a clear log line on any bad setting."""
        values = parameter_values(self, PARAMETERS)
        served = set(values['modes'])
        # The served modes' options; the others' declared defaults are not this server's.
        options = {
            key: value
            for key, value in parameter_values(self, self._mode_parameters).items()
            if key.partition('.')[0] in served
        }
        try:
            config = ServerConfig.from_mapping(
                {key: value for key, value in values.items() if key in _SERVER_FIELDS} | options
            )
            self._server = EdgeServer(config)
        except (ValueError, KeyError, KeyFileError, UnknownModelError) as error:
            self.get_logger().error(f'configure failed: {error}')
            return TransitionCallbackReturn.FAILURE
        self._diagnostics_publisher = create_diagnostics_publisher(self)
        self._diagnostics_timer = self.create_timer(
            values['diagnostics_period_s'], self._publish_diagnostics
        )
        self.get_logger().info(f'configured: models {config.models}, modes {config.modes}')
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Bind and start serving."""
        try:
            endpoint = self._server.start()
        except OSError as error:
            self.get_logger().error(f'activate failed: {error}')
            return TransitionCallbackReturn.FAILURE
        self.get_logger().info(f'serving on {endpoint}')
        self._active = True
        self._restart_failures = 0
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop serving; robots fall back to local inference until reactivation."""
        self._active = False
        self._server.stop()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Release models and the diagnostics timer."""
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop serving and release everything."""
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def release(self) -> None:
        """Stop serving and release the models and timers (idempotent)."""
        self._active = False
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._diagnostics_timer is not None:
            self.destroy_timer(self._diagnostics_timer)
            self._diagnostics_timer = None
        if self._diagnostics_publisher is not None:
            self.destroy_publisher(self._diagnostics_publisher)
            self._diagnostics_publisher = None

    def _supervise(self, server: EdgeServer) -> tuple[int, str]:
        """Restart a serving loop that died while active; return the diagnostics level and text.

        After ``_MAX_RESTART_FAILURES`` failed restarts in a row the node deactivates, so its
        lifecycle state says what the diagnostics say: not serving.
        """
        if not self._active:
            return DiagnosticStatus.WARN, 'configured, not serving (inactive)'
        if server.serving:
            if self._restarts:
                return DiagnosticStatus.OK, f'serving (restarted {self._restarts}x after failures)'
            return DiagnosticStatus.OK, 'serving'
        self._last_failure = server.failure or 'the serving loop ended'
        self.get_logger().error(f'edge server stopped serving: {self._last_failure}; restarting')
        try:
            server.restart()
        except OSError as error:
            self._restart_failures += 1
            self.get_logger().error(f'restart failed: {error}')
            if self._restart_failures >= _MAX_RESTART_FAILURES:
                self.get_logger().error(
                    f'{self._restart_failures} restarts failed in a row: deactivating'
                )
                self.trigger_deactivate()
            return DiagnosticStatus.ERROR, f'not serving: {self._last_failure}; restart failed'
        self._restarts += 1
        self._restart_failures = 0
        self.get_logger().warning(
            f'serving again on {server.endpoint} after: {self._last_failure}'
        )
        return DiagnosticStatus.ERROR, f'serving loop died ({self._last_failure}); restarted'

    def _publish_diagnostics(self) -> None:
        server = self._server
        if server is None or self._diagnostics_publisher is None:
            return
        level, text = self._supervise(server)
        stats = server.stats()
        load = stats.inflight / stats.worker_threads
        values = {
            'endpoint': stats.endpoint,
            'sessions': stats.sessions,
            'inflight': stats.inflight,
            'queued': stats.queued,
            'load (inflight per worker)': f'{load:.2f}',
            'requests_total': stats.requests_total,
            'errors_total': stats.errors_total,
            'rejected_total': stats.rejected_total,
            'malformed_total': stats.malformed_total,
            'auth_failures_total': stats.auth_failures_total,
            'replies_undelivered_total': stats.replies_undelivered_total,
            'restarts': self._restarts,
            'last_failure': self._last_failure or 'none',
            'protocol_version': protocol.PROTOCOL_VERSION,
        }
        for name, latency in stats.models.items():
            values[f'{name} requests'] = latency.count
            values[f'{name} latency mean ms'] = f'{latency.mean_s * 1e3:.2f}'
            values[f'{name} latency p50 ms'] = f'{latency.p50_s * 1e3:.2f}'
            values[f'{name} latency p95 ms'] = f'{latency.p95_s * 1e3:.2f}'
        status = diagnostic_status(
            f'{self.get_name()}: edge server',
            level,
            text,
            values,
            hardware_id=server.config.server_id,
        )
        mode_statuses = [
            diagnostic_status(
                f'{self.get_name()}: {mode_status.name}',
                _LEVELS[mode_status.level],
                mode_status.message,
                mode_status.values,
                hardware_id=mode_status.hardware_id or server.config.server_id,
            )
            for mode_status in server.mode_diagnostics()
        ]
        self._diagnostics_publisher.publish(diagnostic_array(self, [status, *mode_statuses]))


def main(args: list[str] | None = None) -> int:
    """Run the edge server node until shutdown."""
    return run_lifecycle_node(
        EdgeServerNode, 'edge_server', lambda node: node.release(), args, num_threads=2
    )


if __name__ == '__main__':
    sys.exit(main())
