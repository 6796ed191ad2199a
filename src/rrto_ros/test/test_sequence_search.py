# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Tests of the two-stage Operator Sequence Search (spec sections 4.4 and 9, item 3).

The logs are synthetic: a small builder emits passes from templates whose reads name
offsets inside the pass, values of the previous pass, or named resident values.
"""

import gc
import random
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from rrto_ros.sequence_search import (
    DEFAULT_MIN_REPEATS,
    EntryKind,
    LogEntry,
    OperatorSequenceSearch,
    Ref,
    RefRole,
    SearchStats,
    SequenceMatch,
    build_tags,
    check_data_dependency,
    entries_equivalent,
    find_ios,
    find_sequence,
    full_check,
)

IN, OUT, OP = EntryKind.INPUT, EntryKind.OUTPUT, EntryKind.OP

# --------------------------------------------------------------------------- log builder


@dataclass(frozen=True)
class Prev:
    """A read of the value at ``offset`` in the previous pass (a carried dependency)."""

    offset: int


@dataclass(frozen=True)
class Named:
    """A read of a value registered under ``name`` when it was produced."""

    name: str


@dataclass(frozen=True)
class Step:
    """One entry of a pass template; an int read is an offset inside the pass."""

    kind: EntryKind
    tag: str
    signature: Hashable = None
    reads: tuple = ()
    name: str | None = None


@dataclass(frozen=True)
class Pass:
    start: int
    length: int
    label: str
    core: int | None  # Where the unmodified template copy starts, if there is one.

    @property
    def end(self) -> int:
        return self.start + self.length - 1


class LogBuilder:
    """Emits passes from templates, resolving their reads to absolute VALUE refs."""

    def __init__(self) -> None:
        self.log: list[LogEntry] = []
        self.named: dict[str, int] = {}
        self.passes: list[Pass] = []

    def __len__(self) -> int:
        return len(self.log)

    def add(self, step: Step, placed: dict[int, int] | None = None) -> int:
        placed = {} if placed is None else placed
        prev = self.passes[-1].start if self.passes else None
        reads = tuple(self._resolve(spec, placed, prev) for spec in step.reads)
        index = len(self.log)
        self.log.append(LogEntry(step.kind, step.tag, step.signature, reads))
        if step.name is not None:
            self.named[step.name] = index
        return index

    def _resolve(self, spec: object, placed: dict[int, int], prev: int | None) -> Ref:
        if isinstance(spec, Ref):
            return spec
        if isinstance(spec, int):
            return Ref.value(placed[spec])
        if isinstance(spec, Prev):
            assert prev is not None
            return Ref.value(prev + spec.offset)
        assert isinstance(spec, Named)
        return Ref.value(self.named[spec.name])

    def emit(
        self,
        template: list[Step],
        label: str = 'steady',
        extra: Step | None = None,
        insert_at: int | None = None,
    ) -> Pass:
        """Emit one pass; ``extra`` goes in before template offset ``insert_at``."""
        start = len(self.log)
        core = None if extra is not None and 0 < insert_at < len(template) else start
        if extra is not None and insert_at == 0:
            core = start + 1
        placed: dict[int, int] = {}
        for offset, step in enumerate(template):
            if extra is not None and offset == insert_at:
                self.add(extra, placed)
            placed[offset] = self.add(step, placed)
        if extra is not None and insert_at == len(template):
            self.add(extra, placed)
        self.passes.append(Pass(start, len(self.log) - start, label, core))
        return self.passes[-1]


def run_searcher(
    log: list[LogEntry], min_repeats: int = DEFAULT_MIN_REPEATS, *, check_batch: bool = False
) -> list[tuple[int, SequenceMatch]]:
    """Feed ``log`` entry by entry; return (index of the OUTPUT, match) for every match.

    With ``check_batch`` every incremental result is compared with a batch search of the
    same prefix.
    """
    searcher = OperatorSequenceSearch(min_repeats)
    found = []
    for index, entry in enumerate(log):
        match = searcher.append(entry)
        if entry.kind is OUT and check_batch:
            assert match == find_sequence(log[: index + 1], min_repeats), index
        if match is not None:
            found.append((index, match))
    return found


def seeded(seed: int) -> random.Random:
    """Return a reproducible generator of test data."""
    return random.Random(seed)  # noqa: S311 - test data, not cryptography


@contextmanager
def no_gc() -> Iterator[None]:
    """Build big logs without the cyclic collector rescanning them (speed only)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def toy_pass() -> list[Step]:
    """Build the spec's toy inference: HtoD, two kernels, DtoH."""
    return [
        Step(IN, 'input', ('f32', (1, 3))),
        Step(OP, 'op:k1', 'k1', (0, Ref.param('w1'))),
        Step(OP, 'op:k2', 'k2', (1,)),
        Step(OUT, 'output', ('f32', (1, 3)), (2,)),
    ]


def toy_log(passes: int) -> list[LogEntry]:
    builder = LogBuilder()
    for _ in range(passes):
        builder.emit(toy_pass())
    return builder.log


# Table III of the paper, scaled by about 1/100 (the 11 memcpy become one copy op).
STEADY_COUNTS = {
    'op:aten.get_device': 47,
    'op:aten.empty_strided': 6,
    'op:aten.convolution': 52,
    'op:aten.copy_': 1,
    'input': 3,
    'output': 8,
    'op:aten.synchronize': 9,
}
# The initializing pass: more transfers, allocations and capture queries, and the grid
# that later passes read as resident state.
INIT_COUNTS = STEADY_COUNTS | {
    'op:aten.empty_strided': 10,
    'op:aten.is_capturing': 4,
    'input': 7,
    'output': 9,
}


def table3_template(counts: dict[str, int], seed: int, grid: str) -> list[Step]:
    """Build a pass in a fixed shuffled order: first an INPUT, last an OUTPUT.

    Inner INPUTs always follow an op, so every window of one pass that starts at an INPUT
    and ends at an OUTPUT is the aligned one. ``grid`` names the resident grid: the pass
    produces it when it is the init pass (``'make'``), reads it otherwise.
    """
    rng = seeded(seed)
    units: list[list[str]] = []
    ops = [tag for tag, n in counts.items() if tag.startswith('op:') for _ in range(n)]
    inner_inputs = counts['input'] - 1
    for tag in ops[inner_inputs:]:
        units.append([tag])
    for tag in ops[:inner_inputs]:
        units.append([tag, 'input'])
    units.extend([['output']] * (counts['output'] - 1))
    rng.shuffle(units)
    tags = ['input'] + [tag for unit in units for tag in unit] + ['output']
    steps: list[Step] = []
    last_value = last_input = 0
    seen: dict[str, int] = {}
    for offset, tag in enumerate(tags):
        n = seen[tag] = seen.get(tag, -1) + 1
        signature = (tag, ('f16', (1, 8 * (1 + n % 5), 16, 16)))
        if tag == 'input':
            steps.append(Step(IN, tag, signature))
            last_value = last_input = offset
            continue
        if tag == 'output':
            steps.append(Step(OUT, tag, signature, (last_value,)))
            continue
        if tag == 'op:aten.convolution':
            reads: tuple = (last_value, Ref.param(f'conv{n}.weight'))
            if n % 8 == 3:
                reads += (last_input,)
            if n == 17 and grid == 'read':
                reads += (Named('grid'),)
        elif tag == 'op:aten.copy_':
            reads = (last_value, last_input)
        elif tag == 'op:aten.empty_strided':
            reads = (Ref.const(f'shape{n}'),)
        elif tag == 'op:aten.synchronize':
            reads = ()
        else:
            reads = (last_value,)
        name = 'grid' if grid == 'make' and tag == 'op:aten.empty_strided' and n == 0 else None
        steps.append(Step(OP, tag, signature, reads, name))
        if tag != 'op:aten.synchronize':
            last_value = offset
    return steps


def assert_true_period(log: list[LogEntry], match: SequenceMatch, r: int) -> None:
    """Check that the window is INPUT-started, OUTPUT-ended, with ``r`` exact copies."""
    assert match.repeats == r
    assert log[match.start].kind is IN
    assert log[match.end].kind is OUT
    assert match.history_start >= 0
    assert full_check(log, match.start, match.length, r)


# --------------------------------------------------------------------------- the spec's toy


def test_toy_log_returns_the_last_period():
    log = toy_log(3)
    assert find_sequence(log) == SequenceMatch(start=8, length=4, repeats=3)
    assert find_ios(log) == log[8:12]


def test_shortest_period_first():
    log = toy_log(6)
    match = find_sequence(log)
    assert match == SequenceMatch(start=20, length=4, repeats=3)
    # Two passes also repeat three times back to back, but one pass is tried first.
    assert full_check(log, 16, 8, 3)


def test_candidates_without_enough_history_are_pruned():
    stats = SearchStats()
    assert find_sequence(toy_log(2), 3, stats=stats) is None
    assert stats.candidates == 0
    assert stats.slice_eq == 0
    assert stats.full_checks == 0
    assert find_sequence(toy_log(2), 2) == SequenceMatch(4, 4, 2)


@pytest.mark.parametrize(
    'log',
    [
        [],
        [LogEntry(OP, 'op:k1', 'k1'), LogEntry(OUT, 'output', 'o')] * 6,
        [LogEntry(IN, 'input', 'i'), LogEntry(OP, 'op:k1', 'k1', (Ref.value(0),))] * 6,
    ],
    ids=['empty', 'no-input', 'no-output'],
)
def test_empty_or_missing_boundaries_give_none(log):
    assert find_sequence(log) is None
    assert find_ios(log) is None
    searcher = OperatorSequenceSearch()
    assert searcher.extend(log) is None
    assert searcher.search() is None


def test_invalid_parameters():
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match='min_repeats'):
            find_sequence(toy_log(3), bad)
        with pytest.raises(ValueError, match='min_repeats'):
            OperatorSequenceSearch(bad)
    with pytest.raises(ValueError, match='max_entries'):
        OperatorSequenceSearch(3, 0)
    with pytest.raises(TypeError, match='LogEntry'):
        OperatorSequenceSearch().append(('input', 'i'))


def test_build_tags_numbers_distinct_tags():
    tags, ids = build_tags(toy_log(2))
    assert tags == [1, 2, 3, 4, 1, 2, 3, 4]
    assert ids == {'input': 1, 'op:k1': 2, 'op:k2': 3, 'output': 4}


# --------------------------------------------------------------------------- helpers


def test_entries_equivalent_is_role_aware():
    grid = Ref.value(0)
    x = LogEntry(OP, 'op:k', 's', (Ref.value(12), grid, Ref.param('w')))
    y = LogEntry(OP, 'op:k', 's', (Ref.value(8), grid, Ref.param('w')))
    assert entries_equivalent(x, y, 10, 6, 4)
    # In-window producer at another offset.
    assert not entries_equivalent(x, LogEntry(OP, 'op:k', 's', y.reads), 10, 5, 4)
    # Same resident producer required, and it must precede both windows.
    z = LogEntry(OP, 'op:k', 's', (Ref.value(8), Ref.value(1), Ref.param('w')))
    assert not entries_equivalent(x, z, 10, 6, 4)
    carried = LogEntry(OP, 'op:k', 's', (Ref.value(12), Ref.value(7), Ref.param('w')))
    assert not entries_equivalent(carried, LogEntry(OP, 'op:k', 's', carried.reads), 10, 6, 4)
    # Any other field.
    assert not entries_equivalent(x, LogEntry(OP, 'op:k', 't', y.reads), 10, 6, 4)
    assert not entries_equivalent(x, LogEntry(OP, 'op:j', 's', y.reads), 10, 6, 4)
    assert not entries_equivalent(x, LogEntry(OUT, 'op:k', 's', y.reads), 10, 6, 4)
    assert not entries_equivalent(x, LogEntry(OP, 'op:k', 's', y.reads[:2]), 10, 6, 4)
    w2 = (Ref.value(8), grid, Ref.param('w2'))
    assert not entries_equivalent(x, LogEntry(OP, 'op:k', 's', w2), 10, 6, 4)
    as_const = (Ref.value(8), grid, Ref.const('w'))
    assert not entries_equivalent(x, LogEntry(OP, 'op:k', 's', as_const), 10, 6, 4)


def test_check_data_dependency():
    log = toy_log(3)
    assert check_data_dependency(log, 4, 4)
    assert not check_data_dependency(log, 4, 9)  # Outside the log.
    params = (Ref.param('w'),)
    cases = {
        'resident': (Ref.value(1), True),
        'own': (Ref.value(6), False),
        'future': (Ref.value(7), False),
        'from an output': (Ref.value(3), False),
        'not an index': (Ref(RefRole.VALUE, 'x'), False),
        'negative': (Ref.value(-1), False),
    }
    for name, (ref, expected) in cases.items():
        bad = [*log[:6], LogEntry(OP, 'op:k2', 'k2', (Ref.value(5), ref, *params)), *log[7:]]
        assert check_data_dependency(bad, 4, 4) is expected, name
        assert check_data_dependency(bad[2:], 4, 4, base=2) is expected, name


# --------------------------------------------------------------------------- (a) init + steady


def test_a_init_then_steady_found_exactly_after_r_steady_passes():
    steady = table3_template(STEADY_COUNTS, seed=7, grid='read')
    builder = LogBuilder()
    builder.emit(table3_template(INIT_COUNTS, seed=8, grid='make'), 'init')
    for _ in range(6):
        builder.emit(steady)
    log, passes = builder.log, builder.passes
    period = len(steady)
    assert period == sum(STEADY_COUNTS.values())

    found = run_searcher(log, check_batch=True)
    first_index, first = found[0]
    # Found at the last OUTPUT of the third steady pass, not one OUTPUT earlier.
    assert first_index == passes[3].end
    assert first == SequenceMatch(passes[3].start, period, 3)
    ios = log[first.start : first.stop]
    assert sum(e.kind is IN for e in ios) == 3
    assert sum(e.kind is OUT for e in ios) == 8
    assert sum(e.tag == 'op:aten.convolution' for e in ios) == 52
    # Later searches return whole steady passes whose copies are all steady.
    starts = {p.start: i for i, p in enumerate(passes)}
    for _, match in found:
        assert match.length == period
        assert starts[match.start] >= 3
        assert_true_period(log, match, 3)
    assert find_sequence(log) == SequenceMatch(passes[6].start, period, 3)
    assert find_sequence(log[: passes[3].end]) is None


# --------------------------------------------------------------------------- (b) several I/O


def two_transfer_pass() -> list[Step]:
    """Two inputs, three outputs; the inner input follows an op."""
    return [
        Step(IN, 'input', ('f32', (1, 3, 8, 8))),
        Step(OP, 'op:aten.relu', 'r', (0,)),
        Step(OUT, 'output', ('f32', (1,)), (1,)),
        Step(OP, 'op:aten.get_device', 'd', (1,)),
        Step(IN, 'input', ('i64', (4,))),
        Step(OP, 'op:aten.index', 'i', (1, 4)),
        Step(OUT, 'output', ('f32', (4,)), (5,)),
        Step(OP, 'op:aten.add', 'a', (5, Ref.param('bias'))),
        Step(OUT, 'output', ('f32', (4,)), (7,)),
    ]


def two_stage_pass() -> list[Step]:
    """Two sub-inferences; the inner input follows an output (Fig. 5e).

    The second stage reads only its own input, so the window from the inner input to the
    first output of the next pass is also a valid period.
    """
    return [
        Step(IN, 'input', ('f32', (1, 3, 8, 8))),
        Step(OP, 'op:aten.conv2d', 'c', (0, Ref.param('det'))),
        Step(OUT, 'output', ('f32', (5, 4)), (1,)),
        Step(IN, 'input', ('f32', (5, 4))),
        Step(OP, 'op:aten.roi_align', 'r', (3, Ref.param('rois'))),
        Step(OP, 'op:aten.linear', 'l', (4, Ref.param('head'))),
        Step(OUT, 'output', ('f32', (5, 17)), (5,)),
    ]


def test_b_several_inputs_and_outputs_per_inference():
    template = two_transfer_pass()
    builder = LogBuilder()
    init = Step(OP, 'op:aten.empty', 'e', (Ref.const((4,)),))
    builder.emit(template, 'init', extra=init, insert_at=4)
    for _ in range(5):
        builder.emit(template)
    log, passes = builder.log, builder.passes
    found = run_searcher(log, check_batch=True)
    assert found[0] == (passes[3].end, SequenceMatch(passes[3].start, len(template), 3))
    for _, match in found:
        assert match.start in {p.start for p in passes[3:]}
        assert_true_period(log, match, 3)


def test_b_inner_input_after_output_may_give_a_rotation_of_one_period():
    template = two_stage_pass()
    period = len(template)
    builder = LogBuilder()
    init = Step(OP, 'op:aten.empty', 'e', (Ref.const((5,)),))
    builder.emit(template, 'init', extra=init, insert_at=5)
    for _ in range(6):
        builder.emit(template)
    log, passes = builder.log, builder.passes
    found = run_searcher(log, check_batch=True)
    assert found[0] == (passes[3].end, SequenceMatch(passes[3].start, period, 3))
    offsets = set()
    for _, match in found:
        assert match.length == period
        assert match.history_start >= passes[1].start
        offsets.add((match.start - passes[1].start) % period)
        assert_true_period(log, match, 3)
    assert offsets == {0, 3}  # Aligned, and rotated to the inner input.


# --------------------------------------------------------------------------- (c) rotated start


def pre_input_pass(with_output: bool) -> list[Step]:
    """Build a pass that begins with ops on resident state before its input.

    With ``with_output`` the early ops end in an OUTPUT and the rest of the pass does not
    read them; otherwise the rest of the pass reads them.
    """
    pre = [
        Step(OP, 'op:aten.arange', 'a', (Ref.const(16),)),
        Step(OP, 'op:aten.mul', 'm', (0, Named('scale'))),
    ]
    if with_output:
        pre.append(Step(OUT, 'output', ('f32', (16,)), (1,)))
    n = len(pre)
    return [
        *pre,
        Step(IN, 'input', ('f32', (1, 16))),
        Step(OP, 'op:aten.add', 'add', (n, Named('scale') if with_output else 1)),
        Step(OP, 'op:aten.linear', 'lin', (n + 1, Ref.param('w'))),
        Step(OUT, 'output', ('f32', (1, 4)), (n + 2,)),
    ]


def resident_scale(builder: LogBuilder) -> None:
    builder.add(Step(OP, 'op:aten.full', 'scale', (Ref.const(2.0),), name='scale'))


def test_c_rotated_candidate_is_realigned_to_an_input():
    template = pre_input_pass(with_output=True)
    period = len(template)
    builder = LogBuilder()
    resident_scale(builder)
    for _ in range(5):
        builder.emit(template)
    log, passes = builder.log, builder.passes
    stats = SearchStats()
    match = find_sequence(log, stats=stats)
    # The only INPUT-started, OUTPUT-ended windows of one period start at an input and
    # end at the output before the next input: found from the candidate after an OUTPUT.
    assert match == SequenceMatch(passes[3].start + 3, period, 3)
    assert match.end == passes[4].start + 2 < len(log) - 1
    assert_true_period(log, match, 3)
    # Live, the same window is found at that pre-input OUTPUT, as soon as it repeats.
    found = run_searcher(log, check_batch=True)
    assert found[0] == (passes[3].start + 2, SequenceMatch(passes[2].start + 3, period, 3))
    for _, m in found:
        assert (m.start - passes[0].start) % period == 3
        assert_true_period(log, m, 3)


def test_c_ops_before_the_input_without_an_output_are_safely_rejected():
    # Known false negative of the normative algorithm: no window of one period both starts
    # at an INPUT and ends at an OUTPUT, so nothing is returned (and nothing wrong is).
    template = pre_input_pass(with_output=False)
    builder = LogBuilder()
    resident_scale(builder)
    for _ in range(8):
        builder.emit(template)
    assert find_sequence(builder.log) is None
    assert run_searcher(builder.log, check_batch=True) == []


# --------------------------------------------------------------------------- (d) extra op


@pytest.mark.parametrize('seed', range(24))
def test_d_an_inserted_operator_never_gives_a_false_positive(seed):
    rng = seeded(seed)
    template = two_transfer_pass()
    period = len(template)
    builder = LogBuilder()
    builder.emit(template, 'init', extra=Step(OP, 'op:aten.empty', 'e'), insert_at=0)
    bad = rng.randrange(1, 11)
    at = rng.randrange(0, period + 1)
    neighbour = template[min(at, period - 1)]
    tag = rng.choice([neighbour.tag, 'op:aten.extra'])
    extra = Step(OP, tag, ('extra', seed), rng.choice([(), (Ref.param('w'),)]))
    for i in range(1, 11):
        if i == bad:
            builder.emit(template, 'inserted', extra=extra, insert_at=at)
        else:
            builder.emit(template)
    log, passes = builder.log, builder.passes
    clean = [p.label == 'steady' for p in passes]
    cores = [p.core for p in passes]

    def valid(match: SequenceMatch) -> bool:
        # Three back-to-back unmodified copies of the template, the newest at the match.
        # (An op inserted before the INPUT or after the last OUTPUT leaves one intact.)
        if match.length != period or match.start not in cores:
            return False
        j = cores.index(match.start)
        return j >= 2 and cores[j - 2 : j + 1] == [match.start - n * period for n in (2, 1, 0)]

    for _, match in run_searcher(log, check_batch=True):
        assert valid(match), (bad, at, match)
    final = find_sequence(log)
    if all(clean[-3:]):
        assert final == SequenceMatch(passes[-1].start, period, 3)
    else:
        assert final is None or valid(final)


# --------------------------------------------------------------------------- (e) R = 1, 2, 3


def similar_init(variant: str) -> list[Step]:
    """Build the steady pass with identical tags but another signature or provenance."""
    template = two_transfer_pass()
    step = template[5]
    if variant == 'signature':
        template[5] = Step(step.kind, step.tag, 'i-first-call', step.reads)
    else:
        template[5] = Step(step.kind, step.tag, step.signature, (0, 4))
    return template


@pytest.mark.parametrize('variant', ['signature', 'provenance'])
def test_e_min_repeats_one_two_three(variant):
    template = two_transfer_pass()
    builder = LogBuilder()
    builder.emit(similar_init(variant), 'init')
    for _ in range(6):
        builder.emit(template)
    log, passes = builder.log, builder.passes
    init_tags, _ = build_tags(log[: passes[1].start])
    assert init_tags == build_tags(log[passes[1].start : passes[2].start])[0]

    # R = 1 accepts the first INPUT-to-OUTPUT window: part of the initializing pass.
    found = run_searcher(log, 1, check_batch=True)
    assert found[0] == (2, SequenceMatch(0, 3, 1))
    # R = 2 needs two steady passes: the init pass and the first steady one have the same
    # tags (stage one passes) but not the same entries.
    found = run_searcher(log, 2, check_batch=True)
    assert found[0] == (passes[2].end, SequenceMatch(passes[2].start, len(template), 2))
    assert find_sequence(log[: passes[1].end + 1], 2) is None
    # R = 3 needs three, and no window or copy it returns touches the init pass.
    found = run_searcher(log, 3, check_batch=True)
    assert found[0] == (passes[3].end, SequenceMatch(passes[3].start, len(template), 3))
    for _, match in found:
        assert match.history_start >= passes[1].start


def test_e_r1_and_r2_accept_an_entry_identical_init_pass():
    # Without any difference the first pass is a steady pass: R only sets the evidence.
    template = two_transfer_pass()
    builder = LogBuilder()
    for _ in range(3):
        builder.emit(template)
    passes = builder.passes
    assert run_searcher(builder.log, 2)[0][0] == passes[1].end
    assert run_searcher(builder.log, 3)[0][0] == passes[2].end


# --------------------------------------------------------------------------- (f) provenance


def chain_pass(carried: bool = False) -> list[Step]:
    """Input, four ops, output; the grid is resident; optionally a carried read."""
    state = Prev(3) if carried else Ref.param('h0')
    return [
        Step(IN, 'input', ('f32', (1, 8))),
        Step(OP, 'op:aten.linear', 'l1', (0, Ref.param('w1'))),
        Step(OP, 'op:aten.add', 'add', (1, Named('grid'))),
        Step(OP, 'op:aten.gru_cell', 'gru', (2, state)),
        Step(OP, 'op:aten.linear', 'l2', (3, Ref.param('w2'))),
        Step(OUT, 'output', ('f32', (1, 4)), (4,)),
    ]


def grid_init(builder: LogBuilder) -> None:
    builder.add(Step(OP, 'op:aten.arange', 'grid', (Ref.const(8),), name='grid'))


def test_f_fresh_input_buffers_and_stable_resident_state_match():
    builder = LogBuilder()
    grid_init(builder)
    for _ in range(4):
        builder.emit(chain_pass())
    log, passes = builder.log, builder.passes
    match = find_sequence(log)
    assert match == SequenceMatch(passes[3].start, 6, 3)
    newest, older = log[passes[3].start : passes[3].end + 1], log[passes[2].start : passes[2].end]
    # Every copy reads other absolute values, except the resident grid.
    assert newest[1].reads[0] != older[1].reads[0]
    assert newest[2].reads[1] == older[2].reads[1] == Ref.value(0)


@pytest.mark.parametrize('min_repeats', [2, 3])
def test_f_reading_the_previous_pass_intermediate_is_rejected(min_repeats):
    builder = LogBuilder()
    grid_init(builder)
    builder.emit(chain_pass())
    for _ in range(8):
        builder.emit(chain_pass(carried=True))
    assert find_sequence(builder.log, min_repeats) is None
    assert run_searcher(builder.log, min_repeats, check_batch=True) == []


def test_f_mutated_resident_state_each_pass_gives_none():
    # A value produced in pass k is read by pass k + 1, every pass (a recurrent state).
    builder = LogBuilder()
    grid_init(builder)
    builder.emit(chain_pass())
    for _ in range(30):
        builder.emit(chain_pass(carried=True))
    stats = SearchStats()
    assert find_sequence(builder.log, stats=stats) is None
    assert stats.entry_eq == 0  # Rejected by the dependency scan, before any comparison.


def test_f_resident_state_must_precede_every_compared_copy():
    # Pass 1 computes a value and reads it; later passes read pass 1's value (a lazy
    # cache). Pass 1 is not identical to them, so the first three identical passes are
    # 2, 3 and 4.
    first = [
        Step(IN, 'input', ('f32', (1, 8))),
        Step(OP, 'op:aten.arange', 'grid', (Ref.const(8),), name='grid'),
        Step(OP, 'op:aten.add', 'add', (0, 1)),
        Step(OUT, 'output', ('f32', (1, 8)), (2,)),
    ]
    cached = [*first[:2], Step(OP, 'op:aten.add', 'add', (0, Named('grid'))), first[3]]
    cached[1] = Step(OP, 'op:aten.arange', 'grid', (Ref.const(8),))
    builder = LogBuilder()
    builder.emit(first)
    for _ in range(4):
        builder.emit(cached)
    passes = builder.passes
    found = run_searcher(builder.log, 3, check_batch=True)
    assert found[0] == (passes[3].end, SequenceMatch(passes[3].start, 4, 3))
    # A looser rule (same absolute producer, wherever it lies) would accept passes 1-3.
    assert find_sequence(builder.log[: passes[2].end + 1]) is None


# --------------------------------------------------------------------------- (g) prefetch


@pytest.mark.parametrize('min_repeats', [2, 3])
def test_g_interleaved_prefetch_is_rejected_safely(min_repeats):
    # ... K1 K2 INPUT_{i+1} OUTPUT_i ...: no window both starts at an INPUT and ends at an
    # OUTPUT with a full period inside.
    builder = LogBuilder()
    current = builder.add(Step(IN, 'input', ('f32', (1, 8))))
    for _ in range(12):
        k1 = builder.add(Step(OP, 'op:k1', 'k1', (Ref.value(current), Ref.param('w'))))
        k2 = builder.add(Step(OP, 'op:k2', 'k2', (Ref.value(k1),)))
        current = builder.add(Step(IN, 'input', ('f32', (1, 8))))
        builder.add(Step(OUT, 'output', ('f32', (1, 4)), (Ref.value(k2),)))
    assert find_sequence(builder.log, min_repeats) is None
    assert run_searcher(builder.log, min_repeats, check_batch=True) == []


# --------------------------------------------------------------------------- exactness


def reference_search(log: list[LogEntry], r: int) -> SequenceMatch | None:
    """Run the normative OSS of spec section 4.4 literally: no hashes, no pruning."""
    inputs = [i for i, e in enumerate(log) if e.kind is IN]
    outputs = [i for i, e in enumerate(log) if e.kind is OUT]
    if not inputs or not outputs:
        return None
    tags = [e.tag for e in log]
    e = max(outputs)
    for s in sorted(set(inputs) | {t + 1 for t in outputs if t + 1 <= e}, reverse=True):
        length = e - s + 1
        if length <= 0 or s - (r - 1) * length < 0:
            continue
        count, p = 0, s
        while p >= 0 and tags[s : s + length] == tags[p : p + length]:
            count += 1
            p -= length
        if count < r:
            continue
        for k in sorted((k for k in inputs if s - length <= k <= s), reverse=True):
            if full_check(log, k, length, r):
                return SequenceMatch(k, length, r)
    return None


def random_log(rng: random.Random) -> list[LogEntry]:
    """Build passes of a random template with perturbations, noise and carried reads."""
    size = rng.randrange(2, 11)
    kinds = [rng.choice([IN, OP])]
    kinds += [rng.choice([OP, OP, OP, IN, OUT]) for _ in range(size - 2)]
    kinds += [rng.choice([OUT, OUT, OP])]
    template = []
    for offset, kind in enumerate(kinds):
        reads: tuple = ()
        if kind is not IN and offset:
            reads = (rng.randrange(offset),)
            if rng.random() < 0.3:
                reads += (rng.choice([Ref.param('w'), Ref.const(1), Named('grid')]),)
        template.append(Step(kind, f'{kind.value}:{rng.randrange(2)}', rng.randrange(2), reads))
    builder = LogBuilder()
    grid_init(builder)
    for _ in range(rng.randrange(3, 13)):
        if rng.random() < 0.15:
            kind = rng.choice([IN, OP, OUT])
            builder.add(Step(kind, f'{kind.value}:{rng.randrange(2)}', 'noise'))
        roll = rng.random()
        if roll < 0.1:
            at = rng.randrange(size + 1)
            builder.emit(template, 'x', extra=Step(OP, 'op:0', 'x'), insert_at=at)
        elif roll < 0.2 and builder.passes:
            carried = list(template)
            at = rng.randrange(1, size)
            step = carried[at]
            if step.kind is not IN:
                carried[at] = Step(step.kind, step.tag, step.signature, (Prev(at),))
            builder.emit(carried, 'carried')
        else:
            builder.emit(template)
    return builder.log


@pytest.mark.parametrize('seed', range(6))
def test_search_equals_the_literal_algorithm_on_random_logs(seed):
    rng = seeded(seed)
    hits = 0
    for _ in range(50):
        log = random_log(rng)
        for r in (1, 2, 3):
            expected = reference_search(log, r)
            assert find_sequence(log, r) == expected
            hits += expected is not None
        # The live searcher, bounded or not, at every OUTPUT: the result of a whole search
        # of what it holds.
        r = rng.choice([1, 2, 3])
        searcher = OperatorSequenceSearch(r, rng.choice([8, 20, 50, 10**6]))
        for index, entry in enumerate(log):
            match = searcher.append(entry)
            if entry.kind is OUT:
                retained = log[searcher.base : index + 1]
                assert match == find_sequence(retained, r, base=searcher.base), index
                if searcher.base == 0:
                    assert match == reference_search(retained, r), index
    assert hits > 30


# --------------------------------------------------------------------------- (h) linear cost


def shifted(template: list[Step], by: int, tag: object) -> list[Step]:
    """Move the template ``by`` offsets into a longer pass and mark its signatures."""
    return [
        Step(
            s.kind,
            s.tag,
            (s.signature, tag),
            tuple(r + by if isinstance(r, int) else r for r in s.reads),
        )
        for s in template
    ]


def scaling_template(pass_number: int, family: str) -> list[Step]:
    # 45 entries, 10 inputs, 15 outputs.
    template = [s for n in range(5) for s in shifted(two_transfer_pass(), 9 * n, n)]
    if family == 'drift':  # A dynamic model: one shape changes every pass.
        step = template[-2]
        template[-2] = Step(step.kind, step.tag, ('f32', (pass_number,)), step.reads)
    elif family == 'carried':  # A recurrent state: each pass reads its previous value.
        step = template[1]
        template[1] = Step(step.kind, step.tag, step.signature, (0, Prev(1)))
    elif family == 'pre-input':  # Every input follows an op: no anchor anywhere.
        zeros = Step(OP, 'op:aten.zeros', 'z', (Ref.const(4),))
        template = [
            s for n in range(5) for s in [zeros, *shifted(two_transfer_pass(), 10 * n + 1, n)]
        ]
    return template


def compiled(template: list[Step], named: dict[str, int]) -> list[tuple]:
    """Resolve a template's reads to Refs or offsets from the pass start (for speed)."""
    period = len(template)
    steps = []
    for step in template:
        spec: list = []
        for read in step.reads:
            if isinstance(read, int):
                spec.append(read)
            elif isinstance(read, Prev):
                spec.append(read.offset - period)
            elif isinstance(read, Named):
                spec.append(Ref.value(named[read.name]))
            else:
                spec.append(read)
        steps.append((step.kind, step.tag, step.signature, tuple(spec)))
    return steps


def scaling_log(entries: int, family: str) -> list[LogEntry]:
    """Build an init pass then passes of ``family`` up to ``entries`` entries, quickly."""
    builder = LogBuilder()
    log = builder.log
    with no_gc():
        grid_init(builder)
        init = scaling_template(0, 'static')
        builder.emit(init, 'init', extra=Step(OP, 'op:x', 'x'), insert_at=0)
        steps: list[tuple] = []
        n = 1
        while len(log) < entries:
            if not steps or family == 'drift':
                steps = compiled(scaling_template(n, family), builder.named)
            start = len(log)
            for kind, tag, signature, spec in steps:
                reads = tuple([r if r.__class__ is Ref else Ref.value(start + r) for r in spec])
                log.append(LogEntry(kind, tag, signature, reads))
            n += 1
    return log


def search_work(log: list[LogEntry]) -> tuple[SequenceMatch | None, SearchStats]:
    stats = SearchStats()
    with no_gc():
        match = find_sequence(log, stats=stats)
    return match, stats


@pytest.mark.parametrize('family', ['static', 'drift', 'carried', 'pre-input'])
def test_h_search_work_is_linear_in_the_log_length(family):
    small, large = scaling_log(10_000, family), scaling_log(100_000, family)
    (small_match, small_stats), (large_match, large_stats) = search_work(small), search_work(large)
    if family == 'static':
        assert large_match == SequenceMatch(len(large) - 45, 45, 3)
        assert small_match == SequenceMatch(len(small) - 45, 45, 3)
    else:
        assert large_match is small_match is None
    for log, stats in ((small, small_stats), (large, large_stats)):
        assert stats.indexed == len(log)
        assert stats.work <= 4 * len(log), stats
    assert large_stats.work <= 12 * small_stats.work


def test_h_a_million_entries():
    sizes = (100_000, 1_000_000)
    works = []
    for size in sizes:
        log = scaling_log(size, 'carried')
        match, stats = search_work(log)
        assert match is None
        assert stats.work <= 4 * len(log), stats
        works.append((len(log), stats.work))
        del log
    (small_len, small_work), (large_len, large_work) = works
    assert large_len >= 10 * small_len * 0.99
    assert large_work <= 12 * small_work


# --------------------------------------------------------------------------- bounded log


def test_bounded_log_stays_flat_then_finds_the_sequence_after_trimming():
    max_entries = 1_000
    searcher = OperatorSequenceSearch(3, max_entries)
    rng = seeded(3)
    resident = searcher.next_index
    searcher.append(LogEntry(OP, 'op:aten.arange', 'grid', (Ref.const(8),)))
    # A model that never becomes static: every op has a new tag and signature.
    while searcher.next_index < 10 * max_entries:
        index = searcher.next_index
        assert searcher.append(LogEntry(IN, 'input', 'i')) is None
        for n in range(rng.randrange(1, 6)):
            tag = f'op:dyn{index}.{n}'
            searcher.append(LogEntry(OP, tag, rng.random(), (Ref.value(searcher.next_index - 1),)))
        assert searcher.append(LogEntry(OUT, 'output', 'o', (Ref.value(index + 1),))) is None
        assert len(searcher) <= max_entries
        assert len(searcher._index.tag_ids) <= 2 * max_entries + 1024
    assert searcher.base > resident
    # The stream becomes static; it still reads the long-trimmed resident value.
    template = [Step(s.kind, s.tag, s.signature, s.reads) for s in chain_pass()]
    template[2] = Step(OP, 'op:aten.add', 'add', (1, Ref.value(resident)))
    found = None
    passes = 0
    while found is None:
        index = searcher.next_index
        passes += 1
        for step in template:
            reads = tuple(r if isinstance(r, Ref) else Ref.value(index + r) for r in step.reads)
            found = searcher.append(LogEntry(step.kind, step.tag, step.signature, reads))
    assert passes == 3
    assert found == SequenceMatch(index, len(template), 3)
    assert [e.tag for e in searcher.entries(found)] == [s.tag for s in template]
    assert searcher.entries(found)[2].reads[1] == Ref.value(resident)
    assert searcher.last_match == found
    with pytest.raises(IndexError):
        searcher.entry(resident)


def test_bounded_log_trims_in_chunks_and_keeps_absolute_indices():
    searcher = OperatorSequenceSearch(3, 16)
    log = toy_log(10)
    matches = [searcher.append(entry) for entry in log]
    assert len(searcher) <= 16
    assert searcher.next_index == len(log)
    assert searcher.base == len(log) - len(searcher)
    assert matches[-1] == SequenceMatch(36, 4, 3)
    assert searcher.entries(matches[-1]) == log[36:40]
    assert searcher.entry(36) is log[36]
    assert find_sequence(log[searcher.base :], base=searcher.base) == matches[-1]
    searcher.clear()
    assert len(searcher) == 0
    assert searcher.base == searcher.next_index == len(log)
    with pytest.raises(IndexError):
        searcher.entries(matches[-1])


def test_extend_searches_once_and_matches_the_batch_result():
    log = toy_log(3)
    searcher = OperatorSequenceSearch()
    assert searcher.extend(log[:-1]) is None
    assert searcher.extend(log[-1:]) == find_sequence(log) == SequenceMatch(8, 4, 3)
    assert searcher.stats.searches == 2
    assert searcher.min_repeats == 3
    assert searcher.max_entries == 2_000_000
