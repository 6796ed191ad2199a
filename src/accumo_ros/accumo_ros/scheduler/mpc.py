# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""AccuMO's MPC offload scheduler (spec §2.7): which task gets the frame being offloaded.

Plain Python and NumPy, no ROS. When a frame arrives and no offload is outstanding, the
scheduler enumerates every *valid* plan over the next ``N`` frames, simulates the accuracy
drop each plan causes and offloads the current frame for the first task of the best plan.

* **Plans** (``π_i ∈ {0, 1, …, K}``, 0 = no offload): back to back, as the release builds
  them: a task ``j`` followed by ``L_j − 1`` empty slots, repeated until the plan is ``N``
  long (the last offload truncated). ``π_0 ≠ 0`` because the scheduler runs only when the
  channel is free. For L = (2, 2), N = 4 that is the dissertation's four plans; for
  L = (5, 4), N = 30, 135 plans. Plan sets are cached per latency vector, so measured
  latencies that change at run time cost one enumeration per new vector.
* **Simulation**: an offload of task ``j`` started at frame ``o`` is usable from ``o + L_j``
  on; the task's stride at frame ``f`` is ``f − c_j(f)``, with ``c_j(f)`` its latest usable
  offload; its drop is ``δ_j(f) = min(r_j · s_j(f), d_j)`` (tracker drop rate ``r_j``,
  local-algorithm drop ``d_j``, ``+∞`` without a local algorithm; ``s_j`` less the stride
  the task's model measured as free, :class:`AccuracyEstimate`). The plan's cost is
  ``accuracy_merge`` of all ``δ`` over the horizon; :func:`weighted_sum` is the
  dissertation's ``Σ_f Σ_j w_j δ_j(f)``. A task with no usable offload yet counts as
  :data:`UNSEEN_STRIDE` frames stale, so a plan that brings its first result earlier costs
  less (the release's ``∞`` made every plan cost the same).
* **Balance**: per-task stride limits (the release: a plan in which a task goes longer than
  its limit since its latest offload is infeasible) and, optionally, a cap on offloads of one
  task in a row (the dissertation's 3:1). With no feasible plan, the task whose latest
  offload is oldest goes. Stride limits are given for the latencies the scheduler is built
  with; when measured latencies change (:meth:`MpcScheduler.with_latencies`) they scale
  with the round-robin period ``Σ_j L_j``. A fixed limit in frames would mean something
  else on a slower link (the release's 25 frames for L = (5, 4) is under three rounds; for
  L = (14, 14) it is less than one, every plan would break it and the scheduler would
  degrade to round robin).
* **Horizon**: in frames, as configured; where its plans would exceed :data:`MAX_PLANS`
  (short latencies: L = (1, 1) over 30 frames is 2^30 plans) it is shortened until they do
  not (:func:`fitting_horizon`). It does not scale with the latencies as the stride limits
  do: 30 frames are one round at L = (15, 15), and a horizon of the same 3.3 rounds
  (100 frames) made AccuMO worse on five unseen sets at 16 Mbit/s (docs/results.md), the
  models' errors compounding over the longer plans.

Every plan is simulated at once with NumPy: per plan and task, the frames of the latest
started and latest usable offload at each horizon step are precomputed with the plan set;
a decision only shifts them by the state and reduces.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

NO_OFFLOAD = 0
# Frames a task counts as stale before its first usable result (finite, so that earlier
# first results still rank plans; far beyond any horizon).
UNSEEN_STRIDE = 10_000
# Marks "no such offload inside the plan" in the precomputed frame tables.
_NONE = -(10**9)
# The most plans a decision simulates: the horizon is shortened to stay within it. L = (5, 4)
# over 30 frames is 135 plans; 2048 keeps a decision in milliseconds (and the tables in MB).
MAX_PLANS = 2048

# (plans, horizon frames, tasks) drops -> (plans,) costs; lower is better.
MergeFunction = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class TaskSpec:
    """What the scheduler knows of one task besides its accuracy estimates."""

    name: str
    latency_frames: int  # L_j: frames from offloading a frame to its result being usable
    # Infeasible: a plan in which more than this many frames pass since the task's latest
    # offload (None: no limit).
    stride_limit: int | None = None

    def __post_init__(self) -> None:
        if self.latency_frames < 1:
            raise ValueError(f'task {self.name!r}: latency_frames must be >= 1')
        if self.stride_limit is not None and self.stride_limit < self.latency_frames:
            raise ValueError(
                f'task {self.name!r}: stride_limit {self.stride_limit} is below its latency '
                f'{self.latency_frames}: no plan could keep it'
            )


@dataclass(frozen=True)
class AccuracyEstimate:
    """The latest accuracy estimates of one task, held over the horizon.

    ``free_stride`` is the stride up to which the task's accuracy model measured no cost:
    the drop is ``min(r · max(0, s − free_stride), d)``. An odometry model measured by
    raising the stride from ``b`` says nothing about strides below ``b`` (``b`` is where the
    calibration set's fused odometry stopped being as good as at the latency), so the
    scheduler must not spend offloads on them.
    """

    drop_rate: float  # r_j: tracker accuracy drop per frame of stride
    local_drop: float = math.inf  # d_j: local-algorithm drop; inf = no local algorithm
    free_stride: float = 0.0  # frames of stride that cost nothing

    def __post_init__(self) -> None:
        if not (self.drop_rate >= 0.0 and math.isfinite(self.drop_rate)):
            raise ValueError(f'drop_rate must be finite and >= 0, got {self.drop_rate}')
        if not self.local_drop >= 0.0:  # also refuses NaN
            raise ValueError(f'local_drop must be >= 0 (or inf), got {self.local_drop}')
        if not (self.free_stride >= 0.0 and math.isfinite(self.free_stride)):
            raise ValueError(f'free_stride must be finite and >= 0, got {self.free_stride}')

    def drop(self, stride: float | np.ndarray) -> float | np.ndarray:
        """Return the drop ``δ`` at ``stride`` frames since the latest usable result."""
        charged = np.maximum(np.asarray(stride, dtype=float) - self.free_stride, 0.0)
        return np.minimum(self.drop_rate * charged, self.local_drop)


@dataclass(frozen=True)
class MpcDecision:
    """The scheduler's choice for the current frame."""

    task: int  # index into the tasks
    plan: tuple[int, ...]  # the best plan (0 = no offload, j + 1 = task j); () on fallback
    cost: float  # its merged drop; inf on fallback
    feasible_plans: int
    fallback: bool  # no plan was feasible: the task with the oldest offload went


def weighted_sum(weights: Sequence[float]) -> MergeFunction:
    """Return the dissertation's merge: ``Σ_f Σ_j w_j δ_j(f)`` (a weighted average's sum)."""
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or np.any(w < 0.0) or not np.all(np.isfinite(w)):
        raise ValueError(f'weights must be finite and >= 0, got {list(weights)}')

    def merge(drops: np.ndarray) -> np.ndarray:
        return (drops @ w).sum(axis=1)

    return merge


@dataclass(frozen=True)
class PlanSet:
    """Every valid plan for one latency vector and horizon, with its precomputed tables."""

    latencies: tuple[int, ...]
    horizon: int
    plans: np.ndarray  # (P, N) int8: 0 = no offload, j + 1 = task j
    # Per task (K, P, N): horizon step of the latest offload of the task started at or
    # before each step, and of the latest one usable at each step (_NONE if none).
    started: np.ndarray
    usable: np.ndarray
    first_task: np.ndarray  # (P,) task index of π_0
    first_run: np.ndarray  # (P,) offloads of π_0's task in a row from the start
    longest_run: np.ndarray  # (P,) longest run of one task's offloads in the plan

    def __len__(self) -> int:
        return self.plans.shape[0]


def enumerate_plans(latencies: Sequence[int], horizon: int) -> list[tuple[int, ...]]:
    """Return the back-to-back plans of ``horizon`` frames for per-task ``latencies``.

    Each plan is a task number (1-based) at every offload start followed by ``L − 1``
    zeros, the last offload cut at the horizon; in depth-first order of the task choices.
    """
    if horizon < 1 or not latencies or min(latencies) < 1:
        raise ValueError('need horizon >= 1 and latencies >= 1 for at least one task')
    plans: list[tuple[int, ...]] = []

    def extend(prefix: tuple[int, ...]) -> None:
        if len(prefix) >= horizon:
            plans.append(prefix[:horizon])
            return
        for task, latency in enumerate(latencies):
            extend((*prefix, task + 1, *([NO_OFFLOAD] * (latency - 1))))

    extend(())
    return plans


def count_plans(latencies: Sequence[int], horizon: int) -> int:
    """Return ``len(enumerate_plans(latencies, horizon))`` without enumerating them."""
    if horizon < 1 or not latencies or min(latencies) < 1:
        raise ValueError('need horizon >= 1 and latencies >= 1 for at least one task')
    # counts[n]: plans that fill the last n frames; one (the empty rest) once n <= 0.
    counts = [0] * (horizon + 1)
    for n in range(1, horizon + 1):
        counts[n] = sum(counts[n - latency] if n > latency else 1 for latency in latencies)
    return counts[horizon]


def fitting_horizon(latencies: Sequence[int], horizon: int, max_plans: int = MAX_PLANS) -> int:
    """Return the longest horizon up to ``horizon`` whose plans number at most ``max_plans``.

    Never below 1 (a single task choice), whatever ``max_plans`` is.
    """
    fitting = horizon
    while fitting > 1 and count_plans(latencies, fitting) > max_plans:
        fitting -= 1
    return fitting


@lru_cache(maxsize=32)
def plan_set(latencies: tuple[int, ...], horizon: int) -> PlanSet:
    """Return the (cached) :class:`PlanSet` for ``latencies`` and ``horizon``."""
    plans = np.array(enumerate_plans(latencies, horizon), dtype=np.int8)
    count, tasks = plans.shape[0], len(latencies)
    steps = np.arange(horizon)
    started = np.full((tasks, count, horizon), _NONE, dtype=np.int64)
    usable = np.full((tasks, count, horizon), _NONE, dtype=np.int64)
    for task, latency in enumerate(latencies):
        starts = np.where(plans == task + 1, steps, _NONE)
        started[task] = np.maximum.accumulate(starts, axis=1)
        # The offload started at step i is usable from step i + L on.
        shifted = np.full_like(starts, _NONE)
        if latency < horizon:
            shifted[:, latency:] = starts[:, :-latency]
        usable[task] = np.maximum.accumulate(shifted, axis=1)
    first_run = np.zeros(count, dtype=np.int64)
    longest_run = np.zeros(count, dtype=np.int64)
    for index, plan in enumerate(plans):
        order = plan[plan != NO_OFFLOAD]
        runs = np.diff(np.flatnonzero(np.r_[True, order[1:] != order[:-1], True]))
        first_run[index], longest_run[index] = runs[0], runs.max()
    for table in (plans, started, usable, first_run, longest_run):
        table.setflags(write=False)
    first_task = plans[:, 0].astype(np.int64) - 1
    first_task.setflags(write=False)
    return PlanSet(latencies, horizon, plans, started, usable, first_task, first_run, longest_run)


class MpcScheduler:
    """Choose the task to offload the current frame for (spec §2.7, Algorithm 1).

    ``merge`` folds the (plans, horizon, tasks) drops into one cost per plan; it defaults to
    :func:`weighted_sum` with equal weights. ``max_in_a_row`` caps offloads of one task in a
    row (3 for the dissertation's 3:1), counting the history passed to :meth:`decide`.
    ``horizon`` (frames) is shortened where its plans would exceed
    :data:`MAX_PLANS`; :attr:`horizon` is the one in use.
    """

    def __init__(
        self,
        tasks: Sequence[TaskSpec],
        horizon: int = 30,
        merge: MergeFunction | None = None,
        max_in_a_row: int | None = None,
    ) -> None:
        if not tasks:
            raise ValueError('the scheduler needs at least one task')
        if horizon < 1:
            raise ValueError(f'horizon must be >= 1, got {horizon}')
        if max_in_a_row is not None and max_in_a_row < 1:
            raise ValueError(f'max_in_a_row must be >= 1, got {max_in_a_row}')
        self.tasks = tuple(tasks)
        # The tasks as configured: stride limits scale from these (with_latencies).
        self._reference_tasks = self.tasks
        self._configured_horizon = horizon
        self.horizon = fitting_horizon([t.latency_frames for t in self.tasks], horizon)
        self.merge = merge or weighted_sum([1.0] * len(self.tasks))
        self.max_in_a_row = max_in_a_row

    def with_latencies(
        self, latencies: Sequence[int], stride_caps: Sequence[int | None] | None = None
    ) -> MpcScheduler:
        """Return a scheduler with the same settings and new per-task latencies (frames).

        Stride limits scale by the ratio of the new round-robin period ``Σ L`` to the one
        of the latencies this scheduler's lineage was built with (rounded up, and never
        below the task's new latency), so repeated changes do not compound rounding. The
        configured horizon stays (within :data:`MAX_PLANS` for the new latencies).
        ``stride_caps`` (per task, None = none) then lowers a limit to the longest stride
        the task's accuracy model covers: beyond it, the model's cost is extrapolation.
        """
        if len(latencies) != len(self.tasks):
            raise ValueError(f'{len(latencies)} latencies for {len(self.tasks)} tasks')
        caps = list(stride_caps) if stride_caps is not None else [None] * len(self.tasks)
        if len(caps) != len(self.tasks):
            raise ValueError(f'{len(caps)} stride caps for {len(self.tasks)} tasks')
        latencies = [int(latency) for latency in latencies]
        scale = sum(latencies) / sum(t.latency_frames for t in self._reference_tasks)
        tasks = []
        for reference, latency, cap in zip(self._reference_tasks, latencies, caps, strict=True):
            limit = reference.stride_limit
            if limit is not None:
                limit = math.ceil(limit * scale - 1e-9)
            if cap is not None:
                limit = int(cap) if limit is None else min(limit, int(cap))
            tasks.append(
                TaskSpec(reference.name, latency, None if limit is None else max(latency, limit))
            )
        scheduler = MpcScheduler(tasks, self._configured_horizon, self.merge, self.max_in_a_row)
        scheduler._reference_tasks = self._reference_tasks
        return scheduler

    @property
    def plans(self) -> PlanSet:
        """The plan set of the tasks' current latencies."""
        return plan_set(tuple(t.latency_frames for t in self.tasks), self.horizon)

    def decide(
        self,
        frame: int,
        last_offloads: Sequence[int | None],
        estimates: Sequence[AccuracyEstimate],
        history_run: tuple[int, int] | None = None,
        start: int | None = None,
    ) -> MpcDecision:
        """Choose the task for ``frame``; no offload may be outstanding.

        ``last_offloads[j]`` is the frame of task j's latest offload (its result has
        arrived), None if it has none yet; ``history_run`` = (task, count) of the latest
        offloads in a row, for ``max_in_a_row``. ``start``: the frame scheduling began; a
        task never offloaded keeps its stride limit counted from it (without, a task whose
        estimates say its stride costs nothing could wait for ever: a clairvoyant run
        dead-reckoned 9 s before its first odometry offload).
        """
        count = len(self.tasks)
        if len(last_offloads) != count or len(estimates) != count:
            raise ValueError(f'need one last offload and one estimate for each of {count} tasks')
        for last in last_offloads:
            if last is not None and last > frame:
                raise ValueError(f'last offload {last} is after the current frame {frame}')
        plans = self.plans
        if start is not None and start > frame:
            raise ValueError(f'start {start} is after the current frame {frame}')
        feasible = self._feasible(plans, frame, last_offloads, history_run, start)
        if not feasible.any():
            oldest = min(
                range(count),
                key=lambda j: -math.inf if last_offloads[j] is None else last_offloads[j],
            )
            return MpcDecision(oldest, (), math.inf, 0, True)
        drops = self.simulate(plans, frame, last_offloads, estimates, feasible)
        costs = np.asarray(self.merge(drops), dtype=float)
        if costs.shape != (drops.shape[0],):
            raise ValueError(f'merge returned shape {costs.shape}, expected ({drops.shape[0]},)')
        best = int(np.argmin(costs))  # the first of equal plans, as Algorithm 1
        index = int(np.flatnonzero(feasible)[best])
        plan = tuple(int(v) for v in plans.plans[index])
        return MpcDecision(plan[0] - 1, plan, float(costs[best]), int(feasible.sum()), False)

    def simulate(
        self,
        plans: PlanSet,
        frame: int,
        last_offloads: Sequence[int | None],
        estimates: Sequence[AccuracyEstimate],
        chosen: np.ndarray | None = None,
    ) -> np.ndarray:
        """Return the drops ``δ`` (plans, horizon, tasks) of the ``chosen`` plans (mask)."""
        chosen = np.ones(len(plans), dtype=bool) if chosen is None else chosen
        steps = np.arange(plans.horizon)
        drops = np.empty((int(chosen.sum()), plans.horizon, len(self.tasks)))
        for j, (last, estimate) in enumerate(zip(last_offloads, estimates, strict=True)):
            before = -UNSEEN_STRIDE if last is None else last - frame
            stride = steps - np.maximum(plans.usable[j][chosen], before)
            drops[:, :, j] = estimate.drop(stride)
        return drops

    def _feasible(
        self,
        plans: PlanSet,
        frame: int,
        last_offloads: Sequence[int | None],
        history_run: tuple[int, int] | None,
        start: int | None = None,
    ) -> np.ndarray:
        feasible = np.ones(len(plans), dtype=bool)
        steps = np.arange(plans.horizon)
        for j, (task, last) in enumerate(zip(self.tasks, last_offloads, strict=True)):
            if last is None:
                last = start  # never offloaded: the limit counts from the start
            if task.stride_limit is None or last is None:
                continue
            since = steps - np.maximum(plans.started[j], last - frame)
            feasible &= (since <= task.stride_limit).all(axis=1)
        if self.max_in_a_row is not None:
            feasible &= plans.longest_run <= self.max_in_a_row
            if history_run is not None:
                task, run = history_run
                too_long = (plans.first_task == task) & (plans.first_run + run > self.max_in_a_row)
                feasible &= ~too_long
        return feasible
