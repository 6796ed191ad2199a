# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The people detection node's tracking thread, without ROS: frames in, people out.

The landmark net is the real BlazePose model; the front end's answer is the real
``BlazePosePeople`` run on the photo, handed over as the node's action callback would.
"""

from __future__ import annotations

import threading
import time

import cv2
import numpy as np
import pytest

from edge_offload.assets import asset_path
from edge_offload_zoo.blazepose import BlazePosePeople
from edge_offload_zoo.ground_plane import GroundPlane, GroundPlaneFit
from edge_offload_zoo.people_tracking import (
    DetectionSchedule,
    LandmarkPassBudget,
    PeopleTracker,
    seeds_from_people,
)
from people_following.tracking_worker import TrackingWorker


def _wait(predicate, timeout_s: float = 30.0) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture(scope='module')
def photo() -> np.ndarray:
    return np.ascontiguousarray(
        cv2.imread(str(asset_path('media/darknet/person.jpg')))[:, :, ::-1]
    )


@pytest.fixture(scope='module')
def front_end() -> BlazePosePeople:
    return BlazePosePeople()


class _Recorder:
    def __init__(self) -> None:
        self.people: list[tuple[int, int]] = []  # (frame, people)
        self.due: list[int] = []
        self.planes: list[GroundPlane | None] = []
        self.errors: list[tuple[int, str]] = []
        self.release = threading.Event()
        self.release.set()

    def on_people(self, item: tuple[int, np.ndarray], people: list) -> None:
        self.release.wait(10.0)
        self.people.append((item[0], len(people)))

    def on_due(self, item: tuple[int, np.ndarray], ground_plane: GroundPlane | None) -> None:
        self.due.append(item[0])
        self.planes.append(ground_plane)

    def on_error(self, item: tuple[int, np.ndarray], error: Exception) -> None:
        self.errors.append((item[0], str(error)))


def _to_rgb(item: tuple[int, np.ndarray | None]) -> np.ndarray:
    if item[1] is None:
        raise ValueError('not an RGB image')  # as imgmsg_to_cv2 on a depth image
    return item[1]


def _worker(front_end: BlazePosePeople, recorder: _Recorder, **kwargs) -> TrackingWorker:  # noqa: ANN003
    every = kwargs.pop('every_n_frames', 3)
    return TrackingWorker(
        PeopleTracker(front_end.landmarker),
        DetectionSchedule(every, kwargs.pop('min_every_n_frames', every)),
        to_rgb=_to_rgb,
        on_people=recorder.on_people,
        on_detection_due=recorder.on_due,
        on_error=recorder.on_error,
        **kwargs,
    )


def test_frames_are_tracked_once_the_front_end_answers(
    photo: np.ndarray, front_end: BlazePosePeople
) -> None:
    recorder = _Recorder()
    worker = _worker(front_end, recorder, queue_size=8)
    try:
        worker.submit((0, photo))
        assert _wait(lambda: recorder.people == [(0, 0)])
        assert recorder.due == [0]  # nobody tracked: the front end is asked at once
        # No answer yet: no second request, whatever the schedule says.
        worker.submit((1, photo))
        assert _wait(lambda: len(recorder.people) == 2)
        assert recorder.due == [0]
        worker.add_seeds(seeds_from_people(front_end.people(photo)))
        for frame in range(2, 6):
            worker.submit((frame, photo))
        assert _wait(lambda: len(recorder.people) == 6)
        assert recorder.people[2:] == [(frame, 1) for frame in range(2, 6)]
        # Answered at frame 0; due again 3 frames after that request.
        assert recorder.due == [0, 3]
        stats = worker.stats
        assert (stats.frames_tracked, stats.tracks_started, stats.tracked_now) == (6, 1, 1)
        assert stats.landmark_runs == 4
        assert not worker.busy()
    finally:
        worker.stop()


def test_landmark_passes_follow_the_time_the_frames_leave(
    photo: np.ndarray, front_end: BlazePosePeople
) -> None:
    recorder = _Recorder()
    budget = LandmarkPassBudget(max_share=1.0, window=3)
    worker = _worker(front_end, recorder, queue_size=8, landmark_passes=budget)
    runs: list[int] = []
    try:
        assert worker.tracker.landmark_passes == worker.stats.landmark_passes == 1
        worker.add_seeds(seeds_from_people(front_end.people(photo)))
        # Frames 0.6 s apart: one landmark run of one person takes a small part of that,
        # so once 3 frames are measured it runs the flip test (and its second pass).
        for frame in range(6):
            before = worker.stats.landmark_runs
            worker.submit((frame, photo))
            assert _wait(lambda frame=frame: len(recorder.people) == frame + 1)
            runs.append(worker.stats.landmark_runs - before)
            time.sleep(0.6)
        assert runs[:3] == [1, 1, 1]
        assert runs[-1] in (2, 4)
        assert worker.stats.landmark_passes == worker.tracker.landmark_passes == runs[-1]
        # Frames back to back: no time is left between them, so back to one run.
        for frame in range(6, 12):
            worker.submit((frame, photo))
        assert _wait(lambda: len(recorder.people) >= 8 and not worker.busy())
        assert worker.stats.landmark_passes == worker.tracker.landmark_passes == 1
        assert recorder.errors == []
    finally:
        worker.stop()


def test_the_front_end_is_asked_as_often_as_its_answers_allow(
    photo: np.ndarray, front_end: BlazePosePeople
) -> None:
    seeds = seeds_from_people(front_end.people(photo))

    def requests(answer_after: int, frames: int) -> tuple[list[int], int]:
        """Answer each request ``answer_after`` frames later; return the frames asked on."""
        recorder = _Recorder()
        worker = _worker(
            front_end, recorder, queue_size=8, every_n_frames=10, min_every_n_frames=3
        )
        try:
            assert worker.stats.front_end_interval == 10  # nothing measured yet
            for frame in range(frames):
                if recorder.due and frame == recorder.due[-1] + answer_after:
                    worker.add_seeds(seeds)
                worker.submit((frame, photo))
                assert _wait(lambda frame=frame: len(recorder.people) == frame + 1)
            return recorder.due, worker.stats.front_end_interval
        finally:
            worker.stop()

    # One frame late: 1 / max_duty 0.4 -> every 3 frames.
    assert requests(1, 10) == ([0, 3, 6, 9], 3)
    # Four frames late (the front end on the robot's own cores): every 10.
    assert requests(4, 25) == ([0, 10, 20], 10)


def test_requests_carry_the_ground_plane_fitted_to_the_tracked_people(
    photo: np.ndarray, front_end: BlazePosePeople
) -> None:
    seeds = seeds_from_people(front_end.people(photo))
    # People seen earlier at two distances; the photo's person adds samples at a third.
    fit = GroundPlaneFit(min_samples=2, min_spread=0.0, full_scan_every=3)
    recorder = _Recorder()
    worker = _worker(front_end, recorder, queue_size=8, every_n_frames=2, ground_plane=fit)
    try:
        worker.submit((0, photo))
        assert _wait(lambda: len(recorder.people) == 1)
        assert recorder.planes == [None]  # nothing fitted yet: every row
        assert worker.stats.ground_plane is None
        fit.add(np.array([[0.0, 100.0, 10.0, 200.0], [0.0, 150.0, 10.0, 350.0]]), 576)
        for frame in range(1, 9):
            if recorder.due[-1] == frame - 1:
                worker.add_seeds(seeds)  # each request answered on the next frame
            worker.submit((frame, photo))
            assert _wait(lambda frame=frame: len(recorder.people) == frame + 1)
        # Requests on frames 0, 2, 4, 6, 8: the third and the sixth scan every row.
        assert recorder.due == [0, 2, 4, 6, 8]
        assert [plane is None for plane in recorder.planes] == [True, False, True, False, False]
        assert recorder.planes[1].slope == pytest.approx(1.0, rel=0.3)
        assert worker.stats.ground_plane is not None
        assert fit.samples > 2  # the tracked person, on every frame
    finally:
        worker.stop()


def test_a_frame_asked_on_while_nobody_is_tracked_waits_for_its_answer(
    photo: np.ndarray, front_end: BlazePosePeople
) -> None:
    seeds = seeds_from_people(front_end.people(photo))
    recorder = _Recorder()
    # The front end answers from another thread, as the node's action callbacks do.
    recorder.on_due = lambda item, plane: threading.Timer(0.2, worker.add_seeds, [seeds]).start()
    worker = _worker(front_end, recorder, queue_size=8, untracked_wait_s=30.0)
    try:
        worker.submit((0, photo))
        assert _wait(lambda: recorder.people == [(0, 1)])  # found on the frame it was asked on
        worker.submit((1, photo))
        assert _wait(lambda: recorder.people == [(0, 1), (1, 1)])
        assert worker.stats.untracked_waits == 1  # frame 1 had somebody to track
    finally:
        worker.stop()

    # A front end that fails ends the wait at once: the frame goes on with nobody.
    recorder = _Recorder()
    recorder.on_due = lambda item, plane: threading.Timer(0.2, worker.detection_failed).start()
    worker = _worker(front_end, recorder, untracked_wait_s=600.0)  # _wait gives up at 30 s
    try:
        worker.submit((0, photo))
        assert _wait(lambda: recorder.people == [(0, 0)])
    finally:
        worker.stop()

    # One that does not answer in untracked_wait_s is waited for no longer; its late answer
    # is tracked from the next frame, as with people tracked.
    recorder = _Recorder()
    worker = _worker(front_end, recorder, untracked_wait_s=0.2)
    try:
        worker.submit((0, photo))
        assert _wait(lambda: recorder.people == [(0, 0)])
        worker.add_seeds(seeds)
        worker.submit((1, photo))
        assert _wait(lambda: recorder.people == [(0, 0), (1, 1)])
    finally:
        worker.stop()
    with pytest.raises(ValueError, match='untracked_wait_s'):
        _worker(front_end, _Recorder(), untracked_wait_s=-1.0)


def test_a_full_queue_drops_its_oldest_frame(
    photo: np.ndarray, front_end: BlazePosePeople
) -> None:
    recorder = _Recorder()
    recorder.release.clear()  # hold the thread inside the first frame
    worker = _worker(front_end, recorder, queue_size=2)
    try:
        worker.submit((0, photo))
        assert _wait(lambda: worker.busy() and not worker._queue)  # noqa: SLF001
        assert worker.submit((1, photo))
        assert worker.submit((2, photo))
        assert not worker.submit((3, photo))  # drops frame 1
        recorder.release.set()
        assert _wait(lambda: len(recorder.people) == 3)
        assert [frame for frame, _ in recorder.people] == [0, 2, 3]
        assert worker.stats.frames_dropped == 1
    finally:
        worker.stop()


def test_a_frame_that_fails_is_reported_and_tracking_goes_on(
    photo: np.ndarray, front_end: BlazePosePeople
) -> None:
    recorder = _Recorder()
    worker = _worker(front_end, recorder)
    try:
        worker.submit((0, None))
        assert _wait(lambda: recorder.errors)
        assert recorder.errors == [(0, 'not an RGB image')]
        worker.submit((1, photo))
        assert _wait(lambda: recorder.people == [(1, 0)])
        assert worker.stats.frames_failed == 1
        # A failed front end is asked again on the next frame.
        worker.detection_failed()
        worker.submit((2, photo))
        assert _wait(lambda: recorder.due[-1:] == [2])
    finally:
        worker.stop()


def test_stop_ends_the_thread(front_end: BlazePosePeople) -> None:
    worker = _worker(front_end, _Recorder())
    worker.stop()
    assert not worker._thread.is_alive()  # noqa: SLF001
    with pytest.raises(ValueError, match='queue_size'):
        _worker(front_end, _Recorder(), queue_size=0)
