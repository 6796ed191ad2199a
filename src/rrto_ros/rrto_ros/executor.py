# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Edge-server half of per-operator offloading: a table of values and one aten op at a time.

One ``OpExecutor`` per robot session. The robot names every value by an integer it
chose; ``upload`` stores a host tensor under an id, ``execute`` runs one operator on
stored values and stores its tensor results under consecutive ids from ``first_id``
(results that are one of the arguments, as in-place operators return, keep that
argument's id), ``fetch`` returns a value, ``release`` forgets ids. The table is bounded
in entries and in bytes (storages counted once, views are free); an operator whose
results would not fit is refused before it runs when its output sizes can be computed
on the meta device, and its results are dropped otherwise.

No sockets here: ``rrto_ros.modes`` carries the calls over the edge_offload protocol.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree

from edge_offload.protocol import TORCH_DTYPES, WIRE_DTYPE_NAMES
from rrto_ros import op_codec

DEFAULT_MAX_VALUES = 500_000
DEFAULT_MAX_BYTES = 4 * 1024**3
_META_CACHE_SIZE = 8192


class ExecutorError(RuntimeError):
    """A request the executor refuses or an operator that failed; the message says which."""


@dataclass
class _Storage:
    nbytes: int
    refs: int


def tensor_meta(tensor: torch.Tensor) -> list:
    """Return [shape, stride, dtype name] of ``tensor`` (what the robot mirrors)."""
    return [
        list(tensor.shape),
        list(tensor.stride()),
        str(tensor.dtype).removeprefix('torch.'),
    ]


class OpExecutor:
    """Values of one session and the operators run on them."""

    def __init__(
        self,
        device: torch.device | str = 'cpu',
        *,
        max_values: int = DEFAULT_MAX_VALUES,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.device = torch.device(device)
        self.max_values = max_values
        self.max_bytes = max_bytes
        self._values: dict[int, torch.Tensor] = {}
        self._storages: dict[int, _Storage] = {}
        self._bytes = 0
        self.ops_run = 0
        #: Whether the last operator's result sizes could not be derived from sizes alone.
        self.last_dynamic = True
        self._meta_cache: dict[tuple, tuple[int, list | None]] = {}
        # (operator, meta sizes) -> the sizes its CPU kernel gave last, where they differ.
        self._real_sizes: dict[tuple, Any] = {}

    # -- table --------------------------------------------------------------------------

    @property
    def num_values(self) -> int:
        """Return how many values the table holds."""
        return len(self._values)

    @property
    def bytes_held(self) -> int:
        """Return the bytes of the distinct storages the table holds."""
        return self._bytes

    def value_ids(self) -> list[int]:
        """Return the ids of the stored values."""
        return list(self._values)

    def __contains__(self, value_id: object) -> bool:
        return value_id in self._values

    def value(self, value_id: int) -> torch.Tensor:
        """Return the stored value ``value_id``."""
        try:
            return self._values[value_id]
        except KeyError:
            raise ExecutorError(f'no value {value_id} in this session') from None

    def _store(self, value_id: int, tensor: torch.Tensor) -> None:
        if isinstance(value_id, bool) or not isinstance(value_id, int) or value_id < 0:
            raise ExecutorError(f'value id {value_id!r} is not a non-negative integer')
        if value_id in self._values:
            raise ExecutorError(f'value id {value_id} is already in use')
        if len(self._values) >= self.max_values:
            raise ExecutorError(f'session holds {self.max_values} values, the limit')
        storage = tensor.untyped_storage()
        key = storage.data_ptr() if storage.nbytes() else -1 - value_id
        entry = self._storages.get(key)
        if entry is None:
            nbytes = storage.nbytes()
            if self._bytes + nbytes > self.max_bytes:
                raise ExecutorError(
                    f'value {value_id} needs {nbytes} bytes; the session holds {self._bytes} '
                    f'of its {self.max_bytes}'
                )
            self._storages[key] = _Storage(nbytes, 1)
            self._bytes += nbytes
        else:
            entry.refs += 1
        self._values[value_id] = tensor

    def release(self, value_ids: Iterable[int]) -> None:
        """Forget ``value_ids`` (unknown ids are ignored: a release may race a failure)."""
        for value_id in value_ids:
            tensor = self._values.pop(value_id, None)
            if tensor is None:
                continue
            storage = tensor.untyped_storage()
            key = storage.data_ptr() if storage.nbytes() else -1 - value_id
            entry = self._storages.get(key)
            if entry is None:
                continue
            entry.refs -= 1
            if entry.refs == 0:
                del self._storages[key]
                self._bytes -= entry.nbytes

    def clear(self) -> None:
        """Forget every value."""
        self._values.clear()
        self._storages.clear()
        self._bytes = 0

    # -- requests -----------------------------------------------------------------------

    def upload(self, value_id: int, tensor: torch.Tensor) -> None:
        """Store a host tensor under ``value_id`` (on this executor's device)."""
        self._store(value_id, tensor.to(self.device))

    def fetch(self, value_id: int) -> torch.Tensor:
        """Return value ``value_id`` on the host, contiguous."""
        return self.value(value_id).detach().to('cpu').contiguous()

    def execute(self, name: str, args: Any, kwargs: Any, first_id: int) -> tuple[Any, int]:
        """Run operator ``name`` on decoded ``args``/``kwargs`` trees (see op_codec).

        Returns the encoded result tree (new tensors as ``{'R': [id, meta]}``, results
        that are arguments as ``{'T': id}``, plain values as they are) and the number of
        new ids used, counted from ``first_id``.

        Raises:
            ExecutorError: unknown or denied operator, malformed arguments, unknown value
                ids, the operator's own error, or results over the session's limits.
            op_codec.OpCodecError: a malformed argument tree.

        """
        try:
            func = op_codec.resolve_op(name)
        except op_codec.OpCodecError as error:
            raise ExecutorError(str(error)) from None
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise ExecutorError('arguments must be a list and keyword arguments a map')
        used: dict[int, int] = {}

        def lookup(value_id: int) -> torch.Tensor:
            tensor = self.value(value_id)
            used[id(tensor)] = value_id
            return tensor

        call_args = op_codec.decode_tree(args, lookup, self.device)
        call_kwargs = {
            str(k): op_codec.decode_tree(v, lookup, self.device) for k, v in kwargs.items()
        }
        need, meta_out = self.output_size(func, call_args, call_kwargs)
        result, encoded, count = self.run_decoded(
            func, name, call_args, call_kwargs, first_id, used, need
        )
        self.last_dynamic = self._dynamic(func, meta_out, result)
        return encoded, count

    def _dynamic(self, func: Any, meta_out: list | None, result: Any) -> bool:
        """Return whether ``result``'s sizes may depend on data, not on argument sizes.

        Without a meta kernel (``nonzero``, ``unique``) they may. Some meta kernels
        disagree with the CPU ones (``native_batch_norm`` in eval mode: the saved mean
        is empty on the CPU, ``native_layer_norm`` on half: its statistics are float32
        on meta); their sizes still follow the arguments' once the same meta sizes gave
        the same real sizes twice.
        """
        if meta_out is None:
            return True
        predicted, real = _sizes(meta_out), _sizes(_metas(result))
        if predicted == real:
            return False
        key = (func, repr(predicted))
        seen = self._real_sizes.get(key)
        if len(self._real_sizes) >= _META_CACHE_SIZE:
            self._real_sizes.clear()
        self._real_sizes[key] = real
        return seen != real

    def run_decoded(
        self,
        func: Any,
        name: str,
        args: list,
        kwargs: dict,
        first_id: int,
        used: dict[int, int],
        need: int,
    ) -> tuple[Any, Any, int]:
        """Run ``func`` on decoded arguments; store its new tensors from ``first_id``.

        ``used`` maps ``id(tensor)`` of every stored argument to its value id (a result
        that is an argument is encoded as that id); ``need`` is the bytes its new results
        take (from :meth:`output_size`). Returns the raw result, its encoded form and the
        number of new ids used.

        Raises:
            ExecutorError: the results do not fit, or the operator's own error.

        """
        result = self.run_op(func, name, args, kwargs, need)
        encoded, count = self.store_result(name, result, first_id, used)
        return result, encoded, count

    def run_op(self, func: Any, name: str, args: list, kwargs: dict, need: int) -> Any:
        """Run ``func`` if its new results (``need`` bytes) fit; return its raw result.

        Raises:
            ExecutorError: the results do not fit, or the operator's own error.

        """
        if self._bytes + need > self.max_bytes:
            raise ExecutorError(
                f'{name}: results need {need} bytes; the session holds {self._bytes} of its '
                f'{self.max_bytes}'
            )
        try:
            result = func(*args, **kwargs)
        except Exception as error:  # the operator's own error goes back to the robot
            raise ExecutorError(f'{name}: {type(error).__name__}: {error}') from None
        self.ops_run += 1
        return result

    def store_result(
        self, name: str, result: Any, first_id: int, used: dict[int, int]
    ) -> tuple[Any, int]:
        """Store the new tensors of ``result`` from ``first_id``; return it encoded.

        Returns the encoded tree and the number of ids used (see :meth:`run_decoded`).
        """
        _check_wire_dtypes(name, result)
        next_id = first_id
        stored: list[int] = []

        def encode(value: Any) -> Any:
            nonlocal next_id
            if isinstance(value, torch.Tensor):
                if id(value) in used:
                    return {'T': used[id(value)]}
                if value.is_nested or value.layout is not torch.strided:
                    raise ExecutorError(
                        f'{name} returned a {"nested" if value.is_nested else str(value.layout)}'
                        ' tensor, which cannot be offloaded'
                    )
                self._store(next_id, value)
                stored.append(next_id)
                next_id += 1
                return {'R': [next_id - 1, tensor_meta(value)]}
            if isinstance(value, list | tuple):
                items = [encode(v) for v in value]
                return items if isinstance(value, list) else {'tu': items}
            if value is None or isinstance(value, bool | int | float):
                return value
            if isinstance(value, complex):
                return op_codec.encode_complex(value)
            raise ExecutorError(f'{name} returned an unsupported {type(value).__name__}')

        try:
            encoded = encode(result)
        except ExecutorError:
            self.release(stored)
            raise
        return encoded, next_id - first_id

    def store(self, value_id: int, tensor: torch.Tensor) -> None:
        """Store a tensor this executor made under ``value_id`` (within the limits)."""
        self._store(value_id, tensor)

    def output_size(self, func: Any, args: list, kwargs: dict) -> tuple[int, list | None]:
        """Return the bytes of an operator's new results and their metadata.

        Both are computed on the meta device (metadata None where sizes depend on data or
        there is no meta kernel: those results are counted as 0 bytes here and checked by
        the table once they exist). Meta kernels cost more than most CPU kernels, so the
        outcome is cached per operator and argument metadata.
        """
        leaves, spec = pytree.tree_flatten((args, kwargs))
        key = (
            func,
            repr(spec),
            tuple(
                ('t', *map(tuple, tensor_meta(leaf)[:2]), leaf.dtype)
                if isinstance(leaf, torch.Tensor)
                else leaf
                for leaf in leaves
            ),
        )
        cached = self._meta_cache.get(key)
        if cached is None:
            try:
                meta_args, meta_kwargs = pytree.tree_map_only(
                    torch.Tensor, _on_meta, (args, kwargs)
                )
                out = func(*meta_args, **meta_kwargs)
            except Exception:  # no meta kernel or data-dependent sizes: checked after the run
                out = None
            need = sum(
                t.untyped_storage().nbytes()
                for t in pytree.tree_leaves(out)
                if isinstance(t, torch.Tensor)
            )
            cached = (need, None if out is None else _metas(out))
            if len(self._meta_cache) >= _META_CACHE_SIZE:
                self._meta_cache.clear()
            self._meta_cache[key] = cached
        return cached


def _check_wire_dtypes(name: str, result: Any) -> None:
    """Refuse, naming the operator, a result the wire protocol cannot carry to the robot.

    Checked before any of the result is stored, so a refused operator leaves no values.
    """
    for leaf in pytree.tree_leaves(result):
        if isinstance(leaf, torch.Tensor) and leaf.dtype not in WIRE_DTYPE_NAMES:
            raise ExecutorError(
                f'{name} returned a {str(leaf.dtype).removeprefix("torch.")} tensor, which the '
                f'wire protocol cannot carry (it carries {", ".join(sorted(TORCH_DTYPES))})'
            )


def _on_meta(tensor: torch.Tensor) -> torch.Tensor:
    # ``to('meta')`` makes a strided view contiguous, and views of it then get other strides.
    return torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype, device='meta')


def _sizes(metas: list) -> list:
    """Return shapes and dtypes of ``_metas`` (strides never depend on the data)."""
    return [[meta[0], meta[2]] if isinstance(meta, list) else meta for meta in metas]


def _metas(tree: Any) -> list:
    """Return what a result tree looks like: tensor metadata and plain-value types."""
    return [
        tensor_meta(leaf) if isinstance(leaf, torch.Tensor) else type(leaf).__name__
        for leaf in pytree.tree_leaves(tree)
    ]
