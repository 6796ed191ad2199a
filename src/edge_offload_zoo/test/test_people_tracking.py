# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""People tracked between detections (edge_offload_zoo.people_tracking), on real images.

The landmark net is the real BlazePose GHUM model (torch port); the photos are the ones
the keypoint labels are on, so a tracked person can be checked against the front end.
"""

from __future__ import annotations

import threading
import time

import cv2
import numpy as np
import pytest
import torch

from edge_offload.assets import asset_path
from edge_offload.models import load_model
from edge_offload_zoo.blazepose import (
    COCO_FROM_BLAZEPOSE,
    BlazePoseLandmarker,
    BlazePosePeople,
    Roi,
    load_landmark_net,
)
from edge_offload_zoo.detection_metrics import iou_matrix
from edge_offload_zoo.ground_plane import GroundPlane, GroundPlaneFit
from edge_offload_zoo.people_tracking import (
    DetectionSchedule,
    LandmarkPassBudget,
    ParallelLandmarks,
    PeopleTracker,
    Seed,
    TrackedPeople,
    people_front_end,
    seeds_from_outputs,
    seeds_from_people,
)


def load_litert_landmarks():  # noqa: ANN201 - an nn.Module
    return load_landmark_net('litert', num_threads=1)


def _rgb(asset: str) -> np.ndarray:
    return np.ascontiguousarray(cv2.imread(str(asset_path(asset)))[:, :, ::-1])


@pytest.fixture(scope='module')
def person() -> np.ndarray:
    return _rgb('media/darknet/person.jpg')


@pytest.fixture(scope='module')
def front_end() -> BlazePosePeople:
    return BlazePosePeople()


@pytest.fixture(scope='module')
def found(front_end: BlazePosePeople, person: np.ndarray) -> list:
    people = front_end.people(person)
    assert len(people) == 1
    return people


def test_a_seeded_person_is_tracked_on_the_next_frames(
    front_end: BlazePosePeople, person: np.ndarray, found: list
) -> None:
    tracker = PeopleTracker(front_end.landmarker)
    assert tracker.seed(seeds_from_people(found)) == 1
    for _ in range(3):
        result = tracker.step(person)
        assert result.landmark_runs == 1
        assert result.lost == 0
        assert len(result.people) == 1
        tracked = result.people[0]
        assert tracked.source == 'tracked'
        assert iou_matrix(tracked.box, found[0].box)[0, 0] > 0.85
        # Keypoints of the one-pass tracked net stay within a few px of the front end's.
        error = np.linalg.norm(tracked.keypoints[:, :2] - found[0].keypoints[:, :2], axis=1)
        assert np.median(error) < 6.0
    assert tracker.tracks[0].frames == 3


class _RecordingLandmarker:
    """The real landmarker, recording which run each step made and what it returned."""

    def __init__(self, landmarker: BlazePoseLandmarker) -> None:
        self.landmarker = landmarker
        self.runs: list[tuple[str, object]] = []

    def landmarks(self, image: np.ndarray, roi: Roi):  # noqa: ANN201
        found = self.landmarker.landmarks(image, roi)
        self.runs.append(('plain', found))
        return found

    def mirrored_landmarks(self, image: np.ndarray, roi: Roi, mirrored_image=None):  # noqa: ANN001, ANN201
        found = self.landmarker.mirrored_landmarks(image, roi, mirrored_image)
        self.runs.append(('mirrored', found))
        return found


def test_tracks_alternate_mirrored_runs_and_report_the_mean_of_the_last_two(
    front_end: BlazePosePeople, person: np.ndarray, found: list
) -> None:
    recording = _RecordingLandmarker(front_end.landmarker)
    tracker = PeopleTracker([recording])
    tracker.seed(seeds_from_people(found))
    reported = [tracker.step(person).people[0] for _ in range(4)]
    assert [kind for kind, _ in recording.runs] == ['plain', 'mirrored', 'plain', 'mirrored']
    # The first frame has nothing to average with; later ones average with the last
    # frame's landmarks moved on by the track's velocity (a still photo: about 0 px).
    first = recording.runs[0][1]
    np.testing.assert_allclose(reported[0].keypoints, first.coco_keypoints(), atol=1e-4)
    dx, dy = tracker.tracks[0].velocity
    last, now = recording.runs[2][1], recording.runs[3][1]
    expected = (now.points[:, :2] + last.points[:, :2] + np.array([dx, dy])) / 2.0
    np.testing.assert_allclose(
        reported[3].keypoints[:, :2], expected[list(COCO_FROM_BLAZEPOSE)], atol=1e-3
    )
    # The mirrored run is an estimate of the same body.
    assert iou_matrix(reported[3].box, found[0].box)[0, 0] > 0.85

    plain = _RecordingLandmarker(front_end.landmarker)
    tracker = PeopleTracker([plain], alternate_mirror=False, average_two_frames=False)
    tracker.seed(seeds_from_people(found))
    people = [tracker.step(person).people[0] for _ in range(2)]
    assert [kind for kind, _ in plain.runs] == ['plain', 'plain']
    np.testing.assert_allclose(people[1].keypoints, plain.runs[1][1].coco_keypoints())


def test_more_landmark_passes_run_the_flip_test_and_its_second_pass(
    front_end: BlazePosePeople, person: np.ndarray, found: list
) -> None:
    flip = ['plain', 'mirrored']
    for passes, kinds in ((2, flip), (4, flip + flip)):
        recording = _RecordingLandmarker(front_end.landmarker)
        tracker = PeopleTracker([recording], landmark_passes=passes)
        tracker.seed(seeds_from_people(found))
        for _ in range(2):
            recording.runs.clear()
            result = tracker.step(person)
            assert result.landmark_runs == passes
            assert [kind for kind, _ in recording.runs] == kinds
            # This frame's flip test alone: no averaging with the last frame.
            plain, mirrored = recording.runs[-2][1], recording.runs[-1][1]
            np.testing.assert_allclose(
                result.people[0].keypoints, plain.averaged(mirrored).coco_keypoints(), atol=1e-4
            )
            assert iou_matrix(result.people[0].box, found[0].box)[0, 0] > 0.85
        if passes == 4:
            # The second pass looks where the first pass's landmarks say the body is.
            first = recording.runs[0][1].averaged(recording.runs[1][1])
            assert recording.runs[2][1].roi == first.next_roi()
    # Changed between steps (as LandmarkPassBudget does): the next step runs once.
    tracker.landmark_passes = 1
    assert tracker.step(person).landmark_runs == 1
    with pytest.raises(ValueError, match='landmark_passes'):
        PeopleTracker(front_end.landmarker, landmark_passes=3)


def _arrivals(budget: LandmarkPassBudget, count: int, interval_s: float) -> None:
    for index in range(count):
        budget.frame_arrived(100.0 + index * interval_s)


def test_landmark_pass_budget_spends_the_time_the_frames_leave() -> None:
    budget = LandmarkPassBudget(max_share=0.5, window=5)
    _arrivals(budget, 6, 0.1)  # 10 fps: 50 ms for landmarks
    # 2 shared cores: one run for each of 5 people takes 65 ms, over the budget already.
    assert [budget.stepped(0.065, runs=5, tracks=5) for _ in range(5)] == [1] * 5
    # Cheaper from here on: once the window's median turns (the third sample), the most
    # passes that fit, with a fifth to spare when stepping up: 9 ms a pass -> 4, 36 ms.
    assert [budget.stepped(0.009, runs=5, tracks=5) for _ in range(5)] == [1, 1, 4, 4, 4]
    # Slower now (another process took a core): 4 passes take 60 ms -> down to 2.
    assert [budget.stepped(0.060, runs=20, tracks=5) for _ in range(5)][-1] == 2
    # 22 ms a pass: 2 passes (44 ms) still fit the budget, but 44 ms would not have
    # been enough spare to step up from 1 to 2.
    assert [budget.stepped(0.044, runs=10, tracks=5) for _ in range(5)][-1] == 2
    slower = LandmarkPassBudget(max_share=0.5, window=5)
    _arrivals(slower, 6, 0.1)
    assert [slower.stepped(0.022, runs=5, tracks=5) for _ in range(5)][-1] == 1
    # Frames without people say nothing about a run's cost.
    empty = LandmarkPassBudget(max_share=0.5, window=2)
    _arrivals(empty, 3, 0.1)
    assert [empty.stepped(0.0, runs=0, tracks=0) for _ in range(5)] == [1] * 5
    # Frames arriving as fast as they are tracked (every-frame evaluation) leave no spare.
    back_to_back = LandmarkPassBudget(max_share=0.5, window=3)
    _arrivals(back_to_back, 4, 0.012)
    assert [back_to_back.stepped(0.010, runs=1, tracks=1) for _ in range(3)][-1] == 1


def test_landmark_pass_budget_can_be_fixed_and_is_validated() -> None:
    fixed = LandmarkPassBudget(fixed=4, window=1)
    _arrivals(fixed, 3, 0.1)
    assert fixed.passes == 4
    assert fixed.stepped(10.0, runs=4, tracks=1) == 4
    for bad in ({'fixed': 3}, {'max_share': 0.0}, {'max_share': 1.5}, {'window': 0}):
        with pytest.raises(ValueError, match='must'):
            LandmarkPassBudget(**bad)


def test_a_seed_on_a_tracked_person_starts_no_second_track(
    front_end: BlazePosePeople, person: np.ndarray, found: list
) -> None:
    tracker = PeopleTracker(front_end.landmarker)
    tracker.seed(seeds_from_people(found))
    tracker.step(person)
    assert tracker.seed(seeds_from_people(found)) == 0
    assert len(tracker.tracks) == 1
    # A seed elsewhere in the frame is somebody else.
    far = Seed(np.array([0.0, 0.0, 40.0, 80.0]), Roi(20.0, 40.0, 100.0, 0.0), 0.9)
    assert tracker.seed([far]) == 1
    assert len(tracker.tracks) == 2


def test_a_person_who_disappears_is_held_for_max_misses_frames_then_lost(
    front_end: BlazePosePeople, person: np.ndarray, found: list
) -> None:
    tracker = PeopleTracker(front_end.landmarker, max_misses=2)
    tracker.seed(seeds_from_people(found))
    assert len(tracker.step(person).people) == 1
    blank = np.zeros_like(person)
    roi = tracker.tracks[0].roi
    for _ in range(2):
        result = tracker.step(blank)
        assert result.people == []
        assert result.lost == 0
        assert tracker.tracks[0].roi == roi  # the last good ROI is kept
    # Back in view within max_misses frames: reported again.
    assert len(tracker.step(person).people) == 1
    for _ in range(2):
        tracker.step(blank)
    result = tracker.step(blank)
    assert result.lost == 1
    assert tracker.tracks == ()


def _shifted(image: np.ndarray, dx: float) -> np.ndarray:
    move = np.array([[1.0, 0.0, dx], [0.0, 1.0, 0.0]])
    return cv2.warpAffine(image, move, (image.shape[1], image.shape[0]))


def test_a_hidden_person_is_looked_for_where_they_have_walked_to(
    front_end: BlazePosePeople, person: np.ndarray, found: list
) -> None:
    tracker = PeopleTracker(front_end.landmarker, max_misses=3)
    tracker.seed(seeds_from_people(found))
    step_px = 6.0
    for frame in range(5):  # walking right, 6 px a frame
        assert len(tracker.step(_shifted(person, step_px * frame)).people) == 1
    track = tracker.tracks[0]
    assert track.velocity[0] == pytest.approx(step_px, abs=2.0)
    assert abs(track.velocity[1]) < 2.0
    before = track.roi
    blank = np.zeros_like(person)
    for missed in range(1, 3):
        assert tracker.step(blank).people == []
        assert tracker.tracks[0].roi.x_center == pytest.approx(
            before.x_center + missed * track.velocity[0]
        )
    # Where the ROI went, the person is: found again after two hidden frames.
    again = tracker.step(_shifted(person, step_px * 7))
    assert len(again.people) == 1
    assert again.people[0].box[0] > found[0].box[0] + 5 * step_px


def test_seeds_are_judged_on_the_tracks_of_the_frame_the_front_end_saw(
    front_end: BlazePosePeople, person: np.ndarray, found: list
) -> None:
    runs = []
    landmarker = front_end.landmarker

    class Counting(BlazePoseLandmarker):
        def landmarks(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            runs.append(1)
            return landmarker.landmarks(*args, **kwargs)

    tracker = PeopleTracker(Counting(model=landmarker.model))
    tracker.seed(seeds_from_people(found))
    tracker.step(person)
    seen = tracker.positions()
    assert list(seen) == [tracker.tracks[0].track_id]
    frames_since = [person] * 4
    runs.clear()
    # Tracked when asked and still tracked: covered, with no catch-up run.
    assert tracker.seed(seeds_from_people(found), frames_since, seen) == 0
    assert runs == []
    # Tracked when asked, lost since: the seed re-finds the same track.
    track = tracker.tracks[0]
    tracker.step(np.zeros_like(person))
    assert track.misses == 1
    assert tracker.seed(seeds_from_people(found), frames_since, seen) == 0
    assert runs  # followed through the frames since
    assert tracker.tracks == (track,)
    assert len(tracker.step(person).people) == 1
    assert track.misses == 0


def test_landmarks_side_by_side_give_what_one_landmarker_gives() -> None:
    photo = _rgb('media/opencv/basketball2.png')
    lite = load_model('blazepose_lite_people').module
    seeds = seeds_from_people(lite.people(photo))
    assert len(seeds) >= 2  # two people at least, so runs do go side by side
    trackers = [
        PeopleTracker(lite.landmarker),
        PeopleTracker([lite.landmarker, BlazePoseLandmarker(model=load_litert_landmarks())]),
    ]
    results = []
    for tracker in trackers:
        tracker.seed(seeds)
        results.append([tracker.step(photo).people for _ in range(2)])
    for one, two in zip(*results, strict=True):
        assert len(one) == len(two) == len(seeds)
        for a, b in zip(one, two, strict=True):
            np.testing.assert_allclose(a.keypoints, b.keypoints, atol=1e-4)


def test_parallel_landmarks_keep_the_order_and_use_each_landmarker_alone() -> None:
    users: dict[int, int] = {}
    most: list[int] = []
    lock = threading.Lock()
    landmarkers = [BlazePoseLandmarker(model=load_litert_landmarks()) for _ in range(2)]

    def run(landmarker: BlazePoseLandmarker, job: int) -> int:
        with lock:
            users[id(landmarker)] = users.get(id(landmarker), 0) + 1
            most.append(users[id(landmarker)])
        time.sleep(0.01)
        with lock:
            users[id(landmarker)] -= 1
        return job * 2

    parallel = ParallelLandmarks(landmarkers)
    assert parallel.map(run, list(range(12))) == [job * 2 for job in range(12)]
    assert max(most) == 1
    with pytest.raises(ValueError, match='at least one'):
        ParallelLandmarks([])


def test_a_seed_on_nobody_is_dropped_at_its_first_frame(person: np.ndarray) -> None:
    tracker = PeopleTracker(BlazePoseLandmarker())
    nobody = Seed(np.array([0.0, 0.0, 30.0, 30.0]), Roi(15.0, 15.0, 30.0, 0.0), 0.9)
    tracker.seed([nobody])
    result = tracker.step(np.zeros_like(person))
    assert result.people == []
    assert result.lost == 1
    assert tracker.tracks == ()


def test_two_tracks_on_one_body_merge(
    front_end: BlazePosePeople, person: np.ndarray, found: list
) -> None:
    tracker = PeopleTracker(front_end.landmarker, seed_iou=1.0)  # let both in
    seed = seeds_from_people(found)[0]
    shifted = Seed(
        seed.box + 4.0, Roi(seed.roi.x_center + 4, seed.roi.y_center, seed.roi.size, 0), 0.5
    )
    assert tracker.seed([seed, shifted]) == 2
    result = tracker.step(person)
    assert result.merged == 1
    assert len(result.people) == 1
    assert len(tracker.tracks) == 1


def test_detection_schedule() -> None:
    schedule = DetectionSchedule(every_n_frames=3)
    assert schedule.due(0, tracked=0)  # nothing run yet
    schedule.requested(0)
    assert not schedule.due(1, tracked=2)
    assert schedule.due(1, tracked=0)  # nobody tracked: look again at once
    assert schedule.due(3, tracked=2)
    schedule.requested(3)
    schedule.note_lost(0)
    assert not schedule.due(4, tracked=2)
    schedule.note_lost(1)
    assert schedule.due(4, tracked=2)  # a track was lost
    schedule.requested(4)
    assert not schedule.due(5, tracked=2)
    with pytest.raises(ValueError, match='every_n_frames'):
        DetectionSchedule(every_n_frames=0)


def test_detection_schedule_asks_a_faster_front_end_more_often() -> None:
    schedule = DetectionSchedule(every_n_frames=10, min_every_n_frames=3, max_duty=0.4)
    assert schedule.interval == 10  # nothing measured yet
    latencies = {1: 3, 2: 5, 3: 8, 4: 10, 9: 10}  # answer frames -> interval (ceil(l / 0.4))
    for latency, interval in latencies.items():
        schedule = DetectionSchedule(every_n_frames=10, min_every_n_frames=3, max_duty=0.4)
        frame = 0
        for _ in range(3):
            schedule.requested(frame)
            schedule.answered(frame + latency)
            frame += latency + 1
        assert schedule.interval == interval, latency
        assert not schedule.due(frame - 1 + interval - 1 - latency, tracked=2)
    # The median of the recent answers: one slow answer does not slow the schedule down.
    schedule = DetectionSchedule(every_n_frames=10, min_every_n_frames=3, max_duty=0.4)
    for frame, latency in zip(range(0, 50, 10), (1, 1, 9, 1, 1), strict=True):
        schedule.requested(frame)
        schedule.answered(frame + latency)
    assert schedule.interval == 3
    schedule.requested(50)
    assert not schedule.due(52, tracked=2)
    assert schedule.due(53, tracked=2)
    # min == every: a fixed interval whatever the answers.
    fixed = DetectionSchedule(every_n_frames=5, min_every_n_frames=5)
    fixed.requested(0)
    fixed.answered(1)
    assert fixed.interval == 5
    for bad in (
        {'min_every_n_frames': 0},
        {'min_every_n_frames': 11},
        {'max_duty': 0.0},
        {'max_duty': 1.5},
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            DetectionSchedule(every_n_frames=10, **bad)


def test_tracked_people_asks_a_front_end_that_answers_sooner_more_often(
    front_end: BlazePosePeople, person: np.ndarray
) -> None:
    runs = {}
    for delay in (1, 4):
        tracked = TrackedPeople(
            PeopleTracker(front_end.landmarker),
            people_front_end(front_end),
            every_n_frames=10,
            min_every_n_frames=3,
            delay_frames=delay,
        )
        for _ in range(40):
            assert len(tracked(person)) == 1
        runs[delay] = tracked.front_end_runs
        assert tracked.schedule.interval == (3 if delay == 1 else 10)
    # Frame 0 is waited for (not measured) and frame 10 is asked on the default interval;
    # then every 10 frames at 4 frames late (20, 30), every 3 at 1 frame late (13 ... 37).
    assert runs[4] == 4
    assert runs[1] == 11


def test_tracked_people_runs_the_front_end_on_schedule_and_applies_it_late(
    front_end: BlazePosePeople, person: np.ndarray
) -> None:
    calls: list[int] = []
    run_front_end = people_front_end(front_end)

    def counting(image: np.ndarray, ground_plane: GroundPlane | None) -> list[Seed]:
        calls.append(len(calls))
        return run_front_end(image, ground_plane)

    pipeline = TrackedPeople(
        PeopleTracker(front_end.landmarker),
        counting,
        every_n_frames=4,
        delay_frames=2,
        wait_when_untracked=False,
    )
    found = [len(pipeline(person)) for _ in range(7)]
    # Frames 0 and 1: the answer of frame 0 is not back; frame 2 on: tracked. While the
    # first answer is outstanding no second request is made; the next is due at frame 4.
    assert found == [0, 0, 1, 1, 1, 1, 1]
    assert pipeline.front_end_runs == 2
    assert len(calls) == 2

    # By default a frame asked on while nobody is tracked waits for its answer: the person
    # is reported from frame 0. The request on frame 4, with someone tracked, is late.
    waiting = TrackedPeople(
        PeopleTracker(front_end.landmarker), counting, every_n_frames=4, delay_frames=2
    )
    assert [len(waiting(person)) for _ in range(7)] == [1] * 7
    assert waiting.front_end_runs == 2
    with pytest.raises(ValueError, match='delay_frames'):
        TrackedPeople(PeopleTracker(front_end.landmarker), counting, delay_frames=-1)


def test_tracked_people_send_the_front_end_the_ground_plane_of_whom_they_track() -> None:
    lite = load_model('blazepose_lite_people').module
    run_front_end = people_front_end(lite)
    planes: list[GroundPlane | None] = []

    def front_end(image: np.ndarray, ground_plane: GroundPlane | None) -> list[Seed]:
        planes.append(ground_plane)
        return run_front_end(image, ground_plane)

    fit = GroundPlaneFit(min_samples=20, full_scan_every=3)
    tracked = TrackedPeople(
        PeopleTracker(lite.landmarker),
        front_end,
        every_n_frames=5,
        min_every_n_frames=5,
        ground_plane=fit,
    )
    capture = cv2.VideoCapture(str(asset_path('media/opencv/vtest.avi')))
    try:
        for _ in range(40):
            ok, bgr = capture.read()
            assert ok
            tracked(np.ascontiguousarray(bgr[:, :, ::-1]))
    finally:
        capture.release()
    assert len(planes) == 8
    assert planes[0] is None  # nobody tracked yet: every row
    # Fitted to the people walking on the floor of vtest.avi (hand boxes: 0.214 y + 19.9),
    # and every third request scans every row.
    fitted = [i for i, plane in enumerate(planes) if plane is not None]
    assert fitted
    assert all(i % 3 != 2 for i in fitted)
    for plane in (planes[i] for i in fitted):
        assert 0.1 < plane.slope < 0.4
        assert plane.height_at(400.0) == pytest.approx(0.214 * 400 + 19.9, rel=0.25)


def test_model_outputs_seed_the_tracker(person: np.ndarray, found: list) -> None:
    model = load_model('blazepose_people')
    image = torch.from_numpy(person).permute(2, 0, 1)[None].contiguous()
    outputs = {name: value.numpy() for name, value in model({'image': image}).items()}
    assert outputs['rois'].shape == (1, 4)
    assert outputs['confidences'].shape == (1,)
    seeds = seeds_from_outputs(outputs)
    assert len(seeds) == 1
    assert seeds[0].roi.x_center == pytest.approx(found[0].landmarks.next_roi().x_center, abs=0.1)
    assert seeds[0].confidence == pytest.approx(found[0].confidence, abs=1e-5)
    assert seeds_from_outputs(outputs, min_score=1.01) == []
    with pytest.raises(ValueError, match='rois'):
        seeds_from_outputs({'boxes': outputs['boxes'], 'scores': outputs['scores']})
    with pytest.raises(ValueError, match='disagree'):
        seeds_from_outputs(outputs | {'rois': np.zeros((2, 4))})
    with pytest.raises(ValueError, match='non-finite'):
        seeds_from_outputs(outputs | {'rois': np.full((1, 4), np.nan)})
