# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Where the fetched real data and pretrained weights live.

``tools/fetch_assets.py`` (run by ``make setup``) puts them under
``<venv>/share/edge_offload/assets``; ``EDGE_OFFLOAD_ASSETS_DIR`` overrides the folder. On a
robot with Debian's ``opencv-doc`` or ``darknet`` installed, their system copies are found too.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ASSETS_ENV = 'EDGE_OFFLOAD_ASSETS_DIR'

# Where Debian installs the media that the fetch script copies into media/<package>/.
_SYSTEM_MEDIA = {
    'media/opencv/': Path('/usr/share/doc/opencv-doc/examples/data'),
    'media/darknet/': Path('/usr/share/darknet/data'),
}


class AssetMissingError(FileNotFoundError):
    """A data file or weight file has not been fetched."""


def assets_dir() -> Path:
    """Return the asset folder (it may not exist yet)."""
    override = os.environ.get(ASSETS_ENV)
    if override:
        return Path(override).expanduser()
    return Path(sys.prefix) / 'share' / 'edge_offload' / 'assets'


def asset_path(relative: str) -> Path:
    """Return the path of asset ``relative`` (e.g. ``media/opencv/vtest.avi``).

    Raises AssetMissingError, naming the command that fetches it, when it is absent.
    """
    candidate = assets_dir() / relative
    if candidate.is_file():
        return candidate
    for prefix, system_dir in _SYSTEM_MEDIA.items():
        if relative.startswith(prefix):
            system_copy = system_dir / relative[len(prefix) :]
            if system_copy.is_file():
                return system_copy
    raise AssetMissingError(
        f'{relative} not found in {assets_dir()}; fetch the assets with `make setup` '
        f'(tools/fetch_assets.py) or point {ASSETS_ENV} at a folder that has them'
    )
