# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Keypoint error of the BlazePose people pipelines against the hand labels.

Labels: data/annotations/keypoints_by_hand.json (median of four independent
annotators per keypoint; each annotator's points are in the file too). For every
labelled keypoint the table gives the pipeline's error in px and, for scale, how far the
annotators themselves lie from their median (mean over annotators).

    python benchmarks/keypoint_accuracy.py [--models blazepose_people blazepose_fast_people]
        [--threshold 10] [--output results/keypoint_accuracy.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import torch

from edge_offload.assets import asset_path
from edge_offload.models import load_model
from edge_offload_zoo.blazepose import COCO_KEYPOINT_NAMES
from edge_offload_zoo.detection_metrics import nearest_box

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LABELS = ROOT / 'data' / 'annotations' / 'keypoints_by_hand.json'
DEFAULT_OUTPUT = ROOT / 'results' / 'keypoint_accuracy.json'
DEFAULT_MODELS = ('blazepose_people', 'blazepose_fast_people', 'blazepose_detector_people')


def main_person_keypoints(result: dict, box: list[float]) -> np.ndarray | None:
    """Return the (17, 3) keypoints of the person whose box centre is nearest ``box``'s."""
    boxes = result['boxes'].numpy()
    if not len(boxes):
        return None
    return result['keypoints'][nearest_box(boxes, box)].numpy()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--labels', type=Path, default=DEFAULT_LABELS)
    parser.add_argument('--models', nargs='+', default=list(DEFAULT_MODELS))
    parser.add_argument('--threshold', type=float, default=10.0, help='px')
    parser.add_argument('--threads', type=int, default=1, help='torch and OpenCV threads')
    parser.add_argument('--output', type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cv2.setNumThreads(args.threads)

    labels = json.loads(args.labels.read_text())
    rows: list[dict] = []
    timings: dict[str, list[float]] = {}
    for model_name in args.models:
        model = load_model(model_name)
        timings[model_name] = []
        for entry in labels['images']:
            bgr = cv2.imread(str(asset_path(entry['asset'])))
            if bgr is None:
                print(f'cannot read {entry["asset"]}', file=sys.stderr)
                return 2
            image = torch.from_numpy(np.ascontiguousarray(bgr[:, :, ::-1])).permute(2, 0, 1)
            start = time.perf_counter()
            result = model({'image': image[None].contiguous()})
            timings[model_name].append(time.perf_counter() - start)
            for person in entry['people']:
                found = main_person_keypoints(result, person['box'])
                for name, point in person['keypoints'].items():
                    marks = [
                        a['keypoints'][name]
                        for a in person.get('annotators', {}).values()
                        if name in a['keypoints']
                    ]
                    spread = float(np.mean([np.linalg.norm(np.subtract(m, point)) for m in marks]))
                    error = (
                        float('inf')
                        if found is None
                        else float(
                            np.linalg.norm(found[COCO_KEYPOINT_NAMES.index(name), :2] - point)
                        )
                    )
                    rows.append(
                        {
                            'model': model_name,
                            'image': Path(entry['asset']).stem,
                            'keypoint': name,
                            'error_px': error,
                            'annotator_spread_px': spread,
                            'annotators': len(marks),
                        }
                    )

    images = sorted({r['image'] for r in rows})
    print(f'keypoint error (px) against the median of the hand labels; {args.threads} thread(s)')
    header = f'{"image":<8}{"keypoint":<16}{"spread":>7}' + ''.join(
        f'{m[:22]:>24}' for m in args.models
    )
    print(header)
    for image in images:
        for name in COCO_KEYPOINT_NAMES:
            cells = [r for r in rows if r['image'] == image and r['keypoint'] == name]
            if not cells:
                continue
            line = f'{image:<8}{name:<16}{cells[0]["annotator_spread_px"]:>7.1f}'
            for model_name in args.models:
                error = next(r['error_px'] for r in cells if r['model'] == model_name)
                flag = ' *' if error > args.threshold else '  '
                line += f'{error:>22.1f}{flag}'
            print(line)
    print(f'* = more than {args.threshold:g} px')
    summary = {}
    for model_name in args.models:
        errors = np.array([r['error_px'] for r in rows if r['model'] == model_name])
        summary[model_name] = {
            'within': int((errors <= args.threshold).sum()),
            'keypoints': len(errors),
            'mean_px': float(errors.mean()),
            'max_px': float(errors.max()),
            'mean_ms_per_image': 1e3 * float(np.mean(timings[model_name])),
        }
        s = summary[model_name]
        print(
            f'{model_name:<26} {s["within"]}/{s["keypoints"]} within {args.threshold:g} px, '
            f'mean {s["mean_px"]:.1f} px, max {s["max_px"]:.1f} px, '
            f'{s["mean_ms_per_image"]:.0f} ms/image'
        )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(
        json.dumps({'threshold_px': args.threshold, 'summary': summary, 'rows': rows}, indent=1)
        + '\n'
    )
    print(f'wrote {args.output}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
