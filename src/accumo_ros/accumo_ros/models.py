# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO's server models in the edge_offload model zoo (``edge_offload.models`` entry points).

* ``accumo_depth``: the trained server depth net. ``image`` (1, 3, H, W) uint8 RGB ->
  ``depth`` (H, W) float32 metres.
* ``accumo_odometry``: frame-pair visual odometry (:mod:`accumo_ros.tasks.visual_odometry`) with
  the server depth net giving the first frame's metric depth. ``image_1``, ``image_2``
  (1, 3, H, W) uint8, ``intrinsics`` (4,) float32 ``fx, fy, cx, cy`` and ``rotation_prior``
  (3, 3) float32, the robot's gyro rotation ``R_body1_body2`` over the pair (all zeros: none,
  PnP finds the rotation; see :mod:`accumo_ros.tasks.visual_odometry`) and
  ``translation_prior`` (4,) float32 ``x, y, z, gate``: the position of body 2 in body 1
  that the robot's filter predicts and the radius (m) around it in which the consensus is
  sought first (gate 0: none; used with a rotation prior only) -> ``relative_pose``
  (4, 4) float64 ``T_body1_body2``, ``covariance`` (6, 6) float64, ``ok`` () bool,
  ``inliers`` () int64 (few of them tell the robot to move its keyframe on), and with a
  prior ``alternative_poses`` (K, 4, 4) / ``alternative_covariances`` (K, 6, 6) float64:
  the other rigid motions the pair supports (``VoResult.alternatives``; K = 0 with the
  default ``VoConfig``), from which the robot's filter fuses the one its prediction agrees
  with. Both frames
  travel with the request, so the server keeps no per-client state and survives
  restarts and several robots (the release keeps the previous frame on the server instead).
* ``accumo_depth_odometry``: both at once (the AAO baseline), one upload.

The depth net's weights are the ones trained by ``accumo_train_depth`` and packaged with
``accumo_ros`` (``trained=True``): these outputs are depth estimates and poses.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from accumo_ros.tasks.depth_nets import load_depth_net
from accumo_ros.tasks.visual_odometry import FramePairOdometry, VoConfig
from edge_offload.camera_model import PinholeCamera
from edge_offload.models import ModelSpec, TensorSpec

_IMAGE = TensorSpec((1, 3, None, None), torch.uint8)
_INTRINSICS = TensorSpec((4,), torch.float32)
_ROTATION_PRIOR = TensorSpec((3, 3), torch.float32, example_factory=lambda: torch.eye(3))
_TRANSLATION_PRIOR = TensorSpec((4,), torch.float32)
# No pair of frames a robot offloads moves it further than this (m).
_MAX_TRANSLATION_PRIOR_M = 100.0
# float32 on the wire: a rotation's columns are unit and orthogonal to about 1e-7.
_ROTATION_TOLERANCE = 1e-4


def rotation_prior_input(rotation: np.ndarray | None) -> np.ndarray:
    """Return the ``rotation_prior`` input for ``rotation`` (None: no prior, all zeros)."""
    if rotation is None:
        return np.zeros((3, 3), dtype=np.float32)
    return np.asarray(rotation, dtype=np.float32).reshape(3, 3)


def _rotation_prior(tensor: torch.Tensor) -> np.ndarray | None:
    """Return the prior a ``rotation_prior`` input holds: None for all zeros.

    ValueError unless it is a rotation matrix.
    """
    rotation = tensor.numpy().astype(np.float64)
    if not np.any(rotation):
        return None
    if not np.all(np.isfinite(rotation)):
        raise ValueError('rotation_prior has non-finite entries')
    orthogonality = float(np.abs(rotation.T @ rotation - np.eye(3)).max())
    if orthogonality > _ROTATION_TOLERANCE or np.linalg.det(rotation) < 0.0:
        raise ValueError(
            'rotation_prior must be a rotation matrix (or all zeros for none); '
            f'|RᵀR - I| = {orthogonality:.2g}, det {np.linalg.det(rotation):.3f}'
        )
    return rotation


def translation_prior_input(
    position: np.ndarray | None, gate_m: float | None = None
) -> np.ndarray:
    """Return the ``translation_prior`` input: ``x, y, z, gate`` (None: no prior, zeros).

    ``gate_m`` defaults to :meth:`VoConfig.translation_gate` of ``position``.
    """
    if position is None:
        return np.zeros(4, dtype=np.float32)
    position = np.asarray(position, dtype=np.float64).reshape(3)
    if gate_m is None:
        gate_m = VoConfig().translation_gate(position)
    return np.append(position, gate_m).astype(np.float32)


def _translation_prior(tensor: torch.Tensor) -> tuple[np.ndarray, float] | None:
    """Return ``(position, gate)`` of a ``translation_prior`` input: None for a gate of 0.

    ValueError for non-finite entries, a negative gate or an implausible distance.
    """
    values = tensor.numpy().astype(np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError('translation_prior has non-finite entries')
    position, gate = values[:3], float(values[3])
    if gate == 0.0:
        return None
    if gate < 0.0 or max(gate, float(np.linalg.norm(position))) > _MAX_TRANSLATION_PRIOR_M:
        raise ValueError(
            f'translation_prior must be x, y, z, gate with 0 <= gate and |xyz|, gate <= '
            f'{_MAX_TRANSLATION_PRIOR_M:g} m; got {values.tolist()}'
        )
    return position, gate


def _rgb(image: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(image[0].permute(1, 2, 0).numpy())


class ServerDepth(nn.Module):
    """The trained server depth net on one uint8 image."""

    def __init__(self) -> None:
        super().__init__()
        self.net = load_depth_net('server')

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(self.net.predict(_rgb(image)))

    def forward_batch(self, images: torch.Tensor) -> torch.Tensor:
        """Depth of N images (N, 3, H, W) uint8 in one pass: (N, H, W) metres."""
        return torch.from_numpy(self.net.predict(np.ascontiguousarray(images.permute(0, 2, 3, 1))))


class ServerOdometry(nn.Module):
    """Frame-pair VO, scaled by the server depth of the first frame."""

    def __init__(self, with_depth: bool = False) -> None:
        super().__init__()
        self.net = load_depth_net('server')
        self.with_depth = with_depth

    def forward(
        self,
        image_1: torch.Tensor,
        image_2: torch.Tensor,
        intrinsics: torch.Tensor,
        rotation_prior: torch.Tensor,
        translation_prior: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        rgb_1, rgb_2 = _rgb(image_1), _rgb(image_2)
        if rgb_1.shape != rgb_2.shape:
            raise ValueError(f'frame sizes differ: {rgb_1.shape} vs {rgb_2.shape}')
        prior = _rotation_prior(rotation_prior)
        # A predicted translation steers the consensus only together with a rotation.
        translation = _translation_prior(translation_prior) if prior is not None else None
        position, gate = translation if translation is not None else (None, None)
        fx, fy, cx, cy = (float(v) for v in intrinsics)
        height, width = rgb_1.shape[:2]
        odometry = FramePairOdometry(PinholeCamera(fx, fy, cx, cy, width, height))
        depths = self.net.predict(np.stack([rgb_1, rgb_2]) if self.with_depth else rgb_1)
        depth_1 = depths[0] if self.with_depth else depths
        result = odometry.estimate(
            rgb_1,
            rgb_2,
            depth_1,
            rotation_prior=prior,
            translation_prior=position,
            translation_gate_m=gate,
        )
        alternatives = result.alternative_poses
        outputs = (
            torch.from_numpy(np.asarray(result.relative_pose, dtype=np.float64)),
            torch.from_numpy(np.asarray(result.covariance, dtype=np.float64)),
            torch.tensor(bool(result.ok)),
            torch.tensor(int(result.inliers), dtype=torch.int64),
            torch.from_numpy(
                np.array([pose for pose, _ in alternatives], dtype=np.float64).reshape(-1, 4, 4)
            ),
            torch.from_numpy(
                np.array([cov for _, cov in alternatives], dtype=np.float64).reshape(-1, 6, 6)
            ),
        )
        if self.with_depth:
            return (torch.from_numpy(depths[1]), *outputs)
        return outputs


_ODOMETRY_INPUTS = {
    'image_1': _IMAGE,
    'image_2': _IMAGE,
    'intrinsics': _INTRINSICS,
    'rotation_prior': _ROTATION_PRIOR,
    'translation_prior': _TRANSLATION_PRIOR,
}


_ODOMETRY_OUTPUTS = (
    'relative_pose',
    'covariance',
    'ok',
    'inliers',
    'alternative_poses',
    'alternative_covariances',
)
# The most alternatives a robot takes from one result (VoConfig.prior_alternatives).
MAX_ALTERNATIVES = 8


def alternatives_output(poses: np.ndarray, covariances: np.ndarray) -> list[tuple]:
    """Return ``[(relative_pose, covariance)]`` of a result's alternatives; ValueError if bad."""
    poses = np.asarray(poses, dtype=np.float64)
    covariances = np.asarray(covariances, dtype=np.float64)
    if (
        poses.ndim != 3
        or poses.shape[1:] != (4, 4)
        or covariances.shape != (len(poses), 6, 6)
        or len(poses) > MAX_ALTERNATIVES
    ):
        raise ValueError(
            f'alternatives of shapes {poses.shape} and {covariances.shape}, expected '
            f'(K, 4, 4) and (K, 6, 6) with K <= {MAX_ALTERNATIVES}'
        )
    if not (np.all(np.isfinite(poses)) and np.all(np.isfinite(covariances))):
        raise ValueError('alternatives have non-finite entries')
    return list(zip(poses, covariances, strict=True))


def accumo_depth() -> ModelSpec:
    """Return the spec of the trained server depth net."""
    return ModelSpec(
        name='accumo_depth',
        build=ServerDepth,
        inputs={'image': _IMAGE},
        outputs=('depth',),
        trained=True,
        description='AccuMO server depth net (trained on the generated sequences)',
    )


def accumo_odometry() -> ModelSpec:
    """Return the spec of the server frame-pair visual odometry."""
    return ModelSpec(
        name='accumo_odometry',
        build=ServerOdometry,
        inputs=_ODOMETRY_INPUTS,
        outputs=_ODOMETRY_OUTPUTS,
        trained=True,
        description='AccuMO server VO: ORB + PnP (or the robot gyro rotation as prior) on a '
        'frame pair, depth from the server net',
    )


def accumo_depth_odometry() -> ModelSpec:
    """Return the spec of depth of the second frame and VO of the pair in one request."""
    return ModelSpec(
        name='accumo_depth_odometry',
        build=lambda: ServerOdometry(with_depth=True),
        inputs=_ODOMETRY_INPUTS,
        outputs=('depth', *_ODOMETRY_OUTPUTS),
        trained=True,
        description='AccuMO all-at-once: server depth of image_2 and VO of the pair',
    )
