# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The fleet simulation the capacity benchmark runs: reproducible, and honest about SLAs."""

import pytest

from arise_ros.fleet_sim import FleetSpec, run_dynamic, run_static, step1_bound, visitors
from arise_ros.latency_profile import BatchLatencyProfile
from arise_ros.scheduler import SchedulerConfig

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


def test_arise_fills_the_server_up_to_the_bound_of_its_step1_settings():
    # Robots come fast and stay longer than the run: the server is full from the start.
    spec = FleetSpec(
        sla_range=(0.03, 0.03), arrivals_per_s=20.0, mean_stay_s=200.0, duration_s=20.0,
        warmup_s=8.0,
    )  # fmt: skip
    result = run_dynamic('arise', PROFILE, spec)
    # At their Step 1 settings the robots it holds cannot take more than the server's time
    # (a shorter interval than Step 1's, to repay packing, only costs more) ...
    assert result.step1_load <= 1.0
    # ... and packing leaves little of that time unused.
    assert result.step1_load >= 0.85
    # Robots drawn from the fleet's ranges, as the benchmark reports the bound.
    assert 0.85 <= result.mean_clients / step1_bound(PROFILE, spec) <= 1.1


def test_the_step1_bound_grows_with_headroom_given_back_and_with_the_sla():
    spec = FleetSpec(sla_range=(0.02, 0.02))
    roomy = step1_bound(PROFILE, spec, SchedulerConfig(admission_headroom=0.0), samples=400)
    tight = step1_bound(PROFILE, spec, SchedulerConfig(admission_headroom=0.1), samples=400)
    looser = step1_bound(PROFILE, FleetSpec(sla_range=(0.04, 0.04)), samples=400)
    assert roomy > tight
    assert looser > tight
