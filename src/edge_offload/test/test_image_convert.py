# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Image messages <-> arrays (cv_bridge semantics) and model tensors; bad ones are refused."""

from __future__ import annotations

import array

import cv2
import numpy as np
import pytest
import torch

from edge_offload.image_convert import (
    ImageFormatError,
    convert_pixels,
    cv2_to_imgmsg,
    image_fields,
    image_to_tensor,
    imgmsg_to_cv2,
)

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


def test_uint8_tensors_keep_raw_values_and_need_8_bit_images():
    bgr = PIXELS[:, :, ::-1].copy()
    tensor = image_to_tensor(2, 3, 'bgr8', 0, 9, bgr.tobytes(), dtype=torch.uint8)
    assert tensor.dtype == torch.uint8
    np.testing.assert_array_equal(tensor[0].numpy(), PIXELS.transpose(2, 0, 1))
    with pytest.raises(ImageFormatError, match='8-bit'):
        image_to_tensor(1, 2, 'mono16', 0, 4, bytes(4), dtype=torch.uint8)


RNG = np.random.default_rng(7)
SAMPLES = {
    'rgb8': RNG.integers(0, 256, (5, 7, 3), dtype=np.uint8),
    'bgr8': RNG.integers(0, 256, (5, 7, 3), dtype=np.uint8),
    'rgba8': RNG.integers(0, 256, (5, 7, 4), dtype=np.uint8),
    'bgra8': RNG.integers(0, 256, (5, 7, 4), dtype=np.uint8),
    'mono8': RNG.integers(0, 256, (5, 7), dtype=np.uint8),
    'mono16': RNG.integers(0, 65536, (5, 7), dtype=np.uint16),
    '16UC1': RNG.integers(0, 65536, (5, 7), dtype=np.uint16),
    '32FC1': RNG.random((5, 7), dtype=np.float32) * 20.0,
}


@pytest.mark.parametrize('encoding', sorted(SAMPLES))
def test_round_trip_through_a_message_is_exact(encoding):
    pixels = SAMPLES[encoding]
    message = cv2_to_imgmsg(pixels, encoding)
    assert (message.height, message.width, message.encoding) == (5, 7, encoding)
    assert message.step * message.height == len(message.data)
    back = imgmsg_to_cv2(message)
    assert back.dtype == pixels.dtype
    np.testing.assert_array_equal(back, pixels)


def test_passthrough_names_the_opencv_type_like_cv_bridge():
    assert cv2_to_imgmsg(SAMPLES['rgb8']).encoding == '8UC3'
    assert cv2_to_imgmsg(SAMPLES['32FC1']).encoding == '32FC1'
    assert cv2_to_imgmsg(SAMPLES['16UC1']).encoding == '16UC1'


def test_colour_conversions_match_opencv():
    rgb = SAMPLES['rgb8']
    message = cv2_to_imgmsg(rgb, 'rgb8')
    np.testing.assert_array_equal(imgmsg_to_cv2(message, 'bgr8'), rgb[:, :, ::-1])
    grey = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
    # OpenCV rounds in fixed point: at most one grey level apart.
    assert np.abs(imgmsg_to_cv2(message, 'mono8').astype(int) - grey).max() <= 1
    rgba = imgmsg_to_cv2(message, 'rgba8')
    assert rgba.shape == (5, 7, 4)
    assert (rgba[:, :, 3] == 255).all()


def test_bit_depth_conversion_scales_like_cv_bridge():
    mono8 = np.array([[0, 1, 255]], dtype=np.uint8)
    mono16 = imgmsg_to_cv2(cv2_to_imgmsg(mono8, 'mono8'), 'mono16')
    np.testing.assert_array_equal(mono16, [[0, 257, 65535]])
    back = imgmsg_to_cv2(cv2_to_imgmsg(mono16, 'mono16'), 'mono8')
    np.testing.assert_array_equal(back, mono8)


@pytest.mark.parametrize(('source', 'target'), [('16UC1', 'rgb8'), ('32FC1', 'mono8')])
def test_depth_images_do_not_convert_to_colour(source, target):
    message = cv2_to_imgmsg(SAMPLES[source], source)
    with pytest.raises(ImageFormatError, match='no colour information'):
        imgmsg_to_cv2(message, target)


def test_inconsistent_messages_and_arrays_are_refused():
    message = cv2_to_imgmsg(SAMPLES['rgb8'], 'rgb8')
    message.step = 20  # a row of 7 rgb8 pixels is 21 bytes
    with pytest.raises(ImageFormatError, match='smaller than'):
        imgmsg_to_cv2(message)
    message = cv2_to_imgmsg(SAMPLES['rgb8'], 'rgb8')
    message.data = bytes(message.data)[:-1]
    with pytest.raises(ImageFormatError, match='expected'):
        imgmsg_to_cv2(message)
    message = cv2_to_imgmsg(SAMPLES['rgb8'], 'rgb8')
    message.encoding = 'yuv422'
    with pytest.raises(ImageFormatError, match='not supported'):
        imgmsg_to_cv2(message)
    with pytest.raises(ImageFormatError, match='needs 3 channel'):
        cv2_to_imgmsg(SAMPLES['mono8'], 'rgb8')
    with pytest.raises(ImageFormatError, match='needs 1 channel'):
        cv2_to_imgmsg(SAMPLES['32FC1'].astype(np.float64), '32FC1')


def test_bag_images_use_the_same_fields_and_conversions():
    """The rosbags side (bag writers and readers) goes through the same table."""
    from rosbags.typesys import Stores, get_typestore

    image_type = get_typestore(Stores.ROS2_HUMBLE).types['sensor_msgs/msg/Image']
    header_type = get_typestore(Stores.ROS2_HUMBLE).types['std_msgs/msg/Header']
    time_type = get_typestore(Stores.ROS2_HUMBLE).types['builtin_interfaces/msg/Time']
    depth = np.linspace(0.5, 4.0, 12, dtype=np.float32).reshape(3, 4)
    fields = image_fields(depth, '32FC1')
    fields['data'] = np.frombuffer(fields['data'], np.uint8)
    header = header_type(stamp=time_type(sec=1, nanosec=2), frame_id='optical')
    message = image_type(header=header, **fields)
    np.testing.assert_array_equal(imgmsg_to_cv2(message), depth)
    grey = np.arange(12, dtype=np.uint8).reshape(3, 4)
    np.testing.assert_array_equal(
        convert_pixels(grey, 'mono8', 'bgr8'), np.repeat(grey[:, :, None], 3, axis=2)
    )
    assert convert_pixels(SAMPLES['rgb8'], 'rgb8', 'mono8').ndim == 2
