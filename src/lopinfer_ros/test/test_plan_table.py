# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Plan tables: buckets, JSON round trip, refusal of foreign tables, parallel building."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from lopinfer_ros.baselines import device_only, server_only
from lopinfer_ros.plan_table import (
    FORMAT_VERSION,
    MODES,
    PlanTable,
    bucket_for,
    build_table,
    planned_bandwidth,
)
from lopinfer_ros.problem import ATOMIC, INPUT, LOCAL, CostCurve, LinkModel, PlanNode, PlanProblem
from lopinfer_ros.simulator import simulate

MS = 1e-3
SETTINGS = {'time_budget_s': 30.0, 'max_non_improving': 60, 'max_iterations': 600}


def _curve(width: int, seconds: float) -> CostCurve:
    return (
        CostCurve((1, width), (seconds / width, seconds))
        if width > 1
        else CostCurve((1,), (seconds,))
    )


def _problem(model: str = 'tiny-net', graph_hash: str = 'g1') -> PlanProblem:
    """Input, two 3-wide convolutions with a residual add, a global head."""
    width = 16
    conv = [(max(0, j - 1), min(width, j + 2)) for j in range(width)]
    ident = [(j, j + 1) for j in range(width)]
    specs = [
        ('x', INPUT, width, (), (), 300, 0.0, 0.0),
        ('c1', LOCAL, width, (0,), (conv,), 200, 12 * MS, 2 * MS),
        ('c2', LOCAL, width, (1,), (conv,), 200, 12 * MS, 2 * MS),
        ('add', LOCAL, width, (2, 1), (ident, ident), 200, 0.5 * MS, 0.1 * MS),
        ('head', ATOMIC, 1, (3,), ([(0, width)],), 40, 1 * MS, 0.2 * MS),
    ]
    nodes = tuple(
        PlanNode(
            name,
            name,
            kind,
            w,
            inputs,
            tuple(tuple(a for a, _ in need) for need in needs),
            tuple(tuple(b for _, b in need) for need in needs),
            cb,
            _curve(w, dev),
            _curve(w, srv),
        )
        for name, kind, w, inputs, needs, cb, dev, srv in specs
    )
    return PlanProblem(model, graph_hash, nodes, (4,), 300 * width, profile_hash='p1')


LINK = LinkModel(1e6, latency_s=0.001)


@pytest.fixture(scope='module')
def table() -> PlanTable:
    return build_table(
        _problem(),
        LINK,
        buckets=[0, 1, 4, 30],
        workers=1,
        progress=False,
        device_factor=19.0,
        **SETTINGS,
    )


@pytest.mark.parametrize(
    ('bandwidth', 'bucket'),
    [
        (0.0, 0),
        (-5.0, 0),
        (math.nan, 0),
        (999_999.0, 0),
        (1_000_000.0, 1),
        (1_999_999.9, 1),
        (12.5e6, 12),
        (30e6, 30),
        (30.9e6, 30),
        (1e9, 30),
        (math.inf, 30),
    ],
)
def test_bucket_for_floors_megabytes_and_clamps(bandwidth, bucket):
    assert bucket_for(bandwidth) == bucket


def test_buckets_are_planned_at_their_floor_bandwidth():
    assert planned_bandwidth(0) == 250_000.0
    assert planned_bandwidth(1) == 1e6
    assert planned_bandwidth(30) == 30e6


def test_table_entries_and_plans(table):
    problem = _problem()
    assert sorted(table.entries) == [0, 1, 4, 30]
    assert table.device_factor == 19.0
    assert (table.model, table.graph_hash, table.profile_hash) == ('tiny-net', 'g1', 'p1')
    assert table.planner['max_non_improving'] == 60
    assert table.planner['beam_width'] == 8  # defaults are recorded too
    assert table.plan('device_only', 4) == device_only(problem)
    assert table.plan('server_only', 4) == server_only(problem)
    for bucket, entry in table.entries.items():
        link = LinkModel(planned_bandwidth(bucket), latency_s=0.001)
        assert entry.bandwidth_bytes_per_s == planned_bandwidth(bucket)
        assert set(entry.makespan_s) == set(MODES)
        for mode in MODES:
            sim = simulate(problem, table.plan(mode, bucket), link)
            assert sim.makespan_s == pytest.approx(entry.makespan_s[mode], rel=1e-12)
            assert (sim.bytes_up, sim.bytes_down) == (
                entry.bytes_up[mode],
                entry.bytes_down[mode],
            )
        best = min(entry.makespan_s[m] for m in ('device_only', 'server_only', 'layer_split'))
        assert entry.makespan_s['lopinfer'] <= best * (1 + 1e-12)
    assert table.bucket_for(4.7e6) == 4
    # Buckets the table was not planned for run the nearest planned one below, else the
    # lowest: never a bucket the table has no plan for.
    assert table.bucket_for(10.2e6) == 4
    assert table.bucket_for(3.9e6) == 1
    assert table.bucket_for(1e9) == 30
    partial = dataclasses.replace(table, entries={b: table.entries[b] for b in (4, 30)})
    assert partial.bucket_for(0.5e6) == 4
    with pytest.raises(ValueError, match='unknown mode'):
        table.plan('nnto', 4)
    with pytest.raises(KeyError, match='no bucket 7'):
        table.plan('lopinfer', 7)


def test_save_load_round_trip(table, tmp_path):
    path = tmp_path / 'table.json'
    table.save(path)
    loaded = PlanTable.load(path, expect_model='tiny-net', expect_graph_hash='g1')
    assert loaded.entries == table.entries
    assert loaded.link == table.link
    assert loaded.planner == table.planner
    assert loaded.created == table.created
    assert (loaded.device_only, loaded.server_only) == (table.device_only, table.server_only)
    assert loaded.device_factor == 19.0
    for bucket in table.entries:
        for mode in MODES:
            assert loaded.plan(mode, bucket) == table.plan(mode, bucket)
    data = json.loads(path.read_text())
    assert data['format_version'] == FORMAT_VERSION
    assert data['bucket_unit_bytes_per_s'] == 1_000_000


def _write(path, data) -> None:
    path.write_text(json.dumps(data))


def test_load_refuses_foreign_or_broken_tables(table, tmp_path):
    path = tmp_path / 'table.json'
    table.save(path)
    with pytest.raises(ValueError, match="built for model 'tiny-net', not 'other'"):
        PlanTable.load(path, expect_model='other')
    with pytest.raises(ValueError, match='rebuild the table'):
        PlanTable.load(path, expect_model='tiny-net', expect_graph_hash='g2')
    good = json.loads(path.read_text())

    def broken(change) -> str:
        data = json.loads(json.dumps(good))
        change(data)
        _write(path, data)
        with pytest.raises(ValueError, match='table.json') as info:
            PlanTable.load(path)
        return str(info.value)

    assert 'version 99 is not supported' in broken(lambda d: d.update(format_version=99))
    assert 'not a LOPInfer plan table' in broken(lambda d: d.update(format='something'))
    assert 'graph_hash' in broken(lambda d: d.pop('graph_hash'))
    assert '0 <= r <= m' in broken(lambda d: d['entries'][0]['lopinfer']['r'].__setitem__(1, 99))
    assert 'one length' in broken(lambda d: d['entries'][0]['layer_split']['m'].pop())

    def shorten(d):
        d['entries'][0]['layer_split']['m'].pop()
        d['entries'][0]['layer_split']['r'].pop()

    assert 'nodes, not 5' in broken(shorten)
    assert 'appears twice' in broken(lambda d: d['entries'].append(d['entries'][0]))
    assert 'makespan_s' in broken(lambda d: d['entries'][1]['makespan_s'].pop('lopinfer'))
    assert 'bad bucket' in broken(lambda d: d['entries'][0].update(bucket=31))
    path.write_text('{"format": ')
    with pytest.raises(ValueError, match='not valid JSON'):
        PlanTable.load(path)


def test_build_arguments_are_checked():
    with pytest.raises(TypeError, match='unknown planner settings: beam'):
        build_table(_problem(), LINK, buckets=[1], workers=1, progress=False, beam=3)
    with pytest.raises(ValueError, match='outside 0..30'):
        build_table(_problem(), LINK, buckets=[31], workers=1, progress=False)


def test_parallel_build_equals_serial_build(table, capsys):
    parallel = build_table(
        _problem(),
        LINK,
        buckets=[0, 1, 4, 30],
        workers=2,
        progress=True,
        device_factor=19.0,
        **SETTINGS,
    )
    assert parallel.entries == table.entries
    assert parallel.planner['workers'] == 2
    assert 'plan table tiny-net' in capsys.readouterr().err  # the tqdm bar
