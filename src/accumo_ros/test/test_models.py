# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO's server models as the edge server runs them: inputs checked, the prior used."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from accumo_ros.geometry import relative_poses
from accumo_ros.models import (
    MAX_ALTERNATIVES,
    accumo_odometry,
    alternatives_output,
    rotation_prior_input,
    translation_prior_input,
)
from accumo_ros.simulation.sequence import SequenceConfig, SyntheticSequence
from accumo_ros.tasks.depth_nets import load_depth_net
from accumo_ros.tasks.visual_odometry import FramePairOdometry
from edge_offload.models import build_model


@pytest.fixture(scope='module')
def odometry_model():
    return build_model(accumo_odometry())


@pytest.fixture(scope='module')
def pair():
    sequence = SyntheticSequence(SequenceConfig(duration_s=1.0, category='low_high'))
    a, b = sequence.frame(10), sequence.frame(22)
    return sequence, a, b


def _inputs(
    sequence, a, b, prior: np.ndarray, translation: np.ndarray | None = None
) -> dict[str, torch.Tensor]:
    camera = sequence.config.intrinsics
    return {
        'image_1': torch.from_numpy(a.rendered.rgb).permute(2, 0, 1)[None].contiguous(),
        'image_2': torch.from_numpy(b.rendered.rgb).permute(2, 0, 1)[None].contiguous(),
        'intrinsics': torch.tensor([camera.fx, camera.fy, camera.cx, camera.cy]),
        'rotation_prior': torch.from_numpy(prior),
        'translation_prior': torch.from_numpy(
            translation_prior_input(None) if translation is None else translation
        ),
    }


def test_the_example_inputs_run(odometry_model):
    outputs = odometry_model(odometry_model.spec.example_inputs())
    assert set(outputs) == {
        'relative_pose',
        'covariance',
        'ok',
        'inliers',
        'alternative_poses',
        'alternative_covariances',
    }


def test_the_server_vo_takes_the_robots_rotation_prior(odometry_model, pair):
    sequence, a, b = pair
    truth = relative_poses(a.pose[None], b.pose[None])[0]
    depth = load_depth_net('server').predict(a.rendered.rgb)
    odometry = FramePairOdometry(sequence.config.intrinsics)
    for prior in (None, truth[:3, :3]):
        served = odometry_model(_inputs(sequence, a, b, rotation_prior_input(prior)))
        local = odometry.estimate(
            a.rendered.rgb,
            b.rendered.rgb,
            depth,
            # What the server got: the prior in float32.
            rotation_prior=None if prior is None else rotation_prior_input(prior).astype(float),
        )
        assert bool(served['ok']) == local.ok
        np.testing.assert_allclose(served['relative_pose'].numpy(), local.relative_pose)
        assert int(served['inliers']) == local.inliers
        alternatives = alternatives_output(
            served['alternative_poses'].numpy(), served['alternative_covariances'].numpy()
        )
        assert len(alternatives) == len(local.alternatives)
        for (pose, covariance), other in zip(alternatives, local.alternatives, strict=True):
            np.testing.assert_allclose(pose, other.relative_pose)
            np.testing.assert_allclose(covariance, other.covariance)


@pytest.mark.parametrize(
    ('prior', 'message'),
    [
        (np.full((3, 3), 0.5, dtype=np.float32), 'rotation matrix'),
        (np.diag([1.0, 1.0, -1.0]).astype(np.float32), 'rotation matrix'),
        (np.full((3, 3), np.nan, dtype=np.float32), 'non-finite'),
    ],
)
def test_a_prior_that_is_not_a_rotation_is_refused(odometry_model, pair, prior, message):
    with pytest.raises(ValueError, match=message):
        odometry_model(_inputs(*pair, prior))


def test_alternatives_of_the_wrong_shape_or_values_are_refused():
    assert alternatives_output(np.zeros((0, 4, 4)), np.zeros((0, 6, 6))) == []
    two = alternatives_output(np.stack([np.eye(4)] * 2), np.stack([np.eye(6)] * 2))
    assert len(two) == 2
    for poses, covariances in [
        (np.zeros((2, 4, 4)), np.zeros((1, 6, 6))),
        (np.zeros((1, 3, 4)), np.zeros((1, 6, 6))),
        (np.zeros((MAX_ALTERNATIVES + 1, 4, 4)), np.zeros((MAX_ALTERNATIVES + 1, 6, 6))),
    ]:
        with pytest.raises(ValueError, match='shapes'):
            alternatives_output(poses, covariances)
    with pytest.raises(ValueError, match='non-finite'):
        alternatives_output(np.full((1, 4, 4), np.inf), np.zeros((1, 6, 6)))


def test_the_server_vo_takes_the_robots_translation_prior(odometry_model, pair):
    sequence, a, b = pair
    truth = relative_poses(a.pose[None], b.pose[None])[0]
    depth = load_depth_net('server').predict(a.rendered.rgb)
    odometry = FramePairOdometry(sequence.config.intrinsics)
    rotation = rotation_prior_input(truth[:3, :3])
    # A prediction 2 m sideways: no set near it, so no pose.
    predicted = truth[:3, 3] + [0.0, 2.0, 0.0]
    gate = odometry.config.translation_gate(predicted)
    served = odometry_model(
        _inputs(sequence, a, b, rotation, translation_prior_input(predicted, gate))
    )
    sent = translation_prior_input(predicted, gate).astype(float)
    local = odometry.estimate(
        a.rendered.rgb,
        b.rendered.rgb,
        depth,
        rotation_prior=rotation.astype(float),
        translation_prior=sent[:3],
        translation_gate_m=sent[3],
    )
    assert 'predicted translation' in local.reason
    assert not bool(served['ok'])
    # Near the truth: the pose, as the robot's VO would give it.
    near = translation_prior_input(truth[:3, 3])
    served = odometry_model(_inputs(sequence, a, b, rotation, near))
    local = odometry.estimate(
        a.rendered.rgb,
        b.rendered.rgb,
        depth,
        rotation_prior=rotation.astype(float),
        translation_prior=near[:3].astype(float),
        translation_gate_m=float(near[3]),
    )
    assert local.ok
    assert bool(served['ok'])
    np.testing.assert_allclose(served['relative_pose'].numpy(), local.relative_pose)
    # Without a rotation prior the translation is not used (PnP), as with a zero gate.
    pnp = odometry_model(
        _inputs(
            sequence, a, b, rotation_prior_input(None), translation_prior_input(predicted, 1.0)
        )
    )
    plain = odometry_model(_inputs(sequence, a, b, rotation_prior_input(None)))
    np.testing.assert_allclose(pnp['relative_pose'].numpy(), plain['relative_pose'].numpy())


@pytest.mark.parametrize(
    ('translation', 'message'),
    [
        (np.array([0.0, 0.0, 0.1, -0.1], dtype=np.float32), 'gate'),
        (np.array([500.0, 0.0, 0.0, 0.1], dtype=np.float32), 'gate'),
        (np.array([np.nan, 0.0, 0.0, 0.1], dtype=np.float32), 'non-finite'),
    ],
)
def test_a_bad_translation_prior_is_refused(odometry_model, pair, translation, message):
    rotation = rotation_prior_input(np.eye(3))
    with pytest.raises(ValueError, match=message):
        odometry_model(_inputs(*pair, rotation, translation))
