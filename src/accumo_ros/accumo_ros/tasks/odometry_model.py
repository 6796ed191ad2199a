# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The odometry task's accuracy model: a 95th-percentile bound on the drop from rotation.

AccuMO (spec §2.5, Fig. 2.11) raises the odometry stride from 4 to 8 for one 32-frame
window, the rest of the sequence staying at 4, and measures the accuracy drop: the KITTI
t_err recomputed over the segments that contain the window (the frame-level proxy), minus
the same with the window at stride 4. The drop does not follow the window's angular
velocity on a line (it also depends on the other frames of those segments), but the
angular velocity bounds it from above; the model is therefore the 95th-percentile
regression of the drop on the angular velocity, fitted offline, and at run time the
angular velocity of the last window (from the IMU-only filter) maps through it to a drop
per frame of stride: ``r = max(0, a + b·ω) / (8 - 4)``.

What the model did not measure it does not claim: strides up to ``base_stride`` count as
free (``AccuracyEstimate.free_stride`` in the scheduler). The base stride is where the fused
odometry's t_err starts to grow with the stride, measured on the calibration set
(``benchmarks/accumo_odometry_strides.py``, :func:`measured_free_stride`): with the robust
filter, VO every 42 frames is as good as every 15 at 14 frames' latency, and every 32 as good
as every 5 at 4 frames, so the scheduler must not pay depth offloads for shorter strides.

The fit is a linear programme (Koenker & Bassett 1978; the same formulation as
scikit-learn's ``QuantileRegressor``), solved with ``scipy.optimize.linprog`` (HiGHS).
The committed coefficients are made by :mod:`accumo_ros.tools.odometry_eval` on the train split
of the default data set; the file records the command.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import linprog

from accumo_ros.geometry import rotation_angles

MODEL_FORMAT = 'accumo_odometry_accuracy/1'
_WEIGHTS = Path(__file__).resolve().parents[1] / 'weights'
DEFAULT_MODEL_PATH = _WEIGHTS / 'odometry_accuracy.yaml'
# One model per link: measured at the dissertation's 4-frame latency and at the 14 frames of a
# 16 Mbit/s link (see OdometryModelSet).
PACKAGED_MODEL_PATHS = (DEFAULT_MODEL_PATH, _WEIGHTS / 'odometry_accuracy_l14.yaml')


def quantile_regression(
    features: np.ndarray, targets: np.ndarray, quantile: float = 0.95
) -> tuple[float, float]:
    """Fit ``targets ≈ intercept + slope · features`` at ``quantile``; return both.

    Minimises the pinball loss ``Σ q·u_i + (1 - q)·v_i`` subject to
    ``intercept + slope·x_i + u_i - v_i = y_i`` and ``u, v ≥ 0``: a fraction ``quantile``
    of the points then lies on or below the line.
    """
    x = np.asarray(features, dtype=np.float64).reshape(-1)
    y = np.asarray(targets, dtype=np.float64).reshape(-1)
    if x.shape != y.shape or x.size < 2:
        raise ValueError(f'need two or more (feature, target) pairs, got {x.shape}, {y.shape}')
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError('features and targets must be finite')
    if not 0.0 < quantile < 1.0:
        raise ValueError(f'quantile must be in (0, 1), got {quantile}')
    count = x.size
    # Variables: intercept, slope (free), then u (count) and v (count), both >= 0.
    cost = np.concatenate([[0.0, 0.0], np.full(count, quantile), np.full(count, 1.0 - quantile)])
    equality = np.hstack([np.ones((count, 1)), x[:, None], np.eye(count), -np.eye(count)])
    bounds = [(None, None), (None, None)] + [(0.0, None)] * (2 * count)
    result = linprog(cost, A_eq=equality, b_eq=y, bounds=bounds, method='highs')
    if not result.success:
        raise RuntimeError(f'quantile regression failed: {result.message}')
    return float(result.x[0]), float(result.x[1])


def window_angular_speed(
    rotation_start: np.ndarray, rotation_end: np.ndarray, duration_s: float
) -> float:
    """Mean angular speed (rad/s) between two body-to-world rotations ``duration_s`` apart."""
    if duration_s <= 0.0:
        raise ValueError(f'duration must be positive, got {duration_s}')
    relative = np.asarray(rotation_start).T @ np.asarray(rotation_end)
    return float(rotation_angles(relative)) / duration_s


def measured_free_stride(
    increases: dict[int, float], reference: float, tolerance: float = 0.1
) -> int:
    """Return the largest stride below the first whose t_err increase is measurable.

    ``increases`` maps each stride to the median, over sequences, of its t_err minus the
    shortest stride's on the same sequence (the shortest maps to 0). A stride costs
    measurably when that median is above ``tolerance · reference`` (the shortest stride's
    mean t_err). The median, because one filter upset moves a room's t_err by points in
    either direction, and a handful of rooms cannot average that out. Raises ValueError on
    an empty mapping.
    """
    if not increases:
        raise ValueError('need the t_err increase of at least one stride')
    strides = sorted(increases)
    chosen = strides[0]
    for stride in strides[1:]:
        if increases[stride] > tolerance * reference:
            break
        chosen = stride
    return chosen


@dataclass(frozen=True)
class OdometryAccuracyModel:
    """The fitted bound ``drop ≤ intercept + slope · ω`` and how it was measured.

    ``window_frames`` is the window over which ω is measured (and the stride raised),
    ``base_stride`` and ``raised_stride`` the strides compared, ``latency_frames`` how late
    the VO poses were fused while measuring; the drop is a fraction of t_err (0.01 = one
    percentage point). The dissertation measured at its link's latency (4 frames, strides
    4 and 8). Here each model is measured at its link's latency, from the stride up to which
    the calibration set showed no cost: the packaged ones at 4 frames from stride 32 to 48,
    at 14 frames (a 16 Mbit/s link) from 42 to 56 (``accumo_odometry_eval --fit --latency 14
    --base-stride 42 --raised-stride 56 --window-frames 112``).
    """

    intercept: float
    slope: float
    quantile: float = 0.95
    window_frames: int = 32
    base_stride: int = 4
    raised_stride: int = 8
    fps: float = 60.0
    latency_frames: int = 4
    # The longest odometry stride the model's calibration covered (None: not stated). The
    # scheduler plans no longer stride: past it, the linear cost is an extrapolation.
    stride_limit: int | None = None

    def __post_init__(self) -> None:
        if not (np.isfinite(self.intercept) and np.isfinite(self.slope)):
            raise ValueError('the model coefficients must be finite')
        if self.raised_stride <= self.base_stride or self.base_stride < 1:
            raise ValueError('need 1 <= base_stride < raised_stride')
        if self.window_frames < 1 or self.fps <= 0.0:
            raise ValueError('window_frames and fps must be positive')
        if not 0 <= self.latency_frames <= self.base_stride:
            raise ValueError('need 0 <= latency_frames <= base_stride')
        if self.stride_limit is not None and self.stride_limit < self.raised_stride:
            raise ValueError('stride_limit must be >= raised_stride (the model measured it)')

    @property
    def window_s(self) -> float:
        """The window's duration in seconds."""
        return self.window_frames / self.fps

    def drop_bound(self, angular_speed: float | np.ndarray) -> float | np.ndarray:
        """Return the 95th-percentile drop of raising the stride over one window (>= 0)."""
        return np.maximum(0.0, self.intercept + self.slope * np.asarray(angular_speed))

    def drop_rate(self, angular_speed: float) -> float:
        """Drop per frame of stride beyond ``base_stride`` (the scheduler's ``r_odom``).

        The model measured raising the stride from ``base_stride``; what strides below it
        cost, it did not measure, and the scheduler counts them free
        (``AccuracyEstimate.free_stride``).
        """
        bound = float(self.drop_bound(angular_speed))
        return bound / (self.raised_stride - self.base_stride)

    def save(self, path: Path | str, **provenance: object) -> None:
        """Write the coefficients and ``provenance`` (command, data set, fit figures) as YAML."""
        document = {'format': MODEL_FORMAT, **asdict(self), 'provenance': provenance}
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(yaml.safe_dump(document, sort_keys=False))

    @classmethod
    def load(cls, path: Path | str | None = None) -> OdometryAccuracyModel:
        """Read a model written by :meth:`save` (default: the packaged one)."""
        path = DEFAULT_MODEL_PATH if path is None else Path(path)
        if not path.is_file():
            raise FileNotFoundError(
                f'odometry accuracy model {path} does not exist; fit it with '
                'accumo_odometry_eval --dataset <accumo_generate folder> --fit'
            )
        document = yaml.safe_load(path.read_text())
        if not isinstance(document, dict) or document.get('format') != MODEL_FORMAT:
            raise ValueError(f'{path} is not an AccuMO odometry accuracy model ({MODEL_FORMAT})')
        fields = {key: document[key] for key in cls.__dataclass_fields__ if key in document}
        missing = {'intercept', 'slope'} - set(fields)
        if missing:
            raise ValueError(f'{path} lacks {sorted(missing)}')
        return cls(**fields)


class OdometryModelSet:
    """Odometry accuracy models measured at different latencies; the scheduler uses one.

    What a frame of stride costs depends on the strides in use, and those start at the
    offload latency: at 14 frames (a 16 Mbit/s link) the model measured at 4 frames overstates
    the cost per frame about threefold and the scheduler gives odometry every offload it can.
    So each model is measured at one latency (``odometry_eval --fit --latency``) and
    :meth:`select` picks the one measured nearest the latency in use, nearest on a log scale
    (what matters is the ratio of strides): 4 and 14 frames split at 7.5.
    """

    def __init__(self, models: Sequence[OdometryAccuracyModel]) -> None:
        if not models:
            raise ValueError('need at least one odometry accuracy model')
        latencies = [m.latency_frames for m in models]
        if len(set(latencies)) != len(latencies):
            raise ValueError(f'two models measured at the same latency: {sorted(latencies)}')
        self.models = tuple(sorted(models, key=lambda m: m.latency_frames))

    @classmethod
    def load(cls, paths: Sequence[Path | str] | None = None) -> OdometryModelSet:
        """Read models written by :meth:`OdometryAccuracyModel.save` (default: packaged)."""
        return cls([OdometryAccuracyModel.load(p) for p in (paths or PACKAGED_MODEL_PATHS)])

    @property
    def max_window_frames(self) -> int:
        """The longest window any model measures its angular speed over."""
        return max(m.window_frames for m in self.models)

    def select(self, latency_frames: int) -> OdometryAccuracyModel:
        """Return the model measured nearest ``latency_frames`` (ties: the shorter latency)."""
        target = math.log(max(1, int(latency_frames)))
        return min(self.models, key=lambda m: abs(math.log(max(1, m.latency_frames)) - target))

    def describe(self) -> str:
        """One line per model: how it was measured."""
        return '; '.join(
            f'latency {m.latency_frames}: stride {m.base_stride}->{m.raised_stride} over '
            f'{m.window_frames} frames, q{m.quantile:g}, free up to {m.base_stride}'
            + ('' if m.stride_limit is None else f', strides up to {m.stride_limit}')
            for m in self.models
        )
