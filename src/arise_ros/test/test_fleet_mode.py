# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The fleet's front door over the real protocol: robots ask where to go, nothing else."""

import time

import pytest

from arise_ros.client import FleetDirectoryClient
from arise_ros.fleet_directory import ServerLoad
from edge_offload.errors import ServerRejectedError
from edge_offload_testing.offload import edge_client_for, loopback_edge_server, make_test_keys


def test_robots_get_the_servers_with_room_and_bad_calls_are_refused(tmp_path):
    keys = make_test_keys(tmp_path)
    # The front door loads no model: its mode needs none.
    server = loopback_edge_server(keys, models=[], modes=['fleet'])
    endpoint = server.start()
    client = edge_client_for(keys, endpoint)
    try:
        directory = server.served_mode('fleet').directory
        now = time.monotonic()
        for name, idle in (('busy', 0.1), ('free', 0.8)):
            directory.report(ServerLoad(name, f'tcp://10.0.0.1:{name}', 2, 0, idle, 8, now))
        fleet = FleetDirectoryClient(client, timeout_s=5.0)
        assert fleet.where() == ['tcp://10.0.0.1:free', 'tcp://10.0.0.1:busy']
        assert fleet.where(avoid='tcp://10.0.0.1:free')[-1] == 'tcp://10.0.0.1:free'
        with pytest.raises(ServerRejectedError, match='avoid is an endpoint'):
            client.call('fleet', 'where', {'avoid': 7}, timeout_s=5.0)
        with pytest.raises(ServerRejectedError, match='no op'):
            client.call('fleet', 'report', {}, timeout_s=5.0)
        statuses = {status.name: status for status in server.mode_diagnostics()}
        assert statuses['fleet'].message == '2 ARISE server(s) up'
        # The robot sent to 'free' counts there until its next report.
        assert statuses['fleet server free'].values['idle share'] == '0.75'
    finally:
        client.close()
        server.stop()


def test_a_server_with_no_models_must_serve_only_modes_that_need_none(tmp_path):
    keys = make_test_keys(tmp_path)
    with pytest.raises(ValueError, match='run models'):
        loopback_edge_server(keys, models=[], modes=['fleet', 'nnto'])
