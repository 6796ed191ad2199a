# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Mahimahi traces: parsing, cyclic counting, rate conversion and the two shipped traces."""

from __future__ import annotations

from pathlib import Path

import pytest

from edge_offload.link_traces import (
    PACKET_BYTES,
    DeliveryTrace,
    rates_to_timestamps,
    write_trace,
)

TRACES = Path(__file__).parents[1] / 'traces'
BITS = PACKET_BYTES * 8


def test_load_skips_comments_and_blank_lines(tmp_path):
    path = tmp_path / 'a.trace'
    path.write_text('# header\n\n1\n1\n  2 \n# middle\n4\n\n')
    trace = DeliveryTrace.load(path)
    assert list(trace.timestamps_ms) == [1, 1, 2, 4]
    assert len(trace) == 4
    assert trace.period_s == pytest.approx(0.004)
    assert trace.mean_rate_bps() == pytest.approx(4 * BITS / 0.004)


@pytest.mark.parametrize(
    ('text', 'message'),
    [
        ('1\n2\nabc\n', ':3: expected an integer'),
        ('1\n2.5\n', ':2: expected an integer'),
        ('# c\n5\n3\n', ':3: timestamp 3 is before the previous timestamp 5'),
        ('-1\n', ':1: negative timestamp'),
        ('# only a comment\n\n', 'no delivery opportunities'),
    ],
)
def test_load_names_the_bad_line(tmp_path, text, message):
    path = tmp_path / 'bad.trace'
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        DeliveryTrace.load(path)


def test_load_of_a_missing_file_raises_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        DeliveryTrace.load(tmp_path / 'missing.trace')


@pytest.mark.parametrize(
    ('timestamps', 'message'),
    [([], 'no delivery'), ([3, 2], 'before the previous'), ([-1], 'negative'), ([0.5], 'integer')],
)
def test_from_timestamps_refuses_bad_input(timestamps, message):
    with pytest.raises(ValueError, match=message):
        DeliveryTrace.from_timestamps_ms(timestamps)


def test_counting_repeats_the_trace_cyclically():
    # Period 10 ms; opportunities at 0, 5, 5, 10 (+ 10 k).
    trace = DeliveryTrace.from_timestamps_ms([0, 5, 5, 10])
    assert trace.period_s == pytest.approx(0.010)
    assert trace.count_until(-0.001) == 0
    assert trace.count_until(0.0) == 1
    assert trace.opportunities_between(0.0, 0.004) == 0
    assert trace.opportunities_between(0.0, 0.005) == 2
    # At 10 ms the first period's last opportunity and the second period's first coincide.
    assert trace.opportunities_between(0.0, 0.010) == 4
    assert trace.opportunities_between(0.0, 0.020) == 8
    # Many periods at once, from the middle of one period to the middle of another.
    assert trace.opportunities_between(0.0072, 1.0072) == 400
    assert trace.opportunities_between(0.0031, 0.0031) == 0
    with pytest.raises(ValueError, match='before its start'):
        trace.opportunities_between(0.002, 0.001)


def test_opportunity_times_agree_with_counting():
    trace = DeliveryTrace.from_timestamps_ms([1, 1, 3, 7, 7, 7, 12])
    for index in range(40):
        time_s = trace.opportunity_time_s(index)
        assert trace.count_until(time_s) > index
        assert trace.count_until(time_s - 1e-4) <= index


def test_zero_last_timestamp_repeats_every_millisecond():
    trace = DeliveryTrace.from_timestamps_ms([0, 0, 0])
    assert trace.period_s == pytest.approx(0.001)
    assert trace.mean_rate_bps() == pytest.approx(3 * BITS / 0.001)
    assert trace.opportunities_between(0.0, 0.010) == 30


def test_mean_rate_between_follows_a_step():
    # 10 opportunities per ms for 100 ms, then 1 per ms for 100 ms.
    timestamps = [t for t in range(1, 101) for _ in range(10)] + list(range(101, 201))
    trace = DeliveryTrace.from_timestamps_ms(timestamps)
    assert trace.mean_rate_between(0.0, 0.1) == pytest.approx(10 * BITS / 0.001)
    assert trace.mean_rate_between(0.1, 0.2) == pytest.approx(BITS / 0.001)
    assert trace.mean_rate_between(0.0, 2.0) == pytest.approx(trace.mean_rate_bps())
    with pytest.raises(ValueError, match='empty interval'):
        trace.mean_rate_between(0.1, 0.1)


def test_rates_to_timestamps_keeps_the_long_run_mean():
    # 1 Mbit/s at 10 ms steps is 0.83 opportunities a step: the remainder must carry over.
    rates = [1e6] * 1000 + [37e6] * 500 + [0.0] * 10 + [5e6] * 490
    timestamps = rates_to_timestamps(rates, 0.01)
    expected = sum(rate * 0.01 for rate in rates) / BITS
    assert abs(len(timestamps) - expected) <= 1
    assert timestamps == sorted(timestamps)
    trace = DeliveryTrace.from_timestamps_ms(timestamps)
    assert trace.period_s == pytest.approx(20.0)
    assert trace.mean_rate_between(0.0, 10.0) == pytest.approx(1e6, rel=1e-3)
    assert trace.mean_rate_between(10.0, 15.0) == pytest.approx(37e6, rel=1e-3)
    assert trace.opportunities_between(15.0, 15.1) == 0


def test_rates_to_timestamps_spreads_opportunities_within_the_step():
    assert rates_to_timestamps([4 * BITS / 0.1], 0.1) == [25, 50, 75, 100]
    with pytest.raises(ValueError, match='whole number'):
        rates_to_timestamps([1e6], 0.0005)
    with pytest.raises(ValueError, match='>= 0'):
        rates_to_timestamps([-1.0], 0.1)


def test_write_trace_round_trips_with_header(tmp_path):
    path = tmp_path / 'w.trace'
    write_trace(path, [1, 2, 2, 9], ['first line', '', 'third'])
    text = path.read_text()
    assert text.startswith('# first line\n#\n# third\n1\n')
    assert list(DeliveryTrace.load(path).timestamps_ms) == [1, 2, 2, 9]


@pytest.fixture(scope='module')
def shipped():
    return {
        'indoor': DeliveryTrace.load(TRACES / 'indoor_93mbps.trace'),
        'outdoor': DeliveryTrace.load(TRACES / 'outdoor_73mbps.trace'),
    }


@pytest.mark.parametrize(('name', 'mean_bps'), [('indoor', 93e6), ('outdoor', 73e6)])
def test_shipped_traces_have_the_published_means(shipped, name, mean_bps):
    trace = shipped[name]
    assert trace.mean_rate_bps() == pytest.approx(mean_bps, rel=0.01)
    assert trace.period_s == pytest.approx(60.0)


def test_shipped_traces_start_with_the_license_and_say_they_are_synthetic():
    paths = sorted(TRACES.glob('*.trace'))
    assert [path.name for path in paths] == ['indoor_93mbps.trace', 'outdoor_73mbps.trace']
    for path in paths:
        lines = path.read_text().splitlines()
        assert lines[:2] == [
            '# Copyright 2026 The edge_offload authors',
            '# SPDX-License-Identifier: Apache-2.0',
        ]
        header = ' '.join(line for line in lines[:30] if line.startswith('#'))
        assert 'SYNTHETIC' in header
        assert path.stat().st_size < 6_000_000


def test_outdoor_trace_dips_to_near_zero_and_fluctuates_more(shipped):
    def window_rates(trace):
        return [trace.mean_rate_between(i * 0.1, (i + 1) * 0.1) for i in range(600)]

    outdoor = window_rates(shipped['outdoor'])
    indoor = window_rates(shipped['indoor'])
    # Runs of at least two consecutive 0.1 s windows (>= 0.2 s) under 3 Mbit/s.
    low = [rate < 3e6 for rate in outdoor]
    dips = sum(1 for i in range(2, len(low)) if low[i] and low[i - 1] and not low[i - 2])
    assert dips >= 2
    assert not any(rate < 3e6 for rate in indoor)

    def spread(rates):
        mean = sum(rates) / len(rates)
        return (sum((rate - mean) ** 2 for rate in rates) / len(rates)) ** 0.5

    assert spread(outdoor) > spread(indoor)
