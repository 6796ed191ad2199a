# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The LiteRT backend of BlazePose's nets against the torch port, on real images.

Tolerances, measured on messi5.jpg, person.jpg and the HOG people of vtest.avi frames 0,
15, 30 and 45 (both backends on 1 thread, XNNPACK): the two runtimes sum in another
order, so differences scale with each output's range. Per output, max |torch - LiteRT|
over the output's largest magnitude stayed below 2.1e-6 for the detector's two outputs,
and for the landmark net's below 2.3e-5 (landmarks), 5.4e-4 (segmentation logits, up to
~1.6e3 in the background), 7.3e-6 (heatmaps), 5.3e-5 (world landmarks; pose flag:
1.7e-5 absolute). Crops without a person (pose flag ~0) reached 1.5e-4, 3.2e-3, 1.6e-5
and 1.7e-4. The limits below are about 10x the people figures and cover the no-person
ones. After post-processing (24 landmarker calls: 6 people, first- and second-pass ROIs, with and
without the flip test): landmarks within 6.3e-4 px, pose flag 8e-6, visibility 1.8e-5,
world landmarks 3.5e-5 m; detections: scores 5e-8, boxes 4e-6 px, keypoints 2.3e-5 px.
"""

from __future__ import annotations

import threading

import cv2
import numpy as np
import pytest
import tflite
import torch

from edge_offload.assets import asset_path
from edge_offload_zoo import blazepose
from edge_offload_zoo.blazepose import BlazePoseDetector, BlazePoseLandmarker, Roi
from edge_offload_zoo.litert_backend import (
    BACKENDS,
    LiteRtModule,
    load_litert,
    load_tflite_backend,
)
from edge_offload_zoo.tflite_graph import TfliteGraphError, TfliteGraphModule, load_tflite

torch.set_num_threads(1)

IMAGES = ('media/opencv/messi5.jpg', 'media/darknet/person.jpg')
VIDEO = 'media/opencv/vtest.avi'
# max |torch - LiteRT| <= limit * max |torch| per output (pose flag: absolute).
DETECTOR_LIMITS = {'Identity': 2e-5, 'Identity_1': 2e-5}  # regressors, score logits
LANDMARK_LIMITS = {
    'Identity': 2e-4,  # 39 x 5 landmarks (crop px, visibility/presence logits)
    'Identity_2': 5e-3,  # segmentation logits
    'Identity_3': 1e-4,  # heatmaps
    'Identity_4': 5e-4,  # world landmarks (m)
}
POSE_FLAG_LIMIT = 2e-4
LANDMARK_PX = 0.05  # BlazePoseLandmarker landmarks, image px (measured <= 6.3e-4)
SCORE_LIMIT = 1e-4  # pose flag, visibility, detection scores (measured <= 1.8e-5)
DETECTION_PX = 0.01  # detection boxes and keypoints (measured <= 2.3e-5)


def _rgb(asset: str) -> np.ndarray:
    return np.ascontiguousarray(cv2.imread(str(asset_path(asset)))[:, :, ::-1])


def _vtest_frame() -> np.ndarray:
    capture = cv2.VideoCapture(str(asset_path(VIDEO)))
    try:
        ok, frame = capture.read()
    finally:
        capture.release()
    assert ok
    return np.ascontiguousarray(frame[:, :, ::-1])


def _run(module: torch.nn.Module, x: np.ndarray) -> tuple[torch.Tensor, ...]:
    with torch.inference_mode():
        return module(torch.from_numpy(x))


@pytest.fixture(scope='module')
def torch_nets() -> dict[str, TfliteGraphModule]:
    return {
        'detector': load_tflite(asset_path(blazepose.DETECTOR_ASSET)),
        'landmark': load_tflite(asset_path(blazepose.LANDMARK_ASSET)),
    }


@pytest.fixture(scope='module')
def litert_nets() -> dict[str, LiteRtModule]:
    return {
        'detector': load_litert(asset_path(blazepose.DETECTOR_ASSET)),
        'landmark': load_litert(asset_path(blazepose.LANDMARK_ASSET)),
    }


@pytest.fixture(scope='module')
def scenes(torch_nets: dict) -> list[tuple[str, np.ndarray, Roi]]:
    """(label, image, ROI) of real people: detector ROIs on the photos, HOG on vtest.avi."""
    detector = BlazePoseDetector(torch_nets['detector'])
    found = []
    for asset in IMAGES:
        image = _rgb(asset)
        found.append((asset, image, detector.detect(image)[0].roi()))
    frame = _vtest_frame()
    landmarker = BlazePoseLandmarker(torch_nets['landmark'])
    for index, ((x0, y0, x1, y1), _) in enumerate(blazepose.hog_people(frame)):
        roi = Roi((x0 + x1) / 2, (y0 + y1) / 2, y1 - y0, 0.0)
        if landmarker.landmarks(frame, roi).pose_score >= 0.5:  # people only
            found.append((f'vtest.avi frame 0 HOG {index}', frame, roi))
    assert len(found) >= 4
    return found


def _assert_within(got: torch.Tensor, expected: torch.Tensor, limit: float, label: str) -> None:
    assert got.dtype == torch.float32, label
    assert got.shape == expected.shape, label
    scale = float(expected.abs().max())
    error = float((got - expected).abs().max())
    assert error <= limit * scale, f'{label}: max |diff| {error:.3g} > {limit:g} x {scale:.3g}'


# ---------------------------------------------------------------------------------------
# Raw outputs


def test_io_names_match_the_torch_port(torch_nets: dict, litert_nets: dict) -> None:
    for key in ('detector', 'landmark'):
        ported, litert = torch_nets[key], litert_nets[key]
        assert litert.input_names == ported.input_names
        assert litert.output_names == ported.output_names
        assert litert.input_shapes == ported.input_shapes
        assert litert.num_threads == 1
        assert litert.delegated  # XNNPACK took the graph


@pytest.mark.parametrize('asset', [*IMAGES, VIDEO])
def test_detector_outputs_match(torch_nets: dict, litert_nets: dict, asset: str) -> None:
    image = _vtest_frame() if asset == VIDEO else _rgb(asset)
    x = BlazePoseDetector.letterbox(image)[0]
    got, expected = _run(litert_nets['detector'], x), _run(torch_nets['detector'], x)
    assert len(got) == len(expected) == 2
    for name, out, ref in zip(torch_nets['detector'].output_names, got, expected, strict=True):
        _assert_within(out, ref, DETECTOR_LIMITS[name], f'{asset} {name}')


def test_landmark_outputs_match(torch_nets: dict, litert_nets: dict, scenes: list) -> None:
    names = torch_nets['landmark'].output_names
    for label, image, roi in scenes:
        mirrored = Roi(image.shape[1] - roi.x_center, roi.y_center, roi.size, -roi.rotation)
        # The flip test feeds mirrored crops too.
        for frame, where in ((image, roi), (np.ascontiguousarray(image[:, ::-1]), mirrored)):
            x = BlazePoseLandmarker.crop(frame, where)[0]
            got, expected = _run(litert_nets['landmark'], x), _run(torch_nets['landmark'], x)
            assert len(got) == len(expected) == 5
            for name, out, ref in zip(names, got, expected, strict=True):
                if name == 'Identity_1':
                    assert out.shape == ref.shape == (1, 1)
                    assert abs(float(out) - float(ref)) <= POSE_FLAG_LIMIT, label
                else:
                    _assert_within(out, ref, LANDMARK_LIMITS[name], f'{label} {name}')


def test_output_order_follows_the_file() -> None:
    """Outputs are matched by tensor index: reversing the file's output list reverses both."""
    data = bytearray(asset_path(blazepose.DETECTOR_ASSET).read_bytes())
    subgraph = tflite.Model.GetRootAsModel(bytes(data), 0).Subgraphs(0)
    field = subgraph._tab.Offset(8)  # Subgraph.outputs
    start, count = subgraph._tab.Vector(field), subgraph._tab.VectorLen(field)
    indices = np.frombuffer(bytes(data[start : start + 4 * count]), '<i4')
    data[start : start + 4 * count] = indices[::-1].tobytes()
    ported, litert = load_tflite(bytes(data)), load_litert(bytes(data))
    assert ported.output_names == litert.output_names == ('Identity_1', 'Identity')
    x = BlazePoseDetector.letterbox(_rgb(IMAGES[0]))[0]
    got, expected = _run(litert, x), _run(ported, x)
    assert [tuple(t.shape) for t in got] == [(1, 2254, 1), (1, 2254, 12)]
    for name, out, ref in zip(litert.output_names, got, expected, strict=True):
        _assert_within(out, ref, DETECTOR_LIMITS[name], name)


def test_outputs_are_copies(litert_nets: dict, scenes: list) -> None:
    net = litert_nets['landmark']
    first = _run(net, BlazePoseLandmarker.crop(scenes[0][1], scenes[0][2])[0])
    kept = [t.clone() for t in first]
    _run(net, BlazePoseLandmarker.crop(scenes[1][1], scenes[1][2])[0])
    for out, ref in zip(first, kept, strict=True):
        assert torch.equal(out, ref)


# ---------------------------------------------------------------------------------------
# Through BlazePose's pre- and post-processing


class _Recorder(torch.nn.Module):
    """A landmark net that keeps the raw landmarks (output 0) of every call."""

    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__()
        self.net = net
        self.raw: list[np.ndarray] = []

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outputs = self.net(x)
        self.raw.append(outputs[0].reshape(-1, 5)[:, :2].numpy().copy())
        return outputs


def _window_moved(ported: _Recorder, litert: _Recorder) -> np.ndarray:
    """Landmarks whose heatmap-refinement window differs between the backends' last call.

    refine_with_heatmap centres a 7x7 window on the heatmap cell (4x4 crop px) that a raw
    landmark falls in. Where the two backends' raw landmarks (~1e-4 px apart) straddle a
    cell edge, the refined landmark jumps by up to a few px. None of the ROIs here does so
    on the machine that set the limits, but XNNPACK picks its kernels per CPU, so such
    landmarks are counted rather than failed.
    """
    cell = blazepose.LANDMARK_SIZE / 64  # 64x64 heatmaps
    moved = [
        np.any(np.floor(a / cell) != np.floor(b / cell), axis=1)
        for a, b in zip(ported.raw, litert.raw, strict=True)
    ]
    ported.raw.clear()
    litert.raw.clear()
    if len(moved) == 2:  # flip test: the mirrored pass, in the unmirrored landmark order
        return moved[0] | moved[1][list(blazepose._MIRROR_INDEX)]
    return moved[0]


def test_landmarker_matches(torch_nets: dict, litert_nets: dict, scenes: list) -> None:
    recorders = _Recorder(torch_nets['landmark']), _Recorder(litert_nets['landmark'])
    ported, litert = (BlazePoseLandmarker(model=recorder) for recorder in recorders)
    # Each scene's ROI and the one the pipeline's second pass (refine_roi) would use.
    rois = []
    for label, image, roi in scenes:
        second = ported.landmarks(image, roi, flip_test=True).next_roi()
        rois += [(label, image, roi), (f'{label} second pass', image, second)]
    moved = 0
    for label, image, roi in rois:
        for flip_test in (False, True):
            where = f'{label} flip_test={flip_test}'
            for recorder in recorders:
                recorder.raw.clear()
            got = litert.landmarks(image, roi, flip_test=flip_test)
            expected = ported.landmarks(image, roi, flip_test=flip_test)
            exempt = _window_moved(*recorders)
            moved += int(exempt.sum())
            errors = np.abs(got.points[:, :2] - expected.points[:, :2]).max(axis=1)
            assert float(errors[~exempt].max()) <= LANDMARK_PX, f'{where}: {errors.max():.3g} px'
            assert abs(got.pose_score - expected.pose_score) <= SCORE_LIMIT, where
            np.testing.assert_allclose(got.visibility, expected.visibility, atol=SCORE_LIMIT)
            np.testing.assert_allclose(got.world, expected.world, atol=1e-3)
    assert moved <= 0.01 * len(rois) * 2 * blazepose.NUM_LANDMARKS, moved


@pytest.mark.parametrize('asset', IMAGES)
def test_detector_detections_match(torch_nets: dict, litert_nets: dict, asset: str) -> None:
    image = _rgb(asset)
    got = BlazePoseDetector(model=litert_nets['detector']).detect(image)
    expected = BlazePoseDetector(model=torch_nets['detector']).detect(image)
    assert len(got) == len(expected) >= 1
    for d, e in zip(got, expected, strict=True):
        assert abs(d.score - e.score) <= SCORE_LIMIT
        np.testing.assert_allclose(d.box, e.box, atol=DETECTION_PX)
        np.testing.assert_allclose(d.keypoints, e.keypoints, atol=DETECTION_PX)


# ---------------------------------------------------------------------------------------
# Threads


def test_concurrent_calls_give_the_single_thread_outputs(litert_nets: dict, scenes: list) -> None:
    """Two threads on one module (serialised by its lock) and on a module each."""
    shared = litert_nets['landmark']
    own = load_litert(asset_path(blazepose.LANDMARK_ASSET))
    crops = [BlazePoseLandmarker.crop(image, roi)[0] for _, image, roi in scenes[:2]]
    expected = [_run(shared, crop) for crop in crops]
    failures: list[str] = []
    start = threading.Barrier(2)

    def work(worker: int, module: LiteRtModule) -> None:
        start.wait()
        for step in range(16):
            which = (worker + step) % 2  # both threads alternate inputs
            try:
                got = _run(module, crops[which])
            except Exception as error:  # noqa: BLE001 - reported by the main thread
                failures.append(f'worker {worker} step {step}: {error!r}')
                return
            if not all(torch.equal(g, e) for g, e in zip(got, expected[which], strict=True)):
                failures.append(f'worker {worker} step {step}: other outputs')

    for modules in ((shared, shared), (shared, own)):
        threads = [threading.Thread(target=work, args=(i, m)) for i, m in enumerate(modules)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not any(thread.is_alive() for thread in threads)
    assert not failures


# ---------------------------------------------------------------------------------------
# Errors and the backend switch


def test_bad_input_is_a_value_error(litert_nets: dict) -> None:
    net = litert_nets['detector']
    with pytest.raises(ValueError, match='shape'):
        net(torch.zeros(1, 3, 224, 224))
    with pytest.raises(ValueError, match='shape'):
        net(torch.zeros(2, 224, 224, 3))
    with pytest.raises(ValueError, match='float'):
        net(torch.zeros(1, 224, 224, 3, dtype=torch.uint8))
    with pytest.raises(ValueError, match='torch.Tensor'):
        net(np.zeros((1, 224, 224, 3), np.float32))
    # Other float dtypes are converted, as the torch port does.
    assert net(torch.zeros(1, 224, 224, 3, dtype=torch.float64))[0].dtype == torch.float32


def test_missing_file_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(TfliteGraphError, match='cannot read'):
        load_litert(tmp_path / 'absent.tflite')
    with pytest.raises(TfliteGraphError, match='cannot read'):
        load_tflite_backend(tmp_path / 'absent.tflite', 'litert')


def test_corrupt_files_raise_tflite_errors() -> None:
    data = asset_path(blazepose.DETECTOR_ASSET).read_bytes()
    for blob in (b'not a tflite model at all', data[:4096], data[: len(data) // 2]):
        with pytest.raises(TfliteGraphError):
            load_litert(blob)
    # Byte flips in the flatbuffer tables: seeds 1, 23, 28, 31 and 37 crash LiteRT's own
    # loader (segfault); the parser in front of it must reject them first.
    for seed in range(1, 41):
        rng = np.random.default_rng(seed)
        corrupted = np.frombuffer(data, dtype=np.uint8).copy()
        positions = rng.integers(len(data) - 60_000, len(data), size=8)
        corrupted[positions] = rng.integers(0, 256, size=8)
        try:
            load_litert(bytes(corrupted))
        except TfliteGraphError:
            pass


def test_backend_switch() -> None:
    path = asset_path(blazepose.DETECTOR_ASSET)
    assert BACKENDS == ('torch', 'litert')
    assert isinstance(load_tflite_backend(path, 'torch'), TfliteGraphModule)
    litert = load_tflite_backend(path, 'litert', num_threads=2)
    assert isinstance(litert, LiteRtModule)
    assert litert.num_threads == 2
    with pytest.raises(ValueError, match="'torch', 'litert'"):
        load_tflite_backend(path, 'onnx')
    for threads in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match='num_threads'):
            load_litert(path, num_threads=threads)
