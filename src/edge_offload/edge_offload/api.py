# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The Python offloading API: what the offload bridge runs, usable without ROS.

::

    from edge_offload.api import Offloader, OffloaderConfig
    from edge_offload.client import ClientConfig

    offloader = Offloader(OffloaderConfig(mode='nnto', client=ClientConfig(
        endpoint='tcp://edge:5555', secret_key_file='robot.key_secret',
        server_public_key_file='server.key')))
    outcome = offloader.infer('resnet18', {'image': image})
    outcome.outputs['logits'], outcome.mode_used, outcome.fell_back, outcome.stats

``infer`` runs the request in the selected mode; when that mode cannot finish it (server
unreachable, robot not authorised, server too slow for the deadline, server error) and
``fallback_to_local`` is set, it runs the model on the robot instead and says so in the
outcome (``fell_back``, ``fallback_reason``), in ``status()`` and in the log.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from edge_offload.client import ClientConfig, ConnectionState, EdgeClient
from edge_offload.errors import DeadlineMissedError, ErrorCode, OffloadCancelledError, OffloadError
from edge_offload.link_monitor import LinkEstimate, LinkEstimator
from edge_offload.models import InvalidInputError, ModelCache, UnknownModelError
from edge_offload.modes.base import (
    InferenceRequest,
    InferenceResult,
    InferenceStats,
    ModeContext,
    OffloadMode,
    ProgressCallback,
    load_mode_class,
)

_logger = logging.getLogger(__name__)
LOCAL_MODE = 'local'
# Smoothing of the local compute-time estimate used to budget the server's share.
_LOCAL_TIME_SMOOTHING = 0.2
_FALLBACK_LOG_PERIOD_S = 5.0
_MAX_REPORTED_UNSERVED = 256


@dataclass
class OffloaderConfig:
    """Settings of an offloader: default mode, fallback policy and server connection.

    ``client=None`` means no edge server: only ``local`` can run without falling back.
    ``local_models`` restricts the models the robot may build (``None``: any registered).
    """

    mode: str = 'nnto'
    fallback_to_local: bool = True
    client: ClientConfig | None = None
    local_models: list[str] | None = None
    link_window_s: float = 1.0
    # Per-mode settings by mode name, handed to each mode (``ModeContext.options``).
    mode_options: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class OffloadOutcome:
    """Outputs of one request and how they were produced."""

    outputs: dict[str, torch.Tensor]
    requested_mode: str
    mode_used: str
    fell_back: bool = False
    fallback_reason: str = ''
    late: bool = False
    stats: InferenceStats = field(default_factory=InferenceStats)


@dataclass
class OffloaderStatus:
    """Counters and the last fallback, for diagnostics."""

    mode: str
    connection: str
    connection_reason: str
    requests: int
    offloaded: int
    fallbacks: int
    failures: int
    last_fallback_reason: str


class Offloader:
    """Run inference requests in a selectable mode, falling back to local inference."""

    def __init__(self, config: OffloaderConfig) -> None:
        self.config = config
        allowed = set(config.local_models) if config.local_models is not None else None
        self.models = ModelCache(allowed)
        self.link = LinkEstimator(window_s=config.link_window_s)
        self.client = EdgeClient(config.client, self.link) if config.client else None
        self._context = ModeContext(
            models=self.models,
            client=self.client,
            link=self.link,
            options=config.mode_options,
        )
        self._lock = threading.Lock()
        self._modes: dict[str, OffloadMode] = {}
        self._local_time_s: dict[str, float] = {}
        self._counters = {'requests': 0, 'offloaded': 0, 'fallbacks': 0, 'failures': 0}
        self._last_fallback_reason = ''
        self._last_fallback_log = 0.0
        # (server, model, served models) already reported as not served: said once, not per
        # request.
        self._reported_unserved: set[tuple[str, str, tuple[str, ...]]] = set()
        self._mode = ''
        self.set_mode(config.mode)

    # -- configuration ---------------------------------------------------------------

    @property
    def mode(self) -> str:
        """Return the default mode."""
        return self._mode

    def set_mode(self, name: str) -> None:
        """Select the default mode; raises KeyError for an unregistered mode."""
        self._get_mode(name)
        self._mode = name
        _logger.info('offloading mode: %s', name)

    def _get_mode(self, name: str) -> OffloadMode:
        with self._lock:
            mode = self._modes.get(name)
            if mode is None:
                mode = load_mode_class(name)(self._context)
                self._modes[name] = mode
            return mode

    def warm_up(self, model_names: list[str]) -> dict[str, float]:
        """Build the models and time one local run of each (budgets the server's share)."""
        times = {}
        for name in model_names:
            model = self.models.get(name)
            started = time.monotonic()
            model(model.spec.example_inputs())
            times[name] = time.monotonic() - started
            with self._lock:
                self._local_time_s[name] = times[name]
        return times

    # -- inference ---------------------------------------------------------------------

    def infer(
        self,
        model: str,
        inputs: Mapping[str, torch.Tensor],
        *,
        mode: str | None = None,
        deadline: float | None = None,
        cancel: threading.Event | None = None,
        progress: ProgressCallback | None = None,
    ) -> OffloadOutcome:
        """Run ``model`` on ``inputs``.

        ``deadline`` is a ``time.monotonic()`` instant. The result is still returned when
        it is ready after the deadline, with ``late`` set.

        Raises:
            OffloadError: unknown model or mode, invalid inputs, cancellation, a deadline
                already past, or a failure that fallback is not allowed to cover.

        """
        started = time.monotonic()
        mode_name = mode or self._mode
        with self._lock:
            self._counters['requests'] += 1
        selected = self._checked_mode(mode_name, model, inputs)
        if deadline is not None and started >= deadline:
            raise DeadlineMissedError('deadline passed before the request started')
        cancel = cancel or threading.Event()
        request = InferenceRequest(
            model=model,
            inputs=dict(inputs),
            deadline=self._offload_deadline(model, deadline, started)
            if selected.uses_server
            else deadline,
            cancel=cancel,
            progress=progress,
        )
        fallback_reason = ''
        if selected.uses_server:
            result, fallback_reason, unserved = self._try_offload(selected, request)
            if result is not None:
                with self._lock:
                    self._counters['offloaded'] += 1
                result.stats.total_time_s = time.monotonic() - started
                return OffloadOutcome(
                    outputs=result.outputs,
                    requested_mode=mode_name,
                    mode_used=result.mode,
                    late=deadline is not None and time.monotonic() > deadline,
                    stats=result.stats,
                )
            if not self.config.fallback_to_local:
                with self._lock:
                    self._counters['failures'] += 1
                raise OffloadError(
                    f'{mode_name} failed and fallback is disabled: {fallback_reason}',
                    ErrorCode.SERVER_UNAVAILABLE,
                )
            self._note_fallback(mode_name, fallback_reason, log=not unserved)
            if cancel.is_set():
                raise OffloadCancelledError('request cancelled')
        request.deadline = deadline
        result = self._get_mode(LOCAL_MODE).infer(request)
        self._update_local_time(model, result.stats.local_compute_time_s)
        result.stats.total_time_s = time.monotonic() - started
        return OffloadOutcome(
            outputs=result.outputs,
            requested_mode=mode_name,
            mode_used=LOCAL_MODE,
            fell_back=bool(fallback_reason),
            fallback_reason=fallback_reason,
            late=deadline is not None and time.monotonic() > deadline,
            stats=result.stats,
        )

    def _checked_mode(
        self, mode_name: str, model: str, inputs: Mapping[str, torch.Tensor]
    ) -> OffloadMode:
        """Return the mode to run; OffloadError for an unknown mode or model, bad inputs."""
        try:
            selected = self._get_mode(mode_name)
        except KeyError as error:
            raise OffloadError(str(error.args[0]), ErrorCode.INVALID_INPUT) from None
        try:
            loaded = self.models.get(model)
            loaded.validate(inputs)
        except UnknownModelError as error:
            raise OffloadError(str(error), ErrorCode.UNKNOWN_MODEL) from None
        except InvalidInputError as error:
            raise OffloadError(str(error), ErrorCode.INVALID_INPUT) from None
        return selected

    def _try_offload(
        self, selected: OffloadMode, request: InferenceRequest
    ) -> tuple[InferenceResult | None, str, str]:
        """Run ``request`` in a server mode: (result, '', '') or (None, why not, unserved).

        ``unserved`` is set when the server does not serve the model (said once, not per
        request). A cancellation is raised, not a reason to fall back.
        """
        if self.client is None:
            return None, 'no edge server configured', ''
        if self.client.state is not ConnectionState.CONNECTED:
            return None, f'edge server {self.client.state.value}: {self.client.state_reason}', ''
        if selected.needs_server_model:
            unserved = self._unserved_reason(request.model)
            if unserved:
                return None, unserved, unserved
        try:
            return selected.infer(request), '', ''
        except OffloadCancelledError:
            raise
        except OffloadError as error:
            return None, str(error), ''

    def _offload_deadline(self, model: str, deadline: float | None, now: float) -> float | None:
        """Give the server the time that still leaves room to run locally after it."""
        if deadline is None:
            return None
        remaining = deadline - now
        with self._lock:
            local_s = self._local_time_s.get(model, 0.0)
        # Never less than half the remaining time: a slow robot must still try the server.
        return now + max(remaining - local_s, remaining / 2)

    def _update_local_time(self, model: str, seconds: float) -> None:
        with self._lock:
            previous = self._local_time_s.get(model)
            self._local_time_s[model] = (
                seconds
                if previous is None
                else (1 - _LOCAL_TIME_SMOOTHING) * previous + _LOCAL_TIME_SMOOTHING * seconds
            )

    def _unserved_reason(self, model: str) -> str:
        """Return why the connected server cannot run ``model`` ('' when it serves it).

        The server lists its models in WELCOME; asking it for another one would only bring
        back ``unknown_model`` for every request. The first time per server and model, the
        reason is logged as an error naming the fix.
        """
        info = self.client.server_info if self.client is not None else {}
        served = info.get('models')
        if not isinstance(served, list) or model in served:
            return ''
        server_id = str(info.get('server_id', 'the edge server'))
        served_names = tuple(str(name) for name in served)
        reason = (
            f'edge server {server_id} does not serve model {model!r} (it serves '
            f'{", ".join(served_names) or "no models"})'
        )
        key = (server_id, model, served_names)
        with self._lock:
            first = key not in self._reported_unserved
            if len(self._reported_unserved) >= _MAX_REPORTED_UNSERVED:
                self._reported_unserved.clear()  # bounded; at worst a line is said again
            self._reported_unserved.add(key)
        if first:
            _logger.error(
                '%s: running %s on the robot for every request; add it to the edge '
                "server's models parameter to offload it",
                reason,
                model,
            )
        return reason

    def _note_fallback(self, mode_name: str, reason: str, *, log: bool = True) -> None:
        now = time.monotonic()
        with self._lock:
            self._counters['fallbacks'] += 1
            changed = reason != self._last_fallback_reason
            due = now - self._last_fallback_log >= _FALLBACK_LOG_PERIOD_S
            self._last_fallback_reason = reason
            count = self._counters['fallbacks']
            if log and (changed or due):
                self._last_fallback_log = now
        if log and (changed or due):
            _logger.warning(
                'running locally instead of %s: %s (%d fallbacks so far)', mode_name, reason, count
            )

    # -- status ------------------------------------------------------------------------

    def link_estimate(self) -> LinkEstimate:
        """Return the link monitor's current estimate."""
        return self.link.snapshot()

    def status(self) -> OffloaderStatus:
        """Return counters, the connection state and the last fallback reason."""
        if self.client is None:
            connection, reason = 'none', 'no edge server configured'
        else:
            connection, reason = self.client.state.value, self.client.state_reason
        with self._lock:
            return OffloaderStatus(
                mode=self._mode,
                connection=connection,
                connection_reason=reason,
                last_fallback_reason=self._last_fallback_reason,
                **self._counters,
            )

    def close(self) -> None:
        """Close the modes and the server connection."""
        with self._lock:
            modes = list(self._modes.values())
            self._modes.clear()
        for mode in modes:
            mode.close()
        if self.client is not None:
            self.client.close()

    def __enter__(self) -> Offloader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
