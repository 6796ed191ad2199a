# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Sensor sources read generated videos, image folders, bags and patterns; calibration files.

Every source is built from data written into ``tmp_path``: an MJPG video, a folder of
PNGs, rosbag2 bags in both storage formats (MCAP and sqlite3) written with ``rosbags``.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from people_following.camera_info_file import (
    CameraCalibration,
    CameraInfoError,
    calibration_from_dict,
    calibration_to_dict,
    default_pinhole,
    load_camera_info,
    save_camera_info,
    to_camera_info_msg,
)
from people_following.sensor_sources import (
    Frame,
    ImuSample,
    SourceConfig,
    SourceError,
    convert_encoding,
    open_source,
    synthetic_image,
    synthetic_shift_px,
)

TYPESTORE = get_typestore(Stores.ROS2_KILTED)
IMAGE = 'sensor_msgs/msg/Image'
INFO = 'sensor_msgs/msg/CameraInfo'
IMU = 'sensor_msgs/msg/Imu'
COMPRESSED = 'sensor_msgs/msg/CompressedImage'
BAG_START_NS = 1_700_000_000 * 10**9
FRAME_PERIOD_NS = 50_000_000  # 20 Hz
IMU_PERIOD_NS = 10_000_000  # 100 Hz
K = [400.0, 0.0, 15.5, 0.0, 410.0, 11.5, 0.0, 0.0, 1.0]


def _header(stamp_ns: int, frame_id: str = 'cam'):
    types = TYPESTORE.types
    sec, nanosec = divmod(stamp_ns, 10**9)
    return types['std_msgs/msg/Header'](
        stamp=types['builtin_interfaces/msg/Time'](sec=sec, nanosec=nanosec), frame_id=frame_id
    )


def _pixels(index: int, height: int = 24, width: int = 32) -> np.ndarray:
    return np.random.default_rng(index).integers(0, 256, (height, width, 3), dtype=np.uint8)


def _image_message(stamp_ns: int, pixels: np.ndarray, encoding: str = 'rgb8'):
    height, width = pixels.shape[:2]
    data = np.ascontiguousarray(pixels).reshape(-1).view(np.uint8)
    return TYPESTORE.types[IMAGE](
        header=_header(stamp_ns),
        height=height,
        width=width,
        encoding=encoding,
        is_bigendian=0,
        step=data.size // height,
        data=data,
    )


def _info_message(stamp_ns: int):
    types = TYPESTORE.types
    return types[INFO](
        header=_header(stamp_ns),
        height=24,
        width=32,
        distortion_model='plumb_bob',
        d=np.array([0.1, -0.05, 0.0, 0.0, 0.01]),
        k=np.array(K),
        r=np.eye(3).reshape(-1),
        p=np.array([400.0, 0.0, 15.5, 0.0, 0.0, 410.0, 11.5, 0.0, 0.0, 0.0, 1.0, 0.0]),
        binning_x=0,
        binning_y=0,
        roi=types['sensor_msgs/msg/RegionOfInterest'](
            x_offset=0, y_offset=0, height=0, width=0, do_rectify=False
        ),
    )


def _imu_message(stamp_ns: int, index: int):
    types = TYPESTORE.types
    vector = types['geometry_msgs/msg/Vector3']
    covariance = np.zeros(9)
    orientation_covariance = np.zeros(9)
    orientation_covariance[0] = -1.0  # no orientation
    return types[IMU](
        header=_header(stamp_ns, 'imu'),
        orientation=types['geometry_msgs/msg/Quaternion'](x=0.0, y=0.0, z=0.0, w=1.0),
        orientation_covariance=orientation_covariance,
        angular_velocity=vector(x=0.01 * index, y=0.0, z=-0.5),
        angular_velocity_covariance=covariance,
        linear_acceleration=vector(x=0.0, y=-9.8, z=0.1 * index),
        linear_acceleration_covariance=covariance,
    )


def write_bag(
    path: Path,
    storage: StoragePlugin,
    frames: int = 5,
    encoding: str = 'rgb8',
    compressed: bool = False,
) -> None:
    """Write a camera + IMU bag as a driver records it.

    Images are logged 30 ms after their header stamp, after the IMU samples of those
    30 ms, so the log order differs from the stamp order.
    """
    with Writer(path, version=9, storage_plugin=storage) as writer:
        image_type = COMPRESSED if compressed else IMAGE
        images = writer.add_connection('/camera/image_raw', image_type, typestore=TYPESTORE)
        infos = writer.add_connection('/camera/camera_info', INFO, typestore=TYPESTORE)
        imus = writer.add_connection('/imu/data', IMU, typestore=TYPESTORE)
        records = []
        for index in range(frames):
            stamp = BAG_START_NS + index * FRAME_PERIOD_NS
            if compressed:
                ok, png = cv2.imencode('.png', _pixels(index))
                assert ok
                message = TYPESTORE.types[COMPRESSED](
                    header=_header(stamp), format='png', data=png.reshape(-1)
                )
            else:
                message = _image_message(stamp, _pixels(index), encoding)
            records.append((stamp + 30_000_000, images, message, image_type))
            records.append((stamp + 30_000_000, infos, _info_message(stamp), INFO))
        for index in range(frames * FRAME_PERIOD_NS // IMU_PERIOD_NS):
            stamp = BAG_START_NS + index * IMU_PERIOD_NS
            records.append((stamp + 1_000_000, imus, _imu_message(stamp, index), IMU))
        for log_time, connection, message, msgtype in sorted(records, key=lambda r: r[0]):
            writer.write(connection, log_time, TYPESTORE.serialize_cdr(message, msgtype))


def _bag_config(path: Path, **overrides) -> SourceConfig:
    fields = {
        'kind': 'bag',
        'uri': str(path),
        'image_topic': '/camera/image_raw',
        'camera_info_topic': '/camera/camera_info',
        'imu_topic': '/imu/data',
        **overrides,
    }
    return SourceConfig(**fields)


# -- bags -----------------------------------------------------------------------------------


@pytest.mark.parametrize('storage', [StoragePlugin.MCAP, StoragePlugin.SQLITE3])
def test_bag_gives_frames_imu_and_calibration_in_stamp_order(tmp_path, storage):
    bag = tmp_path / 'bag'
    write_bag(bag, storage)
    with open_source(_bag_config(bag)) as source:
        assert source.has_imu
        samples = list(source)
    frames = [sample for sample in samples if isinstance(sample, Frame)]
    imus = [sample for sample in samples if isinstance(sample, ImuSample)]
    assert len(frames) == 5
    assert len(imus) == 25
    stamps = [sample.stamp_ns for sample in samples]
    assert stamps == sorted(stamps), 'samples are not in stamp order'
    for index, frame in enumerate(frames):
        assert frame.stamp_ns == BAG_START_NS + index * FRAME_PERIOD_NS
        assert frame.encoding == 'rgb8'
        np.testing.assert_array_equal(frame.image, _pixels(index))
        assert frame.camera_info is not None
        assert frame.camera_info.camera_matrix == tuple(K)
        assert frame.camera_info.distortion_coefficients == (0.1, -0.05, 0.0, 0.0, 0.01)
    for index, imu in enumerate(imus):
        assert imu.stamp_ns == BAG_START_NS + index * IMU_PERIOD_NS
        assert imu.angular_velocity == pytest.approx((0.01 * index, 0.0, -0.5))
        assert imu.linear_acceleration == pytest.approx((0.0, -9.8, 0.1 * index))
        assert imu.orientation is None


@pytest.mark.parametrize(
    ('storage', 'suffix'), [(StoragePlugin.MCAP, '.mcap'), (StoragePlugin.SQLITE3, '.db3')]
)
def test_bag_storage_file_opens_without_its_folder_and_topics_are_optional(
    tmp_path, storage, suffix
):
    bag = tmp_path / 'bag'
    write_bag(bag, storage, frames=3)
    (storage_file,) = bag.glob(f'*{suffix}')
    # Only an image topic in the bag: found without being named; no IMU, no calibration.
    with open_source(SourceConfig('bag', uri=str(storage_file), image_topic='')) as source:
        assert not source.has_imu
        frames = list(source)
    assert [frame.stamp_ns for frame in frames] == [
        BAG_START_NS + index * FRAME_PERIOD_NS for index in range(3)
    ]
    assert all(isinstance(frame, Frame) and frame.camera_info is None for frame in frames)


def test_bag_with_compressed_images_and_mono16(tmp_path):
    compressed = tmp_path / 'compressed'
    write_bag(compressed, StoragePlugin.MCAP, frames=2, compressed=True)
    with open_source(_bag_config(compressed, imu_topic='')) as source:
        frames = list(source)
    assert len(frames) == 2
    # PNG is lossless; OpenCV decodes to BGR.
    assert frames[1].encoding == 'bgr8'
    np.testing.assert_array_equal(frames[1].image, _pixels(1))

    depth_bag = tmp_path / 'depth'
    depth = np.arange(24 * 32, dtype='<u2').reshape(24, 32) * 50
    with Writer(depth_bag, version=9, storage_plugin=StoragePlugin.SQLITE3) as writer:
        connection = writer.add_connection('/depth', IMAGE, typestore=TYPESTORE)
        message = _image_message(BAG_START_NS, depth, '16UC1')
        writer.write(connection, 1, TYPESTORE.serialize_cdr(message, IMAGE))
    with open_source(SourceConfig('bag', uri=str(depth_bag))) as source:
        (frame,) = list(source)
    assert frame.encoding == '16UC1'
    np.testing.assert_array_equal(frame.image, depth)


def test_bag_errors_name_the_bag_and_what_to_set(tmp_path):
    bag = tmp_path / 'bag'
    write_bag(bag, StoragePlugin.MCAP, frames=2)

    with pytest.raises(SourceError, match=r'bag .*missing does not exist'):
        open_source(_bag_config(tmp_path / 'missing'))
    with pytest.raises(SourceError, match=r'no topic /front/image.*bag_image_topic.*/imu/data'):
        open_source(_bag_config(bag, image_topic='/front/image'))
    with pytest.raises(SourceError, match=r'no topic /imu.*bag_imu_topic'):
        open_source(_bag_config(bag, imu_topic='/imu'))
    with pytest.raises(SourceError, match=r'/imu/data .*is sensor_msgs/msg/Imu, not .*Image'):
        open_source(_bag_config(bag, image_topic='/imu/data'))
    empty_folder = tmp_path / 'not_a_bag'
    empty_folder.mkdir()
    with pytest.raises(SourceError, match=r'not_a_bag is not a rosbag2 bag.*metadata.yaml'):
        open_source(_bag_config(empty_folder))

    yuv = tmp_path / 'yuv'
    with Writer(yuv, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        connection = writer.add_connection('/camera/image_raw', IMAGE, typestore=TYPESTORE)
        message = _image_message(BAG_START_NS, np.zeros((4, 4, 2), np.uint8), 'yuv422')
        writer.write(connection, 1, TYPESTORE.serialize_cdr(message, IMAGE))
    with pytest.raises(SourceError, match=r"/camera/image_raw of bag .*yuv.*'yuv422' is not supp"):
        open_source(SourceConfig('bag', uri=str(yuv)))


# -- video and image folders ----------------------------------------------------------------


def test_video_frames_are_stamped_by_position(tmp_path):
    path = tmp_path / 'clip.avi'
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*'MJPG'), 10.0, (64, 48))
    levels = [20, 80, 140, 200, 250, 110]
    for level in levels:
        writer.write(np.full((48, 64, 3), level, np.uint8))
    writer.release()

    start_ns = 1_000 * 10**9
    with open_source(SourceConfig('video', uri=str(path), start_time_ns=start_ns)) as source:
        assert source.nominal_rate_hz == pytest.approx(10.0)
        frames = list(source)
    assert [frame.stamp_ns for frame in frames] == [
        start_ns + index * 100_000_000 for index in range(len(levels))
    ]
    for frame, level in zip(frames, levels, strict=True):
        assert frame.encoding == 'bgr8'
        assert frame.image.shape == (48, 64, 3)
        # MJPG is lossy: flat grey stays within a few levels.
        assert abs(float(frame.image.mean()) - level) < 6


def test_video_errors(tmp_path):
    with pytest.raises(SourceError, match=r'video file .*nothing.avi does not exist'):
        open_source(SourceConfig('video', uri=str(tmp_path / 'nothing.avi')))
    garbage = tmp_path / 'garbage.avi'
    garbage.write_text('not a video')
    with pytest.raises(SourceError, match=r'garbage.avi cannot be decoded'):
        open_source(SourceConfig('video', uri=str(garbage)))


def test_image_folder_in_name_order_at_the_configured_rate(tmp_path):
    folder = tmp_path / 'images'
    folder.mkdir()
    # Written out of order; read back sorted by name; other files ignored.
    for index in (2, 0, 1):
        cv2.imwrite(str(folder / f'frame_{index:03d}.png'), _pixels(index))
    grey = (np.arange(24 * 32).reshape(24, 32) % 256).astype(np.uint8)
    cv2.imwrite(str(folder / 'frame_003.bmp'), grey)
    (folder / 'notes.txt').write_text('not an image')

    with open_source(SourceConfig('images', uri=str(folder), fps=4.0, start_time_ns=0)) as source:
        frames = list(source)
    assert [frame.stamp_ns for frame in frames] == [0, 250_000_000, 500_000_000, 750_000_000]
    for index in range(3):
        assert frames[index].encoding == 'bgr8'
        np.testing.assert_array_equal(frames[index].image, _pixels(index))
    assert frames[3].encoding == 'mono8'
    np.testing.assert_array_equal(frames[3].image, grey)


def test_image_folder_errors(tmp_path):
    with pytest.raises(SourceError, match=r'image folder .*absent does not exist'):
        open_source(SourceConfig('images', uri=str(tmp_path / 'absent')))
    (tmp_path / 'empty').mkdir()
    (tmp_path / 'empty' / 'readme.md').write_text('no images here')
    with pytest.raises(SourceError, match=r'image folder .*empty holds no .*png images'):
        open_source(SourceConfig('images', uri=str(tmp_path / 'empty')))


# -- synthetic, camera, encodings -----------------------------------------------------------


def test_synthetic_pattern_is_deterministic_and_imu_interleaved():
    config = SourceConfig('synthetic', width=64, height=48, fps=10.0, imu_rate_hz=40.0)
    config = SourceConfig(**{**config.__dict__, 'start_time_ns': 5 * 10**9})
    with open_source(config) as source:
        assert source.has_imu
        # One second of stamps: frames 0..10 and the IMU samples up to the 11th frame.
        samples = list(itertools.islice(source, 11 + 41))
        yaw_rate = source.yaw_rate
    frames = [sample for sample in samples if isinstance(sample, Frame)]
    imus = [sample for sample in samples if isinstance(sample, ImuSample)]
    assert len(frames) == 11
    assert len(imus) == 41
    stamps = [sample.stamp_ns for sample in samples]
    assert stamps == sorted(stamps)
    assert frames[10].stamp_ns == 6 * 10**9
    assert imus[40].stamp_ns == 6 * 10**9
    for index, frame in enumerate(frames):
        assert frame.encoding == 'rgb8'
        np.testing.assert_array_equal(frame.image, synthetic_image(index, 64, 48))
    assert not np.array_equal(frames[0].image, frames[1].image)
    # The pattern moves right: the camera yaws left about the optical y axis.
    fx = default_pinhole(64, 48, 60.0).camera_matrix[0]
    assert yaw_rate == pytest.approx(-synthetic_shift_px(64) * 10.0 / fx)
    assert imus[0].angular_velocity == (0.0, yaw_rate, 0.0)
    assert imus[0].linear_acceleration[1] == pytest.approx(-9.80665)


def test_missing_camera_and_unknown_source():
    with pytest.raises(SourceError, match=r'camera /dev/video97 does not exist'):
        open_source(SourceConfig('camera', uri='97'))
    with pytest.raises(SourceError, match=r'camera /dev/nocam does not exist'):
        open_source(SourceConfig('camera', uri='/dev/nocam'))
    with pytest.raises(SourceError, match=r"unknown source 'lidar'"):
        open_source(SourceConfig('lidar'))


def test_convert_encoding():
    bgr = _pixels(3)
    rgb, encoding = convert_encoding(bgr, 'bgr8', 'rgb8')
    assert encoding == 'rgb8'
    np.testing.assert_array_equal(rgb, bgr[:, :, ::-1])
    same, encoding = convert_encoding(bgr, 'bgr8', 'passthrough')
    assert same is bgr
    assert encoding == 'bgr8'
    grey = np.arange(12, dtype=np.uint8).reshape(3, 4)
    colour, _ = convert_encoding(grey, 'mono8', 'bgr8')
    np.testing.assert_array_equal(colour, np.repeat(grey[:, :, None], 3, axis=2))
    with pytest.raises(
        SourceError, match=r"16UC1 images cannot be converted to rgb8.*'passthrough'"
    ):
        convert_encoding(grey.astype(np.uint16), '16UC1', 'rgb8')


# -- camera_info files ----------------------------------------------------------------------

CALIBRATOR_YAML = """\
image_width: 640
image_height: 480
camera_name: narrow_stereo
camera_matrix:
  rows: 3
  cols: 3
  data: [415.1, 0., 320.5,
         0., 410.4, 240.1,
         0., 0., 1.]
distortion_coefficients:
  rows: 1
  cols: 5
  data: [-0.0177, -0.0073, 0.0058, -0.0001, 0.]
rectification_matrix:
  rows: 3
  cols: 3
  data: [1., 0., 0., 0., 1., 0., 0., 0., 1.]
projection_matrix:
  rows: 3
  cols: 4
  data: [415.1, 0., 320.5, 0., 0., 410.4, 240.1, 0., 0., 0., 1., 0.]
"""


def test_camera_info_yaml_round_trip_and_urls(tmp_path):
    path = tmp_path / 'calibration.yaml'
    path.write_text(CALIBRATOR_YAML)
    loaded = load_camera_info(str(path))
    # No distortion_model: plumb_bob, as camera_calibration_parsers assumes.
    assert loaded.distortion_model == 'plumb_bob'
    assert loaded.camera_name == 'narrow_stereo'
    assert (loaded.image_width, loaded.image_height) == (640, 480)
    assert loaded.camera_matrix[0] == 415.1
    assert load_camera_info(f'file://{path}') == loaded

    calibration = CameraCalibration(
        image_width=32,
        image_height=24,
        camera_matrix=tuple(K),
        distortion_coefficients=(0.1, -0.25, 0.001, 0.002, 1.0 / 3.0, 0.0, 0.0, 0.5),
        distortion_model='rational_polynomial',
        camera_name='front',
    )
    saved = tmp_path / 'saved.yaml'
    save_camera_info(calibration, saved)
    assert load_camera_info(str(saved)) == calibration
    assert calibration_from_dict(calibration_to_dict(calibration)) == calibration
    # The default projection is K with a zero fourth column.
    assert calibration.projection_matrix[:4] == (400.0, 0.0, 15.5, 0.0)

    message = to_camera_info_msg(calibration, 'camera_optical_frame')
    assert message.header.frame_id == 'camera_optical_frame'
    assert (message.width, message.height) == (32, 24)
    assert list(message.k) == K
    assert message.distortion_model == 'rational_polynomial'
    assert len(message.d) == 8


def test_default_pinhole_model():
    model = default_pinhole(640, 480, 90.0)
    fx, _, cx, _, fy, cy, *_ = model.camera_matrix
    assert fx == pytest.approx(320.0)
    assert fy == fx
    assert (cx, cy) == (319.5, 239.5)
    assert model.distortion_coefficients == (0.0,) * 5
    assert model.rectification_matrix == (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
    assert math.isclose(model.projection_matrix[0], fx)


@pytest.mark.parametrize(
    ('edit', 'message'),
    [
        (lambda d: d.pop('camera_matrix'), r'missing key\(s\) camera_matrix'),
        (
            lambda d: d['projection_matrix'].update(rows=4),
            r'projection_matrix must be 3x4, the file says 4x4',
        ),
        (
            lambda d: d['camera_matrix']['data'].pop(),
            r'camera_matrix is 3x3 but its data holds 8 values',
        ),
        (
            lambda d: d['distortion_coefficients'].update(cols=4, data=[0.0] * 4),
            r"distortion model 'plumb_bob' needs 5 distortion_coefficients, got 4",
        ),
        (lambda d: d.update(image_width=-1), r'image_width must be a positive integer'),
        (
            lambda d: d['camera_matrix']['data'].__setitem__(0, 'x'),
            r'camera_matrix must be a list',
        ),
        (
            lambda d: d.update(rectification_matrix=[1, 0, 0]),
            r'rectification_matrix must be a map',
        ),
    ],
)
def test_camera_info_validation_names_file_and_key(tmp_path, edit, message):
    document = calibration_to_dict(default_pinhole(64, 48))
    edit(document)
    path = tmp_path / 'broken.yaml'
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(CameraInfoError, match=rf'broken.yaml: {message}'):
        load_camera_info(str(path))


def test_camera_info_file_errors(tmp_path):
    with pytest.raises(CameraInfoError, match=r'camera info file .*absent.yaml does not exist'):
        load_camera_info(str(tmp_path / 'absent.yaml'))
    bad = tmp_path / 'bad.yaml'
    bad.write_text('image_width: [unclosed\n')
    with pytest.raises(CameraInfoError, match=r'bad.yaml is not valid YAML'):
        load_camera_info(str(bad))
    bad.write_text('- just\n- a list\n')
    with pytest.raises(CameraInfoError, match=r'expected a YAML mapping'):
        load_camera_info(str(bad))
    with pytest.raises(CameraInfoError, match=r'only file://, package://'):
        load_camera_info('http://example.com/calibration.yaml')
