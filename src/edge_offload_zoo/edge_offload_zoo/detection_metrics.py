# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Box-matching metrics for person detectors (pure functions: numpy only, no ROS).

Matching is greedy by IoU: all (detection, ground truth) pairs with IoU >= the threshold,
highest IoU first, each box used at most once. Ground-truth boxes no taller than
``min_height`` are *neutral*: a detection matched to one is counted neither as a true
nor as a false positive, and missing one is no false negative. Recall is taken over the
taller ground-truth boxes, precision over the detections that are not neutral.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

IOU_THRESHOLD = 0.5
MIN_HEIGHT = 60.0


def iou_matrix(
    a: Sequence[Sequence[float]] | np.ndarray, b: Sequence[Sequence[float]] | np.ndarray
) -> np.ndarray:
    """Return the (len(a), len(b)) IoU matrix of x_min, y_min, x_max, y_max boxes."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    x0 = np.maximum(a[:, None, 0], b[None, :, 0])
    y0 = np.maximum(a[:, None, 1], b[None, :, 1])
    x1 = np.minimum(a[:, None, 2], b[None, :, 2])
    y1 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x1 - x0, 0.0, None) * np.clip(y1 - y0, 0.0, None)
    area_a = np.clip(a[:, 2] - a[:, 0], 0.0, None) * np.clip(a[:, 3] - a[:, 1], 0.0, None)
    area_b = np.clip(b[:, 2] - b[:, 0], 0.0, None) * np.clip(b[:, 3] - b[:, 1], 0.0, None)
    union = area_a[:, None] + area_b[None, :] - inter
    # Degenerate pairs (zero union) overlap by nothing.
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def greedy_match(
    detections: Sequence[Sequence[float]] | np.ndarray,
    ground_truth: Sequence[Sequence[float]] | np.ndarray,
    iou_threshold: float = IOU_THRESHOLD,
) -> list[tuple[int, int, float]]:
    """Return (detection index, ground-truth index, IoU) pairs, highest IoU first.

    Pairs below ``iou_threshold`` never match; ties go to the lower detection index,
    then the lower ground-truth index.
    """
    ious = iou_matrix(detections, ground_truth)
    det_index, gt_index = np.nonzero(ious >= iou_threshold)
    values = ious[det_index, gt_index]
    # lexsort sorts by its last key first: IoU descending, then detection, then truth.
    order = np.lexsort((gt_index, det_index, -values))
    used_det: set[int] = set()
    used_gt: set[int] = set()
    matches = []
    for k in order:
        d, g = int(det_index[k]), int(gt_index[k])
        if d in used_det or g in used_gt:
            continue
        used_det.add(d)
        used_gt.add(g)
        matches.append((d, g, float(values[k])))
    return matches


@dataclass(frozen=True)
class Counts:
    """True/false positives, false negatives and neutral detections of some frames."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    neutral: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.tp + other.tp,
            self.fp + other.fp,
            self.fn + other.fn,
            self.neutral + other.neutral,
        )

    @property
    def precision(self) -> float:
        """Return TP / (TP + FP); 1.0 when nothing counted was detected."""
        counted = self.tp + self.fp
        return self.tp / counted if counted else 1.0

    @property
    def recall(self) -> float:
        """Return TP / (TP + FN); 1.0 when there was nothing to find."""
        total = self.tp + self.fn
        return self.tp / total if total else 1.0


def nearest_box(boxes: np.ndarray, box: Sequence[float]) -> int:
    """Return the index of the row of ``boxes`` (N x 4) whose centre is nearest ``box``'s."""
    target = np.asarray(box, dtype=float)
    centres = (np.asarray(boxes)[:, :2] + np.asarray(boxes)[:, 2:]) / 2
    return int(np.argmin(np.linalg.norm(centres - (target[:2] + target[2:]) / 2, axis=1)))


def box_heights(boxes: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """Return the heights (y_max - y_min) of x_min, y_min, x_max, y_max boxes."""
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    return boxes[:, 3] - boxes[:, 1]


def evaluate_frame(
    detections: Sequence[Sequence[float]] | np.ndarray,
    ground_truth: Sequence[Sequence[float]] | np.ndarray,
    *,
    iou_threshold: float = IOU_THRESHOLD,
    min_height: float = MIN_HEIGHT,
) -> Counts:
    """Count one frame's detections against its ground-truth boxes (see module doc)."""
    detections = np.asarray(detections, dtype=np.float64).reshape(-1, 4)
    ground_truth = np.asarray(ground_truth, dtype=np.float64).reshape(-1, 4)
    large = box_heights(ground_truth) > min_height
    matches = greedy_match(detections, ground_truth, iou_threshold)
    tp = sum(1 for _, g, _ in matches if large[g])
    neutral = len(matches) - tp
    return Counts(
        tp=tp,
        fp=len(detections) - len(matches),
        fn=int(large.sum()) - tp,
        neutral=neutral,
    )


def evaluate(
    frames: Iterable[
        tuple[Sequence[Sequence[float]] | np.ndarray, Sequence[Sequence[float]] | np.ndarray]
    ],
    *,
    iou_threshold: float = IOU_THRESHOLD,
    min_height: float = MIN_HEIGHT,
) -> Counts:
    """Sum ``evaluate_frame`` over (detections, ground truth) pairs."""
    total = Counts()
    for detections, ground_truth in frames:
        total = total + evaluate_frame(
            detections, ground_truth, iou_threshold=iou_threshold, min_height=min_height
        )
    return total
