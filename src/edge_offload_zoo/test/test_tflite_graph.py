# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The TFLite graph loader against LiteRT on real images, and its error handling.

LiteRT (``ai-edge-litert``) is a pinned dependency: if it cannot be imported this module
fails to collect, which fails the run instead of skipping the comparison.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import tflite
import torch
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from edge_offload.assets import asset_path
from edge_offload_zoo import blazepose
from edge_offload_zoo.tflite_graph import (
    SUPPORTED_OPS,
    TfliteGraphError,
    TfliteGraphModule,
    check_supported,
    keep_outputs,
    load_tflite,
)

torch.set_num_threads(1)

IMAGES = ('media/opencv/messi5.jpg', 'media/darknet/person.jpg')
# |torch - LiteRT| <= ATOL + RTOL * |LiteRT| per element: RTOL (~17 float32 ulps) covers the
# large regressors, where two float32 backends summing in another order differ by ~1e-3.
ATOL = 1e-3
RTOL = 2e-6


def _assert_close(got: np.ndarray, expected: np.ndarray, label: str) -> None:
    assert got.shape == expected.shape, label
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL, err_msg=label)


def _rgb(asset: str) -> np.ndarray:
    return np.ascontiguousarray(cv2.imread(str(asset_path(asset)))[:, :, ::-1])


def _litert(path, x: np.ndarray, *, xnnpack: bool) -> dict[str, np.ndarray]:
    # Without default delegates LiteRT runs TFLite's own builtin kernels; with them,
    # XNNPack (what MediaPipe deploys). Both are compared below.
    options = (
        {}
        if xnnpack
        else {'experimental_op_resolver_type': OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES}
    )
    interpreter = Interpreter(model_path=str(path), num_threads=1, **options)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]['index'], x)
    interpreter.invoke()
    return {
        d['name']: interpreter.get_tensor(d['index']) for d in interpreter.get_output_details()
    }


def _torch(module: TfliteGraphModule, x: np.ndarray) -> dict[str, np.ndarray]:
    with torch.inference_mode():
        outputs = module(torch.from_numpy(x))
    return {name: out.numpy() for name, out in zip(module.output_names, outputs, strict=True)}


@pytest.fixture(scope='module')
def detector() -> TfliteGraphModule:
    return load_tflite(asset_path(blazepose.DETECTOR_ASSET))


@pytest.fixture(scope='module')
def landmark() -> TfliteGraphModule:
    return load_tflite(asset_path(blazepose.LANDMARK_ASSET))


@pytest.fixture(scope='module')
def detector_inputs() -> dict[str, np.ndarray]:
    return {asset: blazepose.BlazePoseDetector.letterbox(_rgb(asset))[0] for asset in IMAGES}


@pytest.fixture(scope='module')
def roi_crops(detector: TfliteGraphModule) -> dict[str, np.ndarray]:
    """Landmark-model inputs cropped from each image's best detection, as the pipeline does."""
    wrapped = blazepose.BlazePoseDetector(detector)
    crops = {}
    for asset in IMAGES:
        image = _rgb(asset)
        best = wrapped.detect(image)[0]
        crops[asset] = blazepose.BlazePoseLandmarker.crop(image, best.roi())[0]
    return crops


def test_io_names_and_shapes(detector: TfliteGraphModule, landmark: TfliteGraphModule) -> None:
    assert detector.input_shapes == ((1, 224, 224, 3),)
    assert detector.output_names == ('Identity', 'Identity_1')
    assert landmark.input_shapes == ((1, 256, 256, 3),)
    assert landmark.output_names == (
        'Identity', 'Identity_1', 'Identity_2', 'Identity_3', 'Identity_4',
    )  # fmt: skip


@pytest.mark.parametrize('xnnpack', [False, True], ids=['builtin', 'xnnpack'])
@pytest.mark.parametrize('asset', IMAGES)
def test_detector_matches_litert(
    detector: TfliteGraphModule, detector_inputs: dict, asset: str, xnnpack: bool
) -> None:
    x = detector_inputs[asset]
    expected = _litert(asset_path(blazepose.DETECTOR_ASSET), x, xnnpack=xnnpack)
    got = _torch(detector, x)
    # Regressors reach ~800 (junk anchors), where float32 rounding alone is ~1e-4 and
    # XNNPACK's summation order differed from torch's by 1.007e-3 on one CI machine.
    for name in ('Identity', 'Identity_1'):
        _assert_close(got[name], expected[name], f'{asset} {name}')


@pytest.mark.parametrize('xnnpack', [False, True], ids=['builtin', 'xnnpack'])
@pytest.mark.parametrize('asset', IMAGES)
def test_landmark_model_matches_litert(
    landmark: TfliteGraphModule, roi_crops: dict, asset: str, xnnpack: bool
) -> None:
    x = roi_crops[asset]
    expected = _litert(asset_path(blazepose.LANDMARK_ASSET), x, xnnpack=xnnpack)
    got = _torch(landmark, x)
    for name in ('Identity', 'Identity_1', 'Identity_3', 'Identity_4'):  # landmarks, flag,
        _assert_close(got[name], expected[name], f'{asset} {name}')  # heatmaps, world landmarks
    assert float(expected['Identity_1'].reshape(-1)[0]) > 0.9  # a real person in the crop
    # Segmentation logits are unbounded (|x| up to ~1.7e3 in the background), so float32
    # rounding differs by ~0.1-0.3 there; hold them to 1e-3 of their range instead. The
    # mask is sigmoid(logit): saturated wherever those absolute differences occur.
    seg, ref = got['Identity_2'], expected['Identity_2']
    scale = float(np.abs(ref).max())
    assert float(np.abs(seg - ref).max()) <= 1e-3 * scale
    assert np.array_equal(seg > 0, ref > 0) or np.mean((seg > 0) != (ref > 0)) < 1e-4


def test_state_dict_round_trip(detector: TfliteGraphModule, detector_inputs: dict) -> None:
    state = detector.state_dict()
    assert state
    assert all(t.dtype == torch.float32 for t in state.values())
    # Every weight (fp16, sparse) was folded to a dense float32 buffer: 2.96M parameters.
    assert sum(t.numel() for t in state.values()) > 2_900_000
    fresh = load_tflite(asset_path(blazepose.DETECTOR_ASSET), validate=False)
    for tensor in fresh.state_dict().values():
        tensor.zero_()
    x = detector_inputs[IMAGES[0]]
    assert not np.allclose(_torch(fresh, x)['Identity'], _torch(detector, x)['Identity'])
    fresh.load_state_dict(state)
    np.testing.assert_array_equal(_torch(fresh, x)['Identity'], _torch(detector, x)['Identity'])


def test_input_shape_is_checked(detector: TfliteGraphModule) -> None:
    with pytest.raises(ValueError, match='shape'):
        detector(torch.zeros(1, 3, 224, 224))


# ---------------------------------------------------------------------------------------
# Errors


def test_garbage_is_rejected() -> None:
    with pytest.raises(TfliteGraphError, match='TFL3'):
        load_tflite(b'not a tflite model at all')
    with pytest.raises(TfliteGraphError):
        load_tflite(b'\x00\x00\x00\x00TFL3' + bytes(range(256)) * 8)


@pytest.mark.parametrize('keep', [64, 4096, 0.5])
def test_truncated_file_is_rejected(keep: float) -> None:
    data = asset_path(blazepose.DETECTOR_ASSET).read_bytes()
    cut = int(len(data) * keep) if isinstance(keep, float) else keep
    with pytest.raises(TfliteGraphError):
        load_tflite(data[:cut])


def test_corrupted_metadata_loads_or_raises_tflite_error() -> None:
    # Byte flips in the flatbuffer tables (the file's tail; the head is weight data) must
    # end in a module or in TfliteGraphError: no other exception, no runaway allocation.
    data = asset_path(blazepose.DETECTOR_ASSET).read_bytes()
    rng = np.random.default_rng(1234)
    for _ in range(40):
        corrupted = np.frombuffer(data, dtype=np.uint8).copy()
        positions = rng.integers(len(data) - 60_000, len(data), size=8)
        corrupted[positions] = rng.integers(0, 256, size=8)
        try:
            load_tflite(bytes(corrupted))
        except TfliteGraphError:
            pass


def test_missing_file_is_a_tflite_error(tmp_path) -> None:
    with pytest.raises(TfliteGraphError, match='cannot read'):
        load_tflite(tmp_path / 'absent.tflite')


def _patch_opcode(data: bytes, old: int, new: int) -> bytes:
    """Rewrite every OperatorCode ``old`` to ``new`` (both code fields, in place)."""
    import tflite

    model = tflite.Model.GetRootAsModel(data, 0)
    patched = bytearray(data)
    found = False
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) != old:
            continue
        table = code._tab
        deprecated, builtin = table.Offset(4), table.Offset(10)  # vtable slots 0 and 3
        # Both code fields are stored for a non-zero code.
        assert deprecated
        assert builtin
        patched[table.Pos + deprecated] = new
        patched[table.Pos + builtin : table.Pos + builtin + 4] = new.to_bytes(4, 'little')
        found = True
    assert found
    return bytes(patched)


def test_unsupported_op_is_named() -> None:
    import tflite

    data = asset_path(blazepose.DETECTOR_ASSET).read_bytes()
    crafted = _patch_opcode(
        data, tflite.BuiltinOperator.DEPTH_TO_SPACE, tflite.BuiltinOperator.L2_NORMALIZATION
    )
    with pytest.raises(TfliteGraphError, match='unsupported TFLite op L2_NORMALIZATION'):
        load_tflite(crafted)


def test_dispatch_accepts_exactly_the_supported_set() -> None:
    for name in SUPPORTED_OPS:
        check_supported(name)
    for name in ('MUL', 'FULLY_CONNECTED', 'CUSTOM(TFLite_Detection_PostProcess)'):
        with pytest.raises(TfliteGraphError, match=name.replace('(', r'\(').replace(')', r'\)')):
            check_supported(name)


# The landmark net without its segmentation head, as the people pipelines run it.
WITHOUT_SEGMENTATION = ('Identity', 'Identity_1', 'Identity_3', 'Identity_4')


def _operator_count(data: bytes) -> int:
    return tflite.Model.GetRootAsModel(data, 0).Subgraphs(0).OperatorsLength()


def test_keep_outputs_runs_fewer_operators_and_gives_the_same_outputs(roi_crops: dict) -> None:
    whole = asset_path(blazepose.LANDMARK_ASSET).read_bytes()
    pruned = keep_outputs(whole, WITHOUT_SEGMENTATION)
    # 46 of the 332 operators compute only the 256x256 segmentation mask.
    assert _operator_count(pruned) == 286 < _operator_count(whole) == 332
    module = load_tflite(pruned)
    assert module.output_names == WITHOUT_SEGMENTATION
    interpreter = Interpreter(model_content=pruned, num_threads=1)
    interpreter.allocate_tensors()
    assert sorted(d['name'] for d in interpreter.get_output_details()) == list(
        WITHOUT_SEGMENTATION
    )
    for asset, x in roi_crops.items():
        expected = _litert(asset_path(blazepose.LANDMARK_ASSET), x, xnnpack=True)
        interpreter.set_tensor(interpreter.get_input_details()[0]['index'], x)
        interpreter.invoke()
        for detail in interpreter.get_output_details():
            # The same kernels on the same operators: bit for bit.
            got = interpreter.get_tensor(detail['index'])
            assert np.array_equal(got, expected[detail['name']]), f'{asset} {detail["name"]}'
        ported = _torch(module, x)
        for name in WITHOUT_SEGMENTATION:
            _assert_close(ported[name], expected[name], f'{asset} {name} (torch port)')


def test_keep_outputs_of_every_output_keeps_every_operator() -> None:
    whole = asset_path(blazepose.LANDMARK_ASSET).read_bytes()
    names = load_tflite(whole, validate=False).output_names
    assert _operator_count(keep_outputs(whole, names)) == _operator_count(whole)
    # The detector's two outputs share all of its operators but the last two heads.
    detector = asset_path(blazepose.DETECTOR_ASSET).read_bytes()
    scores_only = keep_outputs(detector, ['Identity_1'])
    assert load_tflite(scores_only).output_names == ('Identity_1',)
    assert _operator_count(scores_only) < _operator_count(detector)


@pytest.mark.parametrize('names', [[], ['Identity_9'], ['Identity', 'segmentation']])
def test_keep_outputs_refuses_unknown_names(names: list[str]) -> None:
    with pytest.raises(TfliteGraphError, match='not among'):
        keep_outputs(asset_path(blazepose.LANDMARK_ASSET), names)


def test_keep_outputs_refuses_what_is_not_a_model(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(TfliteGraphError, match='TFL3'):
        keep_outputs(b'not a tflite model at all', ['Identity'])
    with pytest.raises(TfliteGraphError, match='cannot read'):
        keep_outputs(tmp_path / 'absent.tflite', ['Identity'])
