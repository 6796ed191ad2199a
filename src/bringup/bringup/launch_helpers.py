# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Pieces shared by the suite's launch files (imported only where ``launch`` is installed)."""

from __future__ import annotations

import launch
import lifecycle_msgs.msg
from launch.actions import EmitEvent, RegisterEventHandler
from launch.conditions import Condition
from launch_ros.actions import LifecycleNode
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState


def configure_then_activate(node: LifecycleNode, condition: Condition | None = None) -> list:
    """Return the actions that configure ``node`` and activate it once inactive."""
    configure = EmitEvent(
        event=ChangeState(
            lifecycle_node_matcher=launch.events.matches_action(node),
            transition_id=lifecycle_msgs.msg.Transition.TRANSITION_CONFIGURE,
        ),
        condition=condition,
    )
    activate = RegisterEventHandler(
        OnStateTransition(
            target_lifecycle_node=node,
            goal_state='inactive',
            entities=[
                EmitEvent(
                    event=ChangeState(
                        lifecycle_node_matcher=launch.events.matches_action(node),
                        transition_id=lifecycle_msgs.msg.Transition.TRANSITION_ACTIVATE,
                    )
                )
            ],
        ),
        condition=condition,
    )
    return [activate, configure]
