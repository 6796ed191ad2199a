# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""RRTO's recorder: the per-operator session's calls as an operator log, and its search.

Every call a ``RemoteSession`` makes becomes log entries (``sequence_search``'s model):

* each per-pass host tensor an operator call uploads: an ``INPUT`` (its shape, strides and
  dtype are the signature);
* the operator: an ``OP`` whose signature is the operator, its non-tensor arguments, the
  position of each tensor argument and the metadata of its results; its reads say where
  each tensor argument came from: a parameter (cached by identity, ``PARAM``), this pass's
  input or an earlier result (``VALUE``, keyed by the producing entry; an in-place
  operator becomes the producer of the value it wrote), or a value older than the log
  (``VALUE`` keyed before the log: resident state, equal in every copy or no match);
* a host read (``fetch``, or an operator whose result holds plain numbers): an ``OUTPUT``;
* an operator right after an ``OUTPUT`` that reads only parameters (``aten.t(weight)`` of
  an ``nn.Linear`` under ``no_grad``) is preceded by an ``INPUT`` marker with no upload:
  the search anchors inferences at INPUTs, and such a model has none at its start.

The log is bounded (``max_entries``; the oldest entries go first), and so is the list of
calls kept to build a sequence from, so a model that never becomes static keeps flat
memory. When the search finds a sequence that starts and ends on call boundaries, the
recorder turns the calls of its newest copy into a :class:`~rrto_ros.replay.ReplaySequence`.
"""

from __future__ import annotations

import collections
import itertools
import time
from dataclasses import dataclass
from typing import Any

from rrto_ros import replay
from rrto_ros.sequence_search import (
    DEFAULT_MIN_REPEATS,
    EntryKind,
    LogEntry,
    OperatorSequenceSearch,
    Ref,
    SequenceMatch,
)

DEFAULT_MAX_ENTRIES = 200_000


@dataclass
class _CallRecord:
    entry_start: int  # absolute log index of its first entry
    entry_stop: int  # one past its last entry
    start_id: int  # first value id the call allocated (or would have)
    next_id: int  # the session's next id after the call
    step_of: Any  # base -> replay step


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


class Recorder:
    """Turns session events into a bounded operator log and searches it."""

    def __init__(
        self, min_repeats: int = DEFAULT_MIN_REPEATS, max_entries: int = DEFAULT_MAX_ENTRIES
    ) -> None:
        self.search = OperatorSequenceSearch(min_repeats, max_entries)
        # value id -> (producing entry, result slot)
        self._producer: dict[int, tuple[int, int]] = {}
        self._calls: collections.deque[_CallRecord] = collections.deque()
        self._sequence_ids = itertools.count(1)
        self._after_output = True  # the last entry logged was an OUTPUT (or none yet)
        self.search_time_s = 0.0
        self.searches = 0

    # -- events -------------------------------------------------------------------------

    def on_event(self, event: str, details: dict[str, Any]) -> replay.ReplaySequence | None:
        """Log one session event; return a new sequence when the search finds one."""
        if event == 'op':
            entries, record = self._op_entries(details)
        elif event == 'fetch':
            entries, record = self._fetch_entries(details)
        else:
            return None
        self._calls.append(record)
        self._after_output = entries[-1].kind is EntryKind.OUTPUT
        searched = any(entry.kind is EntryKind.OUTPUT for entry in entries)
        started = time.perf_counter()
        match = self.search.extend(entries)
        if searched:
            self.searches += 1
            self.search_time_s += time.perf_counter() - started
        self._trim()
        return self._sequence(match) if match is not None else None

    def clear(self) -> None:
        """Forget the log (after a replay diverged); older values become resident state."""
        self.search.clear()
        self._calls.clear()
        self._producer.clear()
        self._after_output = False

    # -- entries ------------------------------------------------------------------------

    def _read(self, value_id: int, params: set[int], local: dict[int, int]) -> tuple[Ref, int]:
        if value_id in params:
            return Ref.param(value_id), 0
        if value_id in local:
            return Ref.value(local[value_id]), 0
        producer = self._producer.get(value_id)
        if producer is None:  # made before the log began (or while replaying)
            return Ref.value(-1 - value_id), 0
        return Ref.value(producer[0]), producer[1]

    def _op_entries(self, details: dict[str, Any]) -> tuple[list[LogEntry], _CallRecord]:
        call = details['call']
        next_index = self.search.next_index
        entries: list[LogEntry] = []
        if self._after_output and all(role == 'param' for role, _ in details['reads']):
            # Reads nothing of the pass (``nn.Linear`` under ``no_grad`` starts with
            # ``aten.t(weight)``, before its input goes up): it may start an inference,
            # and the search anchors inferences at INPUTs, so mark it with one.
            entries.append(LogEntry(EntryKind.INPUT, 'input:source', 'source'))
        params = {value_id for role, value_id in details['reads'] if role.startswith('param')}
        local: dict[int, int] = {}
        umeta = []
        for value_id, tensor in details['uploads'].items():
            meta = [list(tensor.shape), list(tensor.stride()), str(tensor.dtype)[6:]]
            umeta.append(meta)
            if value_id in params:
                continue
            local[value_id] = next_index + len(entries)
            entries.append(LogEntry(EntryKind.INPUT, 'input', _freeze(meta)))
        op_index = next_index + len(entries)
        reads: list[Ref] = []

        def template(tree: Any) -> Any:
            if isinstance(tree, list):
                return [template(v) for v in tree]
            if isinstance(tree, dict):
                if set(tree) == {'T'}:
                    ref, slot = self._read(tree['T'], params, local)
                    reads.append(ref)
                    return ['t', slot]
                return {k: template(v) for k, v in tree.items()}
            return tree

        arg_ids = [leaf['T'] for leaf in _leaves(call['args']) + _leaves(call['kwargs'])]
        signature_args = template([call['args'], call['kwargs']])
        result = details['result']
        result_ids: list[int] = []

        def result_template(tree: Any) -> Any:
            if isinstance(tree, list):
                return [result_template(v) for v in tree]
            if isinstance(tree, dict):
                if set(tree) == {'R'}:
                    result_ids.append(tree['R'][0])
                    return ['R', tree['R'][1]]
                if set(tree) == {'T'}:
                    result_ids.append(tree['T'])
                    return ['T', arg_ids.index(tree['T']) if tree['T'] in arg_ids else -1]
                return {k: result_template(v) for k, v in tree.items()}
            return replay.result_shape(tree)

        signature = _freeze(
            [call['op'], signature_args, result_template(result), details['dynamic']]
        )
        entries.append(LogEntry(EntryKind.OP, f'op:{call["op"]}', signature, tuple(reads)))
        for slot, value_id in enumerate(result_ids):
            self._producer[value_id] = (op_index, slot)
        dropped = set(call['inputs'])
        for value_id, index in local.items():
            if value_id in result_ids:
                continue
            if value_id in dropped:  # consumed by this call: a later read uploads it again
                self._producer.pop(value_id, None)
            else:  # the server holds it for the pass: a later read names it
                self._producer[value_id] = (index, 0)
        host_values = replay.has_host_values(result)
        if host_values:
            read = (Ref.value(op_index),)
            entries.append(LogEntry(EntryKind.OUTPUT, 'output:scalar', 'scalar', read))
        sync = host_values or bool(details['dynamic'])
        freed = list(details.get('freed', ()))
        record = _CallRecord(
            next_index,
            next_index + len(entries),
            details['start_id'],
            details['next_id'],
            lambda base: replay.exec_step(call, result, umeta, sync, base, freed),
        )
        return entries, record

    def _fetch_entries(self, details: dict[str, Any]) -> tuple[list[LogEntry], _CallRecord]:
        value_id = details['value']
        if details.get('param'):  # a parameter or buffer read back (its value changed)
            ref, slot = Ref.param(value_id), 0
        else:
            ref, slot = self._read(value_id, set(), {})
        index = self.search.next_index
        entry = LogEntry(EntryKind.OUTPUT, 'output', ('fetch', slot), (ref,))
        next_id = details['next_id']
        record = _CallRecord(
            index, index + 1, next_id, next_id, lambda base: replay.fetch_step(value_id, base)
        )
        return [entry], record

    # -- sequences ----------------------------------------------------------------------

    def _trim(self) -> None:
        base = self.search.base
        while self._calls and self._calls[0].entry_start < base:
            self._calls.popleft()
        if len(self._producer) > 4 * self.search.max_entries:
            self._producer = {k: v for k, v in self._producer.items() if v[0] >= base}

    def _sequence(self, match: SequenceMatch) -> replay.ReplaySequence | None:
        calls = [c for c in self._calls if match.start <= c.entry_start < match.stop]
        if not calls or calls[0].entry_start != match.start or calls[-1].entry_stop != match.stop:
            return None  # not on call boundaries: keep recording
        base = calls[0].start_id
        steps = [record.step_of(base) for record in calls]
        if len(steps) > replay.MAX_STEPS:
            return None
        return replay.ReplaySequence(next(self._sequence_ids), steps, calls[-1].next_id - base)


def _leaves(tree: Any) -> list[dict]:
    found: list[dict] = []
    if isinstance(tree, list):
        for item in tree:
            found.extend(_leaves(item))
    elif isinstance(tree, dict):
        if set(tree) == {'T'}:
            found.append(tree)
        else:
            for value in tree.values():
                found.extend(_leaves(value))
    return found
