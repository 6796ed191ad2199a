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

from edge_offload.ros_node_main import HARD_LIMIT_S

# A plain node with a busy non-daemon worker (as a thread pool running a model would be),
# run through run_node as the suite's nodes are. The watchdog is moved out of the way: these
# tests are about the order of the shutdown, and on a loaded machine the default 1.8 s can
# pass before the node gets the CPU to release (the watchdog has its own test below).
_NODE = textwrap.dedent(
    """
    import sys, threading, time
    from rclpy.node import Node
    from edge_offload import stop_signals
    from edge_offload.ros_node_main import run_node
    stop_signals.WATCHDOG_S = 30.0
    stop_signals.HARD_LIMIT_S = 40.0

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


def _start(source: str = _NODE) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, '-c', source],
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


# A clean-up that does not end (but lets Python run, as a join on a stuck thread would).
_SLOW_CLEANUP_NODE = textwrap.dedent(
    """
    import sys, time
    from rclpy.node import Node
    from edge_offload.ros_node_main import run_node

    class Slow(Node):
        def __init__(self):
            super().__init__('slow_node')
            print('ready', flush=True)

    def wait_for_the_stuck_thing(node):
        print('releasing', flush=True)
        time.sleep(600)

    sys.exit(run_node(Slow, 'slow_node', release=wait_for_the_stuck_thing))
    """
)


def test_a_cleanup_past_the_watchdog_is_cut_short_with_where_it_was(ros_domain_id):
    process = _start(_SLOW_CLEANUP_NODE)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=10 * HARD_LIMIT_S)
    assert process.returncode == 0, f'exit code {process.returncode}:\n{output}'
    assert 'releasing' in output, output
    assert '[slow_node] clean-up still running 1.8 s after the stop request' in output, output
    assert 'in wait_for_the_stuck_thing' in output, output  # the main thread's stack


# A clean-up stuck in native code that keeps the GIL (ctypes.PyDLL does not release it), as
# a DDS teardown that never returns would: no Python thread runs again in this process.
_STUCK_NODE = textwrap.dedent(
    """
    import ctypes, sys
    from rclpy.node import Node
    from edge_offload.ros_node_main import run_node

    class Stuck(Node):
        def __init__(self):
            super().__init__('stuck_node')
            print('ready', flush=True)

    def release(node):
        print('releasing', flush=True)
        ctypes.PyDLL(None).sleep(600)

    sys.exit(run_node(Stuck, 'stuck_node', release=release))
    """
)


def test_a_cleanup_stuck_holding_the_gil_ends_with_tracebacks_before_launch_escalates(
    ros_domain_id,
):
    process = _start(_STUCK_NODE)
    process.send_signal(signal.SIGINT)
    try:
        output, _ = process.communicate(timeout=10 * HARD_LIMIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        pytest.fail(f'still running {10 * HARD_LIMIT_S} s after SIGINT:\n{output}')
    # Ended by faulthandler's thread: exit code 1 and where every thread was stuck.
    assert process.returncode == 1, f'exit code {process.returncode}:\n{output}'
    assert 'releasing' in output, output
    assert 'Timeout (0:00:0' in output, output  # faulthandler's heading
    assert 'in release' in output, output
