# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Metrics of one recorded run: latency, FPS, link, offload mode, tracks, commands.

Pure Python (no rclpy, no I/O besides the writers): :class:`RunMetrics` takes events
``(topic, receive_time_ns, message)``, where the message is an already deserialized ROS
message (any object with the same fields works), and :meth:`RunMetrics.result` returns a
JSON-serialisable dict. The bag recorder (:mod:`people_following.bag_recorder_node`) computes it
over the messages it writes, and the bag evaluator (:mod:`people_following.bag_evaluator`) over a
bag's messages with their log times as receive times: the same events give the same file.

Topic names are taken relative to ``namespace`` (``/people`` and ``people`` are the same
topic in the root namespace). Every message counts in ``run``; the sections below are
computed from their topic only and are absent when the topic has no message. Within one
topic, messages are taken in order of receive time (ties in the order given), so the
result does not depend on how topics were interleaved.

Definitions (times in seconds unless a key ends in ``_ms``; ``null`` = undefined):

``run``
    ``messages`` (all topics), ``duration_s`` = last - first receive time over all
    messages (the end of the run is the last receive time), ``topics``: messages per topic.
``image_raw`` (``sensor_msgs/Image``): ``frames`` and ``fps`` of the camera as received.
``people`` (``offload_interfaces/PersonArray``, header stamp = capture time)
    ``frames``; ``fps`` = (frames - 1) / (last - first receive time); ``latency_ms``:
    end-to-end latency = receive time - header stamp, as ``count``, ``mean``, ``p50``,
    ``p90``, ``p99``, ``max`` (percentiles interpolate linearly between closest ranks, as
    numpy's default); ``latency_from_image_ms``: receive time - the receive time of the
    ``image_raw`` frame with the same stamp (the graph's own latency, without the camera's;
    the one that means something in a replay, whose frames keep their recorded stamps);
    ``people_per_frame`` (``mean``, ``max``); ``offload_modes`` and
    ``models``: frames per ``offload_mode`` / ``model_name`` string; ``untrained_frames``:
    frames whose model has random weights.
``link_state`` (``offload_interfaces/LinkState``)
    ``samples``; ``connected_fraction``; ``disconnections`` = connected true -> false
    transitions between consecutive samples; ``rtt_ms`` (``count``, ``mean``, ``p50``,
    ``p90``, ``max``) and ``uplink_mbps`` / ``downlink_mbps`` (``count``, ``mean``,
    ``min``) over the finite values of connected samples (NaN means "no estimate").
``tracks`` (``PersonArray`` of tracked people, ``track_id`` 0 = untracked)
    ``frames``; ``frames_with_tracks`` (at least one tracked person); ``distinct_tracks``;
    ``mean_lifetime_s`` / ``max_lifetime_s``: per track id, last - first header stamp of
    the frames it appears in (0 for a track seen once).
``target`` (``geometry_msgs/PointStamped``)
    ``messages``; with the header stamps in increasing order, ``gaps`` = consecutive
    stamps more than ``TARGET_GAP_S`` (0.5 s) apart and ``longest_gap_s``. Target
    switches are not reported: a PointStamped carries no identity.
``cmd_vel`` (``geometry_msgs/Twist``)
    ``commands``; ``rate_hz`` as ``fps``; ``mean_abs_linear_x``; ``max_linear_x``;
    ``max_abs_angular_z``; ``zero_fraction``: commands whose six components are all 0.
``follower_state`` (``std_msgs/String`` on ``follower/state``)
    ``messages``; ``transitions``: consecutive messages with different states;
    ``durations_s``: per state, the time from each message to the next one (the last to
    the end of the run), by receive time; ``final_state``.
``accumo_decision`` (``offload_interfaces/TaskDecision``)
    ``decisions``; ``offloads``: decisions per offloaded task name (an index outside
    ``task_names`` counts as ``#<index>``); ``no_offload_fraction``;
    ``mean_solve_time_ms``.
``estop`` (``std_msgs/Bool``)
    ``messages``; ``presses``: true messages whose predecessor was not true;
    ``pressed_at_end``.

Floats are rounded to ``SIGNIFICANT_DIGITS`` significant digits and non-finite values
become ``null``, so recomputing from the same events gives byte-identical JSON.
"""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from edge_offload.stamps import stamp_ns

FORMAT = 'people_following.run_metrics/1'
SIGNIFICANT_DIGITS = 6
TARGET_GAP_S = 0.5

# Topic (relative) -> the message type its section expects. A section's key in the result is
# its topic with '/' replaced by '_'.
TOPIC_TYPES = {
    'image_raw': 'sensor_msgs/msg/Image',
    'people': 'offload_interfaces/msg/PersonArray',
    'link_state': 'offload_interfaces/msg/LinkState',
    'tracks': 'offload_interfaces/msg/PersonArray',
    'target': 'geometry_msgs/msg/PointStamped',
    'cmd_vel': 'geometry_msgs/msg/Twist',
    'follower/state': 'std_msgs/msg/String',
    'accumo/decision': 'offload_interfaces/msg/TaskDecision',
    'estop': 'std_msgs/msg/Bool',
}


def round_value(value: Any) -> Any:
    """Round floats to ``SIGNIFICANT_DIGITS`` digits (non-finite: None), recursively."""
    if isinstance(value, dict):
        return {key: round_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [round_value(item) for item in value]
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, np.integer):
        return int(value)
    value = float(value)
    if not math.isfinite(value):
        return None
    return float(f'{value:.{SIGNIFICANT_DIGITS}g}')


def _stats(values: Sequence[float], keys: Sequence[str], scale: float = 1.0) -> dict[str, Any]:
    """Return ``count`` and the statistics named in ``keys`` of ``values`` times ``scale``."""
    array = np.asarray(values, dtype=np.float64) * scale
    result: dict[str, Any] = {'count': len(values)}
    for key in keys:
        if not len(values):
            result[key] = None
        elif key == 'mean':
            result[key] = float(np.mean(array))
        elif key == 'min':
            result[key] = float(np.min(array))
        elif key == 'max':
            result[key] = float(np.max(array))
        else:  # pNN
            result[key] = float(np.percentile(array, float(key[1:])))
    return result


def _rate(count: int, first_ns: int, last_ns: int) -> float | None:
    if count < 2 or last_ns <= first_ns:
        return None
    return (count - 1) / ((last_ns - first_ns) * 1e-9)


def _by_time(entries: list[tuple]) -> list[tuple]:
    return sorted(entries, key=lambda entry: entry[0])  # stable: ties keep their order


def _fraction(part: int, whole: int) -> float | None:
    return part / whole if whole else None


class RunMetrics:
    """Accumulate a run's messages; :meth:`result` computes the metrics (module docstring)."""

    def __init__(self, namespace: str = '') -> None:
        self._prefix = namespace.strip('/') + '/' if namespace.strip('/') else ''
        self._topics: Counter[str] = Counter()
        self._first_ns: int | None = None
        self._last_ns: int | None = None
        self._entries: dict[str, list[tuple]] = {topic: [] for topic in TOPIC_TYPES}

    def relative(self, topic: str) -> str:
        """Return ``topic`` relative to the namespace (unchanged when outside it)."""
        name = topic.lstrip('/')
        return name.removeprefix(self._prefix) if name.startswith(self._prefix) else topic

    def wants(self, topic: str) -> bool:
        """Return whether ``topic``'s messages are analysed (others are only counted)."""
        return self.relative(topic) in TOPIC_TYPES

    def expected_type(self, topic: str) -> str | None:
        """Return the message type the section of ``topic`` reads, or None."""
        return TOPIC_TYPES.get(self.relative(topic))

    def add(self, topic: str, receive_ns: int, message: Any = None) -> None:
        """Add one message; ``message`` may be None for topics that are only counted."""
        receive_ns = int(receive_ns)
        self._topics[topic] += 1
        self._first_ns = receive_ns if self._first_ns is None else min(self._first_ns, receive_ns)
        self._last_ns = receive_ns if self._last_ns is None else max(self._last_ns, receive_ns)
        name = self.relative(topic)
        if message is None or name not in TOPIC_TYPES:
            return
        self._entries[name].append((receive_ns, *self._extract(name, message)))

    def add_all(self, events: Iterable[tuple[str, int, Any]]) -> RunMetrics:
        """Add ``(topic, receive_ns, message)`` events; return self."""
        for topic, receive_ns, message in events:
            self.add(topic, receive_ns, message)
        return self

    @property
    def messages(self) -> int:
        """Messages added so far, all topics."""
        return sum(self._topics.values())

    @staticmethod
    def _extract(name: str, message: Any) -> tuple:
        """Keep what the section of ``name`` needs (not the message: images are big)."""
        if name == 'image_raw':
            return (stamp_ns(message.header.stamp),)
        if name == 'people':
            return (
                stamp_ns(message.header.stamp),
                len(message.people),
                str(message.offload_mode),
                str(message.model_name),
                bool(message.model_is_trained),
            )
        if name == 'link_state':
            return (
                bool(message.connected),
                getattr(message, 'rtt_s', None),
                getattr(message, 'uplink_bandwidth_bps', None),
                getattr(message, 'downlink_bandwidth_bps', None),
            )
        if name == 'tracks':
            ids = tuple(int(person.track_id) for person in message.people if person.track_id)
            return stamp_ns(message.header.stamp), ids
        if name == 'target':
            return (stamp_ns(message.header.stamp),)
        if name == 'cmd_vel':
            linear, angular = message.linear, message.angular
            components = (linear.x, linear.y, linear.z, angular.x, angular.y, angular.z)
            return float(linear.x), float(angular.z), all(c == 0.0 for c in components)
        if name == 'follower/state':
            return (str(message.data),)
        if name == 'accumo/decision':
            index = int(message.offloaded_task_index)
            names = list(message.task_names)
            if index < 0:
                task = None
            else:
                task = str(names[index]) if index < len(names) else f'#{index}'
            return task, float(message.solve_time_s)
        return (bool(message.data),)  # estop

    # -- result -----------------------------------------------------------------------------

    def result(self) -> dict[str, Any]:
        """Return the metrics (rounded, deterministic key order, JSON-serialisable)."""
        first, last = self._first_ns, self._last_ns
        metrics: dict[str, Any] = {
            'format': FORMAT,
            'run': {
                'messages': self.messages,
                'duration_s': (last - first) * 1e-9 if first is not None else 0.0,
                'topics': dict(sorted(self._topics.items())),
            },
        }
        for name in TOPIC_TYPES:
            section = name.replace('/', '_')
            entries = _by_time(self._entries[name])
            if entries:
                metrics[section] = getattr(self, '_' + section)(entries)
        return round_value(metrics)

    @staticmethod
    def _image_raw(entries: list[tuple]) -> dict[str, Any]:
        return {'frames': len(entries), 'fps': _rate(len(entries), entries[0][0], entries[-1][0])}

    def _people(self, entries: list[tuple]) -> dict[str, Any]:
        latencies = [receive - stamp for receive, stamp, *_ in entries]
        published: dict[int, int] = {}
        for receive, stamp in _by_time(self._entries['image_raw']):
            published.setdefault(stamp, receive)
        from_image = [
            receive - published[stamp] for receive, stamp, *_ in entries if stamp in published
        ]
        counts = [entry[2] for entry in entries]
        return {
            'frames': len(entries),
            'fps': _rate(len(entries), entries[0][0], entries[-1][0]),
            'latency_ms': _stats(latencies, ('mean', 'p50', 'p90', 'p99', 'max'), 1e-6),
            'latency_from_image_ms': _stats(
                from_image, ('mean', 'p50', 'p90', 'p99', 'max'), 1e-6
            ),
            'people_per_frame': {'mean': float(np.mean(counts)), 'max': max(counts)},
            'offload_modes': dict(sorted(Counter(entry[3] for entry in entries).items())),
            'models': dict(sorted(Counter(entry[4] for entry in entries).items())),
            'untrained_frames': sum(1 for entry in entries if not entry[5]),
        }

    @staticmethod
    def _link_state(entries: list[tuple]) -> dict[str, Any]:
        connected = [entry[1] for entry in entries]
        result: dict[str, Any] = {
            'samples': len(entries),
            'connected_fraction': _fraction(sum(connected), len(connected)),
            'disconnections': sum(1 for a, b in pairwise(connected) if a and not b),
        }
        for index, key, keys, scale in (
            (2, 'rtt_ms', ('mean', 'p50', 'p90', 'max'), 1e3),
            (3, 'uplink_mbps', ('mean', 'min'), 1e-6),
            (4, 'downlink_mbps', ('mean', 'min'), 1e-6),
        ):
            if any(entry[index] is None for entry in entries):
                continue  # a message type without that field
            values = [
                float(entry[index])
                for entry in entries
                if entry[1] and math.isfinite(float(entry[index]))
            ]
            result[key] = _stats(values, keys, scale)
        return result

    @staticmethod
    def _tracks(entries: list[tuple]) -> dict[str, Any]:
        spans: dict[int, list[int]] = {}
        for _, stamp, ids in entries:
            for track_id in ids:
                span = spans.setdefault(track_id, [stamp, stamp])
                span[0], span[1] = min(span[0], stamp), max(span[1], stamp)
        lifetimes = [(end - start) * 1e-9 for start, end in spans.values()]
        return {
            'frames': len(entries),
            'frames_with_tracks': sum(1 for entry in entries if entry[2]),
            'distinct_tracks': len(spans),
            'mean_lifetime_s': float(np.mean(lifetimes)) if lifetimes else None,
            'max_lifetime_s': max(lifetimes) if lifetimes else None,
        }

    @staticmethod
    def _target(entries: list[tuple]) -> dict[str, Any]:
        stamps = sorted(entry[1] for entry in entries)
        gaps = [(b - a) * 1e-9 for a, b in pairwise(stamps)]
        return {
            'messages': len(entries),
            'gaps': sum(1 for gap in gaps if gap > TARGET_GAP_S),
            'longest_gap_s': max(gaps) if gaps else None,
        }

    @staticmethod
    def _cmd_vel(entries: list[tuple]) -> dict[str, Any]:
        return {
            'commands': len(entries),
            'rate_hz': _rate(len(entries), entries[0][0], entries[-1][0]),
            'mean_abs_linear_x': float(np.mean([abs(entry[1]) for entry in entries])),
            'max_linear_x': max(entry[1] for entry in entries),
            'max_abs_angular_z': max(abs(entry[2]) for entry in entries),
            'zero_fraction': _fraction(sum(1 for entry in entries if entry[3]), len(entries)),
        }

    def _follower_state(self, entries: list[tuple]) -> dict[str, Any]:
        durations: Counter[str] = Counter()
        ends = [entry[0] for entry in entries[1:]] + [self._last_ns]
        for (start, state), end in zip(entries, ends, strict=True):
            durations[state] += (end - start) * 1e-9
        states = [entry[1] for entry in entries]
        return {
            'messages': len(entries),
            'transitions': sum(1 for a, b in pairwise(states) if a != b),
            'durations_s': dict(sorted(durations.items())),
            'final_state': states[-1],
        }

    @staticmethod
    def _accumo_decision(entries: list[tuple]) -> dict[str, Any]:
        tasks = Counter(entry[1] for entry in entries if entry[1] is not None)
        return {
            'decisions': len(entries),
            'offloads': dict(sorted(tasks.items())),
            'no_offload_fraction': _fraction(len(entries) - sum(tasks.values()), len(entries)),
            'mean_solve_time_ms': float(np.mean([entry[2] for entry in entries])) * 1e3,
        }

    @staticmethod
    def _estop(entries: list[tuple]) -> dict[str, Any]:
        pressed = [entry[1] for entry in entries]
        return {
            'messages': len(entries),
            'presses': int(pressed[0]) + sum(1 for a, b in pairwise(pressed) if b and not a),
            'pressed_at_end': pressed[-1],
        }

    # -- time series for plots --------------------------------------------------------------

    def series(self) -> dict[str, tuple[list[float], ...]]:
        """Return time series (seconds since the run start) for :func:`plot`."""
        start = self._first_ns or 0

        def seconds(ns: int) -> float:
            return (ns - start) * 1e-9

        people = _by_time(self._entries['people'])
        link = _by_time(self._entries['link_state'])
        commands = _by_time(self._entries['cmd_vel'])
        return {
            'latency_ms': (
                [seconds(e[0]) for e in people],
                [(e[0] - e[1]) * 1e-6 for e in people],
            ),
            'people_receive_s': ([seconds(e[0]) for e in people],),
            'link_connected': ([seconds(e[0]) for e in link], [float(e[1]) for e in link]),
            'cmd_vel': (
                [seconds(e[0]) for e in commands],
                [e[1] for e in commands],
                [e[2] for e in commands],
            ),
        }


# -- writers --------------------------------------------------------------------------------


def to_json(metrics: dict[str, Any]) -> str:
    """Return the metrics as the text of a metrics file (indented, newline-terminated)."""
    return json.dumps(metrics, indent=2, allow_nan=False) + '\n'


def write_json(metrics: dict[str, Any], path: Path | str) -> Path:
    """Write ``metrics`` as JSON to ``path``; return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_json(metrics))
    return path


def flatten(metrics: dict[str, Any], prefix: str = '') -> dict[str, Any]:
    """Return nested ``metrics`` as one level, keys joined with '.'."""
    flat: dict[str, Any] = {}
    for key, value in metrics.items():
        name = f'{prefix}{key}'
        if isinstance(value, dict) and value:
            flat.update(flatten(value, name + '.'))
        else:
            flat[name] = value
    return flat


def write_csv(metrics: dict[str, Any], path: Path | str) -> Path:
    """Write the flattened ``metrics`` as ``key,value`` rows to ``path``; return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open('w', newline='') as file:
        writer = csv.writer(file, lineterminator='\n')
        writer.writerow(['key', 'value'])
        for key, value in flatten(metrics).items():
            writer.writerow([key, '' if value is None else value])
    return path


def differences(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """Return one line per flattened key whose value differs (or exists on one side only)."""
    left, right = flatten(expected), flatten(actual)
    missing = object()
    lines = []
    for key in sorted(left.keys() | right.keys()):
        a, b = left.get(key, missing), right.get(key, missing)
        if a != b or type(a) is not type(b):
            shown_a = '(absent)' if a is missing else json.dumps(a)
            shown_b = '(absent)' if b is missing else json.dumps(b)
            lines.append(f'{key}: expected {shown_a}, got {shown_b}')
    return lines


def plot(run: RunMetrics, path: Path | str, *, title: str = '') -> Path:
    """Plot latency, result rate, link connectivity and cmd_vel over time to a PNG."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    series = run.series()
    figure, axes = plt.subplots(4, 1, figsize=(10, 10), sharex=True)
    try:
        times, latency = series['latency_ms']
        _panel(axes[0], 'end-to-end latency (ms)', [(times, latency, '.', 'people')])
        (receive,) = series['people_receive_s']
        if receive:
            bins = np.arange(0.0, math.floor(max(receive)) + 2.0)
            counts, edges = np.histogram(receive, bins=bins)
            # The last count repeated: the step of the last second is drawn to its end.
            steps = [*counts, counts[-1]]
            lines = [(list(edges), steps, 'steps-post', 'frames per 1 s')]
        else:
            lines = []
        _panel(axes[1], 'people results (FPS)', lines)
        times, connected = series['link_connected']
        _panel(axes[2], 'link connected', [(times, connected, 'steps-post', 'connected')])
        axes[2].set_ylim(-0.1, 1.1)
        times, linear, angular = series['cmd_vel']
        _panel(
            axes[3],
            'cmd_vel',
            [(times, linear, 'steps-post', 'linear.x (m/s)'),
             (times, angular, 'steps-post', 'angular.z (rad/s)')],
        )  # fmt: skip
        axes[3].set_xlabel('time since the run start (s)')
        if title:
            figure.suptitle(title)
        figure.tight_layout()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, dpi=80)
    finally:
        plt.close(figure)
    return path


def _panel(axis: Any, label: str, lines: list[tuple[list, list, str, str]]) -> None:
    axis.set_ylabel(label)
    axis.grid(True, alpha=0.3)
    drawn = False
    for xs, ys, style, name in lines:
        if not len(xs):
            continue
        if style == 'steps-post':
            axis.step(xs, ys, where='post', label=name)
        else:
            axis.plot(xs, ys, style, markersize=3, label=name)
        drawn = True
    if drawn:
        axis.legend(loc='upper right', fontsize='small')
    else:
        axis.text(0.5, 0.5, 'no data', transform=axis.transAxes, ha='center', va='center')
