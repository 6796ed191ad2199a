# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""A plan-level simulation of one edge server serving a changing fleet, per system.

No sockets and no model: the server takes exactly the profile's latency per batch, links
take fixed ``uplink_s`` and ``downlink_s``. Robots arrive as a Poisson process, stay an
exponential time, and each has an SLA and a scene drop rate drawn from the fleet's ranges.
Every system runs its own admission every ``period_s``; what it actually executes (each
plan's batches until the next plan takes over) gives every robot's realised accuracy drop
against the reference setup, which is then checked against its SLA. This is the
algorithmic comparison; the emulated robots (``emulated_robot``) run the same scheduler on
the real protocol.

Systems (``SYSTEMS``):

* ``arise``: the proactive scheduler.
* ``arise_alpha``: Step 1's intervals and batch sizes, reactive batching (no packing).
* ``chameleon``: per-client intervals (Step 1 with batch size 1), no batching.
* ``clipper``: one fixed interval for every robot (the ``static`` search's), reactive
  batching up to the largest batch size that keeps the robot's SLA at that interval.
* ``static``: one fixed interval and batch size, and a fixed number of robots, the
  largest whose robots all meet their SLAs on pilot fleets (other draws from the same
  ranges); then run over the fleet, reactive batching, a leaving robot replaced at once.

How the dynamic baselines take and shed robots (``ADMISSIONS``):

* ``pending`` (the default, the dissertation's §3.6.3): by the presence of pending
  requests. A fixed number of robots (the newest) leave when a request was delayed till
  the next batch (a batch started while it waited and had no room for it); that many more
  are taken when no request was delayed for 400 ms. No SLA is checked on the way in.
* ``verify``: ARISE's own admission and eviction (verify on the plan). Stronger than the
  dissertation's baselines; with it the comparison is of scheduling and batching only.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from arise_ros.accuracy import regular_schedule_drop
from arise_ros.latency_profile import BatchLatencyProfile
from arise_ros.scheduler import (
    SLA_TOLERANCE,
    AriseScheduler,
    Batch,
    ClientState,
    Plan,
    Request,
    SchedulerConfig,
    Settings,
    client_drop,
    coordinated_e2e_frames,
    opportunistic_batches,
    pseudo_optimal_settings,
    reference_for,
    simulate,
)

SYSTEMS = ('arise', 'arise_alpha', 'chameleon', 'clipper', 'static')
ADMISSIONS = ('pending', 'verify')


@dataclass(frozen=True)
class FleetSpec:
    fps: float = 30.0
    sla_range: tuple[float, float] = (0.02, 0.02)
    rate_range: tuple[float, float] = (0.002, 0.006)
    uplink_s: float = 0.009
    downlink_s: float = 0.004
    arrivals_per_s: float = 4.0
    mean_stay_s: float = 60.0
    duration_s: float = 60.0
    warmup_s: float = 10.0
    seed: int = 0
    # Measured scene drop rates (e.g. one per generated sequence): when given, each robot
    # draws one of them, equally likely, instead of a rate uniform in ``rate_range``.
    rate_choices: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if any(not rate > 0.0 for rate in self.rate_choices):
            raise ValueError(f'rate_choices must be positive, got {self.rate_choices}')

    def draw_rate(self, rng: random.Random) -> float:
        """Return one robot's scene drop rate (AbsRel per frame of tracking stride)."""
        if self.rate_choices:
            return rng.choice(self.rate_choices)
        return rng.uniform(*self.rate_range)

    def mean_rate(self) -> float:
        """Return the mean rate a robot draws."""
        if self.rate_choices:
            return sum(self.rate_choices) / len(self.rate_choices)
        return sum(self.rate_range) / 2.0

    def describe_rates(self) -> str:
        """Return how rates are drawn, for a benchmark's set-up line."""
        if self.rate_choices:
            low, high = min(self.rate_choices), max(self.rate_choices)
            return f'one of {len(self.rate_choices)} measured rates ({low:.4f}-{high:.4f})'
        return f'rates U({self.rate_range[0]}, {self.rate_range[1]})'


@dataclass
class Visitor:
    client_id: str
    arrive_s: float
    leave_s: float
    sla: float
    rate: float
    # When its camera captures frame 0 (in [0, 1/fps)): cameras do not share a clock.
    phase_s: float = 0.0


@dataclass
class SystemResult:
    system: str
    mean_clients: float
    drops: dict[str, float] = field(default_factory=dict)
    slas: dict[str, float] = field(default_factory=dict)
    mean_batch: float = 0.0
    idle_fraction: float = 0.0
    detail: str = ''
    # The server time a second its robots take at their Step 1 settings, and at the ones
    # it planned them with (shorter intervals where verify tightened them), grace included
    # (means over the counted runs): near 1, no packing fits another robot at them.
    step1_load: float = 0.0
    planned_load: float = 0.0
    # The mean scene drop rate of the robots it held (over the counted runs): below the
    # fleet's when admission kept the cheaper scenes and sent the costly ones to wait.
    held_rate: float = 0.0
    # Mean concurrent robots counting only those whose realised drop met their SLA: the
    # robots a system actually supported (a robot served outside its SLA counts for none).
    mean_clients_within_sla: float = 0.0

    @property
    def within_sla(self) -> float:
        """Return the share of served robots whose realised drop met their SLA."""
        if not self.drops:
            return 1.0
        ok = sum(self.drops[c] <= self.slas[c] + 1e-9 for c in self.drops)
        return ok / len(self.drops)


def visitors(spec: FleetSpec) -> list[Visitor]:
    """Return the fleet's robots: Poisson arrivals over the run, exponential stays."""
    rng = random.Random(spec.seed)  # noqa: S311 - a seeded, reproducible fleet
    result = []
    time_s = 0.0
    index = 0
    while True:
        time_s += rng.expovariate(spec.arrivals_per_s)
        if time_s >= spec.duration_s:
            return result
        result.append(
            Visitor(
                f'r{index}',
                time_s,
                time_s + rng.expovariate(1.0 / spec.mean_stay_s),
                rng.uniform(*spec.sla_range),
                spec.draw_rate(rng),
                rng.uniform(0.0, 1.0 / spec.fps),
            )
        )
        index += 1


def delayed_requests(batches: Sequence[Batch], since_s: float, until_s: float) -> int:
    """Return the requests of batches starting in [since_s, until_s) delayed till a later batch.

    A request is delayed when an earlier batch (in ``batches``, ordered by start) started
    at or after its arrival: it was pending then, and that batch had no room for it.
    """
    starts = [batch.start_s for batch in batches]
    count = 0
    for index, batch in enumerate(batches):
        if not since_s <= batch.start_s < until_s:
            continue
        for request in batch.requests:
            if bisect_left(starts, request.arrival_s - 1e-9) < index:
                count += 1
    return count


def fixed_interval_settings(
    client: ClientState,
    profile: BatchLatencyProfile,
    config: SchedulerConfig,
    interval: int,
) -> Settings:
    """Return Clipper-like settings: ``interval``, and the largest batch within the SLA.

    What AIMD batch sizing settles at when its latency target is the longest one that
    keeps the client's SLA at that interval; batch size 1 when none does.
    """
    rate = client.rate(config.default_drop_rate)
    reference = reference_for(client, profile, config.reference_interval)
    chosen = 1
    for batch_size in range(1, profile.max_batch + 1):
        e2e = coordinated_e2e_frames(client, profile.latency(batch_size))
        if regular_schedule_drop(rate, e2e, interval, reference) <= client.sla + SLA_TOLERANCE:
            chosen = batch_size
    e2e = coordinated_e2e_frames(client, profile.latency(chosen))
    return Settings(
        interval,
        chosen,
        e2e,
        profile.throughput(chosen) / (client.fps / interval),
        regular_schedule_drop(rate, e2e, interval, reference),
    )


class BaselineScheduler(AriseScheduler):
    """ARISE-α, Chameleon-like or Clipper-like: reactive batching, no packing.

    ``fixed_interval`` gives every robot that interval (Clipper-like, with
    ``fixed_interval_settings``); otherwise Step 1 picks each robot's. ``admission`` is one of
    ``ADMISSIONS`` (see the module's docstring); ``step`` robots leave or come at a time,
    and ``quiet_s`` without a delayed request lets more in.
    """

    def __init__(
        self,
        profile: BatchLatencyProfile,
        config: SchedulerConfig,
        fixed_interval: int | None = None,
        admission: str = 'pending',
        step: int = 1,
        quiet_s: float = 0.4,
        fixed_batch: int | None = None,
        capacity: int = 0,
    ) -> None:
        super().__init__(profile, config, proactive=False)
        if admission not in (*ADMISSIONS, 'fixed'):
            raise ValueError(f'unknown admission {admission!r}; use one of {ADMISSIONS}')
        if step < 1 or quiet_s < 0.0:
            raise ValueError('step must be >= 1 and quiet_s >= 0')
        if fixed_batch is not None and fixed_interval is None:
            raise ValueError('a fixed batch size goes with a fixed interval')
        self.fixed_interval = fixed_interval
        self.fixed_batch = fixed_batch
        # 'fixed' (Static): always this many robots, none refused or shed for load.
        self.capacity = capacity
        self.admission = admission
        self.step = step
        self.quiet_s = quiet_s
        self._last_delay_s = -math.inf
        self._last_run_s: float | None = None

    def _settings_of(self, client: ClientState) -> Settings:
        chosen = super()._settings_of(client)
        if self.fixed_interval is None:
            return chosen
        if self.fixed_batch is not None:
            return Settings(self.fixed_interval, self.fixed_batch, chosen.e2e_frames, 0.0, 0.0)
        return fixed_interval_settings(client, self.profile, self.config, self.fixed_interval)

    def run(self, now_s: float, server_free_s: float | None = None) -> Plan:
        """Plan the next ``horizon_s``; admission as ``admission`` says."""
        if self.admission == 'verify':
            return super().run(now_s, server_free_s)
        evicted: list[str] = []
        admitted: list[str] = []
        if self.admission == 'fixed':
            self._admit_waiting(self.capacity - len(self.clients), admitted)
        elif self.plan is not None and self._last_run_s is not None:
            # What ran since the last run: the old plan's batches that started meanwhile.
            if delayed_requests(self.plan.batches, self._last_run_s, now_s):
                self._last_delay_s = now_s
                for _ in range(min(self.step, len(self.clients))):
                    newest = max(self.clients.values(), key=lambda c: c.admission_order)
                    del self.clients[newest.client_id]
                    self._settings_cache.pop(newest.client_id, None)
                    evicted.append(newest.client_id)
        if (
            self.admission == 'pending'
            and not evicted
            and now_s - self._last_delay_s >= self.quiet_s
        ):
            self._admit_waiting(self.step, admitted)
        self._last_run_s = now_s
        self._note_results(now_s)
        self._runs += 1
        self.plan = self._reactive_plan(now_s, admitted, evicted)
        return self.plan

    def _admit_waiting(self, count: int, admitted: list[str]) -> None:
        """Admit up to ``count`` robots from the head of the waiting list, no check."""
        for _ in range(min(count, len(self.waiting))):
            client_id, client = next(iter(self.waiting.items()))
            del self.waiting[client_id]
            self._admit(client)
            admitted.append(client_id)

    def _reactive_plan(self, now_s: float, admitted: list[str], evicted: list[str]) -> Plan:
        """Serve every robot's own schedule reactively from now to the horizon.

        A reactive server has no plan to keep: a robot sends every ``interval`` frames
        from its last sent frame whatever the server does, requests still waiting now
        wait on, and only the batch under way is kept. No grace after a batch, as a
        reactive server has no coordinated request to wait for.
        """
        clients = list(self.clients.values())
        started = [
            b for b in (self.plan.batches if self.plan else ()) if b.start_s < now_s - 1e-12
        ]
        # The last frame each robot sent: in the old plan's started batches, else remembered
        # from an earlier plan (a robot whose interval is longer than a plan period has none
        # in the old plan, and would otherwise send at once, every other run).
        self._note_sent(started)
        anchors: dict[str, int | None] = {c.client_id: c.sent_frame for c in clients}
        earliest = {}
        for c in clients:
            if anchors[c.client_id] is not None:
                earliest[c.client_id] = anchors[c.client_id] + 1
                continue
            # Yet to send: the first frame the last plan gave it, while it can still capture
            # it, so that each plan does not queue it behind what arrived meanwhile.
            earliest[c.client_id] = max(
                c.first_frame_captured_after(now_s + c.downlink_s), c.first_planned_frame or 0
            )
        under_way = [
            b
            for b in started
            if b.end_s > now_s and any(r.client_id in self.clients for r in b.requests)
        ]
        start = max([now_s] + [b.next_start_s for b in under_way])
        horizon_end = now_s + self.config.horizon_s
        settings = {c.client_id: self._settings_of(c) for c in clients}
        requests = simulate(clients, settings, anchors, earliest, horizon_end)
        batches = opportunistic_batches(requests, settings, self.profile, start, 0.0)
        every = [*under_way, *batches]
        drops = self._verify(clients, settings, every, now_s)
        return self._assemble(
            now_s, horizon_end, under_way, batches, settings, drops, admitted, evicted, 1
        )


def _scheduler(
    system: str,
    profile: BatchLatencyProfile,
    config: SchedulerConfig,
    interval: int,
    admission: str,
    static: tuple[int, int] | None,
) -> AriseScheduler:
    if system == 'static':
        if static is None:
            raise ValueError("'static' needs its robot count and batch size (run_static)")
        count, batch_size = static
        return BaselineScheduler(
            profile,
            config,
            fixed_interval=interval,
            fixed_batch=batch_size,
            admission='fixed',
            capacity=count,
        )
    if system == 'arise':
        return AriseScheduler(profile, config)
    if system == 'arise_alpha':
        return BaselineScheduler(profile, config, admission=admission)
    if system == 'chameleon':
        single = BatchLatencyProfile(profile.model, {1: profile.latency(1)}, profile.source)
        return BaselineScheduler(single, config, admission=admission)
    if system == 'clipper':
        return BaselineScheduler(profile, config, fixed_interval=interval, admission=admission)
    raise ValueError(f'unknown system {system!r}; use one of {SYSTEMS}')


def _client(visitor: Visitor, spec: FleetSpec, window: int) -> ClientState:
    return ClientState(
        visitor.client_id,
        spec.fps,
        visitor.sla,
        spec.uplink_s,
        spec.downlink_s,
        frame_id_now=0,
        now_s=visitor.phase_s,
        drop_rate=visitor.rate,
        arrival_window=window,
    )


def _realised_drops(
    executed: Sequence[Batch],
    clients: dict[str, ClientState],
    windows: dict[str, tuple[float, float]],
    profile: BatchLatencyProfile,
    spec: FleetSpec,
    reference_interval: int,
) -> dict[str, float]:
    results: dict[str, list[tuple[float, int]]] = {cid: [] for cid in windows}
    for batch in executed:
        for request in batch.requests:
            if request.client_id in results:
                results[request.client_id].append(
                    (batch.end_s + spec.downlink_s, request.frame_id)
                )
    drops = {}
    for client_id, (start, end) in windows.items():
        client = clients[client_id]
        back = sorted(results[client_id])
        if end - start < 1.0:
            continue  # too short a stay to judge
        if not back:
            drops[client_id] = math.inf  # held a second or more and never served
            continue
        reference = reference_for(client, profile, reference_interval)
        end_frame = client.first_frame_captured_after(end) - 1
        drop = client_drop(client, client.drop_rate or 0.0, reference, back, start, end_frame)
        if drop is not None:
            drops[client_id] = drop
    return drops


def run_dynamic(
    system: str,
    profile: BatchLatencyProfile,
    spec: FleetSpec,
    interval: int = 4,
    config: SchedulerConfig | None = None,
    admission: str = 'pending',
    static: tuple[int, int] | None = None,
) -> SystemResult:
    """Run one system over the fleet.

    ``admission`` is the baselines' (``ADMISSIONS``); ARISE always admits with verify.
    ``static`` is Static's robot count and batch size (with ``interval``): ``run_static``
    searches them on pilot fleets and runs this with them.
    """
    config = config or SchedulerConfig(max_waiting=100_000, max_admissions_per_run=8)
    scheduler = _scheduler(system, profile, config, interval, admission, static)
    fleet = visitors(spec)
    clients: dict[str, ClientState] = {}
    served_from: dict[str, float] = {}
    windows: dict[str, tuple[float, float]] = {}
    executed: list[Batch] = []
    period = 0.2
    pending = list(fleet)
    steps = int(spec.duration_s / period)
    counted, samples, step1_load, planned_load, rate_sum = 0.0, 0, 0.0, 0.0, 0.0
    rates = {visitor.client_id: visitor.rate for visitor in fleet}
    held_runs: dict[str, int] = {}
    loads: dict[str, float] = {}
    for step in range(steps):
        now = step * period
        while pending and pending[0].arrive_s <= now:
            visitor = pending.pop(0)
            clients[visitor.client_id] = _client(visitor, spec, config.arrival_window)
            scheduler.request_admission(clients[visitor.client_id])
        for visitor in fleet:
            if visitor.leave_s <= now and (
                visitor.client_id in scheduler.clients or visitor.client_id in scheduler.waiting
            ):
                if visitor.client_id in served_from:
                    windows[visitor.client_id] = (served_from.pop(visitor.client_id), now)
                scheduler.remove(visitor.client_id)
        plan = scheduler.run(now)
        for client_id in plan.evicted:
            windows[client_id] = (served_from.pop(client_id, now), now)
        for client_id in plan.admitted:
            served_from[client_id] = now
        # What runs until the next plan: this plan's batches that start before it (the
        # next plan keeps those starting within its overlap, as they are, and runs them).
        executed.extend(b for b in plan.batches if now <= b.start_s < now + period)
        if now >= spec.warmup_s:
            counted += len(scheduler.clients)
            samples += 1
            rate_sum += sum(rates[client_id] for client_id in scheduler.clients)
            for client_id in scheduler.clients:
                held_runs[client_id] = held_runs.get(client_id, 0) + 1
            for client_id, client in scheduler.clients.items():
                if client_id not in loads:
                    loads[client_id] = step1_server_load(client, profile, config)
                step1_load += loads[client_id]
                planned_load += server_load(
                    client, scheduler._settings_of(client), scheduler.profile, config
                )
    end = steps * period
    for client_id, start in served_from.items():
        windows[client_id] = (start, end)
    drops = _realised_drops(executed, clients, windows, profile, spec, config.reference_interval)
    supported = sum(
        runs
        for client_id, runs in held_runs.items()
        if client_id in drops and drops[client_id] <= clients[client_id].sla + 1e-9
    )
    busy = sum(b.latency_s for b in executed)
    span = (executed[-1].end_s - executed[0].start_s) if executed else 0.0
    return SystemResult(
        system,
        counted / samples if samples else 0.0,
        drops,
        {cid: clients[cid].sla for cid in drops},
        sum(len(b.requests) for b in executed) / len(executed) if executed else 0.0,
        1.0 - busy / span if span > 0 else 0.0,
        step1_load=step1_load / samples if samples else 0.0,
        planned_load=planned_load / samples if samples else 0.0,
        held_rate=rate_sum / counted if counted else 0.0,
        mean_clients_within_sla=supported / samples if samples else 0.0,
    )


def _static_run(
    profile: BatchLatencyProfile,
    spec: FleetSpec,
    count: int,
    interval: int,
    batch_size: int,
    duration_s: float,
) -> tuple[dict[str, float], dict[str, float], list[Batch]]:
    """Serve ``count`` robots for ``duration_s`` with a fixed interval and batch size.

    Reactive batches of at most ``batch_size``; returns each robot's realised drop and SLA.
    """
    rng = random.Random(spec.seed)  # noqa: S311 - a seeded, reproducible fleet
    clients, slas = {}, {}
    requests: list[tuple[float, int, Request]] = []
    settings = {}
    for index in range(count):
        client = ClientState(
            f's{index}',
            spec.fps,
            rng.uniform(*spec.sla_range),
            spec.uplink_s,
            spec.downlink_s,
            frame_id_now=0,
            now_s=rng.uniform(0.0, interval / spec.fps),
            drop_rate=spec.draw_rate(rng),
        )
        clients[client.client_id] = client
        slas[client.client_id] = client.sla
        settings[client.client_id] = Settings(interval, batch_size, 0, 0.0, 0.0)
        frame = 0
        while (arrival := client.arrival_s(frame)) <= duration_s:
            requests.append((arrival, index, Request(client.client_id, frame, arrival)))
            frame += interval
    requests.sort(key=lambda item: item[:2])
    ordered = [item[2] for item in requests]
    trimmed = BatchLatencyProfile(
        profile.model,
        {n: profile.latency(n) for n in range(1, batch_size + 1)},
        profile.source,
    )
    batches = opportunistic_batches(ordered, settings, trimmed, 0.0)
    windows = {cid: (1.0, duration_s) for cid in clients}
    drops = _realised_drops(batches, clients, windows, profile, spec, 1)
    return drops, slas, batches


def run_static(
    profile: BatchLatencyProfile,
    spec: FleetSpec,
    intervals: Sequence[int] | None = None,
    batch_sizes: Sequence[int] | None = None,
    duration_s: float = 10.0,
    max_clients: int = 400,
    pilots: int = 3,
    config: SchedulerConfig | None = None,
) -> tuple[SystemResult, int]:
    """Search Static's settings on pilot fleets, then run them over the fleet.

    The pilots (the dissertation's "pilot experiments", §3.6.3) are ``pilots`` fleets of
    fixed robots drawn from the same ranges with other seeds, served for ``duration_s``;
    the search keeps the (interval, batch size, robots) with the most robots all within
    their SLAs in every pilot. The fleet's own robots are not among them: tuned on the
    robots it is judged on, Static would know each one's scene in advance. By default it
    tries every interval up to the scheduler's ``max_interval``, the longest ARISE may pick.
    """
    config = config or SchedulerConfig()
    intervals = intervals or range(1, config.max_interval + 1)
    batch_sizes = batch_sizes or sorted(
        {1, 2, 4, 8, profile.max_batch} & set(range(1, profile.max_batch + 1))
    )
    pilot_specs = [replace(spec, seed=spec.seed + 1 + index) for index in range(pilots)]

    def fits(count: int, interval: int, batch_size: int) -> bool:
        return all(
            _static_ok(profile, pilot, count, interval, batch_size, duration_s)
            for pilot in pilot_specs
        )

    best: tuple[int, int, int] = (0, 1, 1)
    for interval in intervals:
        for batch_size in batch_sizes:
            low, high = best[0], max_clients
            if not fits(low + 1, interval, batch_size):
                continue
            low += 1
            while low < high:
                middle = (low + high + 1) // 2
                if fits(middle, interval, batch_size):
                    low = middle
                else:
                    high = middle - 1
            if low > best[0]:
                best = (low, interval, batch_size)
    count, interval, batch_size = best
    result = run_dynamic(
        'static', profile, spec, interval=interval, config=config, static=(count, batch_size)
    )
    result.detail = f'{count} robots, interval {interval}, batch size {batch_size}'
    return result, interval


def server_load(
    client: ClientState,
    settings: Settings,
    profile: BatchLatencyProfile,
    config: SchedulerConfig,
) -> float:
    """Return the server time a second ``client`` takes at ``settings``.

    ``fps / interval`` requests a second at ``latency(bs) / bs`` each, plus the grace
    share after every batch.
    """
    per_request_s = profile.latency(settings.batch_size) / settings.batch_size
    return client.fps / settings.interval * per_request_s * (1.0 + config.grace_fraction)


def step1_server_load(
    client: ClientState, profile: BatchLatencyProfile, config: SchedulerConfig
) -> float:
    """Return the server time a second ``client`` takes at its Step 1 settings."""
    return server_load(client, pseudo_optimal_settings(client, profile, config), profile, config)


def step1_bound(
    profile: BatchLatencyProfile,
    spec: FleetSpec,
    config: SchedulerConfig | None = None,
    samples: int = 4000,
) -> float:
    """Return how many robots drawn from the fleet's ranges fill the server at Step 1.

    The server is full when their ``step1_server_load`` adds up to one second a second: no
    plan holds more such robots at those settings, however well it packs. A scheduler that
    keeps the cheaper robots (a refused one goes to the back of the queue) can hold more.
    """
    config = config or SchedulerConfig()
    rng = random.Random(spec.seed)  # noqa: S311 - a seeded, reproducible sample
    load = 0.0
    for _ in range(samples):
        client = ClientState(
            'bound',
            spec.fps,
            rng.uniform(*spec.sla_range),
            spec.uplink_s,
            spec.downlink_s,
            0,
            0.0,
            drop_rate=spec.draw_rate(rng),
        )
        load += step1_server_load(client, profile, config)
    return samples / load


def _static_ok(profile, spec, count, interval, batch_size, duration_s) -> bool:
    drops, slas, _ = _static_run(profile, spec, count, interval, batch_size, duration_s)
    return bool(drops) and all(drops[c] <= slas[c] + 1e-9 for c in drops)
