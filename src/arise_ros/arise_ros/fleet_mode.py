# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The ``fleet`` server mode: the load balancer's front door for robots.

Registered under ``edge_offload.server_modes``, so it is served by an edge server like every
mode: over CURVE, to the authorised robot keys only, with the server's limits. One op:

* ``where`` ``{[avoid]}``: the ARISE servers to try, best first (see
  :class:`~arise_ros.fleet_directory.FleetDirectory`); ``avoid`` is the endpoint the robot
  leaves. Reply: ``{servers: [endpoint, ...]}`` (empty when none has room or none is up).

The directory is fed by the process that embeds the server (the fleet manager, from its
servers' load reports): :attr:`FleetServerMode.directory`.
"""

from __future__ import annotations

import time
from typing import Any

from arise_ros.fleet_directory import FleetDirectory
from edge_offload import protocol
from edge_offload.modes.base import (
    ModeOption,
    ModeStatus,
    ServerCall,
    ServerMode,
    ServerModeContext,
    ServerReply,
)

# The longest endpoint a robot may name in ``avoid``.
_MAX_ENDPOINT_CHARS = 256


class FleetServerMode(ServerMode):
    """Answer robots' ``where`` from the directory of the fleet's servers."""

    name = 'fleet'
    needs_models = False
    option_specs = (
        ModeOption(
            'stale_after_s',
            0.6,
            'A server whose last load report is older than this is taken for down',
            0.05,
            60.0,
        ),
    )

    def __init__(self, context: ServerModeContext) -> None:
        super().__init__(context)
        unknown = sorted(set(context.options) - {'stale_after_s'})
        if unknown:
            raise ValueError(f'unknown fleet options: {unknown}')
        self.directory = FleetDirectory(float(context.options.get('stale_after_s', 0.6)))

    def handle(self, state: Any, call: ServerCall) -> ServerReply:
        if call.op != 'where':
            raise protocol.ProtocolError(protocol.E_BAD_REQUEST, f'fleet has no op {call.op!r}')
        avoid = call.fields.get('avoid', '')
        if not isinstance(avoid, str) or len(avoid) > _MAX_ENDPOINT_CHARS:
            raise protocol.ProtocolError(
                protocol.E_BAD_REQUEST, 'fleet where: avoid is an endpoint string'
            )
        return ServerReply(fields={'servers': self.directory.where(time.monotonic(), avoid)})

    def diagnostics(self) -> list[ModeStatus]:
        """Return one status per server the directory holds, and the fleet's."""
        now = time.monotonic()
        live = {load.server_id: load for load in self.directory.live(now)}
        statuses = [
            ModeStatus(
                'fleet',
                'ok' if live else 'warn',
                f'{len(live)} ARISE server(s) up' if live else 'no ARISE server is up',
                {'servers up': len(live)},
            )
        ]
        for server_id, load in sorted(live.items()):
            statuses.append(
                ModeStatus(
                    f'fleet server {server_id}',
                    'warn' if load.full or load.waiting else 'ok',
                    f'{load.admitted} admitted, {load.waiting} waiting, idle '
                    f'{load.idle_share:.2f}',
                    {
                        'endpoint': load.endpoint,
                        'admitted': load.admitted,
                        'waiting': load.waiting,
                        'idle share': f'{load.idle_share:.2f}',
                        'max clients': load.max_clients,
                        'incarnation': load.incarnation,
                        'report age s': f'{now - load.reported_s:.2f}',
                    },
                )
            )
        return statuses
