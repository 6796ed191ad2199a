# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Reserve a ROS_DOMAIN_ID that no other test on this machine is using.

DDS participants in the same domain discover each other, so two tests that share a
domain (in one pytest run, in parallel runs, or in another checkout's CI) see each
other's topics. Each reservation holds an exclusive ``flock`` on a per-domain lock
file for as long as the test runs; the kernel drops the lock if the process dies, so
no stale reservation outlives a crashed run.

A lock does not cover a node process that outlived its test (an orphan of a killed
launch): it still speaks in its domain, and a later test there would count its
subscriptions as its own graph's. Ids that a live process has in its environment are
taken last.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path

# Domain 0 is everybody's default; Fast DDS on Linux accepts ids up to 232.
FIRST_TEST_DOMAIN_ID = 1
LAST_TEST_DOMAIN_ID = 200

_LOCK_DIR = Path(tempfile.gettempdir()) / 'edge_offload_ros_domains'
_VARIABLE = b'ROS_DOMAIN_ID='


def domains_of_live_processes(proc: Path = Path('/proc')) -> set[int]:
    """Return the ROS_DOMAIN_IDs in the environments of this machine's other processes."""
    found: set[int] = set()
    own = str(os.getpid())
    for entry in proc.glob('[0-9]*'):
        if entry.name == own:
            continue
        try:
            environment = (entry / 'environ').read_bytes()
        except OSError:  # gone meanwhile, or another user's
            continue
        for variable in environment.split(b'\0'):
            if variable.startswith(_VARIABLE):
                with contextlib.suppress(ValueError):
                    found.add(int(variable[len(_VARIABLE) :]))
    return found


@contextlib.contextmanager
def reserve_domain_id() -> Iterator[int]:
    """Yield a domain id held exclusively by this process until the block exits."""
    _LOCK_DIR.mkdir(exist_ok=True)
    candidates = list(range(FIRST_TEST_DOMAIN_ID, LAST_TEST_DOMAIN_ID + 1))
    # Random order keeps concurrent runs from contending for the same low ids.
    random.shuffle(candidates)
    in_use = domains_of_live_processes()
    candidates.sort(key=lambda domain_id: domain_id in in_use)  # stable: still shuffled
    for domain_id in candidates:
        lock_file = os.open(_LOCK_DIR / f'{domain_id}.lock', os.O_CREAT | os.O_RDWR, 0o666)
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock_file)
            continue
        try:
            yield domain_id
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)
            os.close(lock_file)
        return
    raise RuntimeError(
        f'all ROS domain ids {FIRST_TEST_DOMAIN_ID}..{LAST_TEST_DOMAIN_ID} are in use by '
        f'other tests (lock files in {_LOCK_DIR})'
    )
