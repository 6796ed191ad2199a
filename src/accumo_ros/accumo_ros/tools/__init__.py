# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO's command-line tools: evaluators, training and the odometry accuracy fit."""
