# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""LOPInfer (Intra-DP) for ROS 2.

Local-operator parallel inference that overlaps robot compute, server compute and transmission,
plus the layer-split baseline.
"""
