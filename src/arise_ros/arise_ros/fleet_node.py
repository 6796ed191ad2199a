# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``arise_fleet_node``: ARISE's fleet of edge servers on Ray as a ROS 2 lifecycle node.

A thin wrapper around :class:`~arise_ros.ray_fleet.FleetManager` (the same fleet as the
``arise_fleet`` command):

configure  starts Ray (embedded and loopback-only, or joined), the ARISE servers as Ray
           actors and the load-balancing front door; a bad setting fails with one log line
activate   publishes the fleet view on ``/diagnostics``
deactivate stops publishing (the fleet keeps serving robots)
cleanup    stops the front door, the servers and Ray (also on shutdown)

The fleet view, every ``diagnostics_period_s``: the node's own status (``arise_fleet: ray
fleet``), the front door's (``arise_fleet: fleet``, ``arise_fleet: fleet server
arise_server_0``: each server's load) and every server's own statuses, fetched from its Ray
actor (``arise_fleet: arise_server_0: arise fleet``, ``arise_fleet: arise_server_0: arise
robot robot_1``). The calls to Ray run on a thread of the node's own, which refreshes a
snapshot; the timer only publishes it, so a slow or dead server never blocks the executor.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from arise_ros.ray_fleet import FleetConfig, FleetManager
from edge_offload.diagnostics import (
    create_diagnostics_publisher,
    diagnostic_array,
    diagnostic_status,
)
from edge_offload.keys import AUTHORIZED_CLIENTS_SUBDIR, KeyFileError, expand_path
from edge_offload.ros_logging import forward_python_logging
from edge_offload.ros_node_main import run_lifecycle_node
from edge_offload.ros_params import ParamSpec, declare_parameters, parameter_values
from edge_offload.server import load_params_file

NODE_NAME = 'arise_fleet'
_DEFAULTS = FleetConfig(server_parameters={})
PARAMETERS = (
    ParamSpec(
        'server_params_file',
        '',
        "The ARISE servers' parameters: a ROS 2 parameter file with an edge_server section "
        "(bringup's arise_fleet.yaml); endpoint, server_id and key files are set per server",
    ),
    ParamSpec('servers', _DEFAULTS.servers, 'ARISE servers, each a Ray actor', 1, 64),
    ParamSpec('host', _DEFAULTS.host, 'Address the servers and the front door bind'),
    ParamSpec(
        'port', _DEFAULTS.port, 'Port of the front door; server i binds port + 1 + i', 1, 65534
    ),
    ParamSpec(
        'keys_dir',
        '~/.local/share/edge_offload/keys/arise_fleet',
        "The fleet's CURVE keys: server.key_secret and authorized_clients/ (and Ray's token)",
    ),
    ParamSpec(
        'ray_address',
        _DEFAULTS.ray_address,
        "'' = an embedded, loopback-only Ray instance; else the address of a Ray cluster",
    ),
    ParamSpec(
        'gpus_per_server', _DEFAULTS.gpus_per_server, 'GPUs Ray gives each server', 0.0, 64.0
    ),
    ParamSpec(
        'report_period_s',
        _DEFAULTS.report_period_s,
        'How often the manager asks every server for its load',
        0.01,
        10.0,
    ),
    ParamSpec(
        'stale_after_s',
        _DEFAULTS.stale_after_s,
        'A server whose load report is older than this gets no robots',
        0.05,
        60.0,
    ),
    ParamSpec('diagnostics_period_s', 1.0, 'Diagnostics publishing period', 0.05, 60.0),
    ParamSpec('autostart', False, 'Configure and activate at start-up', read_only=True),
)
# The whole of the Ray teardown on a stop signal. run_lifecycle_node cuts a clean-up still
# running WATCHDOG_S (1.8 s) after the signal, and Ray's own shutdown may take that long:
# FleetManager.stop(timeout_s) returns within this budget and kills any Ray process still
# running at its end, so that Ctrl-C never leaves one behind. The rest of WATCHDOG_S is for
# the spin loop to see the signal (0.1 s) and for rclpy's shutdown.
RAY_STOP_BUDGET_S = 1.0
# The diagnostics thread waits this long at most for the servers' statuses.
_REPLICA_TIMEOUT_S = 0.25
_LEVELS = {
    'ok': DiagnosticStatus.OK,
    'warn': DiagnosticStatus.WARN,
    'error': DiagnosticStatus.ERROR,
}


class AriseFleetNode(LifecycleNode):
    """The ARISE fleet on Ray, lifecycle-managed, its view on ``/diagnostics``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        declare_parameters(self, PARAMETERS)
        forward_python_logging(self, ('arise_ros', 'edge_offload.server'))
        self._manager: FleetManager | None = None
        self._publisher = None
        self._timer = None
        self._refresher: threading.Thread | None = None
        self._refresh_stop = threading.Event()
        # (monotonic time of the snapshot, server id -> statuses), replaced whole.
        self._snapshot: tuple[float, dict[str, list[dict[str, Any]]]] = (0.0, {})
        self._all_reported = False

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Start Ray, the servers and the front door; fail with a clear line on a bad setting."""
        values = parameter_values(self, PARAMETERS)
        try:
            config = self._fleet_config(values)
            manager = FleetManager(config, expand_path(values['keys_dir']))
            manager.start()
        except (ValueError, KeyFileError, OSError, RuntimeError) as error:
            self.get_logger().error(f'configure failed: {error}')
            return TransitionCallbackReturn.FAILURE
        self._manager = manager
        self._publisher = create_diagnostics_publisher(self)
        ray = f'Ray at {config.ray_address}' if config.ray_address else 'embedded Ray'
        self.get_logger().info(
            f'configured: {config.servers} ARISE server(s) on {ray}, front door '
            f'{manager.front_door_endpoint}'
        )
        return TransitionCallbackReturn.SUCCESS

    @staticmethod
    def _fleet_config(values: dict[str, Any]) -> FleetConfig:
        if not values['server_params_file']:
            raise ValueError("server_params_file is not set (the servers' parameter file)")
        server = load_params_file(values['server_params_file'], 'edge_server')
        server.pop('diagnostics_period_s', None)  # a node parameter, not a server setting
        keys = expand_path(values['keys_dir'])
        return FleetConfig(
            server_parameters=server,
            servers=values['servers'],
            host=values['host'],
            port=values['port'],
            secret_key_file=str(keys / 'server.key_secret'),
            authorized_clients_dir=str(keys / AUTHORIZED_CLIENTS_SUBDIR),
            ray_address=values['ray_address'],
            gpus_per_server=values['gpus_per_server'],
            report_period_s=values['report_period_s'],
            stale_after_s=values['stale_after_s'],
        )

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Publish the fleet view."""
        period = self.get_parameter('diagnostics_period_s').value
        self._refresh_stop.clear()
        self._refresher = threading.Thread(
            target=self._refresh, args=(period,), name='arise-fleet-diagnostics', daemon=True
        )
        self._refresher.start()
        self._timer = self.create_timer(period, self._publish_diagnostics)
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop publishing; the fleet keeps serving robots."""
        self._stop_publishing()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop the fleet and Ray."""
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop the fleet and Ray."""
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def release(self) -> None:
        """Stop publishing, then the fleet and Ray, within RAY_STOP_BUDGET_S (idempotent)."""
        self._stop_publishing()
        manager, self._manager = self._manager, None
        if manager is not None:
            started = time.monotonic()
            manager.stop(timeout_s=RAY_STOP_BUDGET_S)
            self.get_logger().info(f'fleet and Ray stopped in {time.monotonic() - started:.2f} s')
        if self._publisher is not None:
            self.destroy_publisher(self._publisher)
            self._publisher = None

    def _stop_publishing(self) -> None:
        if self._timer is not None:
            self.destroy_timer(self._timer)
            self._timer = None
        self._refresh_stop.set()
        if self._refresher is not None:
            # At most one round of replica_diagnostics: _REPLICA_TIMEOUT_S.
            self._refresher.join(_REPLICA_TIMEOUT_S + 0.1)
            self._refresher = None

    def _refresh(self, period: float) -> None:
        """Fetch the servers' statuses from their Ray actors, every period (own thread)."""
        while not self._refresh_stop.is_set():
            manager = self._manager
            if manager is not None:
                replicas = manager.replica_diagnostics(min(_REPLICA_TIMEOUT_S, period))
                self._snapshot = (time.monotonic(), replicas)
                if len(replicas) == manager.config.servers and not self._all_reported:
                    self.get_logger().info(f'all {len(replicas)} ARISE server(s) answer')
                self._all_reported = len(replicas) == manager.config.servers
            self._refresh_stop.wait(period)

    def _publish_diagnostics(self) -> None:
        manager, publisher = self._manager, self._publisher
        if manager is None or publisher is None:
            return
        taken, replicas = self._snapshot
        name = self.get_name()
        expected = manager.config.servers
        fleet = diagnostic_status(
            f'{name}: ray fleet',
            DiagnosticStatus.OK if len(replicas) == expected else DiagnosticStatus.WARN,
            f'{len(replicas)} of {expected} ARISE server(s) answer',
            {
                'front door': manager.front_door_endpoint,
                'ray': manager.config.ray_address or 'embedded, loopback only',
                'servers': expected,
                'servers answering': len(replicas),
                'snapshot age s': f'{time.monotonic() - taken:.2f}' if taken else 'none yet',
            },
            hardware_id=NODE_NAME,
        )
        statuses = [fleet]
        statuses.extend(
            self._status(f'{name}: {record["name"]}', record, NODE_NAME)
            for record in manager.front_door_diagnostics()
        )
        for server_id, records in replicas.items():
            statuses.extend(
                self._status(f'{name}: {server_id}: {record["name"]}', record, server_id)
                for record in records
            )
        publisher.publish(diagnostic_array(self, statuses))

    @staticmethod
    def _status(name: str, record: dict[str, Any], hardware_id: str) -> DiagnosticStatus:
        return diagnostic_status(
            name,
            _LEVELS.get(record['level'], DiagnosticStatus.ERROR),
            record['message'],
            record['values'],
            hardware_id=record.get('hardware_id') or hardware_id,
        )


def main(args: list[str] | None = None) -> int:
    """Run the fleet node until shutdown (console script ``arise_fleet_node``)."""
    return run_lifecycle_node(AriseFleetNode, NODE_NAME, lambda node: node.release(), args)


if __name__ == '__main__':
    sys.exit(main())
