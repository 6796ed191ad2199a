# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
r"""``accumo_train_depth``: train AccuMO's server or lite depth net from scratch.

No pretrained monocular depth weights exist offline, so the nets of
:mod:`accumo_ros.tasks.depth_nets` are trained here, on a CPU, on the train split of a data set
made by ``accumo_generate``, supervised by its exact ground-truth depth, within a wall-clock
budget; then evaluated on the held-out split with :func:`accumo_ros.metrics.depth_errors`::

    accumo_train_depth --dataset results/accumo_dataset \
        --extra-train results/accumo_train --kind server --minutes 45 --every 3 \
        --output src/accumo_ros/accumo_ros/weights/depth_server.pt

Training:

* **Data**: every ``--every``-th frame of each train sequence of ``--dataset`` (60 FPS frames
  are nearly duplicates), plus every ``--extra-every``-th frame of each sequence of the
  training-only sets named by ``--extra-train`` (``accumo_generate --holdout none``: many
  more rooms, as the dissertation trained on 20 further videos; on the 8 train rooms of the
  default set alone the server net learnt the rooms, train AbsRel 0.03 against 0.15
  held-out), preloaded as uint8 RGB and float16 depth (0.05 % relative precision). An extra
  set must have the data set's image size and none of its held-out seeds.
* **Augmentation**: random horizontal flips (the principal point is the image centre, so a
  flipped frame is a valid frame) and brightness and per-channel colour jitter.
* **Loss** on log-depth, with the prediction upsampled to the ground truth's resolution (the
  lite net's too, so it learns what it is scored on): the scale-invariant log loss of Eigen
  et al. with λ = 0.85 (AdaBins' SILog), which shapes the depth map, plus the mean absolute
  log error, which pins the metric scale (SILog only charges 15 % of a global scale error).
* **Optimiser**: AdamW with a 3 % linear warm-up then a cosine decay to 1 % of ``--lr``,
  driven by the elapsed share of the budget (or of ``--max-steps``), so a run stops at its
  budget with the learning rate annealed whatever the machine's speed. Runs with one seed
  draw the same initial weights, batches and augmentations; how many steps fit into the
  budget depends on the machine (``--max-steps`` makes a run exactly repeatable).

Evaluation: every ``--eval-every``-th held-out frame, predicted at the data set's resolution
through ``predict`` (as AccuMO uses the nets), against two trivial baselines that keep the
numbers honest: the training set's median depth everywhere, and its per-pixel median depth
map. The weights go to ``--output`` with metadata (architecture, input size, this command,
the held-out figures, the data set's seed and sequences); a YAML report goes next to them.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import yaml

from accumo_ros.metrics import DepthErrors, depth_errors
from accumo_ros.simulation.dataset import INDEX_FILE, SequenceEntry, load_index
from accumo_ros.simulation.sequence_bag import read_sequence_bag
from accumo_ros.tasks.depth_nets import (
    KINDS,
    build_depth_net,
    conv_macs,
    count_parameters,
    round_to_float16,
    save_depth_weights,
    upsample_log_depth,
    weights_metadata,
)

SILOG_VARIANCE_FOCUS = 0.85
WARMUP_SHARE = 0.03
FINAL_LR_SHARE = 0.01
BRIGHTNESS_JITTER = 0.25
COLOUR_JITTER = 0.08
DEFAULTS = {
    'server': {'batch_size': 8, 'lr': 2e-3},
    'lite': {'batch_size': 16, 'lr': 3e-3},
}
# Data-set settings stored with the weights (SequenceConfig fields that shape the images).
GENERATOR_KEYS = ('duration_s', 'fps', 'width', 'height', 'horizontal_fov_deg', 'static_boxes')
# Frames per predict() call in evaluation.
_EVAL_CHUNK = 32
# Frames used for the per-pixel median baseline (a median over more changes little).
_BASELINE_FRAMES = 256


@dataclass
class FrameSet:
    """Frames of one split in memory."""

    rgb: torch.Tensor  # (N, H, W, 3) uint8
    depth: torch.Tensor  # (N, H, W) float16 metres
    sequences: list[str] = field(default_factory=list)
    sequence_index: torch.Tensor | None = None  # (N,) which of ``sequences`` a frame is from

    def __len__(self) -> int:
        return self.rgb.shape[0]

    def __add__(self, other: FrameSet) -> FrameSet:
        """Return both sets' frames in one set (``other``'s sequences numbered after these)."""
        if self.rgb.shape[1:] != other.rgb.shape[1:]:
            raise ValueError(
                f'frames of {tuple(self.rgb.shape[1:3])} and {tuple(other.rgb.shape[1:3])} '
                'pixels cannot be trained on together'
            )
        index = [self.sequence_index, other.sequence_index]
        return FrameSet(
            rgb=torch.cat([self.rgb, other.rgb]),
            depth=torch.cat([self.depth, other.depth]),
            sequences=self.sequences + other.sequences,
            sequence_index=(
                None
                if any(i is None for i in index)
                else torch.cat([index[0], index[1] + len(self.sequences)])
            ),
        )


def load_frames(
    paths: Sequence[Path], every: int, *, max_frames: int | None = None, progress: bool = True
) -> FrameSet:
    """Read every ``every``-th frame of the sequence bags ``paths`` into one :class:`FrameSet`.

    ``max_frames`` caps the frames taken from each sequence.
    """
    from tqdm import tqdm

    if not paths:
        raise ValueError('no sequence to load')
    rgb, depth, index = [], [], []
    for number, path in enumerate(tqdm(paths, desc='loading', unit='seq', disable=not progress)):
        loaded = read_sequence_bag(path, every=every, max_frames=max_frames)
        rgb.append(torch.from_numpy(loaded.rgb.copy()))
        depth.append(torch.from_numpy(loaded.depth).to(torch.float16))
        index.append(torch.full((len(loaded.rgb),), number, dtype=torch.int64))
    return FrameSet(
        rgb=torch.cat(rgb),
        depth=torch.cat(depth),
        sequences=[Path(p).name for p in paths],
        sequence_index=torch.cat(index),
    )


def extra_training_sequences(
    folder: Path, heldout_seeds: set[int], size: tuple[int, int]
) -> tuple[list[SequenceEntry], dict[str, object]]:
    """Return the train sequences of the training-only set ``folder`` and its description.

    Raises ValueError when the set's frames are not ``size`` = (width, height) or when it
    holds a sequence whose seed is one of ``heldout_seeds`` (it would train on held-out
    frames).
    """
    entries = [entry for entry in load_index(folder) if entry.split == 'train']
    settings = yaml.safe_load((folder / INDEX_FILE).read_text()).get('settings', {})
    found = (settings.get('width'), settings.get('height'))
    if found != tuple(size):
        raise ValueError(
            f'{folder} has {found[0]}x{found[1]} frames, the data set {size[0]}x{size[1]}'
        )
    leaked = sorted(heldout_seeds & {entry.seed for entry in entries})
    if leaked:
        raise ValueError(
            f'{folder} holds held-out sequences (seeds {leaked}); generate it with another --seed'
        )
    if not entries:
        raise ValueError(f'{folder} has no train sequence')
    description = {
        'folder': folder.name,
        'seed': int(settings.get('seed', 0)),
        'generator': {key: settings[key] for key in GENERATOR_KEYS if key in settings},
        'sequences': len(entries),
        'seeds': [entry.seed for entry in entries],
    }
    return entries, description


def depth_loss(log_predicted: torch.Tensor, depth: torch.Tensor) -> torch.Tensor:
    """Return SILog (λ = 0.85, per image) plus mean |log error| for (N, 1, H, W) inputs.

    ``log_predicted`` is log-depth at the resolution of ``depth`` (metres, all valid).
    """
    error = (log_predicted - torch.log(depth)).flatten(1)
    mean = error.mean(dim=1)
    variance = (error**2).mean(dim=1) - SILOG_VARIANCE_FOCUS * mean**2
    silog = torch.sqrt(variance.clamp_min(1e-8))
    return silog.mean() + error.abs().mean()


def lr_factor(progress: float) -> float:
    """Return the learning-rate multiplier at ``progress`` ∈ [0, 1] of the run.

    Linear warm-up over the first 3 %, then a cosine decay from 1 to 0.01.
    """
    progress = min(max(progress, 0.0), 1.0)
    if progress < WARMUP_SHARE:
        return 0.1 + 0.9 * progress / WARMUP_SHARE
    cosine = 0.5 * (1.0 + math.cos(math.pi * (progress - WARMUP_SHARE) / (1.0 - WARMUP_SHARE)))
    return FINAL_LR_SHARE + (1.0 - FINAL_LR_SHARE) * cosine


def augment(
    rgb: torch.Tensor, depth: torch.Tensor, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Flip half the batch horizontally and jitter brightness and colour.

    ``rgb`` is (N, 3, H, W) float in [0, 1], ``depth`` (N, 1, H, W); both are returned new.
    """
    count = rgb.shape[0]
    flip = torch.rand(count, generator=generator) < 0.5
    rgb = torch.where(flip.view(-1, 1, 1, 1), rgb.flip(-1), rgb)
    depth = torch.where(flip.view(-1, 1, 1, 1), depth.flip(-1), depth)
    brightness = 1.0 + BRIGHTNESS_JITTER * (
        2.0 * torch.rand(count, 1, 1, 1, generator=generator) - 1.0
    )
    colour = 1.0 + COLOUR_JITTER * (2.0 * torch.rand(count, 3, 1, 1, generator=generator) - 1.0)
    return (rgb * brightness * colour).clamp(0.0, 1.0), depth


@dataclass
class TrainResult:
    """What a training run did."""

    steps: int
    epochs: float
    seconds: float
    first_losses: float  # mean loss of the first 20 steps (of the first half if shorter)
    last_losses: float  # mean loss of the last 20 steps (of the last half if shorter)
    losses: list[float]


def train_net(
    net: torch.nn.Module,
    frames: FrameSet,
    *,
    minutes: float,
    batch_size: int,
    lr: float,
    seed: int,
    weight_decay: float = 1e-4,
    max_steps: int | None = None,
    progress: bool = True,
) -> TrainResult:
    """Train ``net`` (a depth net) on ``frames`` until ``minutes`` or ``max_steps`` run out.

    The learning-rate schedule follows the elapsed share of the budget, or of ``max_steps``
    when given. Batches and augmentations are drawn from ``seed``.
    """
    from tqdm import tqdm

    if len(frames) == 0:
        raise ValueError('no training frame')
    budget_s = minutes * 60.0
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay)
    batch_size = min(batch_size, len(frames))
    size = (frames.rgb.shape[1], frames.rgb.shape[2])
    net.train()
    losses: list[float] = []
    step = 0
    order = torch.empty(0, dtype=torch.int64)
    started = time.monotonic()
    bar = tqdm(
        total=max_steps if max_steps is not None else round(budget_s),
        unit='step' if max_steps is not None else 's',
        desc='training',
        disable=not progress,
    )
    with bar:
        while True:
            elapsed = time.monotonic() - started
            share = step / max_steps if max_steps is not None else 0.0
            share = max(share, elapsed / budget_s)
            if share >= 1.0:
                break
            if order.numel() < batch_size:
                order = torch.randperm(len(frames), generator=generator)
            batch, order = order[:batch_size], order[batch_size:]
            rgb = frames.rgb[batch].permute(0, 3, 1, 2).float() / 255.0
            depth = frames.depth[batch].float().unsqueeze(1)
            rgb, depth = augment(rgb, depth, generator)
            for group in optimiser.param_groups:
                group['lr'] = lr * lr_factor(share)
            log_predicted = upsample_log_depth(net.forward_log(net.prepare(rgb)), size)
            loss = depth_loss(log_predicted, depth)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            losses.append(loss.item())
            step += 1
            if max_steps is not None:
                bar.update(1)
            else:
                bar.update(min(round(time.monotonic() - started), bar.total) - bar.n)
            if step % 10 == 0:
                recent = float(np.mean(losses[-50:]))
                bar.set_postfix(loss=f'{recent:.4f}', lr=f'{lr * lr_factor(share):.2e}', step=step)
    seconds = time.monotonic() - started
    net.eval()
    window = max(1, min(20, len(losses) // 2))  # never overlapping
    return TrainResult(
        steps=step,
        epochs=step * batch_size / len(frames),
        seconds=seconds,
        first_losses=float(np.mean(losses[:window])) if losses else math.nan,
        last_losses=float(np.mean(losses[-window:])) if losses else math.nan,
        losses=losses,
    )


def predict_frames(net: torch.nn.Module, frames: FrameSet) -> np.ndarray:
    """Return the net's depth (N, H, W) float32 for every frame, at the frames' resolution."""
    return np.concatenate([net.predict(chunk.numpy()) for chunk in frames.rgb.split(_EVAL_CHUNK)])


def evaluate(predicted: np.ndarray, frames: FrameSet) -> dict[str, DepthErrors]:
    """Return depth errors over all frames (``all``) and per sequence."""
    truth = frames.depth.float().numpy()
    results = {'all': depth_errors(predicted, truth)}
    if frames.sequence_index is not None:
        for number, name in enumerate(frames.sequences):
            chosen = (frames.sequence_index == number).numpy()
            if chosen.any():
                results[name] = depth_errors(predicted[chosen], truth[chosen])
    return results


def training_median(train: FrameSet, seed: int) -> float:
    """Return the median depth (m) of the train frames, from 4 M sampled pixels."""
    generator = torch.Generator().manual_seed(seed)
    flat = train.depth.view(-1)
    count = min(flat.numel(), 4_000_000)
    return float(flat[torch.randint(flat.numel(), (count,), generator=generator)].float().median())


def baselines(train: FrameSet, heldout: FrameSet, seed: int) -> dict[str, DepthErrors]:
    """Return the held-out errors of two trivial predictors fitted on the train frames.

    ``median``: the training set's median depth everywhere (from 4 M sampled pixels).
    ``pixel_median``: each pixel's median depth over up to 256 evenly spaced train frames,
    the "average room" a net could learn without looking at the image.
    """
    median = training_median(train, seed)
    chosen = torch.linspace(0, len(train) - 1, min(len(train), _BASELINE_FRAMES)).round().long()
    pixel_median = train.depth[chosen].float().median(dim=0).values.numpy()
    truth = heldout.depth.float().numpy()
    return {
        'median': depth_errors(np.full_like(truth, median), truth),
        'pixel_median': depth_errors(np.broadcast_to(pixel_median, truth.shape), truth),
    }


def cpu_milliseconds(net: torch.nn.Module, size: tuple[int, int], repeats: int = 20) -> float:
    """Return the median wall-clock ms of ``predict`` on one uint8 frame of ``size`` (W, H)."""
    frame = np.zeros((size[1], size[0], 3), np.uint8)
    for _ in range(3):
        net.predict(frame)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        net.predict(frame)
        times.append(time.perf_counter() - started)
    return 1000.0 * float(np.median(times))


def _errors_row(name: str, errors: DepthErrors) -> str:
    return f'{name:<24} {errors.abs_rel:>8.4f} {errors.delta1:>8.4f} {errors.rmse:>8.3f}'


def _rounded(errors: DepthErrors) -> dict[str, float | int]:
    return {
        key: (round(value, 5) if isinstance(value, float) else value)
        for key, value in asdict(errors).items()
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='accumo_train_depth',
        description="Train AccuMO's server or lite monocular depth net on a generated data set.",
    )
    parser.add_argument('--dataset', type=Path, required=True, help='accumo_generate folder.')
    parser.add_argument('--kind', choices=KINDS, required=True, help='Which net.')
    parser.add_argument('--minutes', type=float, required=True, help='Training budget.')
    parser.add_argument('--output', type=Path, required=True, help='Weights file (.pt).')
    parser.add_argument('--every', type=int, default=3, help='Train on every k-th frame.')
    parser.add_argument(
        '--extra-train',
        type=Path,
        action='append',
        default=[],
        metavar='FOLDER',
        help='A training-only set (accumo_generate --holdout none) to train on too; repeatable.',
    )
    parser.add_argument(
        '--extra-every', type=int, default=1, help='Every k-th frame of the extra sets.'
    )
    parser.add_argument('--eval-every', type=int, default=10, help='Held-out frame stride.')
    parser.add_argument('--seed', type=int, default=0, help='Initial weights and batches.')
    parser.add_argument('--batch-size', type=int, help='Default: 8 (server), 16 (lite).')
    parser.add_argument('--lr', type=float, help='Peak LR. Default: 2e-3 / 3e-3 (lite).')
    parser.add_argument('--weight-decay', type=float, default=1e-4, help='AdamW decay.')
    parser.add_argument('--max-steps', type=int, help='Also stop after this many steps.')
    parser.add_argument('--max-frames', type=int, help='Frames per sequence at most.')
    parser.add_argument('--threads', type=int, default=2, help='torch CPU threads.')
    parser.add_argument('--no-progress', action='store_true', help='No progress bars.')
    return parser


@dataclass
class _TrainingData:
    """The frames a run trains and scores on, and what the report says about them."""

    index_document: dict
    split: dict[str, list[SequenceEntry]]
    extra_sets: list[tuple]
    train: FrameSet
    heldout: FrameSet
    loading_s: float


def _argument_error(args: argparse.Namespace) -> str | None:
    """Return what is wrong with the arguments, or None."""
    numbers = (args.every, args.extra_every, args.eval_every, args.threads, args.batch_size or 1)
    if (
        args.minutes <= 0
        or min(numbers) < 1
        or (args.max_steps is not None and args.max_steps < 1)
    ):
        return (
            '--minutes, --every, --extra-every, --eval-every, --threads, '
            '--batch-size and --max-steps must be positive'
        )
    if not (args.dataset / INDEX_FILE).is_file():
        return f'{args.dataset / INDEX_FILE} does not exist'
    return None


def _load_training_data(args: argparse.Namespace) -> _TrainingData:
    """Load the train and held-out frames; ValueError says what is missing."""
    progress = not args.no_progress
    entries = load_index(args.dataset)
    index_document = yaml.safe_load((args.dataset / INDEX_FILE).read_text())
    split = {
        name: [entry for entry in entries if entry.split == name] for name in ('train', 'heldout')
    }
    if not split['train'] or not split['heldout']:
        raise ValueError('the data set needs train and held-out sequences')
    settings = index_document.get('settings', {})
    size = (settings.get('width'), settings.get('height'))
    heldout_seeds = {entry.seed for entry in split['heldout']}
    extra_sets = []
    for folder in args.extra_train:
        try:
            extra_sets.append((folder, *extra_training_sequences(folder, heldout_seeds, size)))
        except (OSError, ValueError) as error:
            raise ValueError(f'--extra-train: {error}') from None
    loading = time.monotonic()
    train = load_frames(
        [args.dataset / e.name for e in split['train']],
        args.every,
        max_frames=args.max_frames,
        progress=progress,
    )
    for folder, entries_of_set, _ in extra_sets:
        train = train + load_frames(
            [folder / e.name for e in entries_of_set],
            args.extra_every,
            max_frames=args.max_frames,
            progress=progress,
        )
    heldout = load_frames(
        [args.dataset / e.name for e in split['heldout']],
        args.eval_every,
        max_frames=args.max_frames,
        progress=progress,
    )
    return _TrainingData(
        index_document, split, extra_sets, train, heldout, time.monotonic() - loading
    )


def main(argv: list[str] | None = None) -> int:
    """Train, evaluate and save one depth net; exit code 2 on bad arguments."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    error = _argument_error(args)
    if error is not None:
        print(f'train_depth: {error}', file=sys.stderr)
        return 2
    command = shlex.join(['accumo_train_depth', *argv])
    batch_size = args.batch_size or DEFAULTS[args.kind]['batch_size']
    lr = args.lr or DEFAULTS[args.kind]['lr']
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    try:
        data = _load_training_data(args)
    except ValueError as error:
        print(f'train_depth: {error}', file=sys.stderr)
        return 2
    train, heldout = data.train, data.heldout
    height, width = train.rgb.shape[1:3]
    print(
        f'{len(train)} train frames from {len(train.sequences)} sequences and {len(heldout)} '
        f'held-out frames (every {args.eval_every}) at {width}x{height}, loaded in '
        f'{data.loading_s:.0f} s'
    )

    net = build_depth_net(args.kind)
    macs = conv_macs(net)
    print(
        f'{args.kind}: {net.architecture}, input {net.input_size[0]}x{net.input_size[1]}, '
        f'{count_parameters(net) / 1e6:.2f} M parameters, {macs / 1e9:.3f} GMAC; batch '
        f'{batch_size}, lr {lr:g}, {args.minutes:g} min'
    )
    result = train_net(
        net,
        train,
        minutes=args.minutes,
        batch_size=batch_size,
        lr=lr,
        seed=args.seed,
        weight_decay=args.weight_decay,
        max_steps=args.max_steps,
        progress=not args.no_progress,
    )
    print(
        f'trained {result.steps} steps ({result.epochs:.2f} epochs) in {result.seconds:.0f} s; '
        f'loss {result.first_losses:.4f} (first 20 steps) -> {result.last_losses:.4f} (last 20)'
    )
    # The file stores float16 weights: score exactly those.
    round_to_float16(net)
    scores = _score(net, args, data)
    metadata = _metadata(net, args, data, scores, command, batch_size, lr, result)
    save_depth_weights(net, args.output, metadata)
    report = {
        **metadata,
        'conv_macs': macs,
        'predict_ms': round(scores['predict_ms'], 2),
        'predict_threads': args.threads,
        'seconds': {
            'loading': round(data.loading_s, 1),
            'training': round(result.seconds, 1),
            'evaluation': round(scores['seconds'], 1),
        },
        'heldout_errors': {name: _rounded(value) for name, value in scores['errors'].items()},
        'baselines': {name: _rounded(value) for name, value in scores['trivial'].items()},
        'losses_every_50_steps': [round(v, 5) for v in result.losses[::50]],
    }
    report_path = args.output.with_suffix('.yaml')
    report_path.write_text(yaml.safe_dump(report, sort_keys=False, allow_unicode=True))
    print(f'weights -> {args.output}, report -> {report_path}')
    return 0


def _score(net: torch.nn.Module, args: argparse.Namespace, data: _TrainingData) -> dict:
    """Score ``net`` and the trivial baselines on the held-out frames; print the table."""
    train, heldout = data.train, data.heldout
    evaluating = time.monotonic()
    errors = evaluate(predict_frames(net, heldout), heldout)
    trivial = baselines(train, heldout, args.seed)
    evaluating = time.monotonic() - evaluating
    print(f'\nheld-out ({len(heldout)} frames, {", ".join(heldout.sequences)}):')
    print(f'{"predictor":<24} {"AbsRel":>8} {"delta1":>8} {"RMSE m":>8}')
    print(_errors_row(f'{args.kind} net', errors['all']))
    for name, value in trivial.items():
        print(_errors_row(f'baseline: {name}', value))
    for name in heldout.sequences:
        if name in errors:
            print(_errors_row(f'  {name}', errors[name]))
    height, width = train.rgb.shape[1:3]
    milliseconds = cpu_milliseconds(net, (width, height))
    print(
        f'\npredict on one {width}x{height} frame: {milliseconds:.1f} ms ({args.threads} threads)'
    )
    return {
        'errors': errors,
        'trivial': trivial,
        'seconds': evaluating,
        'predict_ms': milliseconds,
    }


def _metadata(
    net: torch.nn.Module,
    args: argparse.Namespace,
    data: _TrainingData,
    scores: dict,
    command: str,
    batch_size: int,
    lr: float,
    result: TrainResult,
) -> dict:
    """Return the weights file's metadata: the command, data set, training and scores."""
    errors, trivial = scores['errors'], scores['trivial']
    index_document, split = data.index_document, data.split
    heldout_figures = {
        'abs_rel': round(errors['all'].abs_rel, 5),
        'delta1': round(errors['all'].delta1, 5),
        'rmse': round(errors['all'].rmse, 5),
        'frames': len(data.heldout),
        'every': args.eval_every,
        'median_baseline_abs_rel': round(trivial['median'].abs_rel, 5),
        'pixel_median_baseline_abs_rel': round(trivial['pixel_median'].abs_rel, 5),
        'median_depth_m': round(training_median(data.train, args.seed), 4),
    }
    return weights_metadata(
        net,
        args.kind,
        training_command=command,
        heldout=heldout_figures,
        dataset={
            'seed': int(index_document.get('settings', {}).get('seed', 0)),
            # What regenerates the held-out frames exactly (with a sequence's seed and
            # category): the moving boxes' timing depends on the duration, for one.
            'generator': {
                key: index_document['settings'][key]
                for key in GENERATOR_KEYS
                if key in index_document.get('settings', {})
            },
            'train_sequences': [
                {'name': e.name, 'seed': e.seed, 'category': e.category} for e in split['train']
            ],
            'heldout_sequences': [
                {'name': e.name, 'seed': e.seed, 'category': e.category} for e in split['heldout']
            ],
            'extra_train': [
                {**description, 'every': args.extra_every} for _, _, description in data.extra_sets
            ],
        },
        training={
            'seed': args.seed,
            'minutes': args.minutes,
            'every': args.every,
            'frames': len(data.train),
            'batch_size': batch_size,
            'lr': lr,
            'weight_decay': args.weight_decay,
            'steps': result.steps,
            'epochs': round(result.epochs, 3),
            'loss': 'SILog(lambda=0.85) + mean|log error|',
            'final_loss': round(result.last_losses, 5),
        },
    )


if __name__ == '__main__':
    sys.exit(main())
