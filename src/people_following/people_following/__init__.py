# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""People following on a four-wheeled robot: the nodes and their ROS-free algorithms.

Sensor sources, offloaded people detection with local tracking, the person localizer and
tracker, the follower, bag recording and evaluation, and the graph's one definition
(:mod:`people_following.graph`) that ``bringup``'s launch file and the ``kapao_tracking``
runner both start.
"""
