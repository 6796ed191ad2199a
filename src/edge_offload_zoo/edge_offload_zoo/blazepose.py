# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""BlazePose (MediaPipe, Apache-2.0) in torch: detection -> ROI -> 33 landmarks -> COCO-17.

The two pretrained ``.tflite`` models run through the project's own TFLite loader
(``tflite_graph``). Pre- and post-processing follow MediaPipe's graphs
``pose_detection_cpu.pbtxt``, ``pose_detection_to_roi.pbtxt`` and
``pose_landmark_by_roi_cpu.pbtxt`` (tensors_to_pose_landmarks_and_segmentation):

* detector: the image letterboxed to 224x224 in [-1, 1]; SSD anchors (5 layers, strides
  8/16/32/32/32, fixed size, 2254 in all); sigmoid scores of logits clipped to +-100;
  weighted NMS at IoU 0.3. The detector finds a face-anchored box and 4 keypoints
  (mid-hip, full-body size/rotation point, mid-shoulder, upper-body point).
* ROI: centred on the mid-hip keypoint, side twice the distance to the size point, rotated
  so that the hip -> size-point vector points up, scaled by 1.25 (square).
* landmarks: the rotated ROI cropped to 256x256 in [0, 1] (replicated border), the
  landmark model, heatmap refinement (7x7 window), projection back to image pixels;
  visibility and presence are sigmoids of the raw values; the pose flag gates the person.

``BlazePosePeople`` turns that into a multi-person detector with a choice of front end
that proposes ROIs: the BlazePose detector on the whole frame (built for near people: it
is face-anchored and finds almost nobody on the far-field vtest.avi frames), the same
detector on overlapping tiles, OpenCV's HOG people detector, or the detector and HOG
together (``'hybrid'``, the default). Every person's box is drawn around its landmarks, so
boxes from any front end are comparable. Measured on 20 hand-boxed vtest.avi frames
(benchmarks/people_frontends.py): hybrid and HOG reach precision 0.99 / recall 0.90, the
tiled detector 0.88 / 0.77, the whole-frame detector recall 0.03.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import cv2
import numpy as np
import torch
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components
from torch import nn

from edge_offload.assets import asset_path
from edge_offload.models import InvalidInputError, ModelSpec, SizeLimits, TensorSpec
from edge_offload_zoo.detection_metrics import iou_matrix
from edge_offload_zoo.ground_plane import GroundPlane
from edge_offload_zoo.litert_backend import load_tflite_backend
from edge_offload_zoo.tflite_graph import TfliteGraphModule, load_tflite

DETECTOR_ASSET = 'weights/blazepose/pose_detection.tflite'
LANDMARK_ASSET = 'weights/blazepose/pose_landmark_full.tflite'
WEIGHTS_ORIGIN = (
    'MediaPipe BlazePose GHUM (Apache-2.0): pose_detection.tflite and '
    'pose_landmark_full.tflite from the PyPI mediapipe==0.10.21 wheel (tools/fetch_assets.py)'
)

BLAZEPOSE_LANDMARK_NAMES = (
    'nose', 'left_eye_inner', 'left_eye', 'left_eye_outer', 'right_eye_inner', 'right_eye',
    'right_eye_outer', 'left_ear', 'right_ear', 'mouth_left', 'mouth_right', 'left_shoulder',
    'right_shoulder', 'left_elbow', 'right_elbow', 'left_wrist', 'right_wrist', 'left_pinky',
    'right_pinky', 'left_index', 'right_index', 'left_thumb', 'right_thumb', 'left_hip',
    'right_hip', 'left_knee', 'right_knee', 'left_ankle', 'right_ankle', 'left_heel',
    'right_heel', 'left_foot_index', 'right_foot_index',
)  # fmt: skip
COCO_KEYPOINT_NAMES = (
    'nose', 'left_eye', 'right_eye', 'left_ear', 'right_ear', 'left_shoulder',
    'right_shoulder', 'left_elbow', 'right_elbow', 'left_wrist', 'right_wrist', 'left_hip',
    'right_hip', 'left_knee', 'right_knee', 'left_ankle', 'right_ankle',
)  # fmt: skip
# BlazePose landmark index of each COCO keypoint (COCO's eyes are the eye centres).
COCO_FROM_BLAZEPOSE = tuple(BLAZEPOSE_LANDMARK_NAMES.index(name) for name in COCO_KEYPOINT_NAMES)
LANDMARK_OUTPUT_NAMES = ('landmarks', 'pose_flag', 'segmentation', 'heatmap', 'world_landmarks')
# Their tensors in the .tflite file, in the same order.
LANDMARK_TENSORS = ('Identity', 'Identity_1', 'Identity_2', 'Identity_3', 'Identity_4')
# What the people pipelines decode: all but the segmentation mask, whose 256x256 decoder
# takes 45 % of the net's time (load_landmark_net leaves it out).
DECODED_LANDMARK_OUTPUTS = ('landmarks', 'pose_flag', 'heatmap', 'world_landmarks')

DETECTOR_SIZE = 224
LANDMARK_SIZE = 256
NUM_LANDMARKS = 39  # 33 body landmarks + 6 auxiliary (33, 34: ROI centre and size point)
MAX_PEOPLE = 16
# Landmark index seen at each index in a mirrored image: left and right swap, the 6
# auxiliary landmarks (ROI centre/size points) stay.
_MIRROR_INDEX = tuple(
    BLAZEPOSE_LANDMARK_NAMES.index(
        name.replace('left', '@').replace('right', 'left').replace('@', 'right')
    )
    for name in BLAZEPOSE_LANDMARK_NAMES
) + tuple(range(len(BLAZEPOSE_LANDMARK_NAMES), NUM_LANDMARKS))

FrontEnd = Literal['blazepose', 'tiled', 'hog', 'hybrid']
FRONT_ENDS: tuple[str, ...] = ('blazepose', 'tiled', 'hog', 'hybrid')
DEFAULT_FRONT_END: FrontEnd = 'hybrid'


# ---------------------------------------------------------------------------------------
# Geometry


@dataclass(frozen=True)
class Roi:
    """A square, rotated region of interest in image pixels (MediaPipe's NormalizedRect)."""

    x_center: float
    y_center: float
    size: float
    rotation: float  # radians, clockwise on screen (image y points down)

    def crop_to_image(self, crop_size: int) -> np.ndarray:
        """Return the 2x3 affine map from crop coordinates to image coordinates."""
        scale = self.size / crop_size
        cos, sin = math.cos(self.rotation) * scale, math.sin(self.rotation) * scale
        half = crop_size / 2.0
        return np.array(
            [
                [cos, -sin, self.x_center - cos * half + sin * half],
                [sin, cos, self.y_center - sin * half - cos * half],
            ]
        )


def normalize_radians(angle: float) -> float:
    """Wrap ``angle`` into [-pi, pi) as MediaPipe's NormalizeRadians."""
    return angle - 2.0 * math.pi * math.floor((angle + math.pi) / (2.0 * math.pi))


def roi_from_alignment_points(
    center: Sequence[float], scale_point: Sequence[float], scale: float = 1.25
) -> Roi:
    """Return MediaPipe's alignment ROI from a centre point and a size/rotation point.

    The ROI is centred on ``center`` and rotated and sized by the vector to
    ``scale_point`` (AlignmentPointsRectsCalculator, target angle 90 degrees), then
    scaled by ``scale`` (RectTransformationCalculator, square_long).
    """
    dx = float(scale_point[0]) - float(center[0])
    dy = float(scale_point[1]) - float(center[1])
    size = 2.0 * math.hypot(dx, dy) * scale
    rotation = normalize_radians(math.pi / 2.0 - math.atan2(-dy, dx))
    return Roi(float(center[0]), float(center[1]), size, rotation)


def warp_crop(image: np.ndarray, crop_to_image: np.ndarray, size: int, border: int) -> np.ndarray:
    """Resample ``image`` (HxWxC) into a ``size`` square through ``crop_to_image``.

    The map is in continuous coordinates (pixel i spans [i, i+1)); cv2 works on pixel
    centres, hence the half-pixel shifts.
    """
    matrix = crop_to_image.copy()
    matrix[:, 2] += matrix[:, :2].sum(axis=1) * 0.5 - 0.5
    return cv2.warpAffine(
        image,
        matrix,
        (size, size),
        flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
        borderMode=border,
        borderValue=(0, 0, 0),
    )


def apply_affine(matrix: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Map (N, 2) ``points`` through a 2x3 affine ``matrix``."""
    return points @ matrix[:, :2].T + matrix[:, 2]


# ---------------------------------------------------------------------------------------
# Detector


@lru_cache(maxsize=4)
def ssd_anchors(
    input_size: int = DETECTOR_SIZE,
    strides: tuple[int, ...] = (8, 16, 32, 32, 32),
    anchors_per_layer: int = 2,
    offset: float = 0.5,
) -> np.ndarray:
    """Return the (2254, 2) anchor centres of MediaPipe's SsdAnchorsCalculator.

    With ``fixed_anchor_size`` every anchor is 1x1, so only the centres matter; layers of
    equal stride share a grid, and each layer puts 2 anchors per cell (aspect ratio 1 and
    the interpolated scale), which is also why min/max scale (0.1484375, 0.75) never
    enter the result.
    """
    centres = []
    layer = 0
    while layer < len(strides):
        # Consecutive layers with the same stride are merged into one grid.
        last = layer
        while last + 1 < len(strides) and strides[last + 1] == strides[layer]:
            last += 1
        per_cell = anchors_per_layer * (last - layer + 1)
        cells = math.ceil(input_size / strides[layer])
        grid = (np.arange(cells) + offset) / cells
        ys, xs = np.meshgrid(grid, grid, indexing='ij')
        xy = np.stack([xs.reshape(-1), ys.reshape(-1)], axis=1)
        centres.append(np.repeat(xy, per_cell, axis=0))
        layer = last + 1
    anchors = np.concatenate(centres).astype(np.float32)
    anchors.flags.writeable = False  # cached: shared by every caller
    return anchors


@dataclass(frozen=True)
class PoseDetection:
    """One BlazePose detection in image pixels."""

    score: float
    box: np.ndarray  # (4,) x0 y0 x1 y1 of the face-anchored box
    keypoints: np.ndarray  # (4, 2): mid-hip, full-body size point, mid-shoulder, upper-body point

    def roi(self, scale: float = 1.25) -> Roi:
        """Return the landmark ROI as pose_detection_to_roi.pbtxt derives it."""
        return roi_from_alignment_points(self.keypoints[0], self.keypoints[1], scale)


def weighted_nms(
    boxes: np.ndarray,
    keypoints: np.ndarray,
    scores: np.ndarray,
    iou_threshold: float,
    max_detections: int,
) -> list[tuple[float, np.ndarray, np.ndarray]]:
    """MediaPipe's WEIGHTED non-max suppression.

    Each cluster (the best remaining box and every box with IoU above ``iou_threshold``)
    becomes one detection: its coordinates are the score-weighted mean of the cluster,
    its score the best one.
    """
    order = np.argsort(-scores, kind='stable')
    remaining = order
    result = []
    while remaining.size and len(result) < max_detections:
        overlap = iou_matrix(boxes[remaining[:1]], boxes[remaining])[0]
        cluster = remaining[overlap > iou_threshold]
        cluster = cluster if cluster.size else remaining[:1]
        weights = scores[cluster][:, None]
        total = weights.sum()
        box = (boxes[cluster] * weights).sum(axis=0) / total
        points = (keypoints[cluster] * weights[:, :, None]).sum(axis=0) / total
        result.append((float(scores[remaining[0]]), box, points))
        remaining = remaining[overlap <= iou_threshold]
    return result


class BlazePoseDetector(nn.Module):
    """The BlazePose person detector with MediaPipe's pre- and post-processing.

    ``min_score`` defaults to 0.5, the ``min_detection_confidence`` default of MediaPipe's
    Pose solution, rather than the graph's raw 0.2. On the 20 hand-boxed vtest.avi frames
    0.2 gave 2.5x the detections of 0.5 (272 against 111 with tiles), each costing a
    landmark pass, for 2 more true people and 28 more false ones (precision 0.69 against
    0.88); the near people of messi5.jpg and person.jpg score 0.95 and 0.97 either way.
    """

    def __init__(
        self,
        model: TfliteGraphModule | None = None,
        *,
        min_score: float = 0.5,
        iou_threshold: float = 0.3,
        max_detections: int = MAX_PEOPLE,
    ) -> None:
        super().__init__()
        self.model = model if model is not None else load_tflite(asset_path(DETECTOR_ASSET))
        self.min_score = min_score
        self.iou_threshold = iou_threshold
        self.max_detections = max_detections

    @staticmethod
    def letterbox(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return the 1x224x224x3 float input in [-1, 1] and its crop-to-image map.

        The image is scaled to fit and centred; the padding is black (-1), as
        ImageToTensorCalculator's BORDER_ZERO.
        """
        height, width = image.shape[:2]
        side = float(max(height, width))
        roi = Roi(width / 2.0, height / 2.0, side, 0.0)
        matrix = roi.crop_to_image(DETECTOR_SIZE)
        crop = warp_crop(image, matrix, DETECTOR_SIZE, cv2.BORDER_CONSTANT)
        tensor = crop.astype(np.float32) * (2.0 / 255.0) - 1.0
        return tensor[None], matrix

    def decode(
        self, regressors: np.ndarray, logits: np.ndarray, crop_to_image: np.ndarray
    ) -> list[PoseDetection]:
        """Turn raw model outputs into detections in image pixels."""
        raw = regressors.reshape(-1, 12).astype(np.float64)
        scores = 1.0 / (1.0 + np.exp(-np.clip(logits.reshape(-1).astype(np.float64), -100, 100)))
        anchors = ssd_anchors().astype(np.float64)
        keep = np.flatnonzero(scores >= self.min_score)
        # Decode in normalised 224 space (x, y, w, h order: reverse_output_order).
        raw, anchors, scores = raw[keep] / DETECTOR_SIZE, anchors[keep], scores[keep]
        centre = raw[:, 0:2] + anchors
        half = raw[:, 2:4] / 2.0
        valid = np.all(half > 0, axis=1)
        boxes = np.concatenate([centre - half, centre + half], axis=1)[valid]
        points = (raw[:, 4:12].reshape(-1, 4, 2) + anchors[:, None, :])[valid]
        merged = weighted_nms(
            boxes, points, scores[valid], self.iou_threshold, self.max_detections
        )
        to_image = crop_to_image.copy()
        to_image[:, :2] *= DETECTOR_SIZE  # from normalised crop units
        detections = []
        for score, box, keypoints in merged:
            corners = apply_affine(to_image, box.reshape(2, 2)).reshape(4)
            detections.append(PoseDetection(score, corners, apply_affine(to_image, keypoints)))
        return detections

    def detect(self, image: np.ndarray) -> list[PoseDetection]:
        """Detect people in an RGB uint8 HxWx3 ``image``; best first."""
        tensor, matrix = self.letterbox(image)
        with torch.inference_mode():
            regressors, logits = self.model(torch.from_numpy(tensor))
        return self.decode(regressors.numpy(), logits.numpy(), matrix)

    def detect_tiled(
        self, image: np.ndarray, tile_fraction: float = 0.5, overlap: float = 0.5
    ) -> list[PoseDetection]:
        """Detect on the whole image and on overlapping square tiles; merge; best first.

        Tiles are ``tile_fraction`` of the image's short side and overlap by ``overlap``:
        a zoomed-in tile lets the near-range detector see far people. Detections of all
        windows are merged by the same weighted NMS, in image pixels.
        """
        height, width = image.shape[:2]
        windows = [(0, 0, width, height)]
        side = int(round(min(height, width) * tile_fraction))
        if 0 < tile_fraction < 1 and side >= 32:
            stride = max(1, int(side * (1.0 - overlap)))
            xs = _tile_starts(width, side, stride)
            ys = _tile_starts(height, side, stride)
            windows += [(x, y, x + side, y + side) for y in ys for x in xs]
        found: list[PoseDetection] = []
        for x0, y0, x1, y1 in windows:
            tile = np.ascontiguousarray(image[y0:y1, x0:x1])
            for d in self.detect(tile):
                shift = np.array([x0, y0], dtype=np.float64)
                found.append(
                    PoseDetection(d.score, d.box + np.tile(shift, 2), d.keypoints + shift)
                )
        if not found:
            return []
        merged = weighted_nms(
            np.stack([d.box for d in found]),
            np.stack([d.keypoints for d in found]),
            np.array([d.score for d in found]),
            self.iou_threshold,
            self.max_detections,
        )
        return [PoseDetection(score, box, points) for score, box, points in merged]

    def forward(self, image: np.ndarray) -> list[PoseDetection]:
        """Detect people (see ``detect``)."""
        return self.detect(image)


def _tile_starts(length: int, side: int, stride: int) -> list[int]:
    """Return tile offsets along one axis: evenly spread, first at 0, last at the end."""
    if length <= side:
        return [0]
    count = math.ceil((length - side) / stride) + 1
    return [int(round(v)) for v in np.linspace(0, length - side, count)]


# ---------------------------------------------------------------------------------------
# Landmarks


@dataclass(frozen=True)
class PoseLandmarks:
    """The landmark model's output for one ROI, projected to image pixels."""

    points: np.ndarray  # (39, 3): x, y in image pixels; z in pixels (same scale as x)
    visibility: np.ndarray  # (39,) sigmoid
    presence: np.ndarray  # (39,) sigmoid
    pose_score: float  # the model's pose-presence flag, 0..1
    world: np.ndarray  # (39, 3) metres, hip-centred
    roi: Roi

    def coco_keypoints(self) -> np.ndarray:
        """Return (17, 3): x px, y px and visibility, in COCO order."""
        index = list(COCO_FROM_BLAZEPOSE)
        return np.concatenate(
            [self.points[index, :2], self.visibility[index, None]], axis=1
        ).astype(np.float32)

    def next_roi(self, scale: float = 1.25) -> Roi:
        """Return the ROI MediaPipe derives from the auxiliary landmarks 33 and 34."""
        return roi_from_alignment_points(self.points[33, :2], self.points[34, :2], scale)

    def unmirrored(self, image_width: int, roi: Roi) -> PoseLandmarks:
        """Map landmarks found in the mirrored image back: x -> width - x, left <-> right.

        ``roi`` is the ROI in the original image the mirrored pass stands for.
        """
        index = list(_MIRROR_INDEX)
        points = self.points[index].copy()
        points[:, 0] = image_width - points[:, 0]
        world = self.world[index].copy()
        world[:, 0] = -world[:, 0]
        return PoseLandmarks(
            points=points,
            visibility=self.visibility[index],
            presence=self.presence[index],
            pose_score=self.pose_score,
            world=world,
            roi=roi,
        )

    def averaged(self, other: PoseLandmarks) -> PoseLandmarks:
        """Return the mean of two estimates of the same person (same ROI)."""
        return PoseLandmarks(
            points=(self.points + other.points) / 2.0,
            visibility=(self.visibility + other.visibility) / 2.0,
            presence=(self.presence + other.presence) / 2.0,
            pose_score=(self.pose_score + other.pose_score) / 2.0,
            world=(self.world + other.world) / 2.0,
            roi=self.roi,
        )


def refine_with_heatmap(
    points: np.ndarray, heatmap: np.ndarray, kernel_size: int = 7, min_confidence: float = 0.5
) -> np.ndarray:
    """MediaPipe's RefineLandmarksFromHeatmapCalculator on crop-normalised ``points``.

    Each point moves to the sigmoid-weighted mean cell of a ``kernel_size`` window of its
    heatmap channel when the window's peak is at least ``min_confidence``. As in MediaPipe,
    a cell is weighted at its index (not its centre, index + 0.5): the model's landmark
    outputs were measured with that post-processing, and it matched the hand labels of
    messi5.jpg/person.jpg slightly better (mean error 7.7 px against 8.0 px).
    """
    height, width, channels = heatmap.shape
    refined = points.copy()
    offset = (kernel_size - 1) // 2
    for index in range(min(channels, len(points))):
        col, row = int(points[index, 0] * width), int(points[index, 1] * height)
        if not (0 <= col < width and 0 <= row < height):
            continue
        rows = slice(max(0, row - offset), min(height, row + offset + 1))
        cols = slice(max(0, col - offset), min(width, col + offset + 1))
        window = 1.0 / (1.0 + np.exp(-heatmap[rows, cols, index].astype(np.float64)))
        total = window.sum()
        if window.max() < min_confidence or total <= 0:
            continue
        grid_rows = np.arange(rows.start, rows.stop)[:, None]
        grid_cols = np.arange(cols.start, cols.stop)[None, :]
        refined[index, 0] = (window * grid_cols).sum() / total / width
        refined[index, 1] = (window * grid_rows).sum() / total / height
    return refined


def load_landmark_net(backend: str = 'torch', num_threads: int = 1) -> nn.Module:
    """Return the landmark net on ``backend`` without its segmentation head.

    It gives ``DECODED_LANDMARK_OUTPUTS``, bit for bit those of the whole net, in 55 % of
    its time (``keep_outputs``); ``blazepose_landmark_full`` is the whole net.
    """
    return load_tflite_backend(
        asset_path(LANDMARK_ASSET),
        backend,
        num_threads=num_threads,
        outputs=[
            LANDMARK_TENSORS[LANDMARK_OUTPUT_NAMES.index(n)] for n in DECODED_LANDMARK_OUTPUTS
        ],
    )


class BlazePoseLandmarker(nn.Module):
    """The BlazePose GHUM full landmark model on one ROI at a time."""

    def __init__(
        self,
        model: TfliteGraphModule | None = None,
        *,
        refine: bool = True,
    ) -> None:
        super().__init__()
        self.model = model if model is not None else load_landmark_net('torch')
        self.refine = refine

    @staticmethod
    def crop(image: np.ndarray, roi: Roi) -> tuple[np.ndarray, np.ndarray]:
        """Return the 1x256x256x3 float input in [0, 1] and its crop-to-image map."""
        matrix = roi.crop_to_image(LANDMARK_SIZE)
        # ImageToTensorCalculator's default border (unspecified) replicates the edge.
        crop = warp_crop(image, matrix, LANDMARK_SIZE, cv2.BORDER_REPLICATE)
        return (crop.astype(np.float32) * (1.0 / 255.0))[None], matrix

    def decode(
        self, outputs: Sequence[torch.Tensor], crop_to_image: np.ndarray, roi: Roi
    ) -> PoseLandmarks:
        """Turn the model's outputs into landmarks in image pixels.

        ``outputs``: the net's 5 (``LANDMARK_OUTPUT_NAMES``) or the 4 of
        ``load_landmark_net`` (``DECODED_LANDMARK_OUTPUTS``, no segmentation mask).
        """
        if len(outputs) == len(LANDMARK_OUTPUT_NAMES):
            named = dict(zip(LANDMARK_OUTPUT_NAMES, outputs, strict=True))
        elif len(outputs) == len(DECODED_LANDMARK_OUTPUTS):
            named = dict(zip(DECODED_LANDMARK_OUTPUTS, outputs, strict=True))
        else:
            raise ValueError(f'the landmark net gave {len(outputs)} outputs, expected 5 or 4')
        raw = named['landmarks'].reshape(NUM_LANDMARKS, 5).double().numpy()
        pose_score = float(named['pose_flag'].reshape(-1)[0])
        normalised = raw[:, :3] / LANDMARK_SIZE
        if self.refine:
            heatmap = named['heatmap'].reshape(named['heatmap'].shape[-3:]).numpy()
            normalised[:, :2] = refine_with_heatmap(normalised[:, :2], heatmap)
        xy = apply_affine(crop_to_image, normalised[:, :2] * LANDMARK_SIZE)
        z = normalised[:, 2:3] * roi.size  # MediaPipe scales z like x (by the ROI width)
        world = named['world_landmarks'].reshape(NUM_LANDMARKS, 3).double().numpy()
        return PoseLandmarks(
            points=np.concatenate([xy, z], axis=1),
            visibility=1.0 / (1.0 + np.exp(-raw[:, 3])),
            presence=1.0 / (1.0 + np.exp(-raw[:, 4])),
            pose_score=pose_score,
            world=world,
            roi=roi,
        )

    def _run(self, image: np.ndarray, roi: Roi) -> PoseLandmarks:
        tensor, matrix = self.crop(image, roi)
        with torch.inference_mode():
            outputs = self.model(torch.from_numpy(tensor))
        return self.decode(outputs, matrix, roi)

    def landmarks(self, image: np.ndarray, roi: Roi, *, flip_test: bool = False) -> PoseLandmarks:
        """Run the landmark model on ``roi`` of an RGB uint8 HxWx3 ``image``.

        With ``flip_test`` it also runs on the mirrored image and ROI and averages the
        two estimates (the flip test of pose-estimation evaluations): twice the cost,
        and the model's left/right asymmetries cancel (see README, keypoint accuracy).
        """
        found = self._run(image, roi)
        if not flip_test:
            return found
        return found.averaged(self.mirrored_landmarks(image, roi))

    def mirrored_landmarks(
        self, image: np.ndarray, roi: Roi, mirrored_image: np.ndarray | None = None
    ) -> PoseLandmarks:
        """Run the landmark model on the mirror image of ``roi``; return them unmirrored.

        The same cost as ``landmarks`` and an estimate of the same body whose left/right
        asymmetries are the model's mirrored ones. ``mirrored_image``: ``image[:, ::-1]``
        made contiguous, when the caller has it (one copy a frame for many people).
        """
        width = image.shape[1]
        if mirrored_image is None:
            mirrored_image = np.ascontiguousarray(image[:, ::-1])
        mirrored_roi = Roi(width - roi.x_center, roi.y_center, roi.size, -roi.rotation)
        return self._run(mirrored_image, mirrored_roi).unmirrored(width, roi)

    def forward(self, image: np.ndarray, roi: Roi, *, flip_test: bool = False) -> PoseLandmarks:
        """Run the landmark model (see ``landmarks``)."""
        return self.landmarks(image, roi, flip_test=flip_test)


# ---------------------------------------------------------------------------------------
# People pipeline


@dataclass(frozen=True)
class Person:
    """One person found by the pipeline."""

    box: np.ndarray  # (4,) x0 y0 x1 y1 pixels
    score: float
    keypoints: np.ndarray  # (17, 3) COCO: x px, y px, visibility
    landmarks: PoseLandmarks
    source: str  # 'blazepose', 'hog' or 'tracked'
    confidence: float = 1.0  # the front end's own: detector score or squashed HOG margin


# The default people detector's 64x128 window holds a person 96 px tall, feet at row 112.
HOG_PERSON_ROWS = 96
HOG_FOOT_ROW = 112
# detectMultiScale's grouping of raw window hits (finalThreshold 2, eps 0.2).
HOG_GROUP_THRESHOLD = 2
HOG_GROUP_EPS = 0.2


def hog_people(
    image: np.ndarray,
    *,
    upscale: float = 2.0,
    max_pixels: float = 2.0e6,
    hit_threshold: float = 0.0,
    win_stride: int = 8,
    scale: float = 1.05,
    max_people: int = MAX_PEOPLE,
    ground_plane: GroundPlane | None = None,
) -> list[tuple[np.ndarray, float]]:
    """OpenCV's HOG + linear SVM people detector; returns (box px, SVM margin), best first.

    The default window is 64x128 with the person about 96 px tall in it, so the frame is
    upscaled by ``upscale`` (at most to ``max_pixels``, which bounds the cost) to find
    people down to about 96 / upscale px. Boxes are in the input image's pixels.

    With a ``ground_plane`` each scale is searched only on the rows where people of its
    size stand (``hog_people_on_ground``); without one, on the whole frame.
    """
    height, width = image.shape[:2]
    upscale = max(1.0, min(upscale, math.sqrt(max_pixels / float(height * width))))
    grey = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
    # A descriptor per call: cheap next to the search, and no state shared across threads.
    hog = cv2.HOGDescriptor()
    hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())
    window_w, window_h = hog.winSize
    if height * upscale < window_h or width * upscale < window_w:
        return []  # OpenCV 4.x crashes (segfault) on images smaller than the window
    if ground_plane is not None:
        found = hog_people_on_ground(grey, ground_plane, upscale, hit_threshold, win_stride, scale)
    else:
        if upscale != 1.0:
            grey = cv2.resize(grey, None, fx=upscale, fy=upscale, interpolation=cv2.INTER_LINEAR)
        rects, weights = hog.detectMultiScale(
            grey, hitThreshold=hit_threshold, winStride=(win_stride, win_stride), scale=scale
        )
        found = [
            (np.array([x, y, x + w, y + h], dtype=np.float64) / upscale, float(weight))
            for (x, y, w, h), weight in zip(rects, np.asarray(weights).reshape(-1), strict=True)
        ]
    found.sort(key=lambda item: -item[1])
    return found[:max_people]


def hog_people_on_ground(
    grey: np.ndarray,
    ground_plane: GroundPlane | None,
    upscale: float,
    hit_threshold: float,
    win_stride: int,
    scale: float,
) -> list[tuple[np.ndarray, float]]:
    """HOG's multi-scale search, each scale only on the band where its people stand.

    The scales are detectMultiScale's (``scale`` ** i of the frame upscaled ``upscale``
    times, while the window fits). At scale s the window finds people 96 s / upscale px
    tall; ``ground_plane`` says on which foot rows they stand, so only that band, plus
    the window above and below the feet, is resized and searched (None: every row, what
    detectMultiScale searches). The raw hits of all scales are grouped as detectMultiScale
    groups them (``group_window_hits``). Returns (box px of ``grey``, SVM margin).
    """
    height, width = grey.shape
    window_w, window_h = cv2.HOGDescriptor().winSize
    bands: list[tuple[float, int, int]] = []  # (grey px -> level px, top row, bottom row)
    level = 1.0
    for _ in range(64):  # detectMultiScale's most levels
        if width * upscale / level < window_w or height * upscale / level < window_h:
            break
        factor = upscale / level
        level *= scale
        top, bottom = 0, height
        if ground_plane is not None:
            low, high = ground_plane.foot_rows(HOG_PERSON_ROWS / factor)
            top = max(0, math.floor(low - HOG_FOOT_ROW / factor))
            bottom = min(height, math.ceil(high + (window_h - HOG_FOOT_ROW) / factor))
        if round((bottom - top) * factor) >= window_h and round(width * factor) >= window_w:
            bands.append((factor, top, bottom))

    def search(band: tuple[float, int, int]) -> list[tuple[float, float, float, float, float]]:
        factor, top, bottom = band
        size = (round(width * factor), round((bottom - top) * factor))
        resized = cv2.resize(grey[top:bottom], size, interpolation=cv2.INTER_LINEAR)
        # detect runs on one thread (detectMultiScale spreads its scales over OpenCV's).
        hog = cv2.HOGDescriptor()  # one per thread: nothing shared
        hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())
        locations, margins = hog.detect(
            resized, hitThreshold=hit_threshold, winStride=(win_stride, win_stride)
        )
        return [
            (x / factor, top + y / factor, window_w / factor, window_h / factor, float(m))
            for (x, y), m in zip(
                np.asarray(locations).reshape(-1, 2), np.asarray(margins).reshape(-1), strict=True
            )
        ]

    # The bands side by side on OpenCV's thread count, as detectMultiScale uses it.
    workers = min(len(bands), max(1, cv2.getNumThreads()))
    if workers > 1:
        with ThreadPoolExecutor(workers, thread_name_prefix='hog') as pool:
            found = list(pool.map(search, bands))
    else:
        found = [search(band) for band in bands]
    hits = np.array([hit for band_hits in found for hit in band_hits]).reshape(-1, 5)
    return group_window_hits(hits[:, :4], hits[:, 4])


def group_window_hits(
    rects: np.ndarray,
    weights: np.ndarray,
    threshold: int = HOG_GROUP_THRESHOLD,
    eps: float = HOG_GROUP_EPS,
) -> list[tuple[np.ndarray, float]]:
    """Group raw detector windows (N, 4: x y w h) as OpenCV's HOG groups them.

    Windows are similar when every edge is within ``eps`` times their mean smaller side;
    similar windows form one group (transitively). A group of more than ``threshold``
    windows becomes its mean window, scored with its best margin, unless it lies inside
    another group's window that has more windows. Returns (x0 y0 x1 y1, margin).
    """
    count = len(rects)
    if count == 0:
        return []
    x, y, w, h = (rects[:, i] for i in range(4))
    delta = eps * 0.5 * (np.minimum.outer(w, w) + np.minimum.outer(h, h))
    similar = (
        (np.abs(x[:, None] - x[None, :]) <= delta)
        & (np.abs(y[:, None] - y[None, :]) <= delta)
        & (np.abs((x + w)[:, None] - (x + w)[None, :]) <= delta)
        & (np.abs((y + h)[:, None] - (y + h)[None, :]) <= delta)
    )
    groups, labels = connected_components(csr_matrix(similar), directed=False)
    sizes = np.bincount(labels, minlength=groups)
    means = np.zeros((groups, 4))
    np.add.at(means, labels, rects)
    means /= np.maximum(sizes, 1)[:, None]
    best = np.full(groups, -np.inf)
    np.maximum.at(best, labels, weights)
    found = []
    for i in range(groups):
        if sizes[i] <= threshold:
            continue
        x0, y0, wi, hi = means[i]
        inside = False
        for j in range(groups):
            if j == i or sizes[j] <= threshold:
                continue
            xj, yj, wj, hj = means[j]
            dx, dy = wj * eps, hj * eps
            if (
                x0 >= xj - dx
                and y0 >= yj - dy
                and x0 + wi <= xj + wj + dx
                and y0 + hi <= yj + hj + dy
                and (sizes[j] > max(3, sizes[i]) or sizes[i] < 3)
            ):
                inside = True
                break
        if not inside:
            found.append((np.array([x0, y0, x0 + wi, y0 + hi]), float(best[i])))
    return found


def hog_confidence(margin: float) -> float:
    """Squash a HOG SVM margin into 0..1 (0.5 at margin 0, 0.9 at margin 1)."""
    return float(1.0 / (1.0 + math.exp(-2.2 * margin)))


# Box margins around the visible landmarks, tuned on the vtest.avi hand boxes (frames 0,
# 80, ... and 40, 120, ... gave the same optimum): the landmarks stop at the eyes, the
# heels and the wrists, a drawn box at the crown, the soles and the sleeves.
BOX_MARGIN_SIDE = 0.06  # each side, fraction of the landmark height ...
BOX_MARGIN_SIDE_WIDTH = 0.10  # ... plus this fraction of the landmark width
BOX_MARGIN_TOP = 0.07  # fraction of the landmark height
BOX_MARGIN_BOTTOM = 0.02


def landmark_box(
    landmarks: PoseLandmarks, image_size: tuple[int, int], *, min_visibility: float = 0.5
) -> np.ndarray:
    """Return a person box (x0 y0 x1 y1 px) around the visible body landmarks.

    Falls back to all 33 landmarks when fewer than 2 are visible; clipped to the image
    (``image_size`` is width, height).
    """
    points = landmarks.points[:33, :2]
    visible = landmarks.visibility[:33] >= min_visibility
    if visible.sum() >= 2:
        points = points[visible]
    x0, y0 = points.min(axis=0)
    x1, y1 = points.max(axis=0)
    w, h = x1 - x0, y1 - y0
    side = BOX_MARGIN_SIDE * h + BOX_MARGIN_SIDE_WIDTH * w
    box = np.array([x0 - side, y0 - BOX_MARGIN_TOP * h, x1 + side, y1 + BOX_MARGIN_BOTTOM * h])
    width, height = image_size
    return np.clip(box, [0, 0, 0, 0], [width, height, width, height])


class BlazePosePeople(nn.Module):
    """People with COCO-17 keypoints from one RGB frame, BlazePose landmarks per person.

    ``forward(image)`` takes a uint8 (1, 3, H, W) RGB tensor and returns ``boxes``
    (N, 4) x0 y0 x1 y1 px, ``scores`` (N,) and ``keypoints`` (N, 17, 3) (x px, y px,
    visibility), N <= ``max_people``, best first.

    Front ends propose ROIs for the landmark model:

    * ``'blazepose'``: MediaPipe's detector on the whole frame (near people; it is
      face-anchored and finds almost nobody on far-field frames);
    * ``'tiled'``: the same detector on the whole frame and on overlapping tiles of
      ``tile_fraction`` of the short side, so far people look near;
    * ``'hog'``: OpenCV's HOG people detector on a frame upscaled ``hog_upscale`` times;
      the HOG box gives an upright ROI;
    * ``'hybrid'`` (default): ``'blazepose'`` and ``'hog'`` together: the detector keeps
      near people, whom HOG's 64x128 window misses (messi5.jpg), HOG adds far ones.

    With ``refine_roi`` (default) a second landmark pass runs on the ROI that the first
    pass's auxiliary landmarks define, as MediaPipe does from frame to frame when it
    tracks; the detector's face-anchored ROI and HOG's upright box are coarser. With
    ``flip_test`` (default) every landmark pass also runs mirrored and the two are
    averaged. Both were chosen on the hand-labelled photos (README, keypoint accuracy).

    A person is kept when the landmark model's pose flag is at least ``min_presence``
    (MediaPipe's 0.5). Its box is drawn around its visible landmarks (``landmark_box``);
    its score is the pose flag times the front end's confidence (the detector score, or
    the squashed HOG margin). Overlapping people (box IoU > ``nms_iou``) keep the best.
    """

    def __init__(
        self,
        front_end: FrontEnd = DEFAULT_FRONT_END,
        *,
        detector: BlazePoseDetector | None = None,
        landmarker: BlazePoseLandmarker | None = None,
        max_people: int = MAX_PEOPLE,
        min_presence: float = 0.5,
        nms_iou: float = 0.5,
        tile_fraction: float = 0.34,
        hog_upscale: float = 2.0,
        hog_max_pixels: float = 2.0e6,
        hog_scale: float = 1.05,
        hog_hit_threshold: float = 0.0,
        hog_roi_scale: float = 1.0,
        refine_roi: bool = True,
        flip_test: bool = True,
    ) -> None:
        super().__init__()
        if front_end not in FRONT_ENDS:
            raise ValueError(f'front_end must be one of {FRONT_ENDS}, got {front_end!r}')
        self.front_end = front_end
        self.detector = (
            detector if detector is not None else BlazePoseDetector(max_detections=max_people)
        )
        self.landmarker = landmarker if landmarker is not None else BlazePoseLandmarker()
        self.max_people = max_people
        self.min_presence = min_presence
        self.nms_iou = nms_iou
        self.tile_fraction = tile_fraction
        self.hog_upscale = hog_upscale
        self.hog_max_pixels = hog_max_pixels
        self.hog_scale = hog_scale
        self.hog_hit_threshold = hog_hit_threshold
        self.hog_roi_scale = hog_roi_scale
        self.refine_roi = refine_roi
        self.flip_test = flip_test

    # -- proposals ----------------------------------------------------------------------

    def _from_detector(self, image: np.ndarray, tiled: bool) -> list[Person]:
        if tiled:
            detections = self.detector.detect_tiled(image, self.tile_fraction)
        else:
            detections = self.detector.detect(image)
        people = []
        for detection in detections[: self.max_people]:
            landmarks = self._landmarks(image, detection.roi())
            people.append(self._person(landmarks, detection.score, image, 'blazepose'))
        return people

    def _from_hog(self, image: np.ndarray, ground_plane: GroundPlane | None) -> list[Person]:
        people = []
        found = hog_people(
            image,
            upscale=self.hog_upscale,
            max_pixels=self.hog_max_pixels,
            hit_threshold=self.hog_hit_threshold,
            scale=self.hog_scale,
            max_people=self.max_people,
            ground_plane=ground_plane,
        )
        for box, margin in found:
            x0, y0, x1, y1 = box
            roi = Roi((x0 + x1) / 2, (y0 + y1) / 2, (y1 - y0) * self.hog_roi_scale, 0.0)
            landmarks = self._landmarks(image, roi)
            people.append(self._person(landmarks, hog_confidence(margin), image, 'hog'))
        return people

    def _landmarks(self, image: np.ndarray, roi: Roi) -> PoseLandmarks:
        landmarks = self.landmarker.landmarks(image, roi, flip_test=self.flip_test)
        if self.refine_roi and landmarks.pose_score >= self.min_presence:
            landmarks = self.landmarker.landmarks(
                image, landmarks.next_roi(), flip_test=self.flip_test
            )
        return landmarks

    def _person(
        self, landmarks: PoseLandmarks, confidence: float, image: np.ndarray, source: str
    ) -> Person:
        height, width = image.shape[:2]
        return Person(
            box=landmark_box(landmarks, (width, height)),
            score=float(landmarks.pose_score * confidence),
            keypoints=landmarks.coco_keypoints(),
            landmarks=landmarks,
            source=source,
            confidence=float(confidence),
        )

    def people(self, image: np.ndarray, ground_plane: GroundPlane | None = None) -> list[Person]:
        """Return the people in an RGB uint8 HxWx3 ``image``, best first.

        With a ``ground_plane`` HOG searches each scale only where its people stand.
        """
        candidates: list[Person] = []
        if self.front_end in ('blazepose', 'tiled', 'hybrid'):
            candidates += self._from_detector(image, tiled=self.front_end == 'tiled')
        if self.front_end in ('hog', 'hybrid'):
            candidates += self._from_hog(image, ground_plane)
        candidates = [
            p
            for p in candidates
            if p.landmarks.pose_score >= self.min_presence
            and p.box[2] - p.box[0] > 1
            and p.box[3] - p.box[1] > 1
        ]
        candidates.sort(key=lambda p: -p.score)
        kept: list[Person] = []
        for person in candidates:
            if (
                kept
                and iou_matrix(person.box, np.stack([k.box for k in kept])).max() > self.nms_iou
            ):
                continue
            kept.append(person)
            if len(kept) == self.max_people:
                break
        return kept

    def forward(
        self, image: torch.Tensor, ground_plane: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, ...]:
        """Return the people of a (1, 3, H, W) uint8 RGB image, best first.

        ``ground_plane`` (3,): slope, intercept and tolerance of a ``GroundPlane`` for HOG,
        or zeros when it is not known (``ground_plane_input``); anything else is refused.

        Outputs: ``boxes`` (N, 4), ``scores`` (N,), ``keypoints`` (N, 17, 3), and for a
        tracker to follow them (``people_tracking``) ``rois`` (N, 4: x and y centre, side
        px, rotation rad: the landmark ROI for the next frame) and ``confidences`` (N,:
        the front end's own confidence, without the pose flag).
        """
        if image.dim() != 4 or image.shape[0] != 1 or image.shape[1] != 3:
            raise ValueError(f'image must be (1, 3, H, W), got {list(image.shape)}')
        if image.dtype != torch.uint8:
            raise ValueError(f'image must be uint8, got {image.dtype}')
        plane = None
        if ground_plane is not None:
            try:
                plane = GroundPlane.from_values(ground_plane.reshape(-1).tolist())
            except ValueError as error:
                raise InvalidInputError(f'input ground_plane: {error}') from None
        frame = np.ascontiguousarray(image[0].permute(1, 2, 0).cpu().numpy())
        people = self.people(frame, plane) if frame.size else []
        rois = [p.landmarks.next_roi() for p in people]
        return (
            torch.from_numpy(np.array([p.box for p in people], np.float32).reshape(-1, 4)),
            torch.tensor([p.score for p in people], dtype=torch.float32),
            torch.from_numpy(
                np.array([p.keypoints for p in people], np.float32).reshape(-1, 17, 3)
            ),
            torch.tensor(
                [[r.x_center, r.y_center, r.size, r.rotation] for r in rois], dtype=torch.float32
            ).reshape(-1, 4),
            torch.tensor([p.confidence for p in people], dtype=torch.float32),
        )


# ---------------------------------------------------------------------------------------
# Model specs (entry points of group edge_offload.models)

_PEOPLE_OUTPUTS = ('boxes', 'scores', 'keypoints', 'rois', 'confidences')
# Frames the people pipelines take. OpenCV's warpAffine asserts on sides of 32767 px and
# more (a 1x100000 frame failed inside the model, on the server and again locally); above
# DCI 4K a frame only costs time: the detector letterboxes to 224, HOG is capped at
# hog_max_pixels and the landmarks crop 256x256, while a 4000x4000 frame took 4.7 s here
# (1920x1080: 0.6 s, 4096x2160: 2.3 s) and 48 MB of uplink. Empty, tiny and thin frames
# are fine: they give no people.
PEOPLE_INPUT_LIMITS = SizeLimits(min_side=0, max_side=4096, max_pixels=4096 * 2160)
_PEOPLE_INPUTS = {'image': TensorSpec((1, 3, None, None), torch.uint8, PEOPLE_INPUT_LIMITS)}
# Where people stand (GroundPlane.as_values, zeros when unknown): the robot's, not the
# model's, since one server model serves robots whose cameras differ.
GROUND_PLANE_INPUT = 'ground_plane'
_GROUND_PEOPLE_INPUTS = {**_PEOPLE_INPUTS, GROUND_PLANE_INPUT: TensorSpec((3,), torch.float32)}


def _people_spec(
    name: str,
    front_end: FrontEnd,
    what: str,
    flip_test: bool = True,
    backend: str = 'torch',
    ground_plane_input: bool = False,
    **options: object,
) -> ModelSpec:
    def build() -> BlazePosePeople:
        if backend == 'torch':
            return BlazePosePeople(front_end=front_end, flip_test=flip_test, **options)
        # One thread each: the server's workers and the robot's nodes share the cores.
        detector = load_tflite_backend(asset_path(DETECTOR_ASSET), backend, num_threads=1)
        return BlazePosePeople(
            front_end=front_end,
            flip_test=flip_test,
            detector=BlazePoseDetector(model=detector),
            landmarker=BlazePoseLandmarker(model=load_landmark_net(backend, num_threads=1)),
            **options,
        )

    return ModelSpec(
        name=name,
        build=build,
        inputs=_GROUND_PEOPLE_INPUTS if ground_plane_input else _PEOPLE_INPUTS,
        outputs=_PEOPLE_OUTPUTS,
        trained=True,
        description=(
            f'People with COCO-17 keypoints: {what} -> BlazePose landmarks per person. '
            f'Weights: {WEIGHTS_ORIGIN}'
        ),
    )


def blazepose_people() -> ModelSpec:
    """Return the people pipeline with the default front end (BlazePose detector + HOG)."""
    return _people_spec(
        'blazepose_people', DEFAULT_FRONT_END, 'BlazePose detector and OpenCV HOG proposals'
    )


def blazepose_fast_people() -> ModelSpec:
    """Return the default pipeline without the flip test: ~40% less time, less accurate."""
    return _people_spec(
        'blazepose_fast_people',
        DEFAULT_FRONT_END,
        'BlazePose detector and OpenCV HOG proposals (no flip test)',
        flip_test=False,
    )


def blazepose_lite_people() -> ModelSpec:
    """Return the front end for tracking: one landmark pass per proposal, HOG step 1.1.

    On the 20 hand-boxed vtest.avi frames it finds as many people as ``blazepose_people``
    does without its refinements (precision 0.99, recall 0.889, against 0.97 / 0.889 with
    HOG's default 1.05 scale step) in about a third of ``blazepose_people``'s time (478 ms
    against 1301 ms a frame on one core): a tracker re-runs the landmark net on every
    person anyway, so the front end only has to find them.

    Its nets run on the LiteRT interpreter (the weights are ``.tflite`` files), 1.45-1.7x
    faster than the torch port on a CPU with outputs within 0.022 px
    (``test_litert_backend``). They are opaque to the operator-level modes (per_op, rrto,
    lopinfer): offload this model whole (nnto), or use a torch-port model there.

    Its second input, ``ground_plane`` (3 float32: ``GroundPlane.as_values``, zeros when
    not known), tells HOG where people stand, so that it searches each scale only there
    (``hog_people_on_ground``): the tracker that asks for this front end fits it to the
    people it tracks (``GroundPlaneFit``).
    """
    return _people_spec(
        'blazepose_lite_people',
        DEFAULT_FRONT_END,
        'BlazePose detector and OpenCV HOG (scale step 1.1) proposals, one landmark pass each',
        flip_test=False,
        backend='litert',
        ground_plane_input=True,
        refine_roi=False,
        hog_scale=1.1,
    )


def blazepose_hog_people() -> ModelSpec:
    """Return the people pipeline fed by OpenCV's HOG people detector only."""
    return _people_spec('blazepose_hog_people', 'hog', 'OpenCV HOG proposals')


def blazepose_detector_people() -> ModelSpec:
    """Return the people pipeline fed by the BlazePose detector only (MediaPipe's way)."""
    return _people_spec('blazepose_detector_people', 'blazepose', 'BlazePose detector')


def blazepose_tiled_people() -> ModelSpec:
    """Return the people pipeline fed by the BlazePose detector on the frame and its tiles."""
    return _people_spec(
        'blazepose_tiled_people', 'tiled', 'BlazePose detector on the frame and 1/3-size tiles'
    )


def blazepose_landmark_full() -> ModelSpec:
    """Return the bare BlazePose GHUM full landmark network (NHWC input, as the .tflite)."""
    return ModelSpec(
        name='blazepose_landmark_full',
        build=lambda: load_tflite(asset_path(LANDMARK_ASSET)),
        inputs={'image': TensorSpec((1, LANDMARK_SIZE, LANDMARK_SIZE, 3), torch.float32)},
        outputs=LANDMARK_OUTPUT_NAMES,
        trained=True,
        description=(
            'BlazePose GHUM full landmark net on a 256x256 RGB crop in [0, 1] (NHWC): '
            '39x5 landmarks, pose flag, segmentation logits, heatmaps, world landmarks. '
            f'Weights: {WEIGHTS_ORIGIN}'
        ),
    )
