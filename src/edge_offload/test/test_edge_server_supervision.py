# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The edge_server node notices a dead serving loop, says ERROR, and serves again.

Before, ``serving`` meant "a thread object exists": a loop that had died kept reporting
"serving" and nothing restarted it. The node now checks the loop at every diagnostics
period, reports ERROR with the reason and restarts it in place; a robot reconnects.
"""

from __future__ import annotations

import torch
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter

from edge_offload.client import ClientConfig, EdgeClient
from edge_offload.edge_server_node import EdgeServerNode
from edge_offload.server import EdgeServer
from edge_offload_testing import make_test_keys, spin_until


def test_a_dead_serving_loop_is_reported_and_restarted(ros_context, tmp_path, monkeypatch):
    keys = make_test_keys(tmp_path / 'keys')
    node = EdgeServerNode(
        context=ros_context,
        parameter_overrides=[
            Parameter('endpoint', value='tcp://127.0.0.1:0'),
            Parameter('models', value=['tiny_cnn']),
            Parameter('modes', value=['nnto']),
            Parameter('secret_key_file', value=str(keys.server_secret)),
            Parameter('authorized_clients_dir', value=str(keys.authorized_clients_dir)),
            Parameter('diagnostics_period_s', value=0.1),
        ],
    )
    probe = Node('probe', context=ros_context)
    statuses: list[DiagnosticStatus] = []
    probe.create_subscription(
        DiagnosticArray, '/diagnostics', lambda message: statuses.extend(message.status), 10
    )
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    executor.add_node(probe)
    try:
        node.trigger_configure()
        node.trigger_activate()
        server = node._server
        assert spin_until(
            executor, lambda: any(s.level == DiagnosticStatus.OK for s in statuses), 10.0
        )

        # The serving loop dies: every turn fails, as a broken socket would make it, until
        # the loop gives up (100 failures in a row); the restarted loop is healthy.
        original = EdgeServer._serve_once
        failures = []

        def broken(self, poller):
            if len(failures) < 100:
                failures.append(1)
                raise RuntimeError('socket broke')
            return original(self, poller)

        monkeypatch.setattr(EdgeServer, '_serve_once', broken)
        statuses.clear()
        assert spin_until(
            executor, lambda: any(s.level == DiagnosticStatus.ERROR for s in statuses), 10.0
        )
        error = next(s for s in statuses if s.level == DiagnosticStatus.ERROR)
        assert 'socket broke' in error.message
        assert 'restarted' in error.message
        assert server.serving
        values = {value.key: value.value for value in error.values}
        assert values['restarts'] == '1'
        assert 'socket broke' in values['last_failure']

        # A robot is served by the restarted loop.
        config = ClientConfig(
            endpoint=server.endpoint,
            secret_key_file=str(keys.robot_secret),
            server_public_key_file=str(keys.server_public),
        )
        with EdgeClient(config) as client:
            assert client.wait_connected(5.0)
            reply = client.call(
                'nnto', 'infer', {'model': 'tiny_cnn'}, {'image': torch.rand(1, 3, 64, 64)}
            )
            assert set(reply.tensors) == {'features'}
        statuses.clear()
        assert spin_until(
            executor, lambda: any(s.level == DiagnosticStatus.OK for s in statuses), 10.0
        )
    finally:
        node.release()
        executor.shutdown()
        node.destroy_node()
        probe.destroy_node()
