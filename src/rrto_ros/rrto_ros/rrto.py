# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Robot half of RRTO: per-operator offloading that records, finds the sequence, replays it.

``RrtoSession`` is a ``RemoteSession`` with the client state machine of the RRTO spec
(section 3.4):

* ``RECORD``: every call goes to the server one at a time (``per_op``) and into the
  :class:`~rrto_ros.recorder.Recorder`, which searches the log after every host read.
* ``ARMED``: a sequence was found and uploaded to the server once. Calls still go one at a
  time until one matches the sequence's first step: an inference starts there.
* ``REPLAY``: each call is checked against the next recorded step (operator, arguments,
  where every tensor came from, upload sizes). A matching call is answered here from the
  record, without the network. Uploads are held until the server could run on to the next
  host read with them: then one ``replay`` request takes them up, in a thread, while the
  robot goes on answering steps (the server runs the recorded steps as far as its inputs
  allow and answers every host read in that range). At a host read (or an operator whose
  result the record cannot give) the robot waits for that reply. A model with its inputs
  first and its outputs last needs one round trip per inference, and the robot's step
  checks overlap the upload and the server's compute.
* A call that does not match ends the replay: the server catches up with the steps the
  robot answered and forgets what it ran past them (their ids are the per-operator
  calls' now), the call goes per operator, the log starts afresh, and the search runs
  again. The same happens when the server finds a result that differs from the record at
  a step the robot has not answered yet.

Limits: operators the server replayed past a divergence (up to the next upload) ran once
more than the program asked for; their results are dropped, but if one of them wrote in
place into a value the program still holds, that value has the write. An operator whose
result sizes depend on data is a ``sync`` step, answered by the server, so a different
size never gets past it.
"""

from __future__ import annotations

import enum
import inspect
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import torch

from rrto_ros import op_codec, replay
from rrto_ros.executor import tensor_meta
from rrto_ros.recorder import DEFAULT_MAX_ENTRIES, Recorder
from rrto_ros.remote import RemoteError, RemoteSession, Transport
from rrto_ros.sequence_search import DEFAULT_MIN_REPEATS


class ReplayState(enum.Enum):
    """Where the client state machine is."""

    RECORD = 'record'
    ARMED = 'armed'
    REPLAY = 'replay'


@dataclass
class ReplayStats:
    """What record and replay did so far (counters only grow)."""

    sequences_found: int = 0
    passes_started: int = 0
    passes_replayed: int = 0  # completed without divergence
    aborts: int = 0
    steps_answered: int = 0  # calls answered from the record
    last_abort: str = ''
    abort_reasons: list[str] = field(default_factory=list)


@dataclass
class _Pass:
    base: int
    cursor: int = 0  # next step the robot answers
    server_cursor: int = 0  # next step the server runs
    started: bool = False
    pending: dict[int, torch.Tensor] = field(default_factory=dict)
    results: dict[int, Any] = field(default_factory=dict)
    fetched: dict[int, torch.Tensor] = field(default_factory=dict)
    stopped: dict | None = None


_HANDOFF_WAIT_S = 0.05


class _Ahead:
    """A replay request running in a thread while the robot answers steps from the record.

    With a transport that takes ``handed_off`` (the bridge's), the robot waits until the
    request has left the interpreter: its step checks would otherwise hold the interpreter
    lock while the request waits to be encoded and sent, in switch intervals of 5 ms.
    """

    def __init__(self, send: Any, tensors: dict[str, torch.Tensor], handoff: bool) -> None:
        self.reply: dict[str, torch.Tensor] | None = None
        self.error: BaseException | None = None
        handed_off = threading.Event() if handoff else None
        self.thread = threading.Thread(
            target=self._run, args=(send, tensors, handed_off), name='rrto-replay', daemon=True
        )
        self.thread.start()
        if handed_off is not None:
            handed_off.wait(_HANDOFF_WAIT_S)

    def _run(
        self, send: Any, tensors: dict[str, torch.Tensor], handed_off: threading.Event | None
    ) -> None:
        try:
            if handed_off is None:
                _, self.reply = send('replay', {}, tensors)
            else:
                _, self.reply = send('replay', {}, tensors, handed_off=handed_off)
        except BaseException as error:  # noqa: BLE001 - re-raised in the robot's thread
            self.error = error

    def result(self) -> dict[str, torch.Tensor]:
        """Wait for the reply; raise what the request raised."""
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.reply


def _umeta(uploads: dict[int, torch.Tensor]) -> list:
    return [tensor_meta(t) for t in uploads.values()]


class RrtoSession(RemoteSession):
    """Per-operator offloading with record, operator sequence search and replay."""

    def __init__(
        self,
        transport: Transport,
        *,
        min_repeats: int = DEFAULT_MIN_REPEATS,
        max_log_entries: int = DEFAULT_MAX_ENTRIES,
        replay_enabled: bool = True,
        logger: logging.Logger | None = None,
    ) -> None:
        super().__init__(transport, logger=logger)
        self.recorder = Recorder(min_repeats, max_log_entries)
        self.replay_enabled = replay_enabled
        self.state = ReplayState.RECORD
        self.sequence: replay.ReplaySequence | None = None
        self.replay_stats = ReplayStats()
        self._pass: _Pass | None = None
        self._answered = False  # the current call was answered from the record
        self._replayed_at_index = -1  # log position of the latest replayed pass
        self._ahead: _Ahead | None = None  # a replay request sent ahead, not yet answered
        try:
            self._handoff = 'handed_off' in inspect.signature(transport).parameters
        except (TypeError, ValueError):  # no signature to inspect
            self._handoff = False
        self.observer = self._observe

    # -- recording ----------------------------------------------------------------------

    def _observe(self, event: str, details: dict[str, Any]) -> None:
        if self._answered or not self.replay_enabled:
            return
        found = self.recorder.on_event(event, details)
        if found is None or (self.sequence is not None and self._same(found)):
            return
        match = self.recorder.search.last_match
        if match is not None and match.history_start <= self._replayed_at_index:
            # The copies span a replayed pass, absent from the log: what the search found
            # is the code around the replayed part, not a sequence of whole inferences.
            return
        try:
            self._send('sequence', {}, {'sequence': op_codec.blob_tensor(found.to_wire())})
        except (RemoteError, op_codec.OpCodecError) as error:
            self.logger.warning('could not upload the recorded sequence: %s', error)
            return
        self.sequence = found
        self.state = ReplayState.ARMED
        self.replay_stats.sequences_found += 1
        self.logger.info(
            'rrto: found the inference sequence (%d steps); replaying from the next inference',
            len(found.steps),
        )

    def replay_note(self) -> str:
        """Return why this session is not replaying now ('' when it is, or is armed)."""
        if self.state is not ReplayState.RECORD:
            return ''
        stats = self.replay_stats
        repeats = self.recorder.search.min_repeats
        if stats.aborts:
            return (
                f'recording again after {stats.aborts} aborted replays; the last: '
                f'{stats.last_abort}'
            )
        return (
            f'no sequence found yet: the operators, their sizes or where their tensors come '
            f'from did not repeat {repeats} inferences in a row (shapes that change every '
            'inference never replay)'
        )

    def _same(self, found: replay.ReplaySequence) -> bool:
        return self.sequence is not None and self.sequence.steps == found.steps

    # -- the exchange -------------------------------------------------------------------

    def _run_exec(
        self, call: dict, uploads: dict[int, torch.Tensor], start_id: int
    ) -> tuple[Any, bool]:
        self._answered = False
        umeta = _umeta(uploads)
        if self.state is ReplayState.ARMED and self.sequence is not None:
            first = self.sequence.steps[0]
            if replay.exec_matches(first, call, umeta, start_id):
                self._pass = _Pass(base=start_id)
                self.state = ReplayState.REPLAY
                self._replayed_at_index = self.recorder.search.next_index
                self.replay_stats.passes_started += 1
        if self.state is ReplayState.REPLAY:
            answer = self._replay_exec(call, uploads, umeta, start_id)
            if answer is not None:
                return answer
        return super()._run_exec(call, uploads, start_id)

    def _run_fetch(self, value_id: int) -> torch.Tensor:
        self._answered = False
        if self.state is ReplayState.REPLAY:
            current, sequence = self._pass, self.sequence
            step = sequence.steps[current.cursor]
            if replay.fetch_matches(step, value_id, current.base):
                index = current.cursor
                self._sync(index)
                if self._stopped_at(index):
                    stopped = current.stopped
                    self._leave(f'the server stopped at step {index}')
                    raise RemoteError(f'host read: {stopped.get("error", "diverged")}')
                value = current.fetched.pop(index)
                self._answered = True
                self.replay_stats.steps_answered += 1
                self._advance()
                return value
            self._abort(
                f'host read of value {value_id} where step {current.cursor} was due',
                self._next_id,
            )
        return super()._run_fetch(value_id)

    def _replay_exec(
        self, call: dict, uploads: dict, umeta: list, start_id: int
    ) -> tuple[Any, bool] | None:
        current, sequence = self._pass, self.sequence
        index = current.cursor
        step = sequence.steps[index]
        if not replay.exec_matches(step, call, umeta, current.base):
            self._abort(
                f'{call["op"]} where step {index} ({step.get("op", "fetch")}) was due',
                start_id,
            )
            return None
        current.pending.update(uploads)
        if step['sync'] or (current.stopped is not None and current.stopped['step'] == index):
            self._sync(index)
            if self._stopped_at(index):
                stopped = current.stopped
                self._leave(f'the server stopped at step {index}')
                if 'error' in stopped:
                    raise RemoteError(f'{call["op"]}: {stopped["error"]}')
                self._answered = False
                return stopped['result'], True
            result = current.results.pop(index)
        else:
            result = replay.rebase(step['result'], current.base)
            if uploads:
                self._send_ahead(index)
        self._answered = True
        self.replay_stats.steps_answered += 1
        self._advance()
        return result, step['sync']

    def _stopped_at(self, index: int) -> bool:
        current = self._pass
        return (
            current is not None
            and current.stopped is not None
            and (current.stopped['step'] == index)
        )

    def _advance(self) -> None:
        current = self._pass
        current.cursor += 1
        if current.cursor == len(self.sequence.steps):
            self._join_ahead()
            self._pass = None
            self.state = ReplayState.ARMED
            self.replay_stats.passes_replayed += 1

    def _sync(self, index: int, *, end: bool = False, discard_from: int | None = None) -> None:
        """Have the server run through ``index`` (or the steps before it, with ``end``).

        With ``end``, ``discard_from`` is the robot's next value id: the server drops what
        it made for the steps from ``index`` on, which the robot will run per operator.
        """
        self._join_ahead()
        current, sequence = self._pass, self.sequence
        stopped = current.stopped
        discard = None
        if end:
            if not current.started and index == 0:
                return  # the server has seen nothing of this pass
            # Steps the server made values for: those it ran, and a stopped step's result.
            made = current.server_cursor + (
                1 if stopped is not None and 'result' in stopped else 0
            )
            if made > index:
                discard = [discard_from, current.base + sequence.ids]
            elif stopped is not None or current.server_cursor >= len(sequence.steps):
                return  # the server has left the pass and made nothing past the robot
            until = index - 1
            confirmed = index
        else:
            if current.server_cursor > index or stopped is not None:
                return
            until = sequence.run_until(index)
            confirmed = index + 1
        request = self._replay_request(until, end, discard, confirmed)
        _, reply = self._send('replay', {}, request)
        self._absorb(reply)

    def _send_ahead(self, index: int) -> None:
        """Start the server on the pass now if it can reach the next host read.

        The robot goes on answering steps from the record while the uploads travel and
        the server computes; the host read then waits only for what is left.
        """
        current, sequence = self._pass, self.sequence
        if self._ahead is not None or current.stopped is not None:
            return
        until = sequence.run_until(index)
        host_step = sequence.next_host_step(index + 1)
        if host_step is None or until < host_step:
            return  # more uploads are due first; they go together
        tensors = self._replay_request(until, False, None, index + 1)
        self._count_request(tensors)
        self._ahead = _Ahead(self._transport, tensors, self._handoff)

    def _join_ahead(self) -> None:
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            reply = ahead.result()
            self._count_reply(reply)
            self._absorb(reply)

    def _send(
        self, op: str, fields: dict[str, Any], tensors: dict[str, torch.Tensor]
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        self._join_ahead()  # one request at a time, in order
        return super()._send(op, fields, tensors)

    def _replay_request(
        self, until: int, end: bool, discard: list[int] | None, confirmed: int
    ) -> dict[str, torch.Tensor]:
        """Return a replay request's tensors.

        ``confirmed`` counts the steps the program has made (answered, or the one it waits
        for): the server may run further, but can undo that (``end``).
        """
        current, sequence = self._pass, self.sequence
        ids = list(current.pending)
        blob = {
            'seq': sequence.sequence_id,
            'start': None if current.started else current.base,
            'until': until,
            'confirmed': confirmed,
            'end': end,
            'uploads': ids,
            'free': self._take_freed(),
        }
        if discard is not None:
            blob['discard'] = discard
        tensors = {f'u{i}': current.pending[value_id] for i, value_id in enumerate(ids)}
        tensors['call'] = op_codec.blob_tensor(blob)
        current.pending.clear()
        current.started = True
        self.stats.uploads += len(ids)
        return tensors

    def _absorb(self, reply: dict[str, torch.Tensor]) -> None:
        """Take in a replay reply: sync results, fetched values, where the server is."""
        current = self._pass
        answer = op_codec.tensor_blob(reply['replay'])
        for step_index, encoded in answer['results']:
            current.results[step_index] = encoded
        for name, value in reply.items():
            if name.startswith('f'):
                current.fetched[int(name[1:])] = value
        current.server_cursor = answer['cursor']
        stopped = answer['stopped']
        if stopped is not None:
            current.stopped = stopped
            if stopped['step'] < current.cursor:
                # The robot already answered that step from the record: its handles may
                # not describe the server's values. Fail this inference; start afresh.
                self._leave(f'the server diverged at step {stopped["step"]}, already answered')
                raise RemoteError(
                    f'replay diverged on the edge server at step {stopped["step"]}, after '
                    'the robot had answered it; the inference is lost'
                )

    def _abort(self, why: str, next_id: int) -> None:
        """Leave the replay at the current step; the server catches up to it first.

        ``next_id`` is the id the robot allocates next: from there on, the ids are the
        per-operator calls' and the server forgets what it replayed under them.
        """
        self._join_ahead()
        current = self._pass
        # Even after the server stopped: it may have run steps past the robot's, which
        # it must undo.
        self._sync(current.cursor, end=True, discard_from=next_id)
        self._leave(why)

    def _leave(self, why: str) -> None:
        ahead, self._ahead = self._ahead, None
        if ahead is not None:  # only after an error: the pass is lost either way
            ahead.thread.join()
        self._pass = None
        self.sequence = None
        self.state = ReplayState.RECORD
        self.recorder.clear()
        self.replay_stats.aborts += 1
        self.replay_stats.last_abort = why
        self.replay_stats.abort_reasons = [*self.replay_stats.abort_reasons[-9:], why]
        self.logger.warning(
            'rrto: replay aborted (%s); back to per-operator calls and recording', why
        )
