# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Who gets the next offload: AccuMO's MPC and the dissertation's baselines, one interface.

A policy is asked each time a new frame arrives while no offload is outstanding (§2.3) and
answers with the tasks to offload that frame for: ``()`` none, ``(j,)`` one task, or every
task at once. Baselines (§2.10.2):

* ``la``: local algorithms only, never offload;
* ``rr``: round robin;
* ``wrr:x:y``: task 0 ``x`` times, then task 1 ``y`` times (any number of tasks: ``wrr:3:1:1``);
* ``aao``: all at once, every offloaded frame runs every task's server model;
* ``accumo``: the MPC of :mod:`accumo_ros.scheduler.mpc`.

Plain Python, no ROS: the scheduler node and the evaluator drive the same objects.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Protocol

from accumo_ros.scheduler.mpc import AccuracyEstimate, MpcDecision, MpcScheduler


class OffloadPolicy(Protocol):
    """Chooses the tasks the current frame is offloaded for."""

    name: str

    def choose(
        self,
        frame: int,
        last_offloads: Sequence[int | None],
        estimates: Sequence[AccuracyEstimate],
    ) -> tuple[int, ...]:
        """Return the task indices to offload ``frame`` for (``()``: none)."""
        ...


class LocalOnly:
    """``la``: never offload."""

    name = 'la'

    def choose(self, frame: int, last_offloads: Sequence, estimates: Sequence) -> tuple[int, ...]:  # noqa: ARG002
        """Return ``()``."""
        return ()


class WeightedRoundRobin:
    """``wrr:x:y``: ``counts[j]`` offloads of task j in turn; ``rr`` is all ones."""

    def __init__(self, counts: Sequence[int]) -> None:
        if not counts or min(counts) < 0 or sum(counts) == 0:
            raise ValueError(f'round-robin counts must be >= 0 with one > 0, got {list(counts)}')
        self.counts = tuple(int(c) for c in counts)
        self.name = 'rr' if set(self.counts) == {1} else 'wrr:' + ':'.join(map(str, self.counts))
        self._cycle = itertools.cycle(
            [task for task, count in enumerate(self.counts) for _ in range(count)]
        )

    def choose(self, frame: int, last_offloads: Sequence, estimates: Sequence) -> tuple[int, ...]:  # noqa: ARG002
        """Return the next task of the cycle."""
        return (next(self._cycle),)


class AllAtOnce:
    """``aao``: every offloaded frame goes to every task's server model."""

    name = 'aao'

    def __init__(self, task_count: int) -> None:
        if task_count < 1:
            raise ValueError('all-at-once needs at least one task')
        self.tasks = tuple(range(task_count))

    def choose(self, frame: int, last_offloads: Sequence, estimates: Sequence) -> tuple[int, ...]:  # noqa: ARG002
        """Return every task."""
        return self.tasks


class MpcPolicy:
    """``accumo``: the MPC scheduler, with the run of same-task offloads it needs."""

    name = 'accumo'

    def __init__(self, scheduler: MpcScheduler) -> None:
        self.scheduler = scheduler
        self.last_decision: MpcDecision | None = None
        self._run: tuple[int, int] | None = None  # (task, offloads in a row)
        self._start: int | None = None  # the first frame decided: stride limits count from it

    def choose(
        self,
        frame: int,
        last_offloads: Sequence[int | None],
        estimates: Sequence[AccuracyEstimate],
    ) -> tuple[int, ...]:
        """Return the MPC's task for ``frame``."""
        if self._start is None:
            self._start = frame
        decision = self.scheduler.decide(frame, last_offloads, estimates, self._run, self._start)
        self.last_decision = decision
        same = self._run is not None and self._run[0] == decision.task
        self._run = (decision.task, self._run[1] + 1 if same else 1)
        return (decision.task,)


POLICY_NAMES = ('accumo', 'la', 'rr', 'wrr:X:Y', 'aao')


def make_policy(
    name: str, task_count: int, scheduler: MpcScheduler | None = None
) -> OffloadPolicy:
    """Build the policy called ``name`` (see :data:`POLICY_NAMES`) for ``task_count`` tasks.

    ``accumo`` needs ``scheduler``. Raises ValueError, naming the choices, on anything else.
    """
    key = name.strip().lower()
    if key == 'accumo':
        if scheduler is None:
            raise ValueError("the 'accumo' policy needs an MpcScheduler")
        if len(scheduler.tasks) != task_count:
            raise ValueError(f'the scheduler has {len(scheduler.tasks)} tasks, not {task_count}')
        return MpcPolicy(scheduler)
    if key == 'la':
        return LocalOnly()
    if key == 'aao':
        return AllAtOnce(task_count)
    if key == 'rr':
        return WeightedRoundRobin([1] * task_count)
    if key.startswith('wrr:'):
        try:
            counts = [int(part) for part in key.split(':')[1:]]
        except ValueError:
            counts = []
        if len(counts) != task_count:
            raise ValueError(
                f'{name!r}: wrr needs one count per task ({task_count}), e.g. wrr:2:1'
            )
        return WeightedRoundRobin(counts)
    raise ValueError(f'unknown offload policy {name!r}; use one of {", ".join(POLICY_NAMES)}')
