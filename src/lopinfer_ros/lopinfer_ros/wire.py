# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""What the robot and server halves of ``lopinfer`` agree on: limits, plan names, dtypes."""

from __future__ import annotations

import hashlib
import json

import torch

from lopinfer_ros.problem import Plan

MAX_PLANS_PER_SESSION = 64
MAX_REQUESTS_PER_SESSION = 2
MAX_SLICES_PER_MESSAGE = 64
MAX_REPLY_BYTES = 64 * 1024 * 1024


def plan_hash(plan: Plan) -> str:
    """Return the short hash both sides name a plan by."""
    text = json.dumps([list(plan.m), list(plan.r)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix('torch.')


DTYPES = {dtype_name(d): d for d in (torch.float32, torch.float16, torch.uint8, torch.int64)}
