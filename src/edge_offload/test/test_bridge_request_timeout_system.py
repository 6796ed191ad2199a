# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The bridge's measured server time limit, across processes over DDS and TCP.

The edge server (``fixtures/slow_edge_server.py``) answers every ``nnto`` request after
``DELAY_S`` (0.6 s), twice the bridge's ``request_timeout_s`` (0.3 s): an honest but slow
server, as on a CPU-contended machine.

* The first goal may fall back (nothing is measured yet); the server's late reply to it
  is measured, the limit grows (``/diagnostics``, the log), and later goals are answered
  by the server instead of being computed again on the robot.
* With a large measured limit, a server that stops answering at all (SIGSTOP) still
  makes goals fall back within about ``liveness_timeout_s``, not after the limit.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.action import ActionClient
from rclpy.node import Node

from edge_offload.tensor_blob import to_tensor_blob
from edge_offload_testing import (
    edge_server_node_command,
    free_tcp_port,
    make_test_keys,
    offload_bridge_node_command,
    prime_action_client,
    spin_until,
)
from offload_interfaces.action import Offload

FIXTURES = Path(__file__).parent / 'fixtures'
MODEL = 'tiny_cnn'
DELAY_S = 0.6
FLOOR_S = 0.3
LIVENESS_S = 1.0
LIMIT_KEY = f'request_timeout_s.{MODEL}.nnto'


@dataclass
class System:
    executor: object
    client: ActionClient
    server: object
    bridge: object
    processes: object
    diagnostics: dict[str, str]

    def run_goal(self, timeout_s: float = 30.0) -> tuple[Offload.Result, float]:
        """Send one goal and wait for its result; return it and how long it took."""
        image = np.full((1, 3, 64, 64), 0.5, dtype=np.float32)
        goal = Offload.Goal(model=MODEL, inputs=[to_tensor_blob('image', image)])
        started = time.monotonic()
        sent = self.client.send_goal_async(goal)
        assert spin_until(self.executor, sent.done, timeout_s=10.0), 'goal not answered'
        handle = sent.result()
        assert handle.accepted
        result = handle.get_result_async()
        assert spin_until(self.executor, result.done, timeout_s=timeout_s), self.log()
        return result.result().result, time.monotonic() - started

    def limit_s(self) -> float:
        return float(self.diagnostics.get(LIMIT_KEY, 'nan'))

    def log(self) -> str:
        return '\n'.join(
            f'--- {name}:\n{self.processes.output(process)[-4000:]}'
            for name, process in (('bridge', self.bridge), ('server', self.server))
        )


def _start(tmp_path, monkeypatch, context, executor, processes, factor: float):
    keys = make_test_keys(tmp_path / 'keys')
    port = free_tcp_port()
    monkeypatch.setenv('SLOW_SERVER_DELAY_S', str(DELAY_S))
    server_command = edge_server_node_command(port, keys, [MODEL])
    assert server_command[1:3] == ['-m', 'edge_offload.edge_server_node']
    server = processes.start(
        [sys.executable, str(FIXTURES / 'slow_edge_server.py'), *server_command[3:]],
        name='slow_edge_server',
    )
    bridge = processes.start(
        offload_bridge_node_command(
            port,
            keys,
            [MODEL],
            parallel_goals=1,
            request_timeout_s=FLOOR_S,
            request_timeout_factor=factor,
            max_request_timeout_s=30.0,
            liveness_timeout_s=LIVENESS_S,
            diagnostics_period_s=0.2,
            torch_threads=1,
        ),
        name='offload_bridge',
    )
    node = Node('bridge_request_timeout_test', context=context)
    executor.add_node(node)
    diagnostics: dict[str, str] = {}

    def on_diagnostics(message: DiagnosticArray) -> None:
        for status in message.status:
            if status.name.startswith('offload_bridge'):
                diagnostics.update((item.key, item.value) for item in status.values)

    node.create_subscription(DiagnosticArray, '/diagnostics', on_diagnostics, 10)
    client = ActionClient(node, Offload, 'offload')
    system = System(executor, client, server, bridge, processes, diagnostics)
    assert spin_until(executor, client.server_is_ready, timeout_s=30.0), system.log()
    # Primed with a local goal: the server is not asked, nothing is measured.
    image = np.zeros((1, 3, 64, 64), dtype=np.float32)
    prime_action_client(
        executor,
        client,
        Offload.Goal(model=MODEL, mode='local', inputs=[to_tensor_blob('image', image)]),
    )
    assert spin_until(
        executor, lambda: diagnostics.get('connection') == 'connected', timeout_s=30.0
    ), system.log()
    assert system.limit_s() == pytest.approx(FLOOR_S), diagnostics
    return system, node


@pytest.fixture
def start_system(tmp_path, monkeypatch, ros_context, ros_executor, ros_processes):
    """Return a function that starts the slow server and the bridge with a given factor."""
    started = []

    def start(factor: float) -> System:
        system, node = _start(
            tmp_path, monkeypatch, ros_context, ros_executor, ros_processes, factor
        )
        started.append((system, node))
        return system

    yield start
    # The executor's suspended wait still holds the client's handle; destroying it
    # under that wait deadlocked the executor's shutdown once. Shut down first.
    ros_executor.shutdown()
    for system, node in started:
        system.client.destroy()
        node.destroy_node()


def _measure(system: System) -> Offload.Result:
    """Run the first goal and wait until the bridge has measured the server's answer."""
    first, _ = system.run_goal()
    assert first.error_code == Offload.Result.ERROR_NONE, first.error_message
    # Nothing measured yet: the server had FLOOR_S; its answer takes DELAY_S.
    if first.fell_back:
        assert 'did not answer within 0.300 s' in first.fallback_reason
    assert spin_until(system.executor, lambda: system.limit_s() > FLOOR_S, timeout_s=10.0), (
        f'the limit never grew: {system.diagnostics}\n{system.log()}'
    )
    return first


def test_measured_limit_stops_needless_local_recomputation(start_system):
    system = start_system(factor=2.0)
    first = _measure(system)
    if first.fell_back:
        # The reply came after the bridge gave up on it, and it was measured.
        assert int(system.diagnostics['late_replies_measured']) >= 1
    limit = system.limit_s()
    assert 2 * DELAY_S <= limit < 10.0, system.diagnostics
    assert float(system.diagnostics[f'round_trip_p95_s.{MODEL}.nnto']) >= DELAY_S

    for _ in range(5):
        result, took_s = system.run_goal()
        assert result.error_code == Offload.Result.ERROR_NONE, result.error_message
        assert not result.fell_back, result.fallback_reason
        assert result.mode_used == 'nnto'
        assert result.stats.total_time_s >= DELAY_S  # the server took its time
        assert took_s >= DELAY_S
    # The change of the limit was logged.
    assert spin_until(
        system.executor,
        lambda: (
            f'server time limit for {MODEL} in nnto: 0.30 s ->'
            in system.processes.output(system.bridge)
        ),
        timeout_s=5.0,
    ), system.log()
    assert 'torch threads 1' in system.processes.output(system.bridge)


def test_dead_server_falls_back_by_liveness_not_by_the_measured_limit(start_system):
    system = start_system(factor=10.0)
    _measure(system)
    served, _ = system.run_goal()
    assert not served.fell_back, served.fallback_reason
    limit = system.limit_s()
    assert limit >= 10 * DELAY_S  # a long limit: 6 s or more

    os.killpg(system.server.pid, signal.SIGSTOP)  # alive to the kernel, silent to all
    try:
        result, took_s = system.run_goal()
    finally:
        os.killpg(system.server.pid, signal.SIGKILL)
    assert result.error_code == Offload.Result.ERROR_NONE, result.error_message
    assert result.fell_back
    assert result.mode_used == 'local'
    assert 'did not answer within' not in result.fallback_reason
    # Detected by liveness (pings): about LIVENESS_S, not the 6+ s limit.
    assert took_s < LIVENESS_S + 1.5 < limit, (took_s, result.fallback_reason)
