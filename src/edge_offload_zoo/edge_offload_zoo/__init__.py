# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Model definitions of the zoo in plain torch (no torchvision: it has no CPU build here)."""
