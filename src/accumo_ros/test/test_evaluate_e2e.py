# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The end-to-end evaluator's measures of adaptation, on recorded decision series."""

from __future__ import annotations

import pytest

from accumo_ros.tools.evaluate_e2e import adaptation_time, offload_series


def _decisions(latencies: list[tuple[int, int]], offloaded: list[int], period_s: float = 0.1):
    return [
        {'t': index * period_s, 'offloaded': task, 'latency_frames': list(latency)}
        for index, (latency, task) in enumerate(zip(latencies, offloaded, strict=True))
    ]


def test_adaptation_is_the_time_until_the_new_latency_level():
    # 3 frames before the change at 2.0 s; depth reaches 6 at 2.5 s, odometry 5 at 2.2 s.
    latencies = [(3, 3)] * 20 + [(4, 3)] * 2 + [(4, 5)] * 3 + [(6, 5)] * 30
    decisions = _decisions(latencies, [-1] * len(latencies))
    depth, odometry = adaptation_time(decisions, halved_at=2.0)
    assert depth == pytest.approx(0.5)
    assert odometry == pytest.approx(0.2)
    # Half the step (3 -> 4.5 and 3 -> 4): depth at 2.5 s, odometry at 2.2 s; a quarter
    # of it (3.75, 3.5): both at 2.0 s.
    assert adaptation_time(decisions, 2.0, 0.5) == pytest.approx([0.5, 0.2])
    assert adaptation_time(decisions, 2.0, 0.25) == pytest.approx([0.0, 0.2])
    with pytest.raises(ValueError, match='fraction'):
        adaptation_time(decisions, 2.0, 0.0)
    assert adaptation_time(decisions, halved_at=None) == [None, None]
    # A latency that never rises has no adaptation time.
    flat = _decisions([(3, 3)] * 40, [-1] * 40)
    assert adaptation_time(flat, halved_at=2.0) == [None, None]


def test_offload_series_gives_the_depth_share_and_rate_of_recent_offloads():
    offloaded = [0, -1, 1, -1, 0, -1, 0, -1, 1, -1]
    series = offload_series(_decisions([(3, 3)] * len(offloaded), offloaded))
    assert series['t'] == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8])
    assert series['depth_share'] == pytest.approx([1.0, 0.5, 2 / 3, 0.75, 0.6])
    # One offload every 0.2 s.
    assert series['offloads_per_s'][1:] == pytest.approx([5.0] * 4)
