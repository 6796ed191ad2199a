# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
#
# Edge-server image: the workspace's packages on ROS 2 Jazzy (no RViz, no robot tools), the
# launch and parameter files (`ros2 launch bringup edge_server.launch.py`) and the model
# assets. Build from the repository root (docker/README.md has the details):
#   docker build -f docker/edge_server.Dockerfile -t edge-offload/edge-server:cpu .
#   docker build -f docker/edge_server.Dockerfile --build-arg TORCH_VARIANT=cu130 \
#       -t edge-offload/edge-server:cu130 .
#   docker run --rm --gpus all --network host \
#       -v "$HOME/edge_keys:/root/.local/share/edge_offload/keys:ro" \
#       edge-offload/edge-server:cu130          # runs `ros2 launch bringup edge_server.launch.py`
# TORCH_VARIANT names a PyTorch wheel index (https://download.pytorch.org/whl/<variant>):
# cpu (default), or a CUDA build of torch 2.13: cu126, cu130 (stable) or cu132 (experimental).
ARG ROS_DISTRO=jazzy
FROM ros:${ROS_DISTRO}-ros-base

ARG TORCH_VARIANT=cpu
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/${TORCH_VARIANT}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1 \
    EDGE_OFFLOAD_ASSETS_DIR=/opt/edge_offload/share/edge_offload/assets

RUN apt-get update && apt-get install -y --no-install-recommends \
      python3-pip python3-venv python3-colcon-common-extensions \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /ws
# Every package: the server's modes live in edge_offload, rrto_ros and lopinfer_ros, AccuMO's
# server models in accumo_ros, the launch files in bringup. Manifests first: dependency
# layers are rebuilt only when a package.xml changes.
COPY src/offload_interfaces/package.xml src/offload_interfaces/
COPY src/edge_offload/package.xml src/edge_offload/
COPY src/rrto_ros/package.xml src/rrto_ros/
COPY src/lopinfer_ros/package.xml src/lopinfer_ros/
COPY src/accumo_ros/package.xml src/accumo_ros/
COPY src/bringup/package.xml src/bringup/
# python3-torch has no Ubuntu 24.04 package (rosdep cannot resolve it on Jazzy): torch comes
# from the PyTorch wheel index below. rviz2 (a bringup dependency) is not needed on a server.
RUN apt-get update && rosdep update --rosdistro "${ROS_DISTRO}" \
    && rosdep install --from-paths src --ignore-src -y --rosdistro "${ROS_DISTRO}" \
         --skip-keys "python3-torch rviz2" \
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

# The packages (bringup's launch/, config/ and rviz/ folders are inside it).
COPY src src
RUN source "/opt/ros/${ROS_DISTRO}/setup.bash" && colcon build --symlink-install

COPY docker/entrypoint.sh /entrypoint.sh
ENTRYPOINT ["/entrypoint.sh"]
CMD ["ros2", "launch", "bringup", "edge_server.launch.py"]
