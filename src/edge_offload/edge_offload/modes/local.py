# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``local`` mode: run the whole model on the robot (the baseline and the fallback)."""

from __future__ import annotations

import time

from edge_offload.modes.base import (
    InferenceRequest,
    InferenceResult,
    InferenceStats,
    OffloadMode,
    Stage,
)


class LocalMode(OffloadMode):
    """Run the model in this process; never touches the network."""

    name = 'local'
    uses_server = False

    def infer(self, request: InferenceRequest) -> InferenceResult:
        """Run ``request.model`` on ``request.inputs`` here."""
        model = self.context.models.get(request.model)
        request.report(Stage.LOCAL_COMPUTE)
        started = time.monotonic()
        outputs = model(request.inputs)
        compute_s = time.monotonic() - started
        return InferenceResult(
            outputs=outputs,
            mode=self.name,
            stats=InferenceStats(local_compute_time_s=compute_s, total_time_s=compute_s),
        )
