# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Where the default people pipeline spends its time, per stage, on each net backend.

Runs ``BlazePosePeople()`` (front end 'hybrid', refine_roi and flip_test on) on the
first ``--frames`` frames of vtest.avi with its two nets on the torch port and/or on
LiteRT (edge_offload_zoo.litert_backend), and prints the mean milliseconds per frame of:
the HOG front end (``blazepose.hog_people`` with the pipeline's settings), the BlazePose
detector (letterbox + net + decode), the landmark net (per run and runs per frame), the
rest of ``people()`` (landmark crops and decoding, flip averaging, boxes, NMS) and the
whole ``people()`` call.

    python benchmarks/people_stages.py [--frames 20] [--threads 1] [--backends torch litert]

``--threads`` sets torch's, LiteRT's and OpenCV's threads (OpenCV runs HOG and the
crops). Stages are timed inside each ``people()`` call by wrapping the pipeline's pieces;
backends alternate frame by frame so that a change in machine load hits both alike.

The last line compares the backends' people. Their keypoints can differ by more than a
landmarker's (~1e-3 px on one ROI): each backend's second pass crops the ROI its own first
pass found, and cv2.warpAffine snaps sample positions to 1/32 px: a ROI moved by 4e-5 px
changed 34 crop pixels by up to 4 levels, enough to move an uncertain landmark ~1 px.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import version

import cv2
import numpy as np
import torch
from torch import nn

from edge_offload.assets import asset_path
from edge_offload_zoo import blazepose
from edge_offload_zoo.blazepose import BlazePoseDetector, BlazePoseLandmarker, BlazePosePeople
from edge_offload_zoo.litert_backend import BACKENDS, load_tflite_backend

VIDEO = 'media/opencv/vtest.avi'
STAGES = ('hog', 'detector', 'landmark_net', 'total')


class Clock:
    """Seconds spent in each stage (and landmark-net calls) since the last reset."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(STAGES, 0.0)
        self.landmark_runs = 0

    def reset(self) -> None:
        self.seconds = dict.fromkeys(STAGES, 0.0)
        self.landmark_runs = 0

    def timed(self, stage: str, function: Callable) -> Callable:
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[stage] += time.perf_counter() - start

        return wrapper


class CountedNet(nn.Module):
    """The landmark net, timed and counted (one call is one 1x256x256x3 crop)."""

    def __init__(self, net: nn.Module, clock: Clock) -> None:
        super().__init__()
        self.net = net
        self.clock = clock

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        start = time.perf_counter()
        outputs = self.net(x)
        self.clock.seconds['landmark_net'] += time.perf_counter() - start
        self.clock.landmark_runs += 1
        return outputs


def build(backend: str, threads: int, clock: Clock) -> BlazePosePeople:
    """Build the default pipeline with both nets on ``backend``, timed by ``clock``."""
    detector = BlazePoseDetector(
        model=load_tflite_backend(
            asset_path(blazepose.DETECTOR_ASSET), backend, num_threads=threads
        )
    )
    net = blazepose.load_landmark_net(backend, num_threads=threads)
    landmarker = BlazePoseLandmarker(model=CountedNet(net, clock))
    pipeline = BlazePosePeople(detector=detector, landmarker=landmarker)
    # detect() is letterbox + net + decode; the instance attribute shadows the method.
    detector.detect = clock.timed('detector', detector.detect)
    return pipeline


@contextmanager
def timed_hog_all(clocks: dict[str, Clock]) -> Iterator[Callable[[str], None]]:
    """Route ``blazepose.hog_people``'s time to the clock of the backend running now."""
    current = {'clock': next(iter(clocks.values()))}
    original = blazepose.hog_people

    def hog_people(*args, **kwargs):
        return current['clock'].timed('hog', original)(*args, **kwargs)

    def use(backend: str) -> None:
        current['clock'] = clocks[backend]

    blazepose.hog_people = hog_people
    try:
        yield use
    finally:
        blazepose.hog_people = original


def read_frames(count: int) -> list[np.ndarray]:
    """Return the first ``count`` frames of vtest.avi as RGB."""
    capture = cv2.VideoCapture(str(asset_path(VIDEO)))
    if not capture.isOpened():
        raise SystemExit(f'cannot open {VIDEO}')
    frames = []
    try:
        while len(frames) < count:
            ok, frame = capture.read()
            if not ok:
                break
            frames.append(np.ascontiguousarray(frame[:, :, ::-1]))
    finally:
        capture.release()
    if len(frames) < count:
        raise SystemExit(f'{VIDEO} has only {len(frames)} frames')
    return frames


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--frames', type=int, default=20, help='first N frames of vtest.avi')
    parser.add_argument('--threads', type=int, default=1, help='torch, LiteRT, OpenCV threads')
    parser.add_argument('--backends', nargs='+', choices=BACKENDS, default=list(BACKENDS))
    args = parser.parse_args(argv)
    if args.frames < 1 or args.threads < 1:
        parser.error('--frames and --threads must be at least 1')
    backends = list(dict.fromkeys(args.backends))

    load_before = os.getloadavg()[0]  # other work on the machine skews the timings
    torch.set_num_threads(args.threads)
    cv2.setNumThreads(args.threads)
    frames = read_frames(args.frames)
    clocks = {backend: Clock() for backend in backends}
    pipelines = {backend: build(backend, args.threads, clocks[backend]) for backend in backends}
    samples: dict[str, list[dict[str, float]]] = {backend: [] for backend in backends}
    found: dict[str, list[list]] = {backend: [] for backend in backends}

    with timed_hog_all(clocks) as use, torch.inference_mode():
        for backend in backends:  # warm-up: first calls pack weights, size allocators
            use(backend)
            pipelines[backend].people(frames[0])
        for frame in frames:
            for backend in backends:
                clock = clocks[backend]
                use(backend)
                clock.reset()
                people = clock.timed('total', pipelines[backend].people)(frame)
                runs = clock.landmark_runs
                samples[backend].append({**clock.seconds, 'runs': runs})
                found[backend].append(people)

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()
    versions = f'torch {torch.__version__}'
    if 'litert' in backends:
        versions += f', ai-edge-litert {version("ai-edge-litert")} (XNNPACK)'
    print(
        f'BlazePosePeople() (front end {blazepose.DEFAULT_FRONT_END!r}, refine_roi and '
        f'flip_test on) on the first {args.frames} frames of {VIDEO} '
        f'({frames[0].shape[1]}x{frames[0].shape[0]})'
    )
    print(
        f'threads: {args.threads} (torch, LiteRT, OpenCV); CPUs: {cpus} '
        f'({platform.processor() or platform.machine()}); load average before: '
        f'{load_before:.2f}'
    )
    print(f'{versions}, OpenCV {cv2.__version__}, Python {platform.python_version()}')
    print()

    def mean_ms(key: str) -> dict[str, float]:
        return {b: 1e3 * float(np.mean([s[key] for s in samples[b]])) for b in backends}

    runs = {b: float(np.mean([s['runs'] for s in samples[b]])) for b in backends}
    hog, detector, landmark, total = (mean_ms(key) for key in STAGES)
    rows = [
        ('HOG front end (ms/frame)', hog, '.1f'),
        ('detector: letterbox + net + decode (ms/frame)', detector, '.1f'),
        ('landmark net (ms/run)', {b: landmark[b] / max(runs[b], 1e-9) for b in backends}, '.1f'),
        ('landmark net runs per frame', runs, '.1f'),
        ('landmark net (ms/frame)', landmark, '.1f'),
        (
            'crop/decode/NMS/box: the rest (ms/frame)',
            {b: total[b] - hog[b] - detector[b] - landmark[b] for b in backends},
            '.1f',
        ),
        ('total people(image) (ms/frame)', total, '.1f'),
    ]
    ratio = len(backends) == 2
    header = ['stage', *backends] + ([f'{backends[0]} / {backends[1]}'] if ratio else [])
    print('| ' + ' | '.join(header) + ' |')
    print('|' + '|'.join(['---'] + ['---:'] * (len(header) - 1)) + '|')
    for label, values, spec in rows:
        cells = [format(values[b], spec) for b in backends]
        if ratio:
            second = values[backends[1]]
            cells.append(f'{values[backends[0]] / second:.2f}' if second > 0 else '-')
        print('| ' + ' | '.join([label, *cells]) + ' |')

    if ratio:
        # The backends' outputs should agree: same people, keypoints within a fraction of a px.
        a, b = backends
        same = sum(len(x) == len(y) for x, y in zip(found[a], found[b], strict=True))
        worst = max(
            (
                float(np.abs(p.keypoints[:, :2] - q.keypoints[:, :2]).max())
                for x, y in zip(found[a], found[b], strict=True)
                if len(x) == len(y)
                for p, q in zip(x, y, strict=True)
            ),
            default=0.0,
        )
        people = sum(len(x) for x in found[a])
        print()
        print(
            f'{people} people in all; same count on {same}/{len(frames)} frames; '
            f'largest keypoint difference {a} vs {b}: {worst:.4f} px'
        )
    return 0


if __name__ == '__main__':
    sys.exit(main())
