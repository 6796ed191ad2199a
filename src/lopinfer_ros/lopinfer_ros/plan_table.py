# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Per-bandwidth plan tables (spec 3.10): one LOSS plan per 1 MB/s bucket, 0..30 MB/s.

Units: 1 MB = 1e6 bytes, so bucket ``b`` covers ``[b, b + 1)`` MB/s = ``[b * 1e6,
(b + 1) * 1e6)`` bytes/s; :func:`bucket_for` floors (conservative) and clamps to the table
range. Bucket ``b`` is planned at ``max(b, 0.25)`` MB/s, so bucket 0 means "barely a
link", not "no link" (the fallback when the link is down is the runtime's business).

Both sides index the same table, so it is plain JSON with a format version, the model
name and graph hash it was built for (refused on mismatch), the profile hash, the link
model, the caller's device factor and the planner settings. Tables are built offline with
:func:`build_table`, buckets in parallel across processes.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import inspect
import json
import math
import multiprocessing
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from lopinfer_ros.baselines import (
    DEVICE_ONLY,
    LAYER_SPLIT,
    LOPINFER,
    SERVER_ONLY,
    device_only,
    server_only,
)
from lopinfer_ros.planner import loss
from lopinfer_ros.problem import LinkModel, Plan, PlanProblem

FORMAT = 'lopinfer-plan-table'
FORMAT_VERSION = 1
MB = 1_000_000  # bytes in the MB of "MB/s" buckets
MAX_BUCKET = 30
MIN_PLANNED_MB_PER_S = 0.25
MODES = (LOPINFER, LAYER_SPLIT, DEVICE_ONLY, SERVER_ONLY)


def bucket_for(bandwidth_bytes_per_s: float) -> int:
    """Return the table bucket of a bandwidth: floor in MB/s, clamped to [0, 30]."""
    if not bandwidth_bytes_per_s > 0:  # also NaN
        return 0
    if math.isinf(bandwidth_bytes_per_s):
        return MAX_BUCKET
    return max(0, min(MAX_BUCKET, int(math.floor(bandwidth_bytes_per_s / MB))))


def planned_bandwidth(bucket: int) -> float:
    """Return the bandwidth in bytes/s a bucket is planned at."""
    return max(float(bucket), MIN_PLANNED_MB_PER_S) * MB


@dataclass(frozen=True)
class TableEntry:
    """The plans and predictions of one bandwidth bucket."""

    bucket: int
    bandwidth_bytes_per_s: float
    lopinfer: Plan
    layer_split: Plan
    # Per mode (MODES): predicted latency and bytes each way, from the simulator.
    makespan_s: dict[str, float]
    bytes_up: dict[str, int]
    bytes_down: dict[str, int]
    # Where the lopinfer plan came from: 'lopinfer', or the baseline that beat the search.
    source: str = LOPINFER


@dataclass
class PlanTable:
    """A model's plan per bandwidth bucket, with what it was built for."""

    model: str
    graph_hash: str
    profile_hash: str
    link: LinkModel
    device_factor: float
    device_only: Plan
    server_only: Plan
    entries: dict[int, TableEntry]
    planner: dict[str, Any] = field(default_factory=dict)
    created: str = ''

    def bucket_for(self, bandwidth_bytes_per_s: float) -> int:
        """Return the planned bucket to run at a bandwidth.

        That is the bandwidth's bucket (floor in MB/s, clamped to [0, 30]) when the table
        has it. A table planned for some buckets only (``build_table(buckets=...)``) gives
        the nearest planned bucket below, which assumes no more bandwidth than measured,
        else its lowest.
        """
        wanted = bucket_for(bandwidth_bytes_per_s)
        if wanted in self.entries or not self.entries:
            return wanted
        below = [bucket for bucket in self.entries if bucket <= wanted]
        return max(below) if below else min(self.entries)

    def entry(self, bucket: int) -> TableEntry:
        """Return the entry of ``bucket``; KeyError if the table has none."""
        try:
            return self.entries[bucket]
        except KeyError:
            raise KeyError(f'plan table of {self.model} has no bucket {bucket}') from None

    def plan(self, mode: str, bucket: int) -> Plan:
        """Return the plan of ``mode`` (one of MODES) for ``bucket``."""
        if mode == DEVICE_ONLY:
            return self.device_only
        if mode == SERVER_ONLY:
            return self.server_only
        if mode == LOPINFER:
            return self.entry(bucket).lopinfer
        if mode == LAYER_SPLIT:
            return self.entry(bucket).layer_split
        raise ValueError(f'unknown mode {mode!r}; expected one of {", ".join(MODES)}')

    def to_json(self) -> dict[str, Any]:
        """Return the table as JSON-ready data."""
        return {
            'format': FORMAT,
            'format_version': FORMAT_VERSION,
            'model': self.model,
            'graph_hash': self.graph_hash,
            'profile_hash': self.profile_hash,
            'device_factor': self.device_factor,
            'created': self.created,
            'bucket_unit_bytes_per_s': MB,
            'link': dataclasses.asdict(self.link),
            'planner': self.planner,
            'device_only': _plan_json(self.device_only),
            'server_only': _plan_json(self.server_only),
            'entries': [_entry_json(self.entries[b]) for b in sorted(self.entries)],
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the table to ``path`` as JSON (atomically: a reader never sees half)."""
        tmp = f'{os.fspath(path)}.tmp{os.getpid()}'
        with open(tmp, 'w', encoding='utf-8') as f:
            json.dump(self.to_json(), f, indent=1)
            f.write('\n')
        os.replace(tmp, path)

    @classmethod
    def from_json(
        cls,
        data: Any,
        *,
        expect_model: str | None = None,
        expect_graph_hash: str | None = None,
        source: str = 'plan table',
    ) -> PlanTable:
        """Return the table in ``data``; ValueError if it is malformed or for another model."""
        if not isinstance(data, dict):
            raise ValueError(f'{source}: not a JSON object')
        if data.get('format') != FORMAT:
            raise ValueError(
                f'{source}: not a LOPInfer plan table (format {data.get("format")!r})'
            )
        if data.get('format_version') != FORMAT_VERSION:
            raise ValueError(
                f'{source}: format version {data.get("format_version")!r} is not supported '
                f'(this code reads version {FORMAT_VERSION}); rebuild the table'
            )
        model = _field(data, 'model', str, source)
        graph_hash = _field(data, 'graph_hash', str, source)
        if expect_model is not None and model != expect_model:
            raise ValueError(f'{source}: built for model {model!r}, not {expect_model!r}')
        if expect_graph_hash is not None and graph_hash != expect_graph_hash:
            raise ValueError(
                f'{source}: built for graph {graph_hash!r} of {model!r}, but the model now has '
                f'graph {expect_graph_hash!r}; rebuild the table'
            )
        try:
            link = LinkModel(**_field(data, 'link', dict, source))
        except TypeError as exc:
            raise ValueError(f'{source}: bad link model: {exc}') from None
        dev = _plan_from(data.get('device_only'), f'{source}: device_only')
        srv = _plan_from(data.get('server_only'), f'{source}: server_only')
        n = len(dev.m)
        if len(srv.m) != n:
            raise ValueError(f'{source}: device_only and server_only plans differ in length')
        entries: dict[int, TableEntry] = {}
        for raw in _field(data, 'entries', list, source):
            entry = _entry_from(raw, n, source)
            if entry.bucket in entries:
                raise ValueError(f'{source}: bucket {entry.bucket} appears twice')
            entries[entry.bucket] = entry
        device_factor = data.get('device_factor')
        if not isinstance(device_factor, int | float) or isinstance(device_factor, bool):
            raise ValueError(f'{source}: device_factor must be a number')
        planner = data.get('planner', {})
        if not isinstance(planner, dict):
            raise ValueError(f'{source}: planner settings must be an object')
        return cls(
            model=model,
            graph_hash=graph_hash,
            profile_hash=_field(data, 'profile_hash', str, source),
            link=link,
            device_factor=float(device_factor),
            device_only=dev,
            server_only=srv,
            entries=entries,
            planner=planner,
            created=str(data.get('created', '')),
        )

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        expect_model: str | None = None,
        expect_graph_hash: str | None = None,
    ) -> PlanTable:
        """Read a table saved by :meth:`save`; ValueError if malformed or for another model."""
        try:
            with open(path, encoding='utf-8') as f:
                data = json.load(f)
        except json.JSONDecodeError as exc:
            raise ValueError(f'{path}: not valid JSON: {exc}') from None
        return cls.from_json(
            data, expect_model=expect_model, expect_graph_hash=expect_graph_hash, source=str(path)
        )


def _plan_json(plan: Plan) -> dict[str, list[int]]:
    return {'m': list(plan.m), 'r': list(plan.r)}


def _entry_json(entry: TableEntry) -> dict[str, Any]:
    return {
        'bucket': entry.bucket,
        'bandwidth_bytes_per_s': entry.bandwidth_bytes_per_s,
        'source': entry.source,
        'lopinfer': _plan_json(entry.lopinfer),
        'layer_split': _plan_json(entry.layer_split),
        'makespan_s': entry.makespan_s,
        'bytes_up': entry.bytes_up,
        'bytes_down': entry.bytes_down,
    }


def _field(data: dict[str, Any], name: str, kind: type, source: str) -> Any:
    value = data.get(name)
    if not isinstance(value, kind):
        raise ValueError(f'{source}: field {name!r} is missing or not a {kind.__name__}')
    return value


def _plan_from(raw: Any, source: str) -> Plan:
    if not isinstance(raw, dict):
        raise ValueError(f'{source}: a plan must be an object with m and r')
    m, r = raw.get('m'), raw.get('r')
    if not isinstance(m, list) or not isinstance(r, list) or len(m) != len(r):
        raise ValueError(f'{source}: a plan needs lists m and r of one length')
    for a, b in zip(m, r, strict=True):
        if type(a) is not int or type(b) is not int or not 0 <= b <= a:
            raise ValueError(f'{source}: plan entries must be integers with 0 <= r <= m')
    return Plan(tuple(m), tuple(r))


def _entry_from(raw: Any, n: int, source: str) -> TableEntry:
    if not isinstance(raw, dict):
        raise ValueError(f'{source}: an entry must be an object')
    bucket = raw.get('bucket')
    if type(bucket) is not int or not 0 <= bucket <= MAX_BUCKET:
        raise ValueError(f'{source}: bad bucket {bucket!r}')
    where = f'{source}: bucket {bucket}'
    plans = {
        mode: _plan_from(raw.get(mode), f'{where} {mode}') for mode in (LOPINFER, LAYER_SPLIT)
    }
    for mode, plan in plans.items():
        if len(plan.m) != n:
            raise ValueError(f'{where}: the {mode} plan has {len(plan.m)} nodes, not {n}')
    tables = {}
    for name, kind in (('makespan_s', (int, float)), ('bytes_up', int), ('bytes_down', int)):
        value = raw.get(name)
        if not isinstance(value, dict) or set(value) != set(MODES):
            raise ValueError(f'{where}: {name} needs one value per mode {MODES}')
        if not all(isinstance(x, kind) and not isinstance(x, bool) for x in value.values()):
            raise ValueError(f'{where}: {name} values must be numbers')
        tables[name] = value
    bandwidth = raw.get('bandwidth_bytes_per_s')
    if not isinstance(bandwidth, int | float) or not bandwidth > 0:
        raise ValueError(f'{where}: bandwidth_bytes_per_s must be a positive number')
    source_mode = raw.get('source', LOPINFER)
    if source_mode not in MODES:
        raise ValueError(f'{where}: unknown source {source_mode!r}')
    return TableEntry(
        bucket=bucket,
        bandwidth_bytes_per_s=float(bandwidth),
        lopinfer=plans[LOPINFER],
        layer_split=plans[LAYER_SPLIT],
        makespan_s={k: float(v) for k, v in tables['makespan_s'].items()},
        bytes_up=dict(tables['bytes_up']),
        bytes_down=dict(tables['bytes_down']),
        source=source_mode,
    )


# -- building -----------------------------------------------------------------------------

# Set in each worker process once (the problem travels once per worker, not per bucket).
_WORKER: dict[str, Any] = {}


def _init_worker(problem: PlanProblem, link: LinkModel, kwargs: dict[str, Any]) -> None:
    _WORKER['problem'] = problem
    _WORKER['link'] = link
    _WORKER['kwargs'] = kwargs


def _plan_bucket(bucket: int) -> TableEntry:
    """Plan one bucket with the worker's problem (module level: spawn-safe)."""
    return _plan_one(_WORKER['problem'], _WORKER['link'], _WORKER['kwargs'], bucket)


def _plan_one(
    problem: PlanProblem, template: LinkModel, kwargs: dict[str, Any], bucket: int
) -> TableEntry:
    """Plan ``bucket`` of ``problem`` with LOSS and return its table entry."""
    link = dataclasses.replace(template, bandwidth_bytes_per_s=planned_bandwidth(bucket))
    result = loss(problem, link, **kwargs)
    sims = dict(result.baseline_sims)
    sims[LOPINFER] = result.sim
    return TableEntry(
        bucket=bucket,
        bandwidth_bytes_per_s=link.bandwidth_bytes_per_s,
        lopinfer=result.plan,
        layer_split=result.baselines[LAYER_SPLIT],
        makespan_s={mode: sims[mode].makespan_s for mode in MODES},
        bytes_up={mode: sims[mode].bytes_up for mode in MODES},
        bytes_down={mode: sims[mode].bytes_down for mode in MODES},
        source=result.source,
    )


def planner_settings(**planner_kwargs: Any) -> dict[str, Any]:
    """Return :func:`loss`'s keyword settings with ``planner_kwargs`` applied (for JSON)."""
    settings = {
        name: param.default
        for name, param in inspect.signature(loss).parameters.items()
        if param.kind is inspect.Parameter.KEYWORD_ONLY and name != 'baselines'
    }
    unknown = set(planner_kwargs) - set(settings)
    if unknown:
        raise TypeError(f'unknown planner settings: {", ".join(sorted(unknown))}')
    settings.update(planner_kwargs)
    return json.loads(json.dumps(settings))


def build_table(
    problem: PlanProblem,
    link_template: LinkModel,
    *,
    buckets: Iterable[int] = range(MAX_BUCKET + 1),
    workers: int = 2,
    progress: bool = True,
    device_factor: float = 1.0,
    **planner_kwargs: Any,
) -> PlanTable:
    """Plan every bucket of ``problem`` with LOSS and return the table.

    ``link_template`` gives latency and per-message costs; each bucket replaces its
    bandwidth. ``workers`` > 1 plans buckets in parallel processes (spawned, so it is safe
    from threaded programs such as ROS nodes). ``device_factor`` is stored as given (the
    factor the caller applied to the robot's profile). ``planner_kwargs`` go to
    :func:`~lopinfer_ros.planner.loss`.
    """
    buckets = sorted(set(buckets))
    for b in buckets:
        if not 0 <= b <= MAX_BUCKET:
            raise ValueError(f'bucket {b} is outside 0..{MAX_BUCKET}')
    settings = planner_settings(**planner_kwargs)
    entries: dict[int, TableEntry] = {}
    bar = _progress(len(buckets), problem.model) if progress else None
    start = time.perf_counter()
    try:
        if workers <= 1 or len(buckets) <= 1:
            for b in buckets:
                entries[b] = _plan_one(problem, link_template, planner_kwargs, b)
                if bar is not None:
                    bar.update(1)
        else:
            context = multiprocessing.get_context('spawn')
            with concurrent.futures.ProcessPoolExecutor(
                max_workers=min(workers, len(buckets)),
                mp_context=context,
                initializer=_init_worker,
                initargs=(problem, link_template, planner_kwargs),
            ) as pool:
                futures = {pool.submit(_plan_bucket, b): b for b in buckets}
                for future in concurrent.futures.as_completed(futures):
                    entries[futures[future]] = future.result()
                    if bar is not None:
                        bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    settings['build_s'] = round(time.perf_counter() - start, 3)
    settings['workers'] = workers
    return PlanTable(
        model=problem.model,
        graph_hash=problem.graph_hash,
        profile_hash=problem.profile_hash,
        link=link_template,
        device_factor=float(device_factor),
        device_only=device_only(problem),
        server_only=server_only(problem),
        entries=dict(sorted(entries.items())),
        planner=settings,
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds'),
    )


def _progress(total: int, model: str) -> tqdm:
    return tqdm(total=total, desc=f'plan table {model}', unit='bucket')
