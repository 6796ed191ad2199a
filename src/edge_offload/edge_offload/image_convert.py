# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Turn ``sensor_msgs/Image`` fields into model input tensors, without cv_bridge.

cv_bridge is not installable from PyPI for ROS 2 (see ENVIRONMENT.md), and a model input
needs one fixed layout anyway: float32, 1 x C x H x W, RGB channel order, values in
[0, 1]. Every field is checked against the payload first; a wrong encoding, a step that
does not fit the width, or a payload shorter than ``step * height`` raises
``ImageFormatError`` naming the problem.
"""

from __future__ import annotations

import array

import numpy as np
import torch

# encoding -> (channels, dtype, scale to [0, 1], channel order to reverse into RGB)
# What sensor_msgs/Image.data may be: rclpy gives array.array('B').
Buffer = bytes | bytearray | memoryview | array.array

_ENCODINGS: dict[str, tuple[int, np.dtype, float, bool]] = {
    'rgb8': (3, np.dtype('u1'), 255.0, False),
    'bgr8': (3, np.dtype('u1'), 255.0, True),
    'rgba8': (4, np.dtype('u1'), 255.0, False),
    'bgra8': (4, np.dtype('u1'), 255.0, True),
    'mono8': (1, np.dtype('u1'), 255.0, False),
    'mono16': (1, np.dtype('<u2'), 65535.0, False),
    '32FC1': (1, np.dtype('<f4'), 1.0, False),
}
SUPPORTED_ENCODINGS = tuple(_ENCODINGS)
MAX_IMAGE_PIXELS = 8192 * 8192


class ImageFormatError(ValueError):
    """An image message whose fields do not describe its payload."""


def image_to_array(
    height: int, width: int, encoding: str, is_bigendian: int, step: int, data: Buffer
) -> np.ndarray:
    """Return the image as an H x W x C array of its own dtype (one copy of ``data``)."""
    if encoding not in _ENCODINGS:
        raise ImageFormatError(
            f'image encoding {encoding!r} is not supported; use one of {list(_ENCODINGS)}'
        )
    channels, dtype, _, _ = _ENCODINGS[encoding]
    if height <= 0 or width <= 0 or height * width > MAX_IMAGE_PIXELS:
        raise ImageFormatError(f'image size {width}x{height} is empty or too large')
    if is_bigendian and dtype.itemsize > 1:
        dtype = dtype.newbyteorder('>')
    row_bytes = width * channels * dtype.itemsize
    if step < row_bytes:
        raise ImageFormatError(f'step {step} is smaller than a {encoding} row ({row_bytes} bytes)')
    size = memoryview(data).nbytes
    if size < step * height:
        raise ImageFormatError(
            f'image payload is {size} bytes; {step} x {height} = {step * height} expected'
        )
    # A view of the message's buffer: the only copy is the one of the pixel rows below.
    rows = np.frombuffer(data, dtype=np.uint8, count=step * height).reshape(height, step)
    pixels = rows[:, :row_bytes].copy().view(dtype).reshape(height, width, channels)
    return pixels.astype(dtype.newbyteorder('='), copy=False)


def image_to_tensor(
    height: int, width: int, encoding: str, is_bigendian: int, step: int, data: Buffer
) -> torch.Tensor:
    """Return a 1 x C x H x W float32 RGB tensor in [0, 1] (alpha dropped)."""
    pixels = image_to_array(height, width, encoding, is_bigendian, step, data)
    _, _, scale, reverse = _ENCODINGS[encoding]
    if pixels.shape[2] == 4:
        pixels = pixels[:, :, :3]
    if reverse:
        pixels = pixels[:, :, ::-1]
    array = np.ascontiguousarray(pixels.transpose(2, 0, 1), dtype=np.float32) / np.float32(scale)
    return torch.from_numpy(array).unsqueeze(0)
