# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The ground plane (person height against foot row) and HOG searching only where it says.

The HOG checks run OpenCV's real people detector on real vtest.avi frames and compare
the banded search with detectMultiScale over the whole frame.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from edge_offload.assets import asset_path
from edge_offload.models import InvalidInputError, load_model
from edge_offload_zoo.blazepose import (
    GROUND_PLANE_INPUT,
    group_window_hits,
    hog_people,
    hog_people_on_ground,
)
from edge_offload_zoo.detection_metrics import iou_matrix
from edge_offload_zoo.ground_plane import GroundPlane, GroundPlaneFit

BOXES = Path(__file__).resolve().parents[3] / 'data' / 'annotations' / 'vtest_people_boxes.json'
# The hand boxes of vtest.avi follow this line within a median 4 %.
VTEST_PLANE = GroundPlane(0.214, 19.9)


@pytest.fixture(scope='module')
def labelled_frames() -> dict[int, tuple[np.ndarray, list]]:
    annotations = json.loads(BOXES.read_text())
    truth = {int(f['index']): f['boxes'] for f in annotations['frames']}
    wanted = {0, 200, 400, 600}
    capture = cv2.VideoCapture(str(asset_path(annotations['video'])))
    frames = {}
    for index in range(max(wanted) + 1):
        ok, bgr = capture.read()
        assert ok
        if index in wanted:
            frames[index] = (np.ascontiguousarray(bgr[:, :, ::-1]), truth[index])
    capture.release()
    return frames


def test_plane_gives_the_rows_where_people_of_a_height_stand() -> None:
    plane = GroundPlane(0.25, 10.0, tolerance=0.5)
    low, high = plane.foot_rows(100.0)
    assert plane.height_at(low) == pytest.approx(100.0 / 1.5)
    assert plane.height_at(high) == pytest.approx(150.0)
    assert GroundPlane.from_values(plane.as_values()) == plane
    assert GroundPlane.from_values((0.0, 0.0, 0.0)) is None  # unknown: scan every row
    for bad, match in (
        ((math.nan, 1.0, 0.4), 'finite'),
        ((0.2, math.inf, 0.4), 'finite'),
        ((0.0, 10.0, 0.4), 'slope'),
        ((-0.2, 10.0, 0.4), 'slope'),
        ((0.2, 10.0, 0.0), 'tolerance'),
        ((0.2, 10.0), '3 values'),
    ):
        with pytest.raises(ValueError, match=match):
            GroundPlane.from_values(bad)


def _boxes(rows: np.ndarray, heights: np.ndarray) -> np.ndarray:
    x0, x1 = np.full_like(rows, 100.0), np.full_like(rows, 140.0)
    return np.stack([x0, rows - heights, x1, rows], axis=1)


def test_fit_finds_the_line_through_people_and_leaves_out_the_rest() -> None:
    rng = np.random.default_rng(0)
    rows = rng.uniform(150, 560, 200)
    heights = (0.214 * rows + 19.9) * rng.normal(1.0, 0.04, rows.size)
    # A fifth are people sitting or behind a table: half their height.
    heights[::5] *= 0.5
    fit = GroundPlaneFit()
    fit.add(_boxes(rows, heights), image_height=576)
    plane = fit.plane()
    assert plane is not None
    assert plane.slope == pytest.approx(0.214, rel=0.05)
    for row in (200.0, 500.0):
        assert plane.height_at(row) == pytest.approx(0.214 * row + 19.9, rel=0.02)
    fit.reset()
    assert fit.plane() is None
    assert fit.samples == 0


def test_fit_waits_for_enough_people_at_enough_distances() -> None:
    fit = GroundPlaneFit(min_samples=30, min_spread=0.2)
    rows = np.linspace(300, 340, 40)  # everyone at about one distance: 40 of 576 rows
    fit.add(_boxes(rows, 0.2 * rows + 20), image_height=576)
    assert fit.plane() is None
    rows = np.linspace(200, 500, 20)
    fit.add(_boxes(rows, 0.2 * rows + 20), image_height=576)
    assert fit.plane() is not None
    # People cut off by the top or the bottom of the frame do not count.
    clipped = GroundPlaneFit(min_samples=2, min_spread=0.0)
    clipped.add(np.array([[0, 0, 10, 100], [0, 50, 10, 576], [0, 1, 10, 300]]), 576)
    assert clipped.samples == 0
    # One row only: no slope to fit, whatever the limits.
    clipped.add(np.array([[0, 200, 10, 300], [5, 210, 15, 300]]), 576)
    assert clipped.samples == 2
    assert clipped.plane() is None


def test_every_few_requests_scan_every_row() -> None:
    fit = GroundPlaneFit(min_samples=2, min_spread=0.0, full_scan_every=3)
    assert [fit.for_request() for _ in range(2)] == [None, None]  # not fitted yet
    rows = np.array([200.0, 400.0])
    fit.add(_boxes(rows, 0.2 * rows + 20), image_height=576)
    planes = [fit.for_request() for _ in range(6)]
    assert [p is None for p in planes] == [True, False, False, True, False, False]
    assert planes[1].slope == pytest.approx(0.2)
    with pytest.raises(ValueError, match='full_scan_every'):
        GroundPlaneFit(full_scan_every=-1)
    with pytest.raises(ValueError, match='tolerance'):
        GroundPlaneFit(tolerance=0.0)


def test_every_row_searched_finds_what_detect_multi_scale_finds(labelled_frames: dict) -> None:
    # Every row of every scale searched and grouped here, against detectMultiScale on the
    # frame upscaled twice. The scales are resized from the frame itself, not from the
    # upscaled frame, so pixels differ a little and hits at the SVM's margin may differ.
    hog = cv2.HOGDescriptor()
    hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())
    strong = 0
    for image, _ in labelled_frames.values():
        grey = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
        ours = hog_people_on_ground(grey, None, 2.0, 0.0, 8, 1.1)
        upscaled = cv2.resize(grey, None, fx=2.0, fy=2.0, interpolation=cv2.INTER_LINEAR)
        rects, weights = hog.detectMultiScale(
            upscaled, hitThreshold=0.0, winStride=(8, 8), scale=1.1
        )
        theirs = [
            (np.array([x, y, x + w, y + h]) / 2.0, float(weight))
            for (x, y, w, h), weight in zip(rects, np.reshape(weights, -1), strict=True)
        ]
        assert abs(len(ours) - len(theirs)) <= 1
        for found, other in ((ours, theirs), (theirs, ours)):
            for box, margin in found:
                if margin < 2.0:
                    continue
                strong += 1
                overlaps = iou_matrix(box, np.stack([b for b, _ in other])).reshape(-1)
                best = int(np.argmax(overlaps))
                assert overlaps[best] > 0.8
                assert other[best][1] == pytest.approx(margin, abs=0.4)
    assert strong >= 10


def test_group_window_hits_keeps_groups_of_more_than_the_threshold() -> None:
    window = np.array([100.0, 50.0, 64.0, 128.0])
    offsets = ((0, 0), (2, 1), (-2, 2), (0, 1))
    crowd = np.stack([window + [dx, dy, 0, 0] for dx, dy in offsets])
    lonely = np.array([[400.0, 50.0, 64.0, 128.0]])
    # Inside the crowd's window, and fewer: a part of the same person.
    inner = np.array([[104.0, 60.0, 40.0, 80.0]] * 3)
    found = group_window_hits(
        np.concatenate([crowd, lonely, inner]),
        np.array([0.5, 1.5, 0.2, 0.3, 3.0, 0.1, 0.1, 0.1]),
    )
    assert len(found) == 1  # the lonely window is one hit, the inner group is nested
    box, margin = found[0]
    assert np.allclose(box, [100.0, 51.0, 164.0, 179.0])
    assert margin == 1.5
    assert group_window_hits(np.zeros((0, 4)), np.zeros(0)) == []


def _centre_hits(found: list, truth: list) -> int:
    """Labelled people taller than 60 px whose box centre a HOG person window holds."""
    hits = 0
    for x0, y0, x1, y1 in (np.array(box[:4], float) for box in truth):
        if y1 - y0 < 60:
            continue
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        for (a, b, c, d), _ in found:
            person = 0.75 * (d - b)  # of the 128-row window, 96 rows are the person
            if a <= cx <= c and b <= cy <= d and 0.7 <= (y1 - y0) / person <= 1.4:
                hits += 1
                break
    return hits


def test_hog_on_the_ground_plane_finds_the_people_the_full_search_finds(
    labelled_frames: dict,
) -> None:
    full_hits = plane_hits = full_found = plane_found = 0
    for image, truth in labelled_frames.values():
        full = hog_people(image, scale=1.1)
        banded = hog_people(image, scale=1.1, ground_plane=VTEST_PLANE)
        full_hits += _centre_hits(full, truth)
        plane_hits += _centre_hits(banded, truth)
        full_found, plane_found = full_found + len(full), plane_found + len(banded)
        # No window off the line: each found person stands where the plane allows.
        for (_x0, y0, _x1, y1), _ in banded:
            person = 0.75 * (y1 - y0)
            foot = y0 + 112 / 128 * (y1 - y0)
            low, high = VTEST_PLANE.foot_rows(person)
            assert low - 0.1 * person <= foot <= high + 0.1 * person
    assert full_hits >= 15
    assert plane_hits >= full_hits - 1
    assert plane_found < full_found  # windows off the floor line are not searched


def test_people_model_takes_the_ground_plane_as_an_input(labelled_frames: dict) -> None:
    model = load_model('blazepose_lite_people')
    assert model.spec.inputs[GROUND_PLANE_INPUT].shape == (3,)
    image, _ = labelled_frames[0]
    tensor = torch.from_numpy(image).permute(2, 0, 1)[None].contiguous()
    unknown = model({'image': tensor, GROUND_PLANE_INPUT: torch.zeros(3)})
    known = model(
        {'image': tensor, GROUND_PLANE_INPUT: torch.tensor(VTEST_PLANE.as_values()).float()}
    )
    assert len(unknown['boxes']) >= 3
    assert abs(len(known['boxes']) - len(unknown['boxes'])) <= 1
    for bad in ((math.nan, 1.0, 0.4), (-0.2, 10.0, 0.4)):
        with pytest.raises(InvalidInputError, match='ground_plane'):
            model({'image': tensor, GROUND_PLANE_INPUT: torch.tensor(bad).float()})
    with pytest.raises(InvalidInputError, match='ground_plane'):
        model({'image': tensor})
