# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The person follower keeps its set distance within limits and stops on lost or stale data.

Closed-loop tests drive a simulated unicycle robot at 20 Hz with the follower's commands;
everything runs on simulated time, so the tests are deterministic and fast.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import pytest

from people_following.follower import (
    FollowerCommand,
    FollowerConfig,
    FollowerState,
    PersonFollower,
    Target,
)

DT = 0.05  # 20 Hz control
EPS = 1e-9
CFG = FollowerConfig()
OK = {'estop': False, 'link_ok': True, 'detector_ok': True}


class Robot:
    """A unicycle that executes each command exactly for one cycle, and its follower."""

    def __init__(self, config: FollowerConfig = CFG, latency_steps: int = 0) -> None:
        self.follower = PersonFollower(config)
        self.x = self.y = self.heading = 0.0
        self.step_index = 0
        self.latency_steps = latency_steps
        self._seen: list[Target] = []  # what the camera saw at each step, in the robot frame
        self.commands: list[FollowerCommand] = []

    @property
    def now(self) -> float:
        return self.step_index * DT

    def relative(self, person: tuple[float, float]) -> tuple[float, float]:
        """Return the person's (x, y) in the robot frame now."""
        dx, dy = person[0] - self.x, person[1] - self.y
        cos, sin = math.cos(self.heading), math.sin(self.heading)
        return cos * dx + sin * dy, -sin * dx + cos * dy

    def observe(self, person: tuple[float, float]) -> Target:
        """See the person now; return what the follower gets, ``latency_steps`` old."""
        self._seen.append(Target(*self.relative(person), stamp=self.now))
        return self._seen[max(0, len(self._seen) - 1 - self.latency_steps)]

    def step(self, target: Target | None, **flags: bool) -> FollowerCommand:
        command = self.follower.update(self.now, target, **{**OK, **flags})
        self.commands.append(command)
        v, w = command.linear, command.angular
        if abs(w) < 1e-12:
            self.x += v * DT * math.cos(self.heading)
            self.y += v * DT * math.sin(self.heading)
        else:  # exact arc
            new_heading = self.heading + w * DT
            self.x += v / w * (math.sin(new_heading) - math.sin(self.heading))
            self.y -= v / w * (math.cos(new_heading) - math.cos(self.heading))
            self.heading = new_heading
        self.step_index += 1
        return command

    def follow(self, person: Callable[[float], tuple[float, float]], steps: int) -> None:
        for _ in range(steps):
            self.step(self.observe(person(self.now)))


def assert_within_limits(commands: list[FollowerCommand], cfg: FollowerConfig = CFG) -> None:
    """Check speeds, accelerations and braking of a command sequence that starts at rest.

    Speeds within their bounds; speeding up within the acceleration limits, slowing down
    within the braking limits, and no reversal without passing through zero.
    """
    previous = FollowerCommand(0.0, 0.0, FollowerState.NO_TARGET)
    for index, command in enumerate(commands):
        assert -cfg.max_reverse - EPS <= command.linear <= cfg.max_linear + EPS, index
        assert abs(command.angular) <= cfg.max_angular + EPS, index
        for before, after, accel, decel in (
            (previous.linear, command.linear, cfg.max_linear_accel, cfg.stop_decel_linear),
            (previous.angular, command.angular, cfg.max_angular_accel, cfg.stop_decel_angular),
        ):
            assert before * after >= 0.0, (index, before, after)
            if abs(after) > abs(before):
                assert abs(after) - abs(before) <= accel * DT + EPS, (index, before, after)
            else:
                assert abs(before) - abs(after) <= decel * DT + EPS, (index, before, after)
        previous = command


def full_speed_robot() -> tuple[Robot, Callable[[float], tuple[float, float]]]:
    """Return a robot driving at max_linear after a person walking away faster than it."""
    robot = Robot()

    def person(t: float) -> tuple[float, float]:
        return 3.0 + 0.8 * t, 0.0

    robot.follow(person, 60)
    assert robot.commands[-1].linear == pytest.approx(CFG.max_linear)
    assert robot.commands[-1].state == FollowerState.FOLLOWING
    return robot, person


def test_closed_loop_settles_on_standing_person_within_limits():
    robot = Robot()
    person = (3.0, 1.0)
    robot.follow(lambda t: person, 400)  # 20 s

    assert_within_limits(robot.commands)
    assert max(c.linear for c in robot.commands) == pytest.approx(CFG.max_linear)
    x, y = robot.relative(person)
    assert math.hypot(x, y) == pytest.approx(CFG.set_distance_m, abs=0.05)
    assert abs(math.atan2(y, x)) <= 0.05
    last = robot.commands[-40:]  # the last 2 s: settled, not still oscillating
    assert all(c.state == FollowerState.HOLDING for c in last)
    assert all(c.linear == 0.0 and c.angular == 0.0 for c in last)


def test_closed_loop_tracks_person_walking_a_curve():
    # 0.5 m/s on a 4 m radius circle to the left, seen with 0.1 s of latency.
    radius, speed = 4.0, 0.5

    def person(t: float) -> tuple[float, float]:
        angle = speed * t / radius
        return CFG.set_distance_m + radius * math.sin(angle), radius * (1.0 - math.cos(angle))

    robot = Robot(latency_steps=2)
    distances = []
    for _ in range(600):  # 30 s, 15 m walked, 3.75 rad turned
        distances.append(math.hypot(*robot.relative(person(robot.now))))
        robot.step(robot.observe(person(robot.now)))

    assert_within_limits(robot.commands)
    assert math.hypot(robot.x, robot.y) > 5.0  # it really went round the curve with the person
    settled = distances[160:]  # after 8 s
    assert max(abs(d - CFG.set_distance_m) for d in settled) <= 0.3


@pytest.mark.parametrize('loss', ['none', 'frozen_stamp'])
def test_lost_target_stops_within_half_a_second(loss):
    robot, person = full_speed_robot()
    lost_at = robot.now
    frozen = robot.observe(person(robot.now))
    after = []
    while robot.now <= lost_at + 1.0:
        after.append(robot.step(None if loss == 'none' else frozen))

    linear = [c.linear for c in after]
    stopped = [i for i, v in enumerate(linear) if v == 0.0]
    assert stopped, linear
    # Command i is issued at lost_at + i * DT: zero by lost_at + max_stop_time_s (0.5 s).
    assert stopped[0] <= round(CFG.max_stop_time_s / DT), linear
    assert all(v == 0.0 for v in linear[stopped[0] :])
    assert all(b <= a for a, b in zip([CFG.max_linear, *linear], linear, strict=False))
    expected = FollowerState.NO_TARGET if loss == 'none' else FollowerState.TARGET_STALE
    assert after[-1].state == expected


def test_stale_target_is_not_acted_on():
    follower = PersonFollower()
    old = Target(3.0, 0.0, stamp=0.0)
    commands = [
        follower.update(t, old, **OK) for t in (CFG.target_timeout_s + 0.01, 0.3, 0.35, 0.4)
    ]
    assert all(c.linear == 0.0 and c.angular == 0.0 for c in commands)
    assert all(c.state == FollowerState.TARGET_STALE for c in commands)


def test_aging_observation_limits_speed_to_what_can_still_stop_in_time():
    robot, person = full_speed_robot()
    # Observations now arrive 0.24 s old: still fresh, but the robot could not stop from
    # full speed by stamp + max_stop_time_s, so it slows to what it can.
    for _ in range(10):
        seen = Target(*robot.relative(person(robot.now)), stamp=robot.now - 0.24)
        command = robot.step(seen)
        assert command.state == FollowerState.FOLLOWING
    bound = CFG.stop_decel_linear * (CFG.max_stop_time_s - 0.24)
    assert command.linear == pytest.approx(bound, abs=1e-5)
    assert bound < CFG.max_linear


def test_estop_zeroes_at_once_and_latches_until_a_fresh_target():
    robot, person = full_speed_robot()
    command = robot.step(robot.observe(person(robot.now)), estop=True)
    assert (command.linear, command.angular, command.state) == (0.0, 0.0, FollowerState.ESTOP)
    for _ in range(5):
        command = robot.step(robot.observe(person(robot.now)), estop=True)
        assert (command.linear, command.angular) == (0.0, 0.0)
    assert robot.follower.estop_latched

    released_at = robot.now
    # Released, but the only observation was made before the release: still stopped,
    # as it is with a fresh one while the link is down or with none at all.
    before = Target(*robot.relative(person(robot.now)), stamp=released_at - DT)
    fresh = robot.observe(person(robot.now))
    for target, flags in ((before, {}), (fresh, {'link_ok': False}), (None, {})):
        command = robot.step(target, **flags)
        assert (command.linear, command.angular, command.state) == (0.0, 0.0, 'estop')
    assert robot.follower.estop_latched

    command = robot.step(robot.observe(person(robot.now)))
    assert command.state == FollowerState.FOLLOWING
    assert not robot.follower.estop_latched
    assert 0.0 < command.linear <= CFG.max_linear_accel * DT + EPS  # ramps up from zero


@pytest.mark.parametrize(
    ('flags', 'reason'),
    [({'link_ok': False}, 'link_down'), ({'detector_ok': False}, 'detector_down')],
)
def test_link_and_detector_down_stop_like_a_lost_target(flags, reason):
    def stop_sequence(**down: bool) -> list[tuple[float, float, str]]:
        robot, person = full_speed_robot()
        commands = []
        for _ in range(15):
            target = robot.observe(person(robot.now)) if down else None
            commands.append(robot.step(target, **down))
        return [(c.linear, c.angular, str(c.state)) for c in commands]

    lost = stop_sequence()
    down = stop_sequence(**flags)
    assert lost[-1][:2] == (0.0, 0.0)
    assert [c[:2] for c in down] == [c[:2] for c in lost]
    assert {c[2] for c in down} == {reason}


def test_person_too_close_backs_up_no_faster_than_max_reverse():
    robot = Robot()
    person = (0.4, 0.0)
    robot.follow(lambda t: person, 200)

    assert_within_limits(robot.commands)
    assert min(c.linear for c in robot.commands) == pytest.approx(-CFG.max_reverse)
    assert math.hypot(*robot.relative(person)) == pytest.approx(CFG.set_distance_m, abs=0.05)


def test_person_stepping_in_front_is_braked_for_not_eased_off():
    robot, _ = full_speed_robot()
    # Someone steps in 0.5 m ahead: slowing at the 0.5 m/s^2 acceleration limit would take
    # 1.2 s and 0.36 m; braking at stop_decel_linear takes 0.3 s.
    commands = [robot.step(Target(0.5, 0.0, stamp=robot.now)) for _ in range(8)]
    assert_within_limits(robot.commands)
    stop_steps = round(CFG.max_linear / CFG.stop_decel_linear / DT)
    assert commands[stop_steps - 1].linear == 0.0
    assert all(c.linear <= 0.0 for c in commands[stop_steps:])


def test_person_beside_or_behind_turns_before_driving():
    follower = PersonFollower()
    follower.update(0.0, None, **OK)
    for t in (0.05, 0.1, 0.15):
        behind = follower.update(t, Target(-0.5, 0.1, stamp=t), **OK)  # too close, behind
        assert behind.linear == 0.0  # no reversing into them
        assert behind.angular > 0.0  # turns left towards them
    follower = PersonFollower()
    follower.update(0.0, None, **OK)
    for t in (0.05, 0.1, 0.15):
        beside = follower.update(t, Target(0.0, -4.0, stamp=t), **OK)  # far, to the right
        assert beside.linear == 0.0
        assert beside.angular < 0.0


def test_deadband_holds_with_hysteresis():
    follower = PersonFollower()
    # Within the deadband (0.03 m): held; drifting to 0.05 m (under twice it): still held;
    # at 0.08 m: follows again.
    for step, error in enumerate([0.02, 0.02, 0.05, 0.05, 0.08, 0.08]):
        t = step * DT
        command = follower.update(t, Target(CFG.set_distance_m + error, 0.0, stamp=t), **OK)
        if error < 0.06:
            assert (command.linear, command.angular, command.state) == (0.0, 0.0, 'holding')
    assert command.state == FollowerState.FOLLOWING
    assert command.linear > 0.0


def test_target_velocity_gives_radial_speed_and_bearing_rate():
    # 2 m ahead, walking away at 0.5 m/s and to the left at 0.4 m/s.
    target = Target(2.0, 0.0, stamp=0.0, vx=0.5, vy=0.4)
    assert target.radial_speed == pytest.approx(0.5)
    assert target.bearing_rate == pytest.approx(0.2)  # 0.4 m/s across at 2 m
    # Beside the robot on the left, walking forward: no radial speed, bearing falls.
    beside = Target(0.0, 1.0, stamp=0.0, vx=0.5)
    assert beside.radial_speed == pytest.approx(0.0)
    assert beside.bearing_rate == pytest.approx(-0.5)
    assert Target(0.0, 0.0, stamp=0.0, vx=1.0).radial_speed == 0.0


def test_feed_forward_keeps_pace_inside_the_deadband_and_gain_zero_turns_it_off():
    # At the set distance, the person walking away at 0.4 m/s: the distance is held, yet
    # the robot speeds up towards their pace (ramped at max_linear_accel).
    follower = PersonFollower()
    for step in range(40):
        t = step * DT
        command = follower.update(t, Target(CFG.set_distance_m, 0.0, t, vx=0.4), **OK)
        assert command.state == FollowerState.HOLDING
    assert command.linear == pytest.approx(0.4)
    feedback_only = PersonFollower(replace(CFG, feed_forward_gain=0.0))
    for step in range(40):
        t = step * DT
        command = feedback_only.update(t, Target(CFG.set_distance_m, 0.0, t, vx=0.4), **OK)
    assert command.linear == 0.0


def test_first_cycle_and_long_gap_do_not_jump():
    follower = PersonFollower()
    far = Target(10.0, 3.0, stamp=100.0)
    first = follower.update(100.0, far, **OK)
    assert (first.linear, first.angular) == (0.0, 0.0)
    after_gap = follower.update(105.0, replace(far, stamp=105.0), **OK)
    assert 0.0 < after_gap.linear <= CFG.max_linear_accel * CFG.max_dt_s + EPS
    assert 0.0 < after_gap.angular <= CFG.max_angular_accel * CFG.max_dt_s + EPS


@pytest.mark.parametrize(
    ('now', 'target', 'message'),
    [
        (math.nan, None, 'now must be finite'),
        (math.inf, None, 'now must be finite'),
        (0.5, None, 'went back in time'),
        (1.0, Target(2.0, 0.0, stamp=1.0 + CFG.future_stamp_tolerance_s + 0.01), 'after now'),
    ],
)
def test_bad_input_raises(now, target, message):
    follower = PersonFollower()
    follower.update(1.0, Target(2.0, 0.0, stamp=1.0), **OK)
    with pytest.raises(ValueError, match=message):
        follower.update(now, target, **OK)


@pytest.mark.parametrize('field', ['x', 'y', 'stamp', 'vx', 'vy'])
@pytest.mark.parametrize('value', [math.nan, math.inf, -math.inf])
def test_non_finite_target_is_rejected(field, value):
    with pytest.raises(ValueError, match=f'target {field} must be finite'):
        replace(Target(2.0, 0.0, stamp=1.0), **{field: value})


def test_after_rejected_input_ramps_up_from_zero():
    robot, person = full_speed_robot()
    bad = Target(*robot.relative(person(robot.now)), stamp=robot.now + 1.0)
    with pytest.raises(ValueError, match='after now'):
        robot.follower.update(robot.now, bad, **OK)
    robot.step_index += 1  # the node published zero for that cycle
    command = robot.step(robot.observe(person(robot.now)))
    assert 0.0 < command.linear <= CFG.max_linear_accel * DT + EPS


def test_estop_holds_even_with_bad_input():
    follower = PersonFollower()
    follower.update(0.0, Target(3.0, 0.0, stamp=0.0), **OK)
    future = Target(3.0, 0.0, stamp=10.0)  # not checked: an estop needs no target
    command = follower.update(0.05, future, estop=True, link_ok=True, detector_ok=True)
    assert (command.linear, command.angular, command.state) == (0.0, 0.0, 'estop')
    with pytest.raises(ValueError, match='now must be finite'):
        follower.update(math.nan, None, estop=True, link_ok=True, detector_ok=True)
    assert follower.estop_latched


@pytest.mark.parametrize(
    ('changes', 'message'),
    [
        ({'max_linear': 0.0}, 'max_linear must be positive'),
        ({'max_angular_accel': -1.0}, 'max_angular_accel must be positive'),
        ({'k_linear': math.nan}, 'k_linear must be finite'),
        ({'target_timeout_s': 0.0}, 'target_timeout_s must be positive'),
        ({'max_reverse': -0.1}, 'max_reverse must not be negative'),
        ({'max_reverse': 0.7}, 'must not exceed max_linear'),
        ({'stop_decel_linear': 1.0}, 'stops from max_linear'),
        ({'stop_decel_angular': 1.5, 'max_angular_accel': 1.0}, 'stops from max_angular'),
        (
            {'stop_decel_linear': 0.4, 'max_linear': 0.1, 'max_reverse': 0.1},
            'at least max_linear_accel',
        ),
        ({'target_timeout_s': 0.5}, 'less than max_stop_time_s'),
        ({'set_bearing_rad': 2.0}, 'keep the person in front'),
        ({'max_dt_s': 0.0}, 'max_dt_s must be positive'),
        ({'feed_forward_gain': 1.5}, 'feed_forward_gain must be in'),
        ({'feed_forward_gain': -0.1}, 'feed_forward_gain must be in'),
    ],
)
def test_bad_config_raises(changes, message):
    with pytest.raises(ValueError, match=message):
        replace(CFG, **changes)
