# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``probe`` server mode: echo the request's tensors back (protocol and link measurements).

Benchmarks and health checks measure the raw protocol round trip with it, free of any
model's compute time. It runs no model, so it serves no inference.
"""

from __future__ import annotations

from edge_offload import protocol
from edge_offload.modes.base import ServerCall, ServerMode, ServerReply


class ProbeServerMode(ServerMode):
    """Answer ``echo`` with the received tensors and fields."""

    name = 'probe'

    def handle(self, state: object, call: ServerCall) -> ServerReply:
        """Return the call's tensors unchanged."""
        if call.op != 'echo':
            raise protocol.ProtocolError(protocol.E_BAD_REQUEST, f'probe has no op {call.op!r}')
        return ServerReply(tensors=call.tensors, fields=dict(call.fields))
