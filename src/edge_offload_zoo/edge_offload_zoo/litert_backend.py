# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Run BlazePose's ``.tflite`` nets on the LiteRT interpreter instead of the torch port.

``LiteRtModule`` wraps one ``ai_edge_litert`` Interpreter (XNNPACK delegate, a set
number of threads) behind the interface of ``tflite_graph.TfliteGraphModule``: the same
NHWC float32 input, the same output tensors in the same order, as CPU float32 torch
tensors. ``BlazePoseDetector(model=...)`` and ``BlazePoseLandmarker(model=...)`` take
either. On 1 thread LiteRT ran the landmark net 1.8x and the detector stage 1.9x faster
than the torch port (benchmarks/people_stages.py); outputs agree to 5e-4 of each output's
range or better (test_litert_backend.py has the measured tolerances).

Threads: one Interpreter must not run two calls at once (unguarded, LiteRT raised
RuntimeError), so each module serialises its calls with a lock. ``invoke()`` releases
the GIL. Measured with the landmark net on 1 LiteRT thread, on a 2-CPU machine that other
jobs shared: while one thread ran it, another Python thread's longest stall was
0.11-0.17 of the call (a GIL-holding C call of that length: 0.61-0.67; time.sleep:
0.01-0.04); in a quiet moment one thread took 16.7 ms per call and two threads, each with
its own module, 20.2 ms per call each (1.65x the throughput; under load 0.9-1.1x, as for
two processes). So give each thread its own module to run in parallel; threads sharing
one module take turns.

The file is first parsed by ``tflite_graph.load_tflite``: LiteRT's own checks let some
corrupted files through to a crash (8 of 60 byte-flipped detector files segfaulted when
loaded; the parser rejected all 8), and the parser's graph gives the output order that
the torch port uses. The LiteRT backend therefore runs the graphs that the torch port
supports, with one input.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Collection

import numpy as np
import tflite
import torch
from ai_edge_litert.interpreter import Interpreter, OpResolverType
from torch import nn

from edge_offload_zoo.tflite_graph import (
    TfliteGraphError,
    TfliteGraphModule,
    keep_outputs,
    load_tflite,
    read_model_bytes,
)

BACKENDS: tuple[str, ...] = ('torch', 'litert')


def _check_threads(num_threads: int) -> None:
    # bool is an int; LiteRT's own check would let True through as 1 thread.
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f'num_threads must be an int >= 1, got {num_threads!r}')


class LiteRtModule(nn.Module):
    """One ``.tflite`` model on a LiteRT interpreter, shaped like ``TfliteGraphModule``.

    ``forward(x)`` takes the single graph input (NHWC, float; other float dtypes are
    converted to float32 as the torch port does) and returns copies of the graph outputs
    in the file's order. ``input_names``, ``output_names`` and ``input_shapes`` describe
    them; ``num_threads`` is the interpreter's thread count and ``delegated`` whether
    XNNPACK took the graph.
    """

    def __init__(self, model_content: bytes, *, num_threads: int = 1) -> None:
        super().__init__()
        _check_threads(num_threads)
        # The torch port's parser vets the file (see the module docstring) and fixes
        # the names and order of inputs and outputs.
        reference = load_tflite(model_content, validate=False)
        if len(reference.input_names) != 1:
            raise TfliteGraphError(
                f'LiteRtModule runs single-input graphs; this one has '
                f'{len(reference.input_names)} inputs'
            )
        self.input_names: tuple[str, ...] = reference.input_names
        self.output_names: tuple[str, ...] = reference.output_names
        self.input_shapes: tuple[tuple[int, ...], ...] = reference.input_shapes
        self.num_threads = num_threads
        try:
            # BUILTIN applies LiteRT's default delegate, XNNPACK, with num_threads.
            self.interpreter = Interpreter(
                model_content=model_content,
                num_threads=num_threads,
                experimental_op_resolver_type=OpResolverType.BUILTIN,
            )
            self.interpreter.allocate_tensors()
        except (ValueError, RuntimeError) as error:
            raise TfliteGraphError(f'LiteRT cannot load the model: {error}') from error
        self._input_index, self._output_indices = self._match_tensors(model_content)
        self.delegated = self._uses_delegate()
        self._lock = threading.Lock()

    def _match_tensors(self, model_content: bytes) -> tuple[int, tuple[int, ...]]:
        """Map the file's input and outputs (in file order) to interpreter tensor indices.

        LiteRT keeps the file's tensor indices (delegates append theirs), so tensors are
        matched by index, not by the order of get_output_details(); names, shapes and
        dtypes are checked against the file too.
        """
        subgraph = tflite.Model.GetRootAsModel(model_content, 0).Subgraphs(0)
        file_inputs = [int(v) for v in subgraph.InputsAsNumpy()]
        file_outputs = [int(v) for v in subgraph.OutputsAsNumpy()]
        inputs = {d['index']: d for d in self.interpreter.get_input_details()}
        outputs = {d['index']: d for d in self.interpreter.get_output_details()}
        if set(file_inputs) != set(inputs) or set(file_outputs) != set(outputs):
            raise TfliteGraphError(
                'LiteRT reports other input/output tensors than the file declares: '
                f'inputs {sorted(inputs)} vs {file_inputs}, '
                f'outputs {sorted(outputs)} vs {file_outputs}'
            )
        detail = inputs[file_inputs[0]]
        if (
            detail['name'] != self.input_names[0]
            or tuple(int(v) for v in detail['shape']) != self.input_shapes[0]
            or detail['dtype'] != np.float32
        ):
            raise TfliteGraphError(
                f'LiteRT input {detail["name"]!r} {list(detail["shape"])} '
                f"{np.dtype(detail['dtype']).name} does not match the file's "
                f'{self.input_names[0]!r} {list(self.input_shapes[0])} float32'
            )
        for name, index in zip(self.output_names, file_outputs, strict=True):
            detail = outputs[index]
            tensor = subgraph.Tensors(index)
            shape = tuple(int(v) for v in tensor.ShapeAsNumpy()) if tensor.ShapeLength() else ()
            if (
                detail['name'] != name
                or tuple(int(v) for v in detail['shape']) != shape
                or detail['dtype'] != np.float32
            ):
                raise TfliteGraphError(
                    f'LiteRT output tensor {index} is {detail["name"]!r} '
                    f'{list(detail["shape"])} {np.dtype(detail["dtype"]).name}, the file '
                    f'says {name!r} {list(shape)} float32'
                )
        return file_inputs[0], tuple(file_outputs)

    def _uses_delegate(self) -> bool:
        # A private LiteRT helper ("experimental"): it lists a DELEGATE node once XNNPACK
        # has taken (part of) the graph. Informational only, hence the fallback.
        try:
            return any(d['op_name'] == 'DELEGATE' for d in self.interpreter._get_ops_details())
        except (AttributeError, KeyError, RuntimeError, ValueError):
            return False

    def extra_repr(self) -> str:
        names = f'inputs={self.input_names}, outputs={self.output_names}'
        return f'{names}, num_threads={self.num_threads}'

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Run the graph on the NHWC ``x``; return the outputs in file order (CPU float32)."""
        shape = self.input_shapes[0]
        if not isinstance(x, torch.Tensor):
            raise ValueError(f'input must be a torch.Tensor, got {type(x).__name__}')
        if tuple(x.shape) != shape:
            raise ValueError(
                f'input {self.input_names[0]!r} must have shape {list(shape)}, got {list(x.shape)}'
            )
        if not x.dtype.is_floating_point:
            raise ValueError(
                f'input {self.input_names[0]!r} must be a float tensor (float32), got {x.dtype}'
            )
        array = np.ascontiguousarray(x.detach().to('cpu', torch.float32).numpy())
        with self._lock:
            # set_tensor copies the input in; get_tensor copies each output out, so the
            # results survive the next invoke() (which reuses the interpreter's buffers).
            self.interpreter.set_tensor(self._input_index, array)
            self.interpreter.invoke()
            outputs = [self.interpreter.get_tensor(index) for index in self._output_indices]
        return tuple(torch.from_numpy(out) for out in outputs)


def load_litert(source: str | os.PathLike[str] | bytes, *, num_threads: int = 1) -> LiteRtModule:
    """Load a ``.tflite`` file (path or bytes) onto a LiteRT interpreter.

    Raises TfliteGraphError (a ValueError) for a missing, unreadable or malformed file.
    """
    _check_threads(num_threads)
    return LiteRtModule(read_model_bytes(source), num_threads=num_threads)


def load_tflite_backend(
    source: str | os.PathLike[str] | bytes,
    backend: str,
    *,
    num_threads: int = 1,
    outputs: Collection[str] | None = None,
) -> nn.Module:
    """Load a ``.tflite`` file on ``backend``: ``'torch'`` (the port) or ``'litert'``.

    ``num_threads`` sets LiteRT's threads. The torch backend runs on the process's torch
    thread setting (``torch.set_num_threads``, process-global, so not changed here).
    ``outputs``: the output tensors to compute (``keep_outputs``), all when None.
    """
    if backend not in BACKENDS:
        raise ValueError(f'backend must be one of {BACKENDS}, got {backend!r}')
    _check_threads(num_threads)
    if outputs is not None:
        source = keep_outputs(source, outputs)
    if backend == 'litert':
        return load_litert(source, num_threads=num_threads)
    module: TfliteGraphModule = load_tflite(source)
    return module
