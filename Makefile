# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
#
# Entry points of the workspace. Every target after `setup` runs inside the built
# workspace (the venv and install/ sourced), so nothing needs activating by hand.

SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DEFAULT_GOAL := help

IN_WORKSPACE := source tools/workspace_env.sh &&
# The workspace plus ROS 2's launch tooling (built from ../shared/ros2-launch where it exists).
WITH_LAUNCH_TOOLING := $(IN_WORKSPACE) source tools/ros2_launch_env.sh &&

.PHONY: help setup run bench test lint format lock clean

help:  ## List the targets.
	@grep -E '^[a-z]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

setup:  ## Create .venv with the pinned dependencies and build the workspace (idempotent).
	@bash tools/setup.sh

run:  ## The main job: people detection on real video (vtest.avi), offloaded to a loopback edge server.
	@$(IN_WORKSPACE) kapao_tracking --source video --uri asset:media/opencv/vtest.avi \
	  --start-edge-server --keys-dir results/keys --mode nnto --no-follow --reliable-sensor-qos \
	  --record results/kapao_tracking/vtest_people.mp4

bench:  ## Offload latency benchmark: protocol round trip, local vs nnto over emulated links.
	@$(IN_WORKSPACE) python benchmarks/offload_latency.py --requests 20

test:  ## Run every test (unit, ROS over DDS, ros2 launch and launch tests, lint); print the summary.
	@$(WITH_LAUNCH_TOOLING) python -m pytest

lint:  ## Check formatting and lint the whole tree with ruff.
	@$(IN_WORKSPACE) ruff check . && ruff format --check .

format:  ## Format the whole tree and apply ruff's safe fixes.
	@$(IN_WORKSPACE) ruff format . && ruff check --fix .

lock:  ## Re-resolve requirements.txt into constraints.txt in a scratch venv.
	@bash tools/lock.sh

clean:  ## Remove build products (keeps .venv).
	rm -rf build install log
