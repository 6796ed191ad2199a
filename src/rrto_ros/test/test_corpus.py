# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Differential tests over the program corpus (issue 31): per_op and rrto equal local.

Every program runs locally, ``per_op`` and ``rrto`` (server in-process, same CPU kernels):

* local must run without error and be deterministic (two local runs are bit-equal);
* ``replay`` and ``offload`` programs: no errors offloaded, and every inference's outputs,
  the arguments after the call (programs write into their inputs) and the final module
  state are bit-equal to local;
* ``replay`` programs: RRTO replays by the 5th inference and every inference from then on
  takes ``steady_round_trips`` (1) round trips;
* ``refused`` programs: every offloaded inference names ``refused_op`` in its error, or
  in its fallback reason with outputs bit-equal to local. Nothing else passes.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus_harness import (  # noqa: E402
    bit_equal,
    compare_runs,
    refusal_problems,
    replay_problems,
    run_mode,
)
from rrto_corpus import EXPECTS, GRAD_MODES, PROGRAMS, REQUIRED_TAGS, CorpusProgram  # noqa: E402


def _fail(problems: list[str]) -> str:
    """Message: the first problem on the first line (what --tb=line shows), then the rest."""
    extra = len(problems) - 8
    lines = problems[:8] + ([f'... and {extra} more'] if extra > 0 else [])
    return '\n'.join(lines)


@pytest.mark.parametrize('program', PROGRAMS, ids=[program.name for program in PROGRAMS])
def test_offloaded_equals_local(program: CorpusProgram) -> None:
    local = run_mode(program, 'local')
    errors = [f'local inference {i + 1}: {e}' for i, e in enumerate(local.errors) if e]
    assert not errors, _fail(errors)  # the program itself is broken
    again = run_mode(program, 'local')
    assert not compare_runs(local, again), 'the program is not deterministic locally: ' + (
        _fail(compare_runs(local, again))
    )

    problems: list[str] = []
    runs = {mode: run_mode(program, mode) for mode in ('per_op', 'rrto')}
    for run in runs.values():
        if program.expect == 'refused':
            problems += refusal_problems(program, local, run)
        else:
            problems += compare_runs(local, run)
    if program.expect == 'replay':
        problems += replay_problems(runs['rrto'], round_trips=program.steady_round_trips)
    assert not problems, _fail(problems)


def test_corpus_is_large_and_covers_every_category() -> None:
    assert len(PROGRAMS) >= 40
    names = [program.name for program in PROGRAMS]
    assert len(set(names)) == len(names), 'program names must be unique'
    covered = frozenset().union(*(program.tags for program in PROGRAMS))
    assert REQUIRED_TAGS <= covered, f'uncovered: {sorted(REQUIRED_TAGS - covered)}'
    grad_modes = collections.Counter(program.grad_mode for program in PROGRAMS)
    assert set(grad_modes) == set(GRAD_MODES)
    assert min(grad_modes.values()) >= 5, grad_modes
    expects = collections.Counter(program.expect for program in PROGRAMS)
    assert set(expects) == set(EXPECTS), expects
    assert sum(program.train for program in PROGRAMS) >= 5
    for program in PROGRAMS:
        assert program.inferences >= 8, program.name
        if program.expect == 'refused':
            assert program.refused_op, program.name
        if program.expect == 'offload':
            assert program.why, program.name


@pytest.mark.parametrize('program', PROGRAMS, ids=[program.name for program in PROGRAMS])
def test_programs_are_seeded(program: CorpusProgram) -> None:
    # Two builds have identical weights; make_input gives equal, fresh tensors each call.
    first, second = program.build(), program.build()
    assert bit_equal(first.state_dict(), second.state_dict()) is None
    for index in (0, 1, program.inferences - 1):
        a, b = program.make_input(index), program.make_input(index)
        assert isinstance(a, tuple)
        assert bit_equal(a, b) is None
        for x, y in zip(a, b, strict=True):
            if isinstance(x, torch.Tensor):
                assert x.untyped_storage().data_ptr() != y.untyped_storage().data_ptr()
