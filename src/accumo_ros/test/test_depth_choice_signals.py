# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""benchmarks/accumo_depth_choice.py --signals: the per-frame signals and the fitted choice."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from edge_offload.camera_model import PinholeCamera

SCRIPT = Path(__file__).resolve().parents[3] / 'benchmarks' / 'accumo_depth_choice.py'


@pytest.fixture(scope='module')
def choice():  # noqa: ANN201
    spec = importlib.util.spec_from_file_location('accumo_depth_choice', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _scene() -> tuple[PinholeCamera, np.ndarray, np.ndarray]:
    camera = PinholeCamera.from_fov(64, 48, 60.0)
    rng = np.random.default_rng(3)
    rgb = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    depth = np.full((48, 64), 4.0)
    return camera, rgb, depth


def test_a_consistent_warp_keeps_the_server_map_and_measures_the_lite_net_against_it(
    choice,  # noqa: ANN001
) -> None:
    camera, rgb, depth = _scene()
    photometric, holes, d_now, fused = choice.frame_signals(
        depth, rgb, rgb, depth * 1.1, depth, camera, np.eye(4)
    )
    assert photometric == pytest.approx(0.0)
    assert holes == 0.0
    # The lite net is 10 % off the warped map everywhere: the lite-drop line at AbsRel 0.1.
    assert d_now == pytest.approx(choice.LITE_DROP_SLOPE * 0.1 - choice.LITE_DROP_OFFSET)
    assert fused == pytest.approx(0.0)  # every pixel consistent: the (exact) warped map


def test_fusion_takes_the_lite_net_where_the_image_disagrees_with_the_warp(
    choice,  # noqa: ANN001
) -> None:
    camera, rgb, depth = _scene()
    moved = rgb.copy()
    moved[:, 32:] = 255 - moved[:, 32:]  # the right half changed: something moved there
    truth = depth.copy()
    truth[:, 32:] = 2.0  # ... and it is nearer than the server map of the base frame says
    lite = truth * 1.05
    _, _, d_now, fused = choice.frame_signals(depth, rgb, moved, lite, truth, camera, np.eye(4))
    warped_only = np.mean(np.abs(depth - truth) / truth)
    assert fused < 0.5 * warped_only
    # Measured on the consistent (left) half only, where the lite net is 5 % off.
    expected = choice.LITE_DROP_SLOPE * 0.05 - choice.LITE_DROP_OFFSET
    assert d_now == pytest.approx(expected, abs=0.01)


def test_nothing_in_view_gives_no_signals(choice) -> None:  # noqa: ANN001
    camera, rgb, depth = _scene()
    behind = np.eye(4)
    behind[2, 3] = -10.0  # every point ends up behind the camera
    assert choice.frame_signals(depth, rgb, rgb, depth, depth, camera, behind) is None


def test_the_fitted_choice_learns_a_rule_the_models_miss(choice) -> None:  # noqa: ANN001
    rng = np.random.default_rng(0)
    n = 2000
    photometric = rng.uniform(0.0, 40.0, n)
    server = np.full(n, 0.05)
    # The warp is bad where the image disagrees; the lite net is 0.03 off throughout.
    true_rs = np.where(photometric > 20.0, 0.06, 0.0) + rng.uniform(0.0, 0.01, n)
    frames = {
        'stride': rng.integers(5, 10, n).astype(float),
        'model_rs': rng.uniform(0.0, 0.05, n),  # no information
        'model_d': np.full(n, 0.03),
        'true_rs': true_rs,
        'server_b': server,
        'lite': server + 0.03,
        'warped': server + true_rs,
        'photometric': photometric,
        'holes': np.zeros(n),
        'd_now': np.full(n, np.inf),
    }
    fitted = choice.fit_choice(frames)
    picked_lite = choice._choose_fitted(frames, fitted)
    assert np.mean(picked_lite == (photometric > 20.0)) > 0.95
