# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The fleet simulation the capacity benchmark runs: reproducible, and honest about SLAs."""

import pytest

from arise_ros.fleet_sim import FleetSpec, run_dynamic, run_static, visitors
from arise_ros.latency_profile import BatchLatencyProfile

PROFILE = BatchLatencyProfile('depth', {n: 0.007 + 0.003 * n for n in range(1, 9)}, 'test')
SPEC = FleetSpec(
    sla_range=(0.03, 0.03), arrivals_per_s=4.0, mean_stay_s=20.0, duration_s=20.0, warmup_s=5.0
)


def test_the_fleet_is_a_seeded_poisson_process():
    first, again = visitors(SPEC), visitors(SPEC)
    assert [v.arrive_s for v in first] == [v.arrive_s for v in again]
    assert 50 <= len(first) <= 110  # 4/s over 20 s
    assert all(v.leave_s > v.arrive_s and v.sla == 0.03 for v in first)


def test_static_finds_a_fleet_whose_robots_all_meet_their_sla():
    result, interval = run_static(PROFILE, SPEC, intervals=(2, 4, 8), duration_s=6.0)
    assert result.mean_clients >= 1
    assert result.within_sla == 1.0
    assert interval in (2, 4, 8)


@pytest.mark.parametrize('system', ['arise', 'arise_alpha', 'chameleon', 'clipper'])
def test_each_dynamic_system_serves_robots_and_reports_their_realised_drop(system):
    result = run_dynamic(system, PROFILE, SPEC, interval=4)
    assert result.mean_clients > 0
    assert result.drops, 'robots that stayed were judged'
    assert set(result.drops) == set(result.slas)
    assert 0.0 <= result.idle_fraction <= 1.0
    if system == 'chameleon':
        assert result.mean_batch == 1.0
    else:
        assert result.mean_batch >= 1.0


def test_arise_keeps_the_robots_it_serves_near_their_sla():
    result = run_dynamic('arise', PROFILE, SPEC)
    worst = max(result.drops[c] / result.slas[c] for c in result.drops)
    assert worst <= 1.1, f'a served robot realised {worst:.2f} x its SLA'
