# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Benchmark RRTO against local, nnto and per_op inference over emulated links.

Set-up (printed with the results): the edge server runs headless in its own process
(``edge_offload_server`` with the modes ``nnto,per_op,rrto``); the robot side is the
Python API (``Offloader``) in this process, the same code the offload bridge runs, with
``torch.set_num_threads(--torch-threads)`` (1 by default); the server keeps its own torch
thread default unless ``--server-torch-threads`` is given. Robot and server share this
machine's CPU cores and there is no GPU: the server computes no faster than the robot, so
``local`` is a strong baseline here. ``--robot-slowdown`` stretches every inference that
ran on the robot (``local``, and fallbacks) by that factor with a sleep. Links are
emulated in user space by the link emulator (constant rate both ways and RTT) between the
Offloader and the server, in a process of its own: in the robot's process it would share
the interpreter lock with the robot's Python work, which a real link does not. Models
are randomly initialised; every inference of a model gets the same input (KAPAO-S: one
random ``--kapao-size`` uint8 image, letterboxed to 640 inside the model; the
classifiers: their 1x3x224x224 example). Nothing is asserted.

For each link and model (one fresh Offloader per link and model, so per_op and rrto start
fresh server sessions and upload their parameters again):

* ``local``: measured once per model (it uses no link), 3 warm-ups then N inferences;
* ``nnto``: 3 warm-ups; its N inferences alternate with rrto's steady ones (one nnto
  before, then one after each rrto inference), so both see the same load;
* ``per_op``: 1 warm-up (the parameter uploads), then ``--per-op-inferences`` (few: each
  costs one RPC per aten operator); ``--skip-per-op`` leaves models out;
* ``rrto``: inferences until one is replayed (``replay_stats.passes_replayed`` grew and no
  abort), at most ``--max-warmup``; "replay at" is the 1-based index of that inference.
  Then N steady inferences (each says whether it was replayed).

The latency floor of a model on a link is: input bytes x 8 / rate + the server's compute
(median ``server_compute_time_s`` of the nnto runs) + output bytes x 8 / rate + one RTT
(tensor payload bytes only, no framing). Ratios use the means.

Search time: ``find_sequence`` over synthetic logs of a static model (an init prefix, then
identical passes: INPUT, OPs reading the previous value and a PARAM, OUTPUT) of 1e3 .. 1e6
entries, and one incremental ``OperatorSequenceSearch`` search (the recorder's per host
read cost) at the same lengths on a log whose passes drift (same tags, new shapes each
pass, so nothing ever matches); plus the real recorders' totals from the rrto runs.

Writes CSV tables and plots to ``--out`` (default results/rrto_latency). The default run
(3 links, 4 models) takes about 10 minutes on a 2-core machine; ``--quick`` (1 link,
mobilenet_v2 and resnet18, 3 inferences, logs up to 1e5) about 1 minute.
"""

from __future__ import annotations

import argparse
import csv
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from edge_offload.api import Offloader, OffloaderConfig
from edge_offload.client import ClientConfig
from edge_offload.models import model_spec
from edge_offload_testing import (
    HeadlessServer,
    make_test_keys,
    start_link_emulator_process,
)
from rrto_ros.sequence_search import (
    EntryKind,
    LogEntry,
    OperatorSequenceSearch,
    Ref,
    find_sequence,
)

MODES = ('local', 'nnto', 'per_op', 'rrto')
# name: (label, RTT s, rate bit/s)
LINKS = {
    'indoor': ('93 Mbit/s, 2.6 ms RTT', 0.0026, 93e6),
    'outdoor': ('73 Mbit/s, 5 ms RTT', 0.005, 73e6),
    'fast': ('450 Mbit/s, 1 ms RTT', 0.001, 450e6),
}
DEFAULT_MODELS = 'kapao_s,resnet50,mobilenet_v2,resnet18'


def say(text: str = '') -> None:
    print(text, flush=True)


@dataclass
class Run:
    """The steady-state inferences of one (link, model, mode)."""

    link: str
    model: str
    mode: str
    samples: list[float] = field(default_factory=list)
    round_trips: list[int] = field(default_factory=list)
    bytes_up: list[int] = field(default_factory=list)
    bytes_down: list[int] = field(default_factory=list)
    server_compute: list[float] = field(default_factory=list)
    fallbacks: int = 0
    modes_used: set[str] = field(default_factory=set)
    warmups: int = 0
    replay_at: int | None = None  # rrto: 1-based index of the first replayed inference
    replayed: int = 0  # rrto: steady inferences that were replayed
    aborts: int = 0  # rrto: aborts during the whole run
    abort_reasons: list[str] = field(default_factory=list)
    fallback_reasons: list[str] = field(default_factory=list)
    note: str = ''

    def add(self, elapsed: float, outcome) -> None:
        self.samples.append(elapsed)
        self.round_trips.append(outcome.stats.round_trips)
        self.bytes_up.append(outcome.stats.bytes_up)
        self.bytes_down.append(outcome.stats.bytes_down)
        self.server_compute.append(outcome.stats.server_compute_time_s)
        self.modes_used.add(outcome.mode_used)
        if outcome.fell_back:
            self.fallbacks += 1
            self.fallback_reasons.append(outcome.fallback_reason)

    def mean(self) -> float:
        return statistics.fmean(self.samples) if self.samples else float('nan')

    def summary(self) -> dict[str, object]:
        ordered = sorted(self.samples)
        nan = float('nan')
        return {
            'link': self.link,
            'model': self.model,
            'mode': self.mode,
            'n': len(ordered),
            'warmups': self.warmups,
            'mean_ms': self.mean() * 1e3,
            'p50_ms': _percentile(ordered, 0.50) * 1e3 if ordered else nan,
            'p95_ms': _percentile(ordered, 0.95) * 1e3 if ordered else nan,
            'round_trips': _avg(self.round_trips),
            'bytes_up': _avg(self.bytes_up),
            'bytes_down': _avg(self.bytes_down),
            'server_compute_ms': _avg(self.server_compute) * 1e3,
            'fallbacks': self.fallbacks,
            'modes_used': '+'.join(sorted(self.modes_used)),
            'replay_at': self.replay_at if self.replay_at is not None else '',
            'replayed': self.replayed if self.mode == 'rrto' else '',
            'aborts': self.aborts if self.mode == 'rrto' else '',
            'note': self.note,
        }


def _avg(values: list[float]) -> float:
    return statistics.fmean(values) if values else float('nan')


def _percentile(ordered: list[float], fraction: float) -> float:
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


# -- set-up ---------------------------------------------------------------------------------


def start_server(keys, models: list[str], torch_threads: int) -> HeadlessServer:
    """Start the headless edge server with the nnto, per_op and rrto modes."""
    arguments = ['--modes', 'nnto,per_op,rrto', '--worker-threads', '1']
    arguments += ['--log-level', 'WARNING']
    if torch_threads > 0:
        arguments += ['--torch-threads', str(torch_threads)]
    return HeadlessServer(keys, models, *arguments)


def client_config(keys, port: int) -> ClientConfig:
    return ClientConfig(
        endpoint=f'tcp://127.0.0.1:{port}',
        secret_key_file=str(keys.robot_secret),
        server_public_key_file=str(keys.server_public),
        request_timeout_s=60.0,
    )


def model_inputs(model: str, kapao_size: tuple[int, int]) -> dict[str, torch.Tensor]:
    """Return the fixed input of ``model``: a random image for KAPAO, else the example."""
    spec = model_spec(model)
    if model.startswith('kapao_') and not model.endswith('_net'):
        height, width = kapao_size
        generator = torch.Generator().manual_seed(0)
        image = torch.randint(0, 256, (1, 3, height, width), generator=generator)
        return {'image': image.to(torch.uint8)}
    return spec.example_inputs()


def payload_bytes(tensors: dict[str, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors.values())


# -- measurements ---------------------------------------------------------------------------


def timed(offloader: Offloader, model: str, inputs, mode: str, slowdown: float):
    started = time.perf_counter()
    outcome = offloader.infer(model, inputs, mode=mode)
    if slowdown > 1.0 and outcome.mode_used == 'local':
        time.sleep((slowdown - 1.0) * outcome.stats.local_compute_time_s)
    return time.perf_counter() - started, outcome


def measure_plain(
    offloader: Offloader,
    link: str,
    model: str,
    inputs,
    mode: str,
    warmups: int,
    count: int,
    slowdown: float,
) -> Run:
    """``warmups`` discarded inferences, then ``count`` measured ones."""
    run = Run(link, model, mode, warmups=warmups)
    for index in range(warmups + count):
        elapsed, outcome = timed(offloader, model, inputs, mode, slowdown)
        if index >= warmups:
            run.add(elapsed, outcome)
    return run


def measure_rrto(
    offloader: Offloader,
    link: str,
    model: str,
    inputs,
    count: int,
    max_warmup: int,
    slowdown: float,
    paired: Callable[[], None] | None = None,
) -> tuple[Run, dict[str, object]]:
    """Warm up until an inference is replayed, then ``count`` steady inferences.

    ``paired`` (another mode's measurement) runs once next to each steady inference,
    before it and after it in turn.
    """
    mode = offloader._get_mode('rrto')
    run = Run(link, model, 'rrto')
    warm_rts = []

    def counters() -> tuple[object, int, int]:
        session = mode.session
        if session is None:
            return None, 0, 0
        return session, session.replay_stats.passes_replayed, session.replay_stats.aborts

    def one() -> tuple[float, object, bool]:
        before = counters()
        elapsed, outcome = timed(offloader, model, inputs, 'rrto', slowdown)
        after = counters()
        # Replayed: the same session completed a pass without an abort, and no fallback.
        replayed = (
            after[0] is not None
            and after[0] is before[0]
            and after[1] > before[1]
            and after[2] == before[2]
            and not outcome.fell_back
        )
        return elapsed, outcome, replayed

    sessions_seen = []
    while run.warmups < max_warmup:
        elapsed, outcome, replayed = one()
        run.warmups += 1
        warm_rts.append(outcome.stats.round_trips)
        if mode.session is not None and mode.session not in sessions_seen:
            sessions_seen.append(mode.session)
        if outcome.fell_back:
            run.fallback_reasons.append(f'warm-up {run.warmups}: {outcome.fallback_reason}')
        if replayed:
            run.replay_at = run.warmups
            break
    if run.replay_at is None:
        run.note = f'no replay within {max_warmup} inferences'
    for index in range(count):
        if paired is not None and index % 2 == 0:
            paired()
        elapsed, outcome, replayed = one()
        if paired is not None and index % 2 == 1:
            paired()
        run.add(elapsed, outcome)
        run.replayed += int(replayed)
        if mode.session is not None and mode.session not in sessions_seen:
            sessions_seen.append(mode.session)
    run.aborts = sum(s.replay_stats.aborts for s in sessions_seen)
    for session in sessions_seen:
        run.abort_reasons += session.replay_stats.abort_reasons
    if len(sessions_seen) > 1:
        run.note += f'{"; " if run.note else ""}{len(sessions_seen)} sessions (failures)'
    session = mode.session or (sessions_seen[-1] if sessions_seen else None)
    recorder = {
        'link': link,
        'model': model,
        'warmup_round_trips': ' '.join(str(r) for r in warm_rts),
    }
    if session is not None:
        rec = session.recorder
        recorder.update(
            {
                'log_entries': len(rec.search),
                'log_next_index': rec.search.next_index,
                'searches': rec.searches,
                'search_time_ms': rec.search_time_s * 1e3,
                'search_ms_per_search': rec.search_time_s * 1e3 / max(1, rec.searches),
                'search_work': rec.search.stats.work,
                'sequence_steps': len(session.sequence.steps) if session.sequence else 0,
                'sequences_found': session.replay_stats.sequences_found,
                'state': session.state.value,
            }
        )
    return run, recorder


def run_local(models: list[str], inputs: dict, count: int, slowdown: float) -> dict[str, Run]:
    runs = {}
    with Offloader(OffloaderConfig(mode='local', local_models=models)) as offloader:
        for model in models:
            runs[model] = measure_plain(
                offloader, 'none', model, inputs[model], 'local', 3, count, slowdown
            )
            say(f'  local {model}: mean {runs[model].mean() * 1e3:.1f} ms')
    return runs


def run_link(keys, server: HeadlessServer, link: str, models: list[str], inputs: dict, args):
    """Measure nnto, per_op and rrto for every model on one emulated link."""
    label, rtt_s, rate = LINKS[link]
    runs: list[Run] = []
    recorders: list[dict[str, object]] = []
    emulator, emulator_port = start_link_emulator_process(server.port, rtt_s, rate)
    try:
        for model in models:
            config = OffloaderConfig(
                mode='nnto', local_models=[model], client=client_config(keys, emulator_port)
            )
            with Offloader(config) as offloader:
                if not offloader.client.wait_connected(15.0):
                    raise RuntimeError(offloader.client.state_reason)
                started = time.perf_counter()
                # nnto's steady inferences alternate with rrto's (below), so both see the
                # same machine load: these cores are shared and noisy.
                nnto = Run(label, model, 'nnto', warmups=3)
                for _ in range(nnto.warmups):
                    timed(offloader, model, inputs[model], 'nnto', 1.0)

                def nnto_once(nnto: Run = nnto, model: str = model) -> None:
                    nnto.add(*timed(offloader, model, inputs[model], 'nnto', 1.0))

                runs.append(nnto)
                if model in args.skip_per_op:
                    runs.append(Run(label, model, 'per_op', note='skipped (--skip-per-op)'))
                else:
                    per_op = measure_plain(
                        offloader,
                        label,
                        model,
                        inputs[model],
                        'per_op',
                        1,
                        args.per_op_inferences,
                        args.robot_slowdown,
                    )
                    runs.append(per_op)
                    say(
                        f'  [{link}] {model} per_op: mean {per_op.mean() * 1e3:.1f} ms, '
                        f'{_avg(per_op.round_trips):.0f} RPCs'
                    )
                # per_op's session is no longer needed: let the server drop its values.
                offloader._get_mode('per_op').close()
                rrto, recorder = measure_rrto(
                    offloader,
                    label,
                    model,
                    inputs[model],
                    args.inferences,
                    args.max_warmup,
                    args.robot_slowdown,
                    paired=nnto_once,
                )
                runs.append(rrto)
                recorders.append(recorder)
                say(f'  [{link}] {model} nnto: mean {nnto.mean() * 1e3:.1f} ms')
                say(
                    f'  [{link}] {model} rrto: mean {rrto.mean() * 1e3:.1f} ms, replay at '
                    f'{rrto.replay_at}, {_avg(rrto.round_trips):.1f} RPCs, '
                    f'{rrto.replayed}/{len(rrto.samples)} replayed, {rrto.aborts} aborts, '
                    f'{rrto.fallbacks} fallbacks ({time.perf_counter() - started:.0f} s)'
                )
    finally:
        emulator.terminate()
        emulator.wait(timeout=10.0)
    return runs, recorders


# -- search time on synthetic logs ------------------------------------------------------------


def synthetic_log(length: int, pass_len: int, *, drift: bool) -> list[LogEntry]:
    """Return a static model's log: an init prefix, then passes of ``pass_len`` entries.

    A pass is INPUT, ``pass_len - 2`` OPs (each reads the previous value and a parameter)
    and an OUTPUT. With ``drift`` every pass has other shapes (the same tags), so no two
    passes are equal and nothing is ever found.
    """
    log: list[LogEntry] = []
    prefix = min(50, length // 10)
    for index in range(prefix):  # parameter set-up: no inputs, no outputs
        log.append(LogEntry(EntryKind.OP, 'op:aten.copy_', ('init', index), (Ref.param(index),)))
    number = 0
    while len(log) < length:
        start = len(log)
        shape = (number if drift else 0, 3, 224, 224)
        log.append(LogEntry(EntryKind.INPUT, 'input', (shape, 'float32')))
        for op in range(pass_len - 2):
            tag = ('op:aten.conv2d', 'op:aten.relu', 'op:aten.add')[op % 3]
            reads = (Ref.value(len(log) - 1), Ref.param(op))
            log.append(LogEntry(EntryKind.OP, tag, (tag, op, shape), reads))
        log.append(LogEntry(EntryKind.OUTPUT, 'output', ('fetch', 0), (Ref.value(len(log) - 1),)))
        number += 1
        if len(log) > length:
            del log[start:]
            break
    return log


def search_times(lengths: list[int], pass_len: int) -> list[dict[str, object]]:
    rows = []
    for length in lengths:
        pass_len_here = min(pass_len, max(4, length // 8))
        log = synthetic_log(length, pass_len_here, drift=False)
        started = time.perf_counter()
        match = find_sequence(log)
        batch_s = time.perf_counter() - started
        del log
        drifting = synthetic_log(length, pass_len_here, drift=True)
        searcher = OperatorSequenceSearch(max_entries=max(length + 1, 2_000_000))
        # Everything but the last OUTPUT, then time the search that OUTPUT triggers.
        searcher.extend(drifting[:-1])
        work_before = searcher.stats.work
        started = time.perf_counter()
        none = searcher.append(drifting[-1])
        incremental_s = time.perf_counter() - started
        rows.append(
            {
                'log_entries': len(drifting),
                'pass_entries': pass_len_here,
                'find_sequence_ms': batch_s * 1e3,
                'found_length': match.length if match else 0,
                'incremental_search_ms': incremental_s * 1e3,
                'incremental_found': none is not None,
                'incremental_work': searcher.stats.work - work_before,
            }
        )
        del drifting, searcher
        say(
            f'  search {length:>8} entries: find_sequence {batch_s * 1e3:9.2f} ms '
            f'(found period {rows[-1]["found_length"]}), one incremental search '
            f'{incremental_s * 1e3:8.2f} ms'
        )
    return rows


# -- output ---------------------------------------------------------------------------------


def write_csv(path: Path, rows: list[dict[str, object]]) -> None:
    if not rows:
        return
    with path.open('w', newline='') as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _fmt(value: object, digits: int = 1) -> str:
    if isinstance(value, float):
        if value != value:  # nan
            return '-'
        return f'{value:.{digits}f}'
    return str(value) if value != '' else '-'


def markdown(rows: list[dict[str, object]], columns: list[tuple[str, str, int]]) -> str:
    lines = [
        '| ' + ' | '.join(title for _, title, _ in columns) + ' |',
        '|' + '|'.join('---' for _ in columns) + '|',
    ]
    for row in rows:
        lines.append('| ' + ' | '.join(_fmt(row[k], d) for k, _, d in columns) + ' |')
    return '\n'.join(lines)


def summarise(table: list[dict], floors: dict, links: list[str], models: list[str]):
    by_key = {(r['link'], r['model'], r['mode']): r for r in table}
    rows = []
    nan = float('nan')
    for link in links:
        label = LINKS[link][0]
        for model in models:
            local = by_key.get(('none (on the robot)', model, 'local'), {})
            nnto = by_key.get((label, model, 'nnto'), {})
            per_op = by_key.get((label, model, 'per_op'), {})
            rrto = by_key.get((label, model, 'rrto'), {})
            floor = floors[(link, model)]
            rrto_ms = rrto.get('mean_ms', nan)
            per_op_ms = per_op.get('mean_ms', nan)
            rows.append(
                {
                    'link': label,
                    'model': model,
                    'floor_ms': floor['floor_ms'],
                    'local_ms': local.get('mean_ms', nan),
                    'nnto_ms': nnto.get('mean_ms', nan),
                    'per_op_ms': per_op_ms,
                    'rrto_ms': rrto_ms,
                    'rrto_p95_ms': rrto.get('p95_ms', nan),
                    'rrto_over_nnto': rrto_ms / nnto.get('mean_ms', nan),
                    'rrto_over_floor': rrto_ms / floor['floor_ms'],
                    'rrto_over_per_op': rrto_ms / per_op_ms,
                    'nnto_rts': nnto.get('round_trips', nan),
                    'per_op_rts': per_op.get('round_trips', nan),
                    'rrto_rts': rrto.get('round_trips', nan),
                    'rrto_up_kb': rrto.get('bytes_up', nan) / 1e3,
                    'rrto_down_kb': rrto.get('bytes_down', nan) / 1e3,
                    'replay_at': rrto.get('replay_at', ''),
                    'replayed': f'{rrto.get("replayed", 0)}/{rrto.get("n", 0)}',
                    'aborts': rrto.get('aborts', ''),
                    'fallbacks': sum(
                        int(r.get('fallbacks', 0) or 0) for r in (nnto, per_op, rrto, local)
                    ),
                }
            )
    return rows


def plot(table, summary, search_rows, recorder_rows, links, models, out: Path) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # noqa: PLC0415

    by_key = {(r['link'], r['model'], r['mode']): r for r in table}
    figure, axes = plt.subplots(1, len(links), figsize=(5.5 * len(links), 4.5), squeeze=False)
    width = 0.8 / len(MODES)
    for axis, link in zip(axes[0], links, strict=True):
        label = LINKS[link][0]
        for m_index, mode in enumerate(MODES):
            values, errors = [], []
            for model in models:
                row = by_key.get(
                    (label if mode != 'local' else 'none (on the robot)', model, mode), {}
                )
                mean = row.get('mean_ms', float('nan'))
                values.append(mean)
                errors.append(max(0.0, row.get('p95_ms', mean) - mean) if row else 0.0)
            xs = [i + (m_index - (len(MODES) - 1) / 2) * width for i in range(len(models))]
            axis.bar(xs, values, width, yerr=[[0] * len(errors), errors], label=mode, capsize=2)
        floors = [s['floor_ms'] for s in summary if s['link'] == label]
        axis.scatter(range(len(models)), floors, marker='_', s=400, color='black', label='floor')
        axis.set_xticks(range(len(models)), models, rotation=15)
        axis.set_yscale('log')
        axis.set_title(label)
        axis.set_ylabel('latency per inference, ms (mean, bar to p95)')
        axis.grid(axis='y', which='both', alpha=0.3)
    axes[0][0].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out / 'latency_by_mode.png', dpi=120)
    plt.close(figure)

    figure, axis = plt.subplots(figsize=(7, 4.5))
    lengths = [r['log_entries'] for r in search_rows]
    axis.plot(lengths, [r['find_sequence_ms'] for r in search_rows], marker='o',
              label='find_sequence, static log (whole search incl. indexing)')  # fmt: skip
    axis.plot(lengths, [r['incremental_search_ms'] for r in search_rows], marker='s',
              label='one incremental search, drifting log (no match)')  # fmt: skip
    real = [r for r in recorder_rows if r.get('searches')]
    if real:
        axis.scatter([r['log_next_index'] for r in real],
                     [r['search_ms_per_search'] for r in real], marker='x', color='black',
                     label='rrto runs: recorder ms per search vs entries logged')  # fmt: skip
    axis.set_xscale('log')
    axis.set_yscale('log')
    axis.set_xlabel('log length, entries')
    axis.set_ylabel('search time, ms')
    axis.grid(which='both', alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out / 'search_time.png', dpi=120)
    plt.close(figure)


# -- main -----------------------------------------------------------------------------------


def _size(text: str) -> tuple[int, int]:
    height, width = text.lower().split('x')
    return int(height), int(width)


def _load() -> str:
    return ' '.join(f'{x:.2f}' for x in os.getloadavg())


def _names(text: str) -> list[str]:
    return [name for name in text.split(',') if name]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--models', type=_names, default=_names(DEFAULT_MODELS))
    parser.add_argument('--links', type=_names, default=list(LINKS), help=','.join(LINKS))
    parser.add_argument('--inferences', type=int, default=10, help='steady inferences (N)')
    parser.add_argument('--per-op-inferences', type=int, default=3)
    parser.add_argument('--skip-per-op', type=_names, default=[], help='models without per_op')
    parser.add_argument('--max-warmup', type=int, default=10, help='rrto warm-up limit')
    parser.add_argument('--kapao-size', type=_size, default=(256, 320), help='HxW image')
    parser.add_argument('--torch-threads', type=int, default=1, help='robot side')
    parser.add_argument('--server-torch-threads', type=int, default=0, help='0: its default')
    parser.add_argument('--robot-slowdown', type=float, default=1.0)
    parser.add_argument(
        '--search-lengths', type=lambda t: [int(float(x)) for x in _names(t)],
        default=[1000, 10_000, 100_000, 1_000_000],
    )  # fmt: skip
    parser.add_argument('--search-pass', type=int, default=500, help='synthetic pass entries')
    parser.add_argument('--quick', action='store_true', help='1 link, 2 small models, N=3')
    parser.add_argument('--out', type=Path, default=Path('results/rrto_latency'))
    args = parser.parse_args(argv)
    if args.quick:
        args.models = ['mobilenet_v2', 'resnet18']
        args.links = ['indoor']
        args.inferences = 3
        args.per_op_inferences = 2
        args.search_lengths = [x for x in args.search_lengths if x <= 100_000]
    unknown = [link for link in args.links if link not in LINKS]
    if unknown:
        parser.error(f'unknown links {unknown}; choose from {list(LINKS)}')
    args.out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(args.torch_threads)
    started = time.perf_counter()
    inputs = {model: model_inputs(model, args.kapao_size) for model in args.models}
    server_threads = (
        str(args.server_torch_threads) if args.server_torch_threads else 'default (torch)'
    )
    say(
        f'set-up: nproc {os.cpu_count()} CPU cores shared by robot and server, no GPU '
        f'(cuda available: {torch.cuda.is_available()}); torch {torch.__version__}; robot '
        f'torch threads {torch.get_num_threads()}, server torch threads {server_threads}; '
        f'robot slowdown x{args.robot_slowdown:g}; CURVE on; links emulated in user space '
        '(link emulator process, constant rate both ways); random weights; the same input every '
        f'inference; load average {_load()} (other processes may share these cores)'
    )
    say(
        f'runs: models {args.models}; links {[LINKS[k][0] for k in args.links]}; N = '
        f'{args.inferences} steady inferences (per_op: {args.per_op_inferences}, skipped for '
        f'{args.skip_per_op or "none"}); rrto warm-up until replay, at most '
        f'{args.max_warmup}; inputs '
        + ', '.join(
            f'{m} {"x".join(map(str, t.shape))} {str(t.dtype)[6:]}'
            for m, i in inputs.items()
            for t in i.values()
        )
    )
    table: list[dict[str, object]] = []
    recorders: list[dict[str, object]] = []
    say('local (on the robot):')
    local_runs = run_local(args.models, inputs, args.inferences, args.robot_slowdown)
    for run in local_runs.values():
        run.link = 'none (on the robot)'
        table.append(run.summary())
    output_bytes = {}
    with Offloader(OffloaderConfig(mode='local', local_models=args.models)) as offloader:
        for model in args.models:
            output_bytes[model] = payload_bytes(offloader.infer(model, inputs[model]).outputs)
    with tempfile.TemporaryDirectory() as keys_dir:
        keys = make_test_keys(Path(keys_dir))
        server = start_server(keys, args.models, args.server_torch_threads)
        try:
            for link in args.links:
                say(f'link {LINKS[link][0]}:')
                runs, link_recorders = run_link(keys, server, link, args.models, inputs, args)
                table += [run.summary() for run in runs]
                recorders += link_recorders
                for run in runs:
                    for reason in dict.fromkeys(run.fallback_reasons):
                        say(f'    fallback ({run.model} {run.mode}): {reason}')
                    for reason in dict.fromkeys(run.abort_reasons):
                        say(f'    rrto abort ({run.model}): {reason}')
        finally:
            server.stop()
            if server.log:
                say('server log (last lines):\n  ' + '\n  '.join(server.log))
    floors = {}
    floor_rows = []
    for link in args.links:
        label, rtt_s, rate = LINKS[link]
        for model in args.models:
            nnto = next(
                r for r in table if (r['link'], r['model'], r['mode']) == (label, model, 'nnto')
            )
            compute_ms = nnto['server_compute_ms']
            up_ms = payload_bytes(inputs[model]) * 8 / rate * 1e3
            down_ms = output_bytes[model] * 8 / rate * 1e3
            floor = {
                'link': label,
                'model': model,
                'input_bytes': payload_bytes(inputs[model]),
                'output_bytes': output_bytes[model],
                'upload_ms': up_ms,
                'server_compute_ms': compute_ms,
                'download_ms': down_ms,
                'rtt_ms': rtt_s * 1e3,
                'floor_ms': up_ms + compute_ms + down_ms + rtt_s * 1e3,
            }
            floors[(link, model)] = floor
            floor_rows.append(floor)
    say('search time versus log length (synthetic static model logs):')
    search_rows = search_times(args.search_lengths, args.search_pass)
    summary = summarise(table, floors, args.links, args.models)

    say('\n### Per mode (steady state; latency in ms; RPCs and bytes per inference)\n')
    say(
        markdown(
            table,
            [
                ('link', 'link', 0),
                ('model', 'model', 0),
                ('mode', 'mode', 0),
                ('n', 'n', 0),
                ('warmups', 'warm-up', 0),
                ('mean_ms', 'mean', 1),
                ('p50_ms', 'p50', 1),
                ('p95_ms', 'p95', 1),
                ('round_trips', 'RPCs', 1),
                ('bytes_up', 'bytes up', 0),
                ('bytes_down', 'bytes down', 0),
                ('server_compute_ms', 'server compute', 1),
                ('fallbacks', 'fallbacks', 0),
                ('modes_used', 'ran as', 0),
                ('replay_at', 'replay at', 0),
                ('replayed', 'replayed', 0),
                ('aborts', 'aborts', 0),
                ('note', 'note', 0),
            ],
        )
    )
    say('\n### Latency floor (input up + server compute (nnto median) + output down + RTT)\n')
    say(
        markdown(
            floor_rows,
            [
                ('link', 'link', 0),
                ('model', 'model', 0),
                ('input_bytes', 'input B', 0),
                ('output_bytes', 'output B', 0),
                ('upload_ms', 'up ms', 2),
                ('server_compute_ms', 'compute ms', 1),
                ('download_ms', 'down ms', 3),
                ('rtt_ms', 'RTT ms', 1),
                ('floor_ms', 'floor ms', 1),
            ],
        )
    )
    say(
        '\n### RRTO summary (means; targets at 2.6 ms: rrto <= 1.1x nnto, <= 1.2x floor, '
        '<= 0.05x per_op; <= 3 RPCs; replay by inference 5)\n'
    )
    say(
        markdown(
            summary,
            [
                ('link', 'link', 0),
                ('model', 'model', 0),
                ('floor_ms', 'floor', 1),
                ('local_ms', 'local', 1),
                ('nnto_ms', 'nnto', 1),
                ('per_op_ms', 'per_op', 0),
                ('rrto_ms', 'rrto', 1),
                ('rrto_p95_ms', 'rrto p95', 1),
                ('rrto_over_nnto', 'rrto/nnto', 2),
                ('rrto_over_floor', 'rrto/floor', 2),
                ('rrto_over_per_op', 'rrto/per_op', 3),
                ('nnto_rts', 'nnto RPCs', 1),
                ('per_op_rts', 'per_op RPCs', 0),
                ('rrto_rts', 'rrto RPCs', 1),
                ('rrto_up_kb', 'rrto up kB', 1),
                ('rrto_down_kb', 'rrto down kB', 1),
                ('replay_at', 'replay at', 0),
                ('replayed', 'replayed', 0),
                ('aborts', 'aborts', 0),
                ('fallbacks', 'fallbacks', 0),
            ],
        )
    )
    say('\n### Sequence search time versus log length\n')
    say(
        markdown(
            search_rows,
            [
                ('log_entries', 'log entries', 0),
                ('pass_entries', 'pass entries', 0),
                ('find_sequence_ms', 'find_sequence ms', 2),
                ('found_length', 'found period', 0),
                ('incremental_search_ms', 'one incremental search ms', 3),
                ('incremental_work', 'its counted work', 0),
            ],
        )
    )
    say('\n### RRTO recorders of the runs (at the end of each run)\n')
    say(
        markdown(
            recorders,
            [
                ('link', 'link', 0),
                ('model', 'model', 0),
                ('warmup_round_trips', 'warm-up RPCs per inference', 0),
                ('log_next_index', 'entries logged', 0),
                ('log_entries', 'entries kept', 0),
                ('searches', 'searches', 0),
                ('search_time_ms', 'search total ms', 1),
                ('search_ms_per_search', 'ms per search', 3),
                ('sequence_steps', 'sequence steps', 0),
                ('sequences_found', 'sequences found', 0),
                ('state', 'state', 0),
            ],
        )
    )
    write_csv(args.out / 'latency.csv', table)
    write_csv(args.out / 'floor.csv', floor_rows)
    write_csv(args.out / 'summary.csv', summary)
    write_csv(args.out / 'search_time.csv', search_rows)
    write_csv(args.out / 'recorder.csv', recorders)
    plot(table, summary, search_rows, recorders, args.links, args.models, args.out)
    say(
        f'\nwrote {args.out}/latency.csv, floor.csv, summary.csv, search_time.csv, recorder.csv, '
        f'latency_by_mode.png, search_time.png ({time.perf_counter() - started:.0f} s in all; '
        f'load average now {_load()})'
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
