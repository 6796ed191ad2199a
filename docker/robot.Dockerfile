# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
#
# Robot-side image: the whole workspace on a full ROS 2 Jazzy install, so ros2 launch,
# ros2 bag, launch_testing and cv_bridge are available. Build from the repository root:
#   docker build -f docker/robot.Dockerfile -t edge-offload/robot .
# On a Jetson, base this on a JetPack-compatible ROS image and use NVIDIA's torch wheel.
ARG ROS_DISTRO=jazzy
FROM ros:${ROS_DISTRO}-ros-base

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV PIP_BREAK_SYSTEM_PACKAGES=1 PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1

RUN apt-get update && apt-get install -y --no-install-recommends \
      python3-pip python3-colcon-common-extensions \
      ros-${ROS_DISTRO}-launch-testing-ros ros-${ROS_DISTRO}-rosbag2 \
      ros-${ROS_DISTRO}-rosbag2-storage-mcap ros-${ROS_DISTRO}-cv-bridge \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /ws
# Manifests first: dependency layers are rebuilt only when a package.xml changes.
COPY src/offload_interfaces/package.xml src/offload_interfaces/
COPY src/edge_offload/package.xml src/edge_offload/
COPY src/rrto_ros/package.xml src/rrto_ros/
COPY src/lopinfer_ros/package.xml src/lopinfer_ros/
COPY src/accumo_ros/package.xml src/accumo_ros/
COPY src/bringup/package.xml src/bringup/
RUN apt-get update && rosdep update --rosdistro "${ROS_DISTRO}" \
    && rosdep install --from-paths src --ignore-src -y --rosdistro "${ROS_DISTRO}" \
    && rm -rf /var/lib/apt/lists/*
# What rosdep cannot give on Ubuntu, pinned as in requirements.txt. The CPU build of
# torch keeps the robot image small.
COPY docker/requirements-pip.txt docker/
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 \
    && pip install -r docker/requirements-pip.txt

COPY . .
RUN source "/opt/ros/${ROS_DISTRO}/setup.bash" && colcon build --symlink-install

COPY docker/entrypoint.sh /entrypoint.sh
ENTRYPOINT ["/entrypoint.sh"]
CMD ["bash"]
