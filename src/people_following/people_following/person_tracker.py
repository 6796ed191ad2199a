# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""A multi-person tracker on the ground plane of the odometry frame, with a stable target.

The person-following robot localizes people from depth (one 2-D ground-plane position and
its 2×2 covariance per person and frame); this module turns those detections into tracks
with persistent ids and picks the person to follow. It is plain Python (numpy, scipy,
filterpy): a ROS node wraps it.

Model
-----
Each track is a ``filterpy.kalman.KalmanFilter`` with state ``[x, y, vx, vy]`` (m, m/s,
odometry frame) and a constant-velocity model. Every :meth:`PersonTracker.update` first
predicts all tracks to the cycle's time, whatever the time step.

Process noise is *continuous* white-noise acceleration, ``filterpy.common.
Q_continuous_white_noise`` with spectral density ``accel_sigma²``: per step
``Q_pp = q Δt³/3``, ``Q_pv = q Δt²/2``, ``Q_vv = q Δt`` on each axis. The discrete
(piecewise-constant acceleration) form, ``Q_discrete_white_noise``, was not used because it
depends on how the time is cut into steps (two steps of ``Δt/2`` add half the velocity
variance of one step of ``Δt``), and detection cycles here are irregular: dropped frames,
late server replies. So ``accel_sigma`` is in m/s²·√s: over ``t`` seconds without
detections, the velocity standard deviation grows by ``accel_sigma·√t``.

The measurement is the position, ``H = [I 0]``, with each detection's own covariance ``R``.
A new track starts at the detection with ``R`` as its position covariance and zero velocity
with ``initial_velocity_sigma`` (walking pace) on each axis.

Association
-----------
Detection ``j`` and track ``i`` are compared by the squared Mahalanobis distance of the
innovation, ``d² = yᵀ S⁻¹ y`` with ``y = z_j - H x_i`` and ``S = H P_i Hᵀ + R_j``. Pairs
with ``d²`` above the chi-square quantile of ``gate_probability`` for 2 dof are gated out
(for 2 dof the quantile is exactly ``-2 ln(1 - p)``: 9.21 at 0.99).
``scipy.optimize.linear_sum_assignment`` then finds the assignment with the most gated-in
pairs and, among those, the least total cost: gated-out pairs get a cost larger than any
sum of gated-in ones and are dropped from its answer, so they are never assigned. Optimal
rather than greedy assignment matters where two people pass each other.

The cost is ``d² + ln det S``, the innovation's negative log-likelihood up to a constant,
rather than ``d²`` alone (``likelihood_cost=False`` gives that). ``d²`` alone favours
uncertain tracks: the track of a person who left, coasting with a covariance that grows
every cycle, gates in a neighbour a metre away within a second and then wins that
neighbour's detection whenever it is the cheaper ``d²``, so the neighbour's own track
coasts and the ids can swap. ``ln det S`` charges the coasting track for its spread: over
400 seeds of the test scenarios (people leaving, a flood of clutter, a preferred target),
``d²`` alone failed 20 runs and ``d² + ln det S`` 5. What remains: when the neighbour's
own track misses its gate (1 % of cycles), the coasting track is the only candidate and
takes the detection.

Track life
----------
* A detection left unassigned starts a tentative track with a new id (ids increase and are
  never reused, so a stale id held by a client can never name another person), unless it
  lies within ``min_separation_m`` of a track. A 0.99 gate rejects 1 % of a consistent
  track's own detections, and early velocity estimates (from a few detections with 5 cm of
  noise) can be far off; a track started from such a detection would take the person's
  next detections and confirm, and the target would change ids. Two people's centres are
  not that close, so the detection is dropped and the track coasts into it instead. In
  simulation (3 s, 0.05 m noise, 400 runs) 0.4 m cut the runs that ended with a duplicate
  or a new id from 16 to 0 for a standing person and from 21 to 0 for a walking one.
* ``hits`` counts the detections of a track, the first included; a track is confirmed at
  ``confirm_hits`` and stays confirmed until deleted.
* After prediction, and before association so that a stale track cannot take a detection,
  a track is deleted when it has not been updated for more than ``max_age_s``
  (``tentative_max_age_s`` while tentative: clutter goes sooner) or when the standard
  deviation of its position along the worst axis exceeds ``max_position_sigma_m`` (after a
  long gap between cycles). A detection whose own covariance exceeds that bound starts no
  track.
* At most ``max_tracks`` tracks exist. When full, unassigned detections start no track and
  are counted in :attr:`PersonTracker.dropped_detection_count`. Evicting a tentative track
  instead would let a flood of clutter churn through ids and could evict a person who was
  missed for one frame; clutter tracks expire after ``tentative_max_age_s`` anyway. Tracks
  keep no history, so nothing else grows.

Target
------
The target is chosen for stability, since switching people is the worst thing a follower
can do: it stays on its track while that track lives, even if someone else comes closer.
When there is none (at start, or after its track is deleted), it becomes the confirmed track
nearest to the robot position within ``max_target_distance_m`` (ties: the lower id); the
robot position is an argument of :meth:`PersonTracker.update` and is remembered. An operator
can prefer a track (:meth:`PersonTracker.set_preferred_target`): once that track is
confirmed it is the target, until it is deleted.

The height ``z`` of a detection, when given, is smoothed exponentially for display only; it
is not part of the filter state.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from filterpy.common import Q_continuous_white_noise
from filterpy.kalman import KalmanFilter
from numpy.typing import ArrayLike
from scipy.optimize import linear_sum_assignment

from edge_offload.value_checks import check_int, check_positive

STATE_DIM = 4
MEASUREMENT_DIM = 2
# The detection measures the position part of [x, y, vx, vy].
_H = np.hstack([np.eye(MEASUREMENT_DIM), np.zeros((MEASUREMENT_DIM, 2))])
# Relative tolerance of the symmetry check on detection covariances: they come from float32
# messages, whose rounding must not be taken for asymmetry.
_SYMMETRY_RTOL = 1e-6


@dataclass(frozen=True)
class TrackerConfig:
    """Tuning of :class:`PersonTracker` (units and meaning in the module docstring)."""

    # White-noise acceleration density (m/s²·√s). People stop and turn, and noise makes the
    # velocity jumpy: in simulation (10 Hz, 0.05 m noise, 1.4 m/s walk, 400 runs) the
    # target's track survived braking at 2 / 3 m/s² in 96 / 91 % of runs at 0.5, 99 / 98 %
    # at 0.7 and 99.8 / 99.5 % at 1.0, whose velocity noise (0.25 m/s mean error, against
    # 0.20 at 0.7) lost more tracks of people passing each other. A steady walker is better
    # fitted by 0.05.
    accel_sigma: float = 0.7
    # Velocity standard deviation of a new track (m/s, per axis): walking pace.
    initial_velocity_sigma: float = 1.0
    # Probability of the chi-square gate on the squared Mahalanobis distance (2 dof).
    gate_probability: float = 0.99
    # Association cost: True, the negative log-likelihood of the innovation up to a constant,
    # yᵀS⁻¹y + ln det S; False, the squared Mahalanobis distance yᵀS⁻¹y alone (see the
    # module docstring). The gate is on yᵀS⁻¹y either way.
    likelihood_cost: bool = True
    # Detections (the first included) that confirm a track.
    confirm_hits: int = 3
    # Time without a detection after which a confirmed / tentative track is deleted (s).
    max_age_s: float = 1.0
    tentative_max_age_s: float = 0.5
    # Largest position standard deviation (m, worst axis) of a living track.
    max_position_sigma_m: float = 1.0
    # An unassigned detection nearer than this to a track starts no track (m; 0: off).
    min_separation_m: float = 0.4
    # Bound on the number of tracks, tentative included.
    max_tracks: int = 20
    # Largest robot-to-person distance at which a new target is picked (m; inf: any).
    max_target_distance_m: float = 3.0
    # Weight of a new height sample in the exponential smoothing of z, in (0, 1].
    height_smoothing: float = 0.2

    def __post_init__(self) -> None:
        check_positive('accel_sigma', self.accel_sigma)
        check_positive('initial_velocity_sigma', self.initial_velocity_sigma)
        check_positive('max_age_s', self.max_age_s)
        check_positive('tentative_max_age_s', self.tentative_max_age_s)
        check_positive('max_position_sigma_m', self.max_position_sigma_m)
        check_positive('max_target_distance_m', self.max_target_distance_m, allow_inf=True)
        check_positive('min_separation_m', self.min_separation_m, allow_zero=True)
        check_int('confirm_hits', self.confirm_hits)
        if not isinstance(self.likelihood_cost, bool):
            raise ValueError(f'likelihood_cost must be a bool, got {self.likelihood_cost!r}')
        check_int('max_tracks', self.max_tracks)
        for name in ('gate_probability', 'height_smoothing'):
            value = getattr(self, name)
            check_positive(name, value)
            if value > 1.0 or (name == 'gate_probability' and value == 1.0):
                interval = '(0, 1)' if name == 'gate_probability' else '(0, 1]'
                raise ValueError(f'{name} must be in {interval}, got {value!r}')

    @property
    def gate(self) -> float:
        """The gate on the squared Mahalanobis distance: the 2-dof chi-square quantile."""
        # The 2-dof chi-square CDF is 1 - exp(-x/2); its inverse needs no scipy.stats.
        return -2.0 * math.log1p(-self.gate_probability)


# eq=False: ndarray fields make the generated __eq__ ambiguous; identity it is.
@dataclass(frozen=True, eq=False)
class Detection:
    """One person seen in one cycle: ground-plane position (m, odometry frame).

    ``covariance`` is the 2×2 covariance of ``position`` (m²), symmetric positive definite;
    ``z`` is an optional height (m), only smoothed for display. Checked on construction:
    ``ValueError`` names what is wrong. The arrays are stored as read-only copies.
    """

    position: np.ndarray
    covariance: np.ndarray
    z: float | None = None

    def __post_init__(self) -> None:
        position = np.array(self.position, dtype=np.float64)
        covariance = np.array(self.covariance, dtype=np.float64)
        if position.shape != (MEASUREMENT_DIM,):
            raise ValueError(f'detection position must have 2 values, got {position.shape}')
        if not np.all(np.isfinite(position)):
            raise ValueError(f'detection position must be finite, got {position.tolist()}')
        if covariance.shape != (MEASUREMENT_DIM, MEASUREMENT_DIM):
            raise ValueError(f'detection covariance must be 2x2, got {covariance.shape}')
        if not np.all(np.isfinite(covariance)):
            raise ValueError(f'detection covariance must be finite, got {covariance.tolist()}')
        asymmetry = abs(covariance[0, 1] - covariance[1, 0])
        if asymmetry > _SYMMETRY_RTOL * np.max(np.abs(covariance)):
            raise ValueError(f'detection covariance must be symmetric, got {covariance.tolist()}')
        covariance = 0.5 * (covariance + covariance.T)
        try:
            np.linalg.cholesky(covariance)
        except np.linalg.LinAlgError:
            raise ValueError(
                f'detection covariance must be positive definite, got {covariance.tolist()}'
            ) from None
        if self.z is not None:
            if isinstance(self.z, bool) or not isinstance(self.z, numbers.Real):
                raise ValueError(f'detection z must be a number or None, got {self.z!r}')
            if not math.isfinite(self.z):
                raise ValueError(f'detection z must be finite, got {self.z!r}')
            object.__setattr__(self, 'z', float(self.z))
        position.setflags(write=False)
        covariance.setflags(write=False)
        object.__setattr__(self, 'position', position)
        object.__setattr__(self, 'covariance', covariance)


# eq=False: ndarray fields make the generated __eq__ ambiguous; identity it is.
@dataclass(frozen=True, eq=False)
class Track:
    """A read-only view of one track at the tracker's current time (copies, not live).

    ``time_since_update_s`` is the time since the track's last detection; ``z`` is the
    smoothed height (``None`` if no detection of it had one).
    """

    track_id: int
    position: np.ndarray
    velocity: np.ndarray
    position_covariance: np.ndarray
    velocity_covariance: np.ndarray
    confirmed: bool
    hits: int
    time_since_update_s: float
    z: float | None


class _TrackState:
    """The mutable state of one track: its filter and its bookkeeping."""

    __slots__ = ('track_id', 'kf', 'hits', 'confirmed', 'last_update_s', 'z')

    def __init__(
        self, track_id: int, detection: Detection, stamp: float, config: TrackerConfig
    ) -> None:
        self.track_id = track_id
        # filterpy holds the mean and covariance and does the linear predict and (Joseph
        # form) update with per-call F, Q and R; H never changes.
        self.kf = KalmanFilter(dim_x=STATE_DIM, dim_z=MEASUREMENT_DIM)
        self.kf.H = _H.copy()
        self.kf.x = np.array([[detection.position[0]], [detection.position[1]], [0.0], [0.0]])
        covariance = np.zeros((STATE_DIM, STATE_DIM))
        covariance[:2, :2] = detection.covariance
        covariance[2:, 2:] = np.eye(2) * config.initial_velocity_sigma**2
        self.kf.P = covariance
        self.hits = 1
        self.confirmed = self.hits >= config.confirm_hits
        self.last_update_s = stamp
        self.z = detection.z

    @property
    def position(self) -> np.ndarray:
        return self.kf.x[:2, 0]

    @property
    def position_covariance(self) -> np.ndarray:
        return self.kf.P[:2, :2]

    def position_sigma(self) -> float:
        """Return the standard deviation of the position along its worst axis (m)."""
        return math.sqrt(max(np.linalg.eigvalsh(self.position_covariance)))

    def update(self, detection: Detection, stamp: float, config: TrackerConfig) -> None:
        self.kf.update(detection.position, R=detection.covariance)
        self.hits += 1
        self.confirmed = self.confirmed or self.hits >= config.confirm_hits
        self.last_update_s = stamp
        if detection.z is not None:
            if self.z is None:
                self.z = detection.z
            else:
                self.z += config.height_smoothing * (detection.z - self.z)

    def view(self, now: float) -> Track:
        x, p = self.kf.x[:, 0], self.kf.P
        return Track(
            track_id=self.track_id,
            position=x[:2].copy(),
            velocity=x[2:].copy(),
            position_covariance=p[:2, :2].copy(),
            velocity_covariance=p[2:, 2:].copy(),
            confirmed=self.confirmed,
            hits=self.hits,
            time_since_update_s=now - self.last_update_s,
            z=self.z,
        )


class PersonTracker:
    """Constant-velocity Kalman tracks of people with gated optimal association.

    Call :meth:`update` once per detection cycle with non-decreasing timestamps; read
    :attr:`tracks`, :attr:`target_id` and :attr:`target`. See the module docstring.
    """

    def __init__(self, config: TrackerConfig | None = None) -> None:
        """Start with no tracks; ``config`` defaults to :class:`TrackerConfig`'s defaults."""
        self.config = TrackerConfig() if config is None else config
        self._gate = self.config.gate
        self._tracks: dict[int, _TrackState] = {}  # insertion order is id order
        self._next_id = 1
        self._time: float | None = None
        self._robot_position: np.ndarray | None = None
        self._target_id: int | None = None
        self._preferred_id: int | None = None
        self.dropped_detection_count = 0

    # -- accessors --------------------------------------------------------------------------

    @property
    def time(self) -> float | None:
        """The time of the last :meth:`update` (s), ``None`` before the first."""
        return self._time

    @property
    def tracks(self) -> list[Track]:
        """All living tracks, tentative included, in increasing id order."""
        now = self._time if self._time is not None else 0.0
        return [track.view(now) for track in self._tracks.values()]

    @property
    def confirmed_tracks(self) -> list[Track]:
        """The confirmed tracks, in increasing id order."""
        return [track for track in self.tracks if track.confirmed]

    def track(self, track_id: int) -> Track | None:
        """Return the track with this id, or ``None`` if there is none (any more)."""
        state = self._tracks.get(track_id)
        return None if state is None else state.view(self._time or 0.0)

    @property
    def target_id(self) -> int | None:
        """The id of the track to follow, or ``None``."""
        return self._target_id

    @property
    def target(self) -> Track | None:
        """The track to follow, or ``None``."""
        return None if self._target_id is None else self.track(self._target_id)

    @property
    def preferred_target_id(self) -> int | None:
        """The track preferred by :meth:`set_preferred_target`, while it lives."""
        return self._preferred_id

    # -- commands ---------------------------------------------------------------------------

    def set_preferred_target(self, track_id: int | None) -> None:
        """Prefer this track as the target (``None``: no preference; the target is kept).

        The preference takes effect at once if the track is confirmed, else when it is; it
        ends when the track is deleted. An id that names no living track is a
        ``ValueError``.
        """
        if track_id is not None and track_id not in self._tracks:
            raise ValueError(f'no living track has id {track_id!r}')
        self._preferred_id = track_id
        self._select_target()

    def update(
        self,
        stamp: float,
        detections: Sequence[Detection] = (),
        robot_position: ArrayLike | None = None,
    ) -> list[Track]:
        """Advance to ``stamp`` (s), fuse this cycle's detections and return :attr:`tracks`.

        ``robot_position`` (x, y in the odometry frame, m) is remembered for later cycles;
        it is only used to pick a new target. With no detections the tracks are only
        predicted and aged. Raises ``ValueError`` for a non-finite ``stamp``, a time going
        backwards or a bad ``robot_position`` and ``TypeError`` for a detection that is not a
        :class:`Detection` (which checks itself), before changing anything.
        """
        detections = list(detections)
        stamp = float(stamp)
        if not math.isfinite(stamp):
            raise ValueError(f'stamp must be finite, got {stamp!r}')
        if self._time is not None and stamp < self._time:
            raise ValueError(f'time went backwards: {stamp!r} s after {self._time!r} s')
        for detection in detections:
            if not isinstance(detection, Detection):
                raise TypeError(f'detections must be Detection, got {type(detection).__name__}')
        if robot_position is not None:
            robot = np.array(robot_position, dtype=np.float64)
            if robot.shape != (2,) or not np.all(np.isfinite(robot)):
                raise ValueError(f'robot_position must be 2 finite values, got {robot_position!r}')
            self._robot_position = robot

        if self._time is not None and stamp > self._time:
            self._predict(stamp - self._time)
        self._time = stamp
        self._prune(stamp)
        unassigned = self._associate_and_update(detections, stamp)
        self._start_tracks(unassigned, stamp)
        self._select_target()
        return self.tracks

    # -- steps ------------------------------------------------------------------------------

    def _predict(self, dt: float) -> None:
        transition = np.eye(STATE_DIM)
        transition[0, 2] = transition[1, 3] = dt
        # order_by_dim=False orders Q as [x, y, vx, vy], the state's order.
        noise = Q_continuous_white_noise(
            dim=2,
            dt=dt,
            spectral_density=self.config.accel_sigma**2,
            block_size=2,
            order_by_dim=False,
        )
        for track in self._tracks.values():
            track.kf.predict(F=transition, Q=noise)

    def _prune(self, now: float) -> None:
        config = self.config
        for track_id in list(self._tracks):
            track = self._tracks[track_id]
            max_age = config.max_age_s if track.confirmed else config.tentative_max_age_s
            if (
                now - track.last_update_s > max_age
                or track.position_sigma() > config.max_position_sigma_m
            ):
                del self._tracks[track_id]

    def _associate_and_update(
        self, detections: Sequence[Detection], stamp: float
    ) -> list[Detection]:
        """Update the tracks with their assigned detections; return the unassigned ones."""
        tracks = list(self._tracks.values())
        if not tracks or not detections:
            return list(detections)
        positions = np.array([detection.position for detection in detections])
        covariances = np.array([detection.covariance for detection in detections])
        distance_sq = np.empty((len(tracks), len(detections)))
        log_det = np.empty((len(tracks), len(detections)))
        for row, track in enumerate(tracks):
            innovation = positions - track.position  # (D, 2)
            innovation_cov = track.position_covariance + covariances  # S = H P Hᵀ + R, (D, 2, 2)
            solved = np.linalg.solve(innovation_cov, innovation[:, :, None])[:, :, 0]
            distance_sq[row] = np.einsum('ij,ij->i', innovation, solved)
            log_det[row] = np.linalg.slogdet(innovation_cov)[1]
        gated = distance_sq <= self._gate
        cost = distance_sq + log_det if self.config.likelihood_cost else distance_sq
        if not np.any(gated):
            return list(detections)
        # Gated-in costs shifted to [0, spread]; gated-out pairs cost more than any sum of
        # gated-in ones, so the solver first maximizes the number of gated-in pairs and the
        # gated-out pairs it still returns are dropped below.
        cost = cost - np.min(cost[gated])
        spread = float(np.max(cost[gated]))
        cost[~gated] = (spread + 1.0) * (min(cost.shape) + 1)
        rows, columns = linear_sum_assignment(cost)
        assigned = set()
        for row, column in zip(rows.tolist(), columns.tolist(), strict=True):
            if gated[row, column]:
                tracks[row].update(detections[column], stamp, self.config)
                assigned.add(column)
        return [detection for index, detection in enumerate(detections) if index not in assigned]

    def _start_tracks(self, detections: Sequence[Detection], stamp: float) -> None:
        for detection in detections:
            if self._near_a_track(detection):
                continue
            if len(self._tracks) >= self.config.max_tracks:
                self.dropped_detection_count += 1
                continue
            track = _TrackState(self._next_id, detection, stamp, self.config)
            if track.position_sigma() > self.config.max_position_sigma_m:
                continue  # too uncertain to track: it would be deleted next cycle
            self._tracks[track.track_id] = track
            self._next_id += 1

    def _near_a_track(self, detection: Detection) -> bool:
        separation = self.config.min_separation_m
        return any(
            np.linalg.norm(track.position - detection.position) < separation
            for track in self._tracks.values()
        )

    def _select_target(self) -> None:
        if self._preferred_id is not None:
            preferred = self._tracks.get(self._preferred_id)
            if preferred is None:
                self._preferred_id = None
            elif preferred.confirmed:
                self._target_id = self._preferred_id
                return
        if self._target_id in self._tracks:
            return  # a target is confirmed when chosen and stays so: keep it
        self._target_id = None
        if self._robot_position is None:
            return
        best: tuple[float, int] | None = None
        for track in self._tracks.values():
            if not track.confirmed:
                continue
            distance = float(np.linalg.norm(track.position - self._robot_position))
            if distance <= self.config.max_target_distance_m and (
                best is None or (distance, track.track_id) < best
            ):
                best = (distance, track.track_id)
        if best is not None:
            self._target_id = best[1]
