# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Robot half of per-operator offloading: tensors that live on the edge server.

The PyTorch dispatcher plays the CUDA runtime's part in RRTO. While a
``RemoteSession`` is active (``with session.active():``, or ``session.forward(module)``),
a ``TorchDispatchMode`` sends every aten operator to the edge server as one call
(``per_op``, the Cricket-like baseline) and returns ``RemoteTensor`` handles: wrapper
tensors with the shape, strides and dtype of the server's result and no storage. Ops on
handles go to the server whether or not the mode is active, so a model's outputs can be
used after the forward pass.

Host tensors an operator reads are uploaded: the parameters and buffers of the modules
registered with ``register_module`` once (cached by identity and version counter),
every other host tensor each time it is read (the pass's inputs). Only host reads bring
data back: ``.item()``/``bool()``/``int()`` (aten ``_local_scalar_dense``), ``.cpu()``,
``.numpy()``, ``.tolist()``, ``repr``/``print``, ``numpy.asarray``, and operators whose
results are not tensors (``equal``, ``is_nonzero``). ``SessionStats`` counts calls and
bytes.

The session talks through a ``Transport``: one request, one reply (``rrto_ros.modes``
carries it over the edge_offload protocol; tests may call an ``OpExecutor`` directly).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from edge_offload.protocol import TORCH_DTYPES, tensor_nbytes
from rrto_ros import op_codec, op_effects

# Host reads: the value goes back to the robot.
_SCALAR_READ = torch.ops.aten._local_scalar_dense.default


class Transport(Protocol):
    """Send one request, return the reply: ``(op, fields, tensors) -> (fields, tensors)``."""

    def __call__(
        self, op: str, fields: dict[str, Any], tensors: dict[str, torch.Tensor]
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """Send ``op`` and wait for its reply."""


class RemoteError(RuntimeError):
    """The edge server refused or failed an operator; the message is the server's."""


@dataclass
class SessionStats:
    """What per-operator offloading cost so far (counters only grow)."""

    calls: int = 0  # round trips
    ops: int = 0  # operators executed remotely
    host_reads: int = 0
    uploads: int = 0  # host tensors sent
    bytes_up: int = 0  # tensor payload bytes sent
    bytes_down: int = 0  # tensor payload bytes received

    def copy(self) -> SessionStats:
        """Return a snapshot."""
        return SessionStats(**vars(self))

    def minus(self, earlier: SessionStats) -> SessionStats:
        """Return the counts since ``earlier``."""
        return SessionStats(**{k: v - getattr(earlier, k) for k, v in vars(self).items()})


class RemoteTensor(torch.Tensor):
    """A tensor held by the edge server: metadata here, data there."""

    _session: RemoteSession
    _value_id: int
    #: The registered host parameter or buffer this handle is a view of (None: none):
    #: a write through the handle changes that host tensor's value on the server.
    _host_root: torch.Tensor | None

    @staticmethod
    def __new__(
        cls,
        session: RemoteSession,
        value_id: int,
        shape: list[int],
        stride: list[int],
        dtype: torch.dtype,
    ) -> RemoteTensor:
        # Never an inference tensor: autograd's view tracking sets the version counter of
        # view results, which inference tensors refuse (models run under inference_mode).
        with torch.inference_mode(False):
            tensor = torch.Tensor._make_wrapper_subclass(
                cls, shape, strides=stride, dtype=dtype, device='cpu', requires_grad=False
            )
        tensor._session = session
        tensor._value_id = value_id
        tensor._host_root = None
        weakref.finalize(tensor, session._release, value_id)
        return tensor

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(
        cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        session = next(a._session for a in pytree.tree_leaves(args) if isinstance(a, cls))
        return session.execute(func, args, kwargs or {})

    # Host reads. Tensor's own methods would read the (absent) local storage.
    def cpu(self, memory_format: torch.memory_format = torch.preserve_format) -> torch.Tensor:
        """Fetch the value from the edge server (a host read)."""
        return self._session.fetch(self)

    def numpy(self, *, force: bool = False) -> Any:
        """Fetch the value and return it as a NumPy array (a host read)."""
        return self._session.fetch(self).numpy()

    def tolist(self) -> Any:
        """Fetch the value and return it as (nested) Python numbers (a host read)."""
        return self._session.fetch(self).tolist()

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        # What local inference prints (a host read): a program that prints a tensor in
        # ``forward`` must show the same text offloaded.
        return repr(self._session.fetch(self))

    def __reduce_ex__(self, protocol: Any) -> Any:
        return self._session.fetch(self).__reduce_ex__(protocol)


def _version(tensor: torch.Tensor) -> int | None:
    """Return the tensor's version counter (None: an inference tensor has none)."""
    try:
        return tensor._version
    except RuntimeError:
        return None


class _RemoteMode(TorchDispatchMode):
    """Sends the aten operators run on host tensors during a forward pass to the server."""

    def __init__(self, session: RemoteSession) -> None:
        super().__init__()
        self.session = session

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        return self.session.execute(func, args, kwargs or {})


class RemoteSession:
    """One robot's per-operator offloading session with one edge server."""

    def __init__(self, transport: Transport, *, logger: logging.Logger | None = None) -> None:
        self._transport = transport
        # Inside the bridge this is the mode context's logger, which reaches /rosout.
        self.logger = logger or logging.getLogger('rrto_ros')
        self._lock = threading.RLock()
        self._next_id = 1
        self._freed: list[int] = []
        self._last_freed: list[int] = []  # the frees the latest exec call carried
        # id(host tensor) -> (weakref, version, value id): registered parameters/buffers.
        self._cacheable: dict[int, weakref.ref] = {}
        self._registered: dict[int, weakref.ref] = {}  # id(module) -> module
        self._cached: dict[int, tuple[weakref.ref, int, int]] = {}
        # Registered host tensors an operator wrote in place: the server's value is the
        # current one until the pass ends and it is copied back (id -> tensor).
        self._dirty: dict[int, torch.Tensor] = {}
        # Host tensors this pass wrote into, with their values before: what ``rollback``
        # restores, so a pass that failed half way can run again locally.
        self._undo: list[tuple[torch.Tensor, torch.Tensor]] = []
        # id(host input) -> (weakref, version, value id): inputs of this pass the server
        # holds until it ends; a later read of the same, unchanged tensor names it.
        self._pass_inputs: dict[int, tuple[weakref.ref, int, int]] = {}
        self._depth = 0  # nesting of ``active`` blocks
        self.stats = SessionStats()
        #: Called with (event, details) for every call: the recorder's hook.
        self.observer: Callable[[str, dict[str, Any]], None] | None = None

    # -- set-up -------------------------------------------------------------------------

    def register_module(self, module: nn.Module) -> None:
        """Let ``module``'s parameters and buffers be uploaded once and cached.

        A module is walked once per session (callers register before every inference);
        a parameter object swapped into it later goes up with every pass, as an input.
        """
        known = self._registered.get(id(module))
        if known is not None and known() is module:
            return
        self._registered[id(module)] = weakref.ref(module)
        for tensor in [*module.parameters(), *module.buffers()]:
            self._cacheable[id(tensor)] = weakref.ref(tensor)

    def reset_remote(self) -> None:
        """Have the server forget this robot's values and sequences (a fresh session)."""
        with self._lock:
            self._send('reset', {}, {})

    @contextlib.contextmanager
    def active(self) -> Iterator[RemoteSession]:
        """Send every aten operator to the edge server inside the block.

        When the outermost block ends without an error, the module state the pass changed
        comes back to the host (``sync_host_state``), so the program's modules hold what
        local inference would have left in them.
        """
        self._depth += 1
        try:
            with _RemoteMode(self):
                yield self
            if self._depth == 1:
                self.sync_host_state()
        finally:
            self._depth -= 1
            if self._depth == 0 and self._pass_inputs:
                # The pass is over: the server's copies of its inputs go with the next call.
                self._freed.extend(entry[2] for entry in self._pass_inputs.values())
                self._pass_inputs.clear()

    def forward(self, module: nn.Module, *args: Any, **kwargs: Any) -> Any:
        """Run ``module(*args, **kwargs)`` with its operators on the edge server."""
        self.register_module(module)
        with self.active():
            return module(*args, **kwargs)

    # -- module state -------------------------------------------------------------------

    def sync_host_state(self) -> None:
        """Bring the module state the server changed back into the host's modules.

        Registered parameters and buffers written in place get the server's value, and
        registered modules whose parameters, buffers or tensor attributes now hold
        handles (``self.state = f(self.state)``) get host tensors in their place: state
        that lives on in the program must survive the server. Everything is fetched
        before anything is written, so a failure leaves the host as it was.
        """
        with self._lock, _disable_current_modes():
            written = [(tensor, self._fetch_host_copy(tensor)) for tensor in self._dirty.values()]
            replaced = [
                (table, name, value, self.fetch(value))
                for table, name, value in self._handles_in_modules()
            ]
            with torch.no_grad():
                for tensor, value in written:
                    self._undo.append((tensor, tensor.detach().clone()))
                    tensor.copy_(value.reshape(tensor.shape))
                    cached = self._cached.get(id(tensor))
                    if cached is not None and self._is_cacheable(tensor):
                        self._cached[id(tensor)] = (cached[0], tensor._version, cached[2])
            self._dirty.clear()
            for table, name, old, value in replaced:
                if isinstance(old, nn.Parameter):
                    value = nn.Parameter(value, requires_grad=old.requires_grad)
                table[name] = value

    def _handles_in_modules(self) -> list[tuple[dict, str, RemoteTensor]]:
        """Return (table, name, handle) for each handle held by a registered module."""
        remote = RemoteTensor
        modules = [
            sub
            for owner in list(self._registered.values())
            if owner()
            for sub in owner().modules()
        ]
        # Every pass, over every submodule: one comprehension, no calls per attribute.
        return [
            (table, name, value)
            for sub in modules
            for table in (sub._parameters, sub._buffers, sub.__dict__)
            for name, value in table.items()
            if type(value) is remote and value._session is self
        ]

    def rollback(self) -> None:
        """Undo this pass's writes into host tensors (after a failed pass)."""
        with _disable_current_modes(), torch.no_grad():
            for tensor, before in reversed(self._undo):
                tensor.copy_(before)
        self._undo.clear()
        self._dirty.clear()

    def commit(self) -> None:
        """Forget the undo log: the pass ended and its writes stand."""
        self._undo.clear()

    # -- host reads ---------------------------------------------------------------------

    def fetch(self, tensor: RemoteTensor) -> torch.Tensor:
        """Return the server's value of ``tensor`` as a host tensor."""
        # Called from user code too (``.cpu()``), where the mode would catch our own ops.
        with self._lock, _disable_current_modes():
            return self._fetch_value(tensor._value_id).reshape(tensor.shape)

    def _fetch_value(self, value_id: int, *, param: bool = False) -> torch.Tensor:
        """Return value ``value_id`` (``param``: a cached parameter or buffer)."""
        value = self._run_fetch(value_id)
        self.stats.host_reads += 1
        if self.observer is not None:
            details = {'value': value_id, 'tensor': value, 'next_id': self._next_id}
            self.observer('fetch', {**details, 'param': param})
        return value

    # -- operators ----------------------------------------------------------------------

    def execute(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """Run aten operator ``func`` on the edge server; return handles for its results."""
        if func.is_view:
            view = self._host_view(func, args, kwargs)
            if view is not None:
                return view
        if func is _SCALAR_READ:
            (tensor,) = args
            if isinstance(tensor, RemoteTensor):
                return self.fetch(tensor).item()
            if id(tensor) in self._dirty:  # a buffer the pass changed: the server has it
                with self._lock, _disable_current_modes():
                    return self._fetch_host_copy(tensor).item()
            return func(*args, **kwargs)  # a host tensor: read it here
        if op_effects.draws_random(func, args, kwargs):
            return self._run_random(func, args, kwargs)
        with self._lock:
            uploads: dict[int, torch.Tensor] = {}
            by_id: dict[int, torch.Tensor] = {}
            reads: list[tuple[str, int]] = []
            inputs: list[int] = []
            staged: dict[int, tuple[weakref.ref, int, int]] = {}

            def ref(tensor: torch.Tensor) -> int:
                role, value_id = self._ref(tensor, uploads, staged)
                by_id[value_id] = tensor
                reads.append((role, value_id))
                if role == 'input' and value_id not in inputs and not self._held(tensor):
                    inputs.append(value_id)
                return value_id

            start_id = self._next_id
            name = op_codec.op_name(func)
            try:
                encoded_args = op_codec.encode_tree(list(args), ref)
                encoded_kwargs = {k: op_codec.encode_tree(v, ref) for k, v in kwargs.items()}
            except op_codec.OpCodecError as error:
                self._next_id = start_id  # nothing was sent: the ids are free again
                raise RemoteError(f'{name}: {error}') from None
            call = {
                'op': name,
                'args': encoded_args,
                'kwargs': encoded_kwargs,
                'first': self._next_id,
                'uploads': list(uploads),
                # Per-pass host tensors: the server drops its copy after this operator.
                'inputs': inputs,
            }
            self._last_freed = []
            encoded, dynamic = self._run_exec(call, uploads, start_id)
            # Only now is the server known to hold the parameters this call uploaded.
            self._cached.update(staged)
            self.stats.uploads += len(uploads)
            self.stats.ops += 1
            created: list[int] = []
            result = self._decode_result(encoded, by_id, created)
            self._next_id += len(created)
            self._track_aliases(func, args, kwargs, result)
            if self.observer is not None:
                self.observer(
                    'op',
                    {
                        'op': name,
                        'call': call,
                        'reads': reads,
                        'uploads': uploads,
                        'result': encoded,
                        'created': created,
                        'start_id': start_id,
                        'next_id': self._next_id,
                        'dynamic': dynamic,
                        'freed': self._last_freed,
                    },
                )
            if inputs and op_effects.writes_anything(func):
                self._write_back_inputs(encoded, by_id, inputs)
            return result

    def _track_aliases(self, func: Any, args: tuple, kwargs: dict, result: Any) -> None:
        """Follow writes into registered host tensors, directly or through views.

        A view of a parameter or buffer is a handle on the server's copy; an operator
        that writes into either (the schema says which arguments it writes) leaves the
        server's value newer than the host's until the pass ends.
        """
        if func.is_view:
            if isinstance(result, RemoteTensor) and args:
                result._host_root = self._root_of(args[0])
            return
        if not op_effects.writes_anything(func):
            return
        for tensor in op_effects.written_tensors(func, args, kwargs):
            root = self._root_of(tensor)
            if root is not None:
                self._dirty[id(root)] = root

    def _root_of(self, tensor: Any) -> torch.Tensor | None:
        """Return the host tensor the server holds that ``tensor`` is or views, else None.

        That is a registered parameter or buffer, or an input of this pass.
        """
        if isinstance(tensor, RemoteTensor):
            return tensor._host_root
        if self._is_cacheable(tensor) and id(tensor) in self._cached:
            return tensor
        if isinstance(tensor, torch.Tensor) and self._held(tensor):
            return tensor
        return None

    def _fetch_host_copy(self, tensor: torch.Tensor) -> torch.Tensor:
        """Return the server's value of a host tensor it holds (a parameter or an input)."""
        cached = self._cached.get(id(tensor))
        if cached is not None and self._is_cacheable(tensor):
            return self._fetch_value(cached[2], param=True).reshape(tensor.shape)
        return self._fetch_value(self._pass_inputs[id(tensor)][2]).reshape(tensor.shape)

    def _run_random(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """Run an operator that draws random numbers here, on the robot's generator.

        The server's generator is not the robot's, so its numbers would differ from local
        inference. The operands are read back, the operator runs here, and what it wrote
        into a server tensor goes back up into it.
        """
        schema = func._schema
        written = op_effects.written_tensors(func, args, kwargs)
        with self._lock, _disable_current_modes():
            for target in written:
                if self._on_host(target):
                    self._undo.append((target, target.detach().clone()))
            fill = op_effects.is_random_fill(func) and args and not self._on_host(args[0])
            host_args, host_kwargs = pytree.tree_map_only(
                torch.Tensor, self._host_value, (args[1:] if fill else args, kwargs)
            )
            if fill:  # it overwrites all of its tensor: only the sizes are needed here
                target = args[0]
                blank = torch.empty_strided(target.shape, target.stride(), dtype=target.dtype)
                host_args = (blank, *host_args)
            result = func(*host_args, **host_kwargs)
        originals = pytree.tree_leaves((args, kwargs))
        copies = pytree.tree_leaves((host_args, host_kwargs))
        for original, copy in zip(originals, copies, strict=True):
            if copy is not original and any(original is target for target in written):
                self.execute(torch.ops.aten.copy_.default, (original, copy), {})
        if written and schema.returns and schema.returns[0].alias_info is not None:
            return written[0]
        return result

    def _on_host(self, tensor: Any) -> bool:
        """Return True if ``tensor``'s current value is the host's own."""
        return (
            isinstance(tensor, torch.Tensor)
            and not isinstance(tensor, RemoteTensor)
            and id(tensor) not in self._dirty
        )

    def _host_value(self, tensor: torch.Tensor) -> torch.Tensor:
        if isinstance(tensor, RemoteTensor):
            return self._fetch_value(tensor._value_id).reshape(tensor.shape)
        if id(tensor) in self._dirty:
            return self._fetch_host_copy(tensor)
        return tensor

    # -- the exchange with the server (RRTO replaces these while it replays) -------------

    def _run_exec(
        self, call: dict, uploads: dict[int, torch.Tensor], start_id: int
    ) -> tuple[Any, bool]:
        """Run one operator call on the server.

        Returns its encoded result and whether its result sizes depend on data (the
        server could not derive them from argument sizes alone).
        """
        tensors = {f'u{i}': t for i, t in enumerate(uploads.values())}
        self._last_freed = self._take_freed()
        tensors['call'] = op_codec.blob_tensor({**call, 'free': self._last_freed})
        fields, reply = self._send('exec', {}, tensors)
        result_blob = reply.get('result')
        if result_blob is None:
            raise RemoteError(f'{call["op"]}: the edge server sent no result')
        return op_codec.tensor_blob(result_blob), bool(fields.get('dynamic', True))

    def _run_fetch(self, value_id: int) -> torch.Tensor:
        """Return the server's value ``value_id``."""
        _, tensors = self._send('fetch', {'value': value_id}, {})
        value = tensors.get('value')
        if value is None:
            raise RemoteError('the edge server sent no value')
        return value

    def _held(self, tensor: torch.Tensor) -> bool:
        """Return True if the server holds ``tensor`` for the rest of the pass."""
        held = self._pass_inputs.get(id(tensor))
        return held is not None and held[0]() is tensor

    def _write_back_inputs(self, encoded: Any, by_id: dict, inputs: list[int]) -> None:
        """Copy an in-place result on an uploaded host tensor back into that tensor.

        Only for inputs the server does not hold for the pass (inference tensors, calls
        outside a pass): a held one is written back when the pass ends.
        """
        written = [
            leaf['T'] for leaf in op_codec.tagged_leaves(encoded, 'T') if leaf['T'] in inputs
        ]
        for value_id in dict.fromkeys(written):
            # The server kept its copy for this (see service.py): fetch it, copy it in.
            value = self._fetch_value(value_id)
            tensor = by_id[value_id]
            with _disable_current_modes(), torch.no_grad():
                self._undo.append((tensor, tensor.detach().clone()))
                tensor.copy_(value.reshape(tensor.shape))
            self._freed.append(value_id)

    # -- internals ----------------------------------------------------------------------

    def _host_view(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """Return ``func``'s result if it is a view of host inputs, else None.

        A view of an input (``Tensor.numpy()`` detaches, models reshape their input) stays
        a host tensor and is uploaded when something computes on it; views of parameters
        are taken on the server, where the parameter is cached. Operators that only may
        alias (``to``, ``reshape``, ``contiguous``) copy when they convert: such a copy is
        a computation and goes to the server, so an image is sent as uint8, not float.
        """
        leaves = pytree.tree_leaves((args, kwargs))
        if any(
            isinstance(a, RemoteTensor)
            or self._is_cacheable(a)
            or (isinstance(a, torch.Tensor) and self._held(a))
            for a in leaves
        ):
            return None
        result = func(*args, **kwargs)
        storages = {a.untyped_storage().data_ptr() for a in leaves if isinstance(a, torch.Tensor)}
        if all(
            t.untyped_storage().data_ptr() in storages
            for t in pytree.tree_leaves(result)
            if isinstance(t, torch.Tensor)
        ):
            return result
        return None

    def _is_cacheable(self, value: Any) -> bool:
        if not isinstance(value, torch.Tensor):
            return False
        owner = self._cacheable.get(id(value))
        return owner is not None and owner() is value

    def _ref(
        self,
        tensor: torch.Tensor,
        uploads: dict[int, torch.Tensor],
        staged: dict[int, tuple[weakref.ref, int, int]],
    ) -> tuple[str, int]:
        """Return (role, value id) for an argument, queueing its upload if needed.

        A parameter's cache entry goes to ``staged``: it counts once the call succeeded.
        """
        if isinstance(tensor, RemoteTensor):
            if tensor._session is not self:
                raise RemoteError('a RemoteTensor of another session was passed')
            return 'value', tensor._value_id
        if tensor.device.type != 'cpu':
            raise RemoteError(f'cannot offload a tensor on {tensor.device}')
        key = id(tensor)
        owner = self._cacheable.get(key)
        if owner is not None and owner() is tensor:
            cached = staged.get(key) or self._cached.get(key)
            if cached is not None and cached[0]() is tensor:
                # Written in place on the server this pass: the server has the value.
                if cached[1] == tensor._version or key in self._dirty or key in staged:
                    return 'param', cached[2]
            value_id = self._new_upload(tensor, uploads)
            staged[key] = (weakref.ref(tensor), tensor._version, value_id)
            return 'param_upload', value_id
        held = self._pass_inputs.get(key)
        if (
            held is not None
            and held[0]() is tensor
            and (key in self._dirty or held[1] == _version(tensor))
        ):
            if held[2] in uploads:
                return 'input', held[2]  # read twice by this call
            return 'value', held[2]
        return 'input', self._new_upload(tensor, uploads, hold=True)

    def _new_upload(
        self, tensor: torch.Tensor, uploads: dict[int, torch.Tensor], *, hold: bool = False
    ) -> int:
        """Queue ``tensor``'s upload; return its id.

        With ``hold`` (a per-pass input inside a pass), the server keeps it until the pass
        ends and a later read of the same, unchanged tensor names it instead of sending it
        again.
        """
        value_id = self._next_id
        self._next_id += 1
        # The wire carries tensors contiguous: upload that form, so what the robot records
        # of an upload (its strides) is what the server holds.
        with _disable_current_modes():
            uploads[value_id] = tensor.detach().contiguous()
        if hold and self._depth > 0:
            version = _version(tensor)
            if version is not None:
                self._pass_inputs[id(tensor)] = (weakref.ref(tensor), version, value_id)
        return value_id

    def _decode_result(self, value: Any, by_id: dict[int, torch.Tensor], created: list) -> Any:
        if value is None or isinstance(value, bool | int | float):
            if not isinstance(value, type(None)):
                self.stats.host_reads += 1
            return value
        if isinstance(value, list):
            return [self._decode_result(v, by_id, created) for v in value]
        if isinstance(value, dict) and len(value) == 1:
            ((tag, item),) = value.items()
            if tag == 'tu':
                return tuple(self._decode_result(v, by_id, created) for v in item)
            if tag == 'c':
                self.stats.host_reads += 1
                try:
                    return op_codec.decode_complex(item)
                except op_codec.OpCodecError as error:
                    raise RemoteError(f'malformed result from the edge server: {error}') from None
            if tag == 'T' and item in by_id:
                return by_id[item]
            if tag == 'R':
                value_id, (shape, stride, dtype) = item
                if dtype not in TORCH_DTYPES:
                    raise RemoteError(
                        f'the edge server answered a tensor of dtype {str(dtype)[:40]!r}, '
                        'which the wire protocol cannot carry'
                    )
                created.append(value_id)
                return RemoteTensor(self, value_id, shape, stride, TORCH_DTYPES[dtype])
        raise RemoteError(f'malformed result from the edge server: {str(value)[:200]}')

    def _send(
        self, op: str, fields: dict[str, Any], tensors: dict[str, torch.Tensor]
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        self._count_request(tensors)
        reply_fields, reply_tensors = self._transport(op, fields, tensors)
        self._count_reply(reply_tensors)
        return reply_fields, reply_tensors

    def _count_request(self, tensors: dict[str, torch.Tensor]) -> None:
        self.stats.calls += 1
        self.stats.bytes_up += sum(map(tensor_nbytes, tensors.values()))

    def _count_reply(self, tensors: dict[str, torch.Tensor]) -> None:
        self.stats.bytes_down += sum(map(tensor_nbytes, tensors.values()))

    def _release(self, value_id: int) -> None:
        # Runs in the garbage collector: no lock, no I/O; the ids ride the next call.
        self._freed.append(value_id)

    def _take_freed(self) -> list[int]:
        freed, self._freed = self._freed, []
        return freed
