# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Shared substrate of the edge-offloading suite.

Wire protocol, sessions and authentication, link monitor and emulator, offloading-mode plug-ins,
model zoo, and the offload bridge and edge server nodes.
"""
