# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The model zoo: named models that the robot and the edge server both build.

A model is registered under the ``edge_offload.models`` entry-point group as a function
that returns a ``ModelSpec``. Both ends build it from the same spec, so a model whose
weights are randomly initialised gets identical weights on both (the initialisation is
seeded), and ``nnto`` outputs equal ``local`` outputs.

Models built here are randomly initialised (``trained=False``): they serve latency,
partitioning and replay experiments, never detections.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points

import torch
from torch import nn

MODEL_ENTRY_POINT_GROUP = 'edge_offload.models'


class UnknownModelError(KeyError):
    """No model of that name is registered or loaded."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else 'unknown model'


class InvalidInputError(ValueError):
    """Inputs that do not fit the model's input specification."""


@dataclass(frozen=True)
class SizeLimits:
    """Image sizes an input takes: bounds on the last two dimensions of its shape (H, W).

    A model declares the sizes it can take (OpenCV's resamplers assert on sides of 32767
    pixels and more; a letterbox rounds a very thin image to zero rows) and the sizes worth
    taking (a frame far above the model's working resolution costs conversion, upload and
    resampling time, and gains nothing). Inputs outside are refused before the model runs,
    on the robot and on the server, with the reason. ``None`` is no bound.
    """

    min_side: int = 1
    max_side: int | None = None
    max_pixels: int | None = None
    max_aspect_ratio: float | None = None

    def problem(self, height: int, width: int) -> str:
        """Return why a ``height`` x ``width`` image is refused ('' when it is taken)."""
        size = f'{width}x{height}'
        if min(height, width) < self.min_side:
            return f'{size} has a side under {self.min_side} px'
        if min(height, width) == 0:  # no aspect ratio (min_side 0 takes empty images)
            return ''
        if self.max_side is not None and max(height, width) > self.max_side:
            return f'{size} has a side over {self.max_side} px'
        if self.max_pixels is not None and height * width > self.max_pixels:
            return f'{size} is {height * width} pixels, over {self.max_pixels}'
        if self.max_aspect_ratio is not None and max(height, width) > self.max_aspect_ratio * min(
            height, width
        ):
            return f'{size} is more elongated than {self.max_aspect_ratio:g}:1'
        return ''

    def describe(self) -> str:
        """Return the bounds in words, e.g. ``images of sides 1..4096 px, at most 8:1``."""
        words = [f'images of sides {self.min_side}..{self.max_side or "any"} px']
        if self.max_pixels is not None:
            words.append(f'at most {self.max_pixels} pixels')
        if self.max_aspect_ratio is not None:
            words.append(f'at most {self.max_aspect_ratio:g}:1')
        return ', '.join(words)


@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of a named input; ``None`` in ``shape`` accepts any size.

    ``limits`` bounds the last two sizes (height and width of an image input).
    ``example_factory`` makes the example of an input whose values a model checks (a
    rotation matrix, say), where random values would be refused.
    """

    shape: tuple[int | None, ...]
    dtype: torch.dtype = torch.float32
    limits: SizeLimits | None = None
    example_factory: Callable[[], torch.Tensor] | None = None

    def example(self) -> torch.Tensor:
        """Return a deterministic example tensor (unknown sizes: the smallest taken, >= 1)."""
        if self.example_factory is not None:
            return self.example_factory()
        smallest = max(1, self.limits.min_side) if self.limits is not None else 1
        shape = tuple(smallest if size is None else size for size in self.shape)
        generator = torch.Generator().manual_seed(1234)
        if self.dtype.is_floating_point:
            return torch.rand(shape, generator=generator, dtype=torch.float32).to(self.dtype)
        return torch.randint(0, 255, shape, generator=generator).to(self.dtype)

    def shape_problem(self, shape: Sequence[int]) -> str:
        """Return why a tensor of ``shape`` does not fit ('' when it does); reads no data."""
        shape = tuple(int(size) for size in shape)
        if len(shape) != len(self.shape) or any(
            want is not None and want != got for want, got in zip(self.shape, shape, strict=True)
        ):
            return f'must have shape {list(self.shape)} (None = any), got {list(shape)}'
        if self.limits is not None and len(shape) >= 2:
            problem = self.limits.problem(shape[-2], shape[-1])
            if problem:
                return f'takes {self.limits.describe()}; {problem}'
        return ''


@dataclass(frozen=True)
class ModelSpec:
    """How to build a model and what it consumes and produces."""

    name: str
    build: Callable[[], nn.Module]
    inputs: Mapping[str, TensorSpec]
    outputs: tuple[str, ...]
    trained: bool = False
    description: str = ''
    seed: int = 0

    def example_inputs(self) -> dict[str, torch.Tensor]:
        """Return one deterministic input per input name."""
        return {name: spec.example() for name, spec in self.inputs.items()}

    def check_input_shape(self, name: str, shape: Sequence[int]) -> None:
        """Raise InvalidInputError unless input ``name`` takes a tensor of ``shape``.

        Reads sizes only, so a caller can refuse an input before building its tensor.
        """
        spec = self.inputs.get(name)
        if spec is None:
            raise InvalidInputError(
                f'model {self.name!r} has no input {name!r}; its inputs are {sorted(self.inputs)}'
            )
        problem = spec.shape_problem(shape)
        if problem:
            raise InvalidInputError(f'input {name!r} of {self.name!r} {problem}')


@dataclass
class LoadedModel:
    """A built model in eval mode, callable with named tensors."""

    spec: ModelSpec
    module: nn.Module
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def validate(self, inputs: Mapping[str, torch.Tensor]) -> None:
        """Raise InvalidInputError unless ``inputs`` match the input specification."""
        expected = set(self.spec.inputs)
        if set(inputs) != expected:
            raise InvalidInputError(
                f'model {self.spec.name!r} takes inputs {sorted(expected)}, got {sorted(inputs)}'
            )
        for name, spec in self.spec.inputs.items():
            tensor = inputs[name]
            if tensor.dtype != spec.dtype:
                raise InvalidInputError(
                    f'input {name!r} of {self.spec.name!r} must be {spec.dtype}, '
                    f'got {tensor.dtype}'
                )
            self.spec.check_input_shape(name, tensor.shape)

    def __call__(self, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Run the model on validated ``inputs``; return the named outputs."""
        self.validate(inputs)
        with torch.inference_mode():
            result = self.module(*(inputs[name] for name in self.spec.inputs))
        if isinstance(result, torch.Tensor):
            result = (result,)
        return {
            name: tensor.contiguous()
            for name, tensor in zip(self.spec.outputs, result, strict=True)
        }

    @property
    def batchable(self) -> bool:
        """Whether several requests run as one batch (False: ``run_batch`` runs them in turn).

        True when every input takes any leading size, or when the module says how to run a
        batch (``forward_batch``: inputs stacked on a new leading dimension of the
        per-request leading size 1, outputs with the batch as their leading dimension).
        """
        return self._stacks_inputs or hasattr(self.module, 'forward_batch')

    @property
    def _stacks_inputs(self) -> bool:
        return all(spec.shape and spec.shape[0] is None for spec in self.spec.inputs.values())

    def run_batch(
        self, requests: Sequence[Mapping[str, torch.Tensor]]
    ) -> list[dict[str, torch.Tensor] | InvalidInputError]:
        """Run several requests together and return each one's outputs, in order.

        Each request is validated on its own: one that does not fit gets its
        ``InvalidInputError`` in its place and the others still run. Requests whose inputs
        differ in shape run as separate batches. A batched result equals the request's own
        result within floating-point tolerance (the same weights, in eval mode).
        """
        answers: list[dict[str, torch.Tensor] | InvalidInputError | None] = [None] * len(requests)
        groups: dict[tuple, list[int]] = {}
        for index, inputs in enumerate(requests):
            try:
                self.validate(inputs)
            except InvalidInputError as error:
                answers[index] = error
                continue
            signature = tuple(tuple(inputs[name].shape) for name in self.spec.inputs)
            groups.setdefault(signature, []).append(index)
        for indices in groups.values():
            if len(indices) == 1 or not self.batchable:
                for index in indices:
                    answers[index] = self(requests[index])
                continue
            stacked = [
                torch.cat([requests[index][name] for index in indices])
                for name in self.spec.inputs
            ]
            with torch.inference_mode():
                if self._stacks_inputs:
                    result = self.module(*stacked)
                else:
                    result = self.module.forward_batch(*stacked)
            if isinstance(result, torch.Tensor):
                result = (result,)
            for name, tensor in zip(self.spec.outputs, result, strict=True):
                if tensor.shape[0] != len(indices):
                    raise RuntimeError(
                        f'model {self.spec.name!r} returned {tensor.shape[0]} rows of '
                        f'{name!r} for a batch of {len(indices)}'
                    )
            for row, index in enumerate(indices):
                answers[index] = {
                    name: (tensor[row : row + 1] if self._stacks_inputs else tensor[row])
                    .clone()
                    .contiguous()
                    for name, tensor in zip(self.spec.outputs, result, strict=True)
                }
        return answers  # type: ignore[return-value]


def available_models() -> dict[str, Callable[[], ModelSpec]]:
    """Return the registered model factories by name."""
    return {
        entry_point.name: entry_point.load
        for entry_point in entry_points(group=MODEL_ENTRY_POINT_GROUP)
    }


def model_spec(name: str) -> ModelSpec:
    """Return the spec of the model registered as ``name``."""
    for entry_point in entry_points(group=MODEL_ENTRY_POINT_GROUP, name=name):
        return entry_point.load()()
    known = ', '.join(sorted(available_models())) or 'none'
    raise UnknownModelError(f'unknown model {name!r}; registered models: {known}')


def build_model(spec: ModelSpec) -> LoadedModel:
    """Build ``spec`` with its seeded initialisation, in eval mode on the CPU."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        module = spec.build()
    module.eval()
    return LoadedModel(spec, module)


def load_model(name: str) -> LoadedModel:
    """Build the model registered as ``name``."""
    return build_model(model_spec(name))


class ModelCache:
    """Models built on first use and kept; thread-safe. ``allowed`` limits the names."""

    def __init__(self, allowed: set[str] | None = None) -> None:
        self._allowed = allowed
        self._models: dict[str, LoadedModel] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> LoadedModel:
        """Return the model ``name``, building it on first use."""
        if self._allowed is not None and name not in self._allowed:
            raise UnknownModelError(
                f'model {name!r} is not loaded here; loaded models: {sorted(self._allowed)}'
            )
        with self._lock:
            model = self._models.get(name)
            if model is None:
                model = load_model(name)
                self._models[name] = model
            return model

    def preload(self, names: list[str]) -> None:
        """Build every model in ``names`` now (raises UnknownModelError for unknown ones)."""
        for name in names:
            self.get(name)

    def names(self) -> list[str]:
        """Return the names of the models built so far."""
        with self._lock:
            return sorted(self._models)


# ---------------------------------------------------------------------------------------
# Built-in test model. The zoo proper (benchmark networks, KAPAO, BlazePose) lives in
# edge_offload_zoo (plain torch: torchvision has no CPU build next to this torch).


class TinyCnn(nn.Module):
    """Four conv layers and a pooled head: a fast model for protocol tests and soaks."""

    def __init__(self, num_outputs: int = 16) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = [3, 16, 32, 32, 64]
        for c_in, c_out in zip(channels[:-1], channels[1:], strict=True):
            layers += [nn.Conv2d(c_in, c_out, 3, stride=2, padding=1), nn.ReLU(inplace=True)]
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(channels[-1], num_outputs)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(image).mean(dim=(2, 3)))


def tiny_cnn() -> ModelSpec:
    """Return the spec of TinyCnn on 1x3x64x64 images (randomly initialised)."""
    return ModelSpec(
        name='tiny_cnn',
        build=TinyCnn,
        inputs={'image': TensorSpec((None, 3, 64, 64))},
        outputs=('features',),
        description='4-layer CNN, randomly initialised; for protocol tests and soaks',
    )
