# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Applications, launch files, parameters and RViz configuration of the suite.

The user's application is people tracking on a four-wheeled robot, started with
``ros2 launch bringup kapao_tracking.launch.py``.
"""
