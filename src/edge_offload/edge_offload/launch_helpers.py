# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Pieces shared by the suite's launch files (imported only where ``launch`` is installed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import launch.logging
from launch import LaunchContext
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode

from edge_offload.parameter_files import run_arguments, write_parameter_file

# A killed lifecycle node comes back after this long (and autostarts again).
RESPAWN_DELAY_S = 1.0


def argument(context: LaunchContext, name: str) -> str:
    """Return the value of launch argument ``name``."""
    return LaunchConfiguration(name).perform(context)


def enabled(context: LaunchContext, name: str) -> bool:
    """Return launch argument ``name`` as a boolean (true/false/1/0, any case; else an error)."""
    return IfCondition(LaunchConfiguration(name)).evaluate(context)


def write_launch_parameters(
    parameters: dict[str, dict[str, Any]], file_name: str, namespace: str
) -> Path:
    """Write the nodes' effective parameters into this launch's log folder and return the path.

    Every node reads its parameters from this one file, and it stays next to the launch log,
    so what a run used can be read afterwards (``~/.ros/log/<run>/<file_name>``).
    """
    path = Path(launch.logging.launch_config.log_dir) / file_name
    write_parameter_file(parameters, path, namespace)
    launch.logging.get_logger('launch').info(f'node parameters: {path}')
    return path


def common_arguments(nodes: str) -> list[DeclareLaunchArgument]:
    """Return the arguments every launch file of the suite has; ``nodes`` names what they set."""
    return [
        DeclareLaunchArgument(name, default_value=default, description=description)
        for name, default, description in run_arguments(nodes)
    ]


def respawning_lifecycle_node(
    context: LaunchContext,
    package: str,
    name: str,
    params_file: Path,
    executable: str | None = None,
    **kwargs: Any,
) -> LifecycleNode:
    """Return lifecycle node ``name`` that ros2 launch restarts when it dies.

    With its ``autostart`` parameter it configures and activates itself at every start, so
    a killed bridge or edge server serves again without anyone calling ros2 lifecycle.
    ``executable`` defaults to ``name`` (one node of its kind).
    """
    return LifecycleNode(
        package=package,
        executable=executable or name,
        name=name,
        namespace=argument(context, 'namespace'),
        parameters=[params_file],
        ros_arguments=['--log-level', argument(context, 'log_level')],
        output='screen',
        respawn=True,
        respawn_delay=RESPAWN_DELAY_S,
        **kwargs,
    )
