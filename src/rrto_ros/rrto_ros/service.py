# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Edge-server half of ``per_op`` and ``rrto`` for one robot session, with no sockets.

``OpService.handle(op, fields, tensors)`` answers one request of the robot's
``RemoteSession`` (``rrto_ros.modes`` carries them over the edge_offload protocol):

* ``reset``: forget every value and sequence (a new robot session).
* ``exec``: run one operator (tensor ``call``: a blob with op, args, kwargs, first id,
  upload ids, per-pass input ids, ids to free; tensors ``u0``.. the uploads). Reply:
  tensor ``result`` (the encoded result), field ``dynamic``.
* ``fetch``: field ``value``; reply tensor ``value`` (a host read).
* ``sequence``: store a recorded :class:`~rrto_ros.replay.ReplaySequence` (tensor
  ``sequence``), uploaded once. At most ``max_sequences`` are kept, newest first.
* ``replay``: run a stored sequence's steps for one pass (tensor ``call``: sequence id,
  ``start`` (the pass's first id, on the pass's first request), ``until`` (last step to run),
  ``end`` (leave the pass after it: the robot diverged), uploads and frees). The server runs
  from where it stopped through ``until`` and answers every host read in that range at
  once: the values fetched (tensors ``f<step>``) and the results of ``sync`` steps.
  It checks every result against the record; on a difference or an operator error it stops
  at that step and says so (``stopped``), and the robot finishes the pass per operator.

The robot answers replayed steps from the record ahead of the server, so it may free a
value before the server has run the steps that read it; such a value is released right
after the last step that reads it, so a replayed pass holds no more memory than the same
pass per operator.
"""

from __future__ import annotations

import bisect
import collections
import threading
import time
from typing import Any

import torch

from edge_offload import protocol
from edge_offload.protocol import TORCH_DTYPES
from rrto_ros import op_codec, op_effects, replay
from rrto_ros.executor import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_VALUES,
    ExecutorError,
    OpExecutor,
    tensor_meta,
)

DEFAULT_MAX_SEQUENCES = 4


class _Slot:
    """Where a stored value goes in a compiled step's arguments."""

    __slots__ = ('index',)

    def __init__(self, index: int) -> None:
        self.index = index


def _has_slot(node: Any) -> bool:
    if isinstance(node, _Slot):
        return True
    if isinstance(node, list | tuple):
        return any(_has_slot(item) for item in node)
    return False


def _fill(node: Any, values: list[torch.Tensor]) -> Any:
    if isinstance(node, _Slot):
        return values[node.index]
    if isinstance(node, list):
        return [_fill(item, values) for item in node]
    if isinstance(node, tuple):
        return tuple(_fill(item, values) for item in node)
    return node


class _CompiledStep:
    """A recorded exec step decoded once: a replayed pass only looks up its values.

    Decoding the argument tree, resolving the operator and the meta-device size check
    cost more than many CPU kernels; all three repeat exactly from pass to pass (every
    argument's sizes are checked against the record by the steps that made it).
    """

    def __init__(self, step: dict, device: torch.device) -> None:
        self.step = step
        self.name = step['op']
        self.func = op_codec.resolve_op(step['op'])
        self.refs: list[tuple[bool, int]] = []  # (pass-relative, id) of each slot

        def slot(tag: str, value_id: int) -> dict:
            self.refs.append((tag == 'V', value_id))
            return {'T': len(self.refs) - 1}

        args = replay.map_refs(step['args'], slot)
        kwargs = replay.map_refs(step['kwargs'], slot)
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise replay.SequenceError(f'{self.name}: arguments must be a list and a map')
        self.args = op_codec.decode_tree(args, _Slot, device)
        self.kwargs = {str(k): op_codec.decode_tree(v, _Slot, device) for k, v in kwargs.items()}
        self.arg_slots = [i for i, arg in enumerate(self.args) if _has_slot(arg)]
        self.kwarg_slots = [k for k, arg in self.kwargs.items() if _has_slot(arg)]
        self.expected = replay.result_shape(step['result'])
        self.free = step['free']
        self.first = step['first']
        self.uploads = list(zip(step['uploads'], step['umeta'], strict=True))
        self.inputs = step['inputs']
        # One new tensor, answered from the record: checked by its sizes, not encoded.
        self.single: tuple | None = None
        result = step['result']
        if not step['sync'] and isinstance(result, dict) and set(result) == {'R'}:
            try:
                offset, (shape, stride, dtype) = result['R']
                self.single = (tuple(shape), tuple(stride), TORCH_DTYPES[dtype])
            except (TypeError, ValueError, KeyError):
                raise replay.SequenceError(f'{self.name}: malformed recorded result') from None
            if offset != self.first:
                raise replay.SequenceError(f'{self.name}: result id is not the first id')
        self.need: int | None = None  # bytes of new results, from the first run
        # The slots of the arguments it writes into: fixed for the step (its ``training``
        # flag included), so found once.
        positions = op_effects.write_positions(self.func, self.args, self.kwargs)
        schema_arguments = self.func._schema.arguments
        self.written_slots = [
            slot.index
            for position in positions
            for slot in _slots(
                self.args[position]
                if position < len(self.args) and not schema_arguments[position].kwarg_only
                else self.kwargs.get(schema_arguments[position].name)
            )
        ]
        self.writes = bool(self.written_slots)
        # The step that made each of those values' storage (None: older than the pass).
        self.writers_made: list[int | None] = []

    def call(self, executor: OpExecutor, base: int) -> tuple[list, dict, list[torch.Tensor]]:
        """Return the arguments for a pass starting at ``base`` and the values they hold."""
        values = [
            executor.value(base + value_id if relative else value_id)
            for relative, value_id in self.refs
        ]
        args = list(self.args)
        for index in self.arg_slots:
            args[index] = _fill(args[index], values)
        kwargs = dict(self.kwargs)
        for key in self.kwarg_slots:
            kwargs[key] = _fill(kwargs[key], values)
        return args, kwargs, values

    def used(self, values: list[torch.Tensor], base: int) -> dict[int, int]:
        """Return ``id(tensor)`` -> value id of the values in the arguments."""
        return {
            id(tensor): base + value_id if relative else value_id
            for tensor, (relative, value_id) in zip(values, self.refs, strict=True)
        }

    def answers_single(self, result: Any, values: list[torch.Tensor]) -> bool:
        """Return True if ``result`` is the one new tensor the record says, same sizes."""
        if self.single is None or not isinstance(result, torch.Tensor):
            return False
        shape, stride, dtype = self.single
        return (
            result.shape == shape
            and result.stride() == stride
            and result.dtype == dtype
            and not any(result is value for value in values)
        )


def _slots(node: Any) -> list[_Slot]:
    if isinstance(node, _Slot):
        return [node]
    if isinstance(node, list | tuple):
        return [slot for item in node for slot in _slots(item)]
    return []


def _compile(sequence: replay.ReplaySequence, device: torch.device) -> list:
    """Return a sequence's steps compiled (exec) or as they are (fetch).

    Each compiled step that writes in place learns, for each value it writes into, the
    step that made its storage (a view's is its base's; None: older than the pass).
    """
    compiled = [
        _CompiledStep(step, device) if step['k'] == replay.EXEC else step
        for step in sequence.steps
    ]
    made: dict[int, int] = {}  # pass-relative id -> the step that made its storage
    for index, step in enumerate(compiled):
        if not isinstance(step, _CompiledStep):
            continue
        for offset in step.step['uploads']:
            made[offset] = index
        if step.writes:
            step.writers_made = [
                made.get(step.refs[slot][1]) if step.refs[slot][0] else None
                for slot in step.written_slots
            ]
        maker: int | None = index
        if step.func.is_view and 0 in step.arg_slots:  # a view of its first argument
            relative, value_id = step.refs[0]
            maker = made.get(value_id) if relative else None
        for offset in replay.result_offsets(step.step['result']):
            if maker is None:
                made.pop(offset, None)
            else:
                made[offset] = maker
    return compiled


class _Pass:
    def __init__(self, sequence: replay.ReplaySequence, compiled: list, base: int) -> None:
        self.sequence = sequence
        self.compiled = compiled
        self.base = base
        self.cursor = 0


class _Speculation:
    """The side effects of steps the server ran before the robot got to them.

    The robot answers steps from the record and may leave the recorded path: where a value
    it read back decides (a branch on a host read), or, rarely, by Python state alone.
    Steps at or after ``confirmed`` may never happen in the program. Past a host read the
    robot has not consumed (the *guard* of a step), the recorded frees wait and the values
    made before the guard keep their old contents here, so leaving the pass after that
    read leaves the server as if it had run only the steps before. Before any such read,
    only Python state can make the program leave; a free applied or a write into a value
    made ahead there cannot be undone, so leaving across one fails the inference (the
    launcher and the bridge then run it locally) instead of giving a wrong value.
    """

    def __init__(self) -> None:
        self.confirmed = 0  # steps before this one happened in the program
        self.frees: dict[int, list[int]] = {}  # step -> recorded frees it would apply
        self.undo: list[tuple[int, torch.Tensor, torch.Tensor]] = []  # step, tensor, before
        # (first step, last step, operator): side effects undo cannot take back (a free,
        # a write into a value made ahead); leaving the pass in (first, last] loses them.
        self.hazards: list[tuple[int, int, str]] = []

    @property
    def empty(self) -> bool:
        return not self.frees and not self.undo and not self.hazards


def _bad(message: str) -> protocol.ProtocolError:
    return protocol.ProtocolError(protocol.E_BAD_REQUEST, message)


def _id_list(value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise _bad(f'{what} must be a list of integers')
    return value


class OpService:
    """One robot session's values, sequences and replay cursor."""

    def __init__(
        self,
        device: torch.device | str = 'cpu',
        *,
        max_values: int = DEFAULT_MAX_VALUES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_sequences: int = DEFAULT_MAX_SEQUENCES,
    ) -> None:
        self.executor = OpExecutor(device, max_values=max_values, max_bytes=max_bytes)
        self.max_sequences = max_sequences
        self._sequences: collections.OrderedDict[int, tuple[replay.ReplaySequence, list]] = (
            collections.OrderedDict()
        )
        self._pass: _Pass | None = None
        self._pending_free: dict[int, list[int]] = {}
        self._spec = _Speculation()
        self._lock = threading.Lock()
        self.replayed_steps = 0

    def handle(
        self, op: str, fields: dict[str, Any], tensors: dict[str, torch.Tensor]
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor], float]:
        """Answer one request; return reply fields, reply tensors and compute seconds.

        Raises:
            protocol.ProtocolError: a malformed request (``bad_request``) or an operator
                the executor refused or that failed (``invalid_input``).

        """
        # No autograd on the server: inference mode skips version counters and view
        # tracking, as the robot's own local inference does.
        with self._lock, torch.inference_mode():
            started = time.perf_counter()
            try:
                reply_fields, reply_tensors = self._dispatch(op, fields, tensors)
            except (ExecutorError, op_codec.OpCodecError, replay.SequenceError) as error:
                raise protocol.ProtocolError(protocol.E_INVALID_INPUT, str(error)) from None
            return reply_fields, reply_tensors, time.perf_counter() - started

    def _dispatch(
        self, op: str, fields: dict[str, Any], tensors: dict[str, torch.Tensor]
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        if op in ('exec', 'fetch'):
            # The robot works per operator again: every step it ran past happened.
            self._confirm(None)
        if op == 'exec':
            return self._exec(tensors)
        if op == 'fetch':
            value_id = fields.get('value')
            if not isinstance(value_id, int) or isinstance(value_id, bool):
                raise _bad('fetch needs an integer value id')
            return {}, {'value': self.executor.fetch(value_id)}
        if op == 'replay':
            return self._replay(tensors)
        if op == 'sequence':
            blob = tensors.get('sequence')
            if blob is None:
                raise _bad('sequence needs a sequence tensor')
            sequence = replay.ReplaySequence.from_wire(op_codec.tensor_blob(blob))
            compiled = _compile(sequence, self.executor.device)
            self._sequences[sequence.sequence_id] = (sequence, compiled)
            self._sequences.move_to_end(sequence.sequence_id)
            while len(self._sequences) > self.max_sequences:
                self._sequences.popitem(last=False)
            return {'steps': len(sequence.steps)}, {}
        if op == 'reset':
            self.executor.clear()
            self._sequences.clear()
            self._pass = None
            self._pending_free.clear()
            self._spec = _Speculation()
            return {}, {}
        raise _bad(f'no op {op!r} in per-operator offloading')

    # -- per operator -------------------------------------------------------------------

    def _call_blob(self, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
        blob = tensors.get('call')
        if blob is None:
            raise _bad('missing call tensor')
        call = op_codec.tensor_blob(blob)
        if not isinstance(call, dict):
            raise _bad('call must be a map')
        return call

    def _upload(self, ids: list[int], tensors: dict[str, torch.Tensor]) -> None:
        for index, value_id in enumerate(ids):
            tensor = tensors.get(f'u{index}')
            if tensor is None:
                raise _bad(f'upload u{index} is missing')
            self.executor.upload(value_id, tensor)

    def _free(self, ids: list[int]) -> None:
        current = self._pass
        now = []
        for value_id in ids:
            offset = value_id - current.base if current is not None else -1
            last = current.sequence.last_use.get(offset) if current is not None else None
            if last is None or last < current.cursor:
                now.append(value_id)
            else:
                # The robot answered the steps that read it ahead of us: drop it after the
                # last of them has run here.
                self._pending_free.setdefault(last, []).append(value_id)
        self.executor.release(now)

    def _exec(self, tensors: dict[str, torch.Tensor]) -> tuple[dict, dict]:
        call = self._call_blob(tensors)
        self._free(_id_list(call.get('free', []), 'free'))
        uploads = _id_list(call.get('uploads', []), 'uploads')
        inputs = _id_list(call.get('inputs', []), 'inputs')
        self._upload(uploads, tensors)
        result = None
        try:
            result = self._run(call)
        finally:
            self._drop_inputs(inputs, result)
        return {'dynamic': self.executor.last_dynamic}, {'result': op_codec.blob_tensor(result)}

    def _run(self, call: dict[str, Any]) -> Any:
        first = call.get('first')
        if not isinstance(first, int) or isinstance(first, bool):
            raise _bad('call needs an integer first id')
        result, _ = self.executor.execute(
            str(call.get('op')), call.get('args'), call.get('kwargs'), first
        )
        return result

    def _drop_inputs(self, inputs: list[int], result: Any) -> None:
        # An input the operator wrote in place is kept: the robot fetches it back.
        if not inputs:
            return
        kept = {leaf['T'] for leaf in op_codec.tagged_leaves(result, 'T')}
        self.executor.release([value_id for value_id in inputs if value_id not in kept])

    # -- replay -------------------------------------------------------------------------

    def _replay(self, tensors: dict[str, torch.Tensor]) -> tuple[dict, dict]:
        call = self._call_blob(tensors)
        confirmed = call.get('confirmed')
        if confirmed is not None and (
            not isinstance(confirmed, int) or isinstance(confirmed, bool) or confirmed < 0
        ):
            raise _bad('confirmed must be a step count')
        start = call.get('start')
        if start is not None:
            stored = self._sequences.get(call.get('seq'))
            if stored is None:
                raise _bad(f'no sequence {call.get("seq")!r} in this session')
            if not isinstance(start, int) or isinstance(start, bool):
                raise _bad('start must be an integer id')
            self._confirm(None)  # a new pass: the robot finished or left the last one
            self._spec = _Speculation()
            self._pass = _Pass(*stored, start)
            self._pending_free.clear()
        if call.get('end'):
            # The robot left the pass before step ``confirmed``: undo what the steps
            # from there on did here, then forget the values they made.
            self._rewind(confirmed)
        elif confirmed is not None:
            self._confirm(confirmed)
        current = self._pass
        discard = call.get('discard')
        if discard is not None:
            self._discard(_id_list(discard, 'discard'))
        if current is None:
            if call.get('end'):
                # The robot leaves a pass the server already left: nothing else to do.
                self._free(_id_list(call.get('free', []), 'free'))
                return {}, {
                    'replay': op_codec.blob_tensor({'results': [], 'stopped': None, 'cursor': 0})
                }
            raise _bad('no replay in progress')
        until = call.get('until')
        if not isinstance(until, int) or isinstance(until, bool):
            raise _bad('until must be an integer step')
        self._upload(_id_list(call.get('uploads', []), 'uploads'), tensors)
        self._free(_id_list(call.get('free', []), 'free'))
        results: list[list] = []
        fetched: dict[str, torch.Tensor] = {}
        stopped = None
        steps = current.compiled
        until = min(until, len(steps) - 1)
        while current.cursor <= until:
            index = current.cursor
            step = steps[index]
            try:
                outcome = self._replay_step(step, current, index)
            except (ExecutorError, op_codec.OpCodecError) as error:
                stopped = {'step': index, 'error': str(error)}
                break
            current.cursor += 1
            self.replayed_steps += 1
            self.executor.release(self._pending_free.pop(index, ()))
            if outcome is None:
                continue
            if isinstance(outcome, torch.Tensor):
                fetched[f'f{index}'] = outcome
                continue
            if replay.result_shape(replay.relativize(outcome, current.base)) != step.expected:
                stopped = {'step': index, 'result': outcome}
                break
            if step.step['sync']:
                results.append([index, outcome])
        cursor = current.cursor
        if stopped is not None or call.get('end') or cursor >= len(steps):
            self._pass = None
            for ids in self._pending_free.values():
                self.executor.release(ids)
            self._pending_free.clear()
        reply = {'results': results, 'stopped': stopped, 'cursor': cursor}
        fetched['replay'] = op_codec.blob_tensor(reply)
        return {}, fetched

    def _confirm(self, confirmed: int | None) -> None:
        """Apply the frees of the steps before ``confirmed`` (None: all): they happened."""
        spec = self._spec
        if confirmed is None:
            confirmed = 1 << 62
        if confirmed <= spec.confirmed:
            return
        spec.confirmed = confirmed
        if spec.empty:
            return
        for index in [i for i in spec.frees if i < confirmed]:
            self.executor.release(spec.frees.pop(index))
        spec.undo = [entry for entry in spec.undo if entry[0] >= confirmed]
        spec.hazards = [entry for entry in spec.hazards if entry[1] >= confirmed]

    def _rewind(self, confirmed: int | None) -> None:
        """Undo the steps from ``confirmed`` on: their writes, their recorded frees.

        Raises:
            ExecutorError: one of them had an effect undo cannot take back.

        """
        spec = self._spec
        if confirmed is None:  # an older robot: it cannot say where it left
            confirmed = spec.confirmed
        for index, tensor, before in reversed(spec.undo):
            if index >= confirmed:
                tensor.copy_(before)
        for index in [i for i in spec.frees if i < confirmed]:
            self.executor.release(spec.frees.pop(index))
        lost = [entry for entry in spec.hazards if entry[0] < confirmed <= entry[1]]
        self._spec = _Speculation()
        self._spec.confirmed = 1 << 62  # nothing runs ahead until the next pass
        if lost:
            _, step, name = lost[0]
            raise ExecutorError(
                f'replay: the program left the recorded path at step {confirmed} by Python '
                f'state alone, after the server had run step {step} ({name}) ahead of it, '
                'which freed or wrote into a value; this inference cannot go on here'
            )

    def _guard(self, current: _Pass, index: int) -> int | None:
        """Return the last host read or sync step before ``index`` the robot has not had."""
        host = current.sequence.host_steps
        position = bisect.bisect_left(host, index) - 1
        if position >= 0 and host[position] >= self._spec.confirmed:
            return host[position]
        return None

    def _discard(self, bounds: list[int]) -> None:
        """Release the ids in ``[start, stop)``: what the server replayed past a divergence.

        The robot runs those steps per operator under the same ids.
        """
        if len(bounds) != 2:
            raise _bad('discard is [first id, end id]')
        start, stop = bounds
        if stop - start <= self.executor.num_values:
            ids = range(start, stop)
        else:  # a wide range: walk the table instead
            ids = [value_id for value_id in self.executor.value_ids() if start <= value_id < stop]
        self.executor.release(ids)
        for index, pending in list(self._pending_free.items()):
            self._pending_free[index] = [v for v in pending if not start <= v < stop]

    def _replay_step(self, compiled: _CompiledStep | dict, current: _Pass, index: int) -> Any:
        """Run one step; return the fetched value (fetch) or the encoded result (exec).

        An exec step whose one new tensor has the recorded sizes returns None: checked,
        stored, nothing to encode.
        """
        executor, base = self.executor, current.base
        if isinstance(compiled, dict):
            value = replay.rebase(compiled['value'], base)
            return executor.fetch(value.get('T'))
        spec = self._spec
        ahead = index >= spec.confirmed
        guard = (
            self._guard(current, index) if ahead and (compiled.free or compiled.writes) else None
        )
        if compiled.free:
            # The robot let go of these before this call when it was recorded, and a
            # replayed pass makes the same calls: free them now, so the allocator reuses
            # their memory while it is in cache (the robot's own frees come a pass late).
            # Past a host read the robot has not had, wait: it may leave the path there.
            ids = [base + offset for offset in compiled.free]
            if guard is not None:
                spec.frees.setdefault(index, []).extend(ids)
            else:
                executor.release(ids)
                if ahead:
                    spec.hazards.append((spec.confirmed, index, compiled.name))
        for upload, (offset, meta) in enumerate(compiled.uploads):
            held = executor.value(base + offset)
            if tensor_meta(held) != meta:
                raise ExecutorError(f'upload {upload} of this step does not match the record')
        args, kwargs, values = compiled.call(executor, base)
        if compiled.need is None:
            compiled.need, _ = executor.output_size(compiled.func, args, kwargs)
        inputs = [base + offset for offset in compiled.inputs]
        if ahead and compiled.writes:
            for slot, maker in zip(compiled.written_slots, compiled.writers_made, strict=True):
                if (
                    maker is None
                    or maker < spec.confirmed
                    or (guard is not None and maker <= guard)
                ):
                    # Made before the robot's confirmed step, or before a host read it has
                    # not had: the program may still need its old contents.
                    spec.undo.append((index, values[slot], values[slot].clone()))
                elif maker < index:
                    spec.hazards.append((maker, index, compiled.name))
        result = executor.run_op(compiled.func, compiled.name, args, kwargs, compiled.need)
        if compiled.answers_single(result, values):
            executor.store(base + compiled.first, result)
            executor.release(inputs)
            return None
        encoded = None
        try:
            encoded, _ = executor.store_result(
                compiled.name, result, base + compiled.first, compiled.used(values, base)
            )
        finally:
            self._drop_inputs(inputs, encoded)
        return encoded


class LoopbackTransport:
    """A ``RemoteSession`` transport that calls an ``OpService`` in this process.

    What the edge server does with a decoded request, without sockets (tests, benchmarks
    of the algorithms). Received tensors are cloned: the server owns what it got, as after
    a network copy. Refusals come back as ``RemoteError``, as the bridge modes raise them.
    """

    def __init__(self, service: OpService | None = None) -> None:
        self.service = service or OpService()

    def __call__(
        self, op: str, fields: dict[str, Any], tensors: dict[str, torch.Tensor]
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """Answer one request."""
        from rrto_ros.remote import RemoteError  # noqa: PLC0415 - robot side, tests only

        owned = {name: tensor.clone() for name, tensor in tensors.items()}
        try:
            reply_fields, reply_tensors, _ = self.service.handle(op, dict(fields), owned)
        except protocol.ProtocolError as error:
            raise RemoteError(f'{error.code}: {error.message}') from None
        # The robot owns what it got, as after a network copy (and not as inference
        # tensors of the server's: the program may use them with autograd on).
        with torch.inference_mode(False):
            return reply_fields, {name: t.clone() for name, t in reply_tensors.items()}
