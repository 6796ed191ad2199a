# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""A generated AccuMO sequence bag plays through the robot's own bag source.

The sensor source node (``bringup``) is what replays bags on the robot; it must take the
generator's camera, calibration and IMU topics as they are.
"""

from dataclasses import replace

from rosbags.rosbag2 import StoragePlugin

from accumo_ros.simulation.sequence import SequenceConfig, SyntheticSequence
from accumo_ros.simulation.sequence_bag import (
    CAMERA_INFO_TOPIC,
    IMAGE_TOPIC,
    IMU_TOPIC,
    write_sequence_bag,
)
from people_following.sensor_sources import Frame, ImuSample, SourceConfig, open_source


def test_sensor_source_replays_a_generated_sequence(tmp_path):
    config = replace(SequenceConfig(duration_s=0.5, width=160, height=64), category='high_low')
    sequence = SyntheticSequence(config)
    write_sequence_bag(sequence, tmp_path / 'bag', storage=StoragePlugin.MCAP)
    source_config = SourceConfig(
        'bag',
        uri=str(tmp_path / 'bag'),
        image_topic=IMAGE_TOPIC,
        camera_info_topic=CAMERA_INFO_TOPIC,
        imu_topic=IMU_TOPIC,
    )
    frames, imu_samples = [], []
    with open_source(source_config) as source:
        for sample in source:
            if isinstance(sample, Frame):
                frames.append(sample)
            else:
                assert isinstance(sample, ImuSample)
                imu_samples.append(sample)
    assert len(frames) == 30
    assert len(imu_samples) == 120
    assert frames[3].image.shape == (64, 160, 3)
    assert frames[3].encoding == 'rgb8'
    assert frames[0].camera_info is not None
    stamps = [sample.stamp_ns for sample in frames + imu_samples]
    assert len(set(stamps)) == len(stamps) - 30  # every frame shares its stamp with an IMU sample
