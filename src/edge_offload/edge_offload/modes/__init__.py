# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Offloading modes: the plug-in interface and the built-in ``local`` and ``nnto`` modes."""

from edge_offload.errors import (
    DeadlineMissedError,
    ErrorCode,
    OffloadCancelledError,
    OffloadError,
    ServerRejectedError,
    ServerUnavailableError,
)
from edge_offload.modes.base import (
    CLIENT_MODE_GROUP,
    SERVER_MODE_GROUP,
    InferenceRequest,
    InferenceResult,
    InferenceStats,
    ModeContext,
    OffloadMode,
    ServerCall,
    ServerMode,
    ServerModeContext,
    ServerReply,
    Stage,
    available_modes,
    load_mode_class,
    load_server_mode_class,
)

__all__ = [
    'CLIENT_MODE_GROUP',
    'SERVER_MODE_GROUP',
    'OffloadCancelledError',
    'DeadlineMissedError',
    'ErrorCode',
    'InferenceRequest',
    'InferenceResult',
    'InferenceStats',
    'ModeContext',
    'OffloadError',
    'OffloadMode',
    'ServerCall',
    'ServerMode',
    'ServerModeContext',
    'ServerRejectedError',
    'ServerReply',
    'ServerUnavailableError',
    'Stage',
    'available_modes',
    'load_mode_class',
    'load_server_mode_class',
]
