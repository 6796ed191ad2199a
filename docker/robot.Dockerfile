# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
#
# Robot-side image: the whole workspace on a full ROS 2 Jazzy install (ros2 launch, ros2 bag,
# launch_testing, cv_bridge, RViz), the real BlazePose weights and the opencv-doc media.
# Build from the repository root (docker/README.md has the details):
#   docker build -f docker/robot.Dockerfile -t edge-offload/robot:cpu .
#   docker build -f docker/robot.Dockerfile --build-arg TORCH_VARIANT=cu130 -t edge-offload/robot:cu130 .
# TORCH_VARIANT names a PyTorch wheel index (https://download.pytorch.org/whl/<variant>):
# cpu (default), or a CUDA build of torch 2.13: cu126, cu130 (stable) or cu132 (experimental).
# On a Jetson, base this on a JetPack-compatible ROS image and use NVIDIA's torch wheel.
ARG ROS_DISTRO=jazzy
FROM ros:${ROS_DISTRO}-ros-base

ARG TORCH_VARIANT=cpu
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/${TORCH_VARIANT}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1 \
    EDGE_OFFLOAD_ASSETS_DIR=/opt/edge_offload/share/edge_offload/assets

RUN apt-get update && apt-get install -y --no-install-recommends \
      python3-pip python3-venv python3-colcon-common-extensions \
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
# python3-torch has no Ubuntu 24.04 package (rosdep cannot resolve it on Jazzy); torch
# comes from the PyTorch wheel index below.
RUN apt-get update && rosdep update --rosdistro "${ROS_DISTRO}" \
    && rosdep install --from-paths src --ignore-src -y --rosdistro "${ROS_DISTRO}" \
         --skip-keys "python3-torch" \
    && rm -rf /var/lib/apt/lists/*

# What rosdep cannot give (docker/requirements-pip.txt, pinned as in requirements.txt) and
# torch go into a venv that sees Ubuntu's packages: pip never has to remove a Debian-owned
# package (Ubuntu 24.04's pip cannot), and NumPy stays at the apt version that Jazzy's
# compiled modules are built against. PYTHONPATH puts the venv's packages in front of
# Ubuntu's for every python3 process (ROS nodes, colcon).
COPY docker/requirements-pip.txt docker/
RUN python3 -m venv --system-site-packages /opt/edge_offload \
    && python3 -c 'import numpy; print(f"numpy=={numpy.__version__}")' > /tmp/apt-numpy.txt \
    && /opt/edge_offload/bin/pip install -c /tmp/apt-numpy.txt -r docker/requirements-pip.txt \
    && /opt/edge_offload/bin/pip install -c /tmp/apt-numpy.txt --index-url "${TORCH_INDEX_URL}" \
         torch==2.13.0
ENV PYTHONPATH=/opt/edge_offload/lib/python3.12/site-packages
RUN python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'

# Real weights and media (BlazePose .tflite files from the mediapipe wheel, the opencv-doc
# and darknet data, SHA-256 checked) into EDGE_OFFLOAD_ASSETS_DIR, the venv's share folder.
COPY tools/fetch_assets.py tools/
RUN apt-get update \
    && python3 tools/fetch_assets.py --venv /opt/edge_offload \
    && rm -rf /var/lib/apt/lists/*

COPY . .
RUN source "/opt/ros/${ROS_DISTRO}/setup.bash" && colcon build --symlink-install

COPY docker/entrypoint.sh /entrypoint.sh
ENTRYPOINT ["/entrypoint.sh"]
CMD ["bash"]
