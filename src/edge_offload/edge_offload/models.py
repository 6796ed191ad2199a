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
from collections.abc import Callable, Mapping
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
class TensorSpec:
    """Shape and dtype of a named input; ``None`` in ``shape`` accepts any size."""

    shape: tuple[int | None, ...]
    dtype: torch.dtype = torch.float32

    def example(self) -> torch.Tensor:
        """Return a deterministic example tensor (unknown sizes become 1)."""
        shape = tuple(1 if size is None else size for size in self.shape)
        generator = torch.Generator().manual_seed(1234)
        if self.dtype.is_floating_point:
            return torch.rand(shape, generator=generator, dtype=torch.float32).to(self.dtype)
        return torch.randint(0, 255, shape, generator=generator).to(self.dtype)


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
            if len(tensor.shape) != len(spec.shape) or any(
                want is not None and want != got
                for want, got in zip(spec.shape, tensor.shape, strict=True)
            ):
                raise InvalidInputError(
                    f'input {name!r} of {self.spec.name!r} must have shape '
                    f'{list(spec.shape)} (None = any), got {list(tensor.shape)}'
                )

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
# edge_offload.zoo (plain torch: torchvision has no CPU build next to this torch).


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
