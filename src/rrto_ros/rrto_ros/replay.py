# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""A recorded inference as both ends replay it: steps whose value ids are pass-relative.

Per-operator offloading names every value by an id the robot allocates in call order, so
the same inference run again allocates the same ids shifted by where the pass started.
A :class:`ReplaySequence` stores each call of one recorded pass with the ids produced in
that pass written relative to its first id (``{'V': offset}``, results as
``{'R': [offset, meta]}``) and older ids (parameters, resident state) kept absolute
(``{'T': id}``). ``rebase`` turns a step back into a concrete call for a new pass; the
robot's step check is ``relativize(live call) == recorded step``.

Step kinds (plain msgpack-ready maps, sent to the server once per sequence):

* ``exec``: ``{'k': 'x', 'op', 'args', 'kwargs', 'first', 'uploads', 'inputs', 'umeta',
  'result', 'sync', 'free'}``. ``uploads`` are the per-pass host tensors this call sends and
  ``umeta`` their ``[shape, stride, dtype]``. ``sync`` marks a step the robot cannot
  answer from the record: its result holds host values (``equal``, ``is_nonzero``) or
  its result sizes depend on data. ``free`` are the values of the pass the robot had let
  go of before this call in the recorded pass: no later step reads them.
* ``fetch``: ``{'k': 'f', 'value'}``, a host read of one value.

No torch and no I/O here.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

EXEC = 'x'
FETCH = 'f'

MAX_STEPS = 100_000
"""Most steps a sequence may have (a bound the server enforces)."""


class SequenceError(ValueError):
    """A sequence that is malformed or does not fit the limits."""


def _map_ids(tree: Any, on_ref: Callable[[str, int], Any], on_result: Callable) -> Any:
    if isinstance(tree, list):
        return [_map_ids(item, on_ref, on_result) for item in tree]
    if isinstance(tree, dict):
        if len(tree) == 1:
            ((tag, item),) = tree.items()
            if tag in ('T', 'V') and isinstance(item, int) and not isinstance(item, bool):
                return on_ref(tag, item)
            if tag == 'R' and isinstance(item, list) and len(item) == 2:
                return on_result(item[0], item[1])
        return {key: _map_ids(value, on_ref, on_result) for key, value in tree.items()}
    return tree


def map_refs(tree: Any, on_ref: Callable[[str, int], Any]) -> Any:
    """Return an argument tree with each reference (``{'T': id}``, ``{'V': offset}``) mapped.

    Raises:
        SequenceError: the tree holds a result (``{'R': ...}``), which arguments never do.

    """

    def result(value_id: int, meta: Any) -> Any:
        raise SequenceError('a recorded result among the arguments')

    return _map_ids(tree, on_ref, result)


def relativize(tree: Any, base: int) -> Any:
    """Return ``tree`` with ids ``>= base`` written as ``{'V': id - base}``."""

    def ref(tag: str, value_id: int) -> dict:
        if tag == 'T' and value_id >= base:
            return {'V': value_id - base}
        return {tag: value_id}

    return _map_ids(tree, ref, lambda value_id, meta: {'R': [value_id - base, meta]})


def rebase(tree: Any, base: int) -> Any:
    """Return ``tree`` with relative ids made absolute for a pass starting at ``base``."""

    def ref(tag: str, value_id: int) -> dict:
        return {'T': base + value_id} if tag == 'V' else {tag: value_id}

    return _map_ids(tree, ref, lambda value_id, meta: {'R': [base + value_id, meta]})


def result_shape(tree: Any) -> Any:
    """Return an encoded result with host values replaced by their type: what must repeat.

    Tensor results (``{'R': [id, meta]}``, ``{'T': id}``) are kept whole: their sizes must
    repeat exactly.
    """
    if isinstance(tree, bool | int | float):
        return type(tree).__name__
    if isinstance(tree, list):
        return [result_shape(item) for item in tree]
    if isinstance(tree, dict):
        if len(tree) == 1 and ('R' in tree or 'T' in tree or 'V' in tree):
            return tree
        return {key: result_shape(value) for key, value in tree.items()}
    return tree


def has_host_values(tree: Any) -> bool:
    """Return True if an encoded result holds plain numbers (a host read)."""
    if isinstance(tree, bool | int | float):
        return True
    if isinstance(tree, list):
        return any(has_host_values(item) for item in tree)
    if isinstance(tree, dict):
        if len(tree) == 1 and ('R' in tree or 'T' in tree or 'V' in tree):
            return False
        return any(has_host_values(value) for value in tree.values())
    return False


def exec_step(
    call: dict, result: Any, umeta: list, sync: bool, base: int, freed: list[int] = ()
) -> dict:
    """Return the step of one recorded ``exec`` call of a pass that starts at ``base``.

    ``freed`` are the ids the robot had let go of before the call (the frees it carried):
    those of this pass are kept, so the server can release them at the same point.
    """
    return {
        'free': sorted(value_id - base for value_id in freed if value_id >= base),
        'k': EXEC,
        'op': call['op'],
        'args': relativize(call['args'], base),
        'kwargs': relativize(call['kwargs'], base),
        'first': call['first'] - base,
        'uploads': [value_id - base for value_id in call['uploads']],
        'inputs': [value_id - base for value_id in call['inputs']],
        'umeta': umeta,
        'result': relativize(result, base),
        'sync': bool(sync),
    }


def fetch_step(value_id: int, base: int) -> dict:
    """Return the step of one recorded host read of ``value_id``."""
    return {'k': FETCH, 'value': relativize({'T': value_id}, base)}


def exec_matches(step: dict, call: dict, umeta: list, base: int) -> bool:
    """Return True if the live ``call`` is the recorded ``step`` (the step check)."""
    return (
        step['k'] == EXEC
        and step['op'] == call['op']
        and step['first'] == call['first'] - base
        and step['uploads'] == [value_id - base for value_id in call['uploads']]
        and step['inputs'] == [value_id - base for value_id in call['inputs']]
        and step['umeta'] == umeta
        and _same(step['args'], call['args'], base)
        and _same(step['kwargs'], call['kwargs'], base)
    )


def _same(recorded: Any, live: Any, base: int) -> bool:
    """Return ``recorded == relativize(live, base)`` without building the relative tree."""
    if isinstance(recorded, list):
        return (
            isinstance(live, list)
            and len(recorded) == len(live)
            and all(_same(r, v, base) for r, v in zip(recorded, live, strict=True))
        )
    if isinstance(recorded, dict):
        if not isinstance(live, dict) or len(recorded) != len(live):
            return False
        if len(recorded) == 1:
            ((tag, item),) = recorded.items()
            if tag == 'V':
                target = live.get('T')
                return type(target) is int and target - base == item
            if tag == 'T':
                target = live.get('T')
                return type(target) is int and target < base and target == item
        return all(
            key in live and _same(value, live[key], base) for key, value in recorded.items()
        )
    return type(recorded) is type(live) and recorded == live


def fetch_matches(step: dict, value_id: int, base: int) -> bool:
    """Return True if a live host read of ``value_id`` is the recorded ``step``."""
    return step['k'] == FETCH and step['value'] == relativize({'T': value_id}, base)


@dataclass
class ReplaySequence:
    """The operator sequence of one inference, ready to replay.

    ``ids`` is how many value ids one pass allocates; ``upload_steps`` lists the steps
    that send host tensors (the server cannot run past one before it has them).
    """

    sequence_id: int
    steps: list[dict]
    ids: int

    def __post_init__(self) -> None:
        self.upload_steps = [
            i for i, s in enumerate(self.steps) if s['k'] == EXEC and s['uploads']
        ]
        #: Steps the robot needs the server's answer for: host reads and sync steps.
        self.host_steps = [i for i, s in enumerate(self.steps) if s['k'] == FETCH or s['sync']]
        #: Pass-relative id -> the last step that makes or reads it.
        self.last_use: dict[int, int] = {}
        for index, step in enumerate(self.steps):
            for offset in _relative_ids(step):
                self.last_use[offset] = index

    def run_until(self, step: int) -> int:
        """Return the last step the server can run once it has the uploads through ``step``."""
        for index in self.upload_steps:
            if index > step:
                return index - 1
        return len(self.steps) - 1

    def next_host_step(self, step: int) -> int | None:
        """Return the first host read or sync step at or after ``step`` (None: none left)."""
        position = bisect.bisect_left(self.host_steps, step)
        return self.host_steps[position] if position < len(self.host_steps) else None

    def to_wire(self) -> dict:
        """Return the msgpack-ready form sent to the server."""
        return {'id': self.sequence_id, 'ids': self.ids, 'steps': self.steps}

    @classmethod
    def from_wire(cls, value: Any, max_steps: int = MAX_STEPS) -> ReplaySequence:
        """Validate the structure of a received sequence and return it.

        Raises:
            SequenceError: not a sequence, or over ``max_steps``.

        """
        if not isinstance(value, dict) or set(value) != {'id', 'ids', 'steps'}:
            raise SequenceError('a sequence is a map of id, ids and steps')
        sequence_id, ids, steps = value['id'], value['ids'], value['steps']
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (sequence_id, ids)):
            raise SequenceError('sequence id and ids must be integers')
        if not isinstance(steps, list) or not 0 < len(steps) <= max_steps:
            raise SequenceError(f'a sequence has 1 to {max_steps} steps')
        for index, step in enumerate(steps):
            if not isinstance(step, dict) or step.get('k') not in (EXEC, FETCH):
                raise SequenceError(f'step {index} is neither an exec nor a fetch step')
            if step['k'] == FETCH:
                if set(step) != {'k', 'value'} or not isinstance(step['value'], dict):
                    raise SequenceError(f'fetch step {index} is malformed')
                continue
            want = {'k', 'op', 'args', 'kwargs', 'first', 'uploads', 'inputs', 'umeta'}
            want |= {'result', 'sync', 'free'}
            if set(step) != want:
                raise SequenceError(f'exec step {index} is malformed')
            if not isinstance(step['op'], str) or not isinstance(step['first'], int):
                raise SequenceError(f'exec step {index} is malformed')
            for key in ('uploads', 'inputs', 'free'):
                if not isinstance(step[key], list) or not all(
                    isinstance(v, int) and not isinstance(v, bool) and 0 <= v < ids
                    for v in step[key]
                ):
                    raise SequenceError(f'exec step {index}: bad {key}')
            if not isinstance(step['umeta'], list) or len(step['umeta']) != len(step['uploads']):
                raise SequenceError(f'exec step {index}: bad upload metadata')
        return cls(sequence_id, steps, ids)


def result_offsets(result: Any) -> list[int]:
    """Return the pass-relative ids of the new values in a recorded result."""
    found: list[int] = []
    _map_ids(result, lambda tag, value_id: None, lambda value_id, meta: found.append(value_id))
    return found


def _relative_ids(step: dict) -> list[int]:
    """Return the pass-relative ids a step makes or reads."""
    found: list[int] = []

    def ref(tag: str, value_id: int) -> None:
        if tag == 'V':
            found.append(value_id)

    def made(value_id: int, meta: Any) -> None:
        found.append(value_id)

    if step['k'] == FETCH:
        _map_ids(step['value'], ref, made)
        return found
    _map_ids([step['args'], step['kwargs'], step['result']], ref, made)
    found.extend(step['uploads'])
    return found
