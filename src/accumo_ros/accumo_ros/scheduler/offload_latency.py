# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Per-task offload latency in frames, from measured latencies and the link state (§2.8 [I]).

AccuMO hard-codes ``L_j`` per network; here it follows the link. Each completed offload
records its end-to-end latency, bytes and server time; ``L_j = ceil(q_j / frame interval)``
where ``q_j`` is the larger of

* the ``quantile`` (p90) of the task's last ``window`` measured latencies, and
* a prediction from the latest link state: RTT + bytes up / uplink + bytes down / downlink +
  the task's median server time, so that a drop in bandwidth shows before the next result.

Plain Python, no ROS; bounded memory (``window`` samples per task).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class OffloadSample:
    """One completed offload of a task."""

    latency_s: float  # from upload start to result in hand
    bytes_up: int = 0
    bytes_down: int = 0
    server_s: float = 0.0


class OffloadLatencyEstimator:
    """Latency of each task's offloads in frame intervals."""

    def __init__(
        self,
        default_frames: Sequence[int],
        fps: float,
        *,
        window: int = 8,
        quantile: float = 0.9,
        max_frames: int = 60,
    ) -> None:
        if not default_frames or min(default_frames) < 1:
            raise ValueError('need a default latency >= 1 frame for every task')
        if not fps > 0.0 or window < 1 or not 0.0 < quantile <= 1.0 or max_frames < 1:
            raise ValueError('need fps > 0, window >= 1, 0 < quantile <= 1, max_frames >= 1')
        self.default_frames = tuple(int(v) for v in default_frames)
        self.frame_interval_s = 1.0 / fps
        self.quantile = quantile
        self.max_frames = max_frames
        self._samples: list[deque[OffloadSample]] = [
            deque(maxlen=window) for _ in self.default_frames
        ]
        self._link: tuple[float, float, float] | None = None  # up bps, down bps, rtt s

    def record(self, task: int, sample: OffloadSample) -> None:
        """Add a completed offload of ``task``."""
        if not (sample.latency_s >= 0.0 and math.isfinite(sample.latency_s)):
            raise ValueError(f'latency must be finite and >= 0, got {sample.latency_s}')
        self._samples[task].append(sample)

    def update_link(self, uplink_bps: float, downlink_bps: float, rtt_s: float) -> None:
        """Use a new link estimate (NaN or non-positive values: unknown, ignored)."""
        values = (uplink_bps, downlink_bps, rtt_s)
        if all(math.isfinite(v) for v in values) and uplink_bps > 0 and downlink_bps > 0:
            self._link = (float(uplink_bps), float(downlink_bps), max(0.0, float(rtt_s)))
        else:
            self._link = None

    def measured_s(self, task: int) -> float | None:
        """Return the quantile of the task's recent measured latencies (None before any)."""
        samples = self._samples[task]
        if not samples:
            return None
        return float(np.quantile([s.latency_s for s in samples], self.quantile))

    def predicted_s(self, task: int) -> float | None:
        """Return the latency the latest link state predicts for the task's typical offload."""
        samples = self._samples[task]
        if self._link is None or not samples:
            return None
        uplink, downlink, rtt = self._link
        bytes_up = float(np.median([s.bytes_up for s in samples]))
        bytes_down = float(np.median([s.bytes_down for s in samples]))
        server = float(np.median([s.server_s for s in samples]))
        return rtt + 8.0 * bytes_up / uplink + 8.0 * bytes_down / downlink + server

    def latency_s(self, task: int) -> float | None:
        """Return the latency used for ``task``: max(measured quantile, link prediction)."""
        values = [v for v in (self.measured_s(task), self.predicted_s(task)) if v is not None]
        return max(values) if values else None

    def frames(self) -> tuple[int, ...]:
        """``L_j`` per task in frames (the defaults until a task has measurements)."""
        result = []
        for task, default in enumerate(self.default_frames):
            latency = self.latency_s(task)
            if latency is None:
                result.append(default)
                continue
            frames = math.ceil(latency / self.frame_interval_s - 1e-9)
            result.append(min(self.max_frames, max(1, frames)))
        return tuple(result)
