# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
r"""``bag_recorder``: write a run's topics to a rosbag2 bag where ``ros2 bag`` is missing.

The topics of a run (``RUN_TOPICS``): the sensor inputs, what the graph computes and what
the robot is told to do. With ROS 2 installed on the robot, record them with::

    ros2 bag record -s mcap -o run_$(date +%Y%m%d_%H%M%S) \
        /image_raw /camera_info /imu \
        /people /link_state /accumo/decision \
        /depth /odometry /tracks /target \
        /cmd_vel /follower/state /estop

====================  =========================================  ===========================
topic                 type                                       published by
====================  =========================================  ===========================
``/image_raw``        ``sensor_msgs/msg/Image``                  camera (replay input)
``/camera_info``      ``sensor_msgs/msg/CameraInfo``             camera (replay input)
``/imu``              ``sensor_msgs/msg/Imu``                    IMU (replay input)
``/people``           ``offload_interfaces/msg/PersonArray``     people detection
``/link_state``       ``offload_interfaces/msg/LinkState``       offload bridge
``/accumo/decision``  ``offload_interfaces/msg/TaskDecision``    AccuMO scheduler
``/depth``            ``sensor_msgs/msg/Image``                  depth estimation
``/odometry``         ``nav_msgs/msg/Odometry``                  odometry
``/tracks``           ``offload_interfaces/msg/PersonArray``     person tracker (odom frame)
``/target``           ``geometry_msgs/msg/PointStamped``         person tracker
``/cmd_vel``          ``geometry_msgs/msg/Twist``                follower
``/follower/state``   ``std_msgs/msg/String``                    follower (transient local)
``/estop``            ``std_msgs/msg/Bool``                      operator (transient local)
====================  =========================================  ===========================

``INPUT_TOPICS`` are the inputs alone, what a replay feeds back into the graph.

This node does the same without ``ros2 bag`` (the PyPI ROS wheels have none). Parameters:
``output_dir`` (a new bag folder; an existing path is refused), ``topics`` (entries
``name:package/msg/Type``; relative names resolve in the node's namespace; default: the
list above), ``storage`` (``mcap`` or ``sqlite3``), ``max_queue`` and ``metrics_file``.
It subscribes with ``raw=True``, so messages are written as received, never re-serialized;
the log time of each message is its receive time on the node clock (``use_sim_time``
works). The callbacks only stamp and enqueue into a bounded drop-oldest queue; a writer
thread writes the bag. :meth:`BagRecorderNode.close` (also called by ``destroy_node``)
drains the queue and finalizes the bag; with ``metrics_file`` it then writes the run
metrics of exactly the messages written (JSON, and CSV next to it), computed through
:class:`RawMetricsFeed`, the path the bag evaluator takes too, so ``bag_evaluate BAG
--check METRICS`` reproduces the file.

Sensor topics (``image_raw``, ``camera_info``, ``imu``) are subscribed with the sensor-data
QoS (best effort, which also receives from reliable publishers), ``estop`` and
``follower/state`` reliable and transient local, the others reliable with depth 10.
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
from rclpy.logging import get_logger
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rclpy.serialization import deserialize_message
from rosbags.interfaces import Typestore
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from edge_offload.ros_node_main import run_node
from edge_offload.ros_params import ParamSpec, declare_parameters, parameter_values
from people_following.run_metrics import RunMetrics, write_csv, write_json

NODE_NAME = 'bag_recorder'

# (topic, type) of a run, in the order of the table above.
RUN_TOPICS: tuple[tuple[str, str], ...] = (
    ('/image_raw', 'sensor_msgs/msg/Image'),
    ('/camera_info', 'sensor_msgs/msg/CameraInfo'),
    ('/imu', 'sensor_msgs/msg/Imu'),
    ('/people', 'offload_interfaces/msg/PersonArray'),
    ('/link_state', 'offload_interfaces/msg/LinkState'),
    ('/accumo/decision', 'offload_interfaces/msg/TaskDecision'),
    ('/depth', 'sensor_msgs/msg/Image'),
    ('/odometry', 'nav_msgs/msg/Odometry'),
    ('/tracks', 'offload_interfaces/msg/PersonArray'),
    ('/target', 'geometry_msgs/msg/PointStamped'),
    ('/cmd_vel', 'geometry_msgs/msg/Twist'),
    ('/follower/state', 'std_msgs/msg/String'),
    ('/estop', 'std_msgs/msg/Bool'),
)
# The sensor inputs alone: what a replay publishes into the graph.
INPUT_TOPICS: tuple[tuple[str, str], ...] = RUN_TOPICS[:3]

SENSOR_TOPICS = frozenset(('image_raw', 'camera_info', 'imu'))
LATCHED_TOPICS = frozenset(('estop', 'follower/state'))
STORAGES = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}
# rclpy 9.1 (the PyPI wheels) is ROS 2 Kilted; its message definitions are the typestore's.
_TYPESTORE = Stores.ROS2_KILTED
_MSGTYPE = re.compile(r'^([A-Za-z][A-Za-z0-9_]*)/(?:msg/)?([A-Za-z][A-Za-z0-9_]*)$')
_PRIMITIVES = frozenset(
    'bool byte char float32 float64 int8 uint8 int16 uint16 int32 uint32 int64 uint64 '
    'string wstring'.split()
)

PARAMETERS = (
    ParamSpec('output_dir', '', 'New rosbag2 folder to write (required; never overwritten).'),
    ParamSpec(
        'topics',
        [f'{topic.lstrip("/")}:{msgtype}' for topic, msgtype in RUN_TOPICS],
        "Topics to record, 'name:package/msg/Type' each; relative names resolve in the "
        "node's namespace.",
    ),
    ParamSpec('storage', 'mcap', "Bag storage plugin: 'mcap' or 'sqlite3'."),
    ParamSpec(
        'max_queue',
        1000,
        'Messages waiting for the bag writer; beyond this the oldest is dropped (and counted).',
        1,
        1_000_000,
    ),
    ParamSpec(
        'metrics_file',
        '',
        "Run metrics JSON written when the bag is closed (and a CSV next to it); '' = none.",
    ),
    ParamSpec(
        'reliable_sensor_qos',
        False,
        'Record image_raw, camera_info and imu reliably (replays of files and bags, where the '
        'source publishes reliably); default: the sensor-data QoS, as the graph subscribes.',
    ),
)


# -- message types --------------------------------------------------------------------------


def normalize_msgtype(msgtype: str) -> str:
    """Return ``package/msg/Type`` for ``package/msg/Type`` or ``package/Type``."""
    match = _MSGTYPE.match(msgtype.strip())
    if match is None:
        raise ValueError(f'{msgtype!r} is not a message type (expected package/msg/Type)')
    return f'{match[1]}/msg/{match[2]}'


def parse_topic_spec(spec: str) -> tuple[str, str]:
    """Return ``(topic, package/msg/Type)`` of a ``'topic:package/msg/Type'`` entry."""
    topic, separator, msgtype = spec.partition(':')
    topic = topic.strip()
    if not separator or not topic or not msgtype.strip():
        raise ValueError(f"topic entry {spec!r} is not 'name:package/msg/Type'")
    try:
        return topic, normalize_msgtype(msgtype)
    except ValueError as error:
        raise ValueError(f'topic entry {spec!r}: {error}') from None


def message_class(msgtype: str) -> type:
    """Import and return the rclpy message class of ``package/msg/Type``."""
    package, _, name = normalize_msgtype(msgtype).split('/')
    try:
        return getattr(importlib.import_module(f'{package}.msg'), name)
    except (ImportError, AttributeError):
        raise ValueError(
            f'message type {msgtype} cannot be imported (is its package built and sourced?)'
        ) from None


def _referenced_types(package: str, definition: str) -> set[str]:
    """Return the message types the fields of a ``.msg`` definition refer to."""
    types = set()
    for line in definition.splitlines():
        tokens = line.split('#', 1)[0].split()
        if len(tokens) < 2:
            continue
        base = re.split(r'[\[<]', tokens[0], maxsplit=1)[0]
        if base in _PRIMITIVES or '=' in tokens[1]:
            continue
        types.add(normalize_msgtype(base if '/' in base else f'{package}/{base}'))
    return types


def bag_typestore(msgtypes: Iterable[str]) -> Typestore:
    """Return a rosbags typestore that defines ``msgtypes`` (for the bag's connections).

    Standard types come from the ROS 2 distribution's store; the others (e.g.
    ``offload_interfaces``) from the ``.msg`` files their packages install, with the
    packages those refer to.
    """
    typestore = get_typestore(_TYPESTORE)
    pending = [normalize_msgtype(msgtype) for msgtype in msgtypes]
    loaded: set[str] = set()
    while pending:
        msgtype = pending.pop()
        if msgtype in typestore.types:
            continue
        package = msgtype.split('/')[0]
        if package in loaded:
            raise ValueError(f'package {package} installs no definition of {msgtype}')
        loaded.add(package)
        try:
            folder = Path(get_package_share_directory(package)) / 'msg'
        except PackageNotFoundError:
            raise ValueError(f'no definition of {msgtype}: package {package} not found') from None
        for path in sorted(folder.glob('*.msg')):
            definition = path.read_text()
            typestore.register(get_types_from_msg(definition, f'{package}/msg/{path.stem}'))
            pending.extend(_referenced_types(package, definition))
    return typestore


class RawMetricsFeed:
    """Feed serialized (CDR) messages to a :class:`RunMetrics`.

    The one decoding path of the recorder and the evaluator: messages of topics that
    ``metrics`` analyses are deserialized with rclpy into the class of their type name;
    the others are only counted. A type that cannot be imported, or is not the type a
    section expects, is counted only, with one warning.
    """

    def __init__(self, metrics: RunMetrics, warn: Callable[[str], None]) -> None:
        self.metrics = metrics
        self._warn = warn
        self._classes: dict[str, type | None] = {}
        self._warned: set[tuple[str, str]] = set()

    def add(self, topic: str, msgtype: str, receive_ns: int, raw: bytes) -> None:
        """Add one message as received (or logged) at ``receive_ns``."""
        expected = self.metrics.expected_type(topic)
        message_type = self._class(topic, msgtype) if expected is not None else None
        if expected is not None and message_type is not None and msgtype != expected:
            self._warn_once(topic, msgtype, f'{topic} is {msgtype}, not {expected}: not analysed')
            message_type = None
        message = deserialize_message(raw, message_type) if message_type is not None else None
        self.metrics.add(topic, receive_ns, message)

    def _class(self, topic: str, msgtype: str) -> type | None:
        if msgtype not in self._classes:
            try:
                self._classes[msgtype] = message_class(msgtype)
            except ValueError as error:
                self._classes[msgtype] = None
                self._warn_once(topic, msgtype, f'{topic} skipped: {error}')
        return self._classes[msgtype]

    def _warn_once(self, topic: str, msgtype: str, text: str) -> None:
        if (topic, msgtype) not in self._warned:
            self._warned.add((topic, msgtype))
            self._warn(text)


def _describe(error: BaseException) -> str:
    return f'{type(error).__name__}: {error}'


def _qos(topic: str, reliable_sensors: bool = False) -> QoSProfile:
    name = topic.lstrip('/')
    if name in SENSOR_TOPICS:
        if reliable_sensors:
            # Deeper than the graph's queues: the writer thread, not DDS, absorbs bursts.
            return QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        return qos_profile_sensor_data
    durability = DurabilityPolicy.TRANSIENT_LOCAL if name in LATCHED_TOPICS else None
    profile = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    if durability is not None:
        profile.durability = durability
    return profile


# -- node -----------------------------------------------------------------------------------


class BagRecorderNode(Node):
    """Record topics to a rosbag2 bag (raw CDR, writer thread) and optionally run metrics."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        declare_parameters(self, PARAMETERS)
        config = parameter_values(self, PARAMETERS)
        output = config['output_dir'].strip()
        if not output:
            raise ValueError('output_dir is required: the folder of the new bag')
        self.path = Path(output).expanduser()
        if self.path.exists():
            raise ValueError(f'output_dir {self.path} exists: refusing to overwrite a bag')
        if config['storage'] not in STORAGES:
            raise ValueError(f'storage {config["storage"]!r} is not one of {sorted(STORAGES)}')
        specs = [parse_topic_spec(spec) for spec in config['topics']]
        if not specs:
            raise ValueError('topics is empty: nothing to record')
        classes = {msgtype: message_class(msgtype) for _, msgtype in specs}
        typestore = bag_typestore(classes)
        metrics_file = config['metrics_file'].strip()
        self.metrics_path = Path(metrics_file).expanduser() if metrics_file else None
        self._max_queue = config['max_queue']

        self.received = 0
        self.written = 0
        self.dropped = 0
        self.error: str | None = None
        self._queue: deque[tuple[int, int, bytes]] = deque()
        self._condition = threading.Condition()
        self._closing = False
        self._closed = False
        # Set by close(timeout_s): messages still queued after it are dropped and counted.
        self._close_deadline: float | None = None
        self._result: dict[str, Any] = {}
        self._feed = RawMetricsFeed(RunMetrics(self.get_namespace()), self._warn)

        # (resolved topic, type, bag connection once the writer thread has opened the bag)
        self._topics: list[tuple[str, str, Any]] = []
        for topic, msgtype in specs:
            resolved = self.resolve_topic_name(topic)
            if any(resolved == known for known, _, _ in self._topics):
                raise ValueError(f'topic {resolved} is listed twice in topics')
            self._topics.append((resolved, msgtype, None))

        # The writer thread owns the bag from opening to closing (sqlite3 objects must stay
        # in the thread that made them); it reports here whether the bag could be opened.
        self._opened = threading.Event()
        self._thread = threading.Thread(
            target=self._write,
            args=(STORAGES[config['storage']], typestore),
            name='bag_writer',
            daemon=True,
        )
        self._thread.start()
        self._opened.wait()
        if self.error is not None:
            self._thread.join()
            raise ValueError(f'cannot create bag {self.path}: {self.error}')
        for index, (topic, msgtype) in enumerate(specs):
            self.create_subscription(
                classes[msgtype],
                topic,
                functools.partial(self._enqueue, index),
                _qos(topic, config['reliable_sensor_qos']),
                raw=True,
            )
        self._recording = True
        self.get_logger().info(
            f'recording {len(self._topics)} topics to {self.path} ({config["storage"]})'
            + (f'; run metrics to {self.metrics_path}' if self.metrics_path else '')
        )

    def _warn(self, text: str) -> None:
        self.get_logger().warning(text)

    def _enqueue(self, index: int, raw: bytes) -> None:
        receive_ns = self.get_clock().now().nanoseconds
        dropped = False
        with self._condition:
            if self._closing:
                return
            self.received += 1
            if len(self._queue) >= self._max_queue:
                self._queue.popleft()
                self.dropped += 1
                dropped = True
            self._queue.append((index, receive_ns, raw))
            self._condition.notify()
        if dropped:
            self.get_logger().warning(
                f'bag writer is behind: oldest message dropped ({self.dropped} so far)',
                throttle_duration_sec=5.0,
            )

    def _write(self, storage: StoragePlugin, typestore: Typestore) -> None:
        writer = Writer(self.path, version=9, storage_plugin=storage)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            writer.open()
        except Exception as error:  # noqa: BLE001 - rosbags raises several types
            self.error = _describe(error)
            self._opened.set()
            return
        try:
            self._topics = [
                (topic, msgtype, writer.add_connection(topic, msgtype, typestore=typestore))
                for topic, msgtype, _ in self._topics
            ]
        except Exception as error:  # noqa: BLE001
            self.error = _describe(error)
        self._opened.set()
        try:
            if self.error is None:
                self._write_queued(writer)
        finally:
            try:
                writer.close()
            except Exception as error:  # noqa: BLE001 - reported by close()
                self.error = self.error or _describe(error)

    def _write_queued(self, writer: Writer) -> None:
        while True:
            with self._condition:
                while not self._queue and not self._closing:
                    self._condition.wait()
                if not self._queue:
                    return
                batch = list(self._queue)
                self._queue.clear()
            try:
                for position, (index, receive_ns, raw) in enumerate(batch):
                    deadline = self._close_deadline
                    if deadline is not None and time.monotonic() > deadline:
                        with self._condition:
                            self.dropped += len(batch) - position + len(self._queue)
                            self._queue.clear()
                        return
                    topic, msgtype, connection = self._topics[index]
                    writer.write(connection, receive_ns, raw)
                    self._feed.add(topic, msgtype, receive_ns, raw)
                    self.written += 1
            except Exception as error:  # noqa: BLE001 - any failure stops the recording
                self.error = _describe(error)
                self.get_logger().error(f'bag writer failed, recording stopped: {self.error}')
                with self._condition:
                    self._closing = True
                    self._queue.clear()
                return

    def close(self, timeout_s: float | None = None) -> dict[str, Any]:
        """Stop recording, write what is queued, finalize the bag; return the run metrics.

        With ``timeout_s``, messages still queued after that long are dropped (and counted),
        so the bag is finalized in time. With ``metrics_file`` the metrics are written there
        (JSON) and next to it (CSV). Idempotent: later calls return the same metrics.
        """
        with self._condition:
            if self._closed:
                return self._result
            self._closed = self._closing = True
            if timeout_s is not None:
                self._close_deadline = time.monotonic() + timeout_s
            self._condition.notify_all()
        self._thread.join()  # the thread finalizes the bag
        # After shutdown (Ctrl-C) /rosout is gone; a logger of another name (a child) only
        # prints, where the node's own would also complain that it cannot publish.
        logger = self.get_logger()
        if not self.context.ok():
            logger = get_logger(f'{logger.name}.bag')
        logger.info(
            f'bag {self.path}: {self.written} messages written, {self.dropped} dropped'
            + (f'; writer error: {self.error}' if self.error else '')
        )
        self._result = self._feed.metrics.result()
        if self.metrics_path is not None:
            write_json(self._result, self.metrics_path)
            write_csv(self._result, self.metrics_path.with_suffix('.csv'))
            logger.info(f'run metrics written to {self.metrics_path}')
        return self._result

    def destroy_node(self) -> None:
        """Close the bag (see :meth:`close`), then destroy the node."""
        if getattr(self, '_recording', False):  # not after a rejected configuration
            self.close()
        super().destroy_node()


# A stopped recorder finalizes its bag within this (ros_node_main.SHUTDOWN_BUDGET_S).
_CLOSE_ON_SIGNAL_S = 0.8


def main(args: list[str] | None = None) -> int:
    """Record until shutdown; exit code 1 on a bad configuration."""
    return run_node(
        BagRecorderNode,
        NODE_NAME,
        args,
        release=lambda node: node.close(timeout_s=_CLOSE_ON_SIGNAL_S),
    )


if __name__ == '__main__':
    sys.exit(main())
