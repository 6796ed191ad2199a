# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The failures an offload request can end in, shared by the client, the modes and the bridge.

Their own module, below both ``client`` and ``modes``: the client raises them and the
modes' interface names them, so neither has to import the other.
"""

from __future__ import annotations

import enum


class ErrorCode(enum.IntEnum):
    """Failure kinds (the values of the Offload action's ERROR_* constants)."""

    NONE = 0
    UNKNOWN_MODEL = 1
    INVALID_INPUT = 2
    INPUT_TOO_LARGE = 3
    DEADLINE_EXCEEDED = 4
    SERVER_UNAVAILABLE = 5
    UNAUTHENTICATED = 6
    CANCELED = 7
    QUEUE_FULL = 8
    INTERNAL = 9


class OffloadError(Exception):
    """A request that could not be completed; ``code`` says which kind of failure."""

    code: ErrorCode = ErrorCode.INTERNAL

    def __init__(self, message: str, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class ServerUnavailableError(OffloadError):
    """The edge server cannot be reached, refused this robot, or dropped the request."""

    code = ErrorCode.SERVER_UNAVAILABLE


class DeadlineMissedError(OffloadError):
    """The server did not answer within the time the request allowed it."""

    code = ErrorCode.DEADLINE_EXCEEDED


class OffloadCancelledError(OffloadError):
    """The caller cancelled the request."""

    code = ErrorCode.CANCELED


class ServerRejectedError(OffloadError):
    """The server answered with an error; ``wire_code`` is the protocol's error code."""

    def __init__(self, wire_code: str, message: str, code: ErrorCode = ErrorCode.INTERNAL):
        super().__init__(f'edge server: {wire_code}: {message}', code)
        self.wire_code = wire_code
