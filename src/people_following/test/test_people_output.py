# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""People model outputs become PersonArray, markers and drawings; malformed ones are refused."""

from __future__ import annotations

import numpy as np
import pytest
from std_msgs.msg import Header
from visualization_msgs.msg import Marker

from edge_offload.camera_model import PinholeCamera
from people_following.people_output import (
    People,
    PeopleOutputError,
    draw_people,
    to_markers,
    to_person_array,
)


def _outputs(count: int) -> dict[str, np.ndarray]:
    boxes = np.array([[10.0 + 50 * i, 20.0, 40.0 + 50 * i, 120.0] for i in range(count)])
    keypoints = np.zeros((count, 17, 3), dtype=np.float32)
    keypoints[:, :, 0] = boxes[:, None, 0] + 5.0
    keypoints[:, :, 1] = np.linspace(25.0, 115.0, 17)[None, :]
    keypoints[:, :, 2] = 0.9
    keypoints[:, 3, 2] = 0.0  # left ear not found
    return {
        'boxes': boxes.astype(np.float32),
        'scores': np.linspace(0.9, 0.4, count, dtype=np.float32),
        'keypoints': keypoints,
    }


def test_people_are_filtered_by_score_and_converted():
    people = People.from_outputs(_outputs(3), min_score=0.5)
    assert len(people) == 2
    header = Header(frame_id='camera_optical_frame')
    header.stamp.sec = 42
    message = to_person_array(people, header, 'blazepose_people', True, 'nnto')
    assert message.header.stamp.sec == 42
    assert (message.model_name, message.model_is_trained, message.offload_mode) == (
        'blazepose_people',
        True,
        'nnto',
    )
    first = message.people[0]
    assert first.box_x_min_px == pytest.approx(10.0)
    assert first.score == pytest.approx(0.9)
    assert [keypoint.id for keypoint in first.keypoints] == list(range(17))
    # A keypoint the model did not find is reported with score 0 at (0, 0).
    assert (first.keypoints[3].x_px, first.keypoints[3].score) == (0.0, 0.0)
    assert first.keypoints[0].x_px == pytest.approx(15.0)


def test_no_people_is_a_valid_frame():
    outputs = {
        'boxes': np.zeros((0, 4), np.float32),
        'scores': np.zeros(0, np.float32),
        'keypoints': np.zeros((0, 17, 3), np.float32),
    }
    people = People.from_outputs(outputs)
    assert len(people) == 0
    assert to_person_array(people, Header(), 'm', True, 'local').people == []


@pytest.mark.parametrize(
    ('change', 'text'),
    [
        (lambda o: o.pop('scores'), 'missing'),
        (lambda o: o.update(keypoints=np.zeros((2, 18, 3))), 'keypoints'),
        (lambda o: o.update(scores=np.zeros(3)), 'scores'),
        (lambda o: o.update(boxes=np.full((2, 4), np.nan)), 'not finite'),
    ],
)
def test_malformed_outputs_are_refused(change, text):
    outputs = _outputs(2)
    change(outputs)
    with pytest.raises(PeopleOutputError, match=text):
        People.from_outputs(outputs)


def test_markers_back_project_onto_the_plane():
    people = People.from_outputs(_outputs(1))
    camera = PinholeCamera.from_k([100.0, 0, 10.0, 0, 100.0, 20.0, 0, 0, 1], 64, 48)
    markers = to_markers(people, Header(frame_id='cam'), camera, 2.0, 0.3, 0.5, False)
    assert markers.markers[0].action == Marker.DELETEALL
    outline, skeleton, label = markers.markers[1:]
    # The box's top-left corner (10, 20) is half a pixel up and left of the principal point
    # (10, 20) of CameraInfo, which counts from the top-left pixel's centre.
    corner = outline.points[0]
    assert (corner.x, corner.y, corner.z) == pytest.approx((-0.01, -0.01, 2.0))
    assert outline.points[1].x == pytest.approx((40.0 - 0.5 - 10.0) / 100.0 * 2.0)
    # Links touching the missing left ear (3) are left out: 19 links - 2.
    assert len(skeleton.points) == 2 * 17
    assert 'untrained' in label.text
    with pytest.raises(ValueError, match='uncalibrated'):
        PinholeCamera.from_k([0.0] * 9, 64, 48)


def test_drawing_marks_boxes_and_the_untrained_caption():
    image = np.zeros((160, 200, 3), np.uint8)
    people = People.from_outputs(_outputs(1))
    canvas = draw_people(image, people, 0.3, 'caption', model_is_trained=False)
    assert canvas.shape == image.shape
    assert not image.any()  # the input is not modified
    assert canvas[20, 10:40].any()  # the box's top edge
    assert canvas[:22].any()  # the caption bar
