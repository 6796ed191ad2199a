# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
r"""``accumo_evaluate_e2e``: AccuMO end to end, with real nodes, sockets and an emulated link.

The end-to-end mode of the evaluation (the fast mode is :mod:`accumo_ros.tools.evaluate`). One
generated sequence bag plays through the robot's graph in real time:

    sensor_source (bag, fixed rate) -> accumo_scheduler -> offload_bridge (action)
        -> link emulator (TCP relay, this process) -> edge_server (CURVE-authenticated)

Every part is the one a robot runs, as separate processes talking DDS and ZeroMQ, except
the link emulator, which runs in this process so that it can change the bandwidth at a
known moment (``--halve-at-s``: both directions drop to half the rate). This process also
records the scheduler's outputs and scores them against the bag's ground truth: depth
AbsRel of every published depth map, KITTI t_err of the published odometry, the offloads
and the scheduler's latency estimates ``L_j`` over time.

The replay rate (``--replay-fps``) is what the machine sustains with every model on the
CPU, not the sequence's 60 FPS: the scene advances 1/60 s per frame while the computers
and the link take wall-clock time, so latencies in frames are those of a robot and server
``60 / replay_fps`` times slower. The report states the set-up. Outputs in ``--output``:
``e2e_report.md``, ``e2e_run.json`` and ``e2e_adaptation.png`` (link rate, ``L_j``,
offload ratio and rate over time, with the bandwidth change marked).

    accumo_evaluate_e2e --sequence results/accumo_dataset/high_high_2 \
        --output results/accumo_e2e --frames 300 --halve-at-s 15
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import rclpy
from nav_msgs.msg import Odometry
from rclpy.executors import Executor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image

from accumo_ros.metrics import kitti_errors
from accumo_ros.simulation.sequence_bag import (
    BAG_START_NS,
    CAMERA_INFO_TOPIC,
    IMAGE_TOPIC,
    IMU_TOPIC,
    LoadedSequence,
    read_sequence_bag,
)
from accumo_ros.tools.evaluate import abs_rel
from accumo_ros.tools.odometry_eval import SEGMENT_STEP
from edge_offload.graph_wait import spin_until, wait_for_bridge_connection
from edge_offload.image_convert import imgmsg_to_cv2
from edge_offload.link_emulator import LinkEmulator, LinkEmulatorConfig
from edge_offload.node_processes import (
    LoopbackKeys,
    ProcessGroup,
    edge_server_node_command,
    free_tcp_port,
    loopback_keys,
    node_command,
    offload_bridge_node_command,
)
from edge_offload.stamps import stamp_ns
from offload_interfaces.msg import LinkState, TaskDecision

MODELS = ['accumo_depth', 'accumo_odometry', 'accumo_depth_odometry']
TASKS = ('depth', 'odometry')
RATIO_WINDOW = 8  # offloads in the offload-ratio window (the dissertation's Fig. 2.15)


@dataclass
class E2eSetup:
    """What one end-to-end run is."""

    sequence: str
    policy: str
    weights: tuple[float, float]
    replay_fps: float
    frames: int
    link_mbps: float
    rtt_ms: float
    halve_at_s: float  # seconds after the first frame; 0 = never


@dataclass
class E2eRecord:
    """What the recorder saw, wall-clock seconds since the first decision."""

    decisions: list[dict] = field(default_factory=list)
    depth: list[dict] = field(default_factory=list)
    odometry: dict[int, list[list[float]]] = field(default_factory=dict)
    link: list[dict] = field(default_factory=list)
    halved_at: float | None = None


class _Recorder:
    """Subscribe to the scheduler's outputs and score them as they come."""

    def __init__(self, node: Node, sequence: LoadedSequence) -> None:
        self.sequence = sequence
        self.record = E2eRecord()
        self.start: float | None = None
        reliable = QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE)
        node.create_subscription(TaskDecision, 'accumo/decision', self._decision, reliable)
        node.create_subscription(Image, 'depth', self._depth, reliable)
        node.create_subscription(Odometry, 'odometry', self._odometry, reliable)
        node.create_subscription(LinkState, 'link_state', self._link, 10)

    def now(self) -> float:
        """Seconds since the first decision (0 before it)."""
        return 0.0 if self.start is None else time.monotonic() - self.start

    def _frame(self, stamp) -> int | None:  # noqa: ANN001 - builtin_interfaces/Time
        t = (stamp_ns(stamp) - BAG_START_NS) / 1e9
        times = self.sequence.frame_times
        index = int(np.clip(np.searchsorted(times, t), 0, len(times) - 1))
        for candidate in (index - 1, index):
            if 0 <= candidate < len(times) and abs(times[candidate] - t) < 1e-4:
                return candidate
        return None

    def _decision(self, message: TaskDecision) -> None:
        if self.start is None:
            self.start = time.monotonic()
        self.record.decisions.append(
            {
                't': self.now(),
                'frame': int(message.frame_index),
                'offloaded': int(message.offloaded_task_index),
                'latency_frames': [int(v) for v in message.latency_frames],
                'use_local_algorithm': [bool(v) for v in message.use_local_algorithm],
                'solve_time_s': float(message.solve_time_s),
            }
        )

    def _depth(self, message: Image) -> None:
        frame = self._frame(message.header.stamp)
        if frame is None or message.encoding != '32FC1':
            return
        depth = imgmsg_to_cv2(message)
        error = abs_rel(depth, self.sequence.depth[frame])
        self.record.depth.append({'t': self.now(), 'frame': frame, 'abs_rel': error})

    def _odometry(self, message: Odometry) -> None:
        frame = self._frame(message.header.stamp)
        if frame is None:
            return
        p, q = message.pose.pose.position, message.pose.pose.orientation
        self.record.odometry[frame] = [p.x, p.y, p.z, q.x, q.y, q.z, q.w]

    def _link(self, message: LinkState) -> None:
        self.record.link.append(
            {
                't': self.now(),
                'connected': bool(message.connected),
                'uplink_bps': float(message.uplink_bandwidth_bps),
                'rtt_s': float(message.rtt_s),
            }
        )


def _poses(odometry: dict[int, list[float]]) -> tuple[np.ndarray, np.ndarray]:
    from scipy.spatial.transform import Rotation

    frames = np.array(sorted(odometry))
    values = np.array([odometry[f] for f in frames])
    poses = np.tile(np.eye(4), (len(frames), 1, 1))
    poses[:, :3, :3] = Rotation.from_quat(values[:, 3:]).as_matrix()
    poses[:, :3, 3] = values[:, :3]
    return frames, poses


def offload_series(decisions: list[dict]) -> dict[str, list[float]]:
    """Per offload: time, the depth share of the last RATIO_WINDOW offloads, offloads/s."""
    offloads = [d for d in decisions if d['offloaded'] >= 0]
    times, shares, rates = [], [], []
    for index, decision in enumerate(offloads):
        window = offloads[max(0, index - RATIO_WINDOW + 1) : index + 1]
        times.append(decision['t'])
        shares.append(float(np.mean([d['offloaded'] == 0 for d in window])))
        span = window[-1]['t'] - window[0]['t']
        rates.append((len(window) - 1) / span if span > 0 else math.nan)
    return {'t': times, 'depth_share': shares, 'offloads_per_s': rates}


def adaptation_time(
    decisions: list[dict], halved_at: float | None, fraction: float = 1.0
) -> list[float | None]:
    """Per task: seconds from the bandwidth change until ``L_j`` has made ``fraction`` of its step.

    The step goes from the median ``L_j`` over the second half of the time before the change
    to the median over the second half after it; ``fraction`` 1 is the time until ``L_j``
    first reaches the new level, 0.5 the half-step rise time (robust to a new level that
    sits on a rounding border, e.g. 5 or 6 frames). None when there was no change or
    ``L_j`` never moved.
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f'fraction must be in (0, 1], got {fraction}')
    if halved_at is None:
        return [None, None]
    result: list[float | None] = []
    after = [d for d in decisions if d['t'] >= halved_at]
    before = [d for d in decisions if d['t'] < halved_at]
    for task in range(len(TASKS)):
        if not after or not before:
            result.append(None)
            continue
        old = float(np.median([d['latency_frames'][task] for d in before[len(before) // 2 :]]))
        new = float(np.median([d['latency_frames'][task] for d in after[len(after) // 2 :]]))
        if new <= old:
            result.append(None)
            continue
        level = old + fraction * (new - old)
        reached = next((d['t'] for d in after if d['latency_frames'][task] >= level), None)
        result.append(None if reached is None else reached - halved_at)
    return result


def _link_emulator(setup: E2eSetup, server_port: int) -> LinkEmulator:
    """Return the (not yet started) emulated link to the server, at the set-up's rate."""
    rate_bps = setup.link_mbps * 1e6
    return LinkEmulator(
        LinkEmulatorConfig.from_rtt(
            '127.0.0.1',
            server_port,
            rtt_s=setup.rtt_ms / 1000.0,
            uplink_bps=rate_bps,
            downlink_bps=rate_bps,
        )
    )


def _start_offload_graph(
    setup: E2eSetup,
    processes: ProcessGroup,
    emulator: LinkEmulator,
    keys: LoopbackKeys,
    server_port: int,
    executor: Executor,
    node: Node,
) -> subprocess.Popen:
    """Start the edge server, the link, the bridge and the scheduler; return the scheduler.

    Returns once the bridge is connected through the link and the scheduler publishes
    decisions (RuntimeError with the process's output if either never happens).
    """
    processes.start(edge_server_node_command(server_port, keys, MODELS), name='edge_server')
    emulator.start()
    bridge = processes.start(
        offload_bridge_node_command(
            emulator.port, keys, MODELS, mode='nnto', fallback_to_local=False
        ),
        name='offload_bridge',
    )
    weights = {'depth_weight': setup.weights[0], 'odometry_weight': setup.weights[1]}
    scheduler = processes.start(
        node_command(
            'accumo_ros.scheduler_node',
            policy=setup.policy,
            fps=setup.replay_fps,
            reliable_sensor_qos=True,
            frame_queue_size=4,
            **weights,
        ),
        name='accumo_scheduler',
    )
    if not wait_for_bridge_connection(executor, node, timeout_s=120.0):
        raise RuntimeError('the bridge never connected:\n' + processes.output(bridge))
    if not spin_until(
        executor, lambda: node.count_publishers('accumo/decision') > 0, timeout_s=60.0
    ):
        raise RuntimeError('no scheduler:\n' + processes.output(scheduler))
    return scheduler


def _start_sensor_source(setup: E2eSetup, processes: ProcessGroup) -> None:
    """Start playing the bag into the graph at the replay rate."""
    processes.start(
        node_command(
            'people_following.sensor_source_node',
            source='bag',
            uri=str(setup.sequence),
            bag_image_topic=IMAGE_TOPIC,
            bag_camera_info_topic=CAMERA_INFO_TOPIC,
            bag_imu_topic=IMU_TOPIC,
            rate_mode='fixed',
            rate_hz=setup.replay_fps,
            max_frames=setup.frames,
            wait_for_subscribers=1,
            reliable_sensor_qos=True,
        ),
        name='sensor_source',
    )


def _replay_step(
    setup: E2eSetup, recorder: _Recorder, emulator: LinkEmulator
) -> Callable[[], bool]:
    """Return the spin predicate of the replay: halves the link when due, True when done."""
    rate_bps = setup.link_mbps * 1e6

    def step() -> bool:
        record = recorder.record
        if setup.halve_at_s > 0 and record.halved_at is None:
            if recorder.start is not None and recorder.now() >= setup.halve_at_s:
                emulator.set_uplink(rate_bps / 2)
                emulator.set_downlink(rate_bps / 2)
                record.halved_at = recorder.now()
        return len(record.decisions) >= setup.frames

    return step


def run(setup: E2eSetup, workdir: Path) -> tuple[E2eRecord, LoadedSequence, str]:
    """Start the graph, replay the bag, halve the bandwidth; return what was recorded."""
    sequence = read_sequence_bag(setup.sequence, max_frames=setup.frames)
    keys = loopback_keys(workdir / 'keys')
    server_port = free_tcp_port()
    emulator = _link_emulator(setup, server_port)
    processes = ProcessGroup(workdir)
    rclpy.init()
    node = Node('accumo_e2e_recorder')
    executor = rclpy.executors.SingleThreadedExecutor()
    executor.add_node(node)
    recorder = _Recorder(node, sequence)
    logs = ''
    try:
        scheduler = _start_offload_graph(
            setup, processes, emulator, keys, server_port, executor, node
        )
        _start_sensor_source(setup, processes)
        budget_s = 120.0 + 3.0 * setup.frames / setup.replay_fps
        finished = spin_until(
            executor, _replay_step(setup, recorder, emulator), timeout_s=budget_s
        )
        # The last depth maps and poses are on their way.
        spin_until(executor, lambda: False, timeout_s=2.0)
        logs = processes.output(scheduler)
        if not finished:
            raise RuntimeError(
                f'{len(recorder.record.decisions)} of {setup.frames} frames in {budget_s:.0f} s'
                f':\n{logs}'
            )
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
        processes.stop_all()
        emulator.stop()
    return recorder.record, sequence, logs


def summarise(setup: E2eSetup, record: E2eRecord, sequence: LoadedSequence) -> dict:
    """Accuracy, offloads and adaptation of one run."""
    if not record.depth or len(record.odometry) < 2:
        raise RuntimeError(
            f'{len(record.depth)} depth maps and {len(record.odometry)} poses matched the bag'
        )
    frames, poses = _poses(record.odometry)
    truth = sequence.frame_poses()[frames]
    t_err = kitti_errors(truth, poses, step=SEGMENT_STEP).t_err if len(frames) > 1 else math.nan
    offloads = [d['offloaded'] for d in record.decisions]
    return {
        'setup': asdict(setup),
        'frames_decided': len(record.decisions),
        'depth_maps': len(record.depth),
        'odometry_poses': len(frames),
        'depth_abs_rel': float(np.mean([d['abs_rel'] for d in record.depth])),
        'odometry_t_err': float(t_err),
        'offloads': [offloads.count(task) for task in range(len(TASKS))],
        'halved_at_s': record.halved_at,
        'adaptation_s': adaptation_time(record.decisions, record.halved_at),
        'half_step_s': adaptation_time(record.decisions, record.halved_at, 0.5),
        'solve_time_p99_ms': 1000.0
        * float(np.percentile([d['solve_time_s'] for d in record.decisions], 99)),
    }


def plot(setup: E2eSetup, record: E2eRecord, path: Path) -> None:
    """Link rate, L_j, offload ratio and offload rate over time."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    decisions = record.decisions
    t = [d['t'] for d in decisions]
    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    rate = [
        setup.link_mbps / (2 if record.halved_at is not None and x >= record.halved_at else 1)
        for x in t
    ]
    axes[0].step(t, rate, where='post', label='emulated link (Mbit/s, each way)')
    link = [entry for entry in record.link if entry['uplink_bps'] > 0]
    if link:
        axes[0].plot(
            [e['t'] for e in link],
            [e['uplink_bps'] / 1e6 for e in link],
            '.',
            label="bridge's uplink estimate (link_state)",
        )
    axes[0].set_ylabel('Mbit/s')
    for task, name in enumerate(TASKS):
        axes[1].step(
            t, [d['latency_frames'][task] for d in decisions], where='post', label=f'L {name}'
        )
    axes[1].set_ylabel('latency estimate (frames)')
    series = offload_series(decisions)
    axes[2].plot(series['t'], series['depth_share'], label='depth share of last 8 offloads')
    axes[2].plot(series['t'], series['offloads_per_s'], label='offloads per second')
    axes[2].set_xlabel('wall-clock time (s)')
    for axis in axes:
        if record.halved_at is not None:
            axis.axvline(record.halved_at, color='k', linestyle='--', linewidth=0.8)
        axis.legend(loc='upper right', fontsize=8)
    fig.suptitle(
        f'{Path(setup.sequence).name}, {setup.policy} {setup.weights[0]:g}:{setup.weights[1]:g}, '
        f'{setup.replay_fps:g} FPS replay, {setup.link_mbps:g} Mbit/s, RTT {setup.rtt_ms:g} ms'
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(summary: dict) -> str:
    """Markdown report of one run."""
    s = summary['setup']
    adaptation, half_step = (
        ', '.join(
            f'{name} {"-" if value is None else f"{value:.2f} s"}'
            for name, value in zip(TASKS, summary[key], strict=True)
        )
        for key in ('adaptation_s', 'half_step_s')
    )
    return '\n'.join(
        [
            '# AccuMO end to end',
            '',
            f'Set-up: sequence `{s["sequence"]}`, first {s["frames"]} frames; policy '
            f'{s["policy"]} at weights {s["weights"][0]:g}:{s["weights"][1]:g}; replay at '
            f'{s["replay_fps"]:g} FPS (the scene at 60 FPS: computers and link are '
            f'{60.0 / s["replay_fps"]:g}x slower relative to it); link emulator at '
            f'{s["link_mbps"]:g} Mbit/s each way, RTT {s["rtt_ms"]:g} ms'
            + (
                f', halved at {summary["halved_at_s"]:.1f} s'
                if summary['halved_at_s'] is not None
                else ''
            )
            + '; edge server, bridge, scheduler and sensor source as separate processes on '
            'the CPU.',
            '',
            '| metric | value |',
            '|---|---|',
            f'| frames decided / depth maps / poses | {summary["frames_decided"]} / '
            f'{summary["depth_maps"]} / {summary["odometry_poses"]} |',
            f'| depth AbsRel | {summary["depth_abs_rel"]:.4f} |',
            f'| odometry t_err | {summary["odometry_t_err"]:.4f} |',
            f'| offloads (depth, odometry) | {summary["offloads"]} |',
            f'| L_j half-step rise after the bandwidth halved | {half_step} |',
            f'| L_j at its new level after the bandwidth halved | {adaptation} |',
            f'| MPC decision time p99 | {summary["solve_time_p99_ms"]:.2f} ms |',
            '',
        ]
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='accumo_evaluate_e2e', description=__doc__.split('\n')[0]
    )
    parser.add_argument('--sequence', type=Path, required=True, help='A sequence bag folder.')
    parser.add_argument('--output', type=Path, required=True, help='Folder for the results.')
    parser.add_argument('--policy', default='accumo', help='Scheduler policy.')
    parser.add_argument('--weights', default='1:1', help='depth:odometry weights.')
    parser.add_argument('--frames', type=int, default=300, help='Frames to replay.')
    parser.add_argument('--replay-fps', type=float, default=10.0, help='Replay rate.')
    parser.add_argument('--link-mbps', type=float, default=16.0, help='Link rate, each way.')
    parser.add_argument('--rtt-ms', type=float, default=20.0, help='Round-trip time.')
    parser.add_argument(
        '--halve-at-s', type=float, default=15.0, help='Halve the link then; 0 = never.'
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one end-to-end evaluation; exit code 2 on bad arguments, 1 if the run failed."""
    args = _parser().parse_args(argv)
    try:
        depth_weight, odometry_weight = (float(v) for v in args.weights.split(':'))
    except ValueError:
        print(f'accumo_evaluate_e2e: --weights must be X:Y, got {args.weights!r}', file=sys.stderr)
        return 2
    if args.frames < 2 or args.replay_fps <= 0 or args.link_mbps <= 0 or args.rtt_ms < 0:
        print('accumo_evaluate_e2e: need --frames >= 2 and positive rates', file=sys.stderr)
        return 2
    setup = E2eSetup(
        str(args.sequence),
        args.policy,
        (depth_weight, odometry_weight),
        args.replay_fps,
        args.frames,
        args.link_mbps,
        args.rtt_ms,
        args.halve_at_s,
    )
    args.output.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix='accumo_e2e_') as workdir:
        try:
            record, sequence, _ = run(setup, Path(workdir))
        except (RuntimeError, OSError) as error:
            print(f'accumo_evaluate_e2e: {error}', file=sys.stderr)
            return 1
    try:
        summary = summarise(setup, record, sequence)
    except RuntimeError as error:
        print(f'accumo_evaluate_e2e: {error}', file=sys.stderr)
        return 1
    (args.output / 'e2e_run.json').write_text(
        json.dumps({'summary': summary, 'record': asdict(record)}, indent=1)
    )
    plot(setup, record, args.output / 'e2e_adaptation.png')
    text = report(summary)
    (args.output / 'e2e_report.md').write_text(text)
    print(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
