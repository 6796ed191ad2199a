# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The person localizer finds a box-shaped person in front of a wall from keypoints and depth.

The scenes are rendered here: one ray per depth pixel centre against an axis-aligned box (the
body) and a wall, in the optical frame; keypoints are projections of known 3-D torso points
with the RGB intrinsics. Everything is seeded, so the tests are deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from edge_offload.camera_model import PinholeCamera
from people_following.person_localizer import (
    LEFT_HIP,
    LEFT_SHOULDER,
    RIGHT_HIP,
    RIGHT_SHOULDER,
    TORSO_KEYPOINTS,
    Localization,
    LocalizationFailure,
    LocalizerConfig,
    PersonLocalizer,
    PersonLocation,
    check_rigid_transform,
)
from people_following.person_tracker import Detection, PersonTracker

NOSE, LEFT_WRIST, RIGHT_WRIST = 0, 9, 10
WALL_Z = 6.0


def _pinhole(width: int, height: int, hfov_deg: float) -> PinholeCamera:
    """Make a camera as people_following.camera_info_file.default_pinhole does, through its K."""
    focal = (width / 2.0) / math.tan(math.radians(hfov_deg) / 2.0)
    k = [focal, 0.0, (width - 1) / 2.0, 0.0, focal, (height - 1) / 2.0, 0.0, 0.0, 1.0]
    return PinholeCamera.from_k(k, width, height)


def _resampled(
    camera: PinholeCamera,
    width: int,
    height: int,
    box: tuple[float, float, float, float] | None = None,
) -> PinholeCamera:
    """Return the camera of an image resampling ``box`` (left, top, right, bottom edges).

    A corner-origin coordinate x maps to (x - left)·width / (right - left); with K's
    centre-origin coordinates that is cx' = (cx + 0.5 - left)·s - 0.5.
    """
    left, top, right, bottom = box or (0.0, 0.0, camera.width, camera.height)
    sx, sy = width / (right - left), height / (bottom - top)
    k = np.array(
        [
            [camera.fx * sx, 0.0, (camera.cx + 0.5 - left) * sx - 0.5],
            [0.0, camera.fy * sy, (camera.cy + 0.5 - top) * sy - 0.5],
            [0.0, 0.0, 1.0],
        ]
    )
    return PinholeCamera.from_k(k, width, height)


RGB = _pinhole(640, 480, 60.0)
# A depth network's 416×128 map of the full 640×480 field: non-square depth pixels.
DEPTH_RESIZED = _resampled(RGB, 416, 128)
# The same size cut from a central band of rows at the RGB aspect (0.65 depth px per px).
_BAND = 128 / (416 / 640)
DEPTH_CROPPED = _resampled(RGB, 416, 128, (0.0, (480 - _BAND) / 2, 640.0, (480 + _BAND) / 2))
DEPTH_CAMERAS = {'same': RGB, 'resized': DEPTH_RESIZED, 'cropped': DEPTH_CROPPED}


class BoxPerson:
    """A box-shaped person facing the camera; ``surface`` is the torso's centre on its front.

    Optical frame: the front face is at ``z``, the box 0.44 m wide, 0.25 m deep, from 0.6 m
    above the torso centre to 1.0 m below it. COCO left is the person's left: image right.
    """

    def __init__(self, x: float, y: float, z: float) -> None:
        self.surface = np.array([x, y, z])
        self.low = np.array([x - 0.22, y - 0.6, z])
        self.high = np.array([x + 0.22, y + 1.0, z + 0.25])
        self.joints = {
            LEFT_SHOULDER: (x + 0.18, y - 0.25, z),
            RIGHT_SHOULDER: (x - 0.18, y - 0.25, z),
            LEFT_HIP: (x + 0.10, y + 0.25, z),
            RIGHT_HIP: (x - 0.10, y + 0.25, z),
            NOSE: (x, y - 0.5, z),
            # Arms held out: the wrists are beside the body, in front of the wall.
            LEFT_WRIST: (x + 0.45, y + 0.1, z),
            RIGHT_WRIST: (x - 0.45, y + 0.1, z),
        }

    def keypoints(self, camera: PinholeCamera = RGB, score: float = 0.9) -> np.ndarray:
        """Return the (17, 3) keypoints of the joints, rounded to whole pixels like a heatmap's."""
        keypoints = np.zeros((17, 3))
        for index, joint in self.joints.items():
            keypoints[index, :2] = np.round(camera.pixel(joint))
            keypoints[index, 2] = score
        return keypoints

    def depth(self, camera: PinholeCamera, noise_m: float = 0.0, seed: int = 0) -> np.ndarray:
        """Render the z-depth image of the box in front of a wall at ``WALL_Z``."""
        columns, rows = np.meshgrid(np.arange(camera.width), np.arange(camera.height))
        rays = camera.ray(np.stack([columns + 0.5, rows + 0.5], axis=-1))  # z = 1: t is depth
        with np.errstate(divide='ignore', invalid='ignore'):
            t_low = self.low / rays
            t_high = self.high / rays
        t_near = np.max(np.minimum(t_low, t_high), axis=-1)
        t_far = np.min(np.maximum(t_low, t_high), axis=-1)
        hit = (t_near <= t_far) & (t_near > 0.0)
        depth = np.where(hit, t_near, WALL_Z)
        if noise_m:
            depth = depth + np.random.default_rng(seed).normal(0.0, noise_m, depth.shape)
        return depth


def _localize(
    person: BoxPerson,
    depth: np.ndarray,
    depth_camera: PinholeCamera = RGB,
    keypoints: np.ndarray | None = None,
    config: LocalizerConfig | None = None,
) -> Localization:
    keypoints = person.keypoints() if keypoints is None else keypoints
    return PersonLocalizer(config).localize(keypoints, depth, RGB, depth_camera)


def _rotation_z(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


# Optical axes in a base frame (x forward, y left, z up): columns are x right, y down, z fwd.
R_BASE_OPTICAL = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


def _transform(rotation: np.ndarray, translation: tuple[float, float, float]) -> np.ndarray:
    transform = np.eye(4)
    transform[:3, :3] = rotation
    transform[:3, 3] = translation
    return transform


# -- conventions ---------------------------------------------------------------------------


def test_pixel_convention_puts_the_optical_axis_at_the_image_centre():
    # K's cx = 319.5 is the centre of the middle pixels in CameraInfo's convention; in
    # Keypoint2D's corner-origin pixels the image centre is 320.
    assert RGB.pixel([0.0, 0.0, 3.0]) == pytest.approx([320.0, 240.0])
    assert RGB.ray([320.0, 240.0]) == pytest.approx([0.0, 0.0, 1.0])
    point = np.array([0.4, -0.3, 2.5])
    assert RGB.ray(RGB.pixel(point)) * point[2] == pytest.approx(point)
    # Behind the camera there is no pixel.
    assert np.all(np.isnan(RGB.pixel([0.0, 0.0, -1.0])))


@pytest.mark.parametrize('name', ['resized', 'cropped'])
def test_keypoint_reads_the_depth_pixel_that_covers_it(name):
    # Each depth pixel holds its own index, so the depth read back names the pixel used.
    camera = DEPTH_CAMERAS[name]
    left, top, right, bottom = {
        'resized': (0.0, 0.0, 640.0, 480.0),
        'cropped': (0.0, (480 - _BAND) / 2, 640.0, (480 + _BAND) / 2),
    }[name]
    index = np.arange(camera.width * camera.height, dtype=np.float64)
    depth = (1.0 + index / 10000.0).reshape(camera.height, camera.width)
    config = LocalizerConfig(window_half_size_px=0, min_valid_keypoints=1, max_depth_m=10.0)
    localizer = PersonLocalizer(config)
    rng = np.random.default_rng(1)
    checked = 0
    for _ in range(300):
        x, y = rng.uniform(0.0, 640.0), rng.uniform(top, bottom)
        # Where the point lies in the depth image, from the resampling's definition.
        depth_x = (x - left) * camera.width / (right - left)
        depth_y = (y - top) * camera.height / (bottom - top)
        if min(abs(depth_x - round(depth_x)), abs(depth_y - round(depth_y))) < 1e-6:
            continue  # on a pixel edge: either side is right
        keypoints = np.zeros((17, 3))
        keypoints[NOSE] = (x, y, 0.9)
        result = localizer.localize(keypoints, depth, RGB, camera)
        column, row = math.floor(depth_x), math.floor(depth_y)
        assert result.location.depth_m == pytest.approx(depth[row, column], abs=1e-12)
        checked += 1
    assert checked > 290


# -- accuracy ------------------------------------------------------------------------------


@pytest.mark.parametrize('distance', [2.0, 4.0])
def test_box_person_in_front_of_a_wall_is_located_within_2_cm(distance):
    person = BoxPerson(0.3, -0.1, distance)
    result = _localize(person, person.depth(RGB, noise_m=0.01))

    assert result.ok
    assert result.failure is None
    assert result.reason == ''
    location = result.location
    assert np.linalg.norm(location.point - person.surface) <= 0.02
    # The torso alone, though the nose and the wrists (over the wall) were found too.
    assert location.keypoint_ids == TORSO_KEYPOINTS
    assert location.depth_keypoint_ids == TORSO_KEYPOINTS
    assert location.keypoint_count == 4
    assert location.keypoint_depths_m == pytest.approx([distance] * 4, abs=0.01)


def test_depth_at_another_resolution_gives_the_same_answer():
    person = BoxPerson(0.3, 0.1, 2.5)
    points = {}
    for name, camera in DEPTH_CAMERAS.items():
        result = _localize(person, person.depth(camera), camera)
        assert result.ok, (name, result.reason)
        points[name] = result.location.point
        assert np.linalg.norm(points[name] - person.surface) <= 0.02, name
    # The front face's depth is exact in every grid: the same point to rounding.
    assert points['resized'] == pytest.approx(points['same'], abs=1e-9)
    assert points['cropped'] == pytest.approx(points['same'], abs=1e-9)


@pytest.mark.parametrize('distance', [2.0, 4.0])
@pytest.mark.parametrize('name', ['same', 'cropped'])
def test_holes_and_a_keypoint_on_the_wall_stay_within_3_cm(distance, name):
    camera = DEPTH_CAMERAS[name]
    person = BoxPerson(-0.2, 0.0, distance)
    depth = person.depth(camera, noise_m=0.01, seed=2)
    rng = np.random.default_rng(3)
    holes = rng.random(depth.shape) < 0.3
    depth[holes] = np.where(rng.random(depth.shape) < 0.5, np.nan, 0.0)[holes]
    # The depth behind the right shoulder reads the wall (misregistration at the silhouette),
    # over more than the keypoint's window.
    x, y = camera.pixel(person.joints[RIGHT_SHOULDER])
    depth[int(y) - 4 : int(y) + 5, int(x) - 4 : int(x) + 5] = WALL_Z
    assert np.mean(~np.isfinite(depth) | (depth == 0.0)) >= 0.28

    result = _localize(person, depth, camera)

    assert result.ok, result.reason
    location = result.location
    assert np.linalg.norm(location.point - person.surface) <= 0.03
    assert location.keypoint_depths_m[TORSO_KEYPOINTS.index(RIGHT_SHOULDER)] == pytest.approx(
        WALL_Z, abs=0.05
    )
    # The shoulder's pixel still counts for the image point, its depth does not.
    assert location.keypoint_ids == TORSO_KEYPOINTS
    assert location.depth_keypoint_ids == (LEFT_SHOULDER, LEFT_HIP, RIGHT_HIP)


def test_half_the_torso_over_the_wall_still_finds_the_person():
    # Two of four depths on the wall: the median of four would average person and wall.
    person = BoxPerson(0.0, 0.0, 2.0)
    depth = person.depth(RGB)
    for joint in (RIGHT_SHOULDER, RIGHT_HIP):
        x, y = RGB.pixel(person.joints[joint])
        depth[int(y) - 4 : int(y) + 5, int(x) - 4 : int(x) + 5] = WALL_Z

    result = _localize(person, depth)

    assert result.ok
    assert result.location.depth_m == pytest.approx(2.0, abs=1e-9)
    assert result.location.depth_keypoint_ids == (LEFT_SHOULDER, LEFT_HIP)


def test_without_torso_keypoints_all_keypoints_are_used():
    person = BoxPerson(0.0, 0.3, 2.0)
    keypoints = person.keypoints()
    keypoints[[LEFT_SHOULDER, RIGHT_SHOULDER, RIGHT_HIP], 2] = 0.1  # below the score
    result = _localize(person, person.depth(RGB), keypoints=keypoints)

    assert result.ok
    location = result.location
    assert location.keypoint_ids == (NOSE, LEFT_WRIST, RIGHT_WRIST, LEFT_HIP)
    # The wrists are over the wall: the nose and the hip give the depth.
    assert location.depth_keypoint_ids == (NOSE, LEFT_HIP)
    assert location.depth_m == pytest.approx(2.0, abs=1e-9)


# -- failures ------------------------------------------------------------------------------


def _only(person: BoxPerson, *ids: int) -> np.ndarray:
    keypoints = person.keypoints()
    keep = np.zeros(17, dtype=bool)
    keep[list(ids)] = True
    keypoints[~keep] = 0.0
    return keypoints


def _failure_cases() -> dict[str, tuple]:
    person = BoxPerson(0.0, 0.0, 2.0)
    depth = person.depth(RGB)
    hip_on_wall = depth.copy()
    x, y = RGB.pixel(person.joints[RIGHT_HIP])
    hip_on_wall[int(y) - 4 : int(y) + 5, int(x) - 4 : int(x) + 5] = WALL_Z
    far = BoxPerson(0.0, 0.0, 12.0)  # beyond max_depth_m
    high = BoxPerson(0.0, -0.7, 2.0)  # the torso above the cropped band
    outside = person.keypoints()
    outside[:, 0] += 700.0  # to the right of the image
    return {
        'no keypoints': (person, depth, RGB, np.zeros((17, 3)), LocalizationFailure.NO_KEYPOINTS),
        'low scores': (
            person,
            depth,
            RGB,
            person.keypoints(score=0.2),
            LocalizationFailure.NO_KEYPOINTS,
        ),
        'outside the image': (person, depth, RGB, outside, LocalizationFailure.NO_KEYPOINTS),
        'one keypoint': (
            person,
            depth,
            RGB,
            _only(person, LEFT_HIP),
            LocalizationFailure.NO_DEPTH,
        ),
        'no depth at all': (
            person,
            np.full_like(depth, np.nan),
            RGB,
            None,
            LocalizationFailure.NO_DEPTH,
        ),
        'zero depth': (person, np.zeros_like(depth), RGB, None, LocalizationFailure.NO_DEPTH),
        'too far': (far, far.depth(RGB), RGB, None, LocalizationFailure.NO_DEPTH),
        'outside the depth crop': (
            high,
            high.depth(DEPTH_CROPPED),
            DEPTH_CROPPED,
            None,
            LocalizationFailure.NO_DEPTH,
        ),
        'two hips that disagree': (
            person,
            hip_on_wall,
            RGB,
            _only(person, LEFT_HIP, RIGHT_HIP),
            LocalizationFailure.INCONSISTENT_DEPTH,
        ),
    }


@pytest.mark.parametrize('case', list(_failure_cases()))
def test_person_that_cannot_be_localized_is_none_with_a_reason(case):
    person, depth, camera, keypoints, failure = _failure_cases()[case]
    result = _localize(person, depth, camera, keypoints=keypoints)

    assert not result.ok
    assert result.location is None
    assert result.failure == failure
    assert len(result.reason) > 10


def test_localization_has_a_location_or_a_failure():
    with pytest.raises(ValueError, match='either a location or a failure'):
        Localization(None)
    with pytest.raises(ValueError, match='either a location or a failure'):
        Localization(_location(), LocalizationFailure.NO_DEPTH)


# -- uncertainty and frames ----------------------------------------------------------------


def test_covariance_follows_the_model_and_grows_with_distance():
    config = LocalizerConfig()
    variances = []
    for distance in (1.5, 3.0, 6.0):
        person = BoxPerson(0.5, 0.0, distance)
        location = _localize(person, person.depth(RGB)).location
        covariance = location.covariance
        assert covariance == pytest.approx(covariance.T)
        assert np.all(np.linalg.eigvalsh(covariance) > 0.0)
        # Exact depths: no spread, so σ_Z is the sensor model's a + b·Z².
        sigma_z = config.depth_noise_const_m + config.depth_noise_quad_per_m * distance**2
        assert covariance[2, 2] == pytest.approx(sigma_z**2)
        # X = Z·(u - cx)/fx: σ_X² = (Z/fx)²·σ_px² + (X/Z)²·σ_Z².
        x = location.point[0]
        expected_xx = (distance / RGB.fx * config.pixel_sigma_px) ** 2 + (x / distance) ** 2 * (
            sigma_z**2
        )
        assert covariance[0, 0] == pytest.approx(expected_xx)
        assert covariance[0, 2] == pytest.approx(x / distance * sigma_z**2)
        variances.append(np.diag(covariance))
    for near, far in zip(variances, variances[1:], strict=False):
        assert np.all(far > near)


def test_disagreeing_keypoint_depths_widen_the_depth_variance():
    # The hips 0.2 m behind the shoulders (a person leaning forward), within the tolerance.
    # The MAD is robust: one keypoint off would leave it at zero; two of four widen it.
    person = BoxPerson(0.0, 0.0, 3.0)
    depth = person.depth(RGB)
    for joint in (LEFT_HIP, RIGHT_HIP):
        x, y = RGB.pixel(person.joints[joint])
        depth[int(y) - 4 : int(y) + 5, int(x) - 4 : int(x) + 5] = 3.2
    agreeing = _localize(person, person.depth(RGB)).location
    spread = _localize(person, depth).location

    assert spread.depth_keypoint_ids == TORSO_KEYPOINTS
    assert spread.depth_m == pytest.approx(3.1)
    config = LocalizerConfig()
    sensor_sigma = config.depth_noise_const_m + config.depth_noise_quad_per_m * 3.1**2
    # MAD 0.1 m, scaled to a standard deviation by 1.4826, added in quadrature.
    assert spread.covariance[2, 2] == pytest.approx(sensor_sigma**2 + (1.4826 * 0.1) ** 2)
    assert spread.covariance[2, 2] > agreeing.covariance[2, 2] * 1.5


def _location(point=(0.2, -0.1, 3.0), variances=(0.01, 0.02, 0.09)) -> PersonLocation:
    return PersonLocation(
        point=np.array(point),
        covariance=np.diag(variances),
        pixel=RGB.pixel(point),
        keypoint_ids=TORSO_KEYPOINTS,
        keypoint_depths_m=(point[2],) * 4,
        depth_keypoint_ids=TORSO_KEYPOINTS,
    )


def test_transform_to_odom_matches_a_hand_computed_case_and_builds_a_detection():
    # Robot at (1, 2) facing +y (yaw 90°), camera 0.5 m up, looking along the robot's x.
    # Optical (x, y, z) -> base (z, -x, -y) -> odom after the yaw (x, z, -y) + translation.
    t_odom_optical = _transform(_rotation_z(math.pi / 2) @ R_BASE_OPTICAL, (1.0, 2.0, 0.5))
    localizer = PersonLocalizer(LocalizerConfig(body_centre_offset_m=0.0))
    odom = localizer.to_odom(_location(), t_odom_optical)

    assert odom.position == pytest.approx([1.2, 5.0, 0.6])
    assert odom.covariance == pytest.approx(np.diag([0.01, 0.09, 0.02]))
    assert odom.ground_position == pytest.approx([1.2, 5.0])
    assert odom.ground_covariance == pytest.approx(np.diag([0.01, 0.09]))
    assert odom.height == pytest.approx(0.6)

    detection = odom.detection()
    assert isinstance(detection, Detection)
    assert detection.position == pytest.approx([1.2, 5.0])
    assert detection.covariance == pytest.approx(np.diag([0.01, 0.09]))
    assert detection.z == pytest.approx(0.6)
    # The parts are what Detection takes, and the tracker takes the detection.
    parts = Detection(odom.ground_position, odom.ground_covariance, z=odom.height)
    assert parts.position == pytest.approx(detection.position)
    assert parts.covariance == pytest.approx(detection.covariance)
    tracker = PersonTracker()
    (track,) = tracker.update(0.0, [detection], robot_position=(1.0, 2.0))
    assert track.position == pytest.approx([1.2, 5.0])


def test_body_centre_offset_moves_the_point_away_from_the_camera_horizontally():
    offset = 0.15
    t_odom_optical = _transform(_rotation_z(0.3) @ R_BASE_OPTICAL, (1.0, -2.0, 0.5))
    plain = PersonLocalizer(LocalizerConfig(body_centre_offset_m=0.0))
    moved = PersonLocalizer(LocalizerConfig(body_centre_offset_m=offset))
    location = _location(point=(0.8, -0.4, 2.0), variances=(0.02, 0.03, 0.04))
    surface = plain.to_odom(location, t_odom_optical)
    centre = moved.to_odom(location, t_odom_optical)

    away = surface.ground_position - np.array([1.0, -2.0])
    distance = np.linalg.norm(away)
    direction = away / distance
    assert centre.ground_position == pytest.approx(surface.ground_position + offset * direction)
    assert centre.height == pytest.approx(surface.height)
    # Along the range the variance is unchanged; across it, scaled by (1 + offset / range)².
    across = np.array([-direction[1], direction[0]])
    for axis, factor in ((direction, 1.0), (across, (1.0 + offset / distance) ** 2)):
        assert axis @ centre.ground_covariance @ axis == pytest.approx(
            factor * (axis @ surface.ground_covariance @ axis)
        )


def test_localized_person_lands_at_the_truth_in_odom():
    # Camera 0.1 m ahead of a robot at (3, 1) with yaw -40°, 0.5 m up, pitched up 10°.
    pitch = math.radians(10.0)
    c, s = math.cos(pitch), math.sin(pitch)
    pitch_up = np.array([[c, 0.0, -s], [0.0, 1.0, 0.0], [s, 0.0, c]])  # about base y, nose up
    yaw = _rotation_z(math.radians(-40.0))
    rotation = yaw @ pitch_up @ R_BASE_OPTICAL
    translation = np.array([3.0, 1.0, 0.0]) + yaw @ np.array([0.1, 0.0, 0.5])
    t_odom_optical = _transform(rotation, tuple(translation))
    person = BoxPerson(-0.4, 0.2, 3.0)
    localizer = PersonLocalizer(LocalizerConfig(body_centre_offset_m=0.0))
    location = _localize(person, person.depth(RGB, noise_m=0.01)).location

    odom = localizer.to_odom(location, t_odom_optical)

    truth = rotation @ person.surface + translation
    assert np.linalg.norm(odom.position - truth) <= 0.02
    assert odom.covariance == pytest.approx(rotation @ location.covariance @ rotation.T)
    odom.detection()  # a valid Detection


# -- bad input -----------------------------------------------------------------------------


def _good() -> dict:
    person = BoxPerson(0.0, 0.0, 2.0)
    return {'keypoints': person.keypoints(), 'depth': person.depth(RGB)}


def _with_keypoint(index: int, values: tuple[float, float, float]) -> np.ndarray:
    keypoints = _good()['keypoints']
    keypoints[index] = values
    return keypoints


@pytest.mark.parametrize(
    ('change', 'message'),
    [
        ({'keypoints': np.zeros((17, 2))}, r'keypoints must be \(17, 3\)'),
        ({'keypoints': np.zeros((16, 3))}, r'keypoints must be \(17, 3\)'),
        ({'keypoints': [['a', 'b', 'c']] * 17}, 'keypoints must be a'),
        ({'keypoints': _with_keypoint(5, (np.nan, 10.0, 0.5))}, r'keypoints \[5\] have a score'),
        ({'keypoints': _with_keypoint(11, (3.0, np.inf, 0.1))}, r'keypoints \[11\] have a score'),
        ({'keypoints': _with_keypoint(0, (3.0, 4.0, 1.5))}, r'scores must be in \[0, 1\]'),
        ({'keypoints': _with_keypoint(0, (3.0, 4.0, np.nan))}, r'scores must be in \[0, 1\]'),
        ({'depth': np.ones((480, 640, 1))}, 'depth must be a 2-D image'),
        ({'depth': np.ones(640)}, 'depth must be a 2-D image'),
        ({'depth': np.ones((480, 640), dtype=np.uint16)}, 'depth must be float metres'),
        ({'depth': np.ones((240, 320))}, 'depth image is 320x240, its intrinsics say 640x480'),
    ],
)
def test_bad_input_is_refused(change, message):
    arguments = {**_good(), **change}
    with pytest.raises(ValueError, match=message):
        PersonLocalizer().localize(arguments['keypoints'], arguments['depth'], RGB, RGB)


def test_absent_keypoints_may_hold_nan():
    arguments = _good()
    arguments['keypoints'][NOSE] = (np.nan, np.nan, 0.0)
    assert PersonLocalizer().localize(arguments['keypoints'], arguments['depth'], RGB, RGB).ok


def test_wrong_types_are_refused():
    arguments = _good()
    with pytest.raises(TypeError, match='depth_camera must be PinholeCamera'):
        PersonLocalizer().localize(arguments['keypoints'], arguments['depth'], RGB, None)
    with pytest.raises(TypeError, match='location must be PersonLocation'):
        PersonLocalizer().to_odom(None, np.eye(4))


_K = [500.0, 0.0, 319.5, 0.0, 500.0, 239.5, 0.0, 0.0, 1.0]


@pytest.mark.parametrize(
    ('k', 'width', 'height', 'message'),
    [
        ([0.0] * 9, 640, 480, 'all zeros: the camera is uncalibrated'),
        ([0.0] * 8 + [1.0], 640, 480, 'fx must be positive.*uncalibrated'),
        (_K[:4] + [-500.0] + _K[5:], 640, 480, 'fy must be positive'),
        (_K[:1] + [2.0] + _K[2:], 640, 480, 'no skew'),
        (_K[:2] + [np.nan] + _K[3:], 640, 480, 'K must be finite'),
        (np.eye(2), 640, 480, 'K must be 3x3 or 9 values'),
        (_K, 0, 480, 'image width must be an integer of at least 1'),
        (_K, 640, 480.0, 'image height must be an integer of at least 1'),
    ],
)
def test_bad_intrinsics_are_refused(k, width, height, message):
    with pytest.raises(ValueError, match=message):
        PinholeCamera.from_k(k, width, height)


def _scaled_transform() -> np.ndarray:
    transform = np.eye(4)
    transform[:3, :3] *= 1.1
    return transform


def _reflection() -> np.ndarray:
    transform = np.eye(4)
    transform[2, 2] = -1.0
    return transform


def _bad_last_row() -> np.ndarray:
    transform = np.eye(4)
    transform[3, 0] = 0.5
    return transform


def _sheared() -> np.ndarray:
    transform = np.eye(4)
    transform[0, 1] = 0.01
    return transform


@pytest.mark.parametrize(
    ('transform', 'message'),
    [
        (np.eye(3), 'must be 4x4'),
        (np.full((4, 4), np.nan), 'must be finite'),
        (_scaled_transform(), 'not orthonormal'),
        (_sheared(), 'not orthonormal'),
        (_reflection(), 'reflection'),
        (_bad_last_row(), r'must end with the row \[0, 0, 0, 1\]'),
    ],
)
def test_non_rigid_transform_is_refused(transform, message):
    with pytest.raises(ValueError, match=f'T_odom_optical {message}|T_odom_optical .*{message}'):
        PersonLocalizer().to_odom(_location(), transform)


def test_rigid_transform_from_float32_rounding_is_accepted():
    transform = _transform(_rotation_z(0.7) @ R_BASE_OPTICAL, (1.0, 2.0, 0.3))
    rounded = transform.astype(np.float32).astype(np.float64)
    assert check_rigid_transform(rounded) == pytest.approx(transform, abs=1e-6)


@pytest.mark.parametrize(
    ('field', 'value', 'message'),
    [
        ('min_keypoint_score', 0.0, 'min_keypoint_score must be positive'),
        ('min_keypoint_score', 1.5, r'must be in \(0, 1\]'),
        ('min_torso_keypoints', 0, 'at least 1'),
        ('min_valid_keypoints', 1.5, 'must be an integer'),
        ('window_half_size_px', -1, 'at least 0'),
        ('min_depth_m', -0.1, 'min_depth_m must be positive'),
        ('max_depth_m', 0.1, 'must be more than min_depth_m'),
        ('inlier_tolerance_m', math.inf, 'must be positive and finite'),
        ('depth_noise_const_m', 0.0, 'must be positive'),
        ('depth_noise_quad_per_m', -0.01, 'must be non-negative'),
        ('pixel_sigma_px', math.nan, 'must be positive and finite'),
        ('body_centre_offset_m', True, 'must be a number'),
    ],
)
def test_invalid_config_is_refused(field, value, message):
    with pytest.raises(ValueError, match=message):
        LocalizerConfig(**{field: value})


@pytest.mark.parametrize(
    ('change', 'message'),
    [
        ({'point': (0.0, 0.0, -1.0)}, 'in front of the camera'),
        ({'covariance': np.diag([1.0, 1.0, -1.0])}, 'positive definite'),
        ({'covariance': [[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]}, 'symmetric'),
        ({'keypoint_ids': (5, 17)}, 'COCO indices'),
        ({'depth_keypoint_ids': (0,)}, 'must be among keypoint_ids'),
        ({'keypoint_depths_m': (1.0,)}, 'one value per keypoint id'),
    ],
)
def test_bad_location_is_refused(change, message):
    fields = {
        'point': (0.2, -0.1, 3.0),
        'covariance': np.eye(3),
        'pixel': (320.0, 240.0),
        'keypoint_ids': TORSO_KEYPOINTS,
        'keypoint_depths_m': (3.0,) * 4,
        'depth_keypoint_ids': TORSO_KEYPOINTS,
    }
    with pytest.raises(ValueError, match=message):
        PersonLocation(**{**fields, **change})


def test_intrinsics_matrix_is_camera_info_k():
    k = [500.0, 0.0, 319.5, 0.0, 510.0, 239.5, 0.0, 0.0, 1.0]
    np.testing.assert_array_equal(PinholeCamera.from_k(k, 640, 480).matrix.reshape(-1), k)
