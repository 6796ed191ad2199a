# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""``edge_offload_zoo``: list the registered models with their size, FLOPs and CPU latency.

Every model registered under the ``edge_offload.models`` entry-point group is built from its
spec (seeded, eval mode, on the CPU) and described by: whether it is trained, its inputs,
its parameter count, its FLOPs on the spec's example inputs (counted by
``torch.utils.flop_counter.FlopCounterMode``: 2 per multiply-accumulate of convolutions and
matrix products, other operators uncounted) and its measured latency (mean and median over
``--runs`` calls after ``--warmup`` calls, with ``--threads`` torch threads).

A model that cannot be built (a weight file not fetched, a missing dependency, ...) is listed
with the reason instead of stopping the listing; so is a model whose FLOPs cannot be counted
(a pipeline with OpenCV inside, say) or that fails when run.

The measuring functions (``count_parameters``, ``count_flops``, ``measure_latency``,
``profile_spec``, ``profile_model``) print nothing and can be imported on their own.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from edge_offload.models import (
    LoadedModel,
    ModelSpec,
    TensorSpec,
    available_models,
    build_model,
    model_spec,
)

PROG = 'edge_offload_zoo'
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

# A reason longer than this is cut in the table (the JSON keeps it whole).
_REASON_WIDTH = 160


@dataclass
class LatencyStats:
    """Wall-clock latency of repeated calls, in milliseconds."""

    runs: int
    mean_ms: float
    p50_ms: float
    min_ms: float
    max_ms: float


@dataclass
class ModelReport:
    """What the zoo knows about one model; ``None`` fields could not be measured."""

    name: str
    trained: bool | None = None
    inputs: str = ''
    description: str = ''
    parameters: int | None = None
    flops: int | None = None
    latency_mean_ms: float | None = None
    latency_p50_ms: float | None = None
    latency_runs: int = 0
    # Why the model could not be built, or why a column is empty.
    error: str | None = None
    flops_error: str | None = None
    latency_error: str | None = None

    @property
    def gflops(self) -> float | None:
        """Return the FLOPs in units of 1e9, or ``None``."""
        return None if self.flops is None else self.flops / 1e9


def describe_error(exc: BaseException) -> str:
    """Return ``Type: message`` (first line of the message) for ``exc``."""
    message = str(exc).strip().splitlines()
    return f'{type(exc).__name__}: {message[0]}' if message else type(exc).__name__


def format_tensor_spec(name: str, spec: TensorSpec) -> str:
    """Return e.g. ``image Nx3x224x224 float32``: ``N`` marks a size of any value."""
    dims = 'x'.join('N' if size is None else str(size) for size in spec.shape)
    dtype = str(spec.dtype).removeprefix('torch.')
    return f'{name} {dims} {dtype}'


def format_inputs(inputs: Mapping[str, TensorSpec]) -> str:
    """Return the inputs of a spec as one line."""
    return ', '.join(format_tensor_spec(name, spec) for name, spec in inputs.items())


def count_parameters(module: nn.Module) -> int:
    """Return the number of parameter elements of ``module`` (shared ones counted once)."""
    return sum(parameter.numel() for parameter in module.parameters())


def count_flops(
    model: Callable[[Mapping[str, torch.Tensor]], Any], inputs: Mapping[str, torch.Tensor]
) -> int:
    """Return the FLOPs of one call ``model(inputs)`` as FlopCounterMode counts them.

    Convolutions and matrix products count 2 FLOPs per multiply-accumulate; element-wise
    operators, pooling and normalisation are not counted. Exceptions of the call propagate.
    """
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(inputs)
    return int(counter.get_total_flops())


def measure_latency(call: Callable[[], Any], runs: int, warmup: int) -> LatencyStats:
    """Time ``runs`` calls of ``call`` after ``warmup`` untimed ones."""
    if runs < 1:
        raise ValueError(f'runs must be at least 1, got {runs}')
    if warmup < 0:
        raise ValueError(f'warmup must not be negative, got {warmup}')
    for _ in range(warmup):
        call()
    times_ms = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times_ms.append((time.perf_counter() - start) * 1e3)
    return LatencyStats(
        runs=runs,
        mean_ms=statistics.fmean(times_ms),
        p50_ms=statistics.median(times_ms),
        min_ms=min(times_ms),
        max_ms=max(times_ms),
    )


def profile_spec(
    spec: ModelSpec,
    *,
    runs: int = 10,
    warmup: int = 2,
    latency: bool = True,
    flops: bool = True,
) -> ModelReport:
    """Build ``spec`` and measure it; failures become reasons in the report, never raise."""
    report = ModelReport(
        name=spec.name,
        trained=spec.trained,
        description=spec.description,
    )
    try:
        report.inputs = format_inputs(spec.inputs)
        loaded = build_model(spec)
    except Exception as exc:  # any build failure is reported, not raised
        report.error = describe_error(exc)
        return report
    try:
        _measure(report, loaded, runs=runs, warmup=warmup, latency=latency, flops=flops)
    finally:
        del loaded
        gc.collect()
    return report


def _measure(
    report: ModelReport, loaded: LoadedModel, *, runs: int, warmup: int, latency: bool, flops: bool
) -> None:
    report.parameters = count_parameters(loaded.module)
    try:
        inputs = loaded.spec.example_inputs()
    except Exception as exc:
        reason = f'no example inputs: {describe_error(exc)}'
        report.flops_error = report.latency_error = reason
        return
    if flops:
        try:
            total = count_flops(loaded, inputs)
        except Exception as exc:
            report.flops_error = describe_error(exc)
        else:
            if total > 0:
                report.flops = total
            else:
                report.flops_error = 'no FLOP-counted torch operator (conv/matmul) ran'
    if latency:
        try:
            stats = measure_latency(lambda: loaded(inputs), runs=runs, warmup=warmup)
        except Exception as exc:
            report.latency_error = describe_error(exc)
        else:
            report.latency_mean_ms = stats.mean_ms
            report.latency_p50_ms = stats.p50_ms
            report.latency_runs = stats.runs


def profile_model(
    name: str,
    *,
    runs: int = 10,
    warmup: int = 2,
    latency: bool = True,
    flops: bool = True,
    spec_of: Callable[[str], ModelSpec] | None = None,
) -> ModelReport:
    """Profile the model registered as ``name``; a spec that fails to load is reported.

    ``spec_of`` returns the spec of a name (default: the registry's ``model_spec``).
    """
    try:
        spec = (model_spec if spec_of is None else spec_of)(name)
    except Exception as exc:  # the factory's import or call failed
        return ModelReport(name=name, error=describe_error(exc))
    return profile_spec(spec, runs=runs, warmup=warmup, latency=latency, flops=flops)


def cpu_model() -> str:
    """Return the CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        with open('/proc/cpuinfo', encoding='utf-8', errors='replace') as cpuinfo:
            lines = cpuinfo.readlines()
    except OSError:
        lines = []
    for line in lines:
        key, _, value = line.partition(':')
        if key.strip() in ('model name', 'Model', 'Hardware') and value.strip():
            return value.strip()
    return platform.processor() or platform.machine() or 'unknown CPU'


def host_info(threads: int) -> dict[str, Any]:
    """Return the machine and library facts the measurements depend on."""
    return {
        'cpu': cpu_model(),
        'cpu_count': os.cpu_count(),
        'machine': platform.machine(),
        'python': platform.python_version(),
        'torch': torch.__version__,
        'threads': threads,
    }


def _cut(text: str, width: int = _REASON_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 3] + '...'


def format_table(
    reports: Sequence[ModelReport], host: Mapping[str, Any], *, runs: int, warmup: int
) -> str:
    """Return the header, a plain aligned table of ``reports`` and notes with the reasons."""
    header = [
        f'CPU: {host["cpu"]} ({host["cpu_count"]} logical cores), torch {host["torch"]}, '
        f'{host["threads"]} torch thread(s)',
        f'latency: mean and p50 over {runs} run(s) after {warmup} warm-up, batch 1, '
        'example inputs of each spec',
        'GFLOPs: FlopCounterMode, 2 per multiply-accumulate of conv/matmul',
        '',
    ]
    columns = ['name', 'trained', 'inputs', 'params', 'GFLOPs', 'mean ms', 'p50 ms']
    rows: list[list[str]] = []
    notes: list[str] = []

    def with_note(reason: str) -> str:
        notes.append(reason)
        return f'- [{len(notes)}]'

    for report in reports:
        trained = '-' if report.trained is None else ('yes' if report.trained else 'no')
        if report.error is not None:
            marker = with_note(f'{report.name}: not built: {_cut(report.error)}')
            rows.append([report.name, trained, report.inputs or '-', marker, '-', '-', '-'])
            continue
        params = '-' if report.parameters is None else f'{report.parameters:,}'
        if report.flops is not None:
            gflops = f'{report.flops / 1e9:.3f}'
        elif report.flops_error is not None:
            gflops = with_note(f'{report.name}: FLOPs not counted: {_cut(report.flops_error)}')
        else:
            gflops = '-'
        if report.latency_mean_ms is not None and report.latency_p50_ms is not None:
            mean, p50 = f'{report.latency_mean_ms:.2f}', f'{report.latency_p50_ms:.2f}'
        elif report.latency_error is not None:
            mean = with_note(f'{report.name}: not run: {_cut(report.latency_error)}')
            p50 = '-'
        else:
            mean = p50 = '-'
        rows.append([report.name, trained, report.inputs, params, gflops, mean, p50])

    widths = [max(len(row[i]) for row in [columns, *rows]) for i in range(len(columns))]
    right = {'params', 'GFLOPs', 'mean ms', 'p50 ms'}

    def line(cells: Sequence[str]) -> str:
        return '  '.join(
            cell.rjust(width) if column in right else cell.ljust(width)
            for cell, width, column in zip(cells, widths, columns, strict=True)
        ).rstrip()

    table = [line(columns), line(['-' * width for width in widths])]
    table += [line(row) for row in rows]
    footer = [''] + [f'[{i}] {note}' for i, note in enumerate(notes, start=1)] if notes else []
    return '\n'.join(header + table + footer)


def reports_to_json(
    reports: Sequence[ModelReport], host: Mapping[str, Any], *, runs: int, warmup: int
) -> dict[str, Any]:
    """Return the machine-readable form of a listing."""
    models = []
    for report in reports:
        entry = asdict(report)
        entry['gflops'] = report.gflops
        models.append(entry)
    return {
        'host': dict(host),
        'settings': {'runs': runs, 'warmup': warmup, 'threads': host['threads']},
        'flops_convention': 'torch.utils.flop_counter.FlopCounterMode (2 per MAC)',
        'models': models,
    }


def _parse_names(text: str) -> list[str]:
    names: list[str] = []
    for name in (part.strip() for part in text.split(',')):
        if name and name not in names:
            names.append(name)
    return names


def build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description='List the models registered under the edge_offload.models entry-point '
        'group with their parameters, FLOPs and measured CPU latency.',
    )
    parser.add_argument(
        '--models',
        metavar='NAME[,NAME...]',
        help='only these models, comma-separated (default: every registered model)',
    )
    parser.add_argument(
        '--runs', type=int, default=10, help='timed calls per model (default: %(default)s)'
    )
    parser.add_argument(
        '--warmup', type=int, default=2, help='untimed calls first (default: %(default)s)'
    )
    parser.add_argument(
        '--threads', type=int, default=1, help='torch intra-op threads (default: %(default)s)'
    )
    parser.add_argument('--no-latency', action='store_true', help='do not time the models')
    parser.add_argument(
        '--json', metavar='PATH', type=Path, help='also write the results as JSON to PATH'
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    problems = []
    if args.runs < 1:
        problems.append(f'--runs must be at least 1, got {args.runs}')
    if args.warmup < 0:
        problems.append(f'--warmup must not be negative, got {args.warmup}')
    if args.threads < 1:
        problems.append(f'--threads must be at least 1, got {args.threads}')
    registered = sorted(available_models())
    if args.models is not None:
        names = _parse_names(args.models)
        unknown = [name for name in names if name not in registered]
        if not names:
            problems.append('--models names no model')
        elif unknown:
            problems.append(
                f'unknown model(s): {", ".join(unknown)}; registered models: '
                f'{", ".join(registered) or "none"}'
            )
    else:
        names = registered
    if problems:
        parser.print_usage(sys.stderr)
        for problem in problems:
            print(f'{PROG}: error: {problem}', file=sys.stderr)
        return EXIT_USAGE

    previous_threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        host = host_info(args.threads)
        reports = []
        for index, name in enumerate(names, start=1):
            print(f'[{index}/{len(names)}] {name} ...', file=sys.stderr, flush=True)
            start = time.perf_counter()
            report = profile_model(
                name, runs=args.runs, warmup=args.warmup, latency=not args.no_latency
            )
            status = 'failed: ' + report.error if report.error else 'done'
            print(
                f'[{index}/{len(names)}] {name} {status} ({time.perf_counter() - start:.1f} s)',
                file=sys.stderr,
                flush=True,
            )
            reports.append(report)
    finally:
        torch.set_num_threads(previous_threads)

    print(format_table(reports, host, runs=args.runs, warmup=args.warmup))
    if args.json is not None:
        document = reports_to_json(reports, host, runs=args.runs, warmup=args.warmup)
        try:
            args.json.write_text(json.dumps(document, indent=2) + '\n', encoding='utf-8')
        except OSError as exc:
            print(f'{PROG}: error: cannot write {args.json}: {exc}', file=sys.stderr)
            return EXIT_FAILURE
    return EXIT_OK


if __name__ == '__main__':
    sys.exit(main())
