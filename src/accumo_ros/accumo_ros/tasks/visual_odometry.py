# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The odometry task's server estimator: frame-pair visual odometry with metric scale.

AccuMO's server ran DAVO on the pair of consecutive *offloaded* frames and rescaled its
translation with a travelled-distance field, because monocular VO has no scale. Here the
scale comes from depth: the server back-projects ORB keypoints of the first frame with a
depth map of that frame and solves PnP (RANSAC, then Levenberg–Marquardt on the inliers)
against the matches in the second frame. The depth map is the one the robot's pipeline
has on the server: the server depth network's estimate of the first frame (tests may pass
ground truth to check the geometry). Classical features, no learned weights.

The covariance of the estimate is the PnP Gauss–Newton covariance ``s² (JᵀJ)⁻¹`` from
the inliers' reprojection residuals (``s`` their RMS in pixels, at least 0.1), inflated
by ``covariance_inflation`` because depth errors, which it does not see, dominate, plus a
translation floor ``translation_floor_m`` (standard deviation per axis). The floor is there
because a pair's translation error hardly shrinks with its baseline: with server depth it
is 0.02–0.06 m on 4-frame pairs (30–60 % of the motion), the inflated PnP covariance
covers a fraction of that (NEES median 15–28 on high/high against 5.3 expected), and pairs
sharing a keyframe share its depth errors, so the filter took frequent short pairs as
independent precise fixes. On the calibration set (``accumo_generate --seed 2``, unseen by
the nets) the keyframe-fused t_err over strides 4–26 falls from 10.7 % (no floor) to 8.8 %
(0.06 m, the default: the size of the measured errors), 8.0 % (0.1 m) and 7.3 % (0.15 m,
which costs low/high accuracy). Chained frame to frame, where pairs are independent, a
floor gives up accuracy (the VO unit test's 2.5 s sequence: 0.130 without, 0.174 at 0.06 m).

With a rotation prior (the rotation the robot's gyro integrated between the two frames,
:func:`accumo_ros.tasks.imu_filter.gyro_rotation`) the consensus is found on the
translation alone, with the rotation fixed to the prior: two correspondences determine a
translation, RANSAC keeps the one most correspondences agree with, and Levenberg–Marquardt
then refines the whole pose on that set. PnP's own RANSAC picks the largest rigid set,
which among moving objects can be a box's: on the seed-4 test set's high/high room
(frames 560–1020, 14-frame pairs, server depth) PnP's rotation was a median 1.4° and up
to 6° off (the gyro's 0.25°), and 21 of 33 pairs were more than 0.2 m off in translation;
with the prior, 12. A refined rotation that leaves the prior by more than
``prior_rotation_tolerance_deg`` fails the pair: the set the prior chose does not agree
with it.

The rest of those pairs go wrong because the boxes *translate*: a car driving the robot's
path just ahead shares the camera's rotation and, seen from it, barely moves, so its
points are a consensus for "the robot stands still", and where it fills the view that set
is the largest. No rotation separates it; the robot's own prediction of its motion does.
With a translation prior (the position of body 2 in body 1 that the robot's filter
predicts from the IMU and the poses so far) only translation hypotheses within a gate of
it compete (:meth:`VoConfig.translation_gate`: 0.03 m + 30 % of the predicted motion + one
standard deviation of the prediction), so the largest set *near the predicted motion*
wins, and the refit on that set is free to leave the gate. When no set near it reaches
``min_inliers`` the pair fails: the largest set elsewhere contradicts the filter, and
handing it over let one such pose through the filter's gate and capture it (seed-15 set,
high_high_0, AccuMO at 16 Mbit/s: 57 % t_err against 9.8 % without the prior; failing
instead, 7.0 %). Because the gate widens with the prediction's uncertainty, a filter that
has dead-reckoned for a while gets the largest set again (three standard deviations made
the gate so wide that the same room's chained VO went from 18 to 29 %). Measured in
docs/results.md ("VO with the robot's predicted translation").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import cv2
import numpy as np

from accumo_ros.geometry import T_BODY_OPTICAL, invert_poses, make_poses, rotation_angles
from edge_offload.camera_model import PinholeCamera

if TYPE_CHECKING:
    from accumo_ros.tasks.imu_filter import ErrorStateKalmanFilter

# The turn (rad) after which the VO keyframe moves on between offloads (KeyframePolicy).
DEFAULT_KEYFRAME_ROTATION_RAD = 0.5  # 29°: of 0.25, 0.35 and 0.5, best on test4 (docs/results.md)


@dataclass(frozen=True)
class VoConfig:
    """Feature, matching and RANSAC settings."""

    features: int = 3000
    # Three fine pyramid levels and small patches: at 416×128 the coarse ORB levels only
    # add poorly localised keypoints (halved the pose error on the synthetic sequences).
    pyramid_levels: int = 3
    patch_size: int = 15
    ratio_test: float = 0.8
    ransac_reprojection_px: float = 2.0
    ransac_iterations: int = 200
    min_inliers: int = 25
    min_depth_m: float = 0.1
    max_depth_m: float = 60.0
    covariance_inflation: float = 25.0
    translation_floor_m: float = 0.06
    # With a rotation prior: translation hypotheses tried, and how far the refined rotation
    # may leave the prior. The raw gyro's bias (0.5°/s a side at 1 sigma) over a pair of up
    # to 80 frames (1.3 s at 60 FPS) moves it up to about 2°; the robot's filter, which knows
    # its bias and the pair's length, gates the rotation more finely.
    prior_ransac_iterations: int = 300
    prior_rotation_tolerance_deg: float = 3.0
    prior_consensus_rounds: int = 1
    # With a rotation prior: further consensus sets found among the correspondences the
    # earlier sets left, returned as alternatives for the robot's filter to choose from.
    # Off: on the test3/test4 sets two of them changed no t_err by more than 0.1 point and
    # cost 10-20 ms more per pair (odometry_eval --vo-alternatives).
    prior_alternatives: int = 0
    # With a translation prior: how far a hypothesis may be from it, a floor plus a share
    # of the predicted motion plus a multiple of the prediction's own standard deviation
    # (a filter that has dead-reckoned a while constrains VO less).
    translation_gate_floor_m: float = 0.03
    translation_gate_fraction: float = 0.3
    translation_gate_sigmas: float = 1.0
    seed: int = 0

    def translation_gate(self, translation_prior: np.ndarray, sigma_m: float = 0.0) -> float:
        """Return the radius (m) around ``translation_prior`` that hypotheses must lie in.

        ``sigma_m``: the prediction's standard deviation (largest axis).
        """
        distance = float(np.linalg.norm(translation_prior))
        return (
            self.translation_gate_floor_m
            + self.translation_gate_fraction * distance
            + self.translation_gate_sigmas * sigma_m
        )

    def translation_prior_of(
        self, kalman_filter: ErrorStateKalmanFilter
    ) -> tuple[np.ndarray, float] | None:
        """Return ``(position, gate)``: a filter's predicted translation since its clone.

        None without a clone. What the robot sends with a VO pair whose first frame is the
        clone and whose second is now.
        """
        position = kalman_filter.position_in_clone()
        if position is None:
            return None
        sigma = kalman_filter.position_in_clone_sigma() or 0.0
        return position, self.translation_gate(position, sigma)


@dataclass(frozen=True)
class VoResult:
    """One frame pair's estimate; ``ok`` False when it is not trustworthy."""

    ok: bool
    # Pose of the second body frame in the first: T_body1_body2 (4, 4).
    relative_pose: np.ndarray
    # 6×6 covariance of (translation, rotation vector) of relative_pose, body-1 frame.
    covariance: np.ndarray
    matches: int
    inliers: int
    reason: str = ''  # why the pair failed
    # Other rigid motions the correspondences support (with a rotation prior only), largest
    # first: where moving objects fill the view the largest set can be an object's, and the
    # robot's filter, which predicts the motion, picks the one that agrees with it.
    alternatives: tuple[VoResult, ...] = ()

    @property
    def alternative_poses(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Return ``(relative_pose, covariance)`` of each alternative, as the filter takes them."""
        return [(other.relative_pose, other.covariance) for other in self.alternatives]


@dataclass(frozen=True)
class KeyframePolicy:
    """When the first frame of the VO pairs (the keyframe) moves on to a newer frame.

    Chaining frame-to-frame poses adds each pair's error: the more often a robot offloads,
    the more pairs per metre and the worse the odometry. Measuring several offloaded frames
    against one keyframe instead adds that error once per keyframe, so offloading more
    often adds constraints without adding drift. The keyframe moves to the newest frame
    once it is ``max_frames`` old, or when a pair has fewer than ``min_inliers`` inliers
    (the views are drifting apart: a turn). ``max_frames = 0``: every pair is
    frame-to-frame, as the dissertation's DAVO pairs.

    After a pair that failed, was refused by the filter or had fewer than ``min_inliers``
    inliers, the keyframe also moves to the current frame between offloads once the robot
    has turned ``max_rotation_rad`` since it (:meth:`turned_too_far`): in a fast turn the
    next long pair would fail too (on s15's high/high room 16 of 19 pairs of 46-61 frames
    failed in a row, and the filter dead-reckoned for 6.8 s). The part of the turn before
    the new keyframe is then the IMU's alone, but the pair after it is short and corrects
    the velocity. After a good pair the keyframe stays: long pairs mostly match (89 % of
    30-40° pairs on s11-s15), and moving it unconditionally lost their measurement of the
    first part of the turn. ``max_rotation_rad = 0``: never between offloads.
    """

    max_frames: int = 40
    min_inliers: int = 80
    max_rotation_rad: float = DEFAULT_KEYFRAME_ROTATION_RAD

    def __post_init__(self) -> None:
        if self.max_frames < 0 or self.min_inliers < 0 or self.max_rotation_rad < 0:
            raise ValueError('max_frames, min_inliers and max_rotation_rad must be >= 0')

    def keep(self, keyframe: int, frame: int, inliers: int) -> bool:
        """Whether a good pair ``(keyframe, frame)`` leaves ``keyframe`` the keyframe."""
        return frame - keyframe < self.max_frames and inliers >= self.min_inliers

    def weak_pair(self, fused: bool, inliers: int) -> bool:
        """Whether a pair's outcome lets the keyframe move on a turn (failed, refused, few)."""
        return not fused or inliers < self.min_inliers

    def turned_too_far(self, rotation_rad: float | None, after_weak_pair: bool) -> bool:
        """Whether the keyframe moves to the current frame, turned ``rotation_rad`` from it."""
        return (
            after_weak_pair
            and self.max_rotation_rad > 0
            and rotation_rad is not None
            and rotation_rad > self.max_rotation_rad
        )


def _failure(reason: str, matches: int = 0, inliers: int = 0) -> VoResult:
    return VoResult(False, np.eye(4), np.eye(6) * 1e6, matches, inliers, reason)


def _grey(image: np.ndarray) -> np.ndarray:
    if image.ndim == 2:
        return image
    return cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)


class FramePairOdometry:
    """Estimate the relative pose of two frames given the depth of the first."""

    def __init__(self, intrinsics: PinholeCamera, config: VoConfig | None = None) -> None:
        self.intrinsics = intrinsics
        self.config = config or VoConfig()
        self._orb = cv2.ORB_create(
            nfeatures=self.config.features,
            scaleFactor=1.2,
            nlevels=self.config.pyramid_levels,
            edgeThreshold=self.config.patch_size,
            patchSize=self.config.patch_size,
            fastThreshold=5,
        )
        self._matcher = cv2.BFMatcher(cv2.NORM_HAMMING)

    def estimate(
        self,
        rgb_1: np.ndarray,
        rgb_2: np.ndarray,
        depth_1: np.ndarray,
        rotation_prior: np.ndarray | None = None,
        translation_prior: np.ndarray | None = None,
        translation_gate_m: float | None = None,
    ) -> VoResult:
        """Return the pose of frame 2 relative to frame 1 (body frames, metric).

        ``rotation_prior``: R_body1_body2 from the gyro, or None (PnP's own RANSAC).
        ``translation_prior``: the predicted position of body 2 in body 1 (needs a rotation
        prior); the consensus is taken among translations within ``translation_gate_m``
        of it (default :meth:`VoConfig.translation_gate`), and the pair fails without one.
        """
        if rgb_1.shape != rgb_2.shape or rgb_1.shape[:2] != depth_1.shape:
            raise ValueError(
                f'frames {rgb_1.shape} and {rgb_2.shape} and depth {depth_1.shape} differ'
            )
        if translation_prior is not None:
            if rotation_prior is None:
                raise ValueError('a translation prior needs a rotation prior')
            translation_prior = np.asarray(translation_prior, dtype=np.float64).reshape(3)
            if translation_gate_m is None:
                translation_gate_m = self.config.translation_gate(translation_prior)
            if not (np.all(np.isfinite(translation_prior)) and translation_gate_m >= 0.0):
                raise ValueError(
                    f'translation prior {translation_prior} with gate {translation_gate_m}'
                )
        found = self._correspondences(rgb_1, rgb_2, depth_1)
        if isinstance(found, VoResult):
            return found
        points, observed, matches = found
        if rotation_prior is None:
            solved = self._solve_pnp(points, observed, matches)
            if isinstance(solved, VoResult):
                return solved
            return self._result(points, observed, matches, *solved)
        gate = None if translation_prior is None else (translation_prior, translation_gate_m)
        sets = self._solve_with_prior(points, observed, matches, rotation_prior, gate)
        if isinstance(sets, VoResult):
            return sets
        results = [self._result(points, observed, matches, *solved) for solved in sets]
        return dataclasses.replace(results[0], alternatives=tuple(results[1:]))

    def _result(
        self,
        points: np.ndarray,
        observed: np.ndarray,
        matches: int,
        rvec: np.ndarray,
        tvec: np.ndarray,
        inliers: np.ndarray,
    ) -> VoResult:
        """Return the pose of the solved PnP ``(rvec, tvec)`` with its covariance."""
        camera = self.intrinsics.matrix
        projected, jacobian = cv2.projectPoints(points[inliers], rvec, tvec, camera, None)
        residuals = projected[:, 0, :] - observed[inliers]
        rms = float(np.sqrt(np.mean(residuals**2)))
        # X_2 = R X_1 + t maps optical-1 points to optical 2: that is T_optical2_optical1.
        rotation, _ = cv2.Rodrigues(rvec)
        optical_2_1 = make_poses(rotation, tvec[:, 0])
        body_1_2 = T_BODY_OPTICAL @ invert_poses(optical_2_1) @ invert_poses(T_BODY_OPTICAL)
        covariance = self._covariance(jacobian[:, :6], max(rms, 0.1), rotation)
        return VoResult(True, body_1_2, covariance, matches, len(inliers))

    def _correspondences(
        self, rgb_1: np.ndarray, rgb_2: np.ndarray, depth_1: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, int] | VoResult:
        """Return matched 3-D points of frame 1 (optical) and their pixels in frame 2."""
        c = self.config
        keypoints_1, descriptors_1 = self._orb.detectAndCompute(_grey(rgb_1), None)
        keypoints_2, descriptors_2 = self._orb.detectAndCompute(_grey(rgb_2), None)
        if descriptors_1 is None or descriptors_2 is None or len(keypoints_2) < 2:
            return _failure('too few features')
        pairs = self._matcher.knnMatch(descriptors_1, descriptors_2, k=2)
        good = [
            p[0] for p in pairs if len(p) == 2 and p[0].distance < c.ratio_test * p[1].distance
        ]
        if len(good) < c.min_inliers:
            return _failure(f'{len(good)} matches', len(good))
        pixels_1 = np.array([keypoints_1[m.queryIdx].pt for m in good])
        pixels_2 = np.array([keypoints_2[m.trainIdx].pt for m in good])
        rows = np.clip(np.round(pixels_1[:, 1]).astype(int), 0, depth_1.shape[0] - 1)
        columns = np.clip(np.round(pixels_1[:, 0]).astype(int), 0, depth_1.shape[1] - 1)
        depth = depth_1[rows, columns].astype(np.float64)
        valid = np.isfinite(depth) & (depth > c.min_depth_m) & (depth < c.max_depth_m)
        if valid.sum() < c.min_inliers:
            return _failure('too few matches with valid depth', len(good))
        points = self.intrinsics.back_project_pixels(pixels_1, depth)[valid]
        return points, pixels_2[valid], len(good)

    def _solve_pnp(
        self, points: np.ndarray, observed: np.ndarray, matches: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | VoResult:
        """PnP RANSAC (EPnP), then Levenberg–Marquardt on its inliers."""
        c = self.config
        camera = self.intrinsics.matrix
        found, rvec, tvec, inliers = cv2.solvePnPRansac(
            points,
            observed,
            camera,
            None,
            iterationsCount=c.ransac_iterations,
            reprojectionError=c.ransac_reprojection_px,
            confidence=0.999,
            flags=cv2.SOLVEPNP_EPNP,
        )
        if not found or inliers is None or len(inliers) < c.min_inliers:
            return _failure(
                'PnP found no consistent pose', matches, 0 if inliers is None else len(inliers)
            )
        inliers = inliers[:, 0]
        rvec, tvec = cv2.solvePnPRefineLM(
            points[inliers], observed[inliers], camera, None, rvec, tvec
        )
        return rvec, tvec, inliers

    def _solve_with_prior(
        self,
        points: np.ndarray,
        observed: np.ndarray,
        matches: int,
        rotation_prior: np.ndarray,
        translation_gate: tuple[np.ndarray, float] | None = None,
    ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]] | VoResult:
        """Consensus sets on the translation with the rotation fixed to the prior.

        The largest set first (with a translation prior, the largest near it), then up to
        ``prior_alternatives`` more, each among the correspondences no earlier set took; a
        failure when the first fails.
        """
        c = self.config
        # X_2 = R X_1 + t in optical frames: R = R_optical2_optical1.
        body_to_optical = T_BODY_OPTICAL[:3, :3]
        rotation = body_to_optical.T @ np.asarray(rotation_prior).T @ body_to_optical
        rng = np.random.default_rng(c.seed)
        if translation_gate is None:
            first = self._consensus_set(points, observed, matches, rotation, rng)
        else:
            position, radius = translation_gate
            # X_2 = R (X_1 - c): t = -R c, c the second camera's centre in optical frame 1.
            prior = -rotation @ (body_to_optical.T @ position)
            first = self._consensus_set(points, observed, matches, rotation, rng, prior, radius)
            if isinstance(first, VoResult) and first.inliers < c.min_inliers:
                # The largest set elsewhere would contradict the filter that predicted the
                # motion; handing it over let one such pose through the filter's gate and
                # capture it (s15 high_high_0, 16 Mbit/s: 57 % t_err). No pose instead.
                return _failure(
                    f'no consensus within {radius:.2f} m of the predicted translation',
                    matches,
                    first.inliers,
                )
        if isinstance(first, VoResult):
            return first
        sets = [first]
        remaining = np.setdiff1d(np.arange(len(points)), first[2])
        for _ in range(c.prior_alternatives):
            if remaining.size < c.min_inliers:
                break
            found = self._consensus_set(
                points[remaining], observed[remaining], matches, rotation, rng
            )
            if isinstance(found, VoResult):
                # No rigid motion left among the rest, or one that turns differently
                # from the gyro: stop (a set that breaks the prior is not a candidate).
                break
            rvec, tvec, inliers = found
            sets.append((rvec, tvec, remaining[inliers]))
            remaining = np.setdiff1d(remaining, remaining[inliers])
        return sets

    def _consensus_set(
        self,
        points: np.ndarray,
        observed: np.ndarray,
        matches: int,
        rotation: np.ndarray,
        rng: np.random.Generator,
        prior: np.ndarray | None = None,
        gate_m: float = np.inf,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | VoResult:
        """Consensus on the translation with ``rotation`` (optical) fixed, then LM."""
        c = self.config
        translation, inliers = translation_ransac(
            points,
            observed,
            self.intrinsics,
            rotation,
            iterations=c.prior_ransac_iterations,
            threshold_px=c.ransac_reprojection_px,
            rng=rng,
            prior=prior,
            gate_m=gate_m,
        )
        if inliers.size < c.min_inliers:
            return _failure('no consensus with the IMU rotation', matches, inliers.size)
        camera = self.intrinsics.matrix
        rvec, _ = cv2.Rodrigues(rotation)
        rvec, tvec = cv2.solvePnPRefineLM(
            points[inliers], observed[inliers], camera, None, rvec, translation[:, None].copy()
        )
        # The prior carries the gyro's bias, which may have pushed static points past the
        # threshold: take the consensus again with the refined pose and refine on it.
        for _ in range(c.prior_consensus_rounds):
            refined, _ = cv2.Rodrigues(rvec)
            again = _reprojection_inliers(
                points @ refined.T, observed, self.intrinsics, tvec[:, 0], c.ransac_reprojection_px
            )
            if again.size < c.min_inliers or np.array_equal(again, inliers):
                break
            inliers = again
            rvec, tvec = cv2.solvePnPRefineLM(
                points[inliers], observed[inliers], camera, None, rvec, tvec
            )
        refined, _ = cv2.Rodrigues(rvec)
        departure = np.degrees(rotation_angles((refined @ rotation.T)[None])[0])
        if departure > c.prior_rotation_tolerance_deg:
            return _failure(
                f'refined rotation {departure:.2f} deg from the IMU rotation',
                matches,
                inliers.size,
            )
        return rvec, tvec, inliers

    def _covariance(self, jacobian: np.ndarray, rms_px: float, rotation: np.ndarray) -> np.ndarray:
        """Covariance of (translation, rotation) of T_body1_body2 from the PnP Jacobian.

        First order, cross terms and the lever arm of the inversion dropped: each 3×3 block
        of the PnP covariance is rotated into body frame 1. The inflation covers the rest.
        """
        try:
            pnp = np.linalg.inv(jacobian.T @ jacobian) * rms_px**2  # rvec (3), tvec (3)
        except np.linalg.LinAlgError:
            return np.eye(6) * 1e6
        rotate = T_BODY_OPTICAL[:3, :3] @ rotation.T
        covariance = np.zeros((6, 6))
        covariance[:3, :3] = rotate @ pnp[3:, 3:] @ rotate.T
        covariance[3:, 3:] = rotate @ pnp[:3, :3] @ rotate.T
        covariance *= self.config.covariance_inflation
        covariance[:3, :3] += self.config.translation_floor_m**2 * np.eye(3)
        return covariance


def translation_ransac(
    points: np.ndarray,
    observed: np.ndarray,
    camera: PinholeCamera,
    rotation: np.ndarray,
    *,
    iterations: int,
    threshold_px: float,
    rng: np.random.Generator,
    prior: np.ndarray | None = None,
    gate_m: float = np.inf,
) -> tuple[np.ndarray, np.ndarray]:
    """Return the translation most correspondences agree with, and their indices.

    ``points`` (N, 3) in the first camera frame, ``observed`` (N, 2) their pixels in the
    second, ``rotation`` fixed: ``X_2 = rotation X_1 + t``. Each correspondence gives two
    equations linear in ``t`` (``(u - cx)/fx (Y_z + t_z) = Y_x + t_x`` and the same in
    ``v``, with ``Y = rotation X_1``), so two of them determine ``t``. The winner is refit
    by least squares on its inliers (reprojection error under ``threshold_px``). With a
    ``prior`` only hypotheses within ``gate_m`` of it compete: the gate picks the set, and
    the refit on that set is free to leave it.
    """
    count = len(points)
    if count < 2:
        return np.zeros(3), np.empty(0, dtype=int)
    rotated = points @ np.asarray(rotation).T
    a = (observed[:, 0] - camera.cx) / camera.fx
    b = (observed[:, 1] - camera.cy) / camera.fy
    # Rows [1, 0, -a] t = a Y_z - Y_x and [0, 1, -b] t = b Y_z - Y_y, per correspondence.
    design = np.zeros((count, 2, 3))
    design[:, 0, 0] = 1.0
    design[:, 0, 2] = -a
    design[:, 1, 1] = 1.0
    design[:, 1, 2] = -b
    target = np.stack([a * rotated[:, 2] - rotated[:, 0], b * rotated[:, 2] - rotated[:, 1]], 1)
    samples = np.stack([rng.choice(count, 2, replace=False) for _ in range(iterations)])
    # Normal equations of each 4×3 sample system, solved in one batch.
    sample_design = design[samples].reshape(iterations, 4, 3)
    sample_target = target[samples].reshape(iterations, 4)
    normal = np.einsum('nki,nkj->nij', sample_design, sample_design)
    right = np.einsum('nki,nk->ni', sample_design, sample_target)
    solvable = np.abs(np.linalg.det(normal)) > 1e-12
    hypotheses = np.zeros((iterations, 3))
    hypotheses[solvable] = np.linalg.solve(normal[solvable], right[solvable][..., None])[..., 0]
    if prior is not None:
        solvable &= np.linalg.norm(hypotheses - prior, axis=1) <= gate_m
    best_inliers = np.empty(0, dtype=int)
    best = np.zeros(3)
    for translation in hypotheses[solvable]:
        inliers = _reprojection_inliers(rotated, observed, camera, translation, threshold_px)
        if inliers.size > best_inliers.size:
            best, best_inliers = translation, inliers
    if best_inliers.size >= 2:
        rows = design[best_inliers].reshape(-1, 3)
        best = np.linalg.lstsq(rows, target[best_inliers].reshape(-1), rcond=None)[0]
        best_inliers = _reprojection_inliers(rotated, observed, camera, best, threshold_px)
    return best, best_inliers


def _reprojection_inliers(
    rotated: np.ndarray,
    observed: np.ndarray,
    camera: PinholeCamera,
    translation: np.ndarray,
    threshold_px: float,
) -> np.ndarray:
    moved = rotated + translation
    depth = moved[:, 2]
    in_front = depth > 1e-6
    safe = np.where(in_front, depth, 1.0)
    u = camera.fx * moved[:, 0] / safe + camera.cx
    v = camera.fy * moved[:, 1] / safe + camera.cy
    error_sq = (u - observed[:, 0]) ** 2 + (v - observed[:, 1]) ** 2
    return np.flatnonzero(in_front & (error_sq < threshold_px**2))
