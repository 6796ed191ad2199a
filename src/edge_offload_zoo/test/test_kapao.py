# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Tests of the plain-torch KAPAO-S/M/L networks, their weights loading and post-processing."""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn

from edge_offload.models import build_model
from edge_offload_zoo.kapao import (
    ANCHORS,
    KapaoNet,
    KapaoPeople,
    KapaoPostprocessConfig,
    KapaoWeightsError,
    batched_nms,
    fuse_keypoint_objects,
    kapao_l,
    kapao_l_net,
    kapao_m,
    kapao_m_net,
    kapao_postprocess,
    kapao_s,
    kapao_s_net,
    letterbox_shape,
    load_kapao_state_dict,
    nms,
    non_max_suppression_kp,
    scale_coords,
)


@pytest.fixture(autouse=True, scope='module')
def _one_thread():
    # The test machines share two cores between several workers.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _net(variant: str = 's', seed: int = 0) -> KapaoNet:
    torch.manual_seed(seed)
    return KapaoNet(variant).eval()


# ---------------------------------------------------------------------------------------
# Layout of the official checkpoints (derived from models/yolov5s6.yaml of the KAPAO repo:
# width 0.5 -> channels 32/64/128/256/384/512, depth 0.33 -> C3 repeats 1 or 3).

S_SHAPES = {
    'model.0.conv.conv.weight': (32, 12, 3, 3),  # Focus: 4 * 3 channels in
    'model.0.conv.bn.weight': (32,),
    'model.0.conv.bn.running_var': (32,),
    'model.1.conv.weight': (64, 32, 3, 3),
    'model.1.bn.bias': (64,),
    'model.2.cv1.conv.weight': (32, 64, 1, 1),
    'model.2.cv2.conv.weight': (32, 64, 1, 1),
    'model.2.cv3.conv.weight': (64, 64, 1, 1),
    'model.2.m.0.cv1.conv.weight': (32, 32, 1, 1),
    'model.2.m.0.cv2.conv.weight': (32, 32, 3, 3),
    'model.4.m.2.cv2.conv.weight': (64, 64, 3, 3),  # 9 * 0.33 -> 3 bottlenecks
    'model.9.conv.weight': (512, 384, 3, 3),  # P6/64
    'model.10.cv1.conv.weight': (256, 512, 1, 1),  # SPP(k=3, 5, 7)
    'model.10.cv2.conv.weight': (512, 1024, 1, 1),
    'model.15.cv1.conv.weight': (192, 768, 1, 1),
    'model.32.cv3.conv.weight': (512, 512, 1, 1),
    'model.33.anchors': (4, 3, 2),
    'model.33.anchor_grid': (4, 1, 3, 1, 1, 2),
}


def test_state_dict_follows_the_official_layout():
    net = _net('s')
    state = net.state_dict()
    for key, shape in S_SHAPES.items():
        assert tuple(state[key].shape) == shape, key
    for level, channels in enumerate((128, 256, 384, 512)):
        assert tuple(state[f'model.33.m.{level}.weight'].shape) == (3 * 57, channels, 1, 1)
        assert tuple(state[f'model.33.m.{level}.bias'].shape) == (3 * 57,)
    assert 'model.33.m.4.weight' not in state
    assert 'model.4.m.3.cv1.conv.weight' not in state  # only 3 bottlenecks
    assert not [k for k in state if k.startswith(('model.13.', 'model.14.'))]  # Upsample, Concat
    assert len(state) == 472
    pixels = torch.tensor(ANCHORS, dtype=torch.float32).view(4, 3, 2)
    strides = torch.tensor([8.0, 16.0, 32.0, 64.0]).view(4, 1, 1)
    assert torch.equal(state['model.33.anchors'], pixels / strides)
    assert torch.equal(state['model.33.anchor_grid'], pixels.view(4, 1, 3, 1, 1, 2))
    assert all(m.eps == 1e-3 for m in net.modules() if isinstance(m, nn.BatchNorm2d))


def test_forward_decodes_like_the_official_detect():
    net = _net('s')
    captured = {}
    net.model[-1].register_forward_pre_hook(lambda _m, args: captured.update(xs=list(args[0])))
    image = torch.rand(1, 3, 128, 192, generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        out = net(image)
        assert out.shape == (1, 3 * (16 * 24 + 8 * 12 + 4 * 6 + 2 * 3), 57)
        assert torch.all((out[..., 4:23] >= 0) & (out[..., 4:23] <= 1))
        # Level 0 (stride 8), anchor 1, cell (y=2, x=3), decoded by hand.
        detect = net.model[-1]
        raw = detect.m[0](captured['xs'][0]).view(1, 3, 57, 16, 24).permute(0, 1, 3, 4, 2)
        y = raw[0, 1, 2, 3].sigmoid()
        anchor = torch.tensor(ANCHORS[0][2:4], dtype=torch.float32)
        cell = torch.tensor([3.0, 2.0])
        expected_xy = (y[0:2] * 2 - 0.5 + cell) * 8
        expected_wh = (y[2:4] * 2) ** 2 * anchor
        expected_kp = (y[23:].view(17, 2) * 4 - 2) * anchor + cell * 8
        row = out[0, 1 * 16 * 24 + 2 * 24 + 3]
    torch.testing.assert_close(row[0:2], expected_xy)
    torch.testing.assert_close(row[2:4], expected_wh)
    torch.testing.assert_close(row[4:23], y[4:23])
    torch.testing.assert_close(row[23:].view(17, 2), expected_kp)


def test_rejects_input_sides_that_are_not_multiples_of_64():
    net = _net('s')
    with pytest.raises(ValueError, match='multiples of 64'):
        net(torch.rand(1, 3, 100, 128))
    with pytest.raises(ValueError, match='multiples of 64'):
        net(torch.rand(1, 3, 64, 96))
    with pytest.raises(ValueError, match=r'\(batch, 3, H, W\)'):
        net(torch.rand(1, 1, 64, 64))


# ---------------------------------------------------------------------------------------
# Weights files.


def test_state_dict_round_trip_through_a_file(tmp_path):
    source = _net('s', seed=1)
    path = tmp_path / 'kapao_s.state_dict.pt'
    torch.save(source.state_dict(), path)
    target = _net('s', seed=2)
    image = torch.rand(1, 3, 128, 128, generator=torch.Generator().manual_seed(4))
    with torch.inference_mode():
        assert not torch.equal(source(image), target(image))
        assert load_kapao_state_dict(target, path) is target
        assert torch.equal(source(image), target(image))
    people = KapaoPeople('s', input_size=128).eval()
    load_kapao_state_dict(people, path)
    assert torch.equal(people.net.model[1].conv.weight, source.model[1].conv.weight)


def test_load_rejects_a_mismatched_file_clearly(tmp_path):
    state = _net('s').state_dict()
    del state['model.1.conv.weight']
    state['model.99.extra'] = torch.zeros(1)
    state['model.33.m.0.weight'] = torch.zeros(255, 128, 1, 1)  # an 80-class YOLOv5 head
    path = tmp_path / 'bad.pt'
    torch.save(state, path)
    with pytest.raises(KapaoWeightsError) as info:
        load_kapao_state_dict(_net('s'), path)
    message = str(info.value)
    assert 'missing keys (1): model.1.conv.weight' in message
    assert 'unexpected keys (1): model.99.extra' in message
    assert 'model.33.m.0.weight: file (255, 128, 1, 1) vs model (171, 128, 1, 1)' in message


def test_load_rejects_another_variant_and_pickled_models(tmp_path):
    with torch.device('meta'):
        medium = KapaoNet('m')
    path = tmp_path / 'm.pt'
    torch.save({k: torch.zeros(v.shape) for k, v in medium.state_dict().items()}, path)
    with pytest.raises(KapaoWeightsError, match='shape mismatches'):
        load_kapao_state_dict(_net('s'), path)
    pickled = tmp_path / 'pickled.pt'
    torch.save(nn.Linear(2, 2), pickled)  # like an official checkpoint: a pickled module
    with pytest.raises(KapaoWeightsError, match='not a plain state_dict'):
        load_kapao_state_dict(_net('s'), pickled)


# ---------------------------------------------------------------------------------------
# NMS.

BOXES = torch.tensor(
    [[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 11.0, 11.0], [20.0, 20.0, 30.0, 30.0], [0, 0, 10, 10.5]]
)
SCORES = torch.tensor([0.9, 0.8, 0.7, 0.95])


def test_nms_keeps_the_best_of_overlapping_boxes():
    # Box 3 overlaps box 0 (IoU 0.95) and box 1 (IoU 0.72); box 2 overlaps nothing.
    assert nms(BOXES, SCORES, 0.5).tolist() == [3, 2]
    assert nms(BOXES, SCORES, 0.8).tolist() == [3, 1, 2]  # box 1 survives a looser IoU
    assert nms(BOXES, SCORES, 0.5, max_det=1).tolist() == [3]
    assert nms(BOXES[:0], SCORES[:0], 0.5).shape == (0,)


def test_batched_nms_is_class_aware():
    classes = torch.tensor([0.0, 1.0, 0.0, 1.0])
    # Box 3 (class 1) no longer suppresses box 0 (class 0); it still suppresses box 1.
    assert batched_nms(BOXES, SCORES, classes, 0.5).tolist() == [3, 0, 2]


def _row(xywh, obj, cls, cls_score=0.95, keypoints=None):
    row = torch.full((57,), 0.01)
    row[0:4] = torch.tensor(xywh, dtype=torch.float32)
    row[4] = obj
    row[5 + cls] = cls_score
    row[23:] = 0.0 if keypoints is None else keypoints.flatten()
    return row


def test_non_max_suppression_kp_thresholds_classes_and_carries_keypoints():
    keypoints = torch.arange(34, dtype=torch.float32)
    prediction = torch.stack(
        [
            _row((50, 50, 20, 40), 0.9, 0, keypoints=keypoints),
            _row((51, 50, 20, 40), 0.8, 0),  # duplicate, suppressed
            _row((150, 50, 20, 40), 0.3, 0),  # conf 0.3 * 0.95 under the threshold
            _row((50, 50, 4, 4), 0.9, 6),  # a keypoint object
        ]
    )
    people = non_max_suppression_kp(prediction, 0.5, 0.45, classes=[0])
    assert people.shape == (1, 40)
    torch.testing.assert_close(people[0, :6], torch.tensor([40, 30, 60, 70, 0.9 * 0.95, 0]))
    assert torch.equal(people[0, 6:], keypoints)
    every = non_max_suppression_kp(prediction, 0.5, 0.45)
    assert sorted(every[:, 5].tolist()) == [0.0, 6.0]  # classes do not suppress each other
    with pytest.raises(ValueError, match='thresholds'):
        non_max_suppression_kp(prediction, 1.5, 0.45)


# ---------------------------------------------------------------------------------------
# Keypoint-object fusion and coordinates.


def _pose_keypoints() -> torch.Tensor:
    j = torch.arange(17, dtype=torch.float32)
    return torch.stack((100 + 5 * j, 60 + 8 * j), 1)


def test_keypoint_objects_replace_only_nearby_pose_keypoints_of_their_type():
    kps = _pose_keypoints()
    near = kps[5] + torch.tensor([3.0, 4.0])  # 5 px from left_shoulder (keypoint 5)
    far = kps[7] + torch.tensor([40.0, 0.0])  # 40 px from left_elbow, beyond 25 px
    prediction = torch.stack(
        [
            _row((128, 128, 100, 200), 0.95, 0, keypoints=kps),
            _row((*near.tolist(), 6, 6), 0.9, 1 + 5, cls_score=0.9),
            _row((*far.tolist(), 6, 6), 0.9, 1 + 7, cls_score=0.9),
        ]
    ).unsqueeze(0)
    boxes, scores, keypoints = kapao_postprocess(prediction, (256, 256))
    assert torch.equal(boxes, torch.tensor([[78.0, 28.0, 178.0, 228.0]]))
    torch.testing.assert_close(scores, torch.tensor([0.95 * 0.95]))
    assert keypoints.shape == (1, 17, 3)
    torch.testing.assert_close(keypoints[0, 5], torch.tensor([*near.tolist(), 0.81]))
    unchanged = [j for j in range(17) if j != 5]
    torch.testing.assert_close(keypoints[0, unchanged, :2], kps[unchanged])
    torch.testing.assert_close(keypoints[0, unchanged, 2], scores.expand(16))
    # KAPAO's own convention: the pose's keypoints score 0 unless fused.
    official = KapaoPostprocessConfig(zero_pose_keypoint_scores=True)
    _, _, zeroed = kapao_postprocess(prediction, (256, 256), config=official)
    torch.testing.assert_close(zeroed[0, 5], keypoints[0, 5])
    assert torch.all(zeroed[0, unchanged, 2] == 0)
    # Poses under conf_thres_kp_person take no keypoint objects.
    strict = KapaoPostprocessConfig(conf_thres_kp_person=0.95)
    _, _, kept = kapao_postprocess(prediction, (256, 256), config=strict)
    torch.testing.assert_close(kept[0, :, :2], kps)
    # Without keypoint objects the pose is returned as predicted.
    plain = KapaoPostprocessConfig(use_kp_dets=False)
    _, _, plain_kps = kapao_postprocess(prediction, (256, 256), config=plain)
    torch.testing.assert_close(plain_kps[0, :, :2], kps)


def test_fusion_picks_the_nearest_pose_and_the_higher_confidence():
    kps = _pose_keypoints()
    poses = torch.cat((torch.stack((kps, kps + 30)), torch.zeros(2, 17, 1)), -1)
    target = kps[0] + 30 + 2  # nearest to pose 1's nose
    kp_dets = torch.tensor(
        [
            [target[0] - 1, target[1] - 1, target[0] + 1, target[1] + 1, 0.8, 1.0],
            [target[0] - 2, target[1] - 1, target[0] + 2, target[1] + 1, 0.6, 1.0],  # weaker
        ]
    )
    fused = fuse_keypoint_objects(torch.tensor([0.9, 0.9]), poses, kp_dets, 0.2, 25.0)
    torch.testing.assert_close(fused[1, 0], torch.tensor([*target.tolist(), 0.8]))
    assert torch.equal(fused[0], poses[0])
    assert torch.equal(fused[1, 1:], poses[1, 1:])


def test_empty_results_have_the_right_shapes():
    boxes, scores, keypoints = kapao_postprocess(torch.zeros(1, 0, 57), (64, 64))
    assert (boxes.shape, scores.shape, keypoints.shape) == ((0, 4), (0,), (0, 17, 3))


def test_letterbox_and_mapping_back():
    assert letterbox_shape(480, 640, 640) == ((480, 640), (0, 0, 16, 16))
    assert letterbox_shape(120, 200, 256) == ((154, 256), (0, 0, 19, 19))
    assert letterbox_shape(480, 640, 640, auto=False) == ((480, 640), (0, 0, 80, 80))
    # (320, 256) in the 512x640 letterbox of a 480x640 image is (320, 240) there.
    mapped = scale_coords((512, 640), torch.tensor([[320.0, 256.0, -5.0, 700.0]]), (480, 640))
    assert mapped.tolist() == [[320.0, 240.0, 0.0, 480.0]]  # and clipped to the image


# ---------------------------------------------------------------------------------------
# The people pipeline.


def test_people_pipeline_shapes_with_random_weights():
    torch.manual_seed(0)
    people = KapaoPeople('s', input_size=256).eval()
    image = torch.randint(0, 256, (1, 3, 120, 200), dtype=torch.uint8)
    with torch.inference_mode():
        boxes, scores, keypoints = people(image)
    n = boxes.shape[0]
    assert n <= people.config.max_det
    assert (boxes.shape, scores.shape, keypoints.shape) == ((n, 4), (n,), (n, 17, 3))
    assert boxes.dtype == scores.dtype == keypoints.dtype == torch.float32


def test_people_pipeline_bounds_detections_and_maps_them_into_the_image():
    torch.manual_seed(0)
    config = KapaoPostprocessConfig(max_det=7, pre_nms_topk=500)
    people = KapaoPeople('s', input_size=256, config=config).eval()
    with torch.no_grad():  # force every anchor to be a confident pose object
        for conv in people.net.model[-1].m:
            conv.bias.view(3, 57)[:, 4:6] += 20.0
    image = torch.randint(0, 256, (1, 3, 120, 200), dtype=torch.uint8)
    start = time.perf_counter()
    with torch.inference_mode():
        boxes, scores, keypoints = people(image)
    assert time.perf_counter() - start < 10.0
    assert 1 <= boxes.shape[0] <= 7
    assert keypoints.shape == (boxes.shape[0], 17, 3)
    assert torch.all(scores > 0.7)
    assert torch.all((boxes[:, 0::2] >= 0) & (boxes[:, 0::2] <= 200))
    assert torch.all((boxes[:, 1::2] >= 0) & (boxes[:, 1::2] <= 120))
    assert torch.all((keypoints[..., 0] >= 0) & (keypoints[..., 0] <= 200))
    assert torch.all((keypoints[..., 1] >= 0) & (keypoints[..., 1] <= 120))


def test_people_pipeline_rejects_bad_inputs():
    with pytest.raises(ValueError, match='multiple of 64'):
        KapaoPeople('s', input_size=600)
    with pytest.raises(ValueError, match='unknown KAPAO variant'):
        KapaoPeople('x')
    people = KapaoPeople('s', input_size=128).eval()
    with pytest.raises(ValueError, match='uint8'):
        people(torch.rand(1, 3, 64, 64))
    with pytest.raises(ValueError, match='uint8'):
        people(torch.zeros(2, 3, 64, 64, dtype=torch.uint8))


# ---------------------------------------------------------------------------------------
# Sizes and the zoo entries.


def test_parameter_counts_match_the_paper():
    paper = {'s': 12.6e6, 'm': 35.8e6, 'l': 77.0e6}  # KAPAO paper / README
    counts = {'s': sum(p.numel() for p in _net('s').parameters())}
    for variant in ('m', 'l'):
        with torch.device('meta'):
            counts[variant] = sum(p.numel() for p in KapaoNet(variant).parameters())
    assert counts == {'s': 12_559_980, 'm': 35_755_404, 'l': 77_047_852}
    for variant, count in counts.items():
        assert abs(count - paper[variant]) / paper[variant] < 0.005


def test_zoo_specs():
    for factory, variant in ((kapao_s, 's'), (kapao_m, 'm'), (kapao_l, 'l')):
        spec = factory()
        assert spec.name == f'kapao_{variant}'
        assert spec.inputs['image'].shape == (1, 3, None, None)
        assert spec.inputs['image'].dtype == torch.uint8
        assert spec.outputs == ('boxes', 'scores', 'keypoints')
        assert not spec.trained
        assert 'random' in spec.description
    for factory, variant in ((kapao_s_net, 's'), (kapao_m_net, 'm'), (kapao_l_net, 'l')):
        spec = factory()
        assert spec.name == f'kapao_{variant}_net'
        assert spec.inputs['image'].shape == (1, 3, 640, 640)
        assert spec.inputs['image'].dtype == torch.float32
        assert spec.outputs == ('predictions',)
        assert not spec.trained
        assert 'random' in spec.description


def test_zoo_people_model_runs_through_loaded_model():
    model = build_model(kapao_s())
    image = torch.randint(0, 256, (1, 3, 48, 64), dtype=torch.uint8)
    outputs = model({'image': image})
    assert set(outputs) == {'boxes', 'scores', 'keypoints'}
    n = outputs['boxes'].shape[0]
    assert outputs['keypoints'].shape == (n, 17, 3)
    again = build_model(kapao_s())  # seeded: both ends build the same weights
    assert torch.equal(
        model.module.net.model[33].m[0].weight, again.module.net.model[33].m[0].weight
    )
