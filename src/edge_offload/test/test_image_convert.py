# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Image messages become 1 x C x H x W RGB float tensors; inconsistent ones are refused."""

from __future__ import annotations

import array

import numpy as np
import pytest

from edge_offload.image_convert import ImageFormatError, image_to_tensor

PIXELS = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)  # H=2, W=3, RGB


def test_rgb8_with_row_padding_from_an_array_buffer():
    padded = np.zeros((2, 12), dtype=np.uint8)
    padded[:, :9] = PIXELS.reshape(2, 9)
    tensor = image_to_tensor(2, 3, 'rgb8', 0, 12, array.array('B', padded.tobytes()))
    assert tensor.shape == (1, 3, 2, 3)
    np.testing.assert_allclose(tensor[0].numpy(), PIXELS.transpose(2, 0, 1) / 255.0)


def test_bgr8_is_reordered_to_rgb_and_mono16_scaled():
    bgr = PIXELS[:, :, ::-1].copy()
    tensor = image_to_tensor(2, 3, 'bgr8', 0, 9, bgr.tobytes())
    np.testing.assert_allclose(tensor[0].numpy(), PIXELS.transpose(2, 0, 1) / 255.0)
    mono = np.array([[0, 65535]], dtype='>u2')
    tensor = image_to_tensor(1, 2, 'mono16', 1, 4, mono.tobytes())
    np.testing.assert_allclose(tensor.flatten().numpy(), [0.0, 1.0])


@pytest.mark.parametrize(
    ('encoding', 'step', 'data', 'text'),
    [
        ('yuv422', 6, bytes(12), 'not supported'),
        ('rgb8', 8, bytes(16), 'smaller than'),
        ('rgb8', 9, bytes(17), 'expected'),
    ],
)
def test_inconsistent_images_are_refused(encoding, step, data, text):
    with pytest.raises(ImageFormatError, match=text):
        image_to_tensor(2, 3, encoding, 0, step, data)
