# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Run metrics from hand-made messages: exact values, missing topics, deterministic JSON."""

from __future__ import annotations

import csv
import json
import math
import random
from types import SimpleNamespace as Msg

import pytest

from people_following.run_metrics import (
    RunMetrics,
    differences,
    flatten,
    plot,
    round_value,
    to_json,
    write_csv,
    write_json,
)

S = 1_000_000_000  # ns per second
T0 = 1_700_000_000 * S


def stamp(ns: int) -> Msg:
    return Msg(sec=ns // S, nanosec=ns % S)


def person(track_id: int = 0) -> Msg:
    return Msg(track_id=track_id, has_position=True, position_m=Msg(x=1.0, y=0.0, z=0.0))


def people(stamp_ns: int, count: int = 1, mode: str = 'nnto', model: str = 'kapao') -> Msg:
    return Msg(
        header=Msg(stamp=stamp(stamp_ns), frame_id='camera'),
        people=[person() for _ in range(count)],
        model_name=model,
        model_is_trained=model != 'random',
        offload_mode=mode,
    )


def tracks(stamp_ns: int, *ids: int) -> Msg:
    return Msg(header=Msg(stamp=stamp(stamp_ns)), people=[person(i) for i in ids])


def link(connected: bool, rtt_s: float = float('nan'), up: float = float('nan')) -> Msg:
    return Msg(
        header=Msg(stamp=stamp(T0)),
        connected=connected,
        rtt_s=rtt_s,
        uplink_bandwidth_bps=up,
        downlink_bandwidth_bps=float('nan'),
    )


def twist(linear_x: float = 0.0, angular_z: float = 0.0, linear_y: float = 0.0) -> Msg:
    return Msg(linear=Msg(x=linear_x, y=linear_y, z=0.0), angular=Msg(x=0.0, y=0.0, z=angular_z))


def point(stamp_ns: int) -> Msg:
    return Msg(header=Msg(stamp=stamp(stamp_ns), frame_id='odom'), point=Msg(x=1.0, y=0, z=0))


def decision(index: int, solve_time_s: float) -> Msg:
    return Msg(
        task_names=['depth', 'odometry'], offloaded_task_index=index, solve_time_s=solve_time_s
    )


def test_people_latency_percentiles_fps_and_modes():
    # Five frames 0.1 s apart, latencies 10..50 ms; one untrained-model frame.
    events = [
        ('/people', T0 + i * S // 10 + (i + 1) * 10_000_000, people(T0 + i * S // 10, count=i))
        for i in range(5)
    ]
    events[4] = (events[4][0], events[4][1], people(T0 + 4 * S // 10, 4, 'local', 'random'))
    result = RunMetrics().add_all(events).result()
    section = result['people']
    assert section['frames'] == 5
    # 4 intervals over 0.4 s + 40 ms of growing latency.
    assert section['fps'] == pytest.approx(4 / 0.44, rel=1e-6)
    assert section['latency_ms'] == {
        'count': 5, 'mean': 30.0, 'p50': 30.0, 'p90': 46.0, 'p99': 49.6, 'max': 50.0,
    }  # fmt: skip
    assert section['people_per_frame'] == {'mean': 2.0, 'max': 4}
    assert section['offload_modes'] == {'local': 1, 'nnto': 4}
    assert section['models'] == {'kapao': 4, 'random': 1}
    assert section['untrained_frames'] == 1
    assert result['run'] == {'messages': 5, 'duration_s': 0.44, 'topics': {'/people': 5}}


def test_latency_from_the_published_image_of_the_same_stamp():
    # Frames stamped at capture, published 5 ms later (a replay: much later), results 30 ms
    # after publication; one result of a frame whose image was not recorded.
    lag = 3600 * S
    images = [
        ('image_raw', T0 + i * S // 10 + lag, Msg(header=Msg(stamp=stamp(T0 + i * S // 10))))
        for i in range(3)
    ]
    results = [
        ('people', T0 + i * S // 10 + lag + 30_000_000, people(T0 + i * S // 10)) for i in range(4)
    ]
    result = RunMetrics().add_all(images + results).result()
    assert result['image_raw'] == {'frames': 3, 'fps': pytest.approx(10.0)}
    section = result['people']
    assert section['latency_ms']['p50'] == pytest.approx(3600_030.0)
    assert section['latency_from_image_ms'] == {
        'count': 3, 'mean': 30.0, 'p50': 30.0, 'p90': 30.0, 'p99': 30.0, 'max': 30.0,
    }  # fmt: skip


def test_link_state_fraction_disconnections_and_rtt():
    samples = [
        link(True, 0.010, 20e6),
        link(True, 0.030, 40e6),
        link(False),
        link(True, 0.020, float('nan')),
        link(False),
        link(False),
    ]
    result = RunMetrics().add_all(('link_state', i * S, m) for i, m in enumerate(samples))
    section = result.result()['link_state']
    assert section['samples'] == 6
    assert section['connected_fraction'] == 0.5
    assert section['disconnections'] == 2
    assert section['rtt_ms'] == {'count': 3, 'mean': 20.0, 'p50': 20.0, 'p90': 28.0, 'max': 30.0}
    assert section['uplink_mbps'] == {'count': 2, 'mean': 30.0, 'min': 20.0}
    assert section['downlink_mbps'] == {'count': 0, 'mean': None, 'min': None}


def test_link_state_without_rtt_fields_has_no_rtt_stats():
    message = Msg(connected=True)
    section = RunMetrics().add_all([('link_state', 0, message)]).result()['link_state']
    assert section == {'samples': 1, 'connected_fraction': 1.0, 'disconnections': 0}


def test_tracks_lifetimes_and_frames_with_tracks():
    events = [
        ('/tracks', T0 + 0 * S, tracks(T0 + 0 * S, 1)),
        ('/tracks', T0 + 1 * S, tracks(T0 + 1 * S, 1, 2)),
        ('/tracks', T0 + 2 * S, tracks(T0 + 2 * S)),  # nobody tracked
        ('/tracks', T0 + 3 * S, tracks(T0 + 3 * S, 0, 1)),  # 0 = untracked person
    ]
    section = RunMetrics().add_all(events).result()['tracks']
    assert section == {
        'frames': 4,
        'frames_with_tracks': 3,
        'distinct_tracks': 2,
        'mean_lifetime_s': 1.5,  # track 1: 3 s, track 2: seen once
        'max_lifetime_s': 3.0,
    }


def test_target_gaps_by_stamp():
    stamps = [0.0, 0.2, 0.4, 1.0, 1.1, 2.6]  # gaps 0.6 and 1.5 exceed 0.5 s
    # Received out of stamp order: gaps are by header stamp.
    events = [('target', T0 + i, point(T0 + int(s * S))) for i, s in enumerate(reversed(stamps))]
    section = RunMetrics().add_all(events).result()['target']
    assert section == {'messages': 6, 'gaps': 2, 'longest_gap_s': 1.5}


def test_single_target_has_no_gap():
    section = RunMetrics().add_all([('target', T0, point(T0))]).result()['target']
    assert section == {'messages': 1, 'gaps': 0, 'longest_gap_s': None}


def test_cmd_vel_statistics():
    commands = [twist(0.0), twist(0.5, -0.3), twist(-0.2, 0.1), twist(0.0, 0.0, linear_y=0.1)]
    events = [('cmd_vel', T0 + i * S // 20, m) for i, m in enumerate(commands)]
    section = RunMetrics().add_all(events).result()['cmd_vel']
    assert section == {
        'commands': 4,
        'rate_hz': 20.0,
        'mean_abs_linear_x': 0.175,
        'max_linear_x': 0.5,
        'max_abs_angular_z': 0.3,
        'zero_fraction': 0.25,  # linear.y of the last one is not zero
    }


def test_follower_state_durations_run_to_the_end_of_the_run():
    events = [
        ('/follower/state', T0, Msg(data='no_target')),
        ('/follower/state', T0 + 2 * S, Msg(data='following')),
        ('/follower/state', T0 + 2 * S + S // 2, Msg(data='following')),  # repeated, no change
        ('/follower/state', T0 + 5 * S, Msg(data='estop')),
        ('/follower/state', T0 + 6 * S, Msg(data='no_target')),
        ('/cmd_vel', T0 + 10 * S, twist()),  # the run ends here
    ]
    section = RunMetrics().add_all(events).result()['follower_state']
    assert section == {
        'messages': 5,
        'transitions': 3,
        'durations_s': {'estop': 1.0, 'following': 3.0, 'no_target': 6.0},
        'final_state': 'no_target',
    }


def test_accumo_decisions_and_estop_presses():
    decisions = [decision(0, 0.001), decision(-1, 0.002), decision(1, 0.003), decision(5, 0.002)]
    estops = [False, True, True, False, True]
    events = [('accumo/decision', i, m) for i, m in enumerate(decisions)]
    events += [('estop', i, Msg(data=value)) for i, value in enumerate(estops)]
    result = RunMetrics().add_all(events).result()
    assert result['accumo_decision'] == {
        'decisions': 4,
        'offloads': {'#5': 1, 'depth': 1, 'odometry': 1},
        'no_offload_fraction': 0.25,
        'mean_solve_time_ms': 2.0,
    }
    assert result['estop'] == {'messages': 5, 'presses': 2, 'pressed_at_end': True}


def test_empty_run_and_missing_sections():
    result = RunMetrics().result()
    assert result == {
        'format': 'people_following.run_metrics/1',
        'run': {'messages': 0, 'duration_s': 0.0, 'topics': {}},
    }
    # Topics without an analysis (images) are only counted; messages may be omitted.
    run = RunMetrics()
    run.add('/depth', T0)
    run.add('/depth', T0 + S)
    assert not run.wants('/depth')
    assert run.result()['run'] == {
        'messages': 2,
        'duration_s': 1.0,
        'topics': {'/depth': 2},
    }
    assert list(run.result()) == ['format', 'run']


def test_one_frame_has_no_rate():
    section = RunMetrics().add_all([('people', T0 + S, people(T0))]).result()['people']
    assert section['fps'] is None
    assert section['latency_ms']['p99'] == 1000.0


def test_namespace_makes_topics_relative():
    run = RunMetrics(namespace='/robot1')
    run.add('/robot1/cmd_vel', 0, twist(1.0))
    run.add('/cmd_vel', 1, twist(2.0))  # outside the namespace: only counted
    result = run.result()
    assert result['cmd_vel']['commands'] == 1
    assert result['run']['topics'] == {'/cmd_vel': 1, '/robot1/cmd_vel': 1}
    assert run.expected_type('/robot1/people') == 'offload_interfaces/msg/PersonArray'
    assert run.expected_type('/people') is None


def _mixed_events() -> list[tuple[str, int, Msg]]:
    generator = random.Random(7)
    events = []
    for i in range(200):
        t = T0 + i * S // 30
        events.append(('/people', t + generator.randrange(30_000_000), people(t, i % 3)))
        events.append(('/cmd_vel', t + 1, twist(generator.uniform(-1, 1) / 3)))
        if i % 10 == 0:
            events.append(('/link_state', t + 2, link(i % 50 != 0, generator.uniform(0, 0.1))))
            events.append(('/follower/state', t + 3, Msg(data=('a', 'b', 'c')[i % 3])))
    return events


def test_json_is_byte_identical_on_recompute_and_independent_of_topic_interleaving():
    events = _mixed_events()
    first = to_json(RunMetrics().add_all(events).result())
    assert to_json(RunMetrics().add_all(events).result()) == first
    # Another interleaving of the topics (each topic's own order kept) gives the same file.
    by_topic: dict[str, list] = {}
    for event in events:
        by_topic.setdefault(event[0], []).append(event)
    regrouped = [event for topic in sorted(by_topic) for event in by_topic[topic]]
    assert to_json(RunMetrics().add_all(regrouped).result()) == first
    # Floats are rounded to 6 significant digits.
    latency = json.loads(first)['people']['latency_ms']['mean']
    assert latency == float(f'{latency:.6g}')


def test_round_value_and_flatten():
    assert round_value({'a': [1.23456789, float('nan')], 'b': True, 'c': 3}) == {
        'a': [1.23457, None],
        'b': True,
        'c': 3,
    }
    assert flatten({'a': {'b': 1, 'c': {'d': 2}}, 'e': {}, 'f': None}) == {
        'a.b': 1,
        'a.c.d': 2,
        'e': {},
        'f': None,
    }


def test_writers_and_differences(tmp_path):
    run = RunMetrics().add_all(_mixed_events())
    metrics = run.result()
    json_path = write_json(metrics, tmp_path / 'out' / 'metrics.json')
    assert json.loads(json_path.read_text()) == metrics
    csv_path = write_csv(metrics, tmp_path / 'out' / 'metrics.csv')
    with csv_path.open() as file:
        rows = {row['key']: row['value'] for row in csv.DictReader(file)}
    assert rows['people.frames'] == '200'
    assert rows['run.topics./cmd_vel'] == '200'
    assert float(rows['people.latency_ms.p90']) == metrics['people']['latency_ms']['p90']

    assert differences(metrics, json.loads(json_path.read_text())) == []
    tampered = json.loads(json_path.read_text())
    tampered['people']['frames'] = 199
    del tampered['cmd_vel']['rate_hz']
    assert differences(tampered, metrics) == [
        'cmd_vel.rate_hz: expected (absent), got 30.0',
        'people.frames: expected 199, got 200',
    ]
    # An int is not the same value as a float in a metrics file.
    assert differences({'a': 1}, {'a': 1.0}) == ['a: expected 1, got 1.0']


def test_plot_writes_a_png_also_without_data(tmp_path):
    path = plot(RunMetrics().add_all(_mixed_events()), tmp_path / 'metrics.png', title='run')
    assert path.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    empty = plot(RunMetrics(), tmp_path / 'empty.png')
    assert empty.stat().st_size > 0


def test_nan_latency_inputs_never_reach_json():
    # A stamp in the future gives a negative latency, still a number.
    section = RunMetrics().add_all([('people', T0, people(T0 + S))]).result()['people']
    assert section['latency_ms']['max'] == -1000.0
    assert not any(
        isinstance(v, float) and not math.isfinite(v) for v in flatten(section).values()
    )
