# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Settings every test process of this workspace needs before any test runs.

MKL's sgemm (torch's BLAS on x86) returns results that depend on its operands' memory
alignment on AVX-512 CPUs unless its conditional numerical reproducibility is on: there,
RRTO's replay (whose tensors come out of other buffers than the recording's) differed
from local runs in the last bit on 1 to 4 of 8 elements (gru_given_state, a Transformer
encoder), while AVX2 machines agreed bit for bit. The offloading modes are tested
bit-exact against local runs, so the tests, and the edge servers they start (the
variable is inherited), ask MKL for reproducible results. A user's deployment does not
need this: offloaded results then agree with local ones to float rounding.
"""

from __future__ import annotations

import os

# Read by MKL on its first call, which no test has made yet.
os.environ.setdefault('MKL_CBWR', 'AUTO,STRICT')
