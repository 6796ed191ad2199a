# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The tracking front end with and without the ground plane: time, proposals, people found.

``blazepose_lite_people``'s pipeline (HOG scale step 1.1 and the BlazePose detector
propose, one landmark pass each, LiteRT) on the 20 hand-boxed vtest.avi frames, each frame
run both ways in alternating order (so a change in machine load hits both alike):

* ``every row``: HOG's detectMultiScale over the whole frame upscaled twice;
* ``ground plane``: HOG on each scale's band of foot rows (``hog_people_on_ground``), the
  plane fitted as the people detection node fits it (``GroundPlaneFit``, default
  settings) to the people the pipeline finds on frames 1-39 (no labelled frame among
  them; the node fits tracked people, which are these people a few frames on).

Prints mean ms per frame of HOG and of the whole front end, HOG proposals, and the front
end's people against the hand boxes (precision, recall over people taller than 60 px,
IoU >= 0.5, as ``people_tracking_accuracy.py`` counts them).

    python benchmarks/people_front_end_ground_plane.py [--threads 1] [--output results/...json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import cv2
import numpy as np
import torch

from edge_offload.assets import asset_path
from edge_offload.models import load_model
from edge_offload_zoo.blazepose import hog_people
from edge_offload_zoo.detection_metrics import Counts, evaluate_frame
from edge_offload_zoo.ground_plane import GroundPlane, GroundPlaneFit

ROOT = Path(__file__).resolve().parent.parent
BOXES = ROOT / 'data' / 'annotations' / 'vtest_people_boxes.json'
DEFAULT_OUTPUT = ROOT / 'results' / 'people_front_end_ground_plane.json'
FIT_FRAMES = range(1, 40)
WAYS = ('every row', 'ground plane')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--threads', type=int, default=1, help='OpenCV threads (HOG)')
    parser.add_argument('--output', type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cv2.setNumThreads(args.threads)
    load_before = os.getloadavg()[0]

    annotations = json.loads(BOXES.read_text())
    truth = {int(f['index']): f['boxes'] for f in annotations['frames']}
    capture = cv2.VideoCapture(str(asset_path(annotations['video'])))
    frames: dict[int, np.ndarray] = {}
    for index in range(max(truth) + 1):
        ok, bgr = capture.read()
        if not ok:
            raise SystemExit(f'{annotations["video"]} ends before frame {max(truth)}')
        if index in truth or index in FIT_FRAMES:
            frames[index] = np.ascontiguousarray(bgr[:, :, ::-1])
    capture.release()
    height = next(iter(frames.values())).shape[0]

    pipeline = load_model('blazepose_lite_people').module  # its nets: LiteRT, 1 thread
    fit = GroundPlaneFit()
    for index in FIT_FRAMES:
        fit.add(np.array([p.box for p in pipeline.people(frames[index])]), height)
    plane = fit.plane()
    if plane is None:
        raise SystemExit(f'no ground plane from frames {FIT_FRAMES} ({fit.samples} samples)')
    planes: dict[str, GroundPlane | None] = {'every row': None, 'ground plane': plane}

    hog_s = {way: [] for way in WAYS}
    total_s = {way: [] for way in WAYS}
    proposals = dict.fromkeys(WAYS, 0)
    counts = {way: Counts() for way in WAYS}
    for turn, index in enumerate(sorted(truth)):
        image = frames[index]
        for way in WAYS if turn % 2 == 0 else WAYS[::-1]:
            started = time.perf_counter()
            found = hog_people(image, scale=1.1, ground_plane=planes[way])
            hog_s[way].append(time.perf_counter() - started)
            proposals[way] += len(found)
            started = time.perf_counter()
            people = pipeline.people(image, planes[way])
            total_s[way].append(time.perf_counter() - started)
            boxes = np.array([p.box for p in people]).reshape(-1, 4)
            counts[way] = counts[way] + evaluate_frame(boxes, truth[index])

    print(
        f'blazepose_lite_people on the {len(truth)} hand-boxed vtest.avi frames; '
        f'LiteRT 1 thread, OpenCV {args.threads}; load average before {load_before:.2f}; '
        f'ground plane fitted to its people on frames {FIT_FRAMES.start}-'
        f'{FIT_FRAMES.stop - 1}: height = {plane.slope:.3f} x foot row + '
        f'{plane.intercept:.1f} px ({fit.samples} people), tolerance {plane.tolerance}'
    )
    print('| HOG searches | HOG ms | front end ms | HOG proposals | precision | recall | TP / FP')
    print('|---|---|---|---|---|---|---|')
    results = {}
    for way in WAYS:
        c = counts[way]
        results[way] = {
            'hog_ms': 1e3 * float(np.mean(hog_s[way])),
            'front_end_ms': 1e3 * float(np.mean(total_s[way])),
            'proposals': proposals[way],
            'precision': c.precision,
            'recall': c.recall,
            'tp': c.tp,
            'fp': c.fp,
        }
        r = results[way]
        print(
            f'| {way} | {r["hog_ms"]:.0f} | {r["front_end_ms"]:.0f} | {r["proposals"]} '
            f'| {r["precision"]:.3f} | {r["recall"]:.3f} | {c.tp} / {c.fp}'
        )
    ratio = results['every row']['front_end_ms'] / results['ground plane']['front_end_ms']
    print(f'front end every row / on the ground plane: {ratio:.2f}x')
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(
        json.dumps(
            {
                'settings': {'threads': args.threads, 'load_before': load_before},
                'plane': plane.as_values(),
                'results': results,
            }
        )
        + '\n'
    )
    print(f'wrote {args.output}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
