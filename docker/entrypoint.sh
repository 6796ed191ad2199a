#!/usr/bin/env bash
# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
#
# Enter the ROS distribution and the built workspace, then run the container's command.
set -e
# shellcheck disable=SC1090
source "/opt/ros/${ROS_DISTRO}/setup.bash"
# shellcheck disable=SC1091
source /ws/install/setup.bash
exec "$@"
