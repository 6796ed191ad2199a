# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Timestamped camera frames and IMU samples from cameras, files, bags or a generator.

Every source is an iterator of :class:`Frame` and :class:`ImuSample` in time order, with
``close()``; :func:`open_source` opens one from a :class:`SourceConfig`:

``uri`` may name a fetched asset, ``asset:media/opencv/vtest.avi`` (:func:`resolve_uri`).

* ``camera``: a V4L2 camera through OpenCV (``uri`` is an index or ``/dev/videoN``);
  stamped with the host clock when the frame is grabbed.
* ``video``: a video file through OpenCV; stamped with the frame's position in the file
  plus ``start_time_ns`` (default: the wall clock at open).
* ``images``: the ``.jpg``/``.jpeg``/``.png``/``.bmp`` files of a folder, sorted by name,
  stamped ``start_time_ns + index / fps``.
* ``bag``: a rosbag2 folder, ``.mcap`` or ``.db3`` file read with ``rosbags`` (no ROS
  needed): sensor_msgs/Image or CompressedImage, optional CameraInfo and Imu topics,
  stamped with the message headers.
* ``synthetic``: a deterministic moving pattern (see :func:`synthetic_image`) and an IMU
  reporting the matching constant rotation.

The stamps of ``video``, ``images`` and ``synthetic`` are made up (no capture clock): they
give the timeline to pace by. The ``sensor_source`` node publishes them as they are only
with an explicit start time (deterministic replays); by default it stamps each frame with
the wall clock when it publishes it (:mod:`people_following.sensor_source_node`).

Sources do not pace: they yield as fast as they are read, and expose their nominal rate
(``nominal_rate_hz``) where known. A source that cannot be opened raises
:class:`SourceError` with one sentence naming what is wrong and what to do.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from edge_offload.assets import AssetMissingError, asset_path
from edge_offload.image_convert import ImageFormatError, convert_pixels, imgmsg_to_cv2
from edge_offload.stamps import stamp_ns
from people_following.camera_info_file import CameraCalibration, CameraInfoError, default_pinhole

_LOGGER = logging.getLogger('people_following.sensor_sources')

SOURCE_KINDS = ('camera', 'video', 'images', 'bag', 'synthetic')
IMAGE_SUFFIXES = ('.bmp', '.jpeg', '.jpg', '.png')
OUTPUT_ENCODINGS = ('passthrough', 'rgb8', 'bgr8')
STANDARD_GRAVITY = 9.80665

_IMAGE_TYPE = 'sensor_msgs/msg/Image'
_COMPRESSED_TYPE = 'sensor_msgs/msg/CompressedImage'
_CAMERA_INFO_TYPE = 'sensor_msgs/msg/CameraInfo'
_IMU_TYPE = 'sensor_msgs/msg/Imu'
# Messages held to put a bag's messages into header-stamp order (cameras stamp at
# exposure but are logged after IMU samples taken later); decoded only when released.
_BAG_REORDER_WINDOW = 64
# Synthetic pattern: how far it moves per frame, as a fraction of the image width.
_SYNTHETIC_SHIFT_FRACTION = 1.0 / 120.0


ASSET_PREFIX = 'asset:'


class SourceError(RuntimeError):
    """A source that cannot be opened or read; the message says what to do."""


@dataclass(frozen=True)
class Frame:
    """One image: H x W x C (or H x W for one channel) in ``encoding``, stamped in ns."""

    stamp_ns: int
    image: np.ndarray
    encoding: str
    # The calibration the source recorded with this frame (a bag's CameraInfo topic).
    camera_info: CameraCalibration | None = None


@dataclass(frozen=True)
class ImuSample:
    """One IMU reading: rad/s, m/s^2 and an optional x, y, z, w orientation quaternion."""

    stamp_ns: int
    angular_velocity: tuple[float, float, float]
    linear_acceleration: tuple[float, float, float]
    orientation: tuple[float, float, float, float] | None = None
    # Row-major 3x3 covariances where the source knows them.
    angular_velocity_covariance: tuple[float, ...] | None = None
    linear_acceleration_covariance: tuple[float, ...] | None = None
    orientation_covariance: tuple[float, ...] | None = None


Sample = Frame | ImuSample


@dataclass(frozen=True)
class SourceConfig:
    """What to open; fields that do not apply to ``kind`` are ignored."""

    kind: str
    uri: str = ''
    # camera: requested size and rate; synthetic: the size and rate; images: the rate.
    width: int = 640
    height: int = 480
    fps: float = 30.0
    # video, images, synthetic: stamp of the first frame; None: the wall clock at open.
    start_time_ns: int | None = None
    # bag: '' for the image topic means the bag's only image topic; '' otherwise: unused.
    image_topic: str = ''
    camera_info_topic: str = ''
    imu_topic: str = ''
    # synthetic: IMU rate (0: no IMU) and the field of view the motion is consistent with.
    imu_rate_hz: float = 200.0
    hfov_deg: float = 60.0


class SensorSource(ABC):
    """An iterator of frames and IMU samples in time order; iterate once, then close."""

    #: The frame rate when known (from the file, the device or the configuration).
    nominal_rate_hz: float | None = None
    #: Whether IMU samples come with the frames.
    has_imu: bool = False
    #: Stamp of the first frame when the source chose it (reopen with it to loop).
    start_time_ns: int | None = None
    #: One line saying what was opened, for the log.
    description: str = ''

    @abstractmethod
    def __iter__(self) -> Iterator[Sample]:
        """Yield the frames and IMU samples in time order."""

    def close(self) -> None:  # noqa: B027 - sources without resources keep the default
        """Release the device or file."""

    def __enter__(self) -> SensorSource:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def resolve_uri(uri: str) -> str:
    """Return ``uri`` with an ``asset:NAME`` prefix resolved to the fetched file's path.

    ``asset:media/opencv/vtest.avi`` names a file that ``make setup`` fetched (see
    :mod:`edge_offload.assets`); other URIs are returned as they are.
    """
    if not uri.startswith(ASSET_PREFIX):
        return uri
    try:
        return str(asset_path(uri.removeprefix(ASSET_PREFIX)))
    except AssetMissingError as error:
        raise SourceError(str(error)) from None


def open_source(config: SourceConfig) -> SensorSource:
    """Open the source ``config`` describes; raise SourceError if that is not possible.

    An ``asset:`` URI is resolved first (:func:`resolve_uri`).
    """
    if config.uri.startswith(ASSET_PREFIX):
        config = replace(config, uri=resolve_uri(config.uri))
    opener = {
        'camera': _CameraSource,
        'video': _VideoSource,
        'images': _ImageFolderSource,
        'bag': _BagSource,
        'synthetic': _SyntheticSource,
    }.get(config.kind)
    if opener is None:
        raise SourceError(
            f'unknown source {config.kind!r}; choose one of {", ".join(SOURCE_KINDS)}'
        )
    return opener(config)


# -- image helpers --------------------------------------------------------------------------


def convert_encoding(image: np.ndarray, encoding: str, target: str) -> tuple[np.ndarray, str]:
    """Return ``image`` converted to ``target`` ('passthrough', 'rgb8' or 'bgr8'), as cv_bridge."""
    if target == 'passthrough' or target == encoding:
        return image, encoding
    if target not in ('rgb8', 'bgr8'):
        raise SourceError(f'output encoding {target!r} is not one of {OUTPUT_ENCODINGS}')
    try:
        return convert_pixels(image, encoding, target), target
    except ImageFormatError as error:
        raise SourceError(
            f'{encoding} images cannot be converted to {target} ({error}); set the output '
            "encoding to 'passthrough' to publish them as they are"
        ) from None


def _opencv_encoding(image: np.ndarray, where: str) -> str:
    """Return the encoding of an image as OpenCV reads it (BGR channel order)."""
    channels = 1 if image.ndim == 2 else image.shape[2]
    encoding = {
        (np.dtype('u1'), 1): 'mono8',
        (np.dtype('u2'), 1): 'mono16',
        (np.dtype('u1'), 3): 'bgr8',
        (np.dtype('u1'), 4): 'bgra8',
    }.get((image.dtype, channels))
    if encoding is None:
        raise SourceError(
            f'{where}: {channels}-channel {image.dtype} images are not supported; use 8-bit '
            'colour or 8/16-bit grey images'
        )
    return encoding


def _wall_clock_ns(start_time_ns: int | None) -> int:
    return time.time_ns() if start_time_ns is None else start_time_ns


# -- camera ---------------------------------------------------------------------------------


class _CameraSource(SensorSource):
    def __init__(self, config: SourceConfig) -> None:
        uri = config.uri or '0'
        device: int | str = int(uri) if uri.isdigit() else uri
        path = Path(f'/dev/video{device}' if isinstance(device, int) else device)
        if not path.exists():
            raise SourceError(
                f'camera {path} does not exist; plug the camera in or set uri to an existing '
                '/dev/videoN (v4l2-ctl --list-devices lists them)'
            )
        self._capture = cv2.VideoCapture(device, cv2.CAP_V4L2)
        if not self._capture.isOpened():
            raise SourceError(
                f'camera {path} cannot be opened; check that no other program uses it and '
                'that you may read it (the video group)'
            )
        self._capture.set(cv2.CAP_PROP_FRAME_WIDTH, config.width)
        self._capture.set(cv2.CAP_PROP_FRAME_HEIGHT, config.height)
        self._capture.set(cv2.CAP_PROP_FPS, config.fps)
        self._path = path
        width = int(self._capture.get(cv2.CAP_PROP_FRAME_WIDTH))
        height = int(self._capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
        fps = self._capture.get(cv2.CAP_PROP_FPS)
        self.nominal_rate_hz = fps if fps > 0 else config.fps
        self.description = f'camera {path} at {width}x{height}, {self.nominal_rate_hz:g} fps'
        if (width, height) != (config.width, config.height):
            _LOGGER.warning(
                'camera %s gives %dx%d instead of the requested %dx%d',
                path,
                width,
                height,
                config.width,
                config.height,
            )

    def __iter__(self) -> Iterator[Sample]:
        while True:
            if not self._capture.grab():
                raise SourceError(
                    f'camera {self._path} stopped delivering frames; check its connection'
                )
            # Stamp at grab: retrieve() decodes, which is not part of the exposure time.
            stamp_ns = time.time_ns()
            ok, image = self._capture.retrieve()
            if not ok or image is None:
                raise SourceError(f'camera {self._path} delivered a frame that cannot be read')
            yield Frame(stamp_ns, image, _opencv_encoding(image, f'camera {self._path}'))

    def close(self) -> None:
        self._capture.release()


# -- video file -----------------------------------------------------------------------------


class _VideoSource(SensorSource):
    def __init__(self, config: SourceConfig) -> None:
        path = Path(config.uri).expanduser()
        if not config.uri or not path.is_file():
            raise SourceError(
                f'video file {config.uri or "(empty uri)"} does not exist; set uri to a video file'
            )
        self._path = path
        self._capture = cv2.VideoCapture(str(path))
        ok, first = self._capture.read() if self._capture.isOpened() else (False, None)
        if not ok or first is None:
            self._capture.release()
            raise SourceError(
                f'video file {path} cannot be decoded by OpenCV (not a video, damaged or '
                'empty); convert it, e.g. ffmpeg -i IN -c:v mjpeg OUT.avi'
            )
        fps = self._capture.get(cv2.CAP_PROP_FPS)
        self.nominal_rate_hz = fps if fps > 0 else None
        self.start_time_ns = _wall_clock_ns(config.start_time_ns)
        self._first = (self._capture.get(cv2.CAP_PROP_POS_MSEC), first)
        height, width = first.shape[:2]
        rate = f'{fps:g} fps' if fps > 0 else 'unknown rate'
        self.description = f'video {path} ({width}x{height}, {rate})'

    def __iter__(self) -> Iterator[Sample]:
        assert self.start_time_ns is not None  # noqa: S101 - set in __init__
        previous_ns = -1
        for index in itertools.count():
            if index == 0:
                position_ms, image = self._first
            else:
                ok, image = self._capture.read()
                if not ok or image is None:
                    return
                position_ms = self._capture.get(cv2.CAP_PROP_POS_MSEC)
            offset_ns = round(position_ms * 1e6)
            # Some containers report no positions; fall back on the frame index.
            if offset_ns <= previous_ns and self.nominal_rate_hz:
                offset_ns = round(index * 1e9 / self.nominal_rate_hz)
            previous_ns = offset_ns
            encoding = _opencv_encoding(image, f'video {self._path}')
            yield Frame(self.start_time_ns + offset_ns, image, encoding)

    def close(self) -> None:
        self._capture.release()


# -- image folder ---------------------------------------------------------------------------


class _ImageFolderSource(SensorSource):
    def __init__(self, config: SourceConfig) -> None:
        folder = Path(config.uri).expanduser()
        if not config.uri or not folder.is_dir():
            raise SourceError(
                f'image folder {config.uri or "(empty uri)"} does not exist; set uri to a '
                'folder of images'
            )
        self._files = sorted(
            path
            for path in folder.iterdir()
            if path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES
        )
        if not self._files:
            raise SourceError(
                f'image folder {folder} holds no {"/".join(IMAGE_SUFFIXES)} images; put '
                'images in it or point uri at another folder'
            )
        if config.fps <= 0:
            raise SourceError(f'the image folder rate must be positive, not {config.fps}')
        self._fps = config.fps
        self.nominal_rate_hz = config.fps
        self.start_time_ns = _wall_clock_ns(config.start_time_ns)
        self.description = f'{len(self._files)} images in {folder} at {config.fps:g} fps'

    def __iter__(self) -> Iterator[Sample]:
        assert self.start_time_ns is not None  # noqa: S101 - set in __init__
        for index, path in enumerate(self._files):
            image = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
            if image is None:
                raise SourceError(f'image {path} cannot be read; it is damaged or not an image')
            stamp_ns = self.start_time_ns + round(index * 1e9 / self._fps)
            yield Frame(stamp_ns, image, _opencv_encoding(image, f'image {path}'))


# -- rosbag2 --------------------------------------------------------------------------------


def _calibration_from_message(message: Any, where: str) -> CameraCalibration | None:
    try:
        return CameraCalibration(
            image_width=int(message.width),
            image_height=int(message.height),
            camera_matrix=tuple(float(value) for value in message.k),
            distortion_coefficients=tuple(float(value) for value in message.d),
            rectification_matrix=tuple(float(value) for value in message.r),
            projection_matrix=tuple(float(value) for value in message.p),
            distortion_model=message.distortion_model or 'plumb_bob',
        )
    except CameraInfoError as error:
        # An uncalibrated camera driver publishes zeros; that is no calibration.
        _LOGGER.debug('%s: camera info ignored: %s', where, error)
        return None


def _imu_from_message(message: Any, stamp_ns: int) -> ImuSample:
    orientation_covariance = tuple(float(value) for value in message.orientation_covariance)
    # REP 145: orientation_covariance[0] == -1 means the IMU has no orientation estimate.
    has_orientation = orientation_covariance[0] != -1.0
    q = message.orientation
    return ImuSample(
        stamp_ns=stamp_ns,
        angular_velocity=(
            message.angular_velocity.x,
            message.angular_velocity.y,
            message.angular_velocity.z,
        ),
        linear_acceleration=(
            message.linear_acceleration.x,
            message.linear_acceleration.y,
            message.linear_acceleration.z,
        ),
        orientation=(q.x, q.y, q.z, q.w) if has_orientation else None,
        angular_velocity_covariance=tuple(
            float(value) for value in message.angular_velocity_covariance
        ),
        linear_acceleration_covariance=tuple(
            float(value) for value in message.linear_acceleration_covariance
        ),
        orientation_covariance=orientation_covariance if has_orientation else None,
    )


def decode_compressed(data: Any, image_format: str, where: str) -> tuple[np.ndarray, str]:
    """Decode a sensor_msgs/CompressedImage payload; return the image and its encoding."""
    if 'compresseddepth' in image_format.lower().replace(' ', ''):
        raise SourceError(
            f'{where}: compressedDepth images are not supported; record the raw depth topic'
        )
    buffer = np.frombuffer(memoryview(data), dtype=np.uint8)
    image = cv2.imdecode(buffer, cv2.IMREAD_UNCHANGED) if buffer.size else None
    if image is None:
        raise SourceError(f'{where}: a {image_format or "compressed"} image cannot be decoded')
    return image, _opencv_encoding(image, where)


class _BagSource(SensorSource):
    # Among messages with the same stamp: calibration first, then IMU, then the image.
    _PRIORITY = {_CAMERA_INFO_TYPE: 0, _IMU_TYPE: 1, _IMAGE_TYPE: 2, _COMPRESSED_TYPE: 2}

    def __init__(self, config: SourceConfig) -> None:
        # Imported here: only bags need rosbags.
        from rosbags.rosbag2 import Reader
        from rosbags.typesys import Stores, get_typestore

        path = Path(config.uri).expanduser()
        if not config.uri or not path.exists():
            raise SourceError(
                f'bag {config.uri or "(empty uri)"} does not exist; set uri to a rosbag2 '
                'folder or its .mcap/.db3 file'
            )
        if path.is_dir() and not (path / 'metadata.yaml').is_file():
            raise SourceError(
                f'folder {path} is not a rosbag2 bag (it has no metadata.yaml); set uri to a bag '
                'folder or to an .mcap or .db3 file'
            )
        self._path = path
        try:
            self._reader = Reader(path)
            self._reader.open()
        except Exception as error:  # noqa: BLE001 - rosbags raises many types for bad files
            raise SourceError(
                f'bag {path} cannot be read ({_first_line(error)}); pass a rosbag2 folder '
                'with metadata.yaml, or an .mcap or .db3 file'
            ) from None
        try:
            self._typestore = get_typestore(Stores.LATEST)
            topics = self._reader.topics
            image_topic = config.image_topic or self._only_image_topic(topics)
            self._image = self._connections(topics, image_topic, 'bag_image_topic', 'image')
            self._info: list = []
            self._imu: list = []
            if config.camera_info_topic:
                self._info = self._connections(
                    topics, config.camera_info_topic, 'bag_camera_info_topic', 'info'
                )
            if config.imu_topic:
                self._imu = self._connections(topics, config.imu_topic, 'bag_imu_topic', 'imu')
            self._image_topic = image_topic
            self.has_imu = bool(self._imu)
            count = topics[image_topic].msgcount
            duration_s = self._reader.duration / 1e9
            self.nominal_rate_hz = (count - 1) / duration_s if count > 1 and duration_s else None
            self.description = (
                f'bag {path}: {count} images on {image_topic}'
                + (f', camera info on {config.camera_info_topic}' if self._info else '')
                + (f', IMU on {config.imu_topic}' if self._imu else '')
            )
            self._check_first_image()
        except BaseException:
            self._reader.close()
            raise

    def _only_image_topic(self, topics: dict) -> str:
        candidates = [
            topic
            for topic, info in topics.items()
            if info.msgtype in (_IMAGE_TYPE, _COMPRESSED_TYPE)
        ]
        if len(candidates) != 1:
            found = ', '.join(candidates) if candidates else 'none'
            raise SourceError(
                f'bag {self._path} has {len(candidates)} image topics ({found}); set '
                'bag_image_topic to the one to publish'
            )
        return candidates[0]

    def _connections(self, topics: dict, topic: str, parameter: str, role: str) -> list:
        expected = {
            'image': (_IMAGE_TYPE, _COMPRESSED_TYPE),
            'info': (_CAMERA_INFO_TYPE,),
            'imu': (_IMU_TYPE,),
        }[role]
        if topic not in topics:
            listing = ', '.join(f'{name} ({info.msgtype})' for name, info in topics.items())
            raise SourceError(
                f'bag {self._path} has no topic {topic}; set {parameter} to one of its topics: '
                f'{listing or "none"}'
            )
        msgtype = topics[topic].msgtype
        if msgtype not in expected:
            raise SourceError(
                f'topic {topic} of bag {self._path} is {msgtype}, not {" or ".join(expected)}; '
                f'fix {parameter}'
            )
        return list(topics[topic].connections)

    def _check_first_image(self) -> None:
        # Fail at open, not after the first seconds of playback, on an unusable encoding.
        for connection, _, raw in self._reader.messages(connections=self._image):
            message = self._typestore.deserialize_cdr(raw, connection.msgtype)
            self._decode_image(connection.msgtype, message)
            break

    def _decode_image(self, msgtype: str, message: Any) -> tuple[np.ndarray, str]:
        where = f'topic {self._image_topic} of bag {self._path}'
        if msgtype == _COMPRESSED_TYPE:
            return decode_compressed(message.data, message.format, where)
        try:
            return imgmsg_to_cv2(message), message.encoding
        except ImageFormatError as error:
            raise SourceError(f'{where}: {error}') from None

    def __iter__(self) -> Iterator[Sample]:
        pending: list[tuple[int, int, int, str, Any]] = []
        sequence = itertools.count()
        calibration: CameraCalibration | None = None
        connections = [*self._image, *self._info, *self._imu]
        for connection, log_time_ns, raw in self._reader.messages(connections=connections):
            message = self._typestore.deserialize_cdr(raw, connection.msgtype)
            # A zero header stamp means the recorder did not stamp it; use the log time.
            header_ns = stamp_ns(message.header.stamp) or log_time_ns
            priority = self._PRIORITY[connection.msgtype]
            entry = (header_ns, priority, next(sequence), connection.msgtype, message)
            heapq.heappush(pending, entry)
            while len(pending) > _BAG_REORDER_WINDOW:
                calibration, sample = self._release(heapq.heappop(pending), calibration)
                if sample is not None:
                    yield sample
        while pending:
            calibration, sample = self._release(heapq.heappop(pending), calibration)
            if sample is not None:
                yield sample

    def _release(
        self, entry: tuple[int, int, int, str, Any], calibration: CameraCalibration | None
    ) -> tuple[CameraCalibration | None, Sample | None]:
        stamp_ns, _, _, msgtype, message = entry
        if msgtype == _CAMERA_INFO_TYPE:
            return _calibration_from_message(message, str(self._path)) or calibration, None
        if msgtype == _IMU_TYPE:
            return calibration, _imu_from_message(message, stamp_ns)
        image, encoding = self._decode_image(msgtype, message)
        return calibration, Frame(stamp_ns, image, encoding, calibration)

    def close(self) -> None:
        if self._reader.is_open:
            self._reader.close()


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


# -- synthetic ------------------------------------------------------------------------------


def synthetic_shift_px(width: int) -> int:
    """Return how many pixels the synthetic pattern moves right per frame."""
    return max(1, round(width * _SYNTHETIC_SHIFT_FRACTION))


def synthetic_image(index: int, width: int, height: int) -> np.ndarray:
    """Return frame ``index`` of the synthetic pattern, rgb8.

    A horizontal colour gradient and a white rectangle both move right by
    :func:`synthetic_shift_px` per frame (wrapping around); the frame index is printed at
    the top left. The same index always gives the same pixels.
    """
    shift = index * synthetic_shift_px(width)
    columns = (np.arange(width) - shift) % width
    red = (columns * 255 // max(1, width - 1)).astype(np.uint8)
    green = (np.arange(height) * 255 // max(1, height - 1)).astype(np.uint8)
    image = np.empty((height, width, 3), np.uint8)
    image[:, :, 0] = red[None, :]
    image[:, :, 1] = green[:, None]
    image[:, :, 2] = 96
    box_w, box_h = max(2, width // 8), max(2, height // 4)
    left = (width // 4 + shift) % width
    top = (height - box_h) // 2
    box_columns = (left + np.arange(box_w)) % width
    image[top : top + box_h, box_columns] = 255
    scale = max(0.3, height / 240.0)
    cv2.putText(
        image,
        str(index),
        (2, max(10, int(24 * scale))),
        cv2.FONT_HERSHEY_SIMPLEX,
        scale,
        (0, 0, 0),
        max(1, int(2 * scale)),
        cv2.LINE_8,
    )
    return image


class _SyntheticSource(SensorSource):
    def __init__(self, config: SourceConfig) -> None:
        if config.width < 8 or config.height < 8 or config.fps <= 0:
            raise SourceError(
                f'the synthetic source needs at least 8x8 pixels and a positive rate, not '
                f'{config.width}x{config.height} at {config.fps} fps'
            )
        if config.imu_rate_hz < 0:
            raise SourceError(
                f'the IMU rate must be 0 (off) or positive, not {config.imu_rate_hz}'
            )
        self._width, self._height, self._fps = config.width, config.height, config.fps
        self._imu_rate_hz = config.imu_rate_hz
        self.nominal_rate_hz = config.fps
        self.has_imu = config.imu_rate_hz > 0
        self.start_time_ns = _wall_clock_ns(config.start_time_ns)
        # The scene moving right at v px/s is what a camera yawing left sees: about the
        # optical y axis (pointing down) that is a negative rate of v / fx.
        focal = default_pinhole(config.width, config.height, config.hfov_deg).camera_matrix[0]
        speed_px_s = synthetic_shift_px(config.width) * config.fps
        self.yaw_rate = -speed_px_s / focal
        imu = f', IMU at {config.imu_rate_hz:g} Hz' if self.has_imu else ''
        self.description = (
            f'synthetic pattern {config.width}x{config.height} at {config.fps:g} fps{imu}'
        )

    def __iter__(self) -> Iterator[Sample]:
        assert self.start_time_ns is not None  # noqa: S101 - set in __init__
        start = self.start_time_ns
        frame_index = imu_index = 0
        while True:
            frame_ns = start + round(frame_index * 1e9 / self._fps)
            imu_ns = (
                start + round(imu_index * 1e9 / self._imu_rate_hz) if self.has_imu else math.inf
            )
            if imu_ns <= frame_ns:
                # Axes of the camera optical frame: at rest the accelerometer reads the
                # reaction to gravity, which points up, i.e. along -y.
                yield ImuSample(
                    int(imu_ns), (0.0, self.yaw_rate, 0.0), (0.0, -STANDARD_GRAVITY, 0.0)
                )
                imu_index += 1
            else:
                image = synthetic_image(frame_index, self._width, self._height)
                yield Frame(frame_ns, image, 'rgb8')
                frame_index += 1
