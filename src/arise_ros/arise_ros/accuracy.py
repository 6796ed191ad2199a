# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""ARISE's accuracy estimator (dissertation §3.4.3) and the SLA arithmetic built on it.

The accuracy drop of a locally tracked result grows linearly with the tracking stride (the
frames between the result's source frame and the frame it is used on), with a slope, the
*drop rate*, that changes slowly with the scene. A client measures the slope whenever it
holds two results for the same frame (Fig. 3.9): the one tracked from the previous offload
and the one the server returns for this frame. The drop between them divided by the stride
is the rate. Everything else is arithmetic on that rate.

An SLA is an accuracy drop relative to the *reference setup*: the same client with a
dedicated server, batch size 1 and no queueing, offloading every ``reference_interval``
frames.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass


class DropRateEstimator:
    """Online estimate of a client's accuracy drop rate (drop per frame of stride).

    ``smoothing`` is the weight of the newest measurement. 1.0 (the default) keeps only the
    latest, which is what the dissertation does (the rate of the last server-returned frame
    stands for the current one); lower values trade reaction time for less noise.
    """

    def __init__(self, smoothing: float = 1.0, initial_rate: float | None = None) -> None:
        if not 0.0 < smoothing <= 1.0:
            raise ValueError(f'smoothing must be in (0, 1], got {smoothing}')
        if initial_rate is not None and not (math.isfinite(initial_rate) and initial_rate >= 0):
            raise ValueError(f'initial_rate must be a finite rate >= 0, got {initial_rate}')
        self._smoothing = smoothing
        self._rate = initial_rate
        self._samples = 0

    @property
    def rate(self) -> float | None:
        """Return the current estimate, or None before the first measurement."""
        return self._rate

    @property
    def samples(self) -> int:
        return self._samples

    def observe(self, drop: float, stride: int) -> float:
        """Record the drop between the tracked and the offloaded result of one frame.

        ``drop`` is the task metric of the tracked result measured against the offloaded one
        (AbsRel of the warped depth map against the server's map of the same frame, for
        depth); ``stride`` is how many frames the tracked result was carried. Returns the
        updated rate.
        """
        if stride < 1:
            raise ValueError(f'a tracking stride is at least 1 frame, got {stride}')
        if not math.isfinite(drop) or drop < 0.0:
            raise ValueError(f'an accuracy drop is a finite value >= 0, got {drop}')
        return self._update(drop / stride)

    def observe_two(
        self, near_drop: float, near_stride: int, far_drop: float, far_stride: int
    ) -> float:
        """Record the slope between two tracked results of the same frame.

        The robot holds the frame's server result and two tracked ones, carried
        ``near_stride`` and ``far_stride`` frames (from its last two results). The slope
        between them leaves out what a single pair would count as drop although it does
        not grow with the stride: the server's results of two frames differ even where the
        tracker is exact. Returns the updated rate.
        """
        if not 1 <= near_stride < far_stride:
            raise ValueError(
                f'strides must satisfy 1 <= near < far, got {near_stride}, {far_stride}'
            )
        for drop in (near_drop, far_drop):
            if not math.isfinite(drop) or drop < 0.0:
                raise ValueError(f'an accuracy drop is a finite value >= 0, got {drop}')
        return self._update(max(0.0, (far_drop - near_drop) / (far_stride - near_stride)))

    def _update(self, measured: float) -> float:
        if self._rate is None:
            self._rate = measured
        else:
            self._rate += self._smoothing * (measured - self._rate)
        self._samples += 1
        return self._rate


class StrideRegressionEstimator:
    """Drop rate as the slope of a line with an intercept through recent (stride, drop) pairs.

    Why not one pair: the drop a robot can measure online is the task metric of a tracked
    map against the server's map of the same frame. Two server maps of one scene differ even
    where the tracker is exact (the net's errors change from frame to frame), so that drop
    is ``floor + rate × stride`` with a floor of about 0.01-0.02 AbsRel already at stride 1;
    dividing one drop by its stride counts the floor as rate and overestimates the growth
    at the strides a schedule uses. Against the reference setup (which tracks too) the floor
    cancels: only the slope enters the SLA. With tracked maps from several earlier results
    (strides ``oi``, ``2·oi``, ...) for the frame of a new result, a least-squares line
    separates the two. Keeping the last ``history`` pairs smooths the noise of single maps
    and still follows a scene whose rate changes (dissertation §3.4.3: temporal locality).

    Until the pairs span two strides at least ``min_spread`` apart the slope is not
    identifiable, and the estimate is the line through the origin (the dissertation's
    one-pair rate when there is one pair): an overestimate, so the first schedules are safe.
    A fitted intercept below 0 (no floor; noise) is refitted through the origin, and a
    slope below ``min_fraction`` of the through-origin rate is lifted to it, so that one
    noisy window cannot report a near-zero rate (and the longest interval) for a scene
    whose maps clearly drift apart.

    Limits (measured with ``benchmarks/arise_estimator_error.py``): the slope is that of the
    drop *against the server's maps*. Against ground-truth depth the drop of a tracked map
    grows differently (almost flat for the first few frames, then steeper), and the ratio of
    the two slopes varies 2-4x between scenes, so no rate from server maps alone tracks the
    ground-truth drop closer than that spread.
    """

    def __init__(
        self,
        history: int = 12,
        min_spread: int = 1,
        min_fraction: float = 0.0,
        initial_rate: float | None = None,
    ) -> None:
        if isinstance(history, bool) or not isinstance(history, int) or history < 2:
            raise ValueError(f'history must be an int >= 2 (pairs), got {history!r}')
        if isinstance(min_spread, bool) or not isinstance(min_spread, int) or min_spread < 1:
            raise ValueError(f'min_spread must be an int >= 1 (frames), got {min_spread!r}')
        if not (math.isfinite(min_fraction) and 0.0 <= min_fraction <= 1.0):
            raise ValueError(f'min_fraction must be in [0, 1], got {min_fraction}')
        if initial_rate is not None and not (math.isfinite(initial_rate) and initial_rate >= 0):
            raise ValueError(f'initial_rate must be a finite rate >= 0, got {initial_rate}')
        self._pairs: deque[tuple[int, float]] = deque(maxlen=history)
        self._min_spread = min_spread
        self._min_fraction = min_fraction
        self._rate = initial_rate
        self._intercept = 0.0
        self._samples = 0

    @property
    def rate(self) -> float | None:
        """Return the current slope (drop per frame of stride), or None before any pair."""
        return self._rate

    @property
    def intercept(self) -> float:
        """Return the fitted floor: the drop at stride 0+ that does not grow with stride."""
        return self._intercept

    @property
    def samples(self) -> int:
        """Return how many pairs were observed in all (not only those still held)."""
        return self._samples

    @property
    def pairs(self) -> tuple[tuple[int, float], ...]:
        """Return the (stride, drop) pairs the fit uses, oldest first (at most ``history``)."""
        return tuple(self._pairs)

    def observe(self, drop: float, stride: int) -> float:
        """Record one (stride, drop) pair and refit; returns the updated rate.

        ``drop`` is the task metric of a tracked map against the server's map of the same
        frame, ``stride`` the frames the tracked map was carried.
        """
        self._check(drop, stride)
        self._pairs.append((stride, float(drop)))
        self._samples += 1
        return self._fit()

    def observe_pairs(self, pairs: Iterable[tuple[float, int]]) -> float:
        """Record several (drop, stride) pairs of one new result at once, then refit.

        All pairs are checked before any is kept, so a bad one leaves the estimate as it was.
        """
        pairs = [(drop, stride) for drop, stride in pairs]
        if not pairs:
            raise ValueError('observe_pairs needs at least one (drop, stride) pair')
        for drop, stride in pairs:
            self._check(drop, stride)
        for drop, stride in pairs:
            self._pairs.append((stride, float(drop)))
        self._samples += len(pairs)
        return self._fit()

    def observe_two(
        self, near_drop: float, near_stride: int, far_drop: float, far_stride: int
    ) -> float:
        """Record the two tracked maps of one frame (as :meth:`DropRateEstimator.observe_two`)."""
        if not 1 <= near_stride < far_stride:
            raise ValueError(
                f'strides must satisfy 1 <= near < far, got {near_stride}, {far_stride}'
            )
        return self.observe_pairs([(near_drop, near_stride), (far_drop, far_stride)])

    @staticmethod
    def _check(drop: float, stride: int) -> None:
        if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
            raise ValueError(f'a tracking stride is an int >= 1 frame, got {stride!r}')
        if not math.isfinite(drop) or drop < 0.0:
            raise ValueError(f'an accuracy drop is a finite value >= 0, got {drop}')

    def _fit(self) -> float:
        strides = [float(s) for s, _ in self._pairs]
        drops = [d for _, d in self._pairs]
        # Through the origin (least squares; one pair gives drop / stride).
        origin = sum(s * d for s, d in zip(strides, drops, strict=True)) / sum(
            s * s for s in strides
        )
        slope, intercept = origin, 0.0
        if max(strides) - min(strides) >= self._min_spread:
            fitted = statistics.linear_regression(strides, drops)
            if fitted.intercept >= 0.0:
                slope, intercept = fitted.slope, fitted.intercept
        slope = max(slope, self._min_fraction * origin, 0.0)
        self._rate = slope
        self._intercept = intercept
        return slope


class ProbedDropRateEstimator:
    """Drop rate above the reference setup, from tracked maps and occasional probe offloads.

    What the SLA needs is the growth of the drop from the reference's stride (``d(s) -
    d(ref)``), not the drop itself: two server maps of one scene differ by 0.01-0.02 AbsRel
    even at stride 1, and the dissertation's one-pair rate (``drop / stride``) counts that
    floor as growth. Slopes between the long strides a robot sees for free (its last
    results tracked to a new one: ``oi``, ``2·oi``, ...) miss it the other way: the drop
    curve flattens at long strides, a lower rate lengthens the interval, and the estimate
    runs away to the longest interval (``benchmarks/arise_estimator_error.py`` measured
    both). This estimator measures the reference's own drop instead.

    * Every ``probe_every``-th offload the robot also offloads the frame
      ``reference_stride`` frames later (a *probe*; :meth:`wants_probe`). Its tracked map
      against its server map is the drop at the reference stride, smoothed over probes
      (``floor_smoothing``). A pair at that stride that comes for free (an interval equal
      to it) counts the same way.
    * Each new result gives the chord ``(d(s) - d(ref)) / (s - ref)`` from the pair with
      the longest stride up to ``longest_stride`` (where the curve is still near linear;
      the shortest when none is). Until a reference drop is known, or when the stride is
      under ``ref + 2`` (a chord over one frame is mostly noise), the one-pair rate
      stands in: an overestimate, so early schedules are safe.
    * The chords are smoothed with a time constant of ``time_constant`` frames (the
      weight of a new chord is ``1 - exp(-frames since the last result / time_constant)``),
      not a fixed weight per result: the estimate's noise has to be damped because a low
      estimate buys a long interval, so noise alone makes the realised drop exceed the
      estimate; a per-result weight slow enough for short intervals would hold a long
      interval's robot on its first, one-pair rate for several seconds.

    Limits: a probe is one extra offload per ``probe_every`` (12 % at 8), which the
    scheduler does not plan yet; and the estimate follows a new scene over about
    ``time_constant`` frames (2 s at 60 fps by default).
    """

    def __init__(
        self,
        reference_stride: int = 2,
        time_constant: float = 120.0,
        floor_smoothing: float = 0.3,
        longest_stride: int = 12,
        probe_every: int = 8,
    ) -> None:
        for name, value, least in (
            ('reference_stride', reference_stride, 1),
            ('longest_stride', longest_stride, reference_stride + 2),
            ('probe_every', probe_every, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f'{name} must be an int >= {least}, got {value!r}')
        if not (math.isfinite(time_constant) and time_constant > 0.0):
            raise ValueError(f'time_constant must be a number of frames > 0, got {time_constant}')
        if not 0.0 < floor_smoothing <= 1.0:
            raise ValueError(f'floor_smoothing must be in (0, 1], got {floor_smoothing}')
        self.reference_stride = reference_stride
        self._time_constant = time_constant
        self._floor_smoothing = floor_smoothing
        self._longest_stride = longest_stride
        self._probe_every = probe_every
        self._rate: float | None = None
        self._reference_drop: float | None = None
        self._samples = 0

    @property
    def rate(self) -> float | None:
        """Return the drop per frame of stride above the reference, or None before a result."""
        return self._rate

    @property
    def longest_stride(self) -> int:
        """Return the longest stride a chord is taken to (longer pairs are not needed)."""
        return self._longest_stride

    @property
    def reference_drop(self) -> float | None:
        """Return the smoothed drop at the reference stride, or None before a probe."""
        return self._reference_drop

    @property
    def samples(self) -> int:
        """Return how many results (probes included) were observed."""
        return self._samples

    def wants_probe(self, offloads: int, interval: int) -> bool:
        """Return whether the ``offloads``-th offload should bring a probe with it.

        None is needed while the interval is the reference stride or shorter: the pairs
        at that stride then come for free.
        """
        if interval <= self.reference_stride:
            return False
        return self._reference_drop is None or offloads % self._probe_every == 0

    def observe_probe(self, drop: float) -> float | None:
        """Record a probe: the drop of a map tracked over the reference stride."""
        _check_drop(drop)
        self._note_reference(drop)
        self._samples += 1
        return self._rate

    def observe_result(self, pairs: Iterable[tuple[float, int]]) -> float:
        """Record a new result's (drop, stride) pairs, one per earlier result tracked to it.

        Returns the updated rate.
        """
        pairs = [(float(drop), stride) for drop, stride in pairs]
        if not pairs:
            raise ValueError('observe_result needs at least one (drop, stride) pair')
        for drop, stride in pairs:
            _check_drop(drop)
            if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
                raise ValueError(f'a tracking stride is an int >= 1 frame, got {stride!r}')
        for drop, stride in pairs:
            if stride == self.reference_stride:
                self._note_reference(drop)
        within = [pair for pair in pairs if pair[1] <= self._longest_stride]
        drop, stride = (
            max(within, key=lambda pair: pair[1])
            if within
            else min(pairs, key=lambda pair: pair[1])
        )
        if self._reference_drop is None or stride < self.reference_stride + 2:
            measured = drop / stride
        else:
            measured = max(0.0, drop - self._reference_drop) / (stride - self.reference_stride)
        if self._rate is None:
            self._rate = measured
        else:
            # The newest earlier result's stride is the time since the last result.
            since_last = min(pair[1] for pair in pairs)
            weight = 1.0 - math.exp(-since_last / self._time_constant)
            self._rate += weight * (measured - self._rate)
        self._samples += 1
        return self._rate

    def _note_reference(self, drop: float) -> None:
        if self._reference_drop is None:
            self._reference_drop = drop
        else:
            self._reference_drop += self._floor_smoothing * (drop - self._reference_drop)


def _check_drop(drop: float) -> None:
    if not math.isfinite(drop) or drop < 0.0:
        raise ValueError(f'an accuracy drop is a finite value >= 0, got {drop}')


def mean_stride(e2e_frames: int, interval: int) -> float:
    """Return the mean tracking stride of a regular schedule.

    Offloading every ``interval`` frames with results back after ``e2e_frames``, the frames
    that use one result have strides ``e2e .. e2e + interval - 1``.
    """
    return e2e_frames + (interval - 1) / 2.0


@dataclass(frozen=True)
class Reference:
    """The reference setup an SLA is measured against, for one client."""

    e2e_frames: int
    interval: int = 1

    def drop(self, rate: float) -> float:
        return rate * mean_stride(self.e2e_frames, self.interval)


def frames_for(seconds: float, fps: float) -> int:
    """Return the whole frames a result that takes ``seconds`` is late by (at least 1)."""
    # A result that lands on a frame boundary is usable on that frame: round first so that
    # 0.1 s at 30 fps is 3 frames, not 4 from 3.0000000000000004.
    return max(1, math.ceil(round(seconds * fps, 9)))


def regular_schedule_drop(
    rate: float, e2e_frames: int, interval: int, reference: Reference
) -> float:
    """Return the SLA drop of offloading every ``interval`` frames with ``e2e_frames`` latency.

    The left side of the dissertation's constraint:
    ``(1/oi) Σ_{s=e2e}^{e2e+oi-1} dacc_s - dacc_ref`` with ``dacc_s = rate · s``.
    """
    return rate * mean_stride(e2e_frames, interval) - reference.drop(rate)
