# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The bridge's lopinfer and layer_split modes over real sockets to a real edge server."""

from __future__ import annotations

import pytest
import torch

from edge_offload.api import Offloader, OffloaderConfig
from edge_offload.client import ClientConfig
from edge_offload.models import load_model
from edge_offload.server import EdgeServer, ServerConfig
from edge_offload_testing import make_test_keys
from lopinfer_ros.graph import capture
from lopinfer_ros.locality import analyse
from lopinfer_ros.modes import LopInferMode, LopInferServerMode, make_plan_table

torch.set_num_threads(1)
MODEL = 'mobilenet_v2'


@pytest.fixture(scope='module')
def keys(tmp_path_factory):
    return make_test_keys(tmp_path_factory.mktemp('keys'))


@pytest.fixture(scope='module')
def plan_dir(tmp_path_factory):
    """Build a plan table for mobilenet_v2 (device factor 4) where the modes look for it."""
    directory = tmp_path_factory.mktemp('plans')
    model = load_model(MODEL)
    inputs = list(model.spec.example_inputs().values())
    graph = capture(model.module, inputs)
    table = make_plan_table(
        MODEL, graph, analyse(graph), inputs, device_factor=4.0, workers=1, progress=False
    )
    mode = LopInferMode.__new__(LopInferMode)
    mode.options = {'plan_dir': str(directory)}
    table.save(mode.table_path(MODEL, graph))
    return directory


def _server(keys) -> EdgeServer:
    return EdgeServer(
        ServerConfig(
            endpoint='tcp://127.0.0.1:0',
            models=[MODEL],
            modes=['lopinfer', 'layer_split'],
            secret_key_file=str(keys.server_secret),
            authorized_clients_dir=str(keys.authorized_clients_dir),
        )
    )


def _offloader(keys, endpoint: str, mode: str, **options) -> Offloader:
    client = ClientConfig(
        endpoint=endpoint,
        secret_key_file=str(keys.robot_secret),
        server_public_key_file=str(keys.server_public),
        request_timeout_s=30.0,
    )
    return Offloader(OffloaderConfig(mode=mode, client=client, mode_options={mode: options}))


def _frame(seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {'image': torch.rand(1, 3, 224, 224, generator=generator)}


@pytest.mark.parametrize(
    ('mode', 'kind', 'bandwidth'),
    [
        ('lopinfer', '', 2e6),
        ('lopinfer', '', 8e6),
        ('lopinfer', 'server_only', 8e6),
        ('layer_split', '', 1e6),
        ('layer_split', '', 30e6),
    ],
)
def test_split_modes_over_sockets_match_local(keys, plan_dir, mode, kind, bandwidth):
    model = load_model(MODEL)
    options = {
        'plan_dir': str(plan_dir),
        'device_factor': 4.0,
        'fixed_bandwidth_bytes_per_s': bandwidth,
        'plan_kind': kind,
    }
    with _server(keys) as server, _offloader(keys, server.endpoint, mode, **options) as offloader:
        assert offloader.client.wait_connected(5.0)
        for seed in range(2):
            frame = _frame(seed)
            outcome = offloader.infer(MODEL, frame)
            assert not outcome.fell_back, outcome.fallback_reason
            assert outcome.mode_used == mode
            expected = model(frame)['logits']
            # Slices may run other conv algorithms than the whole tensor: float32 rounding.
            torch.testing.assert_close(outcome.outputs['logits'], expected, rtol=1e-4, atol=1e-4)
            assert outcome.outputs['logits'].argmax() == expected.argmax()
        if kind == 'server_only':
            # The input goes up once, the logits come down once.
            assert outcome.stats.bytes_up >= frame['image'].nbytes


def test_missing_plan_table_runs_locally_and_says_so(keys, tmp_path):
    options = {'plan_dir': str(tmp_path / 'none'), 'planner_workers': 1}
    with (
        _server(keys) as server,
        _offloader(keys, server.endpoint, 'lopinfer', **options) as offloader,
    ):
        assert offloader.client.wait_connected(5.0)
        outcome = offloader.infer(MODEL, _frame(0))
    assert outcome.fell_back
    assert 'being built' in outcome.fallback_reason


def test_server_failing_mid_request_falls_back_to_local(keys, plan_dir, monkeypatch):
    model = load_model(MODEL)

    def broken_push(self, request, call):
        raise RuntimeError('server crashed while receiving slices')

    monkeypatch.setattr(LopInferServerMode, '_push', broken_push)
    options = {
        'plan_dir': str(plan_dir),
        'device_factor': 4.0,
        'fixed_bandwidth_bytes_per_s': 2e6,
        'plan_kind': 'server_only',  # always pushes the input (a planned split may not)
    }
    frame = _frame(3)
    with (
        _server(keys) as server,
        _offloader(keys, server.endpoint, 'lopinfer', **options) as offloader,
    ):
        assert offloader.client.wait_connected(5.0)
        outcome = offloader.infer(MODEL, frame)
    assert outcome.fell_back
    assert outcome.mode_used == 'local'
    assert 'lopinfer' in outcome.fallback_reason
    assert torch.equal(outcome.outputs['logits'], model(frame)['logits'])


def test_server_refuses_a_plan_of_another_graph(keys, plan_dir):
    from edge_offload import protocol
    from edge_offload.models import ModelCache
    from edge_offload.modes.base import ServerCall, ServerModeContext

    mode = LopInferServerMode(ServerModeContext(models=ModelCache({MODEL})))
    state = mode.open_session('s')
    call = ServerCall(
        'begin',
        {
            'request': 1,
            'model': MODEL,
            'graph_hash': 'not-this-graph',
            'input_shapes': [[1, 3, 224, 224]],
            'input_dtypes': ['float32'],
            'plan_hash': 'x',
        },
        {},
        's',
        1,
    )
    with pytest.raises(protocol.ProtocolError, match='graph hash mismatch'):
        mode.handle(state, call)


def test_kapao_people_pipeline_splits_whole_with_nms_on_one_side(keys, tmp_path):
    """KAPAO-S from the uint8 image to people, NMS included, over sockets.

    The server captures its graph on a zero image, whose people count differs from the
    robot's frame: the graph hash must not depend on it. server_only runs NMS on the
    server, so only the packed people come back, not the 5.8 MB dense prediction.
    """
    name = 'kapao_s'
    model = load_model(name)
    generator = torch.Generator().manual_seed(5)
    frame = {'image': torch.randint(0, 256, (1, 3, 480, 640), generator=generator).byte()}
    graph = capture(model.module, [frame['image']])
    assert sum(node.op == 'opaque:KapaoPostprocess' for node in graph.nodes) == 1
    table = make_plan_table(
        name,
        graph,
        analyse(graph),
        [frame['image']],
        device_factor=2.0,
        workers=1,
        buckets=[8],
        time_budget_s=0.3,
    )
    mode = LopInferMode.__new__(LopInferMode)
    mode.options = {'plan_dir': str(tmp_path)}
    table.save(mode.table_path(name, graph))
    expected = model(frame)
    config = ServerConfig(
        endpoint='tcp://127.0.0.1:0',
        models=[name],
        modes=['lopinfer'],
        secret_key_file=str(keys.server_secret),
        authorized_clients_dir=str(keys.authorized_clients_dir),
    )
    for kind in ('server_only', 'lopinfer'):
        server = EdgeServer(config)
        options = {
            'plan_dir': str(tmp_path),
            'device_factor': 2.0,
            'fixed_bandwidth_bytes_per_s': 8e6,
            'plan_kind': kind,
        }
        with server, _offloader(keys, server.endpoint, 'lopinfer', **options) as offloader:
            assert offloader.client.wait_connected(5.0)
            outcome = offloader.infer(name, frame)
        assert not outcome.fell_back, outcome.fallback_reason
        for key, want in expected.items():
            got = outcome.outputs[key]
            assert got.shape == want.shape, key
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-3)
        if kind == 'server_only':
            assert outcome.stats.bytes_up >= frame['image'].nbytes
            assert outcome.stats.bytes_down < 100_000
