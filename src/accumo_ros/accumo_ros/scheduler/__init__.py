# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO's scheduler: the MPC, the policies it is compared with, offload latencies.

``mpc`` is the MPC; ``pipeline`` the robot-side data flow that runs a policy over the tasks.
"""
