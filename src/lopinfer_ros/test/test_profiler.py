# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The profile, its in-situ robot calibration and the problem built from it."""

import pytest
import torch
from torch import nn

from lopinfer_ros.graph import capture
from lopinfer_ros.locality import analyse
from lopinfer_ros.profiler import build_problem, profile_graph, sample_widths


@pytest.fixture(scope='module')
def captured():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1)
    ).eval()
    x = torch.randn(1, 3, 16, 24)
    graph = capture(model, [x])
    return graph, analyse(graph), [x]


def test_profile_times_every_width_and_calibrates_the_slowed_robot(captured):
    graph, infos, inputs = captured
    profile = profile_graph(graph, infos, inputs, repeats=1, device_factor=3.0)
    widths = [row[0] for row in profile['nodes'][1:]]
    assert widths == [sample_widths(24)] * 3
    in_situ = profile['device_in_situ']
    assert in_situ['device_factor'] == 3.0
    assert len(in_situ['seconds']) == len(graph.nodes)
    assert all(s > 0 for s in in_situ['seconds'][1:])

    overhead = profile['runner_overhead_s']
    assert 0 < overhead < 0.01

    problem = build_problem('m', graph, infos, profile, device_factor=3.0)
    assert problem.nodes[0].device(24) == 0  # the input costs nothing
    for index in range(1, len(graph.nodes)):
        node = problem.nodes[index]
        # Whole width: the in-situ time times the factor, plus the runner's own time; the
        # server keeps the loop timings, plus the runner's time.
        assert node.device(24) == pytest.approx(3.0 * in_situ['seconds'][index] + overhead)
        assert node.server(24) == pytest.approx(profile['nodes'][index][1][-1] + overhead)
        # Narrower slices keep the loop curve's shape.
        ratio = (node.device(3) - overhead) / (node.device(24) - overhead)
        assert ratio == pytest.approx((node.server(3) - overhead) / (node.server(24) - overhead))

    # A problem for another factor does not use a calibration made for this one.
    other = build_problem('m', graph, infos, profile, device_factor=5.0)
    for index in range(1, len(graph.nodes)):
        assert other.nodes[index].device(24) == pytest.approx(
            5.0 * profile['nodes'][index][1][-1] + overhead
        )


def test_no_device_calibration_without_a_slowdown(captured):
    graph, infos, inputs = captured
    profile = profile_graph(graph, infos, inputs, repeats=1)
    assert 'device_in_situ' not in profile
    assert profile['runner_overhead_s'] > 0
    bare = profile_graph(graph, infos, inputs, repeats=1, calibration_runs=0)
    assert 'runner_overhead_s' not in bare
