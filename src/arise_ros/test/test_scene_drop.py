# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Scene drop rates measured on a generated sequence, and the rates file the benchmarks share."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from accumo_ros.simulation.sequence import SequenceConfig, SyntheticSequence
from accumo_ros.simulation.sequence_bag import read_sequence_bag, write_sequence_bag
from arise_ros.scene_drop import (
    DropCurve,
    SceneRate,
    TrackedMapErrors,
    drop_curve,
    read_rates,
    write_rates,
)

REPOSITORY = Path(__file__).resolve().parents[3]


@pytest.fixture(scope='module')
def moving_sequence(tmp_path_factory):
    config = replace(SequenceConfig(duration_s=1.0, width=160, height=64), category='high_high')
    path = tmp_path_factory.mktemp('scene') / 'bag'
    write_sequence_bag(SyntheticSequence(config), path)
    return read_sequence_bag(path)


def test_tracking_drifts_further_the_longer_the_stride(moving_sequence):
    # Ground truth stands in for the server's maps: warping it is then the only error.
    errors = TrackedMapErrors(moving_sequence, moving_sequence.depth)
    curve = drop_curve(errors, (1, 2, 12, 24), sources=6)
    assert curve.server == curve.gt
    assert curve.at(1, 'gt') < curve.at(12, 'gt') < curve.at(24, 'gt')
    assert curve.rate(2, 24, 'server') > 0.0
    # A map warped by no motion is the map itself.
    assert errors(5, 5) == (0.0, 0.0)


def test_a_curve_needs_a_sequence_longer_than_its_strides(moving_sequence):
    errors = TrackedMapErrors(moving_sequence, moving_sequence.depth)
    with pytest.raises(ValueError, match='shorter than stride'):
        drop_curve(errors, (1, len(errors)))
    with pytest.raises(ValueError, match='positive'):
        drop_curve(errors, (0, 2))
    with pytest.raises(ValueError, match='server maps'):
        TrackedMapErrors(moving_sequence, moving_sequence.depth[:-1])


def test_a_rate_is_the_slope_above_the_reference():
    curve = DropCurve((1, 2, 12), server=(0.015, 0.02, 0.05), gt=(0.06, 0.06, 0.07))
    assert curve.rate(2, 12, 'server') == pytest.approx(0.003)
    assert curve.rate(2, 12, 'gt') == pytest.approx(0.001)
    with pytest.raises(ValueError, match='longer'):
        curve.rate(12, 2, 'server')
    with pytest.raises(ValueError, match='truth'):
        curve.at(2, 'oracle')


def test_rates_round_trip_through_the_file(tmp_path):
    path = tmp_path / 'rates.csv'
    rates = [
        SceneRate('s/a', 'low_low', 0.002, 0.0005),
        SceneRate('s/b', 'high_high', 0.006, 0.003),
    ]
    write_rates(path, rates, 'made by a test\nsecond line')
    assert path.read_text().startswith('# made by a test\n# second line\n')
    assert read_rates(path) == (0.002, 0.006)
    assert read_rates(path, 'gt') == (0.0005, 0.003)


@pytest.mark.parametrize(
    ('text', 'message'),
    [
        ('sequence,category,rate_gt\ns,c,0.001\n', 'no rate_server column'),
        ('sequence,category,rate_server,rate_gt\ns,c,fast,0.001\n', 'data row 1 has no number'),
        ('sequence,category,rate_server,rate_gt\ns,c,-0.001,0.001\n', 'must be positive'),
        ('sequence,category,rate_server,rate_gt\ns,c,nan,0.001\n', 'must be positive'),
        ('# only a comment\nsequence,category,rate_server,rate_gt\n', 'no rates'),
        ('', 'no rate_server column'),
    ],
)
def test_a_bad_rates_file_is_refused_with_the_reason(tmp_path, text, message):
    path = tmp_path / 'rates.csv'
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        read_rates(path)


def test_the_committed_rates_are_the_generated_sequences():
    from pathlib import Path

    committed = (
        Path(__file__).resolve().parents[3] / 'benchmarks' / 'data' / 'arise_drop_rates.csv'
    )
    server, gt = read_rates(committed), read_rates(committed, 'gt')
    assert len(server) == len(gt) == 20
    # Against the server's maps every scene drifts faster than against ground truth: the
    # server net's maps of consecutive frames differ on top of the warp's error.
    assert all(s > g for s, g in zip(server, gt, strict=True))
    assert np.all(np.asarray(server) < 0.02)
