# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Domain reservations are exclusive across processes and released on exit."""

import os
import subprocess
import sys
import textwrap

from edge_offload_testing import reserve_domain_id, ros_domain
from edge_offload_testing.ros_domain import FIRST_TEST_DOMAIN_ID, LAST_TEST_DOMAIN_ID


def test_nested_reservations_get_distinct_ids_in_range():
    with reserve_domain_id() as first, reserve_domain_id() as second:
        assert first != second
        for domain_id in (first, second):
            assert FIRST_TEST_DOMAIN_ID <= domain_id <= LAST_TEST_DOMAIN_ID


def test_another_process_cannot_take_a_held_id():
    probe = textwrap.dedent(
        """
        import fcntl, os, sys
        from edge_offload_testing.ros_domain import _LOCK_DIR
        fd = os.open(_LOCK_DIR / f'{sys.argv[1]}.lock', os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            sys.exit(3)
        sys.exit(0)
        """
    )
    with reserve_domain_id() as held:
        busy = subprocess.run([sys.executable, '-c', probe, str(held)], check=False)
    free = subprocess.run([sys.executable, '-c', probe, str(held)], check=False)
    assert busy.returncode == 3
    assert free.returncode == 0


def test_a_domain_a_live_process_still_speaks_in_is_taken_last(monkeypatch):
    # An orphaned node of an earlier test keeps its domain's environment variable.
    monkeypatch.setattr(ros_domain, 'FIRST_TEST_DOMAIN_ID', 150)
    monkeypatch.setattr(ros_domain, 'LAST_TEST_DOMAIN_ID', 151)
    orphan = subprocess.Popen(
        [sys.executable, '-c', 'import time; time.sleep(60)'],
        env={**os.environ, 'ROS_DOMAIN_ID': '150'},
    )
    try:
        assert 150 in ros_domain.domains_of_live_processes()
        for _ in range(5):  # the order is random otherwise
            with reserve_domain_id() as domain_id:
                assert domain_id == 151
                # Only when every clean id is held does the orphan's come up.
                with reserve_domain_id() as second:
                    assert second == 150
    finally:
        orphan.kill()
        orphan.wait()
