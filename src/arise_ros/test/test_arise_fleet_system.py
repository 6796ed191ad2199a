# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Several robot processes against one real edge server serving ARISE.

The server runs as its own process with the ``arise`` mode and the trained server depth
net; four emulated robots (``arise_emulated_robot``, each its own process and CURVE key)
join over the authenticated protocol. ARISE admits them, plans their offloads and batches
them; one robot's scene then changes so fast that no schedule meets its SLA, and ARISE
evicts it. Every robot keeps getting results throughout: from the server while admitted,
from its local model otherwise.
"""

import json
import subprocess
import sys
import time

from arise_ros.latency_profile import BatchLatencyProfile, save_profile
from edge_offload_testing.offload import (
    HeadlessServer,
    authorize_robot,
    make_test_keys,
)


def _robot(keys, secret, endpoint: str, name: str, summary, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            '-m',
            'arise_ros.emulated_robot',
            '--endpoint',
            endpoint,
            '--secret-key-file',
            str(secret),
            '--server-public-key-file',
            str(keys.server_public),
            '--name',
            name,
            '--fps',
            '20',
            '--sla',
            '0.04',
            '--duration-s',
            '10',
            '--summary',
            str(summary),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _arise_arguments(tmp_path) -> tuple[str, ...]:
    """Serve ARISE with a fixed profile file, as a GPU server's measured one is loaded.

    The profile is slower than this machine's CPU, so batches finish within their slots; and
    a profile measured at start-up on a loaded test machine could plan no robot at all.
    """
    profile = tmp_path / 'profile.yaml'
    if not profile.exists():
        save_profile(
            BatchLatencyProfile('accumo_depth', {1: 0.1, 2: 0.12, 3: 0.14, 4: 0.16}, 'test'),
            profile,
        )
    return (
        *('--modes', 'nnto,arise', '--mode-option', 'arise.max_batch=4'),
        *('--mode-option', f'arise.profile_file={profile}'),
    )


def test_arise_admits_schedules_evicts_and_every_robot_keeps_getting_results(tmp_path):
    keys = make_test_keys(tmp_path)
    fleet = (
        ('calm_0', ('--rate', '0.003')),
        ('calm_1', ('--rate', '0.004')),
        ('calm_2', ('--rate', '0.005')),
        # at 4 s its scene changes faster than any schedule can follow (rate > SLA)
        ('storm', ('--rate', '0.004', '--rate-change', '4:0.5')),
    )
    secrets = {name: authorize_robot(keys, name) for name, _ in fleet}
    server = HeadlessServer(keys, ['accumo_depth'], *_arise_arguments(tmp_path))
    endpoint = f'tcp://127.0.0.1:{server.port}'
    try:
        robots = {
            name: _robot(keys, secrets[name], endpoint, name, tmp_path / f'{name}.json', *extra)
            for name, extra in fleet
        }
        outputs = {name: process.communicate(timeout=120)[0] for name, process in robots.items()}
    finally:
        server.stop()
    summaries = {}
    for name, process in robots.items():
        assert process.returncode == 0, f'{name} failed:\n{outputs[name]}'
        summaries[name] = json.loads((tmp_path / f'{name}.json').read_text())
    for name, summary in summaries.items():
        statuses = [status for _, status in summary['statuses']]
        assert 'admitted' in statuses, f'{name} was never admitted: {summary}'
        assert summary['server_results'] > 0, summary
        assert summary['failed'] == 0, json.dumps(summary)
        # A result every frame: a tracked server result or the local model's. A fresh
        # server result comes every planned interval (about 1 s for calm_0, whose scene is
        # slow), and no robot goes 2 s without one.
        assert summary['longest_gap_s'] < 2.0, summary
    storm = summaries['storm']
    assert 'evicted' in [status for _, status in storm['statuses']], storm
    evicted_at = next(t for t, status in storm['statuses'] if status == 'evicted')
    assert evicted_at > 4.0
    # It rejoins declaring its new rate, so it waits (locally) instead of being admitted and
    # evicted again at every frame (it may be admitted again once the others leave).
    evictions = [status for _, status in storm['statuses']].count('evicted')
    assert evictions <= 2, storm['statuses']
    assert storm['local_frames'] > 20, 'after its eviction the robot runs locally'
    for name in ('calm_0', 'calm_1', 'calm_2'):
        statuses = [status for _, status in summaries[name]['statuses']]
        assert 'evicted' not in statuses, summaries[name]
        assert summaries[name]['mean_drop'] <= summaries[name]['sla'], summaries[name]


def test_robots_whose_server_dies_run_locally_within_two_seconds(tmp_path):
    keys = make_test_keys(tmp_path)
    names = ('r0', 'r1', 'r2')
    secrets = {name: authorize_robot(keys, name) for name in names}
    server = HeadlessServer(keys, ['accumo_depth'], *_arise_arguments(tmp_path))
    endpoint = f'tcp://127.0.0.1:{server.port}'
    robots = {
        name: _robot(
            keys, secrets[name], endpoint, name, tmp_path / f'{name}.json', '--rate', '0.004'
        )
        for name in names
    }
    try:
        time.sleep(5.0)  # the robots join, are admitted and offload
        server.process.kill()  # the edge server dies under load (no goodbye)
        server.process.wait()
        outputs = {name: process.communicate(timeout=120)[0] for name, process in robots.items()}
    finally:
        server.stop()
    for name, process in robots.items():
        assert process.returncode == 0, f'{name} failed:\n{outputs[name]}'
        summary = json.loads((tmp_path / f'{name}.json').read_text())
        statuses = [status for _, status in summary['statuses']]
        assert 'admitted' in statuses, summary
        assert 'lost' in statuses, summary
        assert summary['server_results'] > 0, summary
        # the robot saw the server go and carried on with its local model, in time
        assert summary['longest_gap_s'] < 2.0, summary
        assert summary['local_frames'] > 20, summary
        print(name, summary['longest_gap_s'], summary['statuses'])  # noqa: T201 - for -s


def test_robots_move_to_the_second_server_when_the_first_dies(tmp_path):
    keys = make_test_keys(tmp_path)
    names = ('r0', 'r1', 'r2')
    secrets = {name: authorize_robot(keys, name) for name in names}
    arguments = _arise_arguments(tmp_path)
    first = HeadlessServer(keys, ['accumo_depth'], *arguments)
    second = HeadlessServer(keys, ['accumo_depth'], *arguments)
    endpoints = [f'tcp://127.0.0.1:{server.port}' for server in (first, second)]
    robots = {
        name: _robot(keys, secrets[name], ','.join(endpoints), name, tmp_path / f'{name}.json')
        for name in names
    }
    try:
        time.sleep(5.0)
        first.process.kill()
        first.process.wait()
        outputs = {name: process.communicate(timeout=120)[0] for name, process in robots.items()}
    finally:
        first.stop()
        second.stop()
    for name, process in robots.items():
        assert process.returncode == 0, f'{name} failed:\n{outputs[name]}'
        summary = json.loads((tmp_path / f'{name}.json').read_text())
        statuses = [status for _, status in summary['statuses']]
        lost = statuses.index('lost')
        assert 'admitted' in statuses[:lost], summary
        assert 'admitted' in statuses[lost:], 'the second server takes the robot'
        assert summary['results_by_endpoint'].get(endpoints[0], 0) > 0, summary
        assert summary['results_by_endpoint'].get(endpoints[1], 0) > 0, summary
        assert summary['longest_gap_s'] < 2.0, summary
        print(name, summary['longest_gap_s'], summary['statuses'])  # noqa: T201 - for -s
