# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Greedy IoU matching and the precision/recall rules of the people benchmark."""

from __future__ import annotations

import numpy as np
import pytest

from edge_offload_zoo.detection_metrics import (
    Counts,
    evaluate,
    evaluate_frame,
    greedy_match,
    iou_matrix,
)


def test_iou_matrix() -> None:
    ious = iou_matrix(
        [[0, 0, 10, 10], [0, 0, 0, 0]], [[0, 0, 10, 10], [5, 0, 15, 10], [20, 20, 30, 30]]
    )
    np.testing.assert_allclose(ious, [[1.0, 50 / 150, 0.0], [0.0, 0.0, 0.0]])
    assert iou_matrix([], [[0, 0, 1, 1]]).shape == (0, 1)
    assert iou_matrix([[0, 0, 1, 1]], np.zeros((0, 4))).shape == (1, 0)


def test_greedy_takes_highest_iou_first() -> None:
    truth = [[0, 0, 10, 10]]
    # Detection 1 overlaps better, so it takes the truth box even though detection 0 came first.
    detections = [[0, 0, 10, 12], [0, 0, 10, 10.5]]
    assert [(d, g) for d, g, _ in greedy_match(detections, truth)] == [(1, 0)]


def test_greedy_is_not_optimal_assignment() -> None:
    # Greedy: d0-g0 (0.9) first, leaving d1 unmatched, though d0-g1 and d1-g0 would match both.
    truth = [[0, 0, 10, 10], [2, 0, 12, 10]]
    detections = [[0.5, 0, 10.5, 10], [-3, 0, 7, 10]]
    ious = iou_matrix(detections, truth)
    assert ious[0, 0] > ious[0, 1] >= 0.5
    assert ious[1, 0] >= 0.5 > ious[1, 1]
    assert [(d, g) for d, g, _ in greedy_match(detections, truth)] == [(0, 0)]


def test_threshold_is_inclusive() -> None:
    truth = [[0, 0, 10, 10]]
    half = [[0, 0, 10, 5]]  # IoU exactly 0.5
    assert len(greedy_match(half, truth, 0.5)) == 1
    assert not greedy_match(half, truth, 0.51)


def test_small_truth_is_neutral() -> None:
    truth = [[0, 0, 20, 100], [100, 0, 120, 60], [200, 0, 220, 50]]  # 100, 60 and 50 px tall
    detections = [[0, 0, 20, 100], [100, 0, 120, 60], [300, 300, 320, 400]]
    counts = evaluate_frame(detections, truth)
    # Tall box found (TP); the 60 px box is matched but neutral; the 50 px box is missed
    # without penalty; the stray detection is a false positive.
    assert counts == Counts(tp=1, fp=1, fn=0, neutral=1)
    assert counts.precision == pytest.approx(0.5)
    assert counts.recall == pytest.approx(1.0)


def test_missed_tall_truth_is_a_false_negative() -> None:
    counts = evaluate_frame(np.zeros((0, 4)), [[0, 0, 10, 61]])
    assert counts == Counts(tp=0, fp=0, fn=1, neutral=0)
    assert counts.recall == 0.0
    assert counts.precision == 1.0  # nothing detected: no false positive


def test_one_detection_per_truth() -> None:
    truth = [[0, 0, 20, 100]]
    detections = [[0, 0, 20, 100], [0, 0, 20, 98]]
    assert evaluate_frame(detections, truth) == Counts(tp=1, fp=1, fn=0, neutral=0)


def test_evaluate_sums_frames() -> None:
    frames = [
        ([[0, 0, 20, 100]], [[0, 0, 20, 100]]),
        ([], [[0, 0, 20, 100], [50, 0, 70, 100]]),
        ([[0, 0, 5, 5]], []),
    ]
    total = evaluate(frames)
    assert total == Counts(tp=1, fp=1, fn=2, neutral=0)
    assert total.precision == pytest.approx(0.5)
    assert total.recall == pytest.approx(1 / 3)
    assert Counts(1, 2, 3, 4) + Counts(1, 1, 1, 1) == Counts(2, 3, 4, 5)
