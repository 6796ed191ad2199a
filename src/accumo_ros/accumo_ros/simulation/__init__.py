# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO's data: synthetic scenes, trajectories, IMU and sequences, written as rosbag2 bags."""
