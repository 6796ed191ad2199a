# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO for ROS 2.

An MPC scheduler that balances depth and odometry offloads for accuracy, with local trackers,
accuracy models, a dataset generator and an evaluator.
"""
