# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The link monitor estimates bandwidth from real transfers and RTT from probes.

Unit tests feed the estimator known samples; the system test runs real requests through
the link emulator and checks that the estimate follows a step change of the rate.
"""

from __future__ import annotations

import math
import time

import pytest
import torch

from edge_offload.client import ClientConfig, EdgeClient
from edge_offload.link_emulator import LinkEmulator, LinkEmulatorConfig
from edge_offload.link_monitor import (
    SOURCE_ACTIVE_PROBE,
    SOURCE_COMBINED,
    SOURCE_UNKNOWN,
    LinkEstimator,
)
from edge_offload.server import EdgeServer, ServerConfig
from edge_offload_testing import make_test_keys


def test_empty_estimator_reports_unknown():
    estimate = LinkEstimator().snapshot(now=10.0)
    assert estimate.source == SOURCE_UNKNOWN
    assert math.isnan(estimate.uplink_bandwidth_bps)
    assert math.isnan(estimate.rtt_s)
    assert estimate.sample_count == 0


def test_rtt_mean_stddev_and_loss():
    estimator = LinkEstimator(rtt_window_s=2.0, probe_timeout_s=1.0)
    for index in range(10):
        sent = 1.0 + 0.1 * index
        estimator.record_probe_sent(sent)
        if index % 5 != 4:  # every fifth probe is lost
            estimator.record_rtt(0.010 + 0.002 * (index % 2), now=sent + 0.01)
    estimate = estimator.snapshot(now=3.0)
    assert estimate.source == SOURCE_ACTIVE_PROBE
    assert estimate.rtt_s == pytest.approx(0.011, abs=1e-4)
    assert estimate.rtt_stddev_s == pytest.approx(0.001, abs=1e-4)
    assert estimate.loss_ratio == pytest.approx(0.2)


def test_uplink_bandwidth_subtracts_base_rtt():
    estimator = LinkEstimator(window_s=1.0)
    estimator.record_rtt(0.010, now=0.5)
    # 1 MB up in 0.16 s + 10 ms RTT: 50 Mbit/s.
    for index in range(5):
        estimator.record_transfer(1_000_000, 0, 0.170, now=1.0 + 0.2 * index)
    estimate = estimator.snapshot(now=1.9)
    assert estimate.source == SOURCE_COMBINED
    assert estimate.uplink_bandwidth_bps == pytest.approx(50e6, rel=1e-6)
    assert math.isnan(estimate.downlink_bandwidth_bps)


def test_known_downlink_time_is_removed_from_an_uplink_sample():
    estimator = LinkEstimator(window_s=1.0)
    estimator.record_transfer(0, 1_000_000, 0.080, now=1.0)  # downlink 100 Mbit/s
    estimator.record_transfer(1_000_000, 500_000, 0.200, now=1.1)  # 40 ms of it downlink
    estimate = estimator.snapshot(now=1.2)
    assert estimate.downlink_bandwidth_bps == pytest.approx(100e6)
    assert estimate.uplink_bandwidth_bps == pytest.approx(8e6 / 0.160)


def test_estimate_follows_the_window_and_holds_when_idle():
    estimator = LinkEstimator(window_s=1.0)
    estimator.record_transfer(1_000_000, 0, 0.160, now=1.0)  # 50 Mbit/s
    estimator.record_transfer(1_000_000, 0, 0.400, now=2.5)  # 20 Mbit/s
    assert estimator.snapshot(now=2.6).uplink_bandwidth_bps == pytest.approx(20e6)
    idle = estimator.snapshot(now=10.0)
    assert idle.uplink_bandwidth_bps == pytest.approx(20e6)
    assert idle.sample_count == 0


def test_tiny_transfers_are_ignored():
    estimator = LinkEstimator()
    estimator.record_transfer(100, 100, 0.001, now=1.0)
    assert math.isnan(estimator.snapshot(now=1.1).uplink_bandwidth_bps)


def test_estimate_tracks_an_emulated_step_change(tmp_path):
    """Configured 50 Mbit/s, then 20 Mbit/s: within 20 % of the new rate within 2 s."""
    keys = make_test_keys(tmp_path / 'keys')
    server = EdgeServer(
        ServerConfig(
            endpoint='tcp://127.0.0.1:0',
            models=['tiny_cnn'],
            secret_key_file=str(keys.server_secret),
            authorized_clients_dir=str(keys.authorized_clients_dir),
        )
    )
    port = int(server.start().rsplit(':', 1)[1])
    emulator = LinkEmulator(
        LinkEmulatorConfig.from_rtt(
            '127.0.0.1', port, rtt_s=0.010, uplink_bps=50e6, downlink_bps=50e6
        )
    )
    emulator.start()
    link = LinkEstimator(window_s=1.0)
    estimator_client = EdgeClient(
        ClientConfig(
            endpoint=f'tcp://127.0.0.1:{emulator.port}',
            secret_key_file=str(keys.robot_secret),
            server_public_key_file=str(keys.server_public),
        ),
        link=link,
    )
    # Real nnto requests: 393 kB of images up, 512 B of features down.
    images = {'image': torch.rand(8, 3, 64, 64)}
    try:
        assert estimator_client.wait_connected(10.0), estimator_client.state_reason
        # A robot's link is idle when it connects: let a few probes measure the RTT
        # before the requests saturate it (a probe queued behind a request measures
        # the queue, and the base RTT is their minimum).
        time.sleep(0.6)

        def run_for(seconds: float) -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                estimator_client.call(
                    'nnto', 'infer', {'model': 'tiny_cnn'}, images, timeout_s=10.0
                )

        run_for(2.5)
        before = link.snapshot()
        base_rtt_s = link.base_rtt_s()
        assert before.uplink_bandwidth_bps == pytest.approx(50e6, rel=0.2), (before, base_rtt_s)
        assert 0.009 < base_rtt_s < 0.05
        emulator.set_uplink(20e6)
        emulator.set_downlink(20e6)
        changed_at = time.monotonic()
        run_for(2.0 - 0.05)
        after = link.snapshot()
        assert time.monotonic() - changed_at < 2.5
        assert after.uplink_bandwidth_bps == pytest.approx(20e6, rel=0.2), after
    finally:
        estimator_client.close()
        emulator.stop()
        server.stop()
