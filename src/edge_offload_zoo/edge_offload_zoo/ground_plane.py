# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Where people stand in the image: person height as a linear function of the foot row.

A camera at a fixed height and pitch over a flat floor (a wheeled robot's, a fixed
surveillance camera's) sees a standing person's height in pixels grow linearly with the
image row of their feet: with a small tilt, ``h = (y_foot - y_horizon) * H / camera_height``
for a person H tall. On vtest.avi the hand boxes follow ``h = 0.214 y + 19.9`` within a
median 4 %. A people detector told this line (``GroundPlane``) searches each of its scales
only on the band of rows where people of that scale stand: OpenCV's HOG then took half
its time for the same people (``hog_people``). The robot learns the line from the people
it tracks (``GroundPlaneFit``) and sends it with each request: the edge server's model is
shared by robots whose cameras differ, so the line is the robot's, not the model's.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_TOLERANCE = 0.4


@dataclass(frozen=True)
class GroundPlane:
    """Person height ``slope * y_foot + intercept`` px; people within ``tolerance`` of it.

    ``tolerance`` 0.4 admits people from 1/1.4 to 1.4 times the height the line predicts
    at their feet (children, people bending, a line fitted on few people).
    """

    slope: float
    intercept: float
    tolerance: float = DEFAULT_TOLERANCE

    def __post_init__(self) -> None:
        values = (self.slope, self.intercept, self.tolerance)
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f'ground plane values must be finite, got {values}')
        # Taller further down the image: a camera above the floor looking along it.
        if self.slope <= 0:
            raise ValueError(f'ground plane slope must be > 0 px/px, got {self.slope}')
        if not 0 < self.tolerance <= 4:
            raise ValueError(f'ground plane tolerance must be in (0, 4], got {self.tolerance}')

    def height_at(self, foot_row: float) -> float:
        """Return the height (px) the line predicts for a person standing at ``foot_row``."""
        return self.slope * foot_row + self.intercept

    def foot_rows(self, height: float) -> tuple[float, float]:
        """Return the foot rows (lowest, highest) where a person ``height`` px tall may stand."""
        low = (height / (1 + self.tolerance) - self.intercept) / self.slope
        high = (height * (1 + self.tolerance) - self.intercept) / self.slope
        return low, high

    def as_values(self) -> tuple[float, float, float]:
        """Return (slope, intercept, tolerance): the model input ``ground_plane``."""
        return (self.slope, self.intercept, self.tolerance)

    @classmethod
    def from_values(cls, values: Sequence[float]) -> GroundPlane | None:
        """Return the plane of (slope, intercept, tolerance); None for all zeros (unknown).

        Raises ``ValueError`` for anything else that is not a plane (see the fields).
        """
        if len(values) != 3:
            raise ValueError(
                f'a ground plane is 3 values (slope, intercept, tolerance), got {values}'
            )
        if all(float(v) == 0.0 for v in values):
            return None
        return cls(float(values[0]), float(values[1]), float(values[2]))


UNKNOWN_GROUND_PLANE = (0.0, 0.0, 0.0)


class GroundPlaneFit:
    """Fit the ground line from boxes of people seen standing (robot side, no ROS).

    Keeps the last ``window`` (foot row, height) samples; boxes that touch the top or the
    bottom of the image are left out (a person cut off by the frame is shorter than they
    stand). The fit is a least-squares line refitted without the samples more than
    ``outlier_fraction`` off it (people sitting, occluded legs, a wrong track). It is
    ready (``plane``) once ``min_samples`` samples span ``min_spread`` of the image
    height and the line is a plane (slope > 0); until then the detector scans every row.

    ``for_request`` is what to send with a front-end request: the plane, except on every
    ``full_scan_every``-th request (0: never), which scans every row so that people the
    line does not describe (on stairs, sitting, a line fitted on too few people) are still
    found and can correct it.
    """

    def __init__(
        self,
        *,
        window: int = 300,
        min_samples: int = 30,
        min_spread: float = 0.2,
        outlier_fraction: float = 0.25,
        tolerance: float = DEFAULT_TOLERANCE,
        full_scan_every: int = 4,
    ) -> None:
        if full_scan_every < 0:
            raise ValueError(f'full_scan_every must be >= 0, got {full_scan_every}')
        if window < 2 or not 2 <= min_samples <= window:
            raise ValueError(
                f'need 2 <= min_samples <= window, got min_samples {min_samples}, window {window}'
            )
        if not 0 <= min_spread < 1:
            raise ValueError(f'min_spread must be in [0, 1), got {min_spread}')
        GroundPlane(1.0, 0.0, tolerance)  # raises ValueError for a bad tolerance
        if outlier_fraction <= 0:
            raise ValueError(f'outlier_fraction must be > 0, got {outlier_fraction}')
        self.min_samples = min_samples
        self.min_spread = min_spread
        self.outlier_fraction = outlier_fraction
        self.tolerance = tolerance
        self.full_scan_every = full_scan_every
        self._requests = 0
        self._samples: collections.deque[tuple[float, float]] = collections.deque(maxlen=window)
        self._image_height = 0
        self._plane: GroundPlane | None = None
        self._stale = False

    def add(self, boxes: np.ndarray, image_height: int) -> None:
        """Add the boxes (N, 4: x0 y0 x1 y1 px) of people seen on a frame ``image_height`` tall."""
        boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        margin = 0.01 * image_height
        for _x0, y0, _x1, y1 in boxes:
            if y0 <= margin or y1 >= image_height - margin or y1 - y0 < 2:
                continue
            if math.isfinite(y0) and math.isfinite(y1):
                self._samples.append((float(y1), float(y1 - y0)))
                self._stale = True
        self._image_height = max(self._image_height, int(image_height))

    def reset(self) -> None:
        """Forget every sample (the camera moved on its mount, a new camera)."""
        self._samples.clear()
        self._plane = None
        self._stale = False

    @property
    def samples(self) -> int:
        """Samples held now."""
        return len(self._samples)

    def plane(self) -> GroundPlane | None:
        """Return the fitted plane, or None while it is not ready."""
        if self._stale:
            self._plane = self._fit()
            self._stale = False
        return self._plane

    def for_request(self) -> GroundPlane | None:
        """Return the plane to send with the next front-end request (None: scan every row)."""
        self._requests += 1
        if self.full_scan_every and self._requests % self.full_scan_every == 0:
            return None
        return self.plane()

    def _fit(self) -> GroundPlane | None:
        if len(self._samples) < self.min_samples:
            return None
        rows, heights = np.array(self._samples).T
        if np.ptp(rows) <= 0 or np.ptp(rows) < self.min_spread * self._image_height:
            return None  # everyone at one distance: the slope is not determined
        keep = np.ones(len(rows), dtype=bool)
        for _ in range(3):
            slope, intercept = np.polyfit(rows[keep], heights[keep], 1)
            predicted = slope * rows + intercept
            inliers = np.abs(heights - predicted) <= self.outlier_fraction * np.abs(predicted)
            if inliers.sum() < self.min_samples or (inliers == keep).all():
                break
            keep = inliers
        if not slope > 0 or not math.isfinite(intercept):
            return None
        return GroundPlane(float(slope), float(intercept), self.tolerance)
