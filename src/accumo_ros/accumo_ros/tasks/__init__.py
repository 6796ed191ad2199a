# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO's two tasks, depth and odometry, with their accuracy models.

Depth: the nets and the warping tracker. Odometry: visual odometry, the IMU filter and the
odometry accuracy model.
"""
