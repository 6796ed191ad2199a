# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The people detection node's tracking thread (no rclpy: callbacks in, callbacks out).

Frames go into a bounded queue that drops its oldest frame when full (a tracker wants the
newest frame, not a backlog). One thread takes them in order and, per frame:

1. starts tracks for the people of any front-end answer that came in meanwhile
   (``add_seeds``, called from the node's action callbacks), each followed first
   through the frames tracked since the one the front end saw (``CatchUpFrames``);
2. asks for the multi-person front end when ``DetectionSchedule`` says it is due and none
   is outstanding (``on_detection_due(item, ground_plane)``: the node sends that frame to
   the bridge); the schedule asks more often the sooner the answers come (``answered``);
   the request carries the ground plane fitted to the people tracked so far
   (``GroundPlaneFit``), so that the front end searches each scale only where its people
   stand;
3. runs the tracker on the frame, with as many landmark runs a person as the measured
   landmark time and interval between frames allow (``LandmarkPassBudget``), and hands
   the people to ``on_people``, which a second thread calls (drawing and publishing a
   frame overlaps tracking the next; two results at most wait for it, then tracking
   waits: none is dropped, the order is kept).

The front end thus runs beside tracking, on the edge server or in the bridge, never in
front of it, except while nobody is tracked: then the frame it is asked on waits for its
answer (``untracked_wait_s`` at most) and is tracked from it, so the people it finds are
reported on that frame, not some frames later (there is nobody to track meanwhile). On
vtest.avi that is the first frame's three people. A front end that fails or never answers
is given up by the node (``detection_failed``) and asked again on the next frame.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from edge_offload_zoo.blazepose import Person
from edge_offload_zoo.ground_plane import GroundPlane, GroundPlaneFit
from edge_offload_zoo.people_tracking import (
    CatchUpFrames,
    DetectionSchedule,
    LandmarkPassBudget,
    PeopleTracker,
    Seed,
)

Item = TypeVar('Item')


@dataclass
class TrackingStats:
    """Counters of the tracking thread (written by it alone; publish_s by the output thread)."""

    frames_tracked: int = 0
    frames_dropped: int = 0
    frames_failed: int = 0
    landmark_runs: int = 0
    tracks_lost: int = 0
    tracks_started: int = 0
    detections_requested: int = 0
    detections_answered: int = 0
    detections_failed: int = 0
    untracked_waits: int = 0  # frames that waited for the front end, nobody being tracked
    front_end_interval: int = 0  # frames between front-end requests now (the schedule's)
    landmark_passes: int = 1  # landmark runs a tracked person gets a frame now
    ground_plane: GroundPlane | None = None  # the fit at the last request (None: not yet)
    ground_plane_samples: int = 0
    tracked_now: int = 0
    # Seconds spent per stage, over all tracked frames (mean = total / frames_tracked).
    convert_s: float = 0.0
    catch_up_s: float = 0.0
    landmarks_s: float = 0.0
    publish_s: float = 0.0


class TrackingWorker(Generic[Item]):
    """Track people on queued frames in a thread of its own (see the module docstring)."""

    def __init__(
        self,
        tracker: PeopleTracker,
        schedule: DetectionSchedule,
        *,
        to_rgb: Callable[[Item], np.ndarray],
        on_people: Callable[[Item, list[Person]], None],
        on_detection_due: Callable[[Item, GroundPlane | None], None],
        on_error: Callable[[Item, Exception], None],
        queue_size: int = 1,
        untracked_wait_s: float = 0.0,
        ground_plane: GroundPlaneFit | None = None,
        landmark_passes: LandmarkPassBudget | None = None,
    ) -> None:
        if queue_size < 1:
            raise ValueError(f'queue_size must be at least 1, got {queue_size}')
        if untracked_wait_s < 0:
            raise ValueError(f'untracked_wait_s must be >= 0, got {untracked_wait_s}')
        self.untracked_wait_s = untracked_wait_s
        self.tracker = tracker
        self.schedule = schedule
        self.ground_plane = ground_plane  # tracking thread only
        # Guarded by _condition: frames arrive on the caller's thread.
        self.landmark_passes = landmark_passes or LandmarkPassBudget(fixed=tracker.landmark_passes)
        tracker.landmark_passes = self.landmark_passes.passes
        self.stats = TrackingStats(
            front_end_interval=schedule.interval, landmark_passes=tracker.landmark_passes
        )
        self._to_rgb = to_rgb
        self._on_people = on_people
        self._on_detection_due = on_detection_due
        self._on_error = on_error
        self._queue: collections.deque[Item] = collections.deque(maxlen=queue_size)
        self._seeds: list[Seed] | None = None
        # Frames since the last front-end request (tracking thread only).
        self._since = CatchUpFrames()
        self._seen: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._detection_outstanding = False
        self._busy = False
        self._stop = False
        self._condition = threading.Condition()
        self._results: queue.Queue[tuple[Item, list[Person]] | None] = queue.Queue(maxsize=2)
        self._output_busy = False
        self._thread = threading.Thread(target=self._run, name='people_tracking', daemon=True)
        self._output = threading.Thread(target=self._hand_out, name='people_output', daemon=True)
        self._thread.start()
        self._output.start()

    def submit(self, item: Item) -> bool:
        """Queue a frame; return False when that dropped the oldest queued one."""
        with self._condition:
            self.landmark_passes.frame_arrived(time.monotonic())
            dropped = len(self._queue) == self._queue.maxlen
            if dropped:
                self.stats.frames_dropped += 1
            self._queue.append(item)
            self._condition.notify()
        return not dropped

    def add_seeds(self, seeds: Sequence[Seed]) -> None:
        """Hand over the front end's people; they are tracked from the next frame on."""
        with self._condition:
            self._seeds = list(seeds)
            self._detection_outstanding = False
            self.stats.detections_answered += 1
            self._condition.notify_all()

    def detection_failed(self) -> None:
        """Forget the outstanding front-end request; the next frame asks again."""
        with self._condition:
            self._detection_outstanding = False
            self.stats.detections_failed += 1
            self._condition.notify_all()

    def busy(self) -> bool:
        """Return True while frames wait, one is being tracked or its people handed out."""
        with self._condition:
            return bool(self._queue) or self._busy or self._output_busy

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop the thread after the frame it is on; queued frames are dropped."""
        with self._condition:
            self._stop = True
            self._queue.clear()
            self._condition.notify_all()
        self._thread.join(timeout=timeout_s)
        # After the tracking thread: it may be waiting to queue its last result.
        while True:
            try:
                self._results.get_nowait()
            except queue.Empty:
                break
        self._results.put(None)
        self._output.join(timeout=timeout_s)

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._queue and not self._stop:
                    self._condition.wait()
                if self._stop:
                    return
                item = self._queue.popleft()
                self._busy = True
                seeds, self._seeds = self._seeds, None
                # People of an answer in hand count as tracked: no new request for them.
                tracked = len(self.tracker.tracks) + len(seeds or ())
                ask = not self._detection_outstanding and self.schedule.due(
                    self.stats.frames_tracked, tracked
                )
                if ask:
                    self._detection_outstanding = True
                    self.stats.detections_requested += 1
            try:
                self._track(item, seeds, ask)
            finally:
                with self._condition:
                    self._busy = False

    def _track(self, item: Item, seeds: list[Seed] | None, ask: bool) -> None:
        frame = self.stats.frames_tracked
        try:
            if seeds is not None:
                # The last request's answer, applied on this frame: its latency sets the
                # schedule's interval (an answer a frame waits for below is not counted).
                self.schedule.answered(frame)
                self.stats.front_end_interval = self.schedule.interval
            if ask:
                self.schedule.requested(frame)
                self._on_detection_due(item, self._plane_for_request())
                # Whom the answer will cover: the tracks of the frame the front end sees.
                self._seen = self.tracker.positions()
                if not seeds and not self.tracker.tracks and self.untracked_wait_s > 0:
                    # Nobody to track meanwhile: this frame waits for its own answer.
                    self._since.restart()
                    seeds = self._await_seeds()
            started = time.perf_counter()
            image = self._to_rgb(item)
            converted = time.perf_counter()
            if seeds:
                self.stats.tracks_started += self.tracker.seed(
                    seeds, self._since.frames(), self._seen
                )
            if ask:
                self._since.restart()
            caught_up = time.perf_counter()
            stepping = len(self.tracker.tracks)
            result = self.tracker.step(image)
            stepped = time.perf_counter()
            if not ask:
                self._since.add(image)
        except Exception as error:  # noqa: BLE001 - one bad frame must not end tracking
            self.stats.frames_failed += 1
            self._on_error(item, error)
            return
        self.schedule.note_lost(result.lost)
        if self.ground_plane is not None:
            self.ground_plane.add(np.array([p.box for p in result.people]), image.shape[0])
        stats = self.stats
        stats.frames_tracked += 1
        stats.landmark_runs += result.landmark_runs
        stats.tracks_lost += result.lost
        stats.tracked_now = len(result.people)
        stats.convert_s += converted - started
        stats.catch_up_s += caught_up - converted
        stats.landmarks_s += stepped - caught_up
        with self._condition:
            passes = self.landmark_passes.stepped(
                stepped - caught_up, result.landmark_runs, stepping
            )
        self.tracker.landmark_passes = stats.landmark_passes = passes
        with self._condition:
            self._output_busy = True  # busy() stays true from here until handed out
        self._results.put((item, result.people))

    def _plane_for_request(self) -> GroundPlane | None:
        if self.ground_plane is None:
            return None
        self.stats.ground_plane = self.ground_plane.plane()
        self.stats.ground_plane_samples = self.ground_plane.samples
        return self.ground_plane.for_request()

    def _await_seeds(self) -> list[Seed] | None:
        """Wait for the outstanding front-end answer (``untracked_wait_s`` at most)."""
        with self._condition:
            self._condition.wait_for(
                lambda: self._seeds is not None or not self._detection_outstanding or self._stop,
                timeout=self.untracked_wait_s,
            )
            seeds, self._seeds = self._seeds, None
            self.stats.untracked_waits += 1
        return seeds

    def _hand_out(self) -> None:
        while (entry := self._results.get()) is not None:
            item, people = entry
            started = time.perf_counter()
            try:
                self._on_people(item, people)
            except Exception as error:  # noqa: BLE001 - one bad publish must not end output
                self._on_error(item, error)
            self.stats.publish_s += time.perf_counter() - started
            with self._condition:
                self._output_busy = not self._results.empty()
