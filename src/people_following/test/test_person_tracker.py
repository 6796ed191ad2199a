# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The person tracker keeps ids, gates outliers, bounds its tracks and holds its target.

Scenarios are simulated at 10 Hz with 0.05 m of detection noise and fixed seeds; each test
checks behaviour that a broken association, track life or target rule would change.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chi2

from people_following.person_tracker import Detection, PersonTracker, Track, TrackerConfig

RATE_HZ = 10.0
NOISE_M = 0.05
ROBOT = (0.0, 0.0)


def _detection(
    position: np.ndarray | tuple[float, float], sigma: float = NOISE_M, z: float | None = None
) -> Detection:
    return Detection(np.asarray(position, dtype=float), np.eye(2) * sigma**2, z)


def _noisy(rng: np.random.Generator, position: np.ndarray) -> Detection:
    return _detection(np.asarray(position) + rng.normal(0.0, NOISE_M, 2))


def _stamp(cycle: int) -> float:
    return cycle / RATE_HZ


def _nearest(tracker: PersonTracker, position: np.ndarray | tuple[float, float]) -> int:
    tracks = tracker.tracks
    distances = [np.linalg.norm(track.position - np.asarray(position)) for track in tracks]
    return tracks[int(np.argmin(distances))].track_id


def _run_standing(
    tracker: PersonTracker,
    rng: np.random.Generator,
    people: list[tuple[float, float]],
    cycles: range,
) -> None:
    for cycle in cycles:
        detections = [_noisy(rng, np.array(person)) for person in people]
        tracker.update(_stamp(cycle), detections, ROBOT)


def test_constant_velocity_walker_is_one_confirmed_track_with_its_velocity():
    rng = np.random.default_rng(1)
    # A steady walker, and a model that matches: with the default acceleration noise (0.7,
    # for people who stop and turn), 0.05 m of noise at 10 Hz leaves ~0.20 m/s of velocity
    # error on average, too much for a 0.1 m/s bound.
    tracker = PersonTracker(TrackerConfig(accel_sigma=0.05))
    start, velocity = np.array([1.0, 2.0]), np.array([0.8, -0.5])
    for cycle in range(31):  # 0 to 3 s
        truth = start + velocity * _stamp(cycle)
        noisy = truth + rng.normal(0.0, NOISE_M, 2)
        height = 1.7 + rng.normal(0.0, NOISE_M)
        tracker.update(_stamp(cycle), [_detection(noisy, z=height)], ROBOT)
    (track,) = tracker.tracks
    assert track.confirmed
    # A 0.99 gate rejects about 1 % of a consistent track's detections.
    assert track.hits >= 28
    assert np.linalg.norm(track.velocity - velocity) < 0.1
    assert np.linalg.norm(track.position - truth) < 0.1
    assert track.z == pytest.approx(1.7, abs=0.05)
    assert tracker.target_id == track.track_id


def test_walker_who_stops_keeps_the_track_with_the_default_noise():
    rng = np.random.default_rng(10)
    tracker = PersonTracker()
    start, speed, braking = 0.5, 1.4, 2.5  # m, m/s, m/s²: stops in 0.56 s
    target_id = None
    for cycle in range(41):  # walks for 2 s, brakes, stands
        t = _stamp(cycle)
        braked = min(max(t - 2.0, 0.0), speed / braking)
        truth = np.array(
            [start + speed * min(t, 2.0) + speed * braked - braking * braked**2 / 2, 0]
        )
        tracker.update(t, [_noisy(rng, truth)], ROBOT)
        if cycle == 20:
            target_id = tracker.target_id
            assert target_id is not None
        if cycle >= 20:
            assert tracker.target_id == target_id, f'target lost at {t} s'
            assert max(track.track_id for track in tracker.tracks) == target_id
    assert np.linalg.norm(tracker.target.position - truth) < 0.15
    assert np.linalg.norm(tracker.target.velocity) < 0.6  # from 1.4 m/s


def test_crossing_people_keep_their_ids():
    rng = np.random.default_rng(2)
    tracker = PersonTracker()
    # Walking toward each other at 1 m/s on lines 0.6 m apart; the farther one is hidden
    # while they overlap, and the detections come in a random order.
    start_a, velocity_a = np.array([-3.0, 0.3]), np.array([1.0, 0.0])
    start_b, velocity_b = np.array([3.0, -0.3]), np.array([-1.0, 0.0])
    ids: dict[str, int] = {}
    hidden_cycles = 0
    for cycle in range(61):  # 0 to 6 s, crossing at 3 s
        t = _stamp(cycle)
        truth_a, truth_b = start_a + velocity_a * t, start_b + velocity_b * t
        detections = [_noisy(rng, truth_a)]
        if abs(truth_a[0] - truth_b[0]) > 0.4:
            detections.append(_noisy(rng, truth_b))
        else:
            hidden_cycles += 1
        rng.shuffle(detections)
        tracker.update(t, detections, ROBOT)
        if cycle == 10:
            assert len(tracker.confirmed_tracks) == 2
            ids = {'a': _nearest(tracker, truth_a), 'b': _nearest(tracker, truth_b)}
            assert ids['a'] != ids['b']
        if cycle >= 10:
            assert _nearest(tracker, truth_a) == ids['a'], f'swapped at {t} s'
            assert _nearest(tracker, truth_b) == ids['b'], f'swapped at {t} s'
    assert hidden_cycles >= 3
    assert [track.track_id for track in tracker.tracks] == sorted(ids.values())
    assert np.linalg.norm(tracker.track(ids['a']).position - truth_a) < 0.15
    assert np.linalg.norm(tracker.track(ids['b']).position - truth_b) < 0.15


def test_clutter_starts_a_tentative_track_that_expires():
    rng = np.random.default_rng(3)
    tracker = PersonTracker()
    person = np.array([1.5, 0.0])
    clutter = np.array([4.0, -3.0])
    seen: list[float] = []
    clutter_id = None
    for cycle in range(31):
        t = _stamp(cycle)
        detections = [_noisy(rng, person)]
        if cycle in (10, 25):
            detections.append(_detection(clutter))
        tracker.update(t, detections, ROBOT)
        person_id = _nearest(tracker, person)
        others = [track for track in tracker.tracks if track.track_id != person_id]
        assert all(not track.confirmed for track in others)
        if cycle == 10:
            (other,) = others
            clutter_id = other.track_id
            assert other.hits == 1
            assert np.allclose(other.position, clutter)
        if cycle == 25:
            # A later clutter detection gets a new, higher id: ids are never reused.
            (other,) = others
            assert other.track_id > clutter_id
        if any(track.track_id == clutter_id for track in others):
            seen.append(t)
    # Tentative tracks live tentative_max_age_s (0.5 s) without a detection; 1.5 s is the
    # boundary, where rounding decides.
    assert seen[:5] == pytest.approx([1.0, 1.1, 1.2, 1.3, 1.4])
    assert len(seen) <= 6
    assert tracker.target_id == person_id
    assert tracker.track(person_id).confirmed


def test_track_dies_after_max_age_and_the_target_moves_to_the_nearest_left():
    rng = np.random.default_rng(4)
    tracker = PersonTracker()
    near, middle, far = (1.5, 0.0), (2.5, 1.0), (0.0, -2.9)
    # Seen in this order, so that the middle person's id is the highest.
    _run_standing(tracker, rng, [near, far, middle], range(11))
    near_id, middle_id, far_id = (_nearest(tracker, p) for p in (near, middle, far))
    assert near_id < far_id < middle_id
    assert tracker.target_id == near_id
    # The nearest person is no longer seen (last detection at 1.0 s).
    _run_standing(tracker, rng, [far, middle], range(11, 20))
    assert tracker.target_id == near_id, 'alive until max_age_s'
    assert tracker.track(near_id).time_since_update_s == pytest.approx(0.9)
    _run_standing(tracker, rng, [far, middle], range(20, 22))
    assert tracker.track(near_id) is None
    # Of the two left, the nearer to the robot (2.69 m against 2.9 m), not the older.
    assert tracker.target_id == middle_id
    # Nobody seen any more: empty cycles only predict and age, then everything goes.
    for cycle in range(22, 31):  # up to 0.9 s after their last detection
        tracker.update(_stamp(cycle), [])
    assert [track.track_id for track in tracker.tracks] == [far_id, middle_id]
    tracker.update(_stamp(32), [])
    assert tracker.tracks == []
    assert tracker.target_id is None
    assert tracker.target is None


def test_target_stays_when_another_person_comes_closer():
    rng = np.random.default_rng(5)
    tracker = PersonTracker()
    target_position = np.array([2.0, 0.0])
    start, velocity = np.array([2.0, 2.5]), np.array([-0.7, -0.8])
    target_id = None
    for cycle in range(31):
        t = _stamp(cycle)
        other = start + velocity * t
        tracker.update(t, [_noisy(rng, target_position), _noisy(rng, other)], ROBOT)
        if cycle == 5:
            target_id = tracker.target_id
            assert target_id == _nearest(tracker, target_position)
        if cycle >= 5:
            assert tracker.target_id == target_id
    assert np.linalg.norm(other) < 0.6  # the other person ended up much closer
    assert len(tracker.confirmed_tracks) == 2
    assert tracker.target.track_id == target_id
    assert np.linalg.norm(tracker.target.position - target_position) < 0.15


def test_preferred_target_takes_over_and_ends_with_its_track():
    rng = np.random.default_rng(6)
    tracker = PersonTracker()
    near, far = (1.0, 0.0), (2.0, 1.0)
    _run_standing(tracker, rng, [near, far], range(5))
    near_id, far_id = _nearest(tracker, near), _nearest(tracker, far)
    assert tracker.target_id == near_id
    with pytest.raises(ValueError, match='no living track'):
        tracker.set_preferred_target(far_id + 100)
    tracker.set_preferred_target(far_id)
    assert tracker.target_id == far_id
    _run_standing(tracker, rng, [near], range(5, 18))
    assert tracker.track(far_id) is None
    assert tracker.preferred_target_id is None
    assert tracker.target_id == near_id


def _gate_scenario(
    scale: float, min_separation_m: float = 0.4
) -> tuple[PersonTracker, Track, np.ndarray]:
    """Make a confirmed track and, at the same time, a detection at ``scale`` times the gate."""
    rng = np.random.default_rng(7)
    tracker = PersonTracker(TrackerConfig(min_separation_m=min_separation_m))
    _run_standing(tracker, rng, [(1.0, 0.0)], range(10))
    (track,) = tracker.tracks
    assert track.confirmed
    sigma = 0.1
    # Same stamp: no prediction, so S is exactly the track's covariance plus R.
    innovation_cov = track.position_covariance + np.eye(2) * sigma**2
    direction = np.array([1.0, 0.0])
    along = direction @ np.linalg.solve(innovation_cov, direction)
    offset = direction * math.sqrt(scale * tracker.config.gate / along)
    tracker.update(_stamp(9), [_detection(track.position + offset, sigma)], ROBOT)
    return tracker, track, track.position + offset


def test_gate_is_the_chi_square_quantile_of_the_mahalanobis_distance():
    assert TrackerConfig().gate == pytest.approx(chi2.ppf(0.99, 2))
    assert TrackerConfig(gate_probability=0.9).gate == pytest.approx(chi2.ppf(0.9, 2))
    inside, before, _ = _gate_scenario(0.95)
    (track,) = inside.tracks
    assert (track.track_id, track.hits) == (before.track_id, before.hits + 1)
    outside, before, rejected = _gate_scenario(1.05)
    (track,) = outside.tracks
    assert (track.track_id, track.hits) == (before.track_id, before.hits)
    assert np.array_equal(track.position, before.position)
    # Within min_separation_m of the track, the rejected detection starts no track either.
    assert np.linalg.norm(rejected - before.position) < outside.config.min_separation_m
    outside, before, _ = _gate_scenario(1.05, min_separation_m=0.0)
    first, second = outside.tracks
    assert (first.track_id, first.hits) == (before.track_id, before.hits)
    assert (second.track_id, second.hits, second.confirmed) == (before.track_id + 1, 1, False)


@pytest.mark.parametrize('likelihood_cost', [True, False])
def test_coasting_track_does_not_take_a_confident_neighbours_detection(likelihood_cost):
    tracker = PersonTracker(TrackerConfig(likelihood_cost=likelihood_cost))
    here, there = np.array([0.0, 0.0]), np.array([1.0, 0.0])
    for cycle in range(11):
        tracker.update(_stamp(cycle), [_detection(here), _detection(there)], ROBOT)
    here_id, there_id = _nearest(tracker, here), _nearest(tracker, there)
    for cycle in range(11, 19):  # the second person is gone: their track coasts 0.8 s
        tracker.update(_stamp(cycle), [_detection(here)], ROBOT)
    here_before, there_before = tracker.track(here_id), tracker.track(there_id)
    # The first person steps 0.17 m toward the coasting track (same stamp: no prediction).
    step = np.array([0.17, 0.0])
    distances = {}
    for name, track in (('here', here_before), ('there', there_before)):
        innovation_cov = track.position_covariance + np.eye(2) * NOISE_M**2
        innovation = here + step - track.position
        distances[name] = innovation @ np.linalg.solve(innovation_cov, innovation)
    # The premise: both in the gate, and the coasting track the nearer by d² alone.
    assert distances['there'] < distances['here'] < tracker.config.gate
    tracker.update(_stamp(18), [_detection(here + step)], ROBOT)
    taken_by_here = tracker.track(here_id).hits == here_before.hits + 1
    taken_by_there = tracker.track(there_id).hits == there_before.hits + 1
    # d² + ln det S charges the coasting track for its spread; d² alone lets it steal.
    assert (taken_by_here, taken_by_there) == (likelihood_cost, not likelihood_cost)


def test_far_measurement_starts_a_new_tentative_track():
    rng = np.random.default_rng(8)
    tracker = PersonTracker()
    _run_standing(tracker, rng, [(1.0, 0.0)], range(10))
    (before,) = tracker.tracks
    tracker.update(_stamp(10), [_detection((3.0, 0.5))], ROBOT)
    old, new = tracker.tracks
    assert old.track_id == before.track_id
    assert old.hits == before.hits
    assert old.time_since_update_s == pytest.approx(0.1)
    # Only predicted: no part of the far detection was fused.
    assert np.allclose(old.position, before.position + 0.1 * before.velocity)
    assert (new.hits, new.confirmed) == (1, False)
    assert np.allclose(new.position, (3.0, 0.5))
    assert tracker.target_id == old.track_id


def test_max_tracks_holds_under_a_flood_of_detections():
    rng = np.random.default_rng(9)
    tracker = PersonTracker(TrackerConfig(max_tracks=8))
    person = (1.0, 0.0)
    _run_standing(tracker, rng, [person], range(5))
    person_id = tracker.target_id
    assert person_id is not None
    for cycle in range(5, 25):
        flood = [_detection(position) for position in rng.uniform(-10.0, 10.0, (30, 2))]
        tracker.update(_stamp(cycle), [_noisy(rng, np.array(person)), *flood], ROBOT)
        assert len(tracker.tracks) <= 8
        assert tracker.target_id == person_id
    assert len(tracker.tracks) == 8
    assert tracker.dropped_detection_count > 20 * 20
    # The clutter tracks expire, confirmed ones (the flood is dense enough to confirm a few)
    # after max_age_s; the person stays.
    _run_standing(tracker, rng, [person], range(25, 37))
    assert [track.track_id for track in tracker.tracks] == [person_id]


@pytest.mark.parametrize(
    ('position', 'covariance', 'message'),
    [
        ((math.nan, 0.0), np.eye(2), 'position must be finite'),
        ((1.0, math.inf), np.eye(2), 'position must be finite'),
        ((1.0, 2.0, 3.0), np.eye(2), 'position must have 2 values'),
        ((1.0, 0.0), [[1.0, 0.0], [0.0, -1.0]], 'positive definite'),
        ((1.0, 0.0), [[1.0, 1.0], [1.0, 1.0]], 'positive definite'),
        ((1.0, 0.0), [[1.0, 0.5], [0.0, 1.0]], 'symmetric'),
        ((1.0, 0.0), [[math.nan, 0.0], [0.0, 1.0]], 'covariance must be finite'),
        ((1.0, 0.0), np.eye(3), 'covariance must be 2x2'),
    ],
)
def test_bad_detection_is_refused(position, covariance, message):
    with pytest.raises(ValueError, match=message):
        Detection(np.asarray(position), np.asarray(covariance))


def test_bad_height_is_refused():
    with pytest.raises(ValueError, match='z must be finite'):
        Detection(np.zeros(2), np.eye(2), math.nan)


def test_time_going_backwards_is_refused_without_changing_anything():
    tracker = PersonTracker()
    tracker.update(1.0, [_detection((1.0, 0.0))], ROBOT)
    before = tracker.tracks
    with pytest.raises(ValueError, match='backwards'):
        tracker.update(0.5, [_detection((1.0, 0.0))], ROBOT)
    with pytest.raises(ValueError, match='stamp must be finite'):
        tracker.update(math.nan, [])
    with pytest.raises(ValueError, match='robot_position'):
        tracker.update(1.1, [], (math.nan, 0.0))
    with pytest.raises(TypeError, match='must be Detection'):
        tracker.update(1.1, [((1.0, 0.0), np.eye(2))], ROBOT)
    assert tracker.time == 1.0
    (after,) = tracker.tracks
    assert (after.track_id, after.hits) == (before[0].track_id, before[0].hits)
    # The same time again is allowed: a second batch of the same cycle.
    tracker.update(1.0, [_detection((1.0, 0.0))], ROBOT)
    assert tracker.tracks[0].hits == 2


@pytest.mark.parametrize(
    ('field', 'value', 'message'),
    [
        ('accel_sigma', 0.0, 'accel_sigma must be positive'),
        ('accel_sigma', -1.0, 'accel_sigma must be positive'),
        ('accel_sigma', math.nan, 'accel_sigma must be positive'),
        ('initial_velocity_sigma', math.inf, 'initial_velocity_sigma must be positive'),
        ('gate_probability', 1.0, r'gate_probability must be in \(0, 1\)'),
        ('gate_probability', 0.0, 'gate_probability must be positive'),
        ('confirm_hits', 0, 'confirm_hits must be an integer'),
        ('confirm_hits', 2.5, 'confirm_hits must be an integer'),
        ('max_tracks', 0, 'max_tracks must be an integer'),
        ('max_age_s', 0.0, 'max_age_s must be positive'),
        ('tentative_max_age_s', -0.5, 'tentative_max_age_s must be positive'),
        ('max_position_sigma_m', 0.0, 'max_position_sigma_m must be positive'),
        ('max_target_distance_m', -1.0, 'max_target_distance_m must be positive'),
        ('min_separation_m', -0.1, 'min_separation_m must be non-negative'),
        ('height_smoothing', 1.5, r'height_smoothing must be in \(0, 1\]'),
        ('accel_sigma', '1', 'accel_sigma must be a number'),
    ],
)
def test_invalid_config_is_refused(field, value, message):
    with pytest.raises(ValueError, match=message):
        TrackerConfig(**{field: value})
