# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The plug-in interface every offloading mode implements.

A mode has two halves, each registered under a Python entry-point group and loaded by
name (the way ROS uses pluginlib):

* ``edge_offload.modes``: an ``OffloadMode`` on the robot. ``infer`` runs one request
  with named input tensors and returns the outputs with per-request stats (bytes up and
  down, round trips, local and server compute time, total time).
* ``edge_offload.server_modes``: a ``ServerMode`` in the edge server. ``handle`` answers
  one CALL of that mode within a client's session; ``open_session`` creates the
  per-client state a mode keeps between calls (RRTO's recorded sequence, LOPInfer's
  plan), isolated from every other client.

The robot half talks to its server half only through ``EdgeClient.call`` (one request,
one reply, both with named tensors); it never opens sockets. Falling back to local
inference is not a mode's business: the ``Offloader`` does it for every mode.
"""

from __future__ import annotations

import abc
import enum
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, ClassVar

import torch

if TYPE_CHECKING:
    import concurrent.futures

    from edge_offload.client import EdgeClient
    from edge_offload.link_monitor import LinkEstimator
    from edge_offload.models import ModelCache

CLIENT_MODE_GROUP = 'edge_offload.modes'
SERVER_MODE_GROUP = 'edge_offload.server_modes'


class Stage(enum.IntEnum):
    """Progress stages (the values of the Offload action's STAGE_* constants)."""

    QUEUED = 0
    UPLOADING = 1
    SERVER_COMPUTE = 2
    DOWNLOADING = 3
    LOCAL_COMPUTE = 4


@dataclass
class InferenceStats:
    """What one inference cost (the fields of ``offload_interfaces/OffloadStats``)."""

    bytes_up: int = 0
    bytes_down: int = 0
    round_trips: int = 0
    queue_time_s: float = 0.0
    local_compute_time_s: float = 0.0
    server_compute_time_s: float = 0.0
    total_time_s: float = 0.0

    def add_transfer(self, other: InferenceStats) -> None:
        """Add the traffic and compute times of ``other`` (not its total or queue time)."""
        self.bytes_up += other.bytes_up
        self.bytes_down += other.bytes_down
        self.round_trips += other.round_trips
        self.local_compute_time_s += other.local_compute_time_s
        self.server_compute_time_s += other.server_compute_time_s


ProgressCallback = Callable[[Stage, int, int], None]


@dataclass
class InferenceRequest:
    """One inference: a model name and its named inputs, with a deadline and cancel flag.

    ``deadline`` is a ``time.monotonic()`` instant by which the mode must have answered
    (``None``: no deadline). ``progress(stage, bytes_up, bytes_down)`` reports progress.
    """

    model: str
    inputs: dict[str, torch.Tensor]
    deadline: float | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    progress: ProgressCallback | None = None

    def report(self, stage: Stage, bytes_up: int = 0, bytes_down: int = 0) -> None:
        """Report progress to the caller, if it asked for it."""
        if self.progress is not None:
            self.progress(stage, bytes_up, bytes_down)


@dataclass
class InferenceResult:
    """Named outputs of one inference, the mode that produced them and what it cost."""

    outputs: dict[str, torch.Tensor]
    mode: str
    stats: InferenceStats = field(default_factory=InferenceStats)


@dataclass
class ModeContext:
    """What a robot-side mode may use: models, the server connection, the link monitor."""

    models: ModelCache
    client: EdgeClient | None = None
    link: LinkEstimator | None = None
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger('edge_offload'))
    # Per-mode settings by mode name (e.g. ``{'lopinfer': {'device_factor': 19.0}}``).
    options: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class ModeOption:
    """One tunable of a mode, declared as the parameter ``<mode>.<name>``.

    The bridge declares its modes' options, the edge server node its server modes'.
    """

    name: str
    default: bool | int | float | str | list[int]
    description: str
    min_value: float | None = None
    max_value: float | None = None


class OffloadMode(abc.ABC):
    """Robot half of an offloading mode."""

    #: Name the mode is registered and selected by.
    name: ClassVar[str] = ''
    #: False for modes that never contact the server (``local``).
    uses_server: ClassVar[bool] = True
    #: False for modes whose server half runs operators it is sent, not a model it loaded
    #: (``per_op``, ``rrto``); True ones fall back at once when the server lacks the model.
    needs_server_model: ClassVar[bool] = True
    #: Options read from ``ModeContext.options[name]``, with defaults and ranges.
    option_specs: ClassVar[tuple[ModeOption, ...]] = ()

    def __init__(self, context: ModeContext) -> None:
        self.context = context

    @abc.abstractmethod
    def infer(self, request: InferenceRequest) -> InferenceResult:
        """Run one inference.

        Raises:
            OffloadError: the request failed; the offloader falls back to local
                inference for every such error except ``OffloadCancelledError``.

        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the mode holds (called when the offloader shuts down)."""


@dataclass
class ServerModeContext:
    """What a server-side mode may use: the server's loaded models."""

    models: ModelCache
    logger: logging.Logger = field(
        default_factory=lambda: logging.getLogger('edge_offload.server')
    )
    # This mode's settings (``ServerConfig.mode_options[name]``); the mode validates them.
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class ServerCall:
    """One CALL as a server mode sees it."""

    op: str
    fields: dict[str, Any]
    tensors: dict[str, torch.Tensor]
    session_id: str
    request_id: int


@dataclass
class ServerReply:
    """A server mode's answer. ``model`` names the model it ran, for per-model stats."""

    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)
    compute_time_s: float = 0.0
    model: str = ''


@dataclass
class ModeStatus:
    """One line of a server mode's diagnostics (one per robot it serves, say).

    ``level`` is ``'ok'``, ``'warn'`` or ``'error'``; ``values`` are shown as key/value pairs.
    The edge server node publishes these on ``/diagnostics`` beside its own status.
    """

    name: str
    level: str
    message: str
    values: dict[str, Any] = field(default_factory=dict)
    hardware_id: str = ''

    def __post_init__(self) -> None:
        if self.level not in ('ok', 'warn', 'error'):
            raise ValueError(f"a status level is 'ok', 'warn' or 'error', not {self.level!r}")


class ServerMode(abc.ABC):
    """Server half of an offloading mode; one instance serves every session."""

    name: ClassVar[str] = ''
    #: Options read from ``ServerModeContext.options``, with defaults and ranges.
    option_specs: ClassVar[tuple[ModeOption, ...]] = ()
    #: False for a mode that runs no model (a directory): its server may load none.
    needs_models: ClassVar[bool] = True

    def __init__(self, context: ServerModeContext) -> None:
        self.context = context

    def open_session(self, session_id: str) -> Any:
        """Return the per-session state this mode keeps (``None`` if it keeps none)."""
        return None

    @abc.abstractmethod
    def handle(
        self, state: Any, call: ServerCall
    ) -> ServerReply | concurrent.futures.Future[ServerReply]:
        """Answer ``call`` using this session's ``state``.

        ``handle`` runs on one of the server's worker threads. It returns the reply, or a
        ``concurrent.futures.Future`` that will resolve to it when the mode has the answer
        (a long-poll waiting for data, say): the worker is then free at once, and the
        server sends the reply when the future completes, from whichever thread completes
        it. Until then the call counts against the session's ``max_inflight_per_client``.
        A future that raises is answered like ``handle`` raising. When the session closes
        or expires, or the server stops, the server cancels the future (``future.cancel()``)
        and drops any result that still comes; a mode completes it with
        ``set_running_or_notify_cancel()`` first, or tolerates ``InvalidStateError``.

        Raises:
            protocol.ProtocolError: the call is invalid; its code and message go back
                to the client (also when the returned future raises it).

        """

    def call_batch(self, call: ServerCall) -> int:
        """Return how many samples ``call`` asks the model to compute (1 by default).

        The server refuses a call whose batch is over its ``max_batch_per_call`` before it
        queues it, so one legal-looking request cannot hold a worker for seconds. Runs on
        the server's I/O thread: read shapes only, compute nothing.
        """
        return 1

    def close_session(self, state: Any) -> None:  # noqa: B027 - optional hook
        """Release a session's state (client said bye, timed out or server stopped)."""

    def stop(self) -> None:  # noqa: B027 - optional hook
        """Stop the mode's own threads when the server stops (it may start again)."""

    def diagnostics(self) -> list[ModeStatus]:
        """Return this mode's statuses for ``/diagnostics`` (none by default).

        Called from the node's diagnostics timer: read state under the mode's lock, compute
        nothing heavy.
        """
        return []


def _load_class(group: str, name: str, base: type) -> type:
    for entry_point in entry_points(group=group, name=name):
        cls = entry_point.load()
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise TypeError(f'{group} entry point {name!r} is not a {base.__name__}')
        return cls
    known = ', '.join(sorted(ep.name for ep in entry_points(group=group))) or 'none'
    raise KeyError(f'no offloading mode {name!r} in {group}; available: {known}')


def load_mode_class(name: str) -> type[OffloadMode]:
    """Return the robot-side mode class registered as ``name``."""
    return _load_class(CLIENT_MODE_GROUP, name, OffloadMode)


def load_server_mode_class(name: str) -> type[ServerMode]:
    """Return the server-side mode class registered as ``name``."""
    return _load_class(SERVER_MODE_GROUP, name, ServerMode)


def available_modes() -> list[str]:
    """Return the names of the registered robot-side modes."""
    return sorted(ep.name for ep in entry_points(group=CLIENT_MODE_GROUP))


def available_server_modes() -> list[str]:
    """Return the names of the registered server-side modes."""
    return sorted(ep.name for ep in entry_points(group=SERVER_MODE_GROUP))
