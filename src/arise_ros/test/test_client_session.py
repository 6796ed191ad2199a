# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The robot's ARISE session on its own: what it sends while the server is behind."""

import concurrent.futures

import pytest
import torch

from arise_ros.client import DEFAULT_MAX_IN_FLIGHT, AriseSession, RobotTask
from edge_offload.server import ServerConfig

TASK = RobotTask('r1', 30.0, 0.04, 0.004, 0.002, 0.003)
IMAGE = {'image': torch.zeros(1, 3, 8, 8)}


class _UnansweredCalls:
    """Takes every call and answers none until told to (a server behind its plan)."""

    def __init__(self) -> None:
        self.calls: list[concurrent.futures.Future] = []

    def submit(self, mode, op, fields, tensors) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self.calls.append(future)
        return future


def test_a_robot_holds_frames_back_while_the_server_has_as_many_as_it_takes():
    server = _UnansweredCalls()
    session = AriseSession(server, TASK, max_in_flight=2)
    assert session.offload(1, IMAGE) is not None
    assert session.offload(2, IMAGE) is not None
    # A third would be refused as busy: it is not sent, and the robot tracks on.
    assert session.offload(3, IMAGE) is None
    assert len(server.calls) == 2
    assert session.frames_held_back == 1
    # One answer makes room for the newest frame.
    server.calls[0].set_result(None)
    assert session.offload(4, IMAGE) is not None
    assert len(server.calls) == 3


def test_a_failed_call_makes_room_too():
    server = _UnansweredCalls()
    session = AriseSession(server, TASK, max_in_flight=1)
    assert session.offload(1, IMAGE) is not None
    assert session.offload(2, IMAGE) is None
    server.calls[0].set_exception(RuntimeError('timed out'))
    assert session.offload(3, IMAGE) is not None


def test_the_default_matches_the_servers_limit_and_bad_limits_are_refused():
    session = AriseSession(_UnansweredCalls(), TASK)
    assert session.max_in_flight == DEFAULT_MAX_IN_FLIGHT == ServerConfig().max_inflight_per_client
    with pytest.raises(ValueError, match='max_in_flight'):
        AriseSession(_UnansweredCalls(), TASK, max_in_flight=0)
