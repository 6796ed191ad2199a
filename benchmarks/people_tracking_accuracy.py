# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Accuracy of the people pipelines: detection on every frame against tracking between.

Boxes: data/annotations/vtest_people_boxes.json (every visible person boxed on frames 0,
40, ..., 760 of vtest.avi; IoU >= 0.5, recall over people taller than 60 px, see
edge_offload_zoo.detection_metrics). Keypoints: data/annotations/keypoints_by_hand.json
(median of four hand annotations on two photos).

Variants:

* ``per_frame``: ``BlazePosePeople`` (hybrid front end, second pass, flip test) on each
  labelled frame on its own, what the main job did before tracking;
* ``tracked/D``: ``TrackedPeople`` over every frame of the video up to the last labelled
  one, as ``people_detection`` runs it: its front end (``blazepose_lite_people``'s
  settings) answering D frames late (``--delays``; in ``make run`` about 0.27 s, 3
  frames), asked every D / ``--max-duty`` frames, between ``--min-every`` and
  ``--every`` (sooner when a track is lost), with the ground plane fitted to the tracked
  people (``GroundPlaneFit``; every 4th request scans every row), and one landmark run
  per tracked person on every frame;
* ``tracked_full_scan/D``: the same, HOG scanning every row on every request.

On a photo the tracked keypoints are those of the ``--still-frames``-th frame of the photo
repeated. With ``--phases N`` the tracked variants also run started 1 .. N-1 frames into
the video, so the labelled frames (every 40th) fall at every point of the front end's
cycle, and the mean and range over the N runs are reported, scored on the labelled frames
from frame N on (the per-frame pipeline beside them on the same frames). One run's
figures move by about 3 people with the phase.

    python benchmarks/people_tracking_accuracy.py [--variants per_frame tracked
        tracked_full_scan] [--every 10] [--min-every 3] [--max-duty 0.4]
        [--delays 0 1 2 4 10] [--phases 1] [--backend litert] [--output results/...json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import torch

from edge_offload.assets import asset_path
from edge_offload_zoo.blazepose import (
    COCO_KEYPOINT_NAMES,
    DETECTOR_ASSET,
    BlazePoseDetector,
    BlazePoseLandmarker,
    BlazePosePeople,
    Person,
    load_landmark_net,
)
from edge_offload_zoo.detection_metrics import (
    IOU_THRESHOLD,
    MIN_HEIGHT,
    Counts,
    evaluate_frame,
    nearest_box,
)
from edge_offload_zoo.ground_plane import GroundPlane, GroundPlaneFit
from edge_offload_zoo.litert_backend import BACKENDS, load_tflite_backend
from edge_offload_zoo.people_tracking import (
    DEFAULT_MAX_DUTY,
    LANDMARK_PASSES,
    PeopleTracker,
    Seed,
    TrackedPeople,
    people_front_end,
)

ROOT = Path(__file__).resolve().parent.parent
BOXES = ROOT / 'data' / 'annotations' / 'vtest_people_boxes.json'
KEYPOINTS = ROOT / 'data' / 'annotations' / 'keypoints_by_hand.json'
DEFAULT_OUTPUT = ROOT / 'results' / 'people_tracking_accuracy.json'
VARIANTS = ('per_frame', 'tracked', 'tracked_full_scan')


def build(
    variant: str, args: argparse.Namespace, delay: int = 0
) -> Callable[[np.ndarray], list[Person]]:
    """Return a fresh pipeline: RGB frame -> people, keeping state across calls."""
    threads = args.threads
    detector = BlazePoseDetector(
        model=load_tflite_backend(asset_path(DETECTOR_ASSET), args.backend, num_threads=threads)
    )
    landmarker = BlazePoseLandmarker(model=load_landmark_net(args.backend, num_threads=threads))
    if variant == 'per_frame':
        return BlazePosePeople(detector=detector, landmarker=landmarker).people
    # blazepose_lite_people's settings
    lite = BlazePosePeople(
        detector=detector, landmarker=landmarker, refine_roi=False, flip_test=False, hog_scale=1.1
    )
    run_front_end = people_front_end(lite)
    front_end_s: list[float] = []

    def timed_front_end(image: np.ndarray, plane: GroundPlane | None) -> list[Seed]:
        started = time.perf_counter()
        seeds = run_front_end(image, plane)
        front_end_s.append(time.perf_counter() - started)
        return seeds

    tracked = TrackedPeople(
        PeopleTracker(landmarker, landmark_passes=args.passes),
        timed_front_end,
        every_n_frames=args.every,
        min_every_n_frames=min(args.min_every, args.every),
        max_duty=args.max_duty,
        delay_frames=delay,
        ground_plane=GroundPlaneFit() if variant == 'tracked' else None,
    )
    tracked.front_end_s = front_end_s  # type: ignore[attr-defined] - read by video_accuracy
    return tracked


def video_accuracy(
    variant: str, args: argparse.Namespace, delay: int, first_frame: int = 0
) -> dict:
    """Run ``variant`` on vtest.avi from ``first_frame``; count boxes on the labelled frames."""
    annotations = json.loads(BOXES.read_text())
    truth = {int(f['index']): f['boxes'] for f in annotations['frames']}
    pipeline = build(variant, args, delay)
    capture = cv2.VideoCapture(str(asset_path(annotations['video'])))
    total, per_frame, times = Counts(), {}, []
    index = 0
    try:
        while index <= max(truth):
            ok, bgr = capture.read()
            if not ok:
                raise SystemExit(f'{annotations["video"]} ends before frame {max(truth)}')
            if index < first_frame or (variant == 'per_frame' and index not in truth):
                index += 1
                continue
            image = np.ascontiguousarray(bgr[:, :, ::-1])
            start = time.perf_counter()
            people = pipeline(image)
            times.append(time.perf_counter() - start)
            if index in truth:
                boxes = np.array([p.box for p in people]).reshape(-1, 4)
                counts = evaluate_frame(boxes, truth[index])
                total = total + counts
                per_frame[index] = {'tp': counts.tp, 'fp': counts.fp, 'fn': counts.fn}
            index += 1
    finally:
        capture.release()
    result = {
        'precision': total.precision,
        'recall': total.recall,
        'tp': total.tp,
        'fp': total.fp,
        'fn': total.fn,
        'frames_run': len(times),
        'mean_ms_per_frame': 1e3 * float(np.mean(times)),
        'per_labelled_frame': per_frame,
        # Frame 0 of a tracked run has no people yet (the front end's answer is not back).
        'recall_without_frame_0': _recall_without_first(per_frame),
    }
    if isinstance(pipeline, TrackedPeople):
        result['front_end_runs'] = pipeline.front_end_runs
        result['front_end_ms'] = 1e3 * float(np.mean(pipeline.front_end_s))
        if pipeline.ground_plane is not None:
            plane = pipeline.ground_plane.plane()
            result['ground_plane'] = None if plane is None else plane.as_values()
    return result


def phase_accuracy(args: argparse.Namespace, variant: str, delay: int, first: dict) -> dict:
    """Return the tracked pipeline's counts over ``args.phases`` front-end phases.

    The labelled frames are every 40th and the front end is asked every ``--every``
    frames from the first, so one run sees every labelled frame at the same point of the
    front end's cycle. Runs started 0 .. phases-1 frames into the video see the others; all
    are scored on the labelled frames from the first one after the last start.
    ``first``: the run started at frame 0.
    """
    runs = [first['per_labelled_frame']] + [
        video_accuracy(variant, args, delay, start)['per_labelled_frame']
        for start in range(1, args.phases)
    ]
    scored_from = min(index for index in runs[0] if index >= args.phases)
    counts = [_counts_from(run, scored_from) for run in runs]
    return {
        'starts': args.phases,
        'scored_from_frame': scored_from,
        'recall': [c.recall for c in counts],
        'precision': [c.precision for c in counts],
        'mean_recall': float(np.mean([c.recall for c in counts])),
        'mean_precision': float(np.mean([c.precision for c in counts])),
    }


def _counts_from(per_frame: dict[int, dict[str, int]], first_index: int) -> Counts:
    total = Counts()
    for index, c in per_frame.items():
        if index >= first_index:
            total = total + Counts(tp=c['tp'], fp=c['fp'], fn=c['fn'])
    return total


def _recall_without_first(per_frame: dict[int, dict[str, int]]) -> float:
    tp = sum(c['tp'] for index, c in per_frame.items() if index)
    fn = sum(c['fn'] for index, c in per_frame.items() if index)
    return tp / max(tp + fn, 1)


def keypoint_accuracy(variant: str, args: argparse.Namespace) -> dict:
    """Return the keypoint errors (px) of ``variant`` against the hand labels."""
    labels = json.loads(KEYPOINTS.read_text())
    errors: dict[str, float] = {}
    for entry in labels['images']:
        bgr = cv2.imread(str(asset_path(entry['asset'])))
        image = np.ascontiguousarray(bgr[:, :, ::-1])
        pipeline = build(variant, args)
        repeats = 1 if variant == 'per_frame' else args.still_frames
        for _ in range(repeats):
            people = pipeline(image)
        for person in entry['people']:
            found = None
            if people:
                boxes = np.stack([p.box for p in people])
                found = people[nearest_box(boxes, person['box'])].keypoints
            for name, point in person['keypoints'].items():
                key = f'{Path(entry["asset"]).stem}/{name}'
                errors[key] = (
                    float('inf')
                    if found is None
                    else float(np.linalg.norm(found[COCO_KEYPOINT_NAMES.index(name), :2] - point))
                )
    values = np.array(list(errors.values()))
    return {
        'mean_px': float(values.mean()),
        'within_10_px': int((values <= 10.0).sum()),
        'keypoints': len(values),
        'errors_px': errors,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--variants', nargs='+', choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument('--every', type=int, default=10, help='front end every N frames at most')
    parser.add_argument(
        '--min-every',
        type=int,
        default=3,
        help='front end every N frames at least (--every: a fixed interval)',
    )
    parser.add_argument(
        '--max-duty',
        type=float,
        default=DEFAULT_MAX_DUTY,
        help="front end every D / this frames (people_detection's detect_max_duty)",
    )
    parser.add_argument(
        '--delays',
        type=int,
        nargs='+',
        default=[0, 1, 2, 4, 10],
        help='front-end answer delays, frames',
    )
    parser.add_argument(
        '--phases',
        type=int,
        default=1,
        help='tracked runs started 0..N-1 frames into the video (front-end phases; 10 '
        'covers every 10 frames)',
    )
    parser.add_argument(
        '--passes',
        type=int,
        choices=LANDMARK_PASSES,
        default=1,
        help='landmark runs per tracked person and frame (people_detection chooses by time)',
    )
    parser.add_argument('--still-frames', type=int, default=5, help='tracked frames of a photo')
    parser.add_argument('--backend', choices=BACKENDS, default='litert')
    parser.add_argument('--threads', type=int, default=1, help='torch, LiteRT, OpenCV threads')
    parser.add_argument('--output', type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cv2.setNumThreads(args.threads)

    results = {}
    for variant in args.variants:
        keypoints = keypoint_accuracy(variant, args)
        for delay in [0] if variant == 'per_frame' else args.delays:
            name = variant if variant == 'per_frame' else f'{variant}/{delay}'
            results[name] = {'boxes': video_accuracy(variant, args, delay), 'keypoints': keypoints}
            if variant != 'per_frame' and args.phases > 1:
                results[name]['phases'] = phase_accuracy(
                    args, variant, delay, results[name]['boxes']
                )
            print(f'{name}: done', flush=True)
    print(
        f'vtest.avi labelled frames (IoU >= {IOU_THRESHOLD}, recall over people taller than '
        f'{MIN_HEIGHT:.0f} px); keypoints on 2 photos; backend {args.backend}, '
        f'{args.threads} thread(s); tracked/D: front end answering D frames late, asked every '
        f'{args.min_every}-{args.every} frames (D / {args.max_duty:g}), {args.passes} landmark '
        f'run(s) a tracked person and frame; photos tracked for '
        f'{args.still_frames} frames'
    )
    print(
        '| variant | precision | recall | recall without frame 0 | TP | FP | FN '
        '| keypoints within 10 px | mean px | front end ms |'
    )
    print('|---|---|---|---|---|---|---|---|---|---|')
    for variant, r in results.items():
        b, k = r['boxes'], r['keypoints']
        print(
            f'| {variant} | {b["precision"]:.3f} | {b["recall"]:.3f} '
            f'| {b["recall_without_frame_0"]:.3f} | {b["tp"]} | {b["fp"]} | {b["fn"]} '
            f'| {k["within_10_px"]}/{k["keypoints"]} | {k["mean_px"]:.2f} '
            f'| {b.get("front_end_ms", b["mean_ms_per_frame"]):.0f} |'
        )
    phased = {name: r['phases'] for name, r in results.items() if 'phases' in r}
    if phased:
        scored_from = min(p['scored_from_frame'] for p in phased.values())
        print(
            f'\nfront-end phases: tracked runs started 0-{args.phases - 1} frames in, scored '
            f'on the labelled frames from frame {scored_from}'
        )
        print('| variant | recall mean (min-max) | precision mean (min-max) |')
        print('|---|---|---|')
        if 'per_frame' in results:
            c = _counts_from(results['per_frame']['boxes']['per_labelled_frame'], scored_from)
            print(f'| per_frame | {c.recall:.3f} | {c.precision:.3f} |')
        for name, p in phased.items():
            print(
                f'| {name} | {p["mean_recall"]:.3f} ({min(p["recall"]):.3f}-'
                f'{max(p["recall"]):.3f}) | {p["mean_precision"]:.3f} '
                f'({min(p["precision"]):.3f}-{max(p["precision"]):.3f}) |'
            )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(
        json.dumps({'settings': vars(args) | {'output': str(args.output)}, 'results': results})
        + '\n'
    )
    print(f'wrote {args.output}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
