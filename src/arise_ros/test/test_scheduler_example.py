# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""ARISE's scheduler on the dissertation's worked example (Fig. 3.10, §3.4.4).

The figure's tables are an image; its text fixes these facts, and the clients and model
below are the smallest set that satisfies all of them (times and latencies in frame
intervals, so fps = 1):

* client 1 last offloaded frame 6, which arrived at 8, with interval 3: its next request is
  frame 9, arriving at 11 (simulate);
* opportunistic batching: at 11 a batch of 1 although client 1 accepts 2; at 17 three
  requests are waiting and a batch of 2 forms, since every client accepts at most 2;
* adjust, from the current batch's completion at 11: the first and second requests form one
  batch starting at 11, and the requests of clients 1 and 2 that arrived at 17 move forward
  to 15, no longer conflicting with frame 20 of client 3.
"""

import pytest

from arise_ros.latency_profile import BatchLatencyProfile
from arise_ros.scheduler import (
    ClientState,
    Request,
    Settings,
    adjust,
    opportunistic_batches,
    simulate,
)

PROFILE = BatchLatencyProfile('example', {1: 1.5, 2: 2.0}, 'dissertation Fig. 3.10 (rebuilt)')


def _client(client_id: str, frame: int, arrival: float) -> ClientState:
    # uplink 0: a frame arrives when it is captured, so "frame f arrived at t" fixes the clock
    return ClientState(client_id, 1.0, 0.05, 0.0, 0.0, frame_id_now=frame, now_s=arrival)


CLIENTS = [_client('1', 6, 8.0), _client('2', 5, 9.0), _client('3', 10, 7.0)]
SETTINGS = {
    '1': Settings(interval=3, batch_size=2, e2e_frames=2, capacity=0.0, estimated_drop=0.0),
    '2': Settings(interval=4, batch_size=2, e2e_frames=2, capacity=0.0, estimated_drop=0.0),
    '3': Settings(interval=5, batch_size=2, e2e_frames=2, capacity=0.0, estimated_drop=0.0),
}
ANCHORS = {'1': 6, '2': 5, '3': 10}
NO_FLOOR = {'1': -100, '2': -100, '3': -100}


def _simulated() -> list[Request]:
    return simulate(CLIENTS, SETTINGS, ANCHORS, NO_FLOOR, horizon_end_s=17.0)


def _adjusted(grace_fraction: float):
    # the current batched inference completes at 11
    return adjust(
        _simulated(),
        {c.client_id: c for c in CLIENTS},
        SETTINGS,
        PROFILE,
        start_s=11.0,
        grace_fraction=grace_fraction,
        last_frames=ANCHORS,
        earliest=NO_FLOOR,
    )


def _layout(batches) -> list[tuple[float, list[tuple[str, int]]]]:
    return [(b.start_s, [(r.client_id, r.frame_id) for r in b.requests]) for b in batches]


def test_simulate_continues_each_client_from_its_last_frame_and_interval():
    requests = _simulated()
    assert requests[0] == Request('1', 9, 11.0)
    assert [(r.arrival_s, r.client_id, r.frame_id) for r in requests] == [
        (11.0, '1', 9),
        (12.0, '3', 15),
        (13.0, '2', 9),
        (14.0, '1', 12),
        (17.0, '1', 15),
        (17.0, '2', 13),
        (17.0, '3', 20),
    ]


def test_opportunistic_batching_takes_what_has_arrived():
    batches = opportunistic_batches(_simulated(), SETTINGS, PROFILE, start_s=11.0)
    assert _layout(batches) == [
        (11.0, [('1', 9)]),  # one request at 11: a batch of 1
        (12.5, [('3', 15)]),
        (14.0, [('2', 9), ('1', 12)]),
        (17.0, [('1', 15), ('2', 13)]),  # three waiting at 17, batches of at most 2
        (19.0, [('3', 20)]),  # client 3 waits for the next batch
    ]


def test_adjust_packs_greedily_and_moves_requests_to_their_batch():
    batches = _adjusted(grace_fraction=0.0)
    assert _layout(batches) == [
        (11.0, [('1', 9), ('3', 14)]),  # the first two requests together at 11
        (13.0, [('2', 9), ('1', 11)]),
        (15.0, [('1', 13), ('2', 11)]),  # clients 1 and 2 moved from 17 to 15 ...
        (17.0, [('3', 20)]),  # ... and no longer conflict with client 3's frame 20
    ]
    for batch in batches:
        for request in batch.requests:
            assert request.arrival_s == batch.start_s
    # The adjusted plan leaves the server no gap: each batch starts as the last one ends.
    for earlier, later in zip(batches, batches[1:], strict=False):
        assert later.start_s == earlier.end_s


def test_grace_period_leaves_a_tenth_of_each_batch_free():
    batches = _adjusted(grace_fraction=0.1)
    assert [b.start_s for b in batches[:3]] == pytest.approx([11.0, 13.2, 15.4])
