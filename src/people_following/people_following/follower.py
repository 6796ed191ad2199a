# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Person-following controller of the four-wheeled robot: target in, (linear, angular) out.

Pure Python, no ROS: a node calls :meth:`PersonFollower.update` once per control cycle
(e.g. 20 Hz) and publishes the returned :class:`FollowerCommand` as a
``geometry_msgs/Twist`` on ``cmd_vel`` (``linear.x = linear``, ``angular.z = angular``).
The robot is skid-steer, so a unicycle: it drives along its x axis and turns about z.

Control law
-----------
The target is the person as observed in the robot base frame (x forward, y left, metres),
with the time the observation refers to (its stamp). With ``d = hypot(x, y)``,
``b = atan2(y, x)`` and the errors ``e_d = d - set_distance_m`` and
``e_b = wrap(b - set_bearing_rad)``:

* ``linear = k_linear · e_d · taper(e_b) + g · v_r · taper(e_b)``;
* ``angular = k_angular · e_b + g · ω_p``.

The first terms are feedback, zero while their axis is held. The second are feed-forward
from the person's ground velocity ``(vx, vy)`` in the base axes (the tracker's estimate;
zero when the target has none): ``v_r = (vx·x + vy·y) / d``, how fast the person walks
away, and ``ω_p = (x·vy - y·vx) / d²``, how fast their bearing turns because they walk
sideways, with ``g = feed_forward_gain``. Feedback alone lags a walking person by
``speed / k_linear`` (0.2 m at 0.5 m/s, 0.4 m at 1 m/s, beyond a ±0.3 m band); matching
the person's speed removes that lag, and the feedback only corrects what is left. The
feed-forward acts while an axis is held, too, so a robot keeping pace does not stop and go
at the deadband's edge.

Each axis has a deadband with hysteresis: it is held (commands zero) once its error is
within its deadband (``distance_deadband_m``, ``bearing_deadband_rad``) and released when
the error grows past twice that. Without the hysteresis the robot would sit on the
deadband's edge, moving on and off with every centimetre of detector noise, and a deadband
that subtracts its width instead never quite arrives: the proportional law only creeps up to
the edge. The law aims at the set point itself, so it enters the deadband in finite time;
the step at release is smoothed by the acceleration limit. With both axes held the state is
``'holding'``. ``taper(e_b) = max(0, 1 - (e_b / θ)²)`` with
``θ = turn_in_place_bearing_rad`` slows the robot when the bearing error is large, so it
turns towards the person before it drives, and does not drive at all (in particular does not
reverse into someone) when the person is beside or behind it.

Then the command is clamped, in this order:

1. speeds: ``-max_reverse <= linear <= max_linear`` (reversing only slowly, when the person
   is too close) and ``|angular| <= max_angular``;
2. rate limits over ``dt``, the time since the previous cycle bounded by ``max_dt_s``:
   speeding up at most ``max_linear_accel`` / ``max_angular_accel``, slowing down (towards
   zero) at most ``stop_decel_linear`` / ``stop_decel_angular``. A reversal first brakes to
   zero; the next cycle speeds up the other way. Slowing down uses the braking figures, not
   the gentle acceleration limits, because a follower that can shed speed only at 0.5 m/s²
   runs into a person who stops or steps in front of it; it is also why ``k_linear`` can be
   high enough (lag behind a walking person ``≈ speed / k_linear``) without overshoot;
3. the freshness envelope: ``|linear| <= stop_decel_linear · (stamp + max_stop_time_s -
   now)`` and likewise angular. It is the speed from which the robot can still stop by
   ``max_stop_time_s`` after the observation was made if no other one comes. Staleness is
   only detected ``target_timeout_s`` after the stamp and braking from full speed takes
   ``max_linear / stop_decel_linear`` more (0.25 + 0.3 s with the defaults, over the
   0.5 s budget), so without the envelope the stop deadline would not hold; with it the
   robot slows as its data ages (at most 0.5 m/s at the timeout with the defaults) and is
   stopped by ``stamp + max_stop_time_s`` whatever happens after the stamp.

Safety rules
------------
Checked every cycle, in this order of precedence (the reported state is the first that
applies):

* ``'estop'``: the command is exactly zero at once, without a ramp (the emergency stop is
  the operator's, and a ramp would be motion they did not want). It stays latched after the
  stop is released until a target is seen that was observed at or after the release and
  would be followed (fresh, link and detector up): a person who handled the robot during
  the stop must not have it leap at an observation made before.
* ``'link_down'``, ``'detector_down'``, ``'no_target'``, ``'target_stale'`` (target older
  than ``target_timeout_s``, stamp to ``now``): no new motion. The previous command ramps
  to zero at ``stop_decel_linear`` / ``stop_decel_angular``, which the configuration checks
  stops the robot from full speed within ``max_stop_time_s``; a ramp rather than a hard zero
  because the loss is no emergency and a skidding stop is worse than a short brake. The
  freshness envelope applies too, with the last followed observation's stamp.
* Input that cannot be trusted raises ``ValueError`` instead of being acted on.
  :class:`Target` refuses non-finite values when it is built, where the detection enters
  the node, which then has no target to pass (and the robot brakes as for a lost one).
  :meth:`PersonFollower.update` refuses a non-finite ``now``, a ``now`` earlier than the
  previous cycle's, and a stamp more than ``future_stamp_tolerance_s`` in the future (a
  clock problem, and its age would look fresh for ever); it then takes its command to be
  zero, so the caller must publish a zero command, and the next cycle ramps up from there.
  An emergency stop needs no target, so with ``estop`` set the target is not checked.
* The first cycle has no previous one to measure ``dt`` from and so commands zero; a long
  gap between cycles (the node stalled) counts as ``max_dt_s``; neither produces a jump.

The controller does not move old observations into the current robot frame: a node passes
the latest observation as it is (repeating it between detections is fine) and the timeout
bounds how far the robot has moved since.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from enum import StrEnum

# A held axis resumes when its error exceeds this many deadbands (hysteresis).
_RELEASE_FACTOR = 2.0
# Times are float seconds: rounding must not leave a sliver of speed at the stop deadline.
_TIME_EPS_S = 1e-6
# Speeds (m/s, rad/s) below this at the end of a braking ramp are zero.
_SPEED_EPS = 1e-9


class FollowerState(StrEnum):
    """Why the command is what it is; the values are the strings a node reports."""

    FOLLOWING = 'following'
    HOLDING = 'holding'  # inside both deadbands
    NO_TARGET = 'no_target'
    TARGET_STALE = 'target_stale'
    ESTOP = 'estop'  # pressed, or released but not yet re-armed by a fresh target
    LINK_DOWN = 'link_down'
    DETECTOR_DOWN = 'detector_down'


@dataclass(frozen=True)
class Target:
    """The followed person in the robot base frame: ``x`` forward, ``y`` left (m).

    ``stamp`` is the time the observation refers to (s, the clock of ``now``), not the
    time it arrived. ``vx``, ``vy`` are the person's ground velocity in the same axes (m/s;
    0 when unknown), for the feed-forward.
    """

    x: float
    y: float
    stamp: float
    vx: float = 0.0
    vy: float = 0.0

    def __post_init__(self) -> None:
        for name in ('x', 'y', 'stamp', 'vx', 'vy'):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f'target {name} must be finite, got {getattr(self, name)}')

    @property
    def distance(self) -> float:
        """Range to the person (m)."""
        return math.hypot(self.x, self.y)

    @property
    def bearing(self) -> float:
        """Direction of the person (rad, positive to the left, 0 straight ahead)."""
        return math.atan2(self.y, self.x)

    @property
    def radial_speed(self) -> float:
        """Speed at which the person walks away from the robot (m/s; negative: closer)."""
        distance = self.distance
        return 0.0 if distance < 1e-6 else (self.vx * self.x + self.vy * self.y) / distance

    @property
    def bearing_rate(self) -> float:
        """Rate at which the person's walk turns their bearing (rad/s, to the left)."""
        squared = self.x * self.x + self.y * self.y
        return 0.0 if squared < 1e-12 else (self.x * self.vy - self.y * self.vx) / squared


@dataclass(frozen=True)
class FollowerCommand:
    """One cycle's output: ``linear`` (m/s, forward) and ``angular`` (rad/s, to the left)."""

    linear: float
    angular: float
    state: FollowerState


@dataclass(frozen=True)
class FollowerConfig:
    """Set point, gains and limits; see the module docstring for how each is used.

    Units: m, rad, s; speeds m/s and rad/s; accelerations m/s² and rad/s²; gains 1/s.
    """

    set_distance_m: float = 1.2
    set_bearing_rad: float = 0.0
    # Without feed-forward, 0.2 m of lag behind a person walking at 0.5 m/s; slowing down
    # as the error closes needs k_linear · max_linear = 1.5 m/s², within stop_decel_linear,
    # so no overshoot.
    k_linear: float = 2.5
    k_angular: float = 2.0
    # Share of the person's velocity fed forward (0: feedback only; 1: match it).
    feed_forward_gain: float = 1.0
    distance_deadband_m: float = 0.03
    bearing_deadband_rad: float = 0.03
    # Bearing error at which the robot stops driving and only turns (~46°).
    turn_in_place_bearing_rad: float = 0.8
    max_linear: float = 0.6
    max_reverse: float = 0.2
    max_angular: float = 1.0
    max_linear_accel: float = 0.5
    max_angular_accel: float = 2.0
    stop_decel_linear: float = 2.0
    stop_decel_angular: float = 4.0
    target_timeout_s: float = 0.25
    max_stop_time_s: float = 0.5
    # Two 20 Hz cycles: one missed cycle is normal jitter, more is a stall.
    max_dt_s: float = 0.1
    future_stamp_tolerance_s: float = 0.05

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if not math.isfinite(value):
                raise ValueError(f'{field.name} must be finite, got {value}')
        for name in (
            'set_distance_m',
            'k_linear',
            'k_angular',
            'turn_in_place_bearing_rad',
            'max_linear',
            'max_angular',
            'max_linear_accel',
            'max_angular_accel',
            'stop_decel_linear',
            'stop_decel_angular',
            'target_timeout_s',
            'max_stop_time_s',
            'max_dt_s',
        ):
            if getattr(self, name) <= 0.0:
                raise ValueError(f'{name} must be positive, got {getattr(self, name)}')
        for name in (
            'distance_deadband_m',
            'bearing_deadband_rad',
            'max_reverse',
            'future_stamp_tolerance_s',
        ):
            if getattr(self, name) < 0.0:
                raise ValueError(f'{name} must not be negative, got {getattr(self, name)}')
        if not 0.0 <= self.feed_forward_gain <= 1.0:
            raise ValueError(f'feed_forward_gain must be in [0, 1], got {self.feed_forward_gain}')
        if abs(self.set_bearing_rad) >= math.pi / 2:
            raise ValueError(
                f'set_bearing_rad must keep the person in front (|.| < pi/2), '
                f'got {self.set_bearing_rad}'
            )
        if self.turn_in_place_bearing_rad > math.pi:
            raise ValueError(
                'turn_in_place_bearing_rad must be at most pi, '
                f'got {self.turn_in_place_bearing_rad}'
            )
        if self.max_reverse > self.max_linear:
            raise ValueError(
                f'max_reverse ({self.max_reverse}) must not exceed max_linear ({self.max_linear})'
            )
        # Slowing down in normal following uses the braking figures: they must not be gentler.
        if self.stop_decel_linear < self.max_linear_accel:
            raise ValueError(
                f'stop_decel_linear ({self.stop_decel_linear}) must be at least '
                f'max_linear_accel ({self.max_linear_accel})'
            )
        if self.stop_decel_angular < self.max_angular_accel:
            raise ValueError(
                f'stop_decel_angular ({self.stop_decel_angular}) must be at least '
                f'max_angular_accel ({self.max_angular_accel})'
            )
        linear_stop_s = self.max_linear / self.stop_decel_linear
        if linear_stop_s > self.max_stop_time_s:
            raise ValueError(
                f'stop_decel_linear {self.stop_decel_linear} m/s^2 stops from max_linear '
                f'{self.max_linear} m/s in {linear_stop_s:.3g} s, more than max_stop_time_s '
                f'{self.max_stop_time_s} s'
            )
        angular_stop_s = self.max_angular / self.stop_decel_angular
        if angular_stop_s > self.max_stop_time_s:
            raise ValueError(
                f'stop_decel_angular {self.stop_decel_angular} rad/s^2 stops from max_angular '
                f'{self.max_angular} rad/s in {angular_stop_s:.3g} s, more than '
                f'max_stop_time_s {self.max_stop_time_s} s'
            )
        # At or past max_stop_time_s the freshness envelope is zero: a longer timeout would
        # call data fresh that the robot can no longer move on.
        if self.target_timeout_s >= self.max_stop_time_s:
            raise ValueError(
                f'target_timeout_s ({self.target_timeout_s}) must be less than '
                f'max_stop_time_s ({self.max_stop_time_s})'
            )


class PersonFollower:
    """The follower's state between cycles: the last command, time and estop latch."""

    def __init__(self, config: FollowerConfig | None = None) -> None:
        self.config = FollowerConfig() if config is None else config
        self._linear = 0.0
        self._angular = 0.0
        self._last_now: float | None = None
        # Time by which the robot must be stopped: last followed stamp + max_stop_time_s.
        # Nothing followed yet, so nothing may move.
        self._deadline = -math.inf
        self._estop_latched = False
        self._estop_released_at: float | None = None
        self._distance_held = False
        self._bearing_held = False

    @property
    def estop_latched(self) -> bool:
        """Whether an emergency stop still holds the robot (pressed or not yet re-armed)."""
        return self._estop_latched

    def update(
        self,
        now: float,
        target: Target | None,
        *,
        estop: bool,
        link_ok: bool,
        detector_ok: bool,
    ) -> FollowerCommand:
        """Return this cycle's command (see the module docstring for the rules).

        ``now`` is the current time (s, non-decreasing); ``target`` the latest observation
        of the person or ``None``. The flags are keyword-only and have no defaults, so a
        node cannot forget to wire one. Raises ``ValueError`` on untrusted input; the
        caller must then publish a zero command.
        """
        cfg = self.config
        if estop:
            # Latched before anything can raise: a stop pressed in a bad cycle still holds.
            self._estop_latched = True
            self._estop_released_at = None
        if not math.isfinite(now):
            self._reject()
            raise ValueError(f'now must be finite, got {now}')
        if self._last_now is not None and now < self._last_now:
            self._reject()
            raise ValueError(f'now went back in time: {now} after {self._last_now}')
        dt = 0.0 if self._last_now is None else min(now - self._last_now, cfg.max_dt_s)
        self._last_now = now

        if estop:
            return self._emit(0.0, 0.0, FollowerState.ESTOP)
        if self._estop_latched and self._estop_released_at is None:
            self._estop_released_at = now

        if target is not None and target.stamp > now + cfg.future_stamp_tolerance_s:
            self._reject()
            raise ValueError(
                f'target stamp {target.stamp} is more than {cfg.future_stamp_tolerance_s} s '
                f'after now ({now})'
            )

        reason = self._stop_reason(now, target, link_ok=link_ok, detector_ok=detector_ok)

        if self._estop_latched:
            released_at = self._estop_released_at
            if reason is not None or target is None or target.stamp < released_at:
                return self._emit(0.0, 0.0, FollowerState.ESTOP)
            self._estop_latched = False
            self._estop_released_at = None

        if reason is not None:
            # No new motion: brake what is left of the previous command.
            linear = _ramp(self._linear, 0.0, 0.0, cfg.stop_decel_linear, dt)
            angular = _ramp(self._angular, 0.0, 0.0, cfg.stop_decel_angular, dt)
            return self._emit(*self._envelope(linear, angular, now), reason)

        return self._follow(now, target, dt)

    def _stop_reason(
        self, now: float, target: Target | None, *, link_ok: bool, detector_ok: bool
    ) -> FollowerState | None:
        """Return why the robot must not follow this cycle, or None when it may."""
        if not link_ok:
            return FollowerState.LINK_DOWN
        if not detector_ok:
            return FollowerState.DETECTOR_DOWN
        if target is None:
            return FollowerState.NO_TARGET
        if now - target.stamp > self.config.target_timeout_s:
            return FollowerState.TARGET_STALE
        return None

    def _follow(self, now: float, target: Target, dt: float) -> FollowerCommand:
        """Return the command towards a fresh ``target``: feedback, feed-forward, limits."""
        cfg = self.config
        distance_error = target.distance - cfg.set_distance_m
        bearing_error = math.remainder(target.bearing - cfg.set_bearing_rad, math.tau)
        taper = max(0.0, 1.0 - (bearing_error / cfg.turn_in_place_bearing_rad) ** 2)
        self._distance_held = _held(self._distance_held, distance_error, cfg.distance_deadband_m)
        self._bearing_held = _held(self._bearing_held, bearing_error, cfg.bearing_deadband_rad)
        linear = 0.0 if self._distance_held else cfg.k_linear * distance_error * taper
        angular = 0.0 if self._bearing_held else cfg.k_angular * bearing_error
        linear += cfg.feed_forward_gain * target.radial_speed * taper
        angular += cfg.feed_forward_gain * target.bearing_rate
        linear = min(max(linear, -cfg.max_reverse), cfg.max_linear)
        angular = min(max(angular, -cfg.max_angular), cfg.max_angular)
        linear = _ramp(self._linear, linear, cfg.max_linear_accel, cfg.stop_decel_linear, dt)
        angular = _ramp(self._angular, angular, cfg.max_angular_accel, cfg.stop_decel_angular, dt)
        # A stamp slightly in the future (within the tolerance) buys no extra time.
        self._deadline = min(target.stamp, now) + cfg.max_stop_time_s
        holding = self._distance_held and self._bearing_held
        state = FollowerState.HOLDING if holding else FollowerState.FOLLOWING
        return self._emit(*self._envelope(linear, angular, now), state)

    def _envelope(self, linear: float, angular: float, now: float) -> tuple[float, float]:
        left_s = max(0.0, self._deadline - now - _TIME_EPS_S)
        linear_bound = self.config.stop_decel_linear * left_s
        angular_bound = self.config.stop_decel_angular * left_s
        return (
            min(max(linear, -linear_bound), linear_bound),
            min(max(angular, -angular_bound), angular_bound),
        )

    def _emit(self, linear: float, angular: float, state: FollowerState) -> FollowerCommand:
        # + 0.0 turns a -0.0 from the mirrored ramp into 0.0.
        self._linear, self._angular = linear + 0.0, angular + 0.0
        return FollowerCommand(self._linear, self._angular, state)

    def _reject(self) -> None:
        # The caller publishes zero on ValueError; ramp on from what the robot was sent.
        self._linear = self._angular = 0.0


def _held(held: bool, error: float, deadband: float) -> bool:
    """Whether an axis is held: entered within ``deadband``, left beyond twice it."""
    return abs(error) <= (_RELEASE_FACTOR if held else 1.0) * deadband


def _ramp(current: float, desired: float, accel: float, decel: float, dt: float) -> float:
    """Move ``current`` towards ``desired`` over ``dt``, speeding up at most at ``accel``.

    Slowing down (towards zero) is at most at ``decel``. A change of sign stops at zero this
    cycle; the next one speeds up the other way.
    """
    if current < 0.0:
        return -_ramp(-current, -desired, accel, decel, dt)
    if current == 0.0:
        step = accel * dt
        return min(max(desired, -step), step)
    if desired >= current:
        return min(desired, current + accel * dt)
    slowed = current - decel * dt
    if slowed < _SPEED_EPS:
        slowed = 0.0  # a ramp meant to reach zero must not stop a rounding error short of it
    return max(desired, 0.0, slowed)
