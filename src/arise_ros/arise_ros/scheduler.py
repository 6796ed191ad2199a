# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""ARISE's proactive scheduler (dissertation §3.4.4): what each robot offloads, and when.

It also decides which requests the server runs together as one batch.

Every run (every 200 ms in the dissertation) does two steps:

* **Step 1** picks, per client, the pseudo-optimal offloading interval ``oi`` and batch size
  ``bs``: the pair that maximises the clients a server could hold if all were like this one,
  ``(bs / lat_bs) / (fps / oi)``, subject to the client's SLA,
  ``rate · mean stride(e2e_bs, oi) - dacc_ref <= θ`` (``accuracy.regular_schedule_drop``).
* **Step 2** plans the next ``horizon_s``: *simulate* the requests each client would send,
  *adjust* them (Algorithm 2: pack them greedily into batches in arrival order, up to every
  member's batch size, then move each request's arrival time and frame to its batch's start),
  *verify* every client's SLA on the adjusted plan with its drop rate, evict one client if any
  fails or admit one from the waiting list if all pass, and repeat; *apply* returns the plan.

Times are seconds on the server's clock. Frame ids are per client; a client's frame ``f`` is
captured at ``clock_s + f / fps`` and arrives ``uplink_s`` later.

Where the pseudocode is silent, the choices below are stated at the code that makes them:
one request per client per batch; a client's frames strictly increasing along the plan; a
frame the client can no longer capture never planned; a ``grace_fraction`` of every
batch's latency left free for late requests; Step 1 counting the frame a coordinated
request may wait for its batch; a failing client's interval shortened by a frame before
anyone is evicted, then the newest failing client evicted (one that no schedule can serve
before the rest); admission only if no robot ends up within ``admission_headroom`` of its
SLA because of the newcomer.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from arise_ros.accuracy import Reference, frames_for, regular_schedule_drop
from arise_ros.latency_profile import BatchLatencyProfile

# Floating-point slack of an SLA comparison (an accuracy drop, e.g. AbsRel).
SLA_TOLERANCE = 1e-12
# Frames: a time computed to land on a frame boundary counts as on it.
_FRAME_SLACK = 1e-6
# A batch takes requests arriving up to this many of its slots after it opens. One from
# further on would be pulled forward that far, leaving its robot uneven gaps that verify
# repays with a shorter interval or a refusal; on a server with room, packing the whole
# horizon so refused most newcomers (at SLA 0.06 on the GPU-like curve, a fleet that now
# holds 133 robots held 55).
PULL_SLOTS = 2.0
# Results kept per client for verify_past_s: 2 s at 60 fps and interval 1 needs 120; a
# shorter record only shortens the past that verify sees.
RECENT_RESULTS = 256


@dataclass(frozen=True)
class SchedulerConfig:
    horizon_s: float = 1.0
    # Batches of the previous plan that start before now + overlap_s are kept as they are:
    # their clients may already be sending those frames (the dissertation's plan overlap).
    overlap_s: float = 0.1
    # Free time after every batch, as a fraction of its latency, for requests that arrive
    # late (the dissertation: 10 %).
    grace_fraction: float = 0.1
    max_interval: int = 30
    # The reference setup of every SLA: a dedicated server, batch size 1, this interval.
    reference_interval: int = 1
    # Recent arrivals a client's clock offset is fitted from.
    arrival_window: int = 8
    max_admissions_per_run: int = 4
    # After a newcomer did not fit, the next try waits this many runs (unless a robot left):
    # the fleet rarely changes within a second, and each try costs a plan.
    admission_retry_runs: int = 2
    max_waiting: int = 256
    # A client is admitted only if every client stays this fraction below its SLA, and
    # evicted only above it: without the gap, a server filled to the edge evicts someone
    # at the next run's smallest change.
    admission_headroom: float = 0.1
    # Drop rate assumed for a client that has not measured one yet.
    default_drop_rate: float = 0.01
    # Verify judges each client over this much of its past as well as the plan: a plan
    # alone starts afresh every run, so a request that each new plan moves a little later
    # never shows (a robot planned every 9 frames was served every 18).
    verify_past_s: float = 2.0

    def __post_init__(self) -> None:
        if not self.horizon_s > 0.0:
            raise ValueError(f'horizon_s must be > 0, got {self.horizon_s}')
        if not 0.0 <= self.overlap_s < self.horizon_s:
            raise ValueError('overlap_s must be in [0, horizon_s)')
        if not 0.0 <= self.grace_fraction <= 1.0:
            raise ValueError(f'grace_fraction must be in [0, 1], got {self.grace_fraction}')
        if self.max_interval < 1 or self.reference_interval < 1:
            raise ValueError('max_interval and reference_interval must be at least 1')
        if self.admission_retry_runs < 0:
            raise ValueError('admission_retry_runs must be >= 0')
        if self.arrival_window < 1 or self.max_admissions_per_run < 0 or self.max_waiting < 0:
            raise ValueError('arrival_window >= 1, max_admissions_per_run and max_waiting >= 0')
        if not 0.0 <= self.admission_headroom < 1.0:
            raise ValueError(
                f'admission_headroom must be in [0, 1), got {self.admission_headroom}'
            )
        if not (math.isfinite(self.default_drop_rate) and self.default_drop_rate >= 0.0):
            raise ValueError('default_drop_rate must be a finite rate >= 0')
        if not (math.isfinite(self.verify_past_s) and self.verify_past_s >= 0.0):
            raise ValueError(f'verify_past_s must be >= 0 seconds, got {self.verify_past_s}')


class ClientState:
    """What the scheduler knows of one client: its camera clock, link, SLA and drop rate."""

    def __init__(
        self,
        client_id: str,
        fps: float,
        sla: float,
        uplink_s: float,
        downlink_s: float,
        frame_id_now: int,
        now_s: float,
        drop_rate: float | None = None,
        arrival_window: int = 8,
    ) -> None:
        if not client_id:
            raise ValueError('a client needs an id')
        if not (math.isfinite(fps) and fps > 0.0):
            raise ValueError(f'{client_id}: fps must be > 0, got {fps}')
        if not (math.isfinite(sla) and sla >= 0.0):
            raise ValueError(f'{client_id}: an SLA is an accuracy drop >= 0, got {sla}')
        for name, value in (('uplink_s', uplink_s), ('downlink_s', downlink_s)):
            if not (math.isfinite(value) and value >= 0.0):
                raise ValueError(f'{client_id}: {name} must be >= 0 seconds, got {value}')
        self.client_id = client_id
        self.fps = float(fps)
        self.sla = float(sla)
        self.uplink_s = float(uplink_s)
        self.downlink_s = float(downlink_s)
        self.drop_rate = drop_rate
        # Frame frame_id_now is being captured now (the client said so in its request).
        self.clock_s = now_s - frame_id_now / self.fps
        self._offsets: deque[float] = deque(maxlen=arrival_window)
        self.last_result_frame: int | None = None
        # (time back on the client, frame) of its recent results, oldest first: from the
        # plans that ran, unless ``results_reported`` (a server that knows when it really
        # sent each result fills them in, and the plans do not).
        self.recent_results: deque[tuple[float, int]] = deque(maxlen=RECENT_RESULTS)
        self.results_reported = False
        self.admission_order = 0
        # The newest of its frames a kept plan (a batch starting before a plan's cut) sent:
        # its next request is planned an interval after it, however many plans ago it ran.
        self.sent_frame: int | None = None
        # Before anything was sent, the frame the newest plan gave its first request: the
        # next plan starts from it, so that each plan does not re-queue the robot behind
        # the requests that arrived meanwhile.
        self.first_planned_frame: int | None = None

    def capture_s(self, frame_id: float) -> float:
        return self.clock_s + frame_id / self.fps

    def arrival_s(self, frame_id: float) -> float:
        return self.capture_s(frame_id) + self.uplink_s

    def frame_arriving_by(self, time_s: float) -> int:
        """Return the newest frame that reaches the server by ``time_s``."""
        return math.floor((time_s - self.uplink_s - self.clock_s) * self.fps + _FRAME_SLACK)

    def first_frame_captured_after(self, time_s: float) -> int:
        return math.ceil((time_s - self.clock_s) * self.fps - _FRAME_SLACK)

    def record_arrival(self, frame_id: int, arrival_s: float) -> None:
        """Refit the clock from a request that reached the server.

        The camera period is known (``1 / fps``), so the regression over recent arrivals has
        one unknown, the offset; the median keeps one frame held up on the link from moving
        the whole plan.
        """
        self._offsets.append(arrival_s - self.uplink_s - frame_id / self.fps)
        self.clock_s = statistics.median(self._offsets)

    def rate(self, default: float) -> float:
        return default if self.drop_rate is None else self.drop_rate


@dataclass(frozen=True)
class Settings:
    """Step 1's choice for one client."""

    interval: int
    batch_size: int
    e2e_frames: int
    capacity: float
    estimated_drop: float


@dataclass(frozen=True)
class Request:
    client_id: str
    frame_id: int
    arrival_s: float


@dataclass(frozen=True)
class Batch:
    start_s: float
    latency_s: float
    # latency plus the grace period: when the next batch may start.
    slot_s: float
    requests: tuple[Request, ...]

    @property
    def end_s(self) -> float:
        return self.start_s + self.latency_s

    @property
    def next_start_s(self) -> float:
        return self.start_s + self.slot_s


@dataclass(frozen=True)
class ClientPlan:
    client_id: str
    interval: int
    batch_size: int
    estimated_drop: float
    sla: float
    requests: tuple[Request, ...]


@dataclass(frozen=True)
class Plan:
    created_s: float
    horizon_end_s: float
    batches: tuple[Batch, ...]
    clients: Mapping[str, ClientPlan]
    admitted: tuple[str, ...] = ()
    evicted: tuple[str, ...] = ()
    iterations: int = 0


def reference_for(client: ClientState, profile: BatchLatencyProfile, interval: int) -> Reference:
    """Return the client's reference setup: a dedicated server, batch size 1."""
    e2e = frames_for(client.uplink_s + profile.latency(1) + client.downlink_s, client.fps)
    return Reference(e2e, interval)


def pseudo_optimal_settings(
    client: ClientState,
    profile: BatchLatencyProfile,
    config: SchedulerConfig,
) -> Settings:
    """Step 1: the interval and batch size that maximise capacity within the client's SLA.

    For a batch size the largest interval that meets the SLA is the best (capacity grows
    with the interval), and the mean stride is linear in the interval, so it is solved in
    closed form: O(max batch size). Ties go to the smaller batch (shorter latency), then to
    the smaller interval (fresher results).
    """
    rate = client.rate(config.default_drop_rate)
    reference = reference_for(client, profile, config.reference_interval)
    # Aim where admission wants every robot to be, not at the SLA's edge: verify on a
    # packed plan varies by several per cent around Step 1's regular schedule.
    target = client.sla * (1.0 - config.admission_headroom)
    best: Settings | None = None
    for batch_size in range(1, profile.max_batch + 1):
        e2e = coordinated_e2e_frames(client, profile.latency(batch_size))
        interval = _longest_interval(rate, e2e, target, reference, config.max_interval)
        if interval < 1:
            continue
        capacity = profile.throughput(batch_size) / (client.fps / interval)
        if best is None or capacity > best.capacity * (1.0 + 1e-12):
            drop = regular_schedule_drop(rate, e2e, interval, reference)
            best = Settings(interval, batch_size, e2e, capacity, drop)
    if best is None:
        # Not even batch size 1 at every frame meets the SLA (an SLA tighter than one
        # frame of drift): offer the freshest setting and let verify refuse the client.
        e2e = coordinated_e2e_frames(client, profile.latency(1))
        best = Settings(
            1,
            1,
            e2e,
            profile.throughput(1) / client.fps,
            regular_schedule_drop(rate, e2e, 1, reference),
        )
    return best


def coordinated_e2e_frames(client: ClientState, latency_s: float) -> int:
    """Return the frames from capture to a usable result for a coordinated request.

    The adjust step sends the newest frame that reaches the server by its batch's start, so
    that frame was captured up to one frame interval before it had to be: Step 1 counts
    that frame, since verify (which sees the real frames) will.
    """
    return frames_for(
        client.uplink_s + latency_s + client.downlink_s + 1.0 / client.fps, client.fps
    )


def _longest_interval(
    rate: float, e2e: int, sla: float, reference: Reference, max_interval: int
) -> int:
    """Return the longest interval up to ``max_interval`` within the SLA (0 if none)."""

    def meets(interval: int) -> bool:
        return regular_schedule_drop(rate, e2e, interval, reference) <= sla + SLA_TOLERANCE

    if rate <= 0.0:
        return max_interval
    # rate · (e2e + (oi - 1) / 2) - ref <= θ  <=>  oi <= 2 (θ + ref) / rate - 2 e2e + 1;
    # the closed form lands within a step of the answer, the checks settle rounding.
    bound = 2.0 * (sla + SLA_TOLERANCE + reference.drop(rate)) / rate - 2.0 * e2e + 1.0
    interval = max_interval if not bound < max_interval else max(0, math.floor(bound))
    while interval < max_interval and meets(interval + 1):
        interval += 1
    while interval >= 1 and not meets(interval):
        interval -= 1
    return interval


def simulate(
    clients: Sequence[ClientState],
    settings: Mapping[str, Settings],
    anchors: Mapping[str, int | None],
    earliest: Mapping[str, int],
    horizon_end_s: float,
) -> list[Request]:
    """Simulate: each client's next requests until the horizon, in arrival order.

    A client's next frame is its anchor (its last planned or sent frame) plus its interval,
    and never one it can no longer capture (``earliest``). Ties keep the clients' order.
    """
    requests: list[tuple[float, int, int, Request]] = []
    for order, client in enumerate(clients):
        interval = settings[client.client_id].interval
        anchor = anchors.get(client.client_id)
        frame = earliest[client.client_id] if anchor is None else anchor + interval
        frame = max(frame, earliest[client.client_id])
        while (arrival := client.arrival_s(frame)) <= horizon_end_s + 1e-9:
            requests.append((arrival, order, frame, Request(client.client_id, frame, arrival)))
            frame += interval
    requests.sort(key=lambda item: item[:3])
    return [item[3] for item in requests]


def adjust(
    requests: Sequence[Request],
    clients: Mapping[str, ClientState],
    settings: Mapping[str, Settings],
    profile: BatchLatencyProfile,
    start_s: float,
    grace_fraction: float,
    last_frames: Mapping[str, int | None],
    earliest: Mapping[str, int],
) -> list[Batch]:
    """Adjust (Algorithm 2): greedy packing in arrival order, then coordination.

    Linear in the requests. Beyond the pseudocode:

    * a batch holds at most one request per client: two would be moved to the same start
      and become the same frame;
    * a client's frames strictly increase along the plan, and a frame the client cannot
      capture any more (before ``earliest``) is never planned; where that frame only arrives
      after ``t``, the batch starts when it arrives (less than a frame later);
    * the next batch starts after this one's latency plus ``grace_fraction`` of it;
    * a batch starts at most one slot before its first request would arrive: the
      pseudocode's ``t`` alone would pull requests of an underloaded server to the plan's
      start, whatever their interval;
    * a batch takes only requests that arrive within ``PULL_SLOTS`` of its slots after it
      opens: packing "without considering the arrival times" would, on a server with
      room, pull a request forward by up to a batch's worth of other robots' intervals.
    """
    batches: list[Batch] = []
    previous = dict(last_frames)
    index, time_s = 0, start_s
    count = len(requests)
    while index < count:
        # pack: the longest run from `index` whose members all accept its size
        members: list[Request] = []
        seen: set[str] = set()
        smallest = profile.max_batch
        opens = time_s
        while index + len(members) < count:
            request = requests[index + len(members)]
            limit = min(smallest, settings[request.client_id].batch_size)
            if request.client_id in seen or limit < len(members) + 1:
                break
            if not members:
                opens = max(time_s, request.arrival_s)
            elif request.arrival_s > opens + PULL_SLOTS * profile.latency(len(members) + 1) * (
                1.0 + grace_fraction
            ):
                break
            members.append(request)
            seen.add(request.client_id)
            smallest = limit
        # coordinate
        lowest = {}
        for request in members:
            last = previous.get(request.client_id)
            floor = earliest[request.client_id]
            lowest[request.client_id] = floor if last is None else max(floor, last + 1)
        latency = profile.latency(len(members))
        slot = latency * (1.0 + grace_fraction)
        # The batch moves its first request forward by at most one slot (Fig. 3.10: from 17
        # to 15, one batch of 2 earlier). Further, on a server with room, every plan would
        # pull each robot's next frame to the plan's start, and a robot planned every 30
        # frames would send one every run.
        begin = max(
            [time_s, members[0].arrival_s - slot]
            + [clients[r.client_id].arrival_s(lowest[r.client_id]) for r in members]
        )
        adjusted = []
        for request in members:
            client = clients[request.client_id]
            frame = max(lowest[request.client_id], client.frame_arriving_by(begin))
            previous[request.client_id] = frame
            adjusted.append(Request(request.client_id, frame, begin))
        batches.append(Batch(begin, latency, slot, tuple(adjusted)))
        index += len(members)
        time_s = begin + slot
    return batches


def opportunistic_batches(
    requests: Sequence[Request],
    settings: Mapping[str, Settings],
    profile: BatchLatencyProfile,
    start_s: float,
    grace_fraction: float = 0.0,
) -> list[Batch]:
    """Reactive batching (Clipper-like, ARISE-α): whatever has arrived when the server is free.

    Requests keep their arrival and frame; a batch takes, in arrival order, the waiting
    requests up to every member's batch size (one per client), and the server idles until
    the next arrival when nothing waits.
    """
    batches: list[Batch] = []
    pending: deque[Request] = deque()
    index, time_s = 0, start_s
    count = len(requests)
    while index < count or pending:
        if not pending:
            time_s = max(time_s, requests[index].arrival_s)
        while index < count and requests[index].arrival_s <= time_s + 1e-9:
            pending.append(requests[index])
            index += 1
        members: list[Request] = []
        seen: set[str] = set()
        smallest = profile.max_batch
        skipped: list[Request] = []
        while pending:
            request = pending[0]
            limit = min(smallest, settings[request.client_id].batch_size)
            if limit < len(members) + 1:
                break
            pending.popleft()
            if request.client_id in seen:
                skipped.append(request)
                continue
            members.append(request)
            seen.add(request.client_id)
            smallest = limit
        pending.extendleft(reversed(skipped))
        latency = profile.latency(len(members))
        slot = latency * (1.0 + grace_fraction)
        batches.append(Batch(time_s, latency, slot, tuple(members)))
        time_s += slot
    return batches


def client_drop(
    client: ClientState,
    rate: float,
    reference: Reference,
    results: Iterable[tuple[float, int]],
    window_start_s: float,
    window_end_frame: int,
) -> float | None:
    """Estimate one client's SLA drop over a plan (the verify step).

    ``results`` are (time the result is back on the client, its frame), in time order. Every
    frame captured from ``window_start_s`` to ``window_end_frame`` is tracked from the newest
    result back before its capture; the mean stride times the drop rate, less the reference
    drop, is the estimate. Closed form per result, so linear in the results. None when no
    frame of the window has a result to track from.
    """
    first = client.first_frame_captured_after(window_start_s)
    total_frames = 0
    total_stride = 0.0
    held: int | None = None
    held_from = first
    for back_s, frame in results:
        usable = (
            first
            if back_s <= window_start_s
            else max(first, client.first_frame_captured_after(back_s))
        )
        if held is not None and usable > held_from:
            end = min(usable - 1, window_end_frame)
            if end >= held_from:
                n = end - held_from + 1
                total_frames += n
                total_stride += (held_from + end) * n / 2.0 - held * n
            held_from = usable
        if held is None:
            held_from = usable
        if held is None or frame > held:
            held = frame
    if held is not None and window_end_frame >= held_from:
        n = window_end_frame - held_from + 1
        total_frames += n
        total_stride += (held_from + window_end_frame) * n / 2.0 - held * n
    if total_frames == 0:
        return None
    return rate * (total_stride / total_frames) - reference.drop(rate)


class AriseScheduler:
    """One edge server's ARISE scheduler: admitted clients, a waiting list and the plan."""

    def __init__(
        self,
        profile: BatchLatencyProfile,
        config: SchedulerConfig | None = None,
        proactive: bool = True,
    ) -> None:
        self.profile = profile
        self.config = config or SchedulerConfig()
        # False gives ARISE-α: the simulated requests served by reactive batching, still
        # verified, with no packing or coordination.
        self.proactive = proactive
        self.clients: dict[str, ClientState] = {}
        self.waiting: dict[str, ClientState] = {}
        self.plan: Plan | None = None
        self._admissions = 0
        self._settings_cache: dict[str, tuple[tuple, Settings]] = {}
        self._runs = 0
        self._retry_admission_at = 0

    def set_profile(self, profile: BatchLatencyProfile) -> None:
        """Plan with ``profile`` from the next run (every robot's Step 1 is redone)."""
        self.profile = profile
        self._settings_cache.clear()

    # --- client bookkeeping -------------------------------------------------------------

    def request_admission(self, client: ClientState) -> bool:
        """Put a client on the waiting list; False when the list is full or it is known."""
        if client.client_id in self.clients or client.client_id in self.waiting:
            return False
        if len(self.waiting) >= self.config.max_waiting:
            return False
        self.waiting[client.client_id] = client
        return True

    def remove(self, client_id: str) -> None:
        """Forget a client that left (admitted or waiting)."""
        if self.clients.pop(client_id, None) is not None:
            self._retry_admission_at = 0  # its room may fit the next one waiting
        self.waiting.pop(client_id, None)
        self._settings_cache.pop(client_id, None)

    def _admit(self, client: ClientState) -> None:
        self._admissions += 1
        client.admission_order = self._admissions
        client.sent_frame = client.first_planned_frame = None
        self.clients[client.client_id] = client

    # --- one run ------------------------------------------------------------------------

    def run(self, now_s: float, server_free_s: float | None = None) -> Plan:
        """Plan the next ``horizon_s`` and settle admission and eviction."""
        config = self.config
        horizon_end = now_s + config.horizon_s
        self._note_results(now_s)
        frozen = self._frozen_batches(now_s)
        anchors = self._anchors(now_s)
        start = max(now_s, server_free_s if server_free_s is not None else now_s)
        if frozen:
            start = max(start, frozen[-1].next_start_s)
        evicted: list[str] = []
        admitted: list[str] = []
        tightened: set[str] = set()
        attempt = self._plan_for(
            list(self.clients.values()), frozen, anchors, now_s, start, horizon_end
        )
        iterations = 1
        # Each pass tightens clients once, removes one or admits one, so the loop ends.
        while True:
            failing = [cid for cid, drop in attempt[2].items() if drop > _sla(self, cid)]
            fresh = [c for c in failing if c not in tightened and attempt[0][c].interval > 1]
            if fresh:
                # A client just over its SLA first offloads one frame more often: packing
                # moved its requests a little, which a shorter interval repays. Only then
                # does anyone leave.
                for client_id in fresh:
                    self._tighten(client_id, attempt[0][client_id])
                    tightened.add(client_id)
            elif failing:
                # One client goes per pass: the newest of those that fail. Evicting the
                # newest of all would not help a client whose own scene sped up, and would
                # empty the server before it did. A client that no schedule can serve (over
                # its SLA with a result every frame, alone) goes before the rest: evicting
                # others cannot help it, and planned every frame it may be what pushed them
                # over.
                hopeless = [c for c in failing if self._unservable(self.clients[c])]
                newest = max(
                    (self.clients[c] for c in hopeless or failing),
                    key=lambda c: c.admission_order,
                )
                del self.clients[newest.client_id]
                self._settings_cache.pop(newest.client_id, None)
                evicted.append(newest.client_id)
                # Its frames in the kept head of the old plan are not run either.
                frozen = self._frozen_batches(now_s)
            elif (
                self.waiting
                and len(admitted) < config.max_admissions_per_run
                and self._runs >= self._retry_admission_at
            ):
                candidate_id, candidate = next(iter(self.waiting.items()))
                trial = self._plan_for(
                    [*self.clients.values(), candidate], frozen, anchors, now_s, start, horizon_end
                )
                iterations += 1
                roomy = 1.0 - config.admission_headroom
                before = attempt[2]
                if _busy_share([*frozen, *trial[1]], now_s, horizon_end) > 1.0:
                    # No room on the server: verify over one horizon cannot see a queue
                    # that grows by a few per cent a second, but the robots would feel it
                    # (at SLA 0.04 on this CPU, 6-13 % of them went over their SLAs).
                    self._refuse_for_now(candidate_id)
                    break
                over = _pushed_over(trial[2], before, candidate, self, roomy)
                if over:
                    # The robots the newcomer would push over first try a frame shorter
                    # interval (as a failing robot would); if that does not make room, the
                    # newcomer waits and nothing changes.
                    movable = all(c not in tightened and trial[0][c].interval > 1 for c in over)
                    if not movable:
                        self._refuse_for_now(candidate_id)
                        break
                    saved = {c: self._settings_cache[c] for c in over}
                    for client_id in over:
                        self._tighten(client_id, trial[0][client_id], candidate)
                    trial = self._plan_for(
                        [*self.clients.values(), candidate],
                        frozen,
                        anchors,
                        now_s,
                        start,
                        horizon_end,
                    )
                    iterations += 1
                    if _pushed_over(trial[2], before, candidate, self, roomy):
                        self._settings_cache.update(saved)
                        self._refuse_for_now(candidate_id)
                        break
                    tightened.update(over)
                del self.waiting[candidate_id]
                self._admit(candidate)
                admitted.append(candidate_id)
                attempt = trial
                continue
            else:
                break
            attempt = self._plan_for(
                list(self.clients.values()), frozen, anchors, now_s, start, horizon_end
            )
            iterations += 1
        self._runs += 1
        settings, batches, drops = attempt
        plan = self._assemble(
            now_s, horizon_end, frozen, batches, settings, drops, admitted, evicted, iterations
        )
        self.plan = plan
        return plan

    def _frozen_batches(self, now_s: float) -> list[Batch]:
        if self.plan is None:
            return []
        keep = []
        for batch in self.plan.batches:
            if batch.start_s >= now_s + self.config.overlap_s or batch.end_s <= now_s:
                continue
            requests = tuple(r for r in batch.requests if r.client_id in self.clients)
            if requests:
                keep.append(
                    Batch(batch.start_s, batch.latency_s, batch.slot_s, requests)
                    if len(requests) == len(batch.requests)
                    else _shrunk(batch, requests, self.profile, self.config.grace_fraction)
                )
        return keep

    def _settings_of(self, client: ClientState) -> Settings:
        """Step 1 for one client, recomputed only when what it depends on changes."""
        key = (client.drop_rate, client.sla, client.fps, client.uplink_s, client.downlink_s)
        cached = self._settings_cache.get(client.client_id)
        if cached is None or cached[0] != key:
            cached = (key, pseudo_optimal_settings(client, self.profile, self.config))
            self._settings_cache[client.client_id] = cached
        return cached[1]

    def _unservable(self, client: ClientState) -> bool:
        """Return whether a result every frame at batch size 1 misses the client's SLA."""
        reference = reference_for(client, self.profile, self.config.reference_interval)
        e2e = coordinated_e2e_frames(client, self.profile.latency(1))
        rate = client.rate(self.config.default_drop_rate)
        return regular_schedule_drop(rate, e2e, 1, reference) > client.sla + SLA_TOLERANCE

    def _tighten(
        self, client_id: str, settings: Settings, candidate: ClientState | None = None
    ) -> None:
        """Shorten a client's interval by one frame until its Step 1 inputs change."""
        if candidate is not None and client_id == candidate.client_id:
            client = candidate
        else:
            client = self.clients[client_id]
        key, _ = self._settings_cache[client_id]
        rate = client.rate(self.config.default_drop_rate)
        reference = reference_for(client, self.profile, self.config.reference_interval)
        interval = settings.interval - 1
        self._settings_cache[client_id] = (
            key,
            Settings(
                interval,
                settings.batch_size,
                settings.e2e_frames,
                self.profile.throughput(settings.batch_size) / (client.fps / interval),
                regular_schedule_drop(rate, settings.e2e_frames, interval, reference),
            ),
        )

    def _refuse_for_now(self, candidate_id: str) -> None:
        """Send a newcomer that did not fit to the back of the queue, and pause trying.

        To the back, so that one robot that fits nowhere does not keep the others waiting
        behind it; a pause, since the fleet rarely changes within a second and each try
        costs a plan.
        """
        self.waiting[candidate_id] = self.waiting.pop(candidate_id)
        self._retry_admission_at = self._runs + self.config.admission_retry_runs

    def _note_results(self, now_s: float) -> None:
        """Record, per client, the newest frame whose batch has finished by now."""
        if self.plan is None:
            return
        for batch in self.plan.batches:
            if batch.end_s > now_s:
                continue
            for request in batch.requests:
                client = self.clients.get(request.client_id)
                if client is not None and (
                    client.last_result_frame is None or request.frame_id > client.last_result_frame
                ):
                    client.last_result_frame = request.frame_id
                    if not client.results_reported:
                        client.recent_results.append(
                            (batch.end_s + client.downlink_s, request.frame_id)
                        )

    def _anchors(self, now_s: float) -> dict[str, int]:
        """Return each client's newest frame a plan had it send before its cut.

        The old plan's batches before this cut, else the frame remembered from an earlier
        plan: a client whose interval is longer than a plan period has no request in the
        old plan's head, and without it its next frame would be pulled to the first it can
        still capture, every other run (a robot planned every 30 frames sent every 12).
        """
        if self.plan is not None:
            cut = now_s + self.config.overlap_s
            self._note_sent(b for b in self.plan.batches if b.start_s < cut)
        return {
            client_id: client.sent_frame
            for client_id, client in self.clients.items()
            if client.sent_frame is not None
        }

    def _note_sent(self, batches: Iterable[Batch]) -> None:
        """Remember each client's newest frame in ``batches``, which are sent for sure."""
        for batch in batches:
            for request in batch.requests:
                client = self.clients.get(request.client_id)
                if client is not None and (
                    client.sent_frame is None or request.frame_id > client.sent_frame
                ):
                    client.sent_frame = request.frame_id
                    client.first_planned_frame = None

    def _plan_for(
        self,
        clients: list[ClientState],
        frozen: list[Batch],
        known_anchors: Mapping[str, int],
        now_s: float,
        start_s: float,
        horizon_end_s: float,
    ) -> tuple[dict[str, Settings], list[Batch], dict[str, float]]:
        config = self.config
        settings = {c.client_id: self._settings_of(c) for c in clients}
        by_id = {c.client_id: c for c in clients}
        anchors = {c.client_id: known_anchors.get(c.client_id) for c in clients}
        # A client hears of a new plan one downlink after it is made; it cannot send a
        # frame captured before that.
        earliest = {
            c.client_id: c.first_frame_captured_after(now_s + c.downlink_s) for c in clients
        }
        for client in clients:
            # A robot yet to send keeps the first frame the last plan gave it (while it can
            # still capture it): re-planned from now each run, it went to the back of the
            # queue every time and, on a busy server, was never served.
            pinned = client.first_planned_frame
            if anchors[client.client_id] is None and pinned is not None:
                earliest[client.client_id] = max(earliest[client.client_id], pinned)
        requests = simulate(clients, settings, anchors, earliest, horizon_end_s)
        if self.proactive:
            batches = adjust(
                requests,
                by_id,
                settings,
                self.profile,
                start_s,
                config.grace_fraction,
                anchors,
                earliest,
            )
        else:
            batches = opportunistic_batches(
                requests, settings, self.profile, start_s, config.grace_fraction
            )
        drops = self._verify(clients, settings, [*frozen, *batches], now_s)
        return settings, batches, drops

    def _verify(
        self,
        clients: list[ClientState],
        settings: Mapping[str, Settings],
        batches: list[Batch],
        now_s: float,
    ) -> dict[str, float]:
        """Verify: every client's estimated SLA drop over the plan."""
        results: dict[str, list[tuple[float, int]]] = {c.client_id: [] for c in clients}
        for batch in batches:
            for request in batch.requests:
                if request.client_id in results:
                    results[request.client_id].append((batch.end_s, request.frame_id))
        drops = {}
        for client in clients:
            own = settings[client.client_id]
            rate = client.rate(self.config.default_drop_rate)
            reference = reference_for(client, self.profile, self.config.reference_interval)
            planned = results[client.client_id]
            back = [(end + client.downlink_s, frame) for end, frame in planned]
            held = client.last_result_frame
            start = now_s
            if client.recent_results and self.config.verify_past_s > 0.0:
                # Its recent past as well: the results it had, then the plan's.
                start = now_s - self.config.verify_past_s
                back = sorted([*_results_since(client.recent_results, start), *back])
            else:
                if held is None:
                    # No result yet: count the wait for the first as if the robot held one
                    # from just before now, so that a plan cannot leave a newcomer waiting
                    # unseen.
                    held = client.first_frame_captured_after(now_s) - reference.e2e_frames
                back.insert(0, (-math.inf, held))
            # The window ends where the next plan's first result would take over if the
            # client kept its interval: the frames this plan decides.
            last = planned[-1][1] if planned else client.first_frame_captured_after(now_s)
            following = last + own.interval
            latency = self.profile.latency(own.batch_size)
            follow_back = client.arrival_s(following) + latency + client.downlink_s
            end_frame = client.first_frame_captured_after(follow_back) - 1
            drop = client_drop(client, rate, reference, back, start, end_frame)
            drops[client.client_id] = own.estimated_drop if drop is None else drop
        return drops

    def _assemble(
        self,
        now_s: float,
        horizon_end_s: float,
        frozen: list[Batch],
        batches: list[Batch],
        settings: Mapping[str, Settings],
        drops: Mapping[str, float],
        admitted: list[str],
        evicted: list[str],
        iterations: int,
    ) -> Plan:
        every = (*frozen, *batches)
        per_client: dict[str, list[Request]] = {cid: [] for cid in self.clients}
        for batch in every:
            for request in batch.requests:
                if request.client_id in per_client:
                    per_client[request.client_id].append(request)
        for client_id, requests in per_client.items():
            client = self.clients[client_id]
            if client.sent_frame is None and requests:
                client.first_planned_frame = requests[0].frame_id
        clients = {
            cid: ClientPlan(
                cid,
                settings[cid].interval,
                settings[cid].batch_size,
                drops[cid],
                self.clients[cid].sla,
                tuple(per_client[cid]),
            )
            for cid in self.clients
        }
        return Plan(
            now_s,
            horizon_end_s,
            every,
            clients,
            tuple(admitted),
            tuple(evicted),
            iterations,
        )


def _sla(scheduler: AriseScheduler, client_id: str) -> float:
    return scheduler.clients[client_id].sla + SLA_TOLERANCE


def _sla_of(candidate: ClientState, scheduler: AriseScheduler, client_id: str) -> float:
    if client_id == candidate.client_id:
        return candidate.sla + SLA_TOLERANCE
    return _sla(scheduler, client_id)


def _results_since(results: deque[tuple[float, int]], start_s: float) -> list[tuple[float, int]]:
    """Return the (time ordered) results back from ``start_s`` on, and the one before it."""
    newest_first = []
    for result in reversed(results):
        newest_first.append(result)
        if result[0] < start_s:
            break
    return newest_first[::-1]


def _busy_share(batches: Sequence[Batch], now_s: float, horizon_end_s: float) -> float:
    """Return the server time from now the batches take (grace included) per horizon second."""
    busy = sum(max(0.0, b.next_start_s - max(b.start_s, now_s)) for b in batches)
    return busy / (horizon_end_s - now_s)


def _pushed_over(
    drops: Mapping[str, float],
    before: Mapping[str, float],
    candidate: ClientState,
    scheduler: AriseScheduler,
    roomy: float,
) -> list[str]:
    """Return the clients a newcomer would put above the admission line.

    The newcomer must stay below it; an incumbent counts only if the newcomer raised its
    drop into the band. One already in the band on its own (its plan varies by a few per
    cent around Step 1's) must not keep every newcomer out.
    """
    return [
        cid
        for cid, drop in drops.items()
        if drop > roomy * _sla_of(candidate, scheduler, cid)
        and (cid == candidate.client_id or drop > before.get(cid, 0.0) + SLA_TOLERANCE)
    ]


def _shrunk(
    batch: Batch, requests: tuple[Request, ...], profile: BatchLatencyProfile, grace: float
) -> Batch:
    latency = profile.latency(len(requests))
    return Batch(batch.start_s, latency, latency * (1.0 + grace), requests)


@dataclass
class PlanStats:
    """Server-side figures of a plan: mean batch size and idle share of the planned span."""

    batches: int = 0
    requests: int = 0
    busy_s: float = 0.0
    span_s: float = 0.0
    sizes: list[int] = field(default_factory=list)

    @property
    def mean_batch_size(self) -> float:
        return self.requests / self.batches if self.batches else 0.0

    @property
    def idle_fraction(self) -> float:
        return 1.0 - self.busy_s / self.span_s if self.span_s > 0 else 0.0


def plan_stats(batches: Sequence[Batch]) -> PlanStats:
    stats = PlanStats()
    if not batches:
        return stats
    stats.batches = len(batches)
    stats.sizes = [len(b.requests) for b in batches]
    stats.requests = sum(stats.sizes)
    stats.busy_s = sum(b.latency_s for b in batches)
    stats.span_s = max(b.end_s for b in batches) - batches[0].start_s
    return stats
