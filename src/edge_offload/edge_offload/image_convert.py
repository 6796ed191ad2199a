# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Convert between ``sensor_msgs/Image``, NumPy arrays and model input tensors.

The one module of the suite that reads or writes image messages:

* ``imgmsg_to_cv2`` / ``cv2_to_imgmsg`` follow cv_bridge's semantics (passthrough, colour
  conversions among rgb8/bgr8/rgba8/bgra8/mono8/mono16, 8 <-> 16 bit scaling, 16UC1 and
  32FC1 only as themselves) and call the real cv_bridge where it is importable (full ROS
  installs). cv_bridge is not installable from PyPI for ROS 2 (see ENVIRONMENT.md), so
  elsewhere the same conversions run here.
* ``image_to_tensor`` builds a model input: 1 x C x H x W, RGB channel order, float32 in
  [0, 1] or uint8 in [0, 255] (models that take raw pixels send a quarter of the bytes).

Every field is checked against the payload first; an unknown encoding, a step that does
not fit the width, or a payload shorter than ``step * height`` raises ``ImageFormatError``
naming the problem.

``check_image_size`` refuses an image by its header alone, before anything copies it: the
largest of ``height * step``, the payload's length and the size its encoding implies
against a limit (``ImageTooLargeError``). ``image_tensor_shape`` gives the shape
``image_to_tensor`` would build, so a model's input sizes can be checked first too.
"""

from __future__ import annotations

import array
from typing import Any

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
    '16UC1': (1, np.dtype('<u2'), 65535.0, False),
    # OpenCV type names: what cv_bridge's passthrough writes; no colour order is implied.
    '8UC1': (1, np.dtype('u1'), 255.0, False),
    '8UC3': (3, np.dtype('u1'), 255.0, False),
    '8UC4': (4, np.dtype('u1'), 255.0, False),
    '32FC1': (1, np.dtype('<f4'), 1.0, False),
}
# Encodings that carry colour information (cv_bridge converts only among these).
_COLOUR_ENCODINGS = ('rgb8', 'bgr8', 'rgba8', 'bgra8', 'mono8', 'mono16')
SUPPORTED_ENCODINGS = tuple(_ENCODINGS)
MAX_IMAGE_PIXELS = 8192 * 8192


class ImageFormatError(ValueError):
    """An image message whose fields do not describe its payload."""


class ImageTooLargeError(ImageFormatError):
    """An image whose header or payload declares more bytes than the caller's limit."""


def image_declared_bytes(
    height: int, width: int, encoding: str, step: int, payload_bytes: int
) -> int:
    """Return the largest size an image message declares, bytes; reads no pixels.

    The largest of ``height * step``, the payload's length and ``height * width`` pixels of
    the encoding (when the encoding is known): any of them can be the lie.
    """
    declared = max(height * step, payload_bytes, 0)
    if encoding in _ENCODINGS:
        channels, dtype, _, _ = _ENCODINGS[encoding]
        declared = max(declared, height * width * channels * dtype.itemsize)
    return declared


def check_image_size(
    height: int, width: int, encoding: str, step: int, payload_bytes: int, max_bytes: int
) -> None:
    """Raise ImageTooLargeError when the image declares more than ``max_bytes``."""
    declared = image_declared_bytes(height, width, encoding, step, payload_bytes)
    if declared > max_bytes:
        raise ImageTooLargeError(
            f'{width}x{height} {encoding} image declares {declared} bytes (step {step}, '
            f'payload {payload_bytes}); the limit is {max_bytes}'
        )


def image_tensor_shape(height: int, width: int, encoding: str) -> tuple[int, int, int, int]:
    """Return the shape ``image_to_tensor`` builds for the image: 1 x C x H x W."""
    if encoding not in _ENCODINGS:
        raise ImageFormatError(
            f'image encoding {encoding!r} is not supported; use one of {list(_ENCODINGS)}'
        )
    channels = min(_ENCODINGS[encoding][0], 3)  # alpha is dropped
    return (1, channels, height, width)


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
    height: int,
    width: int,
    encoding: str,
    is_bigendian: int,
    step: int,
    data: Buffer,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Return a 1 x C x H x W RGB tensor (alpha dropped).

    ``dtype`` float32 gives values in [0, 1]; uint8 gives the raw 0..255 values and needs an
    8-bit encoding.
    """
    pixels = image_to_array(height, width, encoding, is_bigendian, step, data)
    _, source_dtype, scale, reverse = _ENCODINGS[encoding]
    if pixels.shape[2] == 4:
        pixels = pixels[:, :, :3]
    if reverse:
        pixels = pixels[:, :, ::-1]
    planes = pixels.transpose(2, 0, 1)
    if dtype == torch.uint8:
        if source_dtype.itemsize != 1:
            raise ImageFormatError(f'a uint8 model input needs an 8-bit image, got {encoding}')
        return torch.from_numpy(np.ascontiguousarray(planes)).unsqueeze(0)
    if dtype != torch.float32:
        raise ImageFormatError(f'image inputs are float32 or uint8 tensors, not {dtype}')
    array = np.ascontiguousarray(planes, dtype=np.float32) / np.float32(scale)
    return torch.from_numpy(array).unsqueeze(0)


# ---------------------------------------------------------------------------------------
# cv_bridge semantics.


def _real_cv_bridge():  # noqa: ANN202 - cv_bridge is optional
    try:
        from cv_bridge import CvBridge  # type: ignore[import-not-found]
    except ImportError:
        return None
    return CvBridge()


_CV_BRIDGE = _real_cv_bridge()


def convert_pixels(pixels: np.ndarray, source: str, target: str) -> np.ndarray:
    """Convert ``pixels`` (H x W or H x W x C) from encoding ``source`` to ``target``.

    cv_bridge's rules ('passthrough' keeps them as they are); one channel comes back
    H x W. Raises ImageFormatError for conversions cv_bridge refuses.
    """
    planes = pixels[:, :, None] if pixels.ndim == 2 else pixels
    converted = _convert_array(planes, source, target)
    return converted[:, :, 0] if converted.shape[2] == 1 else converted


def _convert_array(pixels: np.ndarray, source: str, target: str) -> np.ndarray:
    """Convert H x W x C ``pixels`` from encoding ``source`` to ``target`` (cv_bridge rules)."""
    if target in ('passthrough', source):
        return pixels
    if target not in _ENCODINGS:
        raise ImageFormatError(
            f'image encoding {target!r} is not supported; use one of {list(_ENCODINGS)}'
        )
    if source not in _COLOUR_ENCODINGS or target not in _COLOUR_ENCODINGS:
        plain = source if source not in _COLOUR_ENCODINGS else target
        raise ImageFormatError(
            f'cannot convert {source} to {target}: {plain} carries no colour information; '
            'request passthrough'
        )
    source_channels, source_dtype, _, source_reversed = _ENCODINGS[source]
    target_channels, target_dtype, _, target_reversed = _ENCODINGS[target]
    # To RGB(A) in the source depth.
    if source_channels == 1:
        rgb = np.repeat(pixels, 3, axis=2)
        alpha = None
    else:
        rgb = pixels[:, :, 2::-1] if source_reversed else pixels[:, :, :3]
        alpha = pixels[:, :, 3:4] if source_channels == 4 else None
    if target_channels == 1:
        # ITU-R BT.601 luma, as cv2.cvtColor's RGB2GRAY.
        weights = np.array([0.299, 0.587, 0.114], dtype=np.float64)
        values = (rgb.astype(np.float64) @ weights)[:, :, None]
    else:
        values = rgb[:, :, ::-1] if target_reversed else rgb
        if target_channels == 4:
            if alpha is None:
                full = np.iinfo(source_dtype).max
                alpha = np.full(rgb.shape[:2] + (1,), full, dtype=source_dtype)
            values = np.concatenate([values, alpha], axis=2)
        if source_dtype.itemsize == target_dtype.itemsize:
            # A channel shuffle at the same depth: exact, no arithmetic (the float path
            # below took 9 ms for a 768x576 bgr8 -> rgb8 frame, this one a copy).
            return np.ascontiguousarray(values).astype(target_dtype.newbyteorder('='))
    values = values.astype(np.float64, copy=False)
    if source_dtype.itemsize != target_dtype.itemsize:
        # cv_bridge scales between 8 and 16 bits by the ratio of the full-scale values.
        values = values * (np.iinfo(target_dtype).max / np.iinfo(source_dtype).max)
    limit = np.iinfo(target_dtype).max
    return np.clip(np.rint(values), 0, limit).astype(target_dtype.newbyteorder('='))


def imgmsg_to_cv2(message, desired_encoding: str = 'passthrough') -> np.ndarray:  # noqa: ANN001
    """Return the pixels of a ``sensor_msgs/Image`` as cv_bridge does.

    H x W for one channel, H x W x C otherwise, in ``desired_encoding`` ('passthrough' keeps
    the message's). Raises ImageFormatError for inconsistent messages or conversions.
    """
    if _CV_BRIDGE is not None:
        try:
            return _CV_BRIDGE.imgmsg_to_cv2(message, desired_encoding=desired_encoding)
        except Exception as error:  # noqa: BLE001 - CvBridgeError and cv2 errors alike
            raise ImageFormatError(str(error)) from None
    pixels = image_to_array(
        message.height,
        message.width,
        message.encoding,
        message.is_bigendian,
        message.step,
        message.data,
    )
    pixels = _convert_array(pixels, message.encoding, desired_encoding)
    return pixels[:, :, 0] if pixels.shape[2] == 1 else pixels


def cv2_to_imgmsg(pixels: np.ndarray, encoding: str = 'passthrough', header=None):  # noqa: ANN001, ANN201
    """Return a ``sensor_msgs/Image`` holding ``pixels`` (H x W or H x W x C), as cv_bridge.

    ``passthrough`` names the encoding by the array's OpenCV type, as cv_bridge does
    (8UC1, 8UC3, 8UC4, 16UC1, 32FC1). The encoding must match the array's channels and dtype.
    """
    from sensor_msgs.msg import Image

    if _CV_BRIDGE is not None:
        try:
            message = _CV_BRIDGE.cv2_to_imgmsg(pixels, encoding=encoding, header=header)
        except Exception as error:  # noqa: BLE001 - CvBridgeError and cv2 errors alike
            raise ImageFormatError(str(error)) from None
        return message
    fields = image_fields(pixels, encoding)
    message = Image(**fields)
    if header is not None:
        message.header = header
    return message


def image_fields(pixels: np.ndarray, encoding: str = 'passthrough') -> dict[str, Any]:
    """Return the ``sensor_msgs/Image`` fields (all but the header) that hold ``pixels``.

    For any message type with those fields (rclpy's, or rosbags' when writing a bag);
    ``encoding`` as in :func:`cv2_to_imgmsg`.
    """
    if not isinstance(pixels, np.ndarray) or pixels.ndim not in (2, 3):
        raise ImageFormatError('an image must be an H x W or H x W x C NumPy array')
    channels = 1 if pixels.ndim == 2 else pixels.shape[2]
    if encoding == 'passthrough':
        encoding = _passthrough_encoding(pixels.dtype, channels)
    if encoding not in _ENCODINGS:
        raise ImageFormatError(
            f'image encoding {encoding!r} is not supported; use one of {list(_ENCODINGS)}'
        )
    want_channels, want_dtype, _, _ = _ENCODINGS[encoding]
    if channels != want_channels or pixels.dtype.newbyteorder('<') != want_dtype.newbyteorder('<'):
        raise ImageFormatError(
            f'{encoding} needs {want_channels} channel(s) of {want_dtype.name}; the array has '
            f'{channels} of {pixels.dtype.name}'
        )
    height, width = pixels.shape[:2]
    if height * width > MAX_IMAGE_PIXELS or height == 0 or width == 0:
        raise ImageFormatError(f'image size {width}x{height} is empty or too large')
    contiguous = np.ascontiguousarray(pixels)
    return {
        'height': height,
        'width': width,
        'encoding': encoding,
        'is_bigendian': int(contiguous.dtype.byteorder == '>'),
        'step': width * channels * contiguous.dtype.itemsize,
        'data': contiguous.tobytes(),
    }


def _passthrough_encoding(dtype: np.dtype, channels: int) -> str:
    by_type = {
        ('u1', 1): '8UC1',
        ('u1', 3): '8UC3',
        ('u1', 4): '8UC4',
        ('u2', 1): '16UC1',
        ('f4', 1): '32FC1',
    }
    key = (dtype.str[1:], channels)
    if key not in by_type:
        raise ImageFormatError(
            f'no image encoding for a {channels}-channel {dtype.name} array; name one'
        )
    return by_type[key]
