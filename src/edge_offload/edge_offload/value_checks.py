# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Checks of configuration values with the value's name in the error (plain Python).

The algorithms' configuration dataclasses (camera model, person localizer and tracker)
validate their fields with these, so a bad value says which field and what it must be.
"""

from __future__ import annotations

import math
import numbers


def check_real(name: str, value: object) -> float:
    """Return ``value`` as a float; ValueError unless it is a finite real number (not bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f'{name} must be a number, got {value!r}')
    if not math.isfinite(value):
        raise ValueError(f'{name} must be finite, got {value!r}')
    return float(value)


def check_positive(
    name: str, value: object, *, allow_zero: bool = False, allow_inf: bool = False
) -> float:
    """Return ``value`` as a float; ValueError unless it is > 0 (>= 0 with ``allow_zero``).

    NaN is never accepted; infinity only with ``allow_inf``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f'{name} must be a number, got {value!r}')
    too_small = value < 0.0 if allow_zero else value <= 0.0
    if math.isnan(value) or too_small or (math.isinf(value) and not allow_inf):
        limit = 'non-negative' if allow_zero else 'positive'
        finite = '' if allow_inf else ' and finite'
        raise ValueError(f'{name} must be {limit}{finite}, got {value!r}')
    return float(value)


def check_int(name: str, value: object, minimum: int = 1) -> int:
    """Return ``value`` as an int; ValueError unless it is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f'{name} must be an integer of at least {minimum}, got {value!r}')
    return int(value)
