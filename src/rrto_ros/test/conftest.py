# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Shared inputs of the per-operator and replay tests: real photos for the real models."""

from __future__ import annotations

from collections.abc import Callable

import cv2
import numpy as np
import pytest
import torch

from edge_offload.assets import asset_path
from edge_offload.models import load_model


def _image(asset: str, size: tuple[int, int] | None = None) -> torch.Tensor:
    bgr = cv2.imread(str(asset_path(asset)))
    if size is not None:
        bgr = cv2.resize(bgr, size)
    rgb = np.ascontiguousarray(bgr[:, :, ::-1])
    return torch.from_numpy(rgb).permute(2, 0, 1)[None].contiguous()


def _inputs(name: str) -> dict[str, torch.Tensor]:
    if name == 'blazepose_people':
        return {'image': _image('media/opencv/messi5.jpg')}
    if name == 'kapao_s':
        return {'image': _image('media/darknet/person.jpg', (320, 212))}
    return load_model(name).spec.example_inputs()


@pytest.fixture
def model_inputs() -> Callable[[str], dict[str, torch.Tensor]]:
    """Return a function giving each zoo model a fitting input (photos for the real ones)."""
    return _inputs
