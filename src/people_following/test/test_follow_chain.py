# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Acceptance test of the people-following app at the level of its pure modules.

A simulated person walks a path; a simulated robot integrates the follower's commands; each
camera frame goes through the chain localizer -> tracker -> follower. The follower must keep
the distance within ±0.3 m of its set point after settling, respect its speed and
acceleration limits, and stop within 0.5 s of the target disappearing and of an emergency
stop. The same chain across the ROS nodes, over DDS: test/test_follow_closed_loop_system.py.

Simulation (:mod:`people_following.follow_simulation`): 20 Hz control, 10 Hz camera, simulated
time, a seeded generator: deterministic.

* Results reach the follower one control cycle after the frame was taken (processing). The
  follower's target is the tracker's target in the robot base frame at the frame's time,
  stamped with that time; between frames, and in frames where the target's track got no
  detection, the last target is passed again, so its stamp ages and the follower's
  staleness rules apply.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import pytest

from people_following.follow_simulation import (
    CHAIN_CAMERA_EVERY,
    CHAIN_DT,
    GONE_S,
    SETTLED_S,
    SPEED,
    WALK_START_S,
    Run,
    simulate_chain,
)
from people_following.follower import FollowerCommand, FollowerConfig, FollowerState

DT = CHAIN_DT
CAMERA_EVERY = CHAIN_CAMERA_EVERY
EPS = 1e-9
FOLLOWER = FollowerConfig()
simulate = simulate_chain


def assert_within_limits(run: Run, cfg: FollowerConfig = FOLLOWER) -> None:
    """Speeds within bounds; speeding up and braking within the limits, except at an estop.

    No reversal without passing through zero.
    """
    previous = FollowerCommand(0.0, 0.0, FollowerState.NO_TARGET)
    for now, command in zip(run.times, run.commands, strict=True):
        assert -cfg.max_reverse - EPS <= command.linear <= cfg.max_linear + EPS, now
        assert abs(command.angular) <= cfg.max_angular + EPS, now
        for before, after, accel, decel in (
            (previous.linear, command.linear, cfg.max_linear_accel, cfg.stop_decel_linear),
            (previous.angular, command.angular, cfg.max_angular_accel, cfg.stop_decel_angular),
        ):
            assert before * after >= 0.0, (now, before, after)
            if abs(after) > abs(before):
                assert abs(after) - abs(before) <= accel * DT + EPS, (now, before, after)
            elif command.state != FollowerState.ESTOP:  # an estop stops at once
                assert abs(before) - abs(after) <= decel * DT + EPS, (now, before, after)
        previous = command


@functools.cache
def walk_run() -> Run:
    return simulate(GONE_S + 3.0)


def test_chain_keeps_the_set_distance_within_limits():
    run = walk_run()
    times = np.array(run.times)
    distances = np.array(run.distances)

    # The chain sees the person: almost every frame localizes them, near the truth.
    frames = round(GONE_S / (CAMERA_EVERY * DT))
    assert len(run.localization_errors) >= 0.95 * frames
    assert np.median(run.localization_errors) <= 0.05
    assert max(run.localization_errors) <= 0.15
    # Standing: the robot closes in to the set distance.
    standing = (times > WALK_START_S - 1.0) & (times < WALK_START_S)
    assert np.all(np.abs(distances[standing] - FOLLOWER.set_distance_m) <= 0.1)
    # Walking, straight and on the curve, after settling: within ±0.3 m at every step.
    settled = (times >= SETTLED_S) & (times < GONE_S)
    errors = distances[settled] - FOLLOWER.set_distance_m
    assert np.max(np.abs(errors)) <= 0.3, (np.min(errors), np.max(errors))
    states = {run.commands[i].state for i in np.flatnonzero(settled)}
    assert states <= {FollowerState.FOLLOWING, FollowerState.HOLDING}
    # It followed the curve: the robot turned most of the person's 1.2 rad.
    assert run.robot.heading >= 0.8
    assert max(c.linear for c in run.commands) >= SPEED
    assert_within_limits(run)


def test_feed_forward_of_the_tracked_velocity_removes_the_lag():
    # Side by side on the same walk: feedback alone trails by about speed / k_linear.
    settled = lambda run: [  # noqa: E731
        d - FOLLOWER.set_distance_m
        for t, d in zip(run.times, run.distances, strict=True)
        if SETTLED_S <= t < GONE_S
    ]
    with_feed_forward = np.array(settled(walk_run()))
    feedback_only = np.array(
        settled(simulate(GONE_S, follower_config=replace(FOLLOWER, feed_forward_gain=0.0)))
    )
    lag = SPEED / FOLLOWER.k_linear
    assert np.median(feedback_only) == pytest.approx(lag, abs=0.05)
    assert abs(np.median(with_feed_forward)) <= 0.25 * lag
    assert np.sqrt(np.mean(with_feed_forward**2)) <= 0.5 * np.sqrt(np.mean(feedback_only**2))


def test_robot_stops_within_half_a_second_of_losing_the_person():
    run = walk_run()
    # The last frame that saw the person is the last before they vanished.
    assert GONE_S - CAMERA_EVERY * DT <= run.last_seen_s < GONE_S
    deadline = run.last_seen_s + FOLLOWER.max_stop_time_s
    after = [c for t, c in zip(run.times, run.commands, strict=True) if t >= deadline]
    assert len(after) >= 2.0 / DT  # and stays stopped for the rest of the run
    assert all(c.linear == 0.0 and c.angular == 0.0 for c in after)
    assert all(c.state in (FollowerState.TARGET_STALE, FollowerState.NO_TARGET) for c in after)
    # It was moving when the person vanished: the stop is the follower's doing.
    moving = [c for t, c in zip(run.times, run.commands, strict=True) if t == run.last_seen_s]
    assert moving[0].linear >= 0.3


ESTOP_PRESSED_S = 15.0
ESTOP_RELEASED_S = 17.0


def test_emergency_stop_stops_on_the_next_cycle_and_holds():
    run = simulate(20.0, estop_at=lambda t: ESTOP_PRESSED_S <= t < ESTOP_RELEASED_S)
    times = np.array(run.times)
    first = int(np.flatnonzero(times >= ESTOP_PRESSED_S)[0])
    assert run.commands[first - 1].linear >= 0.3  # following at speed when pressed

    pressed = [
        c
        for t, c in zip(run.times, run.commands, strict=True)
        if ESTOP_PRESSED_S <= t < ESTOP_RELEASED_S
    ]
    assert len(pressed) == round((ESTOP_RELEASED_S - ESTOP_PRESSED_S) / DT)
    # Zero on the very cycle the stop is seen (well within 0.5 s), and while it is held.
    assert all(c.linear == 0.0 and c.angular == 0.0 for c in pressed)
    assert all(c.state == FollowerState.ESTOP for c in pressed)
    # After the release it follows again once a fresh observation comes in.
    resumed = [
        t
        for t, c in zip(run.times, run.commands, strict=True)
        if t >= ESTOP_RELEASED_S and c.state == FollowerState.FOLLOWING
    ]
    assert resumed
    assert resumed[0] <= ESTOP_RELEASED_S + 0.5
    assert_within_limits(run)


def test_chain_is_deterministic():
    first = simulate(3.0)
    second = simulate(3.0)
    assert first.commands == second.commands
    assert first.commands[-1].linear != pytest.approx(0.0)
