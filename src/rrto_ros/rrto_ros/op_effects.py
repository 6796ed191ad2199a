# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Which arguments an aten operator writes into: what both ends must know of its effects.

An operator's schema marks the arguments it writes (``Tensor(a!)``). A few operators
write without saying so: ``native_batch_norm`` in training mode updates its running mean
and variance in place, with a schema that declares neither (PyTorch's functionalization
special-cases it the same way). The robot needs this to bring buffers written on the
server back; the server to undo writes of steps it ran ahead of the robot.

No I/O here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


# Operator -> positions of the arguments it writes, given its arguments, for operators
# whose schema does not mark them.
def _running_stats(args: tuple, kwargs: dict) -> tuple[int, ...]:
    # (input, weight, bias, running_mean, running_var, training, momentum, eps, ...): the
    # running statistics are updated only in training mode (use_input_stats for
    # instance_norm, the same position).
    training = args[5] if len(args) > 5 else kwargs.get('training', kwargs.get('use_input_stats'))
    return (3, 4) if training else ()


_UNMARKED_WRITES: dict[str, Callable[[tuple, dict], tuple[int, ...]]] = {
    'aten::native_batch_norm': _running_stats,
    # What inference_mode dispatches undecomposed.
    'aten::batch_norm': _running_stats,
    'aten::_batch_norm_impl_index': _running_stats,
    'aten::instance_norm': _running_stats,
}

# Operators tagged ``nondeterministic_seeded`` that draw random numbers only when an
# argument asks for it: argument name -> what a value must be for no numbers to be drawn.
_DROPOUT_ARGUMENTS = ('dropout_p', 'dropout', 'p')


# Operator -> whether it carries the ``nondeterministic_seeded`` tag (per overload).
_SEEDED: dict[Any, bool] = {}

# Operator -> positions of the arguments its schema marks as written (per overload).
_MARKED: dict[Any, tuple[int, ...]] = {}


def _marked(func: Any) -> tuple[int, ...]:
    positions = _MARKED.get(func)
    if positions is None:
        positions = _MARKED[func] = tuple(
            position
            for position, argument in enumerate(func._schema.arguments)
            if argument.alias_info is not None and argument.alias_info.is_write
        )
    return positions


def write_positions(func: Any, args: tuple | list, kwargs: dict) -> tuple[int, ...]:
    """Return the positions of the arguments this call of ``func`` writes into.

    Only the non-tensor arguments are read (a ``training`` flag), so a compiled call
    with placeholders for its tensors gives its positions once.
    """
    marked = _marked(func)
    unmarked = _UNMARKED_WRITES.get(func._schema.name)
    if unmarked is None:
        return marked
    return marked + unmarked(tuple(args), kwargs)


def written_tensors(
    func: Any, args: tuple | list, kwargs: dict, positions: tuple[int, ...] | None = None
) -> list[torch.Tensor]:
    """Return the tensors in ``func``'s arguments that it writes into (at ``positions``)."""
    if positions is None:
        positions = write_positions(func, args, kwargs)
    if not positions:
        return []
    schema = func._schema
    found = [_argument(schema, position, args, kwargs) for position in positions]
    tensors = []
    for value in found:
        for item in value if isinstance(value, list | tuple) else (value,):
            if isinstance(item, torch.Tensor):
                tensors.append(item)
    return tensors


def draws_random(func: Any, args: tuple | list, kwargs: dict) -> bool:
    """Return True if this call of ``func`` draws from a random number generator.

    The ``nondeterministic_seeded`` tag is on every operator that may: ``rand``,
    ``bernoulli_``, but also attention, RNNs and dropout, which draw only with a dropout
    probability above 0 (and, where they take one, a ``train`` flag set).
    """
    seeded = _SEEDED.get(func)
    if seeded is None:
        seeded = _SEEDED[func] = torch.Tag.nondeterministic_seeded in func.tags
    if not seeded:
        return False
    schema = func._schema
    names = [argument.name for argument in schema.arguments]
    probability = next((name for name in _DROPOUT_ARGUMENTS if name in names), None)
    if probability is None:
        return True
    value = _argument(schema, names.index(probability), args, kwargs)
    if isinstance(value, bool | int | float) and value == 0:
        return False
    if 'train' in names and _argument(schema, names.index('train'), args, kwargs) is False:
        return False
    return True


# In-place random fills: every element of ``self`` is drawn anew, its old value unused.
_RANDOM_FILLS = frozenset(
    {'bernoulli_', 'uniform_', 'normal_', 'random_', 'exponential_', 'geometric_', 'cauchy_'}
    | {'log_normal_'}
)


def is_random_fill(func: Any) -> bool:
    """Return True if ``func`` overwrites its first argument with random numbers."""
    return func._schema.name.removeprefix('aten::') in _RANDOM_FILLS


def writes_anything(func: Any) -> bool:
    """Return True if ``func`` may write into one of its arguments."""
    return bool(_marked(func)) or func._schema.name in _UNMARKED_WRITES


def _argument(schema: Any, position: int, args: tuple | list, kwargs: dict) -> Any:
    """Return the value of argument ``position``: given, or its schema default."""
    argument = schema.arguments[position]
    if not argument.kwarg_only and position < len(args):
        return args[position]
    if argument.name in kwargs:
        return kwargs[argument.name]
    return argument.default_value if argument.has_default_value() else None
