# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
#
# Edge-server image: the same workspace with the CUDA build of torch. Build from the
# repository root and run with the GPU:
#   docker build -f docker/edge_server.Dockerfile -t edge-offload/edge-server .
#   docker run --gpus all --network host edge-offload/edge-server
ARG ROS_DISTRO=jazzy
FROM ros:${ROS_DISTRO}-ros-base

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV PIP_BREAK_SYSTEM_PACKAGES=1 PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1

RUN apt-get update && apt-get install -y --no-install-recommends \
      python3-pip python3-colcon-common-extensions \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /ws
COPY src/offload_interfaces/package.xml src/offload_interfaces/
COPY src/edge_offload/package.xml src/edge_offload/
RUN apt-get update && rosdep update --rosdistro "${ROS_DISTRO}" \
    && rosdep install --from-paths src --ignore-src -y --rosdistro "${ROS_DISTRO}" \
    && rm -rf /var/lib/apt/lists/*
# PyPI's default torch 2.13.0 wheel for x86-64 is the CUDA build.
COPY docker/requirements-pip.txt docker/
RUN pip install torch==2.13.0 && pip install -r docker/requirements-pip.txt

# The server needs the interfaces and the substrate (and, as they land, the RRTO and
# LOPInfer plug-ins); the application packages stay out of this image.
COPY src/offload_interfaces src/offload_interfaces
COPY src/edge_offload src/edge_offload
COPY src/rrto_ros src/rrto_ros
COPY src/lopinfer_ros src/lopinfer_ros
RUN source "/opt/ros/${ROS_DISTRO}/setup.bash" && colcon build --symlink-install

COPY docker/entrypoint.sh /entrypoint.sh
ENTRYPOINT ["/entrypoint.sh"]
CMD ["bash"]
