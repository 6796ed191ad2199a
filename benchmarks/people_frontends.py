# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Compare the people front ends of BlazePosePeople on hand-boxed vtest.avi frames.

Ground truth: data/annotations/vtest_people_boxes.json (every visible person boxed on
frames 0, 40, ..., 760). A detection matches a ground-truth box at IoU >= 0.5 (greedy,
highest IoU first). Recall counts ground-truth boxes taller than 60 px; precision counts
all detections except those matched to a box of 60 px or less (neutral). See
edge_offload_zoo.detection_metrics.

    python benchmarks/people_frontends.py [--front-ends hog hybrid] [--threads 1]
        [--refinement on off] [--output results/people_frontends.json]

``--refinement on`` is the pipeline's default (a second landmark pass on the ROI the
first one defines, each pass flip-tested); ``off`` is one plain pass per proposal.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import torch

from edge_offload.assets import asset_path
from edge_offload_zoo.blazepose import (
    FRONT_ENDS,
    BlazePoseDetector,
    BlazePoseLandmarker,
    BlazePosePeople,
)
from edge_offload_zoo.detection_metrics import IOU_THRESHOLD, MIN_HEIGHT, evaluate_frame

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ANNOTATIONS = ROOT / 'data' / 'annotations' / 'vtest_people_boxes.json'
DEFAULT_OUTPUT = ROOT / 'results' / 'people_frontends.json'


def read_frames(video: Path, indices: list[int]) -> dict[int, np.ndarray]:
    """Return the RGB frames of ``video`` at ``indices`` (decoded sequentially)."""
    capture = cv2.VideoCapture(str(video))
    if not capture.isOpened():
        raise SystemExit(f'cannot open {video}')
    wanted, frames, index = set(indices), {}, 0
    try:
        while wanted - set(frames):
            ok, frame = capture.read()
            if not ok:
                break
            if index in wanted:
                frames[index] = np.ascontiguousarray(frame[:, :, ::-1])
            index += 1
    finally:
        capture.release()
    missing = sorted(wanted - set(frames))
    if missing:
        raise SystemExit(f'{video} has no frames {missing}')
    return frames


def run_front_end(
    pipeline: BlazePosePeople, frames: dict[int, np.ndarray], truth: dict[int, list]
) -> dict:
    """Run ``pipeline`` on every frame; return counts, metrics, timing and detections."""
    per_frame, times = [], []
    total = None
    for index in sorted(frames):
        image = torch.from_numpy(frames[index]).permute(2, 0, 1)[None].contiguous()
        start = time.perf_counter()
        boxes, scores, _ = pipeline(image)
        times.append(time.perf_counter() - start)
        counts = evaluate_frame(boxes.numpy(), truth[index])
        total = counts if total is None else total + counts
        per_frame.append(
            {
                'index': index,
                'tp': counts.tp,
                'fp': counts.fp,
                'fn': counts.fn,
                'neutral': counts.neutral,
                'boxes': np.round(boxes.numpy(), 1).tolist(),
                'scores': np.round(scores.numpy(), 4).tolist(),
            }
        )
    return {
        'precision': total.precision,
        'recall': total.recall,
        'tp': total.tp,
        'fp': total.fp,
        'fn': total.fn,
        'neutral': total.neutral,
        'mean_ms': 1e3 * float(np.mean(times)),
        'median_ms': 1e3 * float(np.median(times)),
        'frames': per_frame,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--annotations', type=Path, default=DEFAULT_ANNOTATIONS)
    parser.add_argument('--output', type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument('--front-ends', nargs='+', choices=FRONT_ENDS, default=list(FRONT_ENDS))
    parser.add_argument('--threads', type=int, default=1, help='torch and OpenCV threads')
    parser.add_argument(
        '--refinement',
        nargs='+',
        choices=('on', 'off'),
        default=['on'],
        help='landmark refinement (refine_roi and flip_test) settings to compare',
    )
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    cv2.setNumThreads(args.threads)
    if not args.annotations.is_file():
        print(f'no annotations at {args.annotations}', file=sys.stderr)
        return 2
    annotations = json.loads(args.annotations.read_text())
    truth = {
        int(f['index']): [list(map(float, b)) for b in f['boxes']] for f in annotations['frames']
    }
    frames = read_frames(asset_path(annotations['video']), sorted(truth))
    large = sum(1 for boxes in truth.values() for b in boxes if b[3] - b[1] > MIN_HEIGHT)

    # The models are loaded once and shared by every front end.
    detector, landmarker = BlazePoseDetector(), BlazePoseLandmarker()
    results = {}
    for front_end in args.front_ends:
        for refinement in args.refinement:
            refine = refinement == 'on'
            pipeline = BlazePosePeople(
                front_end,
                detector=detector,
                landmarker=landmarker,
                refine_roi=refine,
                flip_test=refine,
            )
            pipeline(torch.zeros((1, 3, 64, 64), dtype=torch.uint8))  # warm-up
            name = front_end if args.refinement == ['on'] else f'{front_end}/{refinement}'
            results[name] = run_front_end(pipeline, frames, truth)

    print(
        f'{len(frames)} frames of {annotations["video"]}, {large} ground-truth people taller '
        f'than {MIN_HEIGHT:.0f} px; IoU >= {IOU_THRESHOLD}; {args.threads} thread(s) '
        f'(torch and OpenCV), {platform.processor() or platform.machine()}'
    )
    print(
        f'{"front end":<14}{"precision":>10}{"recall":>8}{"TP":>5}{"FP":>5}{"FN":>5}'
        f'{"neutral":>8}{"ms/frame":>10}'
    )
    for name, r in results.items():
        print(
            f'{name:<14}{r["precision"]:>10.3f}{r["recall"]:>8.3f}{r["tp"]:>5}{r["fp"]:>5}'
            f'{r["fn"]:>5}{r["neutral"]:>8}{r["mean_ms"]:>10.0f}'
        )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(
        json.dumps(
            {
                'video': annotations['video'],
                'frames': sorted(truth),
                'ground_truth_people_over_min_height': large,
                'iou_threshold': IOU_THRESHOLD,
                'min_height_px': MIN_HEIGHT,
                'threads': args.threads,
                'refinement': args.refinement,
                'torch': torch.__version__,
                'opencv': cv2.__version__,
                'front_ends': results,
            },
            indent=1,
        )
        + '\n'
    )
    print(f'wrote {args.output}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
