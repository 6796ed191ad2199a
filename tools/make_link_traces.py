# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Generate the two shipped Wi-Fi bandwidth traces (mahimahi format) deterministically.

The traces are modelled on the link measurements reported by the papers this suite builds on:
a four-wheeled robot measured iperf TCP throughput to the edge server every 0.1 s for five
minutes, with a mean of 93 Mbit/s indoors (a lab; moderate fluctuation) and 73 Mbit/s
outdoors (a garden; larger fluctuation and occasional drops to near zero). The original
measurements were never released, so these traces are SYNTHETIC: only the published summary
statistics (mean rate, 0.1 s sampling step, dip behaviour) are reproduced.

Each trace is a throughput series at 0.1 s steps from an AR(1) process (the discrete
Ornstein-Uhlenbeck process) around the mean, clipped at 0; the outdoor one also has a few
dips to 0-2 Mbit/s lasting 0.2-1.5 s. The series outside the dips is rescaled so the whole
series has exactly the published mean, then turned into delivery opportunities with
``edge_offload.link_traces.rates_to_timestamps``. The shipped traces are 60 s long instead of
the measurements' 300 s to keep the files small (about 3 MB); they repeat cyclically.

Run from the workspace (``source tools/workspace_env.sh``)::

    python tools/make_link_traces.py            # rewrites src/edge_offload/traces/*.trace
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edge_offload.link_traces import DeliveryTrace, rates_to_timestamps, write_trace

_LOGGER = logging.getLogger('make_link_traces')
_REPO_ROOT = Path(__file__).resolve().parents[1]
_DEFAULT_OUTPUT_DIR = _REPO_ROOT / 'src' / 'edge_offload' / 'traces'
_STEP_S = 0.1
_MEAN_TOLERANCE = 0.005


@dataclass(frozen=True)
class TraceModel:
    """Parameters of one synthetic trace."""

    file_name: str
    description: str
    mean_bps: float
    std_bps: float  # stationary standard deviation of the AR(1) process
    correlation: float  # AR(1) coefficient per 0.1 s step
    dips_per_minute: float
    dip_min_s: float = 0.2
    dip_max_s: float = 1.5
    dip_max_bps: float = 2e6
    seed: int = 0


MODELS = (
    TraceModel(
        file_name='indoor_93mbps.trace',
        description='indoor lab, mean 93 Mbit/s, moderate fluctuation',
        mean_bps=93e6,
        std_bps=7e6,
        correlation=0.9,
        dips_per_minute=0.0,
        seed=20260093,
    ),
    TraceModel(
        file_name='outdoor_73mbps.trace',
        description='outdoor garden, mean 73 Mbit/s, larger fluctuation, dips to near zero',
        mean_bps=73e6,
        std_bps=16e6,
        correlation=0.8,
        dips_per_minute=5.0,
        seed=20260073,
    ),
)


def synthesize_rates(model: TraceModel, duration_s: float) -> tuple[np.ndarray, list[tuple]]:
    """Return the rate series (bit/s per 0.1 s step) and the dips as (start_s, length_s)."""
    rng = np.random.default_rng(model.seed)
    steps = round(duration_s / _STEP_S)
    innovation_std = model.std_bps * np.sqrt(1.0 - model.correlation**2)
    deviation = rng.normal(0.0, model.std_bps)
    rates = np.empty(steps)
    for index in range(steps):
        rates[index] = model.mean_bps + deviation
        deviation = model.correlation * deviation + rng.normal(0.0, innovation_std)
    rates = np.clip(rates, 0.0, None)

    in_dip = np.zeros(steps, dtype=bool)
    dips = []
    dip_count = round(model.dips_per_minute * duration_s / 60.0)
    min_steps = round(model.dip_min_s / _STEP_S)
    max_steps = round(model.dip_max_s / _STEP_S)
    while len(dips) < dip_count:
        length = int(rng.integers(min_steps, max_steps + 1))
        # Leave the first and last second alone: the period ends on a normal step.
        start = int(rng.integers(10, steps - 10 - length))
        if in_dip[max(start - 10, 0) : start + length + 10].any():
            continue  # keep dips apart
        in_dip[start : start + length] = True
        rates[start : start + length] = rng.uniform(0.0, model.dip_max_bps, size=length)
        dips.append((start * _STEP_S, length * _STEP_S))

    # Rescale outside the dips so the whole series has exactly the target mean.
    target_total = model.mean_bps * steps
    dip_total = rates[in_dip].sum()
    rates[~in_dip] *= (target_total - dip_total) / rates[~in_dip].sum()
    return rates, sorted(dips)


def header_lines(
    model: TraceModel, duration_s: float, dips: list[tuple], mean_bps: float
) -> list[str]:
    """Return the comment lines at the top of a generated trace file."""
    lines = [
        'Copyright 2026 The edge_offload authors',
        'SPDX-License-Identifier: Apache-2.0',
        '',
        f'Mahimahi delivery trace: {model.description}.',
        'One line = one 1500-byte delivery opportunity at that millisecond; the trace repeats.',
        'SYNTHETIC trace modelled on published summary statistics (mean rate, 0.1 s sampling',
        'step, dip behaviour) of iperf TCP throughput measured every 0.1 s for five minutes from',
        'a four-wheeled robot; the original measurements were never released.',
        f'Made by tools/make_link_traces.py (numpy seed {model.seed}): AR(1) throughput at '
        f'{_STEP_S:g} s steps,',
        f'mean {model.mean_bps / 1e6:g} Mbit/s, std {model.std_bps / 1e6:g} Mbit/s, '
        f'correlation {model.correlation:g} per step, clipped at 0,',
    ]
    if dips:
        spans = ', '.join(f'{start:.1f}+{length:.1f}s' for start, length in dips)
        lines.append(
            f'{len(dips)} dips to 0-{model.dip_max_bps / 1e6:g} Mbit/s '
            f'lasting {model.dip_min_s:g}-{model.dip_max_s:g} s (start+length): {spans},'
        )
    lines += [
        'rescaled outside the dips to the exact mean.' if dips else 'rescaled to the exact mean.',
        f'Length {duration_s:g} s (the measurements lasted 300 s; shortened to keep the file '
        'small).',
        f'Mean of this file: {mean_bps / 1e6:.3f} Mbit/s.',
        'Strip the # lines (grep -v "^#") before giving the file to mahimahi mm-link.',
    ]
    return lines


def make_trace(model: TraceModel, duration_s: float, output_dir: Path) -> Path:
    """Generate one trace and write it to ``output_dir``; return its path."""
    rates, dips = synthesize_rates(model, duration_s)
    timestamps = rates_to_timestamps(rates.tolist(), _STEP_S)
    trace = DeliveryTrace.from_timestamps_ms(timestamps)
    if abs(trace.period_s - duration_s) > 1e-9:
        raise RuntimeError(f'{model.file_name}: period {trace.period_s} s != {duration_s} s')
    mean = trace.mean_rate_bps()
    if abs(mean / model.mean_bps - 1.0) > _MEAN_TOLERANCE:
        raise RuntimeError(f'{model.file_name}: mean {mean} bit/s misses {model.mean_bps}')
    path = output_dir / model.file_name
    write_trace(path, timestamps, header_lines(model, duration_s, dips, mean))
    _LOGGER.info('wrote %s: %d lines, mean %.3f Mbit/s', path, len(trace), mean / 1e6)
    return path


def main(argv: list[str] | None = None) -> int:
    """Write the shipped traces."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--output-dir', type=Path, default=_DEFAULT_OUTPUT_DIR)
    parser.add_argument('--duration-s', type=float, default=60.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format='%(message)s')
    args.output_dir.mkdir(parents=True, exist_ok=True)
    for model in MODELS:
        make_trace(model, args.duration_s, args.output_dir)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
