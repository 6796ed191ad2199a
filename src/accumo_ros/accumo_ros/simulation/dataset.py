# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``accumo_generate``: the AccuMO evaluation data set, and its index.

The default data set is 4 categories × 3 sequences × 20 s at 60 FPS (416×128, IMU at
240 Hz): 14 400 frames. Sequence ``k`` of a category has seed
``base_seed * 1000 + 100 * category_index + k``. The last sequence of each category is the
**held-out split**, used for every accuracy figure; the others are for training and fitting.

Like the dissertation, which trained its DNNs on 20 further videos, the depth nets also train
on a separate **training set**: many short rooms from other seeds, no held-out split
(``--holdout none``), rendered at a lower frame rate (training uses few frames per room)::

    accumo_generate --output results/accumo_dataset             # the default data set
    accumo_generate --output results/accumo_train --seed 1 --holdout none \
        --per-category 16 --duration 10 --fps 10                # the depth nets' training set
    accumo_generate --output /tmp/small --duration 2 --per-category 1 --workers 1

The folder gets one bag per sequence (``<category>_<k>/``) and ``dataset.yaml``, an index
with each sequence's seed, category, split and measured figures (mean |ω|, dynamic share)
and the generation time.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import yaml
from rosbags.rosbag2 import StoragePlugin

from accumo_ros.simulation.sequence import CATEGORIES, SequenceConfig
from accumo_ros.simulation.sequence_bag import generate_sequence_bag

INDEX_FILE = 'dataset.yaml'
SPLITS = ('train', 'heldout')
HOLDOUT_CHOICES = ('last', 'none')


@dataclass(frozen=True)
class SequenceEntry:
    """One sequence of the index."""

    name: str
    category: str
    seed: int
    split: str
    frames: int
    mean_angular_speed_rad_s: float
    mean_dynamic_share: float
    seconds_to_generate: float


def sequence_configs(
    base: SequenceConfig,
    per_category: int,
    base_seed: int,
    categories: tuple[str, ...],
    holdout: str = 'last',
) -> list[tuple[str, str, SequenceConfig]]:
    """Name, split and config of every sequence of a data set.

    ``holdout='last'`` puts the last sequence of each category (of two or more) in the
    held-out split; ``'none'`` makes a training-only set.
    """
    if holdout not in HOLDOUT_CHOICES:
        raise ValueError(f'unknown holdout {holdout!r}; use one of {HOLDOUT_CHOICES}')
    planned = []
    for category in categories:
        category_index = CATEGORIES.index(category)
        for k in range(per_category):
            seed = base_seed * 1000 + 100 * category_index + k
            last = per_category > 1 and k == per_category - 1
            split = 'heldout' if holdout == 'last' and last else 'train'
            config = replace(base, seed=seed, category=category)
            planned.append((f'{category}_{k}', split, config))
    return planned


def _generate_one(
    name: str, split: str, config: SequenceConfig, folder: Path, storage: str, compress: bool
) -> SequenceEntry:
    started = time.monotonic()
    summary = generate_sequence_bag(
        config, folder / name, storage=StoragePlugin[storage.upper()], compress=compress
    )
    return SequenceEntry(
        name=name,
        category=config.category,
        seed=config.seed,
        split=split,
        frames=summary.frames,
        mean_angular_speed_rad_s=round(summary.mean_angular_speed, 4),
        mean_dynamic_share=round(summary.mean_dynamic_share, 4),
        seconds_to_generate=round(time.monotonic() - started, 2),
    )


def load_index(folder: Path | str) -> list[SequenceEntry]:
    """Read a data set's ``dataset.yaml``."""
    path = Path(folder) / INDEX_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f'{path} does not exist; generate the data set with accumo_generate --output {folder}'
        )
    document = yaml.safe_load(path.read_text())
    return [SequenceEntry(**entry) for entry in document['sequences']]


def split_paths(folder: Path | str, split: str) -> list[Path]:
    """Bag folders of one split (``train`` or ``heldout``) of a data set."""
    if split not in SPLITS:
        raise ValueError(f'unknown split {split!r}; use one of {SPLITS}')
    return [Path(folder) / entry.name for entry in load_index(folder) if entry.split == split]


def _parser() -> argparse.ArgumentParser:
    defaults = SequenceConfig()
    parser = argparse.ArgumentParser(
        prog='accumo_generate',
        description='Generate the synthetic AccuMO data set (RGB, depth, pose, IMU) as bags.',
    )
    parser.add_argument('--output', type=Path, required=True, help='Folder for the data set.')
    parser.add_argument('--per-category', type=int, default=3, help='Sequences per category.')
    parser.add_argument(
        '--categories', nargs='+', default=list(CATEGORIES), choices=CATEGORIES, metavar='CAT'
    )
    parser.add_argument('--seed', type=int, default=0, help='Base seed of the data set.')
    parser.add_argument(
        '--holdout',
        choices=HOLDOUT_CHOICES,
        default='last',
        help="'last': hold out each category's last sequence; 'none': a training-only set.",
    )
    parser.add_argument('--duration', type=float, default=defaults.duration_s, help='Seconds.')
    parser.add_argument('--fps', type=float, default=defaults.fps)
    parser.add_argument('--imu-rate', type=float, default=defaults.imu_rate_hz, help='Hz.')
    parser.add_argument('--width', type=int, default=defaults.width)
    parser.add_argument('--height', type=int, default=defaults.height)
    parser.add_argument('--fov', type=float, default=defaults.horizontal_fov_deg, help='Deg.')
    parser.add_argument('--storage', choices=['mcap', 'sqlite3'], default='mcap')
    parser.add_argument('--no-compress', action='store_true', help='No zstd compression.')
    parser.add_argument('--workers', type=int, default=2, help='Sequences generated at once.')
    parser.add_argument('--overwrite', action='store_true', help='Replace an existing set.')
    return parser


def main(argv: list[str] | None = None) -> int:
    """Generate a data set; exit code 2 on bad arguments or an existing output."""
    from tqdm import tqdm

    args = _parser().parse_args(argv)
    if args.per_category < 1 or args.workers < 1:
        print('accumo_generate: --per-category and --workers must be >= 1', file=sys.stderr)
        return 2
    folder: Path = args.output
    if folder.exists() and any(folder.iterdir()):
        if not args.overwrite:
            print(f'accumo_generate: {folder} is not empty; pass --overwrite', file=sys.stderr)
            return 2
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        base = SequenceConfig(
            duration_s=args.duration,
            fps=args.fps,
            imu_rate_hz=args.imu_rate,
            width=args.width,
            height=args.height,
            horizontal_fov_deg=args.fov,
        )
    except ValueError as error:
        print(f'accumo_generate: {error}', file=sys.stderr)
        return 2
    planned = sequence_configs(
        base, args.per_category, args.seed, tuple(args.categories), args.holdout
    )
    started = time.monotonic()
    entries: list[SequenceEntry] = []
    compress = not args.no_compress
    with tqdm(total=len(planned), desc='sequences', unit='seq') as bar:
        if args.workers == 1:
            for name, split, config in planned:
                entries.append(_generate_one(name, split, config, folder, args.storage, compress))
                bar.update(1)
        else:
            with ProcessPoolExecutor(max_workers=args.workers) as pool:
                futures = [
                    pool.submit(_generate_one, n, s, c, folder, args.storage, compress)
                    for n, s, c in planned
                ]
                for future in futures:
                    entries.append(future.result())
                    bar.update(1)
    elapsed = time.monotonic() - started
    document = {
        'generator': 'accumo_ros.simulation.sequence',
        'settings': {
            **asdict(base),
            'imu_noise': asdict(base.imu_noise),
            'seed': args.seed,
            'holdout': args.holdout,
        },
        'seconds_to_generate': round(elapsed, 1),
        'workers': args.workers,
        'sequences': [asdict(entry) for entry in entries],
    }
    del document['settings']['category']
    (folder / INDEX_FILE).write_text(yaml.safe_dump(document, sort_keys=False))
    frames = sum(entry.frames for entry in entries)
    print(
        f'{len(entries)} sequences, {frames} frames in {elapsed:.1f} s '
        f'({args.workers} workers) -> {folder}'
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
