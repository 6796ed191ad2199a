# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""People detection: camera images -> the bridge's ``offload`` action -> people.

Subscribes ``image_raw`` (and ``camera_info`` for marker placement) and publishes
``people`` (``offload_interfaces/PersonArray``, the image's header), ``people/markers``
(``visualization_msgs/MarkerArray``) and ``people/annotated`` (``sensor_msgs/Image``) for
every frame it processes.

With ``tracking`` (the default) people are tracked between detections, as MediaPipe does in
video mode (``edge_offload_zoo.people_tracking``): a thread of this node runs the BlazePose
landmark net once per tracked person on every frame, on the ROI the person's previous
landmarks predict (``tracking_backend``: LiteRT or the torch port; ``tracking_threads``
people at a time, a single-threaded net each; two or four runs a person, the per-frame
pipeline's flip test and second pass, where the measured time between frames allows:
``tracking_landmark_passes``), and the configured people model, the
multi-person front end, runs on the offload bridge every ``detect_min_every_n_frames`` to
``detect_every_n_frames`` frames (its median answer time over ``detect_max_duty``: a fast
edge server is asked more often, and tracking loses people only between its answers),
sooner (after a third of that) when a track is lost or nobody is tracked. Its answer comes
back a few frames later and starts tracks for the people no track covers. A front end with
a ``ground_plane`` input (``blazepose_lite_people``) is sent the line of person height
against foot row fitted to the people tracked so far (``edge_offload_zoo.ground_plane``),
and its HOG searches each scale only where people of that size stand, about twice as fast;
every ``ground_plane_full_scan_every``-th request scans every row. The front end
never holds a frame up; at most one request is outstanding. ``offload_mode`` of the results
reads ``<front end mode>+tracking``.

Without ``tracking`` every frame is sent to the offload bridge as an ``Offload`` goal.
Frames wait in a bounded queue while ``max_in_flight`` goals are outstanding; when it is
full the oldest frame is dropped (a tracker wants the newest frame, not a backlog) and the
drop is counted in ``/diagnostics``. A goal whose result has not come after
``goal_timeout_s`` is abandoned and counted: a bridge that was killed never answers, and
detection carries on with the bridge that replaces it. Nothing here blocks: goals, results
and the queue are all driven by executor callbacks.

A frame is refused by its header before anything of this node copies it or sends it on:
one declaring more than ``max_image_bytes`` (``height * step``, its payload, or what its
encoding implies), or one outside the sizes the model declares
(``edge_offload.models.SizeLimits``). The reason is logged (throttled) and the refusal
counted in ``/diagnostics``. rclpy has deserialised the frame by then, and Fast DDS keeps
the buffer it reassembled it into, grown to the largest frame, for as long as the
subscription exists (rmw_fastrtps' history memory policy): after a refused frame of
``_RELEASE_AFTER_BYTES`` or more the node recreates its ``image_raw`` subscription, which
gives that buffer back (measured: 192 MB frame, RSS back to within a few MB). A best-effort
frame that DDS could not reassemble at all never reaches the node, and its buffer stays.
"""

from __future__ import annotations

import collections
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient
from rclpy.duration import Duration
from rclpy.exceptions import InvalidHandle, ParameterException
from rclpy.node import Node
from rclpy.subscription import Subscription
from rclpy.time import Time
from sensor_msgs.msg import CameraInfo, Image
from visualization_msgs.msg import MarkerArray

from edge_offload.camera_model import PinholeCamera
from edge_offload.diagnostics import (
    OK,
    WARN,
    create_diagnostics_publisher,
    diagnostic_array,
    diagnostic_status,
)
from edge_offload.image_convert import (
    ImageFormatError,
    ImageTooLargeError,
    check_image_size,
    cv2_to_imgmsg,
    image_tensor_shape,
    imgmsg_to_cv2,
)
from edge_offload.models import InvalidInputError, UnknownModelError, model_spec
from edge_offload.ros_node_main import run_node
from edge_offload.ros_params import ParamSpec, declare_parameters, parameter_values
from edge_offload.sensor_qos import RELIABLE_SENSOR_QOS_DESCRIPTION, sensor_qos
from edge_offload.tensor_blob import TensorBlobError, from_tensor_blob, to_tensor_blob
from edge_offload_zoo.blazepose import (
    GROUND_PLANE_INPUT,
    BlazePoseLandmarker,
    Person,
    load_landmark_net,
)
from edge_offload_zoo.ground_plane import (
    DEFAULT_TOLERANCE,
    UNKNOWN_GROUND_PLANE,
    GroundPlane,
    GroundPlaneFit,
)
from edge_offload_zoo.litert_backend import BACKENDS
from edge_offload_zoo.people_tracking import (
    DEFAULT_DETECT_EVERY,
    DEFAULT_LANDMARK_SHARE,
    DEFAULT_MAX_DUTY,
    DEFAULT_MIN_DETECT_EVERY,
    LANDMARK_PASSES,
    DetectionSchedule,
    LandmarkPassBudget,
    PeopleTracker,
    seeds_from_outputs,
)
from offload_interfaces.action import Offload
from offload_interfaces.msg import PersonArray
from people_following.people_output import (
    People,
    PeopleOutputError,
    draw_people,
    to_markers,
    to_person_array,
)
from people_following.tracking_worker import TrackingWorker

PARAMETERS = (
    ParamSpec(
        'model',
        'blazepose_lite_people',
        'People model of the zoo: run on each frame, or with tracking the multi-person front '
        'end that finds people to track (it must output rois and confidences).',
    ),
    ParamSpec(
        'tracking',
        True,
        'Track people between front-end runs with one landmark run per person and frame on '
        'this node (read-only).',
        read_only=True,
    ),
    ParamSpec(
        'detect_every_n_frames',
        DEFAULT_DETECT_EVERY,
        'With tracking: run the front end every this many frames at most (after a third of '
        'the interval when a track is lost or nobody is tracked).',
        1,
        10000,
        True,
    ),
    ParamSpec(
        'detect_min_every_n_frames',
        DEFAULT_MIN_DETECT_EVERY,
        'With tracking: the shortest interval between front-end runs, frames (capped at '
        'detect_every_n_frames; equal to it: a fixed interval).',
        1,
        10000,
        True,
    ),
    ParamSpec(
        'detect_max_duty',
        DEFAULT_MAX_DUTY,
        "With tracking: the interval is the front end's median answer time in frames over "
        'this, between the two limits above (a faster edge server is asked more often and '
        'finds people sooner).',
        0.01,
        1.0,
        True,
    ),
    ParamSpec(
        'untracked_wait_s',
        2.0,
        'With tracking: while nobody is tracked, the frame the front end is asked on waits '
        'up to this long for its answer, so the people it finds are reported on that frame '
        '(0: never wait; tracking goes on with nobody until the answer comes).',
        0.0,
        60.0,
        True,
    ),
    ParamSpec(
        'ground_plane_full_scan_every',
        4,
        'With tracking and a front end that takes a ground_plane input: every this many '
        'requests it scans every row; the others carry the line of person height against '
        'foot row fitted to the tracked people (1: always scan every row; 0: never, once '
        'the line is fitted).',
        0,
        1000,
        True,
    ),
    ParamSpec(
        'ground_plane_tolerance',
        DEFAULT_TOLERANCE,
        'With the ground plane: the front end looks for people from 1 / (1 + this) to '
        '1 + this times the height the line predicts at their feet.',
        0.05,
        4.0,
        True,
    ),
    ParamSpec(
        'tracking_backend',
        'litert',
        f'With tracking: runtime of the landmark net on this node, one of {", ".join(BACKENDS)} '
        '(litert: the original .tflite on LiteRT, faster on CPUs; torch: the torch port).',
        read_only=True,
    ),
    ParamSpec(
        'tracking_threads',
        1,
        'With tracking: landmark nets run side by side, one person each (LiteRT: one thread '
        "each; the torch backend uses the process's torch threads).",
        1,
        64,
        True,
    ),
    ParamSpec(
        'tracking_landmark_passes',
        0,
        'With tracking: landmark runs per tracked person and frame: 1 (one, mirrored every '
        'other frame), 2 (the flip test), 4 (the flip test and a second pass, as the '
        'per-frame pipeline); 0: the most that keep the measured landmark time within '
        'tracking_landmark_share of the interval between frames.',
        0,
        4,
        True,
    ),
    ParamSpec(
        'tracking_landmark_share',
        DEFAULT_LANDMARK_SHARE,
        'With tracking_landmark_passes 0: the share of the interval between frames that '
        'the landmark runs may take.',
        0.05,
        1.0,
        True,
    ),
    ParamSpec(
        'image_input_name', 'image', 'Name of the model input that receives the camera image.'
    ),
    ParamSpec('mode', '', "Offloading mode requested per goal; '' = the bridge's own mode."),
    ParamSpec(
        'deadline_s', 0.0, 'Time allowed per frame from goal to result; 0 = none.', 0.0, 60.0
    ),
    ParamSpec('max_in_flight', 1, 'Goals outstanding at once on the bridge.', 1, 16),
    ParamSpec(
        'goal_timeout_s',
        8.0,
        'A goal without a result this long is abandoned and counted (the bridge died or '
        'restarted: its result will never come); 0 = wait for ever.',
        0.0,
        600.0,
    ),
    ParamSpec(
        'queue_size', 2, 'Frames waiting for a free goal slot; the oldest is dropped.', 1, 64
    ),
    ParamSpec('min_score', 0.5, 'People scoring below this are not published.', 0.0, 1.0),
    ParamSpec(
        'min_keypoint_score', 0.3, 'Keypoints below this are not drawn or linked.', 0.0, 1.0
    ),
    ParamSpec('publish_annotated', True, 'Publish people/annotated (costs a copy per frame).'),
    ParamSpec(
        'marker_plane_depth_m',
        3.0,
        'Distance of the plane that 2-D people markers are drawn on, in the camera frame.',
        0.1,
        100.0,
    ),
    ParamSpec('marker_lifetime_s', 0.5, 'Lifetime of the people markers in RViz.', 0.0, 60.0),
    ParamSpec('reliable_sensor_qos', False, RELIABLE_SENSOR_QOS_DESCRIPTION),
    ParamSpec(
        'max_image_bytes',
        64 * 1024 * 1024,
        'Largest camera frame: height x step, its payload or what its encoding implies, '
        'bytes; a larger one is refused before it is copied or sent to the bridge.',
        1024,
        2**31,
    ),
    ParamSpec('diagnostics_period_s', 1.0, 'Period of /diagnostics messages.', 0.1, 60.0),
)
LATENCY_WINDOW = 200
# A refused frame this large makes the node recreate its image subscription (see above) ...
_RELEASE_AFTER_BYTES = 16 * 1024 * 1024
# ... at most this often (frames that keep coming oversized keep one buffer, not more).
_RELEASE_MIN_INTERVAL_S = 2.0
_REFUSAL_LOG_PERIOD_S = 5.0
# The longest the node waits for rclpy to destroy the old subscription.
_RETIRE_TIMEOUT_S = 2.0


@dataclass
class _Frame:
    image: Image
    received_s: float  # monotonic, when the node took the frame
    # Capture stamp to arrival here, on the node's clock: the frame's transport (and any
    # queueing before the callback ran).
    arrival_delay_s: float


# Turns a goal's outputs into results; returns why they are unusable, or None.
_OutputsHandler = Callable[[_Frame, Offload.Result, dict[str, np.ndarray]], str | None]


class PeopleDetectionNode(Node):
    """Offload people detection per camera frame and publish people, markers and images."""

    def __init__(self, **kwargs) -> None:  # noqa: ANN003 - rclpy Node options
        super().__init__('people_detection', **kwargs)
        declare_parameters(self, PARAMETERS)
        self._config = parameter_values(self, PARAMETERS)
        model = self._config['model']
        try:
            spec = model_spec(model)
        except UnknownModelError as error:
            raise ValueError(str(error)) from None
        if self._config['image_input_name'] not in spec.inputs:
            raise ValueError(
                f'model {model!r} has no input {self._config["image_input_name"]!r}; '
                f'its inputs are {sorted(spec.inputs)}'
            )
        self._model_is_trained = spec.trained
        self._model_spec = spec
        self._worker: TrackingWorker[_Frame] | None = None
        if self._config['tracking']:
            self._worker = self._tracking_worker(model, spec.outputs)
        # The frame the tracking thread wants the front end run on, and the ground plane to
        # send with it (handed to the executor).
        self._due_detection: tuple[_Frame, GroundPlane | None] | None = None
        if not spec.trained:
            self.get_logger().warning(
                f'model {model!r} is untrained (random weights): its people are not '
                'detections; use it for latency and offloading experiments only'
            )
        self._queue: collections.deque[_Frame] = collections.deque(
            maxlen=self._config['queue_size']
        )
        # Goals sent and not answered: sequence number -> when they were sent.
        self._outstanding: dict[int, float] = {}
        self._next_goal = 0
        self._camera: PinholeCamera | None = None
        self._latencies_s: collections.deque[float] = collections.deque(maxlen=LATENCY_WINDOW)
        self._arrival_delays_s: collections.deque[float] = collections.deque(maxlen=LATENCY_WINDOW)
        self._front_end_latencies_s: collections.deque[float] = collections.deque(
            maxlen=LATENCY_WINDOW
        )
        self._counts = collections.Counter()
        self._last_mode = ''
        self._last_people = 0
        self._logged_passes = 1
        self._bridge_missing_since: float | None = None
        self._last_refusal = ''
        self._refusal_logged_at: dict[str, float] = {}
        self._release_pending = False
        self._last_release = -math.inf
        self._retiring_subscription: tuple[Subscription, float] | None = None

        self._client = ActionClient(self, Offload, 'offload')
        self._detection_wake = self.create_guard_condition(self._send_due_detection)
        self._people_pub = self.create_publisher(PersonArray, 'people', 10)
        self._markers_pub = self.create_publisher(MarkerArray, 'people/markers', 10)
        self._diagnostics_pub = create_diagnostics_publisher(self)
        self._camera_qos = sensor_qos(self._config['reliable_sensor_qos'])
        # As the camera's: reliable when frames must not be lost (a recording of them).
        self._annotated_pub = self.create_publisher(Image, 'people/annotated', self._camera_qos)
        self._image_subscription = self._subscribe_images()
        self.create_subscription(CameraInfo, 'camera_info', self._on_camera_info, self._camera_qos)
        # Retries frames that wait while the bridge is not (yet) there.
        self.create_timer(0.1, self._tick)
        self.create_timer(self._config['diagnostics_period_s'], self._publish_diagnostics)
        mode = self._config['mode'] or 'bridge default'
        if self._worker is None:
            how = f'{model!r} on every frame via the offload action'
        else:
            how = (
                f'tracking ({self._config["tracking_backend"]} landmark net, '
                f'{self._config["tracking_threads"]} thread(s)); front end {model!r} via the '
                f'offload action every {self._min_detect_every()}-'
                f'{self._config["detect_every_n_frames"]} frames (the sooner it answers, the '
                'more often)'
            )
        self.get_logger().info(
            f'people detection: {how} (mode {mode}, queue {self._config["queue_size"]})'
        )

    def _min_detect_every(self) -> int:
        """Return the shortest front-end interval, at most the longest (then a fixed one)."""
        return min(
            self._config['detect_min_every_n_frames'], self._config['detect_every_n_frames']
        )

    def _tracking_worker(self, model: str, outputs: tuple[str, ...]) -> TrackingWorker[_Frame]:
        missing = [name for name in ('rois', 'confidences') if name not in outputs]
        if missing:
            raise ValueError(
                f'model {model!r} does not output {missing}, so it cannot seed tracking; use a '
                'BlazePose people model or set tracking to false'
            )
        # An unknown backend raises ValueError naming the choices: a configuration error.
        # One single-threaded net per thread: on cores shared with other processes, runs
        # side by side beat one net splitting each operator (see ParallelLandmarks).
        landmarkers = [
            BlazePoseLandmarker(
                model=load_landmark_net(self._config['tracking_backend'], num_threads=1)
            )
            for _ in range(self._config['tracking_threads'])
        ]
        ground_plane = None
        if GROUND_PLANE_INPUT in self._model_spec.inputs:
            ground_plane = GroundPlaneFit(
                tolerance=self._config['ground_plane_tolerance'],
                full_scan_every=self._config['ground_plane_full_scan_every'],
            )
        passes = self._config['tracking_landmark_passes']
        if passes not in (0, *LANDMARK_PASSES):
            raise ValueError(
                f'tracking_landmark_passes must be 0 (by measured time) or one of '
                f'{LANDMARK_PASSES}, got {passes}'
            )
        return TrackingWorker(
            PeopleTracker(landmarkers),
            DetectionSchedule(
                self._config['detect_every_n_frames'],
                self._min_detect_every(),
                self._config['detect_max_duty'],
            ),
            to_rgb=lambda frame: imgmsg_to_cv2(frame.image, 'rgb8'),
            on_people=self._on_tracked_people,
            on_detection_due=self._on_detection_due,
            on_error=self._on_tracking_error,
            queue_size=self._config['queue_size'],
            untracked_wait_s=self._config['untracked_wait_s'],
            ground_plane=ground_plane,
            landmark_passes=LandmarkPassBudget(
                self._config['tracking_landmark_share'], fixed=passes or None
            ),
        )

    def busy(self) -> bool:
        """Return True while frames wait or goals are outstanding (thread-safe read)."""
        tracking = self._worker is not None and self._worker.busy()
        return bool(self._queue) or bool(self._outstanding) or tracking

    def destroy_node(self) -> None:
        """Stop the tracking thread, then destroy the node."""
        if self._worker is not None:
            self._worker.stop()
        super().destroy_node()

    # -- frames -------------------------------------------------------------------------

    def _on_camera_info(self, message: CameraInfo) -> None:
        try:
            self._camera = PinholeCamera.from_camera_info(message)
        except ValueError as error:
            # Markers then fall back to millimetres on the plane; say why once.
            self._camera = None
            self.get_logger().warning(f'camera_info not usable for markers: {error}', once=True)

    def _subscribe_images(self) -> Subscription:
        return self.create_subscription(Image, 'image_raw', self._on_image, self._camera_qos)

    def _refusal(self, message: Image) -> tuple[str, str] | None:
        """Return (counter, reason) for a frame refused by its header, else None."""
        try:
            check_image_size(
                message.height,
                message.width,
                message.encoding,
                message.step,
                len(message.data),
                self._config['max_image_bytes'],
            )
            self._model_spec.check_input_shape(
                self._config['image_input_name'],
                image_tensor_shape(message.height, message.width, message.encoding),
            )
        except ImageTooLargeError as error:
            return 'frames_too_large', f'{error} (max_image_bytes)'
        except (ImageFormatError, InvalidInputError) as error:
            return 'frames_refused', str(error)
        return None

    def _on_image(self, message: Image) -> None:
        self._counts['frames_received'] += 1
        refusal = self._refusal(message)
        if refusal is not None:
            counter, reason = refusal
            self._counts[counter] += 1
            self._last_refusal = reason
            if len(message.data) >= _RELEASE_AFTER_BYTES:
                self._release_pending = True
            # Throttled per kind, so a stream of one kind does not hide the other.
            now = time.monotonic()
            if now - self._refusal_logged_at.get(counter, -math.inf) >= _REFUSAL_LOG_PERIOD_S:
                self._refusal_logged_at[counter] = now
                self.get_logger().warning(
                    f'frame refused before processing ({self._counts[counter]} {counter} so '
                    f'far): {reason}'
                )
            return
        arrival_delay_s = (
            self.get_clock().now() - Time.from_msg(message.header.stamp)
        ).nanoseconds
        frame = _Frame(message, time.monotonic(), arrival_delay_s * 1e-9)
        if self._worker is not None:
            self._worker.submit(frame)
            return
        if len(self._queue) == self._queue.maxlen:
            self._counts['frames_dropped'] += 1
        self._queue.append(frame)
        self._pump()

    # -- tracking (callbacks of the tracking thread, and the front end's answers) -------

    def _on_detection_due(self, frame: _Frame, ground_plane: GroundPlane | None) -> None:
        # Goals are sent from the executor: the guard condition hands the frame over.
        self._due_detection = (frame, ground_plane)
        self._detection_wake.trigger()

    def _send_due_detection(self) -> None:
        due, self._due_detection = self._due_detection, None
        if due is None or self._worker is None:
            return
        frame, ground_plane = due
        self._abandon_unanswered_goals()
        if not self._client.server_is_ready():
            self._worker.detection_failed()
            self.get_logger().warning(
                'offload bridge action server not available; tracking without the front end',
                throttle_duration_sec=5.0,
            )
            return
        self._send(frame, self._on_front_end_outputs, ground_plane)

    def _on_front_end_outputs(
        self, frame: _Frame, result: Offload.Result, outputs: dict[str, np.ndarray]
    ) -> str | None:
        try:
            seeds = seeds_from_outputs(outputs, self._config['min_score'])
        except ValueError as error:
            return f'model outputs cannot seed tracking: {error}'
        assert self._worker is not None  # noqa: S101 - only sent with tracking on
        self._worker.add_seeds(seeds)
        self._front_end_latencies_s.append(time.monotonic() - frame.received_s)
        self._last_mode = result.mode_used
        return None

    def _on_tracked_people(self, frame: _Frame, people: list[Person]) -> None:
        found = People(
            np.array([p.box for p in people], np.float32).reshape(-1, 4),
            np.array([p.score for p in people], np.float32),
            np.array([p.keypoints for p in people], np.float32).reshape(-1, 17, 3),
        )
        found = found.kept(self._config['min_score'])
        self._latencies_s.append(time.monotonic() - frame.received_s)
        self._arrival_delays_s.append(frame.arrival_delay_s)
        self._counts['results'] += 1
        self._last_people = len(found)
        self._publish(frame.image, found, f'{self._last_mode or "none"}+tracking')

    def _on_tracking_error(self, frame: _Frame, error: Exception) -> None:
        self.get_logger().warning(
            f'frame not tracked: {type(error).__name__}: {error}', throttle_duration_sec=2.0
        )

    def _tick(self) -> None:
        self._release_image_buffers()
        self._pump()

    def _release_image_buffers(self) -> None:
        """Recreate the image subscription after a large refused frame (rate-limited).

        Fast DDS keeps the buffer it reassembled a sample into, grown to the largest one,
        until the reader is destroyed; rclpy offers no other way to give it back. Runs from
        the timer, never inside the subscription's own callback. The new subscription is
        made once the old one is really gone (rclpy defers that while an executor thread
        waits on it): a reader made first would share, and keep, the topic's buffers.
        """
        now = time.monotonic()
        if self._retiring_subscription is not None:
            old, since = self._retiring_subscription
            if not _destroyed(old) and now - since < _RETIRE_TIMEOUT_S:
                return
            self._retiring_subscription = None
            self._image_subscription = self._subscribe_images()
            self._counts['image_subscription_releases'] += 1
            self.get_logger().info(
                'recreated the image_raw subscription: the buffer of a large refused frame '
                'went back to the OS'
            )
            return
        if not self._release_pending or now - self._last_release < _RELEASE_MIN_INTERVAL_S:
            return
        self._release_pending = False
        self._last_release = now
        old = self._image_subscription
        self.destroy_subscription(old)
        self._retiring_subscription = (old, now)

    def _pump(self) -> None:
        self._abandon_unanswered_goals()
        while self._queue and len(self._outstanding) < self._config['max_in_flight']:
            if not self._client.server_is_ready():
                now = time.monotonic()
                if self._bridge_missing_since is None:
                    self._bridge_missing_since = now
                elif now - self._bridge_missing_since > 2.0:
                    self.get_logger().warning(
                        'offload bridge action server not available; frames are waiting',
                        throttle_duration_sec=5.0,
                    )
                return
            self._bridge_missing_since = None
            self._send(self._queue.popleft())

    def _send(
        self,
        frame: _Frame,
        on_outputs: _OutputsHandler | None = None,
        ground_plane: GroundPlane | None = None,
    ) -> None:
        goal = Offload.Goal()
        goal.header = frame.image.header
        goal.model = self._config['model']
        goal.mode = self._config['mode']
        goal.images = [frame.image]
        goal.image_input_names = [self._config['image_input_name']]
        if GROUND_PLANE_INPUT in self._model_spec.inputs:
            values = UNKNOWN_GROUND_PLANE if ground_plane is None else ground_plane.as_values()
            goal.inputs = [to_tensor_blob(GROUND_PLANE_INPUT, np.array(values, np.float32))]
        deadline_s = self._config['deadline_s']
        goal.deadline = Duration(seconds=deadline_s).to_msg()
        sequence = self._next_goal
        self._next_goal += 1
        self._outstanding[sequence] = time.monotonic()
        self._counts['goals_sent'] += 1
        future = self._client.send_goal_async(goal)
        handler = on_outputs or self._on_people_outputs
        future.add_done_callback(
            lambda done: self._on_goal_response(done, frame, sequence, handler)
        )

    def _on_goal_response(
        self,
        future,  # noqa: ANN001
        frame: _Frame,
        sequence: int,
        handler: _OutputsHandler,
    ) -> None:
        handle = future.result()
        if sequence not in self._outstanding:
            return  # abandoned meanwhile
        if handle is None or not handle.accepted:
            self._finish_failed(sequence, 'goal rejected by the offload bridge')
            return
        handle.get_result_async().add_done_callback(
            lambda done: self._on_result(done, frame, sequence, handler)
        )

    def _abandon_unanswered_goals(self) -> None:
        timeout_s = self._config['goal_timeout_s']
        if timeout_s <= 0:
            return
        now = time.monotonic()
        for sequence, sent in list(self._outstanding.items()):
            if now - sent > timeout_s:
                del self._outstanding[sequence]
                self._counts['goals_abandoned'] += 1
                if self._worker is not None:
                    self._worker.detection_failed()
                self.get_logger().warning(
                    f'no result from the offload bridge {timeout_s:.1f} s after a goal: '
                    'abandoned it (was the bridge restarted?)',
                    throttle_duration_sec=5.0,
                )

    def _finish_failed(self, sequence: int, reason: str) -> None:
        self._outstanding.pop(sequence, None)
        self._counts['errors'] += 1
        if self._worker is not None:
            self._worker.detection_failed()
        self.get_logger().warning(f'frame not processed: {reason}', throttle_duration_sec=2.0)
        self._pump()

    def _on_result(
        self,
        future,  # noqa: ANN001
        frame: _Frame,
        sequence: int,
        handler: _OutputsHandler,
    ) -> None:
        if sequence not in self._outstanding:
            self._counts['late_results_ignored'] += 1
            return
        response = future.result()
        result = response.result
        if response.status != GoalStatus.STATUS_SUCCEEDED and not result.outputs:
            self._finish_failed(
                sequence,
                f'offload ended with status {response.status}: {result.error_message or "?"}',
            )
            return
        if result.error_code != Offload.Result.ERROR_NONE and not result.outputs:
            self._finish_failed(sequence, result.error_message)
            return
        try:
            outputs = {blob.name: from_tensor_blob(blob) for blob in result.outputs}
        except TensorBlobError as error:
            self._finish_failed(sequence, f'model outputs are not readable: {error}')
            return
        problem = handler(frame, result, outputs)
        if problem is not None:
            self._finish_failed(sequence, problem)
            return
        del self._outstanding[sequence]
        if result.fell_back:
            self._counts['fallbacks'] += 1
            self.get_logger().warning(
                f'inference fell back to {result.mode_used}: {result.fallback_reason}',
                throttle_duration_sec=5.0,
            )
        self._pump()

    def _on_people_outputs(
        self, frame: _Frame, result: Offload.Result, outputs: dict[str, np.ndarray]
    ) -> str | None:
        try:
            people = People.from_outputs(outputs, self._config['min_score'])
        except PeopleOutputError as error:
            return f'model outputs are not people: {error}'
        self._counts['results'] += 1
        self._latencies_s.append(time.monotonic() - frame.received_s)
        self._arrival_delays_s.append(frame.arrival_delay_s)
        self._last_mode = result.mode_used
        self._last_people = len(people)
        self._publish(frame.image, people, result.mode_used)
        return None

    def _publish(self, image: Image, people: People, mode: str) -> None:
        header = image.header
        model = self._config['model']
        self._people_pub.publish(
            to_person_array(people, header, model, self._model_is_trained, mode)
        )
        self._markers_pub.publish(
            to_markers(
                people,
                header,
                self._camera,
                self._config['marker_plane_depth_m'],
                self._config['min_keypoint_score'],
                self._config['marker_lifetime_s'],
                self._model_is_trained,
            )
        )
        if not self._config['publish_annotated']:
            return
        try:
            pixels = imgmsg_to_cv2(image, 'bgr8')
        except ImageFormatError:
            try:  # depth or float images: draw on a grey rendering instead
                pixels = _grey_to_bgr(imgmsg_to_cv2(image))
            except ImageFormatError as error:
                self.get_logger().warning(
                    f'cannot annotate the image: {error}', throttle_duration_sec=5.0
                )
                return
        caption = f'{model} | {mode} | {len(people)} people'
        canvas = draw_people(
            pixels, people, self._config['min_keypoint_score'], caption, self._model_is_trained
        )
        self._annotated_pub.publish(cv2_to_imgmsg(canvas, 'bgr8', header=header))

    # -- status -------------------------------------------------------------------------

    def _publish_diagnostics(self) -> None:
        latencies = np.array(self._latencies_s) if self._latencies_s else None
        values = dict(self._counts)
        values.update(in_flight=len(self._outstanding), queued=len(self._queue))
        values['last_mode'] = self._last_mode
        values['last_people'] = self._last_people
        # DDS-level links, for a graph whose results do not arrive: readers matched to the
        # results and whether the offload action server is seen at all.
        values['people_subscribers_matched'] = self._people_pub.get_subscription_count()
        values['offload_server_seen'] = self._client.server_is_ready()
        values['model_is_trained'] = self._model_is_trained
        if latencies is not None:
            values['latency_p50_s'] = f'{np.percentile(latencies, 50):.4f}'
            values['latency_p95_s'] = f'{np.percentile(latencies, 95):.4f}'
            # Of the same frames: capture stamp to arrival here (the frame's transport).
            arrival = np.percentile(np.array(self._arrival_delays_s), 50)
            values['arrival_delay_p50_s'] = f'{arrival:.4f}'
        if self._worker is not None:
            values.update(self._tracking_values())
        if self._last_refusal:
            values['last_refusal_reason'] = self._last_refusal
        level, message = self._health()
        status = diagnostic_status(
            f'{self.get_name()}: people detection',
            level,
            message,
            values,
            hardware_id=self._config['model'],
        )
        self._diagnostics_pub.publish(diagnostic_array(self, [status]))

    def _tracking_values(self) -> dict[str, object]:
        """Return the tracking thread's diagnostic values; log a changed landmark budget."""
        stats = self._worker.stats
        values: dict[str, object] = {
            'tracked_people': stats.tracked_now,
            'frames_tracked': stats.frames_tracked,
            'frames_dropped': stats.frames_dropped,
            'frames_not_tracked': stats.frames_failed,
            'landmark_runs': stats.landmark_runs,
            'tracks_started': stats.tracks_started,
            'tracks_lost': stats.tracks_lost,
            'front_end_requests': stats.detections_requested,
            'front_end_answers': stats.detections_answered,
            'front_end_waits_untracked': stats.untracked_waits,
            'front_end_interval_frames': stats.front_end_interval,
            'landmark_passes': stats.landmark_passes,
        }
        if stats.landmark_passes != self._logged_passes:
            budget = self._worker.landmark_passes
            why = (
                'tracking_landmark_passes'
                if budget.fixed is not None
                else f'one run of everybody {budget.pass_s * 1e3:.0f} ms, frames '
                f'{budget.interval_s * 1e3:.0f} ms apart, share {budget.max_share:g}'
            )
            self.get_logger().info(
                f'tracking: {stats.landmark_passes} landmark run(s) a person and frame ({why})'
            )
            self._logged_passes = stats.landmark_passes
        if self._worker.ground_plane is not None:
            plane = stats.ground_plane
            values['ground_plane'] = (
                f'fitting ({stats.ground_plane_samples} samples)'
                if plane is None
                else f'height {plane.slope:.3f} x foot row + {plane.intercept:.1f} px'
            )
        frames = max(stats.frames_tracked, 1)
        for stage in ('convert', 'catch_up', 'landmarks', 'publish'):
            seconds = getattr(stats, f'{stage}_s')
            values[f'tracking_{stage}_ms_per_frame'] = f'{seconds / frames * 1e3:.1f}'
        if self._front_end_latencies_s:
            front_end = np.array(self._front_end_latencies_s)
            values['front_end_latency_p50_s'] = f'{np.percentile(front_end, 50):.4f}'
        return values

    def _health(self) -> tuple[bytes, str]:
        """Return the diagnostic level and message from the counts so far."""
        counts = self._counts
        refused = counts['frames_too_large'] + counts['frames_refused']
        if counts['errors'] or counts['fallbacks'] or counts['goals_abandoned'] or refused:
            return WARN, (
                f'{counts["errors"]} frames failed, {counts["goals_abandoned"]} '
                f'goals unanswered, {counts["fallbacks"]} ran locally after a fallback, '
                f'{refused} refused before processing'
            )
        if counts['frames_dropped']:
            return OK, f'{counts["frames_dropped"]} frames dropped (inference busy)'
        return OK, 'ok'


def _destroyed(subscription: Subscription) -> bool:
    """Return True once rclpy has really destroyed ``subscription`` (it defers that)."""
    try:
        return not subscription.handle.pointer
    except InvalidHandle:
        return True


def _grey_to_bgr(values: np.ndarray) -> np.ndarray:
    values = np.nan_to_num(values.astype(np.float32))
    span = float(values.max() - values.min()) or 1.0
    grey = ((values - values.min()) / span * 255.0).astype(np.uint8)
    return np.repeat(grey[:, :, None], 3, axis=2)


def main(args: list[str] | None = None) -> int:
    """Run the people detection node until shutdown; exit code 1 on a bad configuration."""
    return run_node(
        PeopleDetectionNode,
        'people_detection',
        args,
        configuration_errors=(ValueError, ParameterException),
    )


if __name__ == '__main__':
    sys.exit(main())
