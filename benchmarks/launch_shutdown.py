# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""How long each node of ``kapao_tracking.launch.py`` takes to exit after Ctrl-C.

Set-up (printed with the results): ``ros2 launch bringup kapao_tracking.launch.py`` with a
local edge server on this machine (``start_edge_server:=true``), the README's video
(``source:=video uri:=asset:media/opencv/vtest.avi``), following on or off, in a process
group of its own; its own home folder with keys from ``edge_offload_keygen``. After the
first offloaded people result and ``--warm-s`` more seconds, SIGINT goes to the whole
group, as Ctrl-C in a terminal does (each node gets it twice: from the terminal and from
ros2 launch). ``--busy-cores N`` runs N busy-loop processes the whole time. The exit time
of a process is when ros2 launch logged its exit (``launch.log``), counted from the SIGINT;
ros2 launch escalates to SIGTERM after 5 s.

Needs the ROS 2 command line (``source tools/ros2_launch_env.sh`` after
``tools/workspace_env.sh``). Writes ``shutdown.csv`` to ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing
import os
import statistics
import tempfile
from pathlib import Path

import rclpy
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from edge_offload_testing import free_tcp_port, reserve_domain_id, spin_until
from edge_offload_testing.ros2_cli import Ros2Launch, ros2_cli_missing, run_ros2
from offload_interfaces.msg import PersonArray


def _burn(stop: multiprocessing.Event) -> None:
    while not stop.is_set():
        sum(range(10_000))


def _one_run(directory: Path, follow: bool, warm_s: float) -> dict[str, tuple[float, int]]:
    port = free_tcp_port()
    launch = Ros2Launch(
        [
            'bringup',
            'kapao_tracking.launch.py',
            'source:=video',
            'uri:=asset:media/opencv/vtest.avi',
            'start_edge_server:=true',
            f'follow:={str(follow).lower()}',
            f'server_endpoint:=tcp://127.0.0.1:{port}',
        ],
        directory,
        'graph',
    )
    context = rclpy.Context()
    context.init()
    try:
        executor = rclpy.executors.SingleThreadedExecutor(context=context)
        node = Node('shutdown_benchmark', context=context)
        offloaded: list[bool] = []
        node.create_subscription(
            PersonArray,
            'people',
            lambda message: offloaded.append(message.offload_mode == 'nnto'),
            QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE),
        )
        executor.add_node(node)
        if not spin_until(executor, lambda: any(offloaded), timeout_s=180.0):
            raise RuntimeError(f'no offloaded result:\n{launch.output()[-2000:]}')
        spin_until(executor, lambda: False, timeout_s=warm_s)
        code = launch.interrupt()
        exits = {
            event.process: (event.time - launch.interrupted_at, event.exit_code)
            for event in launch.events()
            if event.kind == 'exited' and event.time >= launch.interrupted_at
        }
        exits['ros2 launch'] = (launch.exited_after_s, code)
        node.destroy_node()
        executor.shutdown()
        return exits
    finally:
        context.try_shutdown()
        launch.close()


def main() -> int:
    """Run the measurement and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--busy-cores', type=int, default=2)
    parser.add_argument('--warm-s', type=float, default=5.0)
    parser.add_argument('--follow', action='store_true', help='also the AccuMO/follow nodes')
    parser.add_argument('--out', type=Path, default=Path('results/launch_shutdown'))
    args = parser.parse_args()
    missing = ros2_cli_missing()
    if missing:
        parser.error(missing)
    args.out.mkdir(parents=True, exist_ok=True)
    print(
        f'set-up: ros2 launch kapao_tracking.launch.py, local edge server, vtest.avi, follow '
        f'{args.follow}, {args.busy_cores} busy-loop processes on {os.cpu_count()} cores, '
        f'Ctrl-C to the process group {args.warm_s:.0f} s after the first offloaded result, '
        f'{args.runs} runs'
    )
    stop = multiprocessing.Event()
    burners = [multiprocessing.Process(target=_burn, args=(stop,)) for _ in range(args.busy_cores)]
    rows = []
    with tempfile.TemporaryDirectory(prefix='launch_shutdown_') as scratch:
        home = Path(scratch) / 'home'
        home.mkdir()
        os.environ['HOME'] = str(home)
        with reserve_domain_id() as domain_id:
            os.environ['ROS_DOMAIN_ID'] = str(domain_id)
            os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
            run_ros2('run', 'edge_offload', 'edge_offload_keygen')
            for burner in burners:
                burner.start()
            try:
                for run in range(args.runs):
                    exits = _one_run(Path(scratch) / f'run{run}', args.follow, args.warm_s)
                    rows += [(run, name, s, code) for name, (s, code) in sorted(exits.items())]
            finally:
                stop.set()
                for burner in burners:
                    burner.join()
                run_ros2('daemon', 'stop')
    with (args.out / 'shutdown.csv').open('w', newline='') as file:
        csv.writer(file).writerows([('run', 'process', 'exit_s', 'exit_code'), *rows])
    print(f'{"process":<22} {"exit codes":<12} {"median s":>9} {"max s":>7}')
    for name in sorted({row[1] for row in rows}):
        times = [row[2] for row in rows if row[1] == name]
        codes = sorted({row[3] for row in rows if row[1] == name})
        print(
            f'{name:<22} {",".join(map(str, codes)):<12} {statistics.median(times):9.2f} '
            f'{max(times):7.2f}'
        )
    print(f'wrote {args.out / "shutdown.csv"}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
