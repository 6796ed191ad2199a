# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""People-detection outputs as ROS messages and drawings (no rclpy: message types only).

Every people model of the zoo returns the same three tensors: ``boxes`` (N x 4, x_min,
y_min, x_max, y_max in pixels), ``scores`` (N) and ``keypoints`` (N x 17 x 3: x, y, score in
COCO order). This module turns them into ``PersonArray``, RViz markers and an annotated
image, so the detection node stays a thin wrapper.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import cv2
import numpy as np
from geometry_msgs.msg import Point
from rclpy.duration import Duration
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from edge_offload.camera_model import PinholeCamera
from offload_interfaces.msg import Keypoint2D, Person, PersonArray

# COCO skeleton (keypoint index pairs), as drawn by the COCO API.
SKELETON = (
    (15, 13), (13, 11), (16, 14), (14, 12), (11, 12), (5, 11), (6, 12), (5, 6), (5, 7),
    (6, 8), (7, 9), (8, 10), (1, 2), (0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 6),
)  # fmt: skip
KEYPOINT_COUNT = 17
MARKER_NAMESPACE = 'people'


class PeopleOutputError(ValueError):
    """Model outputs that are not people (wrong names or shapes)."""


@dataclass(frozen=True)
class People:
    """The people of one frame, validated: boxes N x 4, scores N, keypoints N x 17 x 3."""

    boxes: np.ndarray
    scores: np.ndarray
    keypoints: np.ndarray

    @classmethod
    def from_outputs(cls, outputs: Mapping[str, np.ndarray], min_score: float = 0.0) -> People:
        """Check the model outputs and keep the people scoring at least ``min_score``."""
        try:
            boxes = np.asarray(outputs['boxes'], dtype=np.float32).reshape(-1, 4)
            scores = np.asarray(outputs['scores'], dtype=np.float32).reshape(-1)
            keypoints = np.asarray(outputs['keypoints'], dtype=np.float32)
        except KeyError as missing:
            raise PeopleOutputError(
                f'model output {missing} missing; people models return boxes, scores, keypoints'
            ) from None
        except ValueError as error:
            raise PeopleOutputError(f'people boxes must be N x 4: {error}') from None
        count = len(boxes)
        if scores.shape != (count,) or keypoints.shape != (count, KEYPOINT_COUNT, 3):
            raise PeopleOutputError(
                f'{count} boxes but scores {list(scores.shape)} and keypoints '
                f'{list(keypoints.shape)} (want [{count}] and [{count}, 17, 3])'
            )
        if not (np.isfinite(boxes).all() and np.isfinite(scores).all()):
            raise PeopleOutputError('people boxes or scores are not finite')
        return cls(boxes, scores, keypoints).kept(min_score)

    def kept(self, min_score: float) -> People:
        """Return the people scoring at least ``min_score``."""
        keep = self.scores >= min_score
        return People(self.boxes[keep], self.scores[keep], self.keypoints[keep])

    def __len__(self) -> int:
        return len(self.boxes)


def to_person_array(
    people: People, header: Header, model_name: str, model_is_trained: bool, mode: str
) -> PersonArray:
    """Return the ``PersonArray`` message of ``people`` seen in the image of ``header``."""
    message = PersonArray(header=header, model_name=model_name, offload_mode=mode)
    message.model_is_trained = model_is_trained
    for box, score, keypoints in zip(people.boxes, people.scores, people.keypoints, strict=True):
        person = Person(score=float(np.clip(score, 0.0, 1.0)))
        person.box_x_min_px, person.box_y_min_px, person.box_x_max_px, person.box_y_max_px = (
            float(value) for value in box
        )
        for index, (x, y, confidence) in enumerate(keypoints):
            found = confidence > 0.0 and np.isfinite(x) and np.isfinite(y)
            person.keypoints.append(
                Keypoint2D(
                    id=index,
                    x_px=float(x) if found else 0.0,
                    y_px=float(y) if found else 0.0,
                    score=float(np.clip(confidence, 0.0, 1.0)) if found else 0.0,
                )
            )
        message.people.append(person)
    return message


def to_markers(
    people: People,
    header: Header,
    camera: PinholeCamera | None,
    plane_depth_m: float,
    min_keypoint_score: float,
    lifetime_s: float,
    model_is_trained: bool,
) -> MarkerArray:
    """Return RViz markers (box outline, skeleton, label) drawn on a plane in front of the camera.

    Without depth, the 2-D detections are back-projected onto the plane z = ``plane_depth_m``
    of the camera's optical frame, so they overlay the camera view in RViz. Without
    calibration (``camera`` None) pixels are scaled to millimetres on that plane.
    """

    def point(u: float, v: float) -> Point:
        if camera is None:
            return Point(x=u / 1000.0, y=v / 1000.0, z=plane_depth_m)
        x, y, z = camera.ray([u, v]) * plane_depth_m
        return Point(x=float(x), y=float(y), z=float(z))

    lifetime = Duration(seconds=lifetime_s).to_msg()
    markers = MarkerArray()
    markers.markers.append(Marker(header=header, ns=MARKER_NAMESPACE, action=Marker.DELETEALL))
    colour = (
        ColorRGBA(r=0.1, g=0.9, b=0.2, a=1.0)
        if model_is_trained
        else ColorRGBA(r=0.6, g=0.6, b=0.6, a=0.6)
    )
    for index, (box, score, keypoints) in enumerate(
        zip(people.boxes, people.scores, people.keypoints, strict=True)
    ):
        x0, y0, x1, y1 = (float(value) for value in box)
        outline = Marker(header=header, ns=MARKER_NAMESPACE, id=3 * index)
        outline.type = Marker.LINE_STRIP
        outline.scale.x = 0.01
        outline.color = colour
        outline.lifetime = lifetime
        outline.points = [
            point(x0, y0),
            point(x1, y0),
            point(x1, y1),
            point(x0, y1),
            point(x0, y0),
        ]
        skeleton = Marker(header=header, ns=MARKER_NAMESPACE, id=3 * index + 1)
        skeleton.type = Marker.LINE_LIST
        skeleton.scale.x = 0.015
        skeleton.color = ColorRGBA(r=1.0, g=0.6, b=0.0, a=1.0)
        skeleton.lifetime = lifetime
        for a, b in SKELETON:
            if keypoints[a, 2] >= min_keypoint_score and keypoints[b, 2] >= min_keypoint_score:
                skeleton.points += [point(*keypoints[a, :2]), point(*keypoints[b, :2])]
        label = Marker(header=header, ns=MARKER_NAMESPACE, id=3 * index + 2)
        label.type = Marker.TEXT_VIEW_FACING
        label.scale.z = 0.08
        label.color = colour
        label.lifetime = lifetime
        label.pose.position = point(x0, y0 - 12.0)
        label.pose.orientation.w = 1.0
        label.text = f'{score:.2f}' if model_is_trained else f'{score:.2f} (untrained)'
        markers.markers += [outline, skeleton, label]
    return markers


def draw_people(
    image_bgr: np.ndarray,
    people: People,
    min_keypoint_score: float,
    caption: str,
    model_is_trained: bool,
) -> np.ndarray:
    """Return a copy of ``image_bgr`` with boxes, skeletons and a caption drawn on it."""
    canvas = np.ascontiguousarray(image_bgr).copy()
    box_colour = (60, 220, 60) if model_is_trained else (160, 160, 160)
    for box, score, keypoints in zip(people.boxes, people.scores, people.keypoints, strict=True):
        x0, y0, x1, y1 = (int(round(float(value))) for value in box)
        # Far people are small: thin lines and dots keep their skeletons readable.
        thickness = 2 if y1 - y0 >= 150 else 1
        radius = max(1, min(4, (y1 - y0) // 50))
        cv2.rectangle(canvas, (x0, y0), (x1, y1), box_colour, thickness)
        cv2.putText(
            canvas, f'{score:.2f}', (x0, max(12, y0 - 4)), cv2.FONT_HERSHEY_SIMPLEX, 0.4,
            box_colour, 1, cv2.LINE_AA,
        )  # fmt: skip
        for a, b in SKELETON:
            if keypoints[a, 2] >= min_keypoint_score and keypoints[b, 2] >= min_keypoint_score:
                start = (int(keypoints[a, 0]), int(keypoints[a, 1]))
                end = (int(keypoints[b, 0]), int(keypoints[b, 1]))
                cv2.line(canvas, start, end, (0, 165, 255), thickness, cv2.LINE_AA)
        for x, y, confidence in keypoints:
            if confidence >= min_keypoint_score:
                cv2.circle(canvas, (int(x), int(y)), radius, (0, 0, 255), -1, cv2.LINE_AA)
    if not model_is_trained:
        caption += '  |  UNTRAINED MODEL: boxes are not detections'
    cv2.rectangle(canvas, (0, 0), (canvas.shape[1], 22), (0, 0, 0), -1)
    cv2.putText(
        canvas, caption, (6, 16), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 255), 1, cv2.LINE_AA
    )
    return canvas
