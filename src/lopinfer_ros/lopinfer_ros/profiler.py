# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Profile a captured graph and turn it into the planner's ``PlanProblem``.

Each local operator is timed on this machine at several slice widths (1/8, 1/4, 1/2 and
all of its columns: small kernels do not scale linearly), atomic ones whole; the median
of ``repeats`` runs after one warm-up. Serialisation cost is measured against message
size with the real wire encoder. A profile is a plain JSON-able dict, hashed so that a
plan table names the profile it was planned from.

The robot's costs are the measured ones times ``device_factor`` (the emulated slower
robot, spec: the seeds' KAPAO device/server ratio is about 19); the server's are the
measured ones divided by ``server_speedup`` (1 when, as here, both run on one CPU).

Calibration: an operator timed in a tight loop runs warm. On the emulated robot each
operator follows a sleep of (factor - 1) times the previous one, and there it measured
about 1.3x slower for KAPAO-S (1.5x at the median operator; small kernels suffer most).
So with ``device_factor`` > 1 the profile also times the whole graph as the robot runs
it, sleeps included, and ``build_problem`` rescales each operator's robot curve to that
in-situ time (the curve's shape over widths comes from the loop timings).

The runtime also spends time per operator outside the kernel (waiting for and merging
pieces, handing slices to the sender, releasing them): ``runner_overhead_s``, measured
as the wall time of a robot-only run minus its kernels, per operator, and charged to
every operator on both sides (it is not slowed by the device factor: the emulation
sleeps only after kernels).
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from collections.abc import Sequence
from typing import Any

import torch

from edge_offload import protocol
from lopinfer_ros.graph import OpGraph
from lopinfer_ros.locality import NodeInfo, Piece, run_slice
from lopinfer_ros.problem import ATOMIC, INPUT, LOCAL, CostCurve, Plan, PlanNode, PlanProblem
from lopinfer_ros.runtime import Mailbox, SideRunner
from lopinfer_ros.schedule import ROBOT, make_schedule

FRACTIONS = (0.125, 0.25, 0.5, 1.0)
PROFILE_FORMAT = 1


def sample_widths(width: int) -> list[int]:
    """Return the distinct column counts a node of ``width`` columns is timed at."""
    return sorted({max(1, round(width * fraction)) for fraction in FRACTIONS})


def profile_graph(
    graph: OpGraph,
    infos: Sequence[NodeInfo],
    inputs: Sequence[torch.Tensor],
    *,
    repeats: int = 3,
    progress: bool = False,
    device_factor: float = 1.0,
    calibration_runs: int = 1,
) -> dict[str, Any]:
    """Time every node at its sample widths; return ``{'nodes': [[widths, seconds]...]}``.

    With ``device_factor`` > 1 and ``calibration_runs`` > 0 the profile also holds
    ``device_in_situ``: each node's whole-width time in a robot-only run slowed by that
    factor (the median over the runs).
    """
    values = graph.run_all(inputs)
    pieces = {index: Piece(tensor, 0, infos[index].width) for index, tensor in enumerate(values)}
    rows: list[list[list[float]]] = []
    nodes = graph.nodes
    iterator = nodes
    if progress:
        from tqdm import tqdm

        iterator = tqdm(nodes, desc='profiling operators', unit='op')
    with torch.inference_mode():
        for node in iterator:
            if node.op == 'input':
                rows.append([[1], [0.0]])
                continue
            widths = sample_widths(infos[node.index].width)
            seconds = []
            for width in widths:
                run_slice(graph, infos, node, pieces, 0, width)  # warm-up
                samples = []
                for _ in range(repeats):
                    started = time.perf_counter()
                    run_slice(graph, infos, node, pieces, 0, width)
                    samples.append(time.perf_counter() - started)
                seconds.append(statistics.median(samples))
            rows.append([widths, seconds])
    profile = {
        'format': PROFILE_FORMAT,
        'graph_hash': graph.hash,
        'torch_threads': torch.get_num_threads(),
        'nodes': rows,
        'serialisation': measure_serialisation(),
    }
    if calibration_runs > 0:
        _, overhead_s = time_in_situ(graph, infos, inputs, 1.0, calibration_runs)
        profile['runner_overhead_s'] = overhead_s
    if device_factor > 1.0 and calibration_runs > 0:
        seconds, _ = time_in_situ(graph, infos, inputs, device_factor, calibration_runs)
        profile['device_in_situ'] = {'device_factor': float(device_factor), 'seconds': seconds}
    return profile


def time_in_situ(
    graph: OpGraph,
    infos: Sequence[NodeInfo],
    inputs: Sequence[torch.Tensor],
    slowdown: float,
    runs: int = 1,
) -> tuple[list[float], float]:
    """Time robot-only runs slowed by ``slowdown`` (medians over ``runs``).

    Returns each node's kernel time and the runner's own time per computed operator.
    """
    everything = tuple(info.width for info in infos)
    schedule = make_schedule(graph, infos, Plan(everything, everything))
    samples: list[list[float]] = [[] for _ in graph.nodes]
    overheads = []
    for _ in range(runs):
        runner = SideRunner(
            graph,
            infos,
            schedule,
            ROBOT,
            mailbox=Mailbox(0),
            sender=None,
            slowdown=slowdown,
        )
        started = time.perf_counter()
        runner.run(list(inputs))
        wall_s = time.perf_counter() - started
        stats = runner.stats
        for index, compute_s in stats.compute_by_node.items():
            samples[index].append(compute_s)
        outside_s = wall_s - stats.compute_s - stats.emulated_wait_s
        overheads.append(max(0.0, outside_s) / max(1, len(stats.compute_by_node)))
    seconds = [statistics.median(values) if values else 0.0 for values in samples]
    return seconds, statistics.median(overheads)


def measure_serialisation(sizes: Sequence[int] = (1_000, 100_000, 1_000_000, 4_000_000)) -> dict:
    """Fit encode + decode seconds = a + b * bytes with the real wire codec."""
    xs, ys = [], []
    for size in sizes:
        tensor = torch.zeros(size // 4, dtype=torch.float32)
        message = protocol.Message(protocol.CALL, 1, {'op': 'x'}, {'t': tensor})
        samples = []
        for _ in range(3):
            started = time.perf_counter()
            frames = protocol.encode(message)
            protocol.decode([bytes(frame) for frame in frames])
            samples.append(time.perf_counter() - started)
        xs.append(size)
        ys.append(statistics.median(samples))
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mean_x) ** 2 for x in xs
    )
    return {'per_message_s': max(0.0, mean_y - slope * mean_x), 'per_byte_s': max(0.0, slope)}


def profile_hash(profile: dict[str, Any]) -> str:
    """Return a short stable hash of a profile."""
    text = json.dumps(profile, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_problem(
    name: str,
    graph: OpGraph,
    infos: Sequence[NodeInfo],
    profile: dict[str, Any],
    *,
    device_factor: float = 1.0,
    server_speedup: float = 1.0,
) -> PlanProblem:
    """Return the planner's view of ``graph`` with costs from ``profile``."""
    if profile.get('graph_hash') != graph.hash:
        raise ValueError(
            f'profile is of graph {profile.get("graph_hash")}, not of this graph {graph.hash}'
        )
    if device_factor <= 0 or server_speedup <= 0:
        raise ValueError('device_factor and server_speedup must be > 0')
    in_situ = profile.get('device_in_situ') or {}
    if abs(float(in_situ.get('device_factor', 0.0)) - device_factor) > 1e-9:
        in_situ = {}  # calibrated for another slowdown: loop timings only
    in_situ_s = in_situ.get('seconds') or [None] * len(graph.nodes)
    overhead_s = float(profile.get('runner_overhead_s', 0.0))
    nodes = []
    for node, info, (widths, seconds), robot_s in zip(
        graph.nodes, infos, profile['nodes'], in_situ_s, strict=True
    ):
        curve = CostCurve(tuple(int(w) for w in widths), tuple(float(s) for s in seconds))
        device_scale = device_factor
        if robot_s is not None and curve.seconds[-1] > 0:
            device_scale *= float(robot_s) / curve.seconds[-1]
        lows, highs = [], []
        for k, producer in enumerate(node.inputs):
            producer_width = infos[producer].width
            if info.atomic or infos[producer].split is None:
                whole = (0, producer_width) if info.atomic else (0, 1)
                lows.append((whole[0],) * info.width)
                highs.append((whole[1],) * info.width)
                continue
            pairs = [info.rule.need(k, j, j + 1) for j in range(info.width)]
            lows.append(tuple(lo for lo, _ in pairs))
            highs.append(tuple(hi for _, hi in pairs))
        kind = INPUT if node.op == 'input' else (ATOMIC if info.atomic else LOCAL)
        overhead = 0.0 if kind == INPUT else overhead_s
        nodes.append(
            PlanNode(
                name=f'{node.index}:{node.op}',
                op=node.op,
                kind=kind,
                width=info.width,
                inputs=tuple(node.inputs),
                need_lo=tuple(lows),
                need_hi=tuple(highs),
                column_bytes=max(1, node.nbytes // info.width),
                device=curve.scaled(device_scale).plus(overhead),
                server=curve.scaled(1.0 / server_speedup).plus(overhead),
            )
        )
    input_bytes = sum(graph.nodes[i].nbytes for i in range(graph.num_inputs))
    return PlanProblem(
        model=name,
        graph_hash=graph.hash,
        nodes=tuple(nodes),
        outputs=tuple(graph.outputs),
        input_bytes=input_bytes,
        profile_hash=profile_hash(profile),
    )
