# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``nnto`` mode: ship the inputs, the server runs the whole model, ship the outputs back.

Non-transparent whole-model offloading: both ends must know the model by name. One
round trip per inference; the latency floor that transparent modes chase.
"""

from __future__ import annotations

import time

from edge_offload import protocol
from edge_offload.errors import ServerUnavailableError
from edge_offload.models import InvalidInputError, UnknownModelError
from edge_offload.modes.base import (
    InferenceRequest,
    InferenceResult,
    InferenceStats,
    OffloadMode,
    ServerCall,
    ServerMode,
    ServerReply,
    Stage,
)

_OP_INFER = 'infer'


class NntoMode(OffloadMode):
    """Robot half: one CALL with the inputs, the reply holds the outputs."""

    name = 'nnto'

    def infer(self, request: InferenceRequest) -> InferenceResult:
        """Run ``request`` on the server."""
        client = self.context.client
        if client is None:
            raise ServerUnavailableError('no edge server configured')
        timeout_s = None
        if request.deadline is not None:
            timeout_s = max(0.0, request.deadline - time.monotonic())
        started = time.monotonic()
        request.report(Stage.UPLOADING)
        reply = client.call(
            self.name,
            _OP_INFER,
            {'model': request.model},
            request.inputs,
            timeout_s=timeout_s,
            cancel=request.cancel,
        )
        request.report(Stage.DOWNLOADING, reply.bytes_up, reply.bytes_down)
        return InferenceResult(
            outputs=reply.tensors,
            mode=self.name,
            stats=InferenceStats(
                bytes_up=reply.bytes_up,
                bytes_down=reply.bytes_down,
                round_trips=1,
                server_compute_time_s=reply.compute_time_s,
                total_time_s=time.monotonic() - started,
            ),
        )


class NntoServerMode(ServerMode):
    """Server half: run the named model on the received inputs."""

    name = 'nnto'

    def call_batch(self, call: ServerCall) -> int:
        """Return the batch of the call's inputs: the largest leading dimension."""
        return max(
            (int(tensor.shape[0]) for tensor in call.tensors.values() if tensor.dim() >= 2),
            default=1,
        )

    def handle(self, state: object, call: ServerCall) -> ServerReply:
        """Run the model named in the call and return its outputs."""
        if call.op != _OP_INFER:
            raise protocol.ProtocolError(protocol.E_BAD_REQUEST, f'nnto has no op {call.op!r}')
        model_name = call.fields.get('model')
        if not isinstance(model_name, str):
            raise protocol.ProtocolError(protocol.E_BAD_REQUEST, 'nnto infer needs a model name')
        try:
            model = self.context.models.get(model_name)
        except UnknownModelError as error:
            raise protocol.ProtocolError(protocol.E_UNKNOWN_MODEL, str(error)) from None
        started = time.monotonic()
        try:
            outputs = model(call.tensors)
        except InvalidInputError as error:
            raise protocol.ProtocolError(protocol.E_INVALID_INPUT, str(error)) from None
        return ServerReply(
            tensors=outputs, compute_time_s=time.monotonic() - started, model=model_name
        )
