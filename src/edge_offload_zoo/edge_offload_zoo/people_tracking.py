# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Track people between detections, as MediaPipe's pose landmarker does in video mode.

The multi-person front end (``BlazePosePeople``: HOG and the BlazePose detector propose,
the landmark net confirms, twice and mirrored) costs about a second a frame on one CPU
core, most of it in some 26 landmark runs. Between two people in consecutive video frames
little changes, so MediaPipe runs its detector only when it has lost the person and
otherwise crops the next frame where the last frame's landmarks say the body is (the ROI
of the auxiliary landmarks 33 and 34). ``PeopleTracker`` does that for many people:

* ``step(image)`` runs the landmark net once per tracked person (no second pass) on the
  ROI predicted from that person's previous landmarks, on the mirrored image every other
  frame (``alternate_mirror``), and reports the mean of this frame's and the last frame's
  landmarks, the last moved on by the person's velocity (``average_two_frames``): the
  flip test's keypoint accuracy at one run a person and frame. (Measured on the two
  hand-labelled photos tracked for 2-8 frames: 4.65-4.92 px mean error, against 5.03-6.21
  px with plain runs alone and 4.63 px for the per-frame pipeline's flip test and second
  pass.) A person whose pose flag is below ``min_presence`` is not reported on that
  frame, and the track's ROI moves on at the person's velocity (an average of the ROI's
  steps while seen): hidden people keep walking. After ``max_misses`` such frames in a
  row the track is lost. (On vtest.avi the flag of a walking person drops to ~0 for a few
  frames when someone passes in front: dropping the track at once lost half the people; a
  still ROI lost those who walked on behind the other.) Two tracks that land on one body
  (``same_body``: their keypoints coincide, box IoU cannot tell people side by side) keep
  the one that was there before; the other misses the frame. Where the frames leave
  time, ``landmark_passes`` spends 2 or 4 runs a person instead (the flip test on every
  frame, then its second pass, as the per-frame pipeline does), which gives the
  per-frame pipeline's boxes; ``LandmarkPassBudget`` chooses by measured time.
* ``seed(seeds, since, seen)`` adds the people the front end found that no track covers
  (judged on ``seen``, the tracks when it was asked), and re-finds tracks that lost their
  person since. The front end runs in parallel with tracking (on the edge server, or
  another core) and answers frames late, when people have moved on: each seed is first
  followed by the landmark net through one in ``catch_up_stride`` of the frames ``since``
  the one the front end saw (at most ``catch_up`` runs per answer; ``CatchUpFrames``
  keeps them), so it starts where the person is now. (Median optical flow of the seed's
  box did not help: the box is mostly static background.)
* ``DetectionSchedule`` says when the front end is due: every few frames (people walking
  in), the more often the sooner its answers come (a faster edge server finds people
  sooner), and sooner still when a track was lost or nobody is tracked.

Measured on the hand-boxed vtest.avi frames (``benchmarks/people_tracking_accuracy.py``)
tracking loses recall against detection on every frame, the more the later and the less
often the front end answers (every 10 frames: 0.86 on time or three frames late, 0.82-0.84
four to five, 0.75 ten; as ``DetectionSchedule`` asks it, one or two frames late: 0.88-0.89;
against 0.90): people who cross or step out from behind someone are lost until the front
end finds them again.

Plain Python and numpy: no ROS, no sockets. ``TrackedPeople`` runs the loop synchronously
with an emulated front-end delay, for benchmarks and tests; the people detection node runs
the same classes with the front end offloaded.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import queue
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from edge_offload_zoo.blazepose import (
    MAX_PEOPLE,
    BlazePoseLandmarker,
    BlazePosePeople,
    Person,
    PoseLandmarks,
    Roi,
    landmark_box,
)
from edge_offload_zoo.detection_metrics import iou_matrix
from edge_offload_zoo.ground_plane import GroundPlane, GroundPlaneFit

DEFAULT_DETECT_EVERY = 10
DEFAULT_MIN_DETECT_EVERY = 3
# A front-end request is in flight at most this fraction of the frames: 0.4 keeps the
# measured 4-frame answers of a front end on the robot's own cores at every 10 frames.
DEFAULT_MAX_DUTY = 0.4
_ANSWER_WINDOW = 5
# The multi-person front end as the tracking loop calls it: frame, ground plane -> seeds.
FrontEnd = Callable[[np.ndarray, GroundPlane | None], list['Seed']]
Job = TypeVar('Job')
Output = TypeVar('Output')


@dataclass(frozen=True)
class Seed:
    """A person the front end found: where to look for them, and how sure it was."""

    box: np.ndarray  # (4,) x0 y0 x1 y1 px, on the frame the front end saw
    roi: Roi  # the landmark ROI for the next frame
    confidence: float  # the front end's own confidence (detector score or squashed HOG margin)
    keypoints: np.ndarray | None = None  # (17, 3) COCO x, y, visibility, when known


def seeds_from_people(people: Sequence[Person]) -> list[Seed]:
    """Return the seeds of people found by ``BlazePosePeople.people``."""
    return [Seed(p.box, p.landmarks.next_roi(), p.confidence, p.keypoints) for p in people]


def seeds_from_outputs(outputs: dict[str, np.ndarray], min_score: float = 0.0) -> list[Seed]:
    """Return the seeds of a people model's outputs (``boxes``, ``rois``, ``confidences``).

    People scoring below ``min_score`` (the ``scores`` output, when there is one) are left
    out, as they would be from a frame's results.

    Raises ``ValueError`` when the outputs lack them or their shapes disagree: a model
    without ``rois`` cannot seed a tracker.
    """
    missing = [
        name for name in ('boxes', 'rois', 'confidences', 'keypoints') if name not in outputs
    ]
    if missing:
        raise ValueError(f'people model outputs lack {missing}: it cannot seed the tracker')
    boxes = np.asarray(outputs['boxes'], dtype=np.float64).reshape(-1, 4)
    rois = np.asarray(outputs['rois'], dtype=np.float64)
    confidences = np.asarray(outputs['confidences'], dtype=np.float64).reshape(-1)
    keypoints = np.asarray(outputs['keypoints'], dtype=np.float64)
    if (
        rois.shape != (len(boxes), 4)
        or confidences.shape != (len(boxes),)
        or keypoints.shape != (len(boxes), 17, 3)
    ):
        raise ValueError(
            f'people model outputs disagree: boxes {boxes.shape}, rois {rois.shape}, '
            f'confidences {confidences.shape}, keypoints {keypoints.shape}'
        )
    if not (np.isfinite(rois).all() and np.isfinite(boxes).all()):
        raise ValueError('people model outputs hold non-finite boxes or ROIs')
    scores = np.asarray(outputs.get('scores', np.ones(len(boxes))), dtype=np.float64).reshape(-1)
    if scores.shape != (len(boxes),):
        raise ValueError(
            f'people model outputs disagree: boxes {boxes.shape}, scores {scores.shape}'
        )
    return [
        Seed(box, Roi(float(r[0]), float(r[1]), float(r[2]), float(r[3])), float(c), points)
        for box, r, c, points, score in zip(
            boxes, rois, confidences, keypoints, scores, strict=True
        )
        if r[2] > 1.0 and score >= min_score
    ]


class CatchUpFrames:
    """The frames since the last front-end request, for seeds to catch up through.

    Bounded: at most ``max_frames`` are kept (the oldest go; a seed then starts from the
    oldest kept frame, a little further from its person).
    """

    def __init__(self, max_frames: int = 32) -> None:
        self._frames: collections.deque[np.ndarray] = collections.deque(maxlen=max_frames)

    def restart(self) -> None:
        """Forget the frames: the front end was just asked on the current frame."""
        self._frames.clear()

    def add(self, image: np.ndarray) -> None:
        """Keep a frame the tracker has stepped (after the request's frame)."""
        self._frames.append(image)

    def frames(self) -> list[np.ndarray]:
        """Return the kept frames, oldest first."""
        return list(self._frames)


def evenly_spaced(frames: Sequence[np.ndarray], count: int) -> list[np.ndarray]:
    """Return up to ``count`` of ``frames``, evenly spaced and always with the last one."""
    if count <= 0 or not frames:
        return []
    if len(frames) <= count:
        return list(frames)
    picks = np.linspace(len(frames) - 1, 0, count, endpoint=False)[::-1]
    return [frames[int(round(index))] for index in picks]


# Landmark runs per tracked person and frame that ``PeopleTracker`` can spend.
LANDMARK_PASSES = (1, 2, 4)

# Two estimates are of one body when their common visible keypoints lie this close, as a
# fraction of the body's height. Box IoU cannot tell: people walking side by side or one
# behind another overlap by more than 0.5, and merging them lost a person each time.
SAME_BODY_FRACTION = 0.15
_MIN_COMMON_KEYPOINTS = 4
_VISIBLE = 0.5


def same_body(
    box_a: np.ndarray,
    keypoints_a: np.ndarray | None,
    box_b: np.ndarray,
    keypoints_b: np.ndarray | None,
    iou_threshold: float,
) -> bool:
    """Return True when two people estimates are of one body.

    By their keypoints (``SAME_BODY_FRACTION``) when both have at least
    ``_MIN_COMMON_KEYPOINTS`` visible in common, else by box IoU above ``iou_threshold``.
    """
    if keypoints_a is not None and keypoints_b is not None:
        common = (keypoints_a[:, 2] >= _VISIBLE) & (keypoints_b[:, 2] >= _VISIBLE)
        if common.sum() >= _MIN_COMMON_KEYPOINTS:
            distance = np.linalg.norm(keypoints_a[common, :2] - keypoints_b[common, :2], axis=1)
            height = min(box_a[3] - box_a[1], box_b[3] - box_b[1])
            return bool(np.median(distance) < SAME_BODY_FRACTION * max(height, 1.0))
    return bool(iou_matrix(box_a, box_b)[0, 0] > iou_threshold)


class ParallelLandmarks:
    """Landmark runs spread over landmarkers, one thread each, from one shared queue.

    Each landmarker (one interpreter, not thread-safe) is used by one run at a time; a run
    takes whichever is free, so a thread the OS preempts does not hold the others up.
    Measured on 2 cores with another process taking half of one: 5 people a frame took
    58 ms on two one-thread LiteRT interpreters this way, 67 ms on one interpreter of two
    threads (XNNPACK splits each operator and waits for its slowest thread), 88 ms on one
    of one thread. With one landmarker the runs are made in the caller's thread.
    """

    def __init__(self, landmarkers: Sequence[BlazePoseLandmarker]) -> None:
        if not landmarkers:
            raise ValueError('at least one landmarker is needed')
        self.landmarkers = list(landmarkers)
        self._free: queue.SimpleQueue[BlazePoseLandmarker] = queue.SimpleQueue()
        for landmarker in self.landmarkers:
            self._free.put(landmarker)
        self._pool = (
            ThreadPoolExecutor(len(self.landmarkers), thread_name_prefix='landmarks')
            if len(self.landmarkers) > 1
            else None
        )

    def map(
        self, run: Callable[[BlazePoseLandmarker, Job], Output], jobs: Sequence[Job]
    ) -> list[Output]:
        """Return ``run(landmarker, job)`` for each job, in order."""
        if self._pool is None or len(jobs) < 2:
            return [run(self.landmarkers[0], job) for job in jobs]

        def one(job: Job) -> Output:
            landmarker = self._free.get()
            try:
                return run(landmarker, job)
            finally:
                self._free.put(landmarker)

        return list(self._pool.map(one, jobs))


@dataclass
class Track:
    """One tracked person."""

    track_id: int
    roi: Roi  # where the landmark net looks on the next frame
    confidence: float  # the front end's confidence when it found this person
    person: Person | None = None  # the last good landmarks; None until the first step
    frames: int = 0  # frames this track has been stepped
    misses: int = 0  # frames in a row with the pose flag below min_presence
    # px a frame the ROI centre moves (exponential average of its steps while seen) ...
    velocity: tuple[float, float] = (0.0, 0.0)
    # ... and where it was on the last frame, when that frame saw the person.
    last_centre: tuple[float, float] | None = None


@dataclass
class StepResult:
    """What one ``PeopleTracker.step`` did."""

    people: list[Person]
    lost: int  # tracks dropped because the pose flag fell
    merged: int  # tracks dropped because another track holds the same body
    landmark_runs: int


class PeopleTracker:
    """People tracked frame to frame by their landmarks (see the module docstring)."""

    def __init__(
        self,
        landmarker: BlazePoseLandmarker | Sequence[BlazePoseLandmarker],
        *,
        min_presence: float = 0.5,
        nms_iou: float = 0.5,
        seed_iou: float = 0.5,
        max_misses: int = 8,
        velocity_smoothing: float = 0.5,
        catch_up: int = 8,
        catch_up_stride: int = 3,
        alternate_mirror: bool = True,
        average_two_frames: bool = True,
        landmark_passes: int = 1,
        max_people: int = MAX_PEOPLE,
    ) -> None:
        if not 0.0 <= min_presence <= 1.0:
            raise ValueError(f'min_presence must be in [0, 1], got {min_presence}')
        if max_people < 1:
            raise ValueError(f'max_people must be at least 1, got {max_people}')
        self._landmarks = ParallelLandmarks(
            [landmarker] if isinstance(landmarker, BlazePoseLandmarker) else list(landmarker)
        )
        self.min_presence = min_presence
        self.nms_iou = nms_iou
        self.seed_iou = seed_iou
        if max_misses < 0:
            raise ValueError(f'max_misses must be >= 0, got {max_misses}')
        self.max_misses = max_misses
        if not 0.0 < velocity_smoothing <= 1.0:
            raise ValueError(f'velocity_smoothing must be in (0, 1], got {velocity_smoothing}')
        self.velocity_smoothing = velocity_smoothing
        if catch_up < 0 or catch_up_stride < 1:
            raise ValueError('catch_up must be >= 0 and catch_up_stride >= 1')
        self.catch_up = catch_up
        self.catch_up_stride = catch_up_stride
        self.alternate_mirror = alternate_mirror
        self.average_two_frames = average_two_frames
        self.landmark_passes = landmark_passes
        self.max_people = max_people
        self._tracks: list[Track] = []
        self._ids = itertools.count()

    @property
    def landmark_passes(self) -> int:
        """Landmark runs per tracked person and frame: 1, 2 or 4 (``LANDMARK_PASSES``).

        1: one run, mirrored every other frame and averaged with the last frame's (see the
        module docstring). 2: the flip test on every frame (a plain and a mirrored run,
        averaged). 4: the flip test, then again on the ROI its landmarks give (the
        per-frame pipeline's second pass). May be changed between steps
        (``LandmarkPassBudget`` does, by measured time).
        """
        return self._landmark_passes

    @landmark_passes.setter
    def landmark_passes(self, passes: int) -> None:
        if passes not in LANDMARK_PASSES:
            raise ValueError(f'landmark_passes must be one of {LANDMARK_PASSES}, got {passes}')
        self._landmark_passes = passes

    @property
    def tracks(self) -> tuple[Track, ...]:
        """The current tracks, best first after the last step."""
        return tuple(self._tracks)

    def reset(self) -> None:
        """Forget every track (a new sequence, a camera jump)."""
        self._tracks = []

    def positions(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Return where the tracks seen on the last step are: id -> (box, COCO keypoints).

        Taken when the front end is asked on a frame, it says whom the front end's answer
        covers on that frame (``seed``'s ``seen``), with no landmark run.
        """
        return {
            t.track_id: (t.person.box, t.person.keypoints)
            for t in self._tracks
            if t.person is not None and t.misses == 0
        }

    def seed(
        self,
        seeds: Sequence[Seed],
        since: Sequence[np.ndarray] = (),
        seen: dict[int, tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> int:
        """Start tracks for the seeds no current track covers; return how many started.

        ``seen``: ``positions()`` when the front end was asked. A seed on the body of a
        track seen then is covered while that track still sees its person; when that track
        has lost its person since, the seed takes it over (re-found, same id). Compared on
        the frame the front end saw, so no landmark run is spent on the people tracked
        already. Without ``seen``, seeds are compared with the tracks after catching up.

        ``since``: the frames after the one the front end saw, oldest first, not counting
        the current one. Each seed that starts or re-finds a track is first followed
        through them (``catch_up`` runs at most for all of them, shared evenly, the best
        seeds first; evenly spaced, the last always; where the landmark net misses the
        person the ROI stays, and the next ``step`` judges), so it starts where the person
        is now: from an ROI five frames old the landmark net finds a walking person on
        vtest.avi 72 % of the time, followed through each frame 96 %.

        Seeds are not compared with each other: the front end has kept one per body
        already, and people walking side by side overlap.
        """
        wanted = self._seeds_to_follow(seeds, seen)
        if not wanted:
            return 0
        shares = self._catch_up_shares(since, len(wanted))
        caught_up = self._landmarks.map(
            lambda landmarker, job: self._catch_up(landmarker, *job),
            [(seed, share) for (seed, _), share in zip(wanted, shares, strict=True)],
        )
        return self._start_tracks(wanted, caught_up)

    def _seeds_to_follow(
        self, seeds: Sequence[Seed], seen: dict[int, tuple[np.ndarray, np.ndarray]] | None
    ) -> list[tuple[Seed, Track | None]]:
        """Return the seeds to follow, best first, each with the track it re-finds or None.

        A seed on the body of a track in ``seen`` is left out while that track still sees
        its person (tracked then and now).
        """
        by_id = {t.track_id: t for t in self._tracks}
        wanted: list[tuple[Seed, Track | None]] = []
        for seed in sorted(seeds, key=lambda s: -s.confidence):
            if seen is None:
                wanted.append((seed, None))
                continue
            holder = next(
                (
                    track_id
                    for track_id, (box, points) in seen.items()
                    if same_body(seed.box, seed.keypoints, box, points, self.seed_iou)
                ),
                None,
            )
            track = by_id.get(holder) if holder is not None else None
            if track is not None and track.misses == 0:
                continue  # tracked then and now
            wanted.append((seed, track))
        return wanted

    def _catch_up_shares(self, since: Sequence[np.ndarray], seeds: int) -> list[list[np.ndarray]]:
        """Return the frames each of ``seeds`` seeds (best first) is followed through.

        A frame in every ``catch_up_stride`` at least (people move a few px a frame, the
        ROI is 1.25x the body), as many as the shared budget allows; the ``catch_up`` runs
        go to the best seeds first, each the latest frames of the common pick.
        """
        per_seed = max(1, self.catch_up // seeds)
        count = min(len(since), max(per_seed, -(-len(since) // self.catch_up_stride)))
        frames = evenly_spaced(since, count)
        return [
            frames[-(self.catch_up - index * len(frames)) :]
            if self.catch_up - index * len(frames) > 0
            else []
            for index in range(seeds)
        ]

    def _start_tracks(
        self, wanted: Sequence[tuple[Seed, Track | None]], caught_up: Sequence[Seed]
    ) -> int:
        """Re-find or start the tracks of the caught-up seeds; return how many started.

        A seed that now lands on a body a track sees is dropped; so are the seeds past
        ``max_people`` tracks.
        """
        started = 0
        for (seed, track), caught in zip(wanted, caught_up, strict=True):
            if track is not None and track in self._tracks:
                # Re-found: look where the front end says on the next step.
                track.roi = caught.roi
                continue
            if self._held_by_a_track(caught):
                continue
            if len(self._tracks) >= self.max_people:
                break
            self._tracks.append(Track(next(self._ids), caught.roi, seed.confidence))
            started += 1
        return started

    def _held_by_a_track(self, caught: Seed) -> bool:
        """Return True when a track that sees its person (or a new one's ROI) is on ``caught``."""
        held = [
            (t.person.box, t.person.keypoints) if t.person is not None else (_roi_box(t.roi), None)
            for t in self._tracks
            if t.misses == 0
        ]
        return any(
            same_body(caught.box, caught.keypoints, box, points, self.seed_iou)
            for box, points in held
        )

    def _catch_up(
        self, landmarker: BlazePoseLandmarker, seed: Seed, frames: Sequence[np.ndarray]
    ) -> Seed:
        box, roi, points = np.asarray(seed.box, dtype=np.float64), seed.roi, seed.keypoints
        for image in frames:
            landmarks = landmarker.landmarks(image, roi)
            if landmarks.pose_score >= self.min_presence:
                height, width = image.shape[:2]
                box, roi = landmark_box(landmarks, (width, height)), landmarks.next_roi()
                points = landmarks.coco_keypoints()
        return Seed(box, roi, seed.confidence, points)

    def step(self, image: np.ndarray) -> StepResult:
        """Run the landmark net once per track on RGB uint8 ``image``; return the people.

        A track whose landmarks land on a body another track holds (someone walked in
        front) keeps its last good ROI and misses the frame, as when its pose flag drops;
        of the tracks on one body, the one that was there before keeps it. A new track on
        a body that is tracked already is dropped.
        """
        height, width = image.shape[:2]
        passes = self._landmark_passes
        runs = self._run_landmarks(image, passes)
        found = self._people_found(runs, (width, height))
        survivors, reported, lost, merged = self._claim_bodies(found, passes, (width, height))
        survivors.sort(key=lambda t: (t.misses > 0, -t.person.score))
        self._tracks = survivors
        return StepResult(
            people=[reported[t.track_id] for t in survivors if t.misses == 0],
            lost=lost,
            merged=merged,
            landmark_runs=sum(count for _, count in runs),
        )

    def _run_landmarks(self, image: np.ndarray, passes: int) -> list[tuple[PoseLandmarks, int]]:
        """Run the landmark net on every track's ROI; return its landmarks and run count.

        With one pass a track's run is mirrored every other frame (``alternate_mirror``);
        with more, each pass is a flip test, and the fourth its second pass.
        """
        mirror = [
            passes > 1 or (self.alternate_mirror and t.frames % 2 == 1) for t in self._tracks
        ]
        mirrored_image = np.ascontiguousarray(image[:, ::-1]) if any(mirror) else None

        def flip_test(landmarker: BlazePoseLandmarker, roi: Roi) -> PoseLandmarks:
            plain = landmarker.landmarks(image, roi)
            return plain.averaged(landmarker.mirrored_landmarks(image, roi, mirrored_image))

        def run(
            landmarker: BlazePoseLandmarker, job: tuple[Roi, bool]
        ) -> tuple[PoseLandmarks, int]:
            roi, mirrored = job
            if passes == 1:
                if mirrored:
                    return landmarker.mirrored_landmarks(image, roi, mirrored_image), 1
                return landmarker.landmarks(image, roi), 1
            landmarks = flip_test(landmarker, roi)
            if passes == 2 or landmarks.pose_score < self.min_presence:
                return landmarks, 2
            return flip_test(landmarker, landmarks.next_roi()), 4

        return self._landmarks.map(
            run, [(t.roi, m) for t, m in zip(self._tracks, mirror, strict=True)]
        )

    def _people_found(
        self, runs: Sequence[tuple[PoseLandmarks, int]], image_size: tuple[int, int]
    ) -> list[tuple[Track, Person | None]]:
        """Return each track with the person its run found: None below ``min_presence``.

        Counts the frame for every track (``Track.frames``, which the mirroring follows).
        """
        found: list[tuple[Track, Person | None]] = []
        for track, (landmarks, _) in zip(self._tracks, runs, strict=True):
            box = landmark_box(landmarks, image_size)
            track.frames += 1
            seen = (
                landmarks.pose_score >= self.min_presence
                and box[2] - box[0] > 1
                and box[3] - box[1] > 1
            )
            found.append((track, _person(landmarks, box, track.confidence) if seen else None))
        return found

    def _claim_bodies(
        self,
        found: Sequence[tuple[Track, Person | None]],
        passes: int,
        image_size: tuple[int, int],
    ) -> tuple[list[Track], dict[int, Person], int, int]:
        """Let the tracks that see a person, the most continuous first, claim bodies.

        A track whose person another track has claimed misses the frame (a new track is
        dropped: merged). Return the surviving tracks, the person each track that saw its
        own reports (by id), and how many tracks were lost and merged.
        """
        claimed: list[Person] = []
        survivors: list[Track] = []
        reported: dict[int, Person] = {}
        lost = merged = 0
        for track, person in sorted(found, key=_continuity):
            if person is not None and any(
                same_body(person.box, person.keypoints, c.box, c.keypoints, self.nms_iou)
                for c in claimed
            ):
                if track.person is None:
                    merged += 1  # a seed on somebody tracked
                    continue
                person = None
            if person is not None:
                reported[track.track_id] = self._follow(track, person, passes, image_size)
                claimed.append(person)
                survivors.append(track)
            elif track.person is not None and track.misses < self.max_misses:
                self._coast(track)
                survivors.append(track)
            else:
                lost += 1
        return survivors, reported, lost, merged

    def _follow(
        self, track: Track, person: Person, passes: int, image_size: tuple[int, int]
    ) -> Person:
        """Move ``track`` on to ``person``, seen on this frame; return whom it reports."""
        previous = track.person if track.misses == 0 else None
        track.person = person
        track.roi = person.landmarks.next_roi()
        self._update_velocity(track)
        track.misses = 0
        if self.average_two_frames and passes == 1 and previous is not None:
            return self._averaged(track, previous, image_size)
        return person

    @staticmethod
    def _coast(track: Track) -> None:
        """Miss the frame: hidden for a moment, look where the person has walked to by now."""
        track.misses += 1
        track.last_centre = None
        dx, dy = track.velocity
        track.roi = dataclasses.replace(
            track.roi, x_center=track.roi.x_center + dx, y_center=track.roi.y_center + dy
        )

    @staticmethod
    def _averaged(track: Track, previous: Person, image_size: tuple[int, int]) -> Person:
        """Return the mean of the track's landmarks on this frame and on the last one.

        The last frame's are moved on by the track's velocity first, so a walking person's
        average does not trail them. With ``alternate_mirror`` the two are one plain and
        one mirrored estimate: the flip test's accuracy at no extra landmark run.
        """
        assert track.person is not None  # noqa: S101 - called on a track seen this frame
        dx, dy = track.velocity
        last = previous.landmarks
        moved = dataclasses.replace(last, points=last.points + np.array([dx, dy, 0.0]))
        landmarks = track.person.landmarks.averaged(moved)
        return _person(landmarks, landmark_box(landmarks, image_size), track.confidence)

    def _update_velocity(self, track: Track) -> None:
        centre = (track.roi.x_center, track.roi.y_center)
        if track.last_centre is not None:
            weight = self.velocity_smoothing
            track.velocity = (
                weight * (centre[0] - track.last_centre[0]) + (1.0 - weight) * track.velocity[0],
                weight * (centre[1] - track.last_centre[1]) + (1.0 - weight) * track.velocity[1],
            )
        track.last_centre = centre


def _continuity(entry: tuple[Track, Person | None]) -> tuple[bool, float]:
    """Sort key of a step's tracks: seeing ones first, the most overlap with the last box first.

    Of those, a new track (no person yet) comes after every track that had one.
    """
    track, person = entry
    if person is None:
        return (True, 0.0)
    if track.person is None:
        return (False, -0.0)
    return (False, -float(iou_matrix(track.person.box, person.box)[0, 0]) - 1.0)


def _person(landmarks: PoseLandmarks, box: np.ndarray, confidence: float) -> Person:
    return Person(
        box=box,
        score=float(landmarks.pose_score * confidence),
        keypoints=landmarks.coco_keypoints(),
        landmarks=landmarks,
        source='tracked',
        confidence=confidence,
    )


def _roi_box(roi: Roi) -> np.ndarray:
    half = roi.size / 2.0
    return np.array(
        [roi.x_center - half, roi.y_center - half, roi.x_center + half, roi.y_center + half]
    )


DEFAULT_LANDMARK_SHARE = 0.5
_PASS_WINDOW = 30


@dataclass
class LandmarkPassBudget:
    """How many landmark runs each tracked person gets a frame, chosen by measured time.

    More runs a person give boxes as good as the per-frame pipeline's (the flip test and
    its second pass: on the hand-boxed vtest.avi frames, front end every 8 frames 3 late,
    4 runs a person made 3 false positives of 92 boxes against 5 of 95 with 1; see the
    README), at 2 or 4 times the landmark time. So the tracker spends them only where the
    frames leave time: the most passes (``LANDMARK_PASSES``) whose landmark time, the
    median of the last ``window`` frames' per pass times the passes, stays within
    ``max_share`` of the median interval between frames. It steps up only with a fifth
    to spare, so a choice at the edge does not flip back and forth. On the development
    machine's 2 shared cores one run a person already takes 60-70 ms of the 100 ms frame
    interval, so tracking stays at 1; a robot with cores to spare gets 2 or 4. With
    ``fixed`` set the choice is that, whatever the measurements.
    """

    max_share: float = DEFAULT_LANDMARK_SHARE
    fixed: int | None = None
    window: int = _PASS_WINDOW
    passes: int = field(default=1, init=False)
    # The medians the last choice was made on (0: none made yet).
    pass_s: float = field(default=0.0, init=False)
    interval_s: float = field(default=0.0, init=False)
    _pass_s: collections.deque[float] = field(init=False)
    _intervals: collections.deque[float] = field(init=False)
    _last_arrival: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if not 0.0 < self.max_share <= 1.0:
            raise ValueError(f'max_share must be in (0, 1], got {self.max_share}')
        if self.fixed is not None and self.fixed not in LANDMARK_PASSES:
            raise ValueError(f'fixed must be one of {LANDMARK_PASSES} or None, got {self.fixed}')
        if self.window < 1:
            raise ValueError(f'window must be at least 1, got {self.window}')
        self.passes = self.fixed or 1
        self._pass_s = collections.deque(maxlen=self.window)
        self._intervals = collections.deque(maxlen=self.window)

    def frame_arrived(self, now_s: float) -> None:
        """Record a frame's arrival (monotonic seconds): the intervals give the budget."""
        if self._last_arrival is not None and now_s > self._last_arrival:
            self._intervals.append(now_s - self._last_arrival)
        self._last_arrival = now_s

    def stepped(self, landmarks_s: float, runs: int, tracks: int) -> int:
        """Record one step's landmark time; return the passes for the next step.

        ``runs`` and ``tracks``: the step's landmark runs and tracked people (a step
        without people says nothing about the cost of a run).
        """
        if self.fixed is not None:
            return self.passes
        if tracks > 0 and runs > 0:
            self._pass_s.append(landmarks_s * tracks / runs)
        if len(self._pass_s) < self.window or len(self._intervals) < self.window:
            return self.passes
        per_pass = self.pass_s = float(np.median(self._pass_s))
        self.interval_s = float(np.median(self._intervals))
        budget = self.max_share * self.interval_s
        chosen = max(
            (
                p
                for p in LANDMARK_PASSES
                if p * per_pass <= (budget if p <= self.passes else 0.8 * budget)
            ),
            default=LANDMARK_PASSES[0],
        )
        if chosen != self.passes:
            self.passes = chosen
            self._pass_s.clear()  # the cost a pass is measured again at the new load
        return self.passes


@dataclass
class DetectionSchedule:
    """When the multi-person front end is due (one request in flight at a time).

    Every ``interval`` frames, so that people who walk in are found within that many
    frames plus the front end's own time; sooner, a third of that after the last request,
    when nobody is tracked or a track was lost since (someone may have been occluded and
    re-appear). Not at once: on a crowded scene tracks are lost every few frames, and a
    front end asked on each loss ran back to back and took the CPU the tracker needed
    (measured on 2 shared cores: half the frames dropped).

    The interval follows the front end's speed: the median of its last answers' latency
    in frames (``answered``) divided by ``max_duty``, so that a request is in flight at
    most that fraction of the time, between ``min_every_n_frames`` and
    ``every_n_frames``. Tracking loses people only between the front end's answers, so a
    faster server finds more: on the hand-boxed vtest.avi frames recall is 0.88-0.91
    answering one or two frames late (asked every 3-5), 0.86 three late (every 8),
    0.82-0.84 four late (every 10) (``benchmarks/people_tracking_accuracy.py``). A slow
    front end, like one sharing the robot's two cores (answers about 3 frames late with
    the ground plane, 4 without), is asked every 8-10 frames, which leaves the tracker its
    CPU. Until an answer is measured the interval is
    ``every_n_frames``.
    """

    every_n_frames: int = DEFAULT_DETECT_EVERY
    min_every_n_frames: int = DEFAULT_MIN_DETECT_EVERY
    max_duty: float = DEFAULT_MAX_DUTY
    _last_request: int | None = field(default=None, init=False)
    _lost_since_request: bool = field(default=False, init=False)
    _answer_frames: collections.deque[int] = field(
        default_factory=lambda: collections.deque(maxlen=_ANSWER_WINDOW), init=False
    )

    def __post_init__(self) -> None:
        if self.every_n_frames < 1:
            raise ValueError(f'every_n_frames must be at least 1, got {self.every_n_frames}')
        if not 1 <= self.min_every_n_frames <= self.every_n_frames:
            raise ValueError(
                f'min_every_n_frames must be in [1, every_n_frames={self.every_n_frames}], '
                f'got {self.min_every_n_frames}'
            )
        if not 0.0 < self.max_duty <= 1.0:
            raise ValueError(f'max_duty must be in (0, 1], got {self.max_duty}')

    @property
    def interval(self) -> int:
        """Frames from one request to the next while every track holds."""
        if not self._answer_frames:
            return self.every_n_frames
        wanted = math.ceil(float(np.median(self._answer_frames)) / self.max_duty - 1e-9)
        return min(self.every_n_frames, max(self.min_every_n_frames, wanted))

    def note_lost(self, lost: int) -> None:
        """Record tracks lost on a frame."""
        self._lost_since_request = self._lost_since_request or lost > 0

    def due(self, frame: int, tracked: int) -> bool:
        """Return True when the front end should run on ``frame``."""
        if self._last_request is None:
            return True
        since = frame - self._last_request
        if tracked == 0 or self._lost_since_request:
            return since >= max(1, self.interval // 3)
        return since >= self.interval

    def requested(self, frame: int) -> None:
        """Record that the front end was started on ``frame``."""
        self._last_request = frame
        self._lost_since_request = False

    def answered(self, frame: int) -> None:
        """Record that the last request's answer is applied on ``frame``.

        Not for an answer the frame waited for (nobody tracked): the wait hides its time.
        """
        if self._last_request is not None and frame >= self._last_request:
            self._answer_frames.append(frame - self._last_request)


class TrackedPeople:
    """The tracking loop run synchronously: front end every few frames, tracking on all.

    ``front_end(image, ground_plane) -> list[Seed]`` stands for the detector
    (``BlazePosePeople`` run in this thread); ``ground_plane`` is what the
    ``ground_plane`` fit, fed with the people tracked on every frame, says to send (None
    without a fit). Its answer for frame t is applied before tracking frame
    ``t + delay_frames`` (0: on the same frame, before tracking), which emulates a front
    end that runs beside tracking and answers late; ``DetectionSchedule`` sets the
    interval from that delay (``every_n_frames`` the longest, ``min_every_n_frames`` the
    shortest). With ``wait_when_untracked`` a frame the front end is asked on while nobody
    is tracked waits for the answer (applied on that frame), as the people detection
    node's tracking thread does: with no track there is nothing to track meanwhile.
    Deterministic: the same frames give the same
    people.
    """

    def __init__(
        self,
        tracker: PeopleTracker,
        front_end: FrontEnd,
        *,
        every_n_frames: int = DEFAULT_DETECT_EVERY,
        min_every_n_frames: int = DEFAULT_MIN_DETECT_EVERY,
        max_duty: float = DEFAULT_MAX_DUTY,
        delay_frames: int = 0,
        wait_when_untracked: bool = True,
        ground_plane: GroundPlaneFit | None = None,
    ) -> None:
        if delay_frames < 0:
            raise ValueError(f'delay_frames must be >= 0, got {delay_frames}')
        self.tracker = tracker
        self.front_end = front_end
        self.schedule = DetectionSchedule(
            every_n_frames, min(min_every_n_frames, every_n_frames), max_duty
        )
        self.delay_frames = delay_frames
        self.wait_when_untracked = wait_when_untracked
        self.ground_plane = ground_plane
        self.front_end_runs = 0
        # (frame to apply at, seeds, whether that frame waits for them)
        self._pending: tuple[int, list[Seed], bool] | None = None
        self._seen: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # tracks when asked
        self._since = CatchUpFrames()
        self._frame = 0

    def __call__(self, image: np.ndarray) -> list[Person]:
        """Track people on the next frame of the sequence; return them, best first."""
        frame = self._frame
        self._frame += 1
        if self._pending is None and self.schedule.due(frame, len(self.tracker.tracks)):
            self.schedule.requested(frame)
            self.front_end_runs += 1
            plane = self.ground_plane.for_request() if self.ground_plane is not None else None
            waits = self.wait_when_untracked and not self.tracker.tracks
            self._pending = (
                frame if waits else frame + self.delay_frames,
                self.front_end(image, plane),
                waits,
            )
            self._seen = self.tracker.positions()
            self._since.restart()
            requested = True
        else:
            requested = False
        if self._pending is not None and self._pending[0] <= frame:
            self.tracker.seed(self._pending[1], self._since.frames(), self._seen)
            if not self._pending[2]:
                self.schedule.answered(frame)
            self._pending = None
        result = self.tracker.step(image)
        if not requested:
            self._since.add(image)
        self.schedule.note_lost(result.lost)
        if self.ground_plane is not None:
            self.ground_plane.add(np.array([p.box for p in result.people]), image.shape[0])
        return result.people


def people_front_end(pipeline: BlazePosePeople) -> FrontEnd:
    """Return ``pipeline`` as a seed front end for ``TrackedPeople``."""

    def run(image: np.ndarray, ground_plane: GroundPlane | None) -> list[Seed]:
        return seeds_from_people(pipeline.people(image, ground_plane))

    return run
