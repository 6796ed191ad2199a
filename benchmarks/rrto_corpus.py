# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Run the RRTO differential corpus in local, per_op and rrto modes and tabulate it.

Set-up (printed with the results): every program of ``src/rrto_ros/test/rrto_corpus.py``
runs in this process, once per mode, with a fresh model build (identical seeded weights)
and the same inputs; ``per_op`` and ``rrto`` talk to a fresh ``OpService`` through the
in-process ``LoopbackTransport`` (no sockets, no network, no link emulation: round trips
cost only the encoding and the server's work), with one torch thread. The server runs
the same CPU kernels as local inference, so offloaded results must be bit-equal.

The table (markdown, also written to ``--out``, default ``build/rrto_corpus.md``) gives
per program: what it is expected to do, the first replayed inference, the round trips of
a steady inference (median over the replayed inferences, else the last 3), the median
wall ms per inference in each mode, whether per_op and rrto were bit-equal to local
(outputs, arguments written in place, final module state; for ``refused`` programs
whether the right operator was refused), and a note (why no replay, the refused operator,
the first error, RRTO's latest abort). Nothing is asserted: ``test_corpus.py`` does that.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'src' / 'rrto_ros' / 'test'))

from corpus_harness import MODES, corpus_table, run_mode  # noqa: E402
from rrto_corpus import PROGRAMS  # noqa: E402


def _names(text: str) -> list[str]:
    return [name for name in text.split(',') if name]


def main(argv: list[str] | None = None) -> int:
    """Run the corpus and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        '--programs', type=_names, default=[],
        help='comma-separated program names (default: all)',
    )  # fmt: skip
    parser.add_argument('--out', type=Path, default=Path('build/rrto_corpus.md'))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    programs = [p for p in PROGRAMS if not args.programs or p.name in args.programs]
    unknown = sorted(set(args.programs) - {p.name for p in PROGRAMS})
    if unknown:
        parser.error(f'unknown programs {unknown}')
    header = (
        f'set-up: {len(programs)} corpus programs x modes {", ".join(MODES)}; per_op and '
        'rrto through the in-process LoopbackTransport to a fresh OpService per run (no '
        f'sockets, no network); torch {torch.__version__}, {torch.get_num_threads()} torch '
        f'thread(s); {os.cpu_count()} CPU cores ({platform.machine()}, '
        f'{platform.python_implementation()} {platform.python_version()}); load average '
        f'{" ".join(f"{x:.2f}" for x in os.getloadavg())}'
    )
    print(header, flush=True)
    started = time.perf_counter()
    results = []
    for program in programs:
        runs = {mode: run_mode(program, mode) for mode in MODES}
        results.append((program, runs))
    elapsed = time.perf_counter() - started
    table = corpus_table(results)
    text = f'{header}\n\n{table}\n\n({elapsed:.1f} s for the whole corpus)\n'
    print(f'\n{table}\n\n({elapsed:.1f} s for the whole corpus)')
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f'wrote {args.out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
