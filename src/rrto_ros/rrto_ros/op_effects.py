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
_UNMARKED_WRITES: dict[str, Callable[[tuple, dict], tuple[int, ...]]] = {
    # (input, weight, bias, running_mean, running_var, training, momentum, eps)
    'aten::native_batch_norm': lambda args, kwargs: (
        (3, 4) if (args[5] if len(args) > 5 else kwargs.get('training')) else ()
    ),
}


def written_tensors(func: Any, args: tuple | list, kwargs: dict) -> list[torch.Tensor]:
    """Return the tensors in ``func``'s arguments that it writes into."""
    schema = func._schema
    found: list[Any] = []
    for position, argument in enumerate(schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        found.append(_argument(schema, position, args, kwargs))
    unmarked = _UNMARKED_WRITES.get(schema.name)
    if unmarked is not None:
        found.extend(_argument(schema, i, args, kwargs) for i in unmarked(tuple(args), kwargs))
    tensors = []
    for value in found:
        for item in value if isinstance(value, list | tuple) else (value,):
            if isinstance(item, torch.Tensor):
                tensors.append(item)
    return tensors


def writes_anything(func: Any) -> bool:
    """Return True if ``func`` may write into one of its arguments."""
    schema = func._schema
    return schema.name in _UNMARKED_WRITES or any(
        argument.alias_info is not None and argument.alias_info.is_write
        for argument in schema.arguments
    )


def _argument(schema: Any, position: int, args: tuple | list, kwargs: dict) -> Any:
    argument = schema.arguments[position]
    if not argument.kwarg_only and position < len(args):
        return args[position]
    return kwargs.get(argument.name)
