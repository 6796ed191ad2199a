#!/usr/bin/env python3
# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Fetch the real data and pretrained weights the suite uses, from the package registries.

* BlazePose (person detector + 33-landmark model, Apache-2.0): the ``.tflite`` files inside
  the ``mediapipe==0.10.21`` wheel. The wheel is downloaded (not installed: it pins
  numpy<2 and pulls jax) and only the two model files are extracted.
* Real video and photos of people: Debian's ``opencv-doc`` (``vtest.avi``, ``messi5.jpg``,
  the stereo and flow pairs) and ``darknet`` (``person.jpg``), downloaded with
  ``apt-get download`` (no root needed) and unpacked with ``dpkg-deb`` into the asset folder,
  not into the system.
* Real trajectories, the reference data of the AccuMO metrics tests: the TUM RGB-D
  (``fr1/xyz``, ``fr2/desk``; CC BY 4.0) and KITTI odometry (sequence 00; CC BY-NC-SA 3.0)
  ground truth and SLAM estimates in the test folder of the ``evo==1.38.1`` source archive
  (the wheel has none), with evo's licence (GPL-3.0). The sdist is downloaded with pip,
  not installed (evo itself is a pinned test dependency in requirements.txt).

Everything lands in ``<venv>/share/edge_offload/assets`` (``edge_offload.assets`` finds it)
and is checked against the SHA-256 sums below. A second run downloads nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

MEDIAPIPE_WHEEL = 'mediapipe==0.10.21'
# Path in the wheel -> (file under assets/, sha256).
MEDIAPIPE_FILES = {
    'mediapipe/modules/pose_detection/pose_detection.tflite': (
        'weights/blazepose/pose_detection.tflite',
        '9ba9dd3d42efaaba86b4ff0122b06f29c4122e756b329d89dca1e297fd8f866c',
    ),
    'mediapipe/modules/pose_landmark/pose_landmark_full.tflite': (
        'weights/blazepose/pose_landmark_full.tflite',
        'e9a5c5cb17f736fafd4c2ec1da3b3d331d6edbe8a0d32395855aeb2cdfd64b9f',
    ),
    'mediapipe/LICENSE': ('weights/blazepose/LICENSE', None),
}

EVO_SDIST = 'evo==1.38.1'
_EVO_ROOT = 'evo-1.38.1/'
# Path in the sdist -> (file under assets/, sha256).
EVO_FILES = {
    _EVO_ROOT + 'LICENSE': (
        'data/evo/LICENSE',
        '8ceb4b9ee5adedde47b31e975c1d90c73ad27b6b165a1dcd80c7c545eb65b903',
    ),
    _EVO_ROOT + 'test/data/KITTI_00_gt.txt': (
        'data/evo/KITTI_00_gt.txt',
        '90791a4113df979b149fa9e1104e960ea59f525a8318a202dbb6aec1a3d88793',
    ),
    _EVO_ROOT + 'test/data/KITTI_00_ORB.txt': (
        'data/evo/KITTI_00_ORB.txt',
        '13437093039ccd585d03feb327a6f809a5e12a05a3be33d26192025411eded10',
    ),
    _EVO_ROOT + 'test/data/KITTI_00_SPTAM.txt': (
        'data/evo/KITTI_00_SPTAM.txt',
        'd364788759ed2c281be91b82fba9bb17d5e77811f1fb6953873b35208ccee0cf',
    ),
    _EVO_ROOT + 'test/data/fr2_desk_groundtruth.txt': (
        'data/evo/fr2_desk_groundtruth.txt',
        '0d8e0119a4e9592b886c5ca954472c3270c01814dd2059fbe196d5c24c8f3d17',
    ),
    _EVO_ROOT + 'test/data/fr2_desk_ORB.txt': (
        'data/evo/fr2_desk_ORB.txt',
        '9601009dd5124a841ce58f5d9681f28cdaadde651db02e2e9151e335f4aa5ef4',
    ),
    _EVO_ROOT + 'test/data/freiburg1_xyz-groundtruth.txt': (
        'data/evo/freiburg1_xyz-groundtruth.txt',
        'aac0319a6ef4e1cdf61e779d2152b95aa7e9f7b1749d6d18717b43ddabffede2',
    ),
    _EVO_ROOT + 'test/data/freiburg1_xyz-rgbdslam.txt': (
        'data/evo/freiburg1_xyz-rgbdslam.txt',
        'bbcd66c6e19e6037ee550c66d307c9a008ed29ef8bd9baa6bbda119a1a51a3ee',
    ),
    _EVO_ROOT + 'test/data/freiburg1_xyz-rgbdslam_drift.txt': (
        'data/evo/freiburg1_xyz-rgbdslam_drift.txt',
        '12f5c812792498ba6a9d3968590af8908d094e8bb8ddb183f1ce7c8f33048a44',
    ),
}

# Debian package -> (folder inside the package, folder under assets/).
DEBIAN_FOLDERS = {
    'opencv-doc': ('./usr/share/doc/opencv-doc/examples/data/', 'media/opencv'),
    'darknet': ('./usr/share/darknet/data/', 'media/darknet'),
}
# Files the tests and the main job rely on, with their sha256.
DEBIAN_CHECKED = {
    'media/opencv/vtest.avi': '45cddc9490be69345cbdab64ca583be65987e864ca408038e648db99e10516cf',
    'media/opencv/messi5.jpg': '1d570e49654e84c7a943918537bd9e5e1ef82920152e147c834006e235be97c9',
    'media/darknet/person.jpg': 'cdcbab947e46110fc2b77784ac54ddbbab2640f1e44cb5e91fc8984a9793a7d1',
}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open('rb') as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b''):
            digest.update(chunk)
    return digest.hexdigest()


def fail(message: str, *hints: str) -> None:
    print(f'fetch_assets: {message}', file=sys.stderr)
    for hint in hints:
        print(f'  {hint}', file=sys.stderr)
    sys.exit(1)


def pip_download(python: str, spec: str, options: list[str], folder: Path, pattern: str) -> Path:
    """Download one distribution (no dependencies) with pip; return the file."""
    result = subprocess.run(
        [python, '-m', 'pip', 'download', '-q', '--disable-pip-version-check', '--no-deps',
         *options, '-d', str(folder), spec],
        check=False,
    )  # fmt: skip
    files = list(folder.glob(pattern))
    if result.returncode != 0 or not files:
        fail(
            f'pip could not download {spec}.',
            'Check the network or PIP_INDEX_URL, then run make setup again.',
        )
    return files[0]


def fetch_mediapipe(assets: Path, python: str) -> None:
    wanted = {inner: assets / rel for inner, (rel, _) in MEDIAPIPE_FILES.items()}
    if all(path.is_file() for path in wanted.values()):
        return
    print(f'fetching the BlazePose .tflite files from the {MEDIAPIPE_WHEEL} wheel (35 MB)')
    with tempfile.TemporaryDirectory() as scratch:
        wheel_path = pip_download(
            python,
            MEDIAPIPE_WHEEL,
            ['--only-binary', ':all:', '--python-version', '3.11',
             '--platform', 'manylinux_2_28_x86_64'],
            Path(scratch),
            'mediapipe-*.whl',
        )  # fmt: skip
        with zipfile.ZipFile(wheel_path) as wheel:
            names = set(wheel.namelist())
            for inner, target in wanted.items():
                if inner not in names:
                    # The licence file moved in some builds; any LICENSE in the dist-info works.
                    inner = next(n for n in names if n.endswith('LICENSE'))
                target.parent.mkdir(parents=True, exist_ok=True)
                with wheel.open(inner) as source, target.open('wb') as sink:
                    shutil.copyfileobj(source, sink)


def fetch_evo_data(assets: Path, python: str) -> None:
    wanted = {inner: assets / rel for inner, (rel, _) in EVO_FILES.items()}
    if all(path.is_file() for path in wanted.values()):
        return
    print(f'fetching the TUM RGB-D and KITTI trajectories from the {EVO_SDIST} sdist (11 MB)')
    with tempfile.TemporaryDirectory() as scratch:
        archive_path = pip_download(
            python, EVO_SDIST, ['--no-binary', ':all:'], Path(scratch), 'evo-*.tar.gz'
        )
        with tarfile.open(archive_path) as archive:
            missing = sorted(set(wanted) - set(archive.getnames()))
            if missing:
                fail(f'{archive_path.name} lacks {", ".join(missing)}.')
            for inner, target in wanted.items():
                source = archive.extractfile(inner)
                if source is None:  # a regular file always has contents
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with source, target.open('wb') as sink:
                    shutil.copyfileobj(source, sink)


def fetch_debian(assets: Path) -> None:
    for package, (inner, rel) in DEBIAN_FOLDERS.items():
        target = assets / rel
        stamp = target / '.complete'
        if stamp.is_file():
            continue
        if shutil.which('apt-get') is None or shutil.which('dpkg-deb') is None:
            fail(
                f'apt-get and dpkg-deb are needed to fetch Debian package {package}.',
                'This workspace expects Debian 12 (bookworm).',
            )
        print(f'fetching Debian package {package} (real images and video)')
        with tempfile.TemporaryDirectory() as scratch:
            command = ['apt-get', 'download', '-q', package]
            result = subprocess.run(command, cwd=scratch, check=False)  # noqa: S607 - apt-get
            debs = list(Path(scratch).glob(f'{package}_*.deb'))
            if result.returncode != 0 or not debs:
                fail(
                    f'apt-get download {package} failed.',
                    'Run `sudo apt-get update` if the package lists are missing, then retry.',
                )
            data = Path(scratch) / 'data.tar'
            with data.open('wb') as sink:
                command = ['dpkg-deb', '--fsys-tarfile', str(debs[0])]
                subprocess.run(command, stdout=sink, check=True)  # noqa: S607 - system tool
            target.mkdir(parents=True, exist_ok=True)
            with tarfile.open(data) as archive:
                for member in archive.getmembers():
                    if not member.name.startswith(inner) or not member.isfile():
                        continue
                    relative = Path(member.name[len(inner) :])
                    destination = target / relative
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    source = archive.extractfile(member)
                    if source is None:  # a regular file always has contents
                        continue
                    with source, destination.open('wb') as sink:
                        shutil.copyfileobj(source, sink)
        stamp.write_text(package + '\n')


def verify(assets: Path) -> None:
    checks = dict(MEDIAPIPE_FILES.values()) | dict(EVO_FILES.values()) | DEBIAN_CHECKED
    for rel, digest in checks.items():
        path = assets / rel
        if not path.is_file():
            fail(f'{path} is missing after the download.')
        if digest is not None and sha256(path) != digest:
            path.unlink()
            fail(f'{path} does not have the expected SHA-256; removed it, run setup again.')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--venv', type=Path, default=Path(sys.prefix), help='the venv prefix')
    args = parser.parse_args(argv)
    assets = args.venv / 'share' / 'edge_offload' / 'assets'
    assets.mkdir(parents=True, exist_ok=True)
    fetch_mediapipe(assets, str(args.venv / 'bin' / 'python'))
    fetch_evo_data(assets, str(args.venv / 'bin' / 'python'))
    fetch_debian(assets)
    verify(assets)
    print(f'assets ready in {assets}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
