# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``sensor_source``: publish camera frames, calibration and IMU samples from one source.

The source (``source`` parameter: a V4L2 camera, a video file, an image folder, a rosbag2
bag or a synthetic pattern; see :mod:`people_following.sensor_sources`) is read by a reader thread
that decodes, paces and publishes, so the executor is never blocked:

* ``image_raw`` (sensor_msgs/Image) and ``camera_info`` (sensor_msgs/CameraInfo, the same
  header) for every frame; ``imu`` (sensor_msgs/Imu) when the source has IMU samples. All
  three use the sensor-data QoS profile.
* Stamps: a camera's are the host clock at grab, a bag's its recorded header stamps. A
  video file, image folder or the synthetic pattern has no capture clock: with
  ``start_time_s`` 0 (the default) each frame (image_raw and camera_info) and each
  synthetic IMU sample is stamped with the wall clock when pacing releases it, taken right
  before it is published, so ``now - header.stamp`` downstream is the latency a robot's
  camera would see (not the wait for subscribers or a pacing restart). With
  ``start_time_s`` > 0 the stamps are deterministic instead: ``start_time_s`` plus the
  sample's position in the source (reproducible replays). Stamps are strictly increasing.
* ``rate_mode``: ``realtime`` follows the source's timeline, ``fixed`` publishes frames at
  ``rate_hz`` (IMU samples go out as they come between frames, so with release stamps
  they bunch after each frame: use ``realtime`` where IMU timing matters), ``max`` as fast
  as the source reads (with ``reliable_sensor_qos``, as fast as subscribers acknowledge),
  ``every_frame`` publishes every frame as fast as the graph processes them: after a frame
  it waits for that frame's result on ``backpressure_topic`` (a PersonArray with the
  frame's header stamp) before the next, with ``max_frames_ahead`` frames outstanding at
  most. A frame without a result after ``backpressure_timeout_s`` is counted as
  unanswered and the source goes on. ``every_frame`` publishes reliably whatever
  ``reliable_sensor_qos`` says (its consumers need reliable QoS too, or a lost frame costs
  a timeout). ``rate_mode``, ``rate_hz`` and ``paused`` can change at run time; the other
  parameters are read-only.
* ``camera_info`` comes from ``camera_info_url``, else from the bag's CameraInfo topic,
  else from a default pinhole model sized to the frames (with a warning).
* ``loop`` replays a video, image folder or bag again and again with stamps that go on
  increasing; ``max_frames`` ends the run after that many frames.
* For replays into a graph that is still starting (tests, pipelines): publishing waits
  until image_raw has ``wait_for_subscribers`` subscribers and while ``paused`` is true.

At the end of a source that does not loop (or after ``max_frames``) the node logs a summary
(frames published, duration, rate; with ``every_frame`` also how many frames had no
result) and ``main`` returns 0. A source that cannot be opened, an invalid parameter or a read
error mid-stream gives one error line and exit code 1.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import rclpy
from rcl_interfaces.msg import SetParametersResult
from rclpy.duration import Duration as RclpyDuration
from rclpy.exceptions import ParameterException
from rclpy.executors import SingleThreadedExecutor
from rclpy.logging import get_logger
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.publisher import Publisher
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import CameraInfo, Image, Imu
from std_msgs.msg import Header

from edge_offload.image_convert import ImageFormatError, cv2_to_imgmsg
from edge_offload.ros_logging import forward_python_logging
from edge_offload.ros_node_main import (
    StopRequest,
    finish_process,
    shut_down,
    spin_until_stopped,
)
from edge_offload.ros_params import ParamSpec, declare_parameters, parameter_values
from edge_offload.sensor_qos import RELIABLE_SENSOR_QOS_DESCRIPTION, sensor_qos
from edge_offload.stamps import stamp_ns
from offload_interfaces.msg import PersonArray
from people_following.camera_info_file import (
    CameraCalibration,
    CameraInfoError,
    default_pinhole,
    load_camera_info,
    to_camera_info_msg,
)
from people_following.sensor_sources import (
    OUTPUT_ENCODINGS,
    SOURCE_KINDS,
    Frame,
    ImuSample,
    Sample,
    SensorSource,
    SourceConfig,
    SourceError,
    convert_encoding,
    open_source,
)

NODE_NAME = 'sensor_source'
RATE_MODES = ('realtime', 'fixed', 'max', 'every_frame')
# Sources whose stamps are made up (no capture clock): stamped when released, unless
# start_time_s asks for deterministic ones.
RELEASE_STAMPED_SOURCES = ('video', 'images', 'synthetic')
PARAMETERS = (
    ParamSpec(
        'source', 'synthetic', f'Where frames come from: {", ".join(SOURCE_KINDS)}', read_only=True
    ),
    ParamSpec(
        'uri',
        '',
        'Camera index or /dev/videoN, video file, image folder, or rosbag2 folder/.mcap/.db3; '
        "'asset:media/opencv/vtest.avi' names a file fetched by make setup",
        read_only=True,
    ),
    ParamSpec(
        'frame_id', 'camera_optical_frame', 'frame_id of image_raw and camera_info', read_only=True
    ),
    ParamSpec('imu_frame_id', 'imu_link', 'frame_id of imu', read_only=True),
    ParamSpec(
        'camera_info_url',
        '',
        'Calibration YAML (path, file:// or package:// URL); empty: the bag camera info or a '
        'default pinhole model',
        read_only=True,
    ),
    ParamSpec(
        'rate_mode',
        'realtime',
        "'realtime' follows the source's timeline, 'fixed' publishes frames at rate_hz, 'max' "
        "as fast as the source reads, 'every_frame' every frame as fast as the graph answers "
        'on backpressure_topic (lossless: implies reliable publishing)',
    ),
    ParamSpec('rate_hz', 30.0, "Frame rate of rate_mode 'fixed'", 0.01, 1000.0),
    ParamSpec(
        'loop',
        False,
        'Start a video, image folder or bag again at its end (stamps keep increasing)',
        read_only=True,
    ),
    ParamSpec(
        'output_encoding',
        'passthrough',
        "Encoding of image_raw: 'passthrough' (as the source gives it), 'rgb8' or 'bgr8'",
        read_only=True,
    ),
    ParamSpec(
        'bag_image_topic',
        '',
        'Image or CompressedImage topic of the bag; empty: its only image topic',
        read_only=True,
    ),
    ParamSpec(
        'bag_camera_info_topic',
        '',
        'CameraInfo topic of the bag, published with each frame; empty: none',
        read_only=True,
    ),
    ParamSpec('bag_imu_topic', '', 'Imu topic of the bag; empty: none', read_only=True),
    ParamSpec('width', 640, 'Width requested from the camera; synthetic width, px', 8, 8192, True),
    ParamSpec('height', 480, 'Height requested from the camera; synthetic height', 8, 8192, True),
    ParamSpec(
        'fps',
        30.0,
        'Rate requested from the camera; rate of the synthetic pattern and image folder stamps',
        0.01,
        1000.0,
        True,
    ),
    ParamSpec('imu_rate_hz', 200.0, 'Synthetic IMU rate; 0: no IMU', 0.0, 10000.0, True),
    ParamSpec(
        'hfov_deg',
        60.0,
        'Horizontal field of view of the default pinhole model and the synthetic motion',
        1.0,
        179.0,
        True,
    ),
    ParamSpec(
        'start_time_s',
        0.0,
        'Stamp of the first video, image folder or synthetic frame, s since the epoch, the '
        'others stamped by their position (deterministic); 0: each frame and synthetic IMU '
        'sample is stamped with the wall clock when it is published',
        0.0,
        None,
        True,
    ),
    ParamSpec('reliable_sensor_qos', False, RELIABLE_SENSOR_QOS_DESCRIPTION, read_only=True),
    ParamSpec('max_frames', 0, 'Stop after this many frames; 0: all', 0, 2**31, True),
    ParamSpec(
        'paused',
        False,
        'Hold publishing while true; set it to false to start or resume (a replay can start '
        'paused until its listeners are ready)',
    ),
    ParamSpec(
        'wait_for_subscribers',
        0,
        'Hold publishing until image_raw has this many subscribers (replays into a graph '
        'that is starting); 0: publish at once',
        0,
        1000,
        True,
    ),
    ParamSpec(
        'backpressure_topic',
        'people',
        "rate_mode 'every_frame': results topic (offload_interfaces/PersonArray, reliable); "
        "a result's header stamp is that of the frame it answers",
        read_only=True,
    ),
    ParamSpec(
        'max_frames_ahead',
        1,
        "rate_mode 'every_frame': frames published whose result has not come yet; at most the "
        "sensor QoS depth (5), and people_detection's queue_size + max_in_flight, or frames "
        'are dropped',
        1,
        5,
        True,
    ),
    ParamSpec(
        'backpressure_timeout_s',
        10.0,
        "rate_mode 'every_frame': a frame without a result this long is counted as unanswered "
        'and the source goes on',
        0.01,
        3600.0,
        True,
    ),
)
# A realtime replay this far behind its stamps (or stamps going back) follows from there.
_MAX_LAG_S = 1.0
_POLL_S = 0.02
_JOIN_TIMEOUT_S = 0.5
_DISCOVERY_SETTLE_S = 0.5
_ACK_TIMEOUT_S = 5.0
_ACK_POLL_S = 0.002
_NO_WAIT = RclpyDuration(seconds=0)
_UNANSWERED_LOG_PERIOD_S = 5.0
# The results topic of rate_mode every_frame (people_detection publishes with depth 10).
_RESULTS_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


def await_acknowledged(
    publishers: list[Publisher], timeout_s: float, stop: threading.Event
) -> list[Publisher]:
    """Wait until every subscriber acknowledged each publisher's messages; return the rest.

    Returns at ``timeout_s`` or when ``stop`` is set, with the publishers still waiting.
    rclpy's ``wait_for_all_acked`` holds the GIL while it waits, so a blocking call
    freezes every thread of the process (a graph runner's nodes stalled for the 3 s
    until Fast DDS's next heartbeat brought a small message's acknowledgement). This
    polls without waiting and sleeps between polls with the GIL released.
    """
    deadline = time.monotonic() + timeout_s
    waiting = list(publishers)
    while waiting:
        waiting = [p for p in waiting if not p.wait_for_all_acked(_NO_WAIT)]
        if not waiting or time.monotonic() >= deadline or stop.wait(_ACK_POLL_S):
            break
    return waiting


class ConfigError(ValueError):
    """A parameter value the node cannot work with."""


def _source_config(values: dict[str, Any]) -> SourceConfig:
    """Return the source's configuration from the node's parameter values."""
    start_time_s = values['start_time_s']
    return SourceConfig(
        kind=values['source'],
        uri=values['uri'],
        width=values['width'],
        height=values['height'],
        fps=values['fps'],
        start_time_ns=round(start_time_s * 1e9) if start_time_s > 0 else None,
        image_topic=values['bag_image_topic'],
        camera_info_topic=values['bag_camera_info_topic'],
        imu_topic=values['bag_imu_topic'],
        imu_rate_hz=values['imu_rate_hz'],
        hfov_deg=values['hfov_deg'],
    )


def _validate(values: dict[str, Any]) -> None:
    for name, allowed in (
        ('source', SOURCE_KINDS),
        ('rate_mode', RATE_MODES),
        ('output_encoding', OUTPUT_ENCODINGS),
    ):
        if values[name] not in allowed:
            raise ConfigError(
                f'parameter {name} is {values[name]!r}; it must be one of {", ".join(allowed)}'
            )


def _header(stamp_ns: int, frame_id: str) -> Header:
    header = Header(frame_id=frame_id)
    header.stamp.sec, header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
    return header


class Backpressure:
    """Frames published in rate_mode every_frame whose result has not come (thread-safe).

    The reader thread adds each frame's stamp before publishing it and waits, before the
    next, until fewer than the window are outstanding; results (executor thread) remove
    them by stamp. A frame outstanding past the timeout is given up as unanswered.
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.answered = 0
        self.unanswered = 0
        self.last_answer_s: float | None = None
        self._condition = threading.Condition()
        # stamp (ns) -> monotonic deadline
        self._waiting: dict[int, float] = {}

    def add(self, stamp_ns: int) -> None:
        """Count a frame about to be published as waiting for its result."""
        with self._condition:
            self._waiting[stamp_ns] = time.monotonic() + self.timeout_s

    def answer(self, stamp_ns: int) -> bool:
        """Record the result for the frame stamped ``stamp_ns``; False if none waits for it."""
        with self._condition:
            if self._waiting.pop(stamp_ns, None) is None:
                return False
            self.answered += 1
            self.last_answer_s = time.monotonic()
            self._condition.notify_all()
            return True

    def outstanding(self) -> int:
        """Return how many frames wait for their result."""
        with self._condition:
            return len(self._waiting)

    def wait_until_at_most(self, limit: int, stop: threading.Event) -> int:
        """Wait until at most ``limit`` frames are outstanding (or ``stop``).

        Frames past their deadline are given up on the way; returns how many.
        """
        expired = 0
        with self._condition:
            while len(self._waiting) > limit and not stop.is_set():
                now = time.monotonic()
                late = [stamp for stamp, deadline in self._waiting.items() if deadline <= now]
                for stamp in late:
                    del self._waiting[stamp]
                expired += len(late)
                if late:
                    continue
                earliest = min(self._waiting.values())
                # Wakes on a result, at the earliest deadline, or to look at `stop`.
                self._condition.wait(min(earliest - now, _POLL_S * 5))
            self.unanswered += expired
        return expired


class SensorSourceNode(Node):
    """Publish a source's frames, calibration and IMU samples from a reader thread."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        self.finished = threading.Event()
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._source: SensorSource | None = None
        self._log_handler: logging.Handler | None = None
        try:
            self._set_up()
        except BaseException:
            self.destroy_node()
            raise

    def _set_up(self) -> None:
        declare_parameters(self, PARAMETERS)
        values = parameter_values(self, PARAMETERS)
        _validate(values)
        self._log_handler = forward_python_logging(self, 'people_following')
        self._frame_id = values['frame_id']
        self._imu_frame_id = values['imu_frame_id']
        self._output_encoding = values['output_encoding']
        self._hfov_deg = values['hfov_deg']
        self._loop = values['loop']
        self._max_frames = values['max_frames']
        self._wait_for_subscribers = values['wait_for_subscribers']
        self._rate_mode = values['rate_mode']
        self._rate_hz = values['rate_hz']
        self._paused = values['paused']
        self._file_info: CameraInfo | None = None
        self._file_calibration: CameraCalibration | None = None
        if values['camera_info_url']:
            self._file_calibration = load_camera_info(values['camera_info_url'])
            self._file_info = to_camera_info_msg(self._file_calibration, self._frame_id)
        start_time_s = values['start_time_s']
        # Made-up stamps become release times unless deterministic ones were asked for.
        self._release_stamps = values['source'] in RELEASE_STAMPED_SOURCES and start_time_s <= 0
        self._config = _source_config(values)
        self._source = open_source(self._config)
        self._log_start(values)

        # every_frame must not lose a frame: it publishes reliably whatever the parameter.
        self._reliable = values['reliable_sensor_qos'] or self._rate_mode == 'every_frame'
        if self._rate_mode == 'every_frame' and not values['reliable_sensor_qos']:
            self.get_logger().info(
                'rate_mode every_frame: publishing reliably (reliable_sensor_qos implied); '
                'subscribers that must answer every frame need reliable_sensor_qos too'
            )
        self._backpressure = Backpressure(values['backpressure_timeout_s'])
        self._backpressure_topic = values['backpressure_topic']
        self._max_frames_ahead = values['max_frames_ahead']
        self._results_subscription = None
        self._unanswered_logged_at = -math.inf
        qos = sensor_qos(self._reliable)
        self._image_publisher = self.create_publisher(Image, 'image_raw', qos)
        self._info_publisher = self.create_publisher(CameraInfo, 'camera_info', qos)
        self._imu_publisher = (
            self.create_publisher(Imu, 'imu', qos) if self._source.has_imu else None
        )
        if self._rate_mode == 'every_frame':
            self._subscribe_results()
        self.add_on_set_parameters_callback(self._check_parameters)
        self.add_post_set_parameters_callback(self._apply_parameters)

        self._reset_reader_state()
        # Wakes the executor when the reader thread ends, so main() returns at once.
        self._wake = self.create_guard_condition(lambda: None)
        self._thread = threading.Thread(target=self._run, name='sensor_source_reader', daemon=True)
        self._thread.start()

    def _reset_reader_state(self) -> None:
        """Set the pacing, counters and calibrations the reader thread owns."""
        self._pacing_key: tuple[str, float] | None = None
        self._anchor: tuple[float, int] | None = None
        self._next_frame_at: float | None = None
        self._frames = 0
        self._imu_samples = 0
        self._first_publish: float | None = None
        self._last_publish: float | None = None
        # Last stamp published per stream (release stamps are made strictly increasing).
        self._last_stamp_ns = {'frame': -1, 'imu': -1}
        self._default_info: CameraInfo | None = None
        self._bag_calibration: CameraCalibration | None = None
        self._bag_info: CameraInfo | None = None
        self._size_warned = False

    def _log_start(self, values: dict[str, Any]) -> None:
        assert self._source is not None  # noqa: S101 - opened by the caller
        rate = values['rate_mode'] + (
            f' at {values["rate_hz"]:g} Hz' if values['rate_mode'] == 'fixed' else ''
        )
        if values['rate_mode'] == 'every_frame':
            rate += (
                f' (the next frame after the result on {values["backpressure_topic"]}, '
                f'{values["max_frames_ahead"]} ahead at most, '
                f'{values["backpressure_timeout_s"]:g} s timeout)'
            )
        paused = '; paused until the paused parameter is set to false' if values['paused'] else ''
        self.get_logger().info(f'publishing {self._source.description}; rate {rate}{paused}')
        if self._file_calibration is not None:
            self.get_logger().info(f'camera_info from {values["camera_info_url"]}')
        elif values['source'] == 'bag' and values['bag_camera_info_topic']:
            self.get_logger().info(f'camera_info from bag topic {values["bag_camera_info_topic"]}')
        else:
            self.get_logger().warning(
                'camera_info_url is empty: publishing a default pinhole model (horizontal field '
                f'of view {self._hfov_deg:g} deg, no distortion) sized to the frames; set '
                'camera_info_url to a calibration file for real geometry'
            )

    # -- parameters ----------------------------------------------------------------------

    def _check_parameters(self, parameters: list[Parameter]) -> SetParametersResult:
        for parameter in parameters:
            if parameter.name == 'rate_mode' and parameter.value not in RATE_MODES:
                return SetParametersResult(
                    successful=False,
                    reason=f'rate_mode must be one of {", ".join(RATE_MODES)}',
                )
        return SetParametersResult(successful=True)

    def _apply_parameters(self, parameters: list[Parameter]) -> None:
        for parameter in parameters:
            if parameter.name == 'rate_mode':
                self._rate_mode = parameter.value
                if parameter.value == 'every_frame':
                    self._subscribe_results()
                    if not self._reliable:
                        self.get_logger().warning(
                            'rate_mode every_frame with best-effort publishers '
                            '(reliable_sensor_qos was false at start): a lost frame waits '
                            'backpressure_timeout_s for its result'
                        )
            elif parameter.name == 'rate_hz':
                self._rate_hz = parameter.value
            elif parameter.name == 'paused':
                self._paused = parameter.value
                self.get_logger().info('paused' if parameter.value else 'publishing')

    def _subscribe_results(self) -> None:
        if self._results_subscription is None:
            self._results_subscription = self.create_subscription(
                PersonArray, self._backpressure_topic, self._on_result, _RESULTS_QOS
            )

    def _on_result(self, message: PersonArray) -> None:
        self._backpressure.answer(stamp_ns(message.header.stamp))

    # -- reader thread -------------------------------------------------------------------

    def _run(self) -> None:
        samples = self._samples()
        reason = 'end of source'
        try:
            self._hold()
            self._await_subscribers()
            self._await_results_publisher()
            unacknowledged = 0  # images published since the last wait for acknowledgements
            for sample in samples:
                self._hold()
                if self._stop.is_set():
                    break
                self._pace(sample)
                if self._stop.is_set():
                    break
                if isinstance(sample, Frame):
                    if self._rate_mode == 'every_frame':
                        self._await_results(self._max_frames_ahead - 1)
                        if self._stop.is_set():
                            break
                    self._publish_frame(sample)
                    unacknowledged += 1
                    if (
                        self._reliable
                        and self._rate_mode == 'max'
                        and unacknowledged >= self._image_publisher.qos_profile.depth
                    ):
                        # A reliable writer keeps only `depth` samples: at full speed the
                        # next one would overwrite one not yet acknowledged. Waiting for
                        # the images' acknowledgements once its history is full makes a
                        # max-rate replay lossless. Not after every frame: a small image
                        # (like camera_info) is acknowledged only at the writer's next
                        # periodic heartbeat, 3 s by default in Fast DDS, so that cost a
                        # heartbeat a frame. The last wait covers camera_info.
                        self._await_acknowledgements(self._image_publisher)
                        unacknowledged = 0
                    if self._max_frames and self._frames >= self._max_frames:
                        reason = f'max_frames ({self._max_frames}) reached'
                        break
                else:
                    self._publish_imu(sample)
        except (SourceError, CameraInfoError, ImageFormatError) as error:
            self._fail(str(error))
        except Exception as error:  # noqa: BLE001 - reported as the node's one error line
            # Publishing fails once Ctrl-C has shut the context down: that is no error.
            if not self._stop.is_set() and self.context.ok():
                self._fail(f'reading the source failed: {type(error).__name__}: {error}')
        finally:
            samples.close()
            if self.error is None and not self._stop.is_set() and self.context.ok():
                self._await_acknowledgements()
                # The last frames' results (every_frame), each within its timeout.
                self._await_results(0)
                self.log_summary(reason)
            self.finished.set()
            try:
                self._wake.trigger()
            except Exception:  # noqa: BLE001, S110 - the node is already being destroyed
                pass

    def _fail(self, message: str) -> None:
        self.error = message
        self.get_logger().error(message)

    def _hold(self) -> None:
        if not self._paused:
            return
        while self._paused and not self._stop.is_set():
            self._stop.wait(_POLL_S)
        # Realtime pacing follows the stamps from here, not from before the pause.
        self._pacing_key = None

    def _await_acknowledgements(self, *publishers: Publisher) -> None:
        """Wait until every subscriber has acknowledged what ``publishers`` sent.

        Without arguments, all of the source's publishers: with reliable QoS the last
        frames may still be in flight when the source ends, and exiting now would drop
        them. Best-effort publishers count as acknowledged at once.
        """
        if not publishers:
            publishers = (self._image_publisher, self._info_publisher, self._imu_publisher)
        waiting = [publisher for publisher in publishers if publisher is not None]
        unacknowledged = await_acknowledged(waiting, _ACK_TIMEOUT_S, self._stop)
        if unacknowledged and not self._stop.is_set():
            self.get_logger().warning(
                f'{", ".join(p.topic_name for p in unacknowledged)} not acknowledged by '
                f'every subscriber within {_ACK_TIMEOUT_S} s: a reader may miss a message',
                throttle_duration_sec=5.0,
            )

    def _await_subscribers(self) -> None:
        wanted = self._wait_for_subscribers
        if not wanted:
            return
        # Images are what consumers need; camera_info and imu may have no listener at all.
        self.get_logger().info(f'waiting for {wanted} subscriber(s) on image_raw')
        while not self._stop.is_set() and self._image_publisher.get_subscription_count() < wanted:
            self._stop.wait(_POLL_S)
        # The subscriber matches this publisher a moment after this publisher matched it;
        # best-effort frames sent in between would be lost.
        self._stop.wait(_DISCOVERY_SETTLE_S)

    def _await_results_publisher(self) -> None:
        """every_frame: wait (at most the timeout) until the results topic has a publisher."""
        if self._rate_mode != 'every_frame' or self._results_subscription is None:
            return
        topic = self._results_subscription.topic_name
        if self.count_publishers(topic) > 0:
            return
        self.get_logger().info(f'waiting for a publisher of {topic} (rate_mode every_frame)')
        deadline = time.monotonic() + self._backpressure.timeout_s
        while not self._stop.is_set() and self.count_publishers(topic) == 0:
            if time.monotonic() > deadline:
                self.get_logger().warning(
                    f'no publisher of {topic} after {self._backpressure.timeout_s:g} s: '
                    'publishing anyway; frames without a result wait backpressure_timeout_s'
                )
                return
            self._stop.wait(_POLL_S)
        # As for subscribers: let it match this subscription before the first frame.
        self._stop.wait(_DISCOVERY_SETTLE_S)

    def _await_results(self, limit: int) -> None:
        """Wait until at most ``limit`` frames wait for their result (or they time out)."""
        expired = self._backpressure.wait_until_at_most(limit, self._stop)
        if not expired:
            return
        now = time.monotonic()
        if now - self._unanswered_logged_at >= _UNANSWERED_LOG_PERIOD_S:
            self._unanswered_logged_at = now
            self.get_logger().warning(
                f'no result on {self._backpressure_topic} within '
                f'{self._backpressure.timeout_s:g} s of a frame ({self._backpressure.unanswered} '
                'unanswered so far): going on with the next frame'
            )

    def _release_stamp(self, sample_stamp_ns: int, stream: str) -> int:
        """Return the stamp to publish a sample with; call it right before publishing.

        Made-up stamps (video, images, synthetic without start_time_s) are replaced by the
        wall clock now, the release time, kept strictly increasing per stream.
        """
        if not self._release_stamps:
            return sample_stamp_ns
        stamp_ns = max(time.time_ns(), self._last_stamp_ns[stream] + 1)
        self._last_stamp_ns[stream] = stamp_ns
        return stamp_ns

    def _samples(self) -> Iterator[Sample]:
        """Yield the source's samples; when looping, reopen it and shift the stamps on."""
        assert self._source is not None  # noqa: S101 - opened in _set_up
        source = self._source
        offset_ns = 0
        while True:
            first_ns = last_ns = first_frame_ns = last_frame_ns = None
            frames = 0
            try:
                for sample in source:
                    first_ns = sample.stamp_ns if first_ns is None else first_ns
                    last_ns = sample.stamp_ns
                    if isinstance(sample, Frame):
                        frames += 1
                        if first_frame_ns is None:
                            first_frame_ns = sample.stamp_ns
                        last_frame_ns = sample.stamp_ns
                    if offset_ns:
                        sample = dataclasses.replace(sample, stamp_ns=sample.stamp_ns + offset_ns)
                    yield sample
            finally:
                source.close()
            if not self._loop or not frames or self._stop.is_set():
                return
            # The next pass's first frame comes one frame period after this pass's last
            # frame, and no stamp of it repeats one of this pass (IMU samples may trail).
            frame_span_ns = last_frame_ns - first_frame_ns
            if frames > 1:
                period_ns = round(frame_span_ns / (frames - 1))
            else:
                period_ns = round(1e9 / (source.nominal_rate_hz or 10.0))
            offset_ns += max(frame_span_ns + period_ns, last_ns - first_ns + 1)
            self.get_logger().info('end of source: looping to its start')
            # The same start time, so that every pass has the same raw stamps.
            source = open_source(
                dataclasses.replace(self._config, start_time_ns=self._source.start_time_ns)
            )
            self._source = source

    def _pace(self, sample: Sample) -> None:
        mode, rate_hz = self._rate_mode, self._rate_hz
        if (mode, rate_hz) != self._pacing_key:
            self._pacing_key = (mode, rate_hz)
            self._anchor = None
            self._next_frame_at = None
        now = time.monotonic()
        if mode == 'realtime':
            if self._anchor is None:
                self._anchor = (now, sample.stamp_ns)
                return
            anchor_time, anchor_stamp = self._anchor
            delay = anchor_time + (sample.stamp_ns - anchor_stamp) / 1e9 - now
            if delay < -_MAX_LAG_S:
                self._anchor = (now, sample.stamp_ns)
            elif delay > 0.0:
                self._stop.wait(delay)
        elif mode == 'fixed' and isinstance(sample, Frame):
            if self._next_frame_at is None:
                self._next_frame_at = now
            delay = self._next_frame_at - now
            if delay > 0.0:
                self._stop.wait(delay)
            # A late frame delays the schedule instead of bunching the next ones up.
            self._next_frame_at = max(self._next_frame_at + 1.0 / rate_hz, time.monotonic())

    def _publish_frame(self, frame: Frame) -> None:
        image, encoding = convert_encoding(frame.image, frame.encoding, self._output_encoding)
        message = cv2_to_imgmsg(image, encoding=encoding)
        info = self._camera_info(frame)
        # Stamped last, right before publishing: a release stamp is the publishing time.
        stamp_ns = self._release_stamp(frame.stamp_ns, 'frame')
        header = _header(stamp_ns, self._frame_id)
        message.header = header
        info.header = header
        if self._rate_mode == 'every_frame':
            self._backpressure.add(stamp_ns)
        self._image_publisher.publish(message)
        self._info_publisher.publish(info)
        self._frames += 1
        self._count_publish()

    def _camera_info(self, frame: Frame) -> CameraInfo:
        height, width = frame.image.shape[:2]
        if self._file_info is not None:
            size = (self._file_info.width, self._file_info.height)
            if size != (width, height) and not self._size_warned:
                self._size_warned = True
                self.get_logger().warning(
                    f'the calibration is for {size[0]}x{size[1]} images but the frames are '
                    f'{width}x{height}; camera_info will not match them'
                )
            return self._file_info
        if frame.camera_info is not None:
            if frame.camera_info is not self._bag_calibration:
                self._bag_calibration = frame.camera_info
                self._bag_info = to_camera_info_msg(frame.camera_info, self._frame_id)
            assert self._bag_info is not None  # noqa: S101 - set just above
            return self._bag_info
        if self._default_info is None or (self._default_info.width, self._default_info.height) != (
            width,
            height,
        ):
            self._default_info = to_camera_info_msg(
                default_pinhole(width, height, self._hfov_deg), self._frame_id
            )
        return self._default_info

    def _publish_imu(self, sample: ImuSample) -> None:
        if self._imu_publisher is None:
            return
        message = Imu()
        vector = message.angular_velocity
        vector.x, vector.y, vector.z = (float(value) for value in sample.angular_velocity)
        vector = message.linear_acceleration
        vector.x, vector.y, vector.z = (float(value) for value in sample.linear_acceleration)
        if sample.orientation is None:
            # REP 145: no orientation estimate.
            message.orientation_covariance[0] = -1.0
        else:
            q = message.orientation
            q.x, q.y, q.z, q.w = (float(value) for value in sample.orientation)
            if sample.orientation_covariance is not None:
                message.orientation_covariance = [float(v) for v in sample.orientation_covariance]
        if sample.angular_velocity_covariance is not None:
            message.angular_velocity_covariance = [
                float(value) for value in sample.angular_velocity_covariance
            ]
        if sample.linear_acceleration_covariance is not None:
            message.linear_acceleration_covariance = [
                float(value) for value in sample.linear_acceleration_covariance
            ]
        message.header = _header(self._release_stamp(sample.stamp_ns, 'imu'), self._imu_frame_id)
        self._imu_publisher.publish(message)
        self._imu_samples += 1
        self._count_publish()

    def _count_publish(self) -> None:
        now = time.monotonic()
        if self._first_publish is None:
            self._first_publish = now
        self._last_publish = now

    @property
    def frames_published(self) -> int:
        """Camera frames published so far (a finished source publishes no more)."""
        return self._frames

    # -- shutdown ------------------------------------------------------------------------

    def log_summary(self, reason: str) -> None:
        """Log how many frames and IMU samples went out, over how long, at what rate.

        With rate_mode every_frame (or results waited for) also how many frames had a result
        and how many none; the duration then runs to the last result, and the rate is frames
        per second of it.
        """
        backpressure = self._backpressure
        waited = self._results_subscription is not None
        duration = 0.0
        if self._first_publish is not None and self._last_publish is not None:
            end = self._last_publish
            if waited and backpressure.last_answer_s is not None:
                end = max(end, backpressure.last_answer_s)
            duration = end - self._first_publish
        if waited:
            rate = self._frames / duration if duration > 0 else 0.0
        else:
            rate = (self._frames - 1) / duration if self._frames > 1 and duration > 0 else 0.0
        results = ''
        if waited:
            results = (
                f'; {backpressure.answered} answered on {self._backpressure_topic}, '
                f'{backpressure.unanswered} unanswered (no result within '
                f'{backpressure.timeout_s:g} s)'
            )
            if backpressure.outstanding():
                results += f', {backpressure.outstanding()} still waiting'
        self.get_logger().info(
            f'{reason}: published {self._frames} frames and {self._imu_samples} IMU samples in '
            f'{duration:.2f} s (mean {rate:.1f} frames/s){results}'
        )

    def stop(self) -> None:
        """Stop the reader thread (it ends at the next sample) and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=_JOIN_TIMEOUT_S)
        elif self._source is not None:
            self._source.close()

    def destroy_node(self) -> None:
        """Stop the reader thread, then destroy the node."""
        self.stop()
        if self._log_handler is not None:
            logging.getLogger('people_following').removeHandler(self._log_handler)
            self._log_handler = None
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Run the node until the source ends or Ctrl-C; return 0, or 1 after an error."""
    # The signal only asks for the stop: the reader thread stops and the summary is logged
    # while the context is still valid (see edge_offload.ros_node_main).
    stop = StopRequest(NODE_NAME)
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    try:
        node = SensorSourceNode()
    except (ConfigError, SourceError, CameraInfoError) as error:
        # One line, no traceback: these say what to fix.
        get_logger(NODE_NAME).error(str(error))
        rclpy.try_shutdown()
        return 1
    except ParameterException as error:
        get_logger(NODE_NAME).error(f'invalid parameter: {error}')
        rclpy.try_shutdown()
        return 1
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        spin_until_stopped(executor, stop, until=node.finished.is_set)
    finally:
        node.stop()
        if stop.is_set() and node.error is None:
            node.log_summary('stopped')
        exit_code = 1 if node.error is not None else 0
        shut_down(node, executor)
    return finish_process(NODE_NAME, exit_code, stop)


if __name__ == '__main__':
    sys.exit(main())
