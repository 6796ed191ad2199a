# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The BlazePose people pipeline on real images, its pieces, and its model specs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from edge_offload.assets import asset_path
from edge_offload.models import LoadedModel, build_model
from edge_offload_zoo import blazepose
from edge_offload_zoo.blazepose import (
    COCO_FROM_BLAZEPOSE,
    COCO_KEYPOINT_NAMES,
    BlazePoseDetector,
    BlazePoseLandmarker,
    BlazePosePeople,
)
from edge_offload_zoo.detection_metrics import nearest_box
from edge_offload_zoo.litert_backend import load_tflite_backend

torch.set_num_threads(1)

IMAGES = ('media/opencv/messi5.jpg', 'media/darknet/person.jpg')
HAND_LABELS = (
    Path(__file__).resolve().parents[3] / 'data' / 'annotations' / 'keypoints_by_hand.json'
)
MAX_KEYPOINT_ERROR_PX = 10.0
# Hand-labelled keypoints that the pipeline misses by more than 10 px (measured error, px).
# All four annotators put Messi's left shoulder at x 282-285; BlazePose, full or heavy,
# with or without refinement, puts it at x 270-273, medial of the deltoid.
# xfail(strict): a fix shows up as XPASS, which fails until this table is updated.
KNOWN_MISSES = {
    ('media/opencv/messi5.jpg', 'left_shoulder'): 11.2,
}


def _rgb(asset: str) -> np.ndarray:
    return np.ascontiguousarray(cv2.imread(str(asset_path(asset)))[:, :, ::-1])


def _tensor(image: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(image).permute(2, 0, 1)[None].contiguous()


@pytest.fixture(scope='module')
def people_model() -> LoadedModel:
    """Build the default pipeline through its ModelSpec, as the server does."""
    return build_model(blazepose.blazepose_people())


@pytest.fixture(scope='module')
def outputs(people_model: LoadedModel) -> dict[str, dict[str, torch.Tensor]]:
    return {asset: people_model({'image': _tensor(_rgb(asset))}) for asset in IMAGES}


# ---------------------------------------------------------------------------------------
# Pieces


def test_coco_mapping() -> None:
    assert COCO_FROM_BLAZEPOSE == (0, 2, 5, 7, 8, 11, 12, 13, 14, 15, 16, 23, 24, 25, 26, 27, 28)
    assert len(COCO_KEYPOINT_NAMES) == 17
    for coco, blaze in zip(COCO_KEYPOINT_NAMES, COCO_FROM_BLAZEPOSE, strict=True):
        assert blazepose.BLAZEPOSE_LANDMARK_NAMES[blaze] == coco


def test_ssd_anchors() -> None:
    anchors = blazepose.ssd_anchors()
    assert anchors.shape == (2254, 2)
    # 28x28 cells x 2, 14x14 x 2, then three stride-32 layers sharing a 7x7 grid (x 6).
    np.testing.assert_allclose(anchors[0], [0.5 / 28, 0.5 / 28])
    np.testing.assert_allclose(anchors[1567], [27.5 / 28, 27.5 / 28])
    np.testing.assert_allclose(anchors[1568], [0.5 / 14, 0.5 / 14])
    np.testing.assert_allclose(anchors[1960:1966], [[0.5 / 7, 0.5 / 7]] * 6)
    np.testing.assert_allclose(anchors[-1], [6.5 / 7, 6.5 / 7])


def test_alignment_roi_points_up() -> None:
    # Hip at (100, 200), size point straight above: upright ROI, side 2 * 50 * 1.25.
    roi = blazepose.roi_from_alignment_points((100, 200), (100, 150))
    assert roi.rotation == pytest.approx(0.0)
    assert roi.size == pytest.approx(125.0)
    # Size point to the right: the body lies along +x, the crop turns by -90 degrees.
    roi = blazepose.roi_from_alignment_points((100, 200), (150, 200))
    assert roi.rotation == pytest.approx(math.pi / 2)
    corners = blazepose.apply_affine(roi.crop_to_image(256), np.array([[128.0, 0.0]]))
    np.testing.assert_allclose(corners, [[100 + 62.5, 200]], atol=1e-9)


def test_weighted_nms_merges_a_cluster() -> None:
    boxes = np.array([[0, 0, 10, 10], [1, 0, 11, 10], [50, 50, 60, 60]], dtype=float)
    points = np.zeros((3, 4, 2))
    points[1] += 3.0
    scores = np.array([0.9, 0.3, 0.8])
    merged = blazepose.weighted_nms(boxes, points, scores, 0.3, 16)
    assert [round(m[0], 3) for m in merged] == [0.9, 0.8]
    np.testing.assert_allclose(merged[0][1], [0.25, 0, 10.25, 10])  # score-weighted mean
    np.testing.assert_allclose(merged[0][2], np.full((4, 2), 0.75))


def test_detector_and_landmarker_on_person_jpg() -> None:
    image = _rgb('media/darknet/person.jpg')
    detections = BlazePoseDetector().detect(image)
    assert len(detections) >= 1
    best = detections[0]
    assert best.score > 0.9
    hip = best.keypoints[0]
    assert 200 < hip[0] < 260  # the mid-hip lies on the person (hand box x 191..275)
    assert 220 < hip[1] < 280
    landmarks = BlazePoseLandmarker().landmarks(image, best.roi())
    assert landmarks.pose_score > 0.9
    assert landmarks.points.shape == (39, 3)
    assert landmarks.world.shape == (39, 3)
    assert np.all((landmarks.visibility >= 0) & (landmarks.visibility <= 1))


def test_mirror_index_swaps_sides_and_is_an_involution() -> None:
    mirror = blazepose._MIRROR_INDEX
    names = blazepose.BLAZEPOSE_LANDMARK_NAMES
    assert sorted(mirror) == list(range(39))
    assert all(mirror[mirror[i]] == i for i in range(39))
    assert names[mirror[names.index('left_shoulder')]] == 'right_shoulder'
    assert mirror[names.index('nose')] == names.index('nose')
    assert list(mirror[33:]) == list(range(33, 39))  # the ROI points are not sided


def test_flip_test_is_mirror_equivariant() -> None:
    # The flip test averages a pass on the image and one on its mirror, so on the
    # mirrored image it must give the mirror of its result (up to float rounding).
    image = _rgb('media/darknet/person.jpg')
    width = image.shape[1]
    roi = blazepose.Roi(233.0, 240.0, 326.0, 0.1)
    landmarker = BlazePoseLandmarker()
    plain = landmarker.landmarks(image, roi)
    tested = landmarker.landmarks(image, roi, flip_test=True)
    mirrored = landmarker.landmarks(
        np.ascontiguousarray(image[:, ::-1]),
        blazepose.Roi(width - roi.x_center, roi.y_center, roi.size, -roi.rotation),
        flip_test=True,
    ).unmirrored(width, roi)
    np.testing.assert_allclose(mirrored.points[:, :2], tested.points[:, :2], atol=1e-3)
    np.testing.assert_allclose(mirrored.visibility, tested.visibility, atol=1e-5)
    np.testing.assert_allclose(mirrored.world, tested.world, atol=1e-5)
    # ... and it differs from a single pass (else it would be a no-op).
    assert np.abs(plain.points[:33, :2] - tested.points[:33, :2]).max() > 0.5


# ---------------------------------------------------------------------------------------
# Pipeline


@pytest.mark.parametrize('asset', IMAGES)
def test_pipeline_finds_the_person(outputs: dict, asset: str) -> None:
    result = outputs[asset]
    boxes, scores, keypoints = result['boxes'], result['scores'], result['keypoints']
    n = boxes.shape[0]
    assert n >= 1
    assert boxes.dtype == scores.dtype == keypoints.dtype == torch.float32
    assert scores.shape == (n,)
    assert keypoints.shape == (n, 17, 3)
    assert float(scores[0]) > 0.5
    height, width = _rgb(asset).shape[:2]
    main = keypoints[0].numpy()
    assert np.all((main[:, 0] >= 0) & (main[:, 0] <= width))
    assert np.all((main[:, 1] >= 0) & (main[:, 1] <= height))
    assert np.all((main[:, 2] >= 0) & (main[:, 2] <= 1))
    x0, y0, x1, y1 = boxes[0].tolist()
    assert 0 <= x0 < x1 <= width
    assert 0 <= y0 < y1 <= height


def test_blank_image_gives_no_people(people_model: LoadedModel) -> None:
    result = people_model({'image': torch.zeros((1, 3, 240, 320), dtype=torch.uint8)})
    assert result['boxes'].shape == (0, 4)
    assert result['scores'].shape == (0,)
    assert result['keypoints'].shape == (0, 17, 3)
    assert all(t.dtype == torch.float32 for t in result.values())


@pytest.mark.parametrize('shape', [(0, 0), (0, 7), (1, 1), (2, 3), (20, 500), (500, 20)])
def test_tiny_images_give_no_people(people_model: LoadedModel, shape: tuple[int, int]) -> None:
    # OpenCV's HOG crashes on images smaller than its 64x128 window; the pipeline must not.
    result = people_model({'image': torch.full((1, 3, *shape), 200, dtype=torch.uint8)})
    assert result['keypoints'].shape == (0, 17, 3)


def test_spec_rejects_wrong_dtype(people_model: LoadedModel) -> None:
    with pytest.raises(ValueError, match='uint8'):
        people_model({'image': torch.zeros((1, 3, 64, 64), dtype=torch.float32)})


def test_people_specs() -> None:
    specs = [
        blazepose.blazepose_people(),
        blazepose.blazepose_fast_people(),
        blazepose.blazepose_lite_people(),
        blazepose.blazepose_hog_people(),
        blazepose.blazepose_detector_people(),
        blazepose.blazepose_tiled_people(),
    ]
    assert [s.name for s in specs] == [
        'blazepose_people',
        'blazepose_fast_people',
        'blazepose_lite_people',
        'blazepose_hog_people',
        'blazepose_detector_people',
        'blazepose_tiled_people',
    ]
    for spec in specs:
        assert spec.trained
        assert spec.outputs == ('boxes', 'scores', 'keypoints', 'rois', 'confidences')
        assert spec.inputs['image'].dtype == torch.uint8
        assert spec.inputs['image'].shape == (1, 3, None, None)
        assert 'MediaPipe' in spec.description


def test_front_end_is_checked() -> None:
    detector = BlazePoseDetector()
    landmarker = BlazePoseLandmarker()
    with pytest.raises(ValueError, match='front_end'):
        BlazePosePeople('yolo', detector=detector, landmarker=landmarker)  # type: ignore[arg-type]


def test_landmark_spec_runs_the_bare_net() -> None:
    spec = blazepose.blazepose_landmark_full()
    assert spec.outputs == blazepose.LANDMARK_OUTPUT_NAMES
    model = build_model(spec)
    crop, _ = BlazePoseLandmarker.crop(
        _rgb('media/darknet/person.jpg'), blazepose.Roi(233.0, 240.0, 326.0, 0.0)
    )
    result = model({'image': torch.from_numpy(crop)})
    assert result['landmarks'].shape == (1, 195)
    assert result['pose_flag'].shape == (1, 1)
    assert float(result['pose_flag']) > 0.9
    assert result['segmentation'].shape == (1, 256, 256, 1)
    assert result['heatmap'].shape == (1, 64, 64, 39)
    assert result['world_landmarks'].shape == (1, 117)


# ---------------------------------------------------------------------------------------
# Hand labels


def _hand_cases() -> list:
    # The labels are committed: a missing file is an error at collection, not a skip.
    cases = []
    for entry in json.loads(HAND_LABELS.read_text())['images']:
        if entry['asset'] not in IMAGES or not entry['people']:
            continue
        main = entry['people'][0]
        for name in main['keypoints']:
            marks = []
            if (entry['asset'], name) in KNOWN_MISSES:
                measured = KNOWN_MISSES[(entry['asset'], name)]
                marks = [pytest.mark.xfail(strict=True, reason=f'misses by {measured} px')]
            case_id = f'{Path(entry["asset"]).stem}-{name}'
            cases.append(pytest.param(entry['asset'], main, name, marks=marks, id=case_id))
    return cases


@pytest.mark.parametrize(('asset', 'person', 'name'), _hand_cases())
def test_keypoint_within_10_px_of_hand_label(
    outputs: dict, asset: str, person: dict, name: str
) -> None:
    result = outputs[asset]
    boxes = result['boxes'].numpy()
    assert len(boxes), 'nobody found'
    # The person is the detection whose box centre is nearest the labelled box centre.
    index = nearest_box(boxes, person['box'])
    predicted = result['keypoints'][index, COCO_KEYPOINT_NAMES.index(name), :2].numpy()
    error = float(np.linalg.norm(predicted - np.asarray(person['keypoints'][name])))
    assert error <= MAX_KEYPOINT_ERROR_PX, f'{name}: {error:.1f} px from the hand label'


@pytest.mark.parametrize('backend', ['torch', 'litert'])
def test_landmarker_decodes_the_net_without_segmentation_as_the_whole_net(backend: str) -> None:
    image = _rgb('media/darknet/person.jpg')
    roi = blazepose.Roi(233.0, 240.0, 326.0, 0.1)
    pruned = blazepose.load_landmark_net(backend)
    assert pruned.output_names == ('Identity', 'Identity_1', 'Identity_3', 'Identity_4')
    whole = load_tflite_backend(asset_path(blazepose.LANDMARK_ASSET), backend)
    assert len(whole.output_names) == len(blazepose.LANDMARK_OUTPUT_NAMES)
    fast = BlazePoseLandmarker(model=pruned).landmarks(image, roi)
    full = BlazePoseLandmarker(model=whole).landmarks(image, roi)
    assert fast.pose_score > 0.9
    assert fast.pose_score == pytest.approx(full.pose_score, abs=1e-6)
    np.testing.assert_allclose(fast.points, full.points, atol=1e-3)
    np.testing.assert_allclose(fast.visibility, full.visibility, atol=1e-6)
    np.testing.assert_allclose(fast.world, full.world, atol=1e-6)


def test_landmarker_refuses_outputs_of_another_net() -> None:
    _, matrix = BlazePoseLandmarker.crop(
        _rgb('media/darknet/person.jpg'), blazepose.Roi(233.0, 240.0, 326.0, 0.0)
    )
    with pytest.raises(ValueError, match='gave 2 outputs'):
        BlazePoseLandmarker(model=blazepose.load_landmark_net()).decode(
            [torch.zeros(1, 195), torch.zeros(1, 1)], matrix, blazepose.Roi(1, 1, 1, 0)
        )
