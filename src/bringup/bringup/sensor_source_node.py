# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``sensor_source``: publish camera frames, calibration and IMU samples from one source.

The source (``source`` parameter: a V4L2 camera, a video file, an image folder, a rosbag2
bag or a synthetic pattern; see :mod:`bringup.sensor_sources`) is read by a reader thread
that decodes, paces and publishes, so the executor is never blocked:

* ``image_raw`` (sensor_msgs/Image) and ``camera_info`` (sensor_msgs/CameraInfo, the same
  header) for every frame; ``imu`` (sensor_msgs/Imu) when the source has IMU samples. All
  three use the sensor-data QoS profile and carry the source's stamps.
* ``rate_mode``: ``realtime`` follows the source's stamps, ``fixed`` publishes frames at
  ``rate_hz`` (IMU samples go out as they come between frames), ``max`` as fast as the
  source reads (with ``reliable_sensor_qos``, as fast as subscribers acknowledge: lossless).
  ``rate_mode``, ``rate_hz`` and ``paused`` can change at run time; the other parameters
  are read-only.
* ``camera_info`` comes from ``camera_info_url``, else from the bag's CameraInfo topic,
  else from a default pinhole model sized to the frames (with a warning).
* ``loop`` replays a video, image folder or bag again and again with stamps that go on
  increasing; ``max_frames`` ends the run after that many frames.
* For replays into a graph that is still starting (tests, pipelines): publishing waits
  until image_raw has ``wait_for_subscribers`` subscribers and while ``paused`` is true.

At the end of a source that does not loop (or after ``max_frames``) the node logs a summary
and ``main`` returns 0. A source that cannot be opened, an invalid parameter or a read
error mid-stream gives one error line and exit code 1.
"""

from __future__ import annotations

import dataclasses
import logging
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
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import CameraInfo, Image, Imu
from std_msgs.msg import Header

from bringup.camera_info_file import (
    CameraCalibration,
    CameraInfoError,
    default_pinhole,
    load_camera_info,
    to_camera_info_msg,
)
from bringup.sensor_sources import (
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

NODE_NAME = 'sensor_source'
RATE_MODES = ('realtime', 'fixed', 'max')
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
        "'realtime' follows the source stamps, 'fixed' publishes frames at rate_hz, 'max' as "
        'fast as the source reads',
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
        'Stamp of the first video, image folder or synthetic frame, s since the epoch; 0: the '
        'wall clock at start',
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
)
# A realtime replay this far behind its stamps (or stamps going back) follows from there.
_MAX_LAG_S = 1.0
_POLL_S = 0.02
_JOIN_TIMEOUT_S = 0.5
_DISCOVERY_SETTLE_S = 0.5
_ACK_TIMEOUT_S = 5.0


class ConfigError(ValueError):
    """A parameter value the node cannot work with."""


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
        self._log_handler = forward_python_logging(self, 'bringup')
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
        self._config = SourceConfig(
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
        self._source = open_source(self._config)
        self._log_start(values)

        self._reliable = values['reliable_sensor_qos']
        qos = sensor_qos(self._reliable)
        self._image_publisher = self.create_publisher(Image, 'image_raw', qos)
        self._info_publisher = self.create_publisher(CameraInfo, 'camera_info', qos)
        self._imu_publisher = (
            self.create_publisher(Imu, 'imu', qos) if self._source.has_imu else None
        )
        self.add_on_set_parameters_callback(self._check_parameters)
        self.add_post_set_parameters_callback(self._apply_parameters)

        # Pacing and counters belong to the reader thread.
        self._pacing_key: tuple[str, float] | None = None
        self._anchor: tuple[float, int] | None = None
        self._next_frame_at: float | None = None
        self._frames = 0
        self._imu_samples = 0
        self._first_publish: float | None = None
        self._last_publish: float | None = None
        self._default_info: CameraInfo | None = None
        self._bag_calibration: CameraCalibration | None = None
        self._bag_info: CameraInfo | None = None
        self._size_warned = False

        # Wakes the executor when the reader thread ends, so main() returns at once.
        self._wake = self.create_guard_condition(lambda: None)
        self._thread = threading.Thread(target=self._run, name='sensor_source_reader', daemon=True)
        self._thread.start()

    def _log_start(self, values: dict[str, Any]) -> None:
        assert self._source is not None  # noqa: S101 - opened by the caller
        rate = values['rate_mode'] + (
            f' at {values["rate_hz"]:g} Hz' if values['rate_mode'] == 'fixed' else ''
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
            elif parameter.name == 'rate_hz':
                self._rate_hz = parameter.value
            elif parameter.name == 'paused':
                self._paused = parameter.value
                self.get_logger().info('paused' if parameter.value else 'publishing')

    # -- reader thread -------------------------------------------------------------------

    def _run(self) -> None:
        samples = self._samples()
        reason = 'end of source'
        try:
            self._hold()
            self._await_subscribers()
            for sample in samples:
                self._hold()
                if self._stop.is_set():
                    break
                self._pace(sample)
                if self._stop.is_set():
                    break
                if isinstance(sample, Frame):
                    self._publish_frame(sample)
                    if self._reliable and self._rate_mode == 'max':
                        # A reliable writer keeps only `depth` samples: at full speed it
                        # would overwrite ones not yet acknowledged. Pacing by the
                        # acknowledgements makes a max-rate replay lossless.
                        self._await_acknowledgements()
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

    def _await_acknowledgements(self) -> None:
        # With reliable QoS the last frames may still be in flight when the source ends;
        # exiting now would drop them. Best-effort publishers return at once.
        for publisher in (self._image_publisher, self._info_publisher, self._imu_publisher):
            if publisher is not None:
                publisher.wait_for_all_acked(RclpyDuration(seconds=_ACK_TIMEOUT_S))

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
        header = _header(frame.stamp_ns, self._frame_id)
        message = cv2_to_imgmsg(image, encoding=encoding, header=header)
        info = self._camera_info(frame)
        info.header = header
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
        message = Imu(header=_header(sample.stamp_ns, self._imu_frame_id))
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
        self._imu_publisher.publish(message)
        self._imu_samples += 1
        self._count_publish()

    def _count_publish(self) -> None:
        now = time.monotonic()
        if self._first_publish is None:
            self._first_publish = now
        self._last_publish = now

    # -- shutdown ------------------------------------------------------------------------

    def log_summary(self, reason: str) -> None:
        """Log how many frames and IMU samples went out, over how long, at what rate."""
        duration = 0.0
        if self._first_publish is not None and self._last_publish is not None:
            duration = self._last_publish - self._first_publish
        rate = (self._frames - 1) / duration if self._frames > 1 and duration > 0 else 0.0
        self.get_logger().info(
            f'{reason}: published {self._frames} frames and {self._imu_samples} IMU samples in '
            f'{duration:.2f} s (mean {rate:.1f} frames/s)'
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
            logging.getLogger('bringup').removeHandler(self._log_handler)
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
