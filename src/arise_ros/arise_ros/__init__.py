# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""ARISE: one edge server serves many robots under per-robot accuracy SLAs.

Xu's dissertation, chapter 3 (Kong, Xu, Hu, MobiSys '24). The algorithms are plain modules
(no rclpy, no sockets): ``latency_profile`` (batch latency by batch size), ``accuracy``
(the client's drop-rate estimator and the SLA arithmetic) and ``scheduler`` (Step 1, the
pseudo-optimal interval and batch size per client; Step 2, simulate / adjust / verify /
apply with admission and eviction).
"""
