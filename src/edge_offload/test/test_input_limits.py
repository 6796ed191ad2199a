# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Inputs refused by their sizes alone, before any pixel is copied or a model runs.

Image headers against a byte limit, and the image sizes each model declares (``SizeLimits``).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from edge_offload.image_convert import (
    ImageFormatError,
    ImageTooLargeError,
    check_image_size,
    image_declared_bytes,
    image_tensor_shape,
)
from edge_offload.models import (
    InvalidInputError,
    ModelSpec,
    SizeLimits,
    TensorSpec,
    build_model,
    model_spec,
)

LIMITS = SizeLimits(max_side=4096, max_pixels=4096 * 2160, max_aspect_ratio=8.0)


# -- image headers ------------------------------------------------------------------------


def test_declared_bytes_is_the_largest_claim_of_the_header():
    # 8000x8000 rgb8: every field agrees.
    assert image_declared_bytes(8000, 8000, 'rgb8', 24000, 192_000_000) == 192_000_000
    # A small payload under a header that claims a huge step, or a huge width.
    assert image_declared_bytes(8000, 10, 'rgb8', 24000, 240) == 192_000_000
    assert image_declared_bytes(8000, 8000, 'rgb8', 30, 240) == 192_000_000
    # A payload longer than its header says.
    assert image_declared_bytes(1, 1, 'mono8', 1, 5_000_000) == 5_000_000
    # 16-bit and float encodings count their bytes per pixel; unknown ones count the rest.
    assert image_declared_bytes(10, 10, '32FC1', 0, 0) == 400
    assert image_declared_bytes(10, 10, 'yuv422', 20, 0) == 200


def test_check_image_size_refuses_with_the_numbers():
    check_image_size(480, 640, 'rgb8', 1920, 921_600, 64 * 2**20)
    with pytest.raises(ImageTooLargeError) as raised:
        check_image_size(8000, 8000, 'rgb8', 24000, 192_000_000, 64 * 2**20)
    message = str(raised.value)
    assert '8000x8000 rgb8' in message
    assert '192000000 bytes' in message
    assert str(64 * 2**20) in message
    # A lying header is refused as well, though its payload is small.
    with pytest.raises(ImageTooLargeError):
        check_image_size(100_000, 100_000, 'rgb8', 3, 3, 64 * 2**20)
    # ImageTooLargeError is an ImageFormatError: old handlers still catch it.
    assert issubclass(ImageTooLargeError, ImageFormatError)


def test_image_tensor_shape_matches_image_to_tensor():
    assert image_tensor_shape(480, 640, 'rgb8') == (1, 3, 480, 640)
    assert image_tensor_shape(480, 640, 'bgra8') == (1, 3, 480, 640)  # alpha dropped
    assert image_tensor_shape(480, 640, 'mono16') == (1, 1, 480, 640)
    with pytest.raises(ImageFormatError, match='not supported'):
        image_tensor_shape(480, 640, 'yuv422')


# -- size limits -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('height', 'width', 'words'),
    [
        (1, 100_000, 'a side over 4096'),
        (100_000, 1, 'a side over 4096'),
        (4000, 4000, '16000000 pixels'),
        (1, 9, 'more elongated than 8:1'),
        (100, 4000, 'more elongated than 8:1'),
    ],
)
def test_size_limits_refuse(height: int, width: int, words: str):
    assert words in LIMITS.problem(height, width)


@pytest.mark.parametrize(
    ('height', 'width'), [(1, 1), (1, 8), (480, 640), (1080, 1920), (2160, 4096)]
)
def test_size_limits_take(height: int, width: int):
    assert LIMITS.problem(height, width) == ''


def test_min_side_and_no_bounds():
    assert 'under 16 px' in SizeLimits(min_side=16).problem(8, 100)
    assert 'under 1 px' in SizeLimits().problem(0, 10)
    assert SizeLimits(min_side=0, max_aspect_ratio=2.0).problem(0, 10) == ''
    assert SizeLimits().problem(1, 1_000_000) == ''


def test_tensor_spec_checks_rank_fixed_sizes_and_limits():
    spec = TensorSpec((1, 3, None, None), torch.uint8, LIMITS)
    assert spec.shape_problem((1, 3, 480, 640)) == ''
    assert 'must have shape' in spec.shape_problem((3, 480, 640))
    assert 'must have shape' in spec.shape_problem((1, 4, 480, 640))
    problem = spec.shape_problem((1, 3, 1, 100_000))
    assert 'takes images of sides 1..4096 px' in problem
    assert '100000x1 has a side over 4096 px' in problem
    # Fixed sizes need no limits: the shape check alone refuses other sizes.
    assert 'must have shape' in TensorSpec((None, 3, 64, 64)).shape_problem((1, 3, 8000, 8000))


def test_examples_respect_the_smallest_side():
    spec = TensorSpec((1, 3, None, None), torch.uint8, SizeLimits(min_side=16))
    assert spec.example().shape == (1, 3, 16, 16)
    assert TensorSpec((1, 3, None, None)).example().shape == (1, 3, 1, 1)
    empty_ok = TensorSpec((1, 3, None, None), torch.uint8, SizeLimits(min_side=0))
    assert empty_ok.example().shape == (1, 3, 1, 1)


class _MustNotRun(nn.Module):
    def forward(self, image: torch.Tensor) -> torch.Tensor:
        raise AssertionError('the model ran on an input it had refused')


def test_a_refused_input_never_reaches_the_model():
    spec = ModelSpec(
        name='guarded',
        build=_MustNotRun,
        inputs={'image': TensorSpec((1, 3, None, None), torch.uint8, LIMITS)},
        outputs=('out',),
    )
    model = build_model(spec)
    for height, width in [(1, 100_000), (4000, 4000)]:
        with pytest.raises(InvalidInputError, match="input 'image' of 'guarded' takes"):
            model({'image': torch.zeros((1, 3, height, width), dtype=torch.uint8)})
    with pytest.raises(InvalidInputError, match='has no input'):
        spec.check_input_shape('depth', (1, 3, 10, 10))


@pytest.mark.parametrize('name', ['blazepose_people', 'blazepose_fast_people', 'kapao_s'])
def test_people_models_declare_their_frame_sizes(name: str):
    spec = model_spec(name)  # the spec only: nothing is built
    # What broke inside the models (OpenCV's SHRT_MAX assertion) and what only cost time (a
    # 4000x4000 frame) are refused up front.
    for height, width in [(1, 100_000), (100_000, 1), (4000, 4000)]:
        with pytest.raises(InvalidInputError):
            spec.check_input_shape('image', (1, 3, height, width))
    for height, width in [(480, 640), (576, 768), (1080, 1920), (2160, 3840), (20, 500)]:
        spec.check_input_shape('image', (1, 3, height, width))
    # The warm-up input is taken.
    spec.check_input_shape('image', spec.example_inputs()['image'].shape)


def test_each_model_declares_its_own_breaking_points():
    # BlazePose gives no people for empty and thin frames; KAPAO's letterbox rounds a
    # 1x4096 frame to zero rows, and it refuses empty frames.
    blazepose, kapao = model_spec('blazepose_people'), model_spec('kapao_s')
    for shape in [(0, 0), (1, 4096)]:
        blazepose.check_input_shape('image', (1, 3, *shape))
        with pytest.raises(InvalidInputError):
            kapao.check_input_shape('image', (1, 3, *shape))
