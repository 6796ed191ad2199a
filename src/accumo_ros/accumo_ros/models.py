# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO's server models in the edge_offload model zoo (``edge_offload.models`` entry points).

* ``accumo_depth``: the trained server depth net. ``image`` (1, 3, H, W) uint8 RGB ->
  ``depth`` (H, W) float32 metres.
* ``accumo_odometry``: frame-pair visual odometry (:mod:`accumo_ros.tasks.visual_odometry`) with
  the server depth net giving the first frame's metric depth. ``image_1``, ``image_2``
  (1, 3, H, W) uint8 and ``intrinsics`` (4,) float32 ``fx, fy, cx, cy`` -> ``relative_pose``
  (4, 4) float64 ``T_body1_body2``, ``covariance`` (6, 6) float64, ``ok`` () bool and
  ``inliers`` () int64 (few of them tell the robot to move its keyframe on). Both frames
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
from accumo_ros.tasks.visual_odometry import FramePairOdometry
from edge_offload.camera_model import PinholeCamera
from edge_offload.models import ModelSpec, TensorSpec

_IMAGE = TensorSpec((1, 3, None, None), torch.uint8)
_INTRINSICS = TensorSpec((4,), torch.float32)


def _rgb(image: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(image[0].permute(1, 2, 0).numpy())


class ServerDepth(nn.Module):
    """The trained server depth net on one uint8 image."""

    def __init__(self) -> None:
        super().__init__()
        self.net = load_depth_net('server')

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(self.net.predict(_rgb(image)))


class ServerOdometry(nn.Module):
    """Frame-pair VO, scaled by the server depth of the first frame."""

    def __init__(self, with_depth: bool = False) -> None:
        super().__init__()
        self.net = load_depth_net('server')
        self.with_depth = with_depth

    def forward(
        self, image_1: torch.Tensor, image_2: torch.Tensor, intrinsics: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        rgb_1, rgb_2 = _rgb(image_1), _rgb(image_2)
        if rgb_1.shape != rgb_2.shape:
            raise ValueError(f'frame sizes differ: {rgb_1.shape} vs {rgb_2.shape}')
        fx, fy, cx, cy = (float(v) for v in intrinsics)
        height, width = rgb_1.shape[:2]
        odometry = FramePairOdometry(PinholeCamera(fx, fy, cx, cy, width, height))
        depths = self.net.predict(np.stack([rgb_1, rgb_2]) if self.with_depth else rgb_1)
        depth_1 = depths[0] if self.with_depth else depths
        result = odometry.estimate(rgb_1, rgb_2, depth_1)
        outputs = (
            torch.from_numpy(np.asarray(result.relative_pose, dtype=np.float64)),
            torch.from_numpy(np.asarray(result.covariance, dtype=np.float64)),
            torch.tensor(bool(result.ok)),
            torch.tensor(int(result.inliers), dtype=torch.int64),
        )
        if self.with_depth:
            return (torch.from_numpy(depths[1]), *outputs)
        return outputs


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
        inputs={'image_1': _IMAGE, 'image_2': _IMAGE, 'intrinsics': _INTRINSICS},
        outputs=('relative_pose', 'covariance', 'ok', 'inliers'),
        trained=True,
        description='AccuMO server VO: ORB + PnP on a frame pair, depth from the server net',
    )


def accumo_depth_odometry() -> ModelSpec:
    """Return the spec of depth of the second frame and VO of the pair in one request."""
    return ModelSpec(
        name='accumo_depth_odometry',
        build=lambda: ServerOdometry(with_depth=True),
        inputs={'image_1': _IMAGE, 'image_2': _IMAGE, 'intrinsics': _INTRINSICS},
        outputs=('depth', 'relative_pose', 'covariance', 'ok', 'inliers'),
        trained=True,
        description='AccuMO all-at-once: server depth of image_2 and VO of the pair',
    )
