# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The shutdown contract of the nodes' ``main``: SIGINT ends the process cleanly, once.

A node process gets Ctrl-C twice under ``ros2 launch`` in a terminal (from the terminal and
from launch); it must exit 0 either way, and not wait for a worker thread stuck in work
that cannot be interrupted (a model run).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

# A plain node with a busy non-daemon worker (as a thread pool running a model would be),
# run through run_node as the suite's nodes are.
_NODE = textwrap.dedent(
    """
    import sys, threading, time
    from rclpy.node import Node
    from edge_offload.ros_node_main import run_node

    class Busy(Node):
        def __init__(self):
            super().__init__('busy_node')
            self.worker = threading.Thread(
                target=lambda: time.sleep(600), name='model_run', daemon=False
            )
            self.worker.start()
            self.create_timer(0.05, lambda: None)
            print('ready', flush=True)

    sys.exit(run_node(Busy, 'busy_node', release=lambda node: print('released', flush=True)))
    """
)


def _start() -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, '-c', _NODE],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout.readline().strip() == 'ready'
    return process


@pytest.mark.parametrize('signals', [1, 2, 3], ids=lambda count: f'{count} SIGINT')
def test_sigint_ends_the_node_with_code_0_without_waiting_for_busy_work(ros_domain_id, signals):
    process = _start()
    for _ in range(signals):
        process.send_signal(signal.SIGINT)
        time.sleep(0.05)
    output, _ = process.communicate(timeout=30.0)
    assert process.returncode == 0, f'exit code {process.returncode}:\n{output}'
    assert 'released' in output, output
    assert 'not waiting for 1 busy thread(s): model_run' in output, output
    assert 'KeyboardInterrupt' not in output, output


def test_sigterm_is_a_stop_request_too(ros_domain_id):
    process = _start()
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=30.0)
    assert process.returncode == 0, f'exit code {process.returncode}:\n{output}'
    assert 'released' in output, output
