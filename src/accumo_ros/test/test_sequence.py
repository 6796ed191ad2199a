# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The synthetic AccuMO sequences: geometry, IMU, categories, bags and the generator CLI."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import yaml
from rosbags.rosbag2 import StoragePlugin

from accumo_ros.geometry import T_BODY_OPTICAL, invert_poses
from accumo_ros.simulation.dataset import load_index, main, split_paths
from accumo_ros.simulation.imu import ImuNoise, integrate_imu, simulate_imu
from accumo_ros.simulation.sequence import SequenceConfig, SyntheticSequence
from accumo_ros.simulation.sequence_bag import (
    SequenceBagError,
    config_from_metadata,
    config_to_metadata,
    read_sequence_bag,
    turn_on_biases,
    write_sequence_bag,
)

SMALL = SequenceConfig(duration_s=0.5, width=160, height=64)


def _reproject(sequence: SyntheticSequence, first: int, second: int, pose_error=None):
    """Warp frame ``first`` into ``second`` with depth and pose; return matched samples."""
    frame_a, frame_b = sequence.frame(first), sequence.frame(second)
    intrinsics = sequence.config.intrinsics
    optical_a = frame_a.pose @ T_BODY_OPTICAL
    optical_b = frame_b.pose @ T_BODY_OPTICAL
    if pose_error is not None:
        optical_b = optical_b @ pose_error
    a_to_b = invert_poses(optical_b) @ optical_a
    points = intrinsics.back_project(frame_a.rendered.depth.astype(np.float64))
    points_b = points @ a_to_b[:3, :3].T + a_to_b[:3, 3]
    pixels, z = intrinsics.project(points_b)
    columns = np.round(pixels[..., 0])
    rows = np.round(pixels[..., 1])
    inside = (columns >= 0) & (columns < intrinsics.width) & (rows >= 0)
    inside &= rows < intrinsics.height
    static = ~frame_a.rendered.dynamic_mask(sequence.scene)
    rows_a, columns_a = np.nonzero(inside & static)
    rows_b = rows[rows_a, columns_a].astype(int)
    columns_b = columns[rows_a, columns_a].astype(int)
    depth_b = frame_b.rendered.depth[rows_b, columns_b]
    predicted = z[rows_a, columns_a]
    # Keep points that are still visible in frame b (not occluded, same object).
    same = (
        frame_b.rendered.object_id[rows_b, columns_b]
        == frame_a.rendered.object_id[rows_a, columns_a]
    )
    visible = same & (np.abs(depth_b - predicted) < 0.02 * predicted)
    colour_a = frame_a.rendered.rgb[rows_a, columns_a].astype(float)
    colour_b = frame_b.rendered.rgb[rows_b, columns_b].astype(float)
    return visible, predicted, depth_b, np.abs(colour_a - colour_b).mean(axis=1)


def test_static_pixels_reproject_photometrically_with_depth_and_pose():
    sequence = SyntheticSequence(replace(SequenceConfig(duration_s=1.0), category='high_high'))
    visible, predicted, depth_b, colour_error = _reproject(sequence, 10, 16)
    assert visible.mean() > 0.6  # most static pixels stay in view over 0.1 s
    relative = np.abs(depth_b - predicted)[visible] / predicted[visible]
    # Nearest-pixel rounding moves the sample by up to half a pixel along the depth gradient.
    assert np.median(relative) < 0.002
    good = np.median(colour_error[visible])
    assert good < 6.0  # grey levels; mip levels and rounding account for the rest

    # The same test with the pose off by 1 degree of yaw must fail clearly.
    yaw = np.radians(1.0)
    error = np.eye(4)
    error[:3, :3] = [[np.cos(yaw), 0, np.sin(yaw)], [0, 1, 0], [-np.sin(yaw), 0, np.cos(yaw)]]
    _, _, _, wrong_colour = _reproject(sequence, 10, 16, pose_error=error)
    assert np.median(wrong_colour) > 3 * good


def test_noise_free_imu_integrates_to_the_ground_truth_pose():
    config = replace(SequenceConfig(duration_s=20.0, category='low_high'), imu_noise=ImuNoise())
    sequence = SyntheticSequence(replace(config, imu_noise=ImuNoise.noise_free()))
    imu = sequence.imu
    truth = sequence.trajectory.state(imu.times)
    poses, _ = integrate_imu(
        imu.times,
        imu.angular_velocity,
        imu.linear_acceleration,
        truth.poses[0],
        truth.velocity_world[0],
    )
    position_error = np.linalg.norm(poses[:, :3, 3] - truth.poses[:, :3, 3], axis=1)
    assert position_error.max() < 0.005  # metres after 20 s at 240 Hz
    relative = np.einsum('nji,njk->nik', poses[:, :3, :3], truth.poses[:, :3, :3])
    angles = np.arccos(np.clip((np.trace(relative, axis1=1, axis2=2) - 1) / 2, -1, 1))
    assert angles.max() < 1e-4


def test_imu_noise_follows_the_datasheet_figures():
    sequence = SyntheticSequence(replace(SMALL, duration_s=30.0))
    noise = ImuNoise()
    imu = simulate_imu(sequence.trajectory, sequence.imu.times, noise, np.random.default_rng(7))
    truth = sequence.trajectory.state(imu.times)
    rate = sequence.config.imu_rate_hz
    gyro_white = imu.angular_velocity - truth.angular_velocity_body - imu.gyro_bias
    accel_white = imu.linear_acceleration - truth.specific_force_body - imu.accel_bias
    np.testing.assert_allclose(gyro_white.std(axis=0), noise.gyro_noise_density * rate**0.5, 0.03)
    np.testing.assert_allclose(
        accel_white.std(axis=0), noise.accel_noise_density * rate**0.5, rtol=0.03
    )
    # The bias is constant up to its random walk: a 30 s walk is far below the offset.
    drift = np.abs(imu.gyro_bias[-1] - imu.gyro_bias[0])
    assert np.all(drift < 6 * noise.gyro_bias_walk * 30**0.5)


def test_same_seed_same_sequence_other_seed_other_sequence():
    first, again = SyntheticSequence(SMALL), SyntheticSequence(SMALL)
    other = SyntheticSequence(replace(SMALL, seed=1))
    np.testing.assert_array_equal(first.frame(5).rendered.rgb, again.frame(5).rendered.rgb)
    np.testing.assert_array_equal(first.imu.angular_velocity, again.imu.angular_velocity)
    assert not np.array_equal(first.frame(5).rendered.rgb, other.frame(5).rendered.rgb)


def test_categories_control_dynamic_share_and_angular_velocity():
    shares, speeds = {}, {}
    for category in ('low_low', 'high_high'):
        sequence = SyntheticSequence(
            replace(SequenceConfig(duration_s=8.0, width=104, height=32), category=category)
        )
        frames = [sequence.frame(i).rendered for i in range(0, 480, 40)]
        shares[category] = np.mean([frame.dynamic_mask(sequence.scene).mean() for frame in frames])
        speeds[category] = sequence.mean_angular_speed()
    assert shares['high_high'] > 5 * shares['low_low']
    assert speeds['high_high'] > 2 * speeds['low_low']


def test_bad_configurations_are_refused():
    with pytest.raises(ValueError, match='unknown category'):
        SequenceConfig(category='medium')
    with pytest.raises(ValueError, match='IMU'):
        SequenceConfig(imu_rate_hz=30.0)


@pytest.mark.parametrize('storage', [StoragePlugin.MCAP, StoragePlugin.SQLITE3])
def test_bag_round_trip(tmp_path, storage):
    sequence = SyntheticSequence(replace(SMALL, category='high_low'))
    summary = write_sequence_bag(sequence, tmp_path / 'bag', storage=storage)
    assert summary.frames == 30
    assert summary.imu_samples == 120

    loaded = read_sequence_bag(tmp_path / 'bag')
    assert loaded.category == 'high_low'
    assert loaded.metadata['accumo.seed'] == '0'
    assert float(loaded.metadata['accumo.mean_dynamic_share']) > 0.0
    assert loaded.intrinsics == sequence.config.intrinsics
    np.testing.assert_array_equal(loaded.rgb[7], sequence.frame(7).rendered.rgb)
    np.testing.assert_array_equal(loaded.depth[7], sequence.frame(7).rendered.depth)
    np.testing.assert_allclose(loaded.frame_poses(), sequence.ground_truth.poses, atol=1e-9)
    np.testing.assert_allclose(
        loaded.velocities_world, sequence.ground_truth.velocity_world, atol=1e-9
    )
    np.testing.assert_allclose(loaded.imu_times, sequence.imu.times, atol=1e-9)
    np.testing.assert_array_equal(loaded.angular_velocity, sequence.imu.angular_velocity)

    subsampled = read_sequence_bag(tmp_path / 'bag', every=3, max_frames=4)
    assert len(subsampled.rgb) == 4
    np.testing.assert_array_equal(subsampled.rgb[1], loaded.rgb[3])


def test_a_bags_generator_settings_and_imu_biases_come_back_from_its_metadata(tmp_path):
    config = replace(SMALL, seed=31, category='low_high', imu_noise=ImuNoise(accel_bias_sigma=0.3))
    assert config_from_metadata(config_to_metadata(config)) == config
    sequence = SyntheticSequence(config)
    write_sequence_bag(sequence, tmp_path / 'bag')
    loaded = read_sequence_bag(tmp_path / 'bag')
    gyro_bias, accel_bias = turn_on_biases(loaded)
    np.testing.assert_array_equal(gyro_bias, sequence.imu.gyro_bias[0])
    np.testing.assert_array_equal(accel_bias, sequence.imu.accel_bias[0])
    # A bag whose IMU is not what its settings generate has no known biases.
    tampered = replace(loaded, linear_acceleration=loaded.linear_acceleration + 0.01)
    with pytest.raises(SequenceBagError, match='biases are unknown'):
        turn_on_biases(tampered)
    with pytest.raises(SequenceBagError, match='accumo.seed'):
        config_from_metadata({k: v for k, v in loaded.metadata.items() if k != 'accumo.seed'})


def test_a_bag_without_the_sequence_topics_is_refused(tmp_path):
    sequence = SyntheticSequence(SMALL)
    write_sequence_bag(sequence, tmp_path / 'bag')
    (tmp_path / 'not_a_bag').mkdir()
    with pytest.raises(SequenceBagError, match='cannot open bag'):
        read_sequence_bag(tmp_path / 'not_a_bag')


def test_generator_cli_writes_every_category_and_a_heldout_split(tmp_path, capsys):
    output = tmp_path / 'set'
    arguments = ['--output', str(output), '--duration', '0.1', '--per-category', '2']
    arguments += ['--width', '64', '--height', '32', '--workers', '1']
    assert main(arguments) == 0
    entries = load_index(output)
    assert sorted({entry.category for entry in entries}) == [
        'high_high',
        'high_low',
        'low_high',
        'low_low',
    ]
    assert len(split_paths(output, 'heldout')) == 4
    assert all(path.is_dir() for path in split_paths(output, 'train'))
    index = yaml.safe_load((output / 'dataset.yaml').read_text())
    assert index['seconds_to_generate'] > 0
    assert read_sequence_bag(split_paths(output, 'heldout')[0]).rgb.shape == (6, 32, 64, 3)
    assert main(arguments) == 2  # never overwrite without --overwrite
    assert 'pass --overwrite' in capsys.readouterr().err


def test_generator_cli_writes_a_training_only_set(tmp_path):
    output = tmp_path / 'train'
    arguments = ['--output', str(output), '--duration', '0.1', '--per-category', '2']
    arguments += ['--width', '64', '--height', '32', '--workers', '1', '--fps', '20']
    arguments += ['--seed', '1', '--holdout', 'none', '--categories', 'low_low', 'high_high']
    assert main(arguments) == 0
    entries = load_index(output)
    assert [(entry.name, entry.seed, entry.split) for entry in entries] == [
        ('low_low_0', 1000, 'train'),
        ('low_low_1', 1001, 'train'),
        ('high_high_0', 1300, 'train'),
        ('high_high_1', 1301, 'train'),
    ]
    assert split_paths(output, 'heldout') == []
    index = yaml.safe_load((output / 'dataset.yaml').read_text())
    assert index['settings']['holdout'] == 'none'
    assert index['settings']['fps'] == 20.0
    assert read_sequence_bag(split_paths(output, 'train')[0]).rgb.shape == (2, 32, 64, 3)
