# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``RequestTimeouts``: server time limits derived from measured round trips (no I/O)."""

from __future__ import annotations

import math
import threading

import pytest

from edge_offload.request_timeout import (
    DEFAULT_CEILING_S,
    DEFAULT_FACTOR,
    DEFAULT_WINDOW,
    RequestTimeouts,
    call_key,
    nearest_rank,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_defaults_are_the_documented_ones():
    timeouts = RequestTimeouts(5.0)
    assert (timeouts.factor, timeouts.window, timeouts.ceiling_s) == (2.0, 20, 30.0)
    assert (DEFAULT_FACTOR, DEFAULT_WINDOW, DEFAULT_CEILING_S) == (2.0, 20, 30.0)


def test_before_any_measurement_the_limit_is_the_floor():
    timeouts = RequestTimeouts(0.3, 30.0)
    assert timeouts.limit_s('kapao_s', 'nnto') == 0.3
    estimate = timeouts.estimate('kapao_s', 'nnto')
    assert estimate.limit_s == 0.3
    assert estimate.samples == 0
    assert math.isnan(estimate.quantile_s)
    assert timeouts.estimates() == []


def test_limit_is_factor_times_p95_clamped_to_floor_and_ceiling():
    timeouts = RequestTimeouts(0.3, 2.0, factor=2.0)
    timeouts.record('m', 'nnto', 0.6)
    assert timeouts.limit_s('m', 'nnto') == pytest.approx(1.2)
    # Fast answers: never below the floor.
    fast = RequestTimeouts(0.3, 2.0, factor=2.0)
    fast.record('m', 'nnto', 0.01)
    assert fast.limit_s('m', 'nnto') == 0.3
    # Very slow answers: never above the ceiling.
    timeouts.record('m', 'nnto', 5.0)
    assert timeouts.limit_s('m', 'nnto') == 2.0


def test_keys_are_model_and_mode():
    timeouts = RequestTimeouts(0.1, 30.0)
    timeouts.record('slow', 'nnto', 1.0)
    timeouts.record('fast', 'nnto', 0.02)
    timeouts.record('slow', 'per_op', 0.2)
    assert timeouts.limit_s('slow', 'nnto') == pytest.approx(2.0)
    assert timeouts.limit_s('fast', 'nnto') == 0.1
    assert timeouts.limit_s('slow', 'per_op') == pytest.approx(0.4)
    assert timeouts.limit_s('other', 'nnto') == 0.1
    assert [(e.model, e.mode) for e in timeouts.estimates()] == [
        ('fast', 'nnto'),
        ('slow', 'nnto'),
        ('slow', 'per_op'),
    ]


def test_p95_ignores_one_outlier_in_twenty_but_not_two():
    timeouts = RequestTimeouts(0.1, 100.0, factor=2.0, window=20)
    for _ in range(19):
        timeouts.record('m', 'nnto', 1.0)
    timeouts.record('m', 'nnto', 10.0)
    assert timeouts.limit_s('m', 'nnto') == pytest.approx(2.0)
    timeouts.record('m', 'nnto', 10.0)  # the window drops a 1.0; two outliers now
    assert timeouts.limit_s('m', 'nnto') == pytest.approx(20.0)


def test_short_window_uses_its_maximum():
    timeouts = RequestTimeouts(0.1, 100.0, factor=2.0)
    for seconds in (0.5, 3.0, 0.4):
        timeouts.record('m', 'nnto', seconds)
    assert timeouts.limit_s('m', 'nnto') == pytest.approx(6.0)


def test_window_is_bounded_and_forgets_old_round_trips():
    timeouts = RequestTimeouts(0.1, 100.0, factor=2.0, window=5)
    timeouts.record('m', 'nnto', 4.0)
    for _ in range(5):
        timeouts.record('m', 'nnto', 0.5)
    estimate = timeouts.estimate('m', 'nnto')
    assert estimate.samples == 5
    assert estimate.quantile_s == 0.5
    assert estimate.limit_s == pytest.approx(1.0)


def test_invalid_measurements_are_ignored():
    timeouts = RequestTimeouts(0.3)
    for seconds in (math.nan, math.inf, -1.0):
        timeouts.record('m', 'nnto', seconds)
    assert timeouts.estimate('m', 'nnto').samples == 0


@pytest.mark.parametrize(
    ('arguments', 'message'),
    [
        ({'floor_s': 0.0}, 'request_timeout_s'),
        ({'floor_s': 5.0, 'ceiling_s': 1.0}, 'max_request_timeout_s'),
        ({'floor_s': 1.0, 'factor': 0.5}, 'request_timeout_factor'),
        ({'floor_s': 1.0, 'window': 0}, 'window'),
        ({'floor_s': 1.0, 'quantile': 0.0}, 'quantile'),
    ],
)
def test_invalid_settings_are_refused(arguments, message):
    with pytest.raises(ValueError, match=message):
        RequestTimeouts(**arguments)


def test_notable_changes_are_reported_once_and_throttled():
    clock = FakeClock()
    timeouts = RequestTimeouts(0.3, 30.0, factor=2.0, clock=clock)
    assert timeouts.notable_changes() == []
    timeouts.record('m', 'nnto', 0.6)
    (change,) = timeouts.notable_changes()
    assert (change.model, change.mode, change.previous_s) == ('m', 'nnto', 0.3)
    assert change.limit_s == pytest.approx(1.2)
    assert change.samples == 1
    assert timeouts.notable_changes() == []  # reported: nothing new
    # A small change is not notable.
    timeouts.record('m', 'nnto', 0.65)
    clock.now += 10.0
    assert timeouts.notable_changes() == []
    # A large change long after the last report: reported at once.
    timeouts.record('m', 'nnto', 2.0)
    clock.now += 1.0
    (change,) = timeouts.notable_changes()
    assert change.previous_s == pytest.approx(1.2)
    assert change.limit_s == pytest.approx(4.0)
    # A large change 1 s after a report waits for the throttle period, and is not lost.
    timeouts.record('m', 'nnto', 10.0)
    clock.now += 1.0
    assert timeouts.notable_changes() == []
    clock.now += 5.0
    (change,) = timeouts.notable_changes()
    assert change.limit_s == pytest.approx(20.0)


def test_call_hooks_key_by_model_field_and_op():
    assert call_key('nnto', 'infer', {'model': 'kapao_s'}) == ('kapao_s', 'nnto')
    assert call_key('per_op', 'run', {'op': 3}) == ('', 'per_op:run')
    assert call_key('nnto', 'infer', {'model': 7}) == ('', 'nnto')
    timeouts = RequestTimeouts(0.3, 30.0)
    assert timeouts.timeout_for_call('nnto', 'infer', {'model': 'm'}) == 0.3
    timeouts.record_call('nnto', 'infer', {'model': 'm'}, 0.6, late=True)
    timeouts.record_call('nnto', 'infer', {'model': 'm'}, 0.5, late=False)
    assert timeouts.timeout_for_call('nnto', 'infer', {'model': 'm'}) == pytest.approx(1.2)
    assert timeouts.late_replies == 1


def test_concurrent_records_and_reads():
    timeouts = RequestTimeouts(0.1, 30.0, window=20)

    def work(index: int) -> None:
        for step in range(500):
            timeouts.record(f'm{index % 3}', 'nnto', 0.01 * (step % 7))
            timeouts.limit_s(f'm{index % 3}', 'nnto')
            timeouts.estimates()

    threads = [threading.Thread(target=work, args=(index,)) for index in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {estimate.samples for estimate in timeouts.estimates()} == {20}


def test_nearest_rank():
    assert nearest_rank([3.0], 0.95) == 3.0
    assert nearest_rank([float(v) for v in range(1, 21)], 0.95) == 19.0
    assert nearest_rank([float(v) for v in range(1, 101)], 0.95) == 95.0
    assert nearest_rank([2.0, 1.0], 1.0) == 2.0
