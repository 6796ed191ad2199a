# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Read and write camera calibrations in the camera_info_manager YAML format.

The format is the one of ``camera_calibration_parsers`` (what ``camera_info_manager`` loads
and ``cameracalibrator`` saves)::

    image_width: 640
    image_height: 480
    camera_name: front
    camera_matrix: {rows: 3, cols: 3, data: [fx, 0, cx, 0, fy, cy, 0, 0, 1]}
    distortion_model: plumb_bob
    distortion_coefficients: {rows: 1, cols: 5, data: [k1, k2, t1, t2, k3]}
    rectification_matrix: {rows: 3, cols: 3, data: [...]}
    projection_matrix: {rows: 3, cols: 4, data: [...]}

Like ``camera_calibration_parsers``, ``camera_name`` may be missing (``unknown``) and
``distortion_model`` too (``plumb_bob``). Everything else is required and checked; a
problem raises ``CameraInfoError`` naming the file and the key. Only
:func:`to_camera_info_msg` needs ROS (``sensor_msgs``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import yaml

from edge_offload.camera_model import PinholeCamera

if TYPE_CHECKING:
    from sensor_msgs.msg import CameraInfo

# Distortion models of sensor_msgs/distortion_models.h and their coefficient counts.
_DISTORTION_COEFFICIENTS = {'plumb_bob': 5, 'rational_polynomial': 8, 'equidistant': 4}
_REQUIRED_KEYS = (
    'image_width',
    'image_height',
    'camera_matrix',
    'distortion_coefficients',
    'rectification_matrix',
    'projection_matrix',
)
_IDENTITY_3X3 = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)


class CameraInfoError(ValueError):
    """A calibration file or URL that cannot be used."""


@dataclass(frozen=True)
class CameraCalibration:
    """A monocular camera calibration, row-major matrices as in sensor_msgs/CameraInfo."""

    image_width: int
    image_height: int
    camera_matrix: tuple[float, ...]  # K, 3x3
    distortion_coefficients: tuple[float, ...]  # D
    rectification_matrix: tuple[float, ...] = _IDENTITY_3X3  # R, 3x3
    projection_matrix: tuple[float, ...] = ()  # P, 3x4; empty: K with a zero column
    distortion_model: str = 'plumb_bob'
    camera_name: str = 'unknown'

    def __post_init__(self) -> None:
        if not self.projection_matrix:
            k = self.camera_matrix
            projection = (k[0], k[1], k[2], 0.0, k[3], k[4], k[5], 0.0, k[6], k[7], k[8], 0.0)
            object.__setattr__(self, 'projection_matrix', projection)
        _validate(self.__dict__, 'calibration')


def _validate(fields: dict[str, Any], where: str) -> None:
    for name in ('image_width', 'image_height'):
        value = fields[name]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise CameraInfoError(f'{where}: {name} must be a positive integer, not {value!r}')
    for name, size in (
        ('camera_matrix', 9),
        ('rectification_matrix', 9),
        ('projection_matrix', 12),
    ):
        values = fields[name]
        if len(values) != size:
            raise CameraInfoError(f'{where}: {name} needs {size} values, got {len(values)}')
    expected = _DISTORTION_COEFFICIENTS.get(fields['distortion_model'])
    coefficients = fields['distortion_coefficients']
    if expected is not None and len(coefficients) != expected:
        raise CameraInfoError(
            f'{where}: distortion model {fields["distortion_model"]!r} needs {expected} '
            f'distortion_coefficients, got {len(coefficients)}'
        )
    for name in (
        'camera_matrix',
        'distortion_coefficients',
        'rectification_matrix',
        'projection_matrix',
    ):
        if not all(math.isfinite(value) for value in fields[name]):
            raise CameraInfoError(f'{where}: {name} holds a value that is not a finite number')


def default_pinhole(
    width: int, height: int, hfov_deg: float = 60.0, camera_name: str = 'default_pinhole'
) -> CameraCalibration:
    """Return an undistorted pinhole model: square pixels, principal point at the centre."""
    if not 0.0 < hfov_deg < 180.0:
        raise CameraInfoError(f'horizontal field of view must be in (0, 180) deg, not {hfov_deg}')
    camera = PinholeCamera.from_fov(width, height, hfov_deg)
    return CameraCalibration(
        image_width=width,
        image_height=height,
        camera_matrix=tuple(float(value) for value in camera.matrix.flat),
        distortion_coefficients=(0.0,) * 5,
        camera_name=camera_name,
    )


def _number_list(value: Any, where: str, key: str) -> tuple[float, ...]:
    if not isinstance(value, list):
        raise CameraInfoError(f'{where}: {key} must be a list of numbers')
    try:
        if any(isinstance(item, bool) for item in value):
            raise TypeError
        return tuple(float(item) for item in value)
    except (TypeError, ValueError):
        raise CameraInfoError(f'{where}: {key} must be a list of numbers') from None


def _matrix(document: dict, key: str, where: str, shape: tuple[int, int] | None) -> tuple:
    node = document[key]
    # Some tools write distortion coefficients as a bare list; accept it.
    if isinstance(node, list) and shape is None:
        return _number_list(node, where, key)
    if not isinstance(node, dict) or not {'rows', 'cols', 'data'} <= node.keys():
        raise CameraInfoError(f'{where}: {key} must be a mapping with rows, cols and data')
    rows, cols = node['rows'], node['cols']
    if not isinstance(rows, int) or not isinstance(cols, int) or rows < 0 or cols < 0:
        raise CameraInfoError(f'{where}: {key} rows and cols must be non-negative integers')
    if shape is not None and (rows, cols) != shape:
        raise CameraInfoError(
            f'{where}: {key} must be {shape[0]}x{shape[1]}, the file says {rows}x{cols}'
        )
    data = _number_list(node['data'], where, key)
    if len(data) != rows * cols:
        raise CameraInfoError(
            f'{where}: {key} is {rows}x{cols} but its data holds {len(data)} values'
        )
    return data


def calibration_from_dict(document: Any, where: str = 'camera info') -> CameraCalibration:
    """Build a calibration from a parsed camera_info_manager YAML document."""
    if not isinstance(document, dict):
        raise CameraInfoError(f'{where}: expected a YAML mapping of calibration keys')
    missing = [key for key in _REQUIRED_KEYS if key not in document]
    if missing:
        raise CameraInfoError(f'{where}: missing key(s) {", ".join(missing)}')
    model = document.get('distortion_model', 'plumb_bob')
    name = document.get('camera_name', 'unknown')
    if not isinstance(model, str) or not isinstance(name, str):
        raise CameraInfoError(f'{where}: camera_name and distortion_model must be strings')
    fields = dict(
        image_width=document['image_width'],
        image_height=document['image_height'],
        camera_name=name,
        camera_matrix=_matrix(document, 'camera_matrix', where, (3, 3)),
        distortion_model=model,
        distortion_coefficients=_matrix(document, 'distortion_coefficients', where, None),
        rectification_matrix=_matrix(document, 'rectification_matrix', where, (3, 3)),
        projection_matrix=_matrix(document, 'projection_matrix', where, (3, 4)),
    )
    # Checked here first so that an error names the file.
    _validate(fields, where)
    return CameraCalibration(**fields)


def calibration_to_dict(calibration: CameraCalibration) -> dict[str, Any]:
    """Return the camera_info_manager YAML document of ``calibration``."""

    def matrix(rows: int, cols: int, data: tuple[float, ...]) -> dict[str, Any]:
        return {'rows': rows, 'cols': cols, 'data': [float(value) for value in data]}

    return {
        'image_width': calibration.image_width,
        'image_height': calibration.image_height,
        'camera_name': calibration.camera_name,
        'camera_matrix': matrix(3, 3, calibration.camera_matrix),
        'distortion_model': calibration.distortion_model,
        'distortion_coefficients': matrix(
            1, len(calibration.distortion_coefficients), calibration.distortion_coefficients
        ),
        'rectification_matrix': matrix(3, 3, calibration.rectification_matrix),
        'projection_matrix': matrix(3, 4, calibration.projection_matrix),
    }


def resolve_camera_info_url(url: str) -> Path:
    """Return the file named by a path, a ``file://`` URL or a ``package://`` URL."""
    if url.startswith('package://'):
        package, _, relative = url[len('package://') :].partition('/')
        # Imported here: only package URLs need the ament index.
        from ament_index_python.packages import (
            PackageNotFoundError,
            get_package_share_directory,
        )

        try:
            return Path(get_package_share_directory(package)) / relative
        except PackageNotFoundError:
            raise CameraInfoError(
                f'camera info URL {url}: package {package!r} is not installed'
            ) from None
    if '://' in url:
        parsed = urlparse(url)
        if parsed.scheme != 'file':
            raise CameraInfoError(
                f'camera info URL {url}: only file://, package:// and plain paths are supported'
            )
        return Path(unquote(parsed.netloc + parsed.path))
    return Path(os.path.expanduser(url))


def load_camera_info(url: str) -> CameraCalibration:
    """Read the calibration at a path or ``file://``/``package://`` URL."""
    path = resolve_camera_info_url(url)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise CameraInfoError(
            f'camera info file {path} does not exist; fix camera_info_url or leave it empty '
            'for a default pinhole model'
        ) from None
    except OSError as error:
        raise CameraInfoError(f'camera info file {path} cannot be read: {error}') from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise CameraInfoError(f'camera info file {path} is not valid YAML: {error}') from None
    return calibration_from_dict(document, f'camera info file {path}')


def save_camera_info(calibration: CameraCalibration, path: str | Path) -> None:
    """Write ``calibration`` to ``path`` in the camera_info_manager YAML format."""
    # default_flow_style=None writes the data lists inline, as camera_calibration_parsers does.
    text = yaml.safe_dump(
        calibration_to_dict(calibration), sort_keys=False, default_flow_style=None
    )
    Path(path).write_text(text)


def to_camera_info_msg(calibration: CameraCalibration, frame_id: str = '') -> CameraInfo:
    """Return a ``sensor_msgs/CameraInfo`` of ``calibration`` (the header stamp left zero)."""
    # Imported here so the rest of this module runs without ROS.
    from sensor_msgs.msg import CameraInfo  # noqa: F811

    message = CameraInfo()
    message.header.frame_id = frame_id
    message.width = calibration.image_width
    message.height = calibration.image_height
    message.distortion_model = calibration.distortion_model
    message.d = [float(value) for value in calibration.distortion_coefficients]
    message.k = [float(value) for value in calibration.camera_matrix]
    message.r = [float(value) for value in calibration.rectification_matrix]
    message.p = [float(value) for value in calibration.projection_matrix]
    return message
