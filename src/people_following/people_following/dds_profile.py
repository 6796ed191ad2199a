# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The Fast DDS profile for camera frames, used where DDS is not configured already.

``config/fastdds_large_frames.xml`` gives Fast DDS a shared memory segment a frame fits in
(why, and the figures, are in the file). ``kapao_tracking`` and ``kapao_tracking.launch.py``
set FASTDDS_DEFAULT_PROFILES_FILE to it for the nodes they start, unless the user has
chosen: another RMW, or any of Fast DDS's own variables.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from people_following.graph import bringup_config_dir

PROFILE_NAME = 'fastdds_large_frames.xml'
PROFILE_VARIABLE = 'FASTDDS_DEFAULT_PROFILES_FILE'
# Any of these set means the user configured Fast DDS: leave it alone.
USER_VARIABLES = (PROFILE_VARIABLE, 'FASTRTPS_DEFAULT_PROFILES_FILE', 'FASTDDS_BUILTIN_TRANSPORTS')


def profile_path() -> Path:
    """Return the installed profile (or the source tree's copy)."""
    return bringup_config_dir() / PROFILE_NAME


def large_frames_profile(environ: Mapping[str, str]) -> str | None:
    """Return the profile to set as FASTDDS_DEFAULT_PROFILES_FILE, or None to leave DDS be.

    None when the RMW is not Fast DDS (``RMW_IMPLEMENTATION``; unset means Fast DDS, the
    default) or when any of ``USER_VARIABLES`` is set.
    """
    rmw = environ.get('RMW_IMPLEMENTATION') or 'rmw_fastrtps_cpp'
    if not rmw.startswith('rmw_fastrtps') or any(name in environ for name in USER_VARIABLES):
        return None
    path = profile_path()
    return str(path) if path.is_file() else None
