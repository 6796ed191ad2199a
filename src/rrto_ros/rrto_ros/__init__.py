# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""RRTO transparent offloading for ROS 2.

Per-operator interception, operator-sequence recording and search, and one-round-trip replay on the
edge server.
"""
