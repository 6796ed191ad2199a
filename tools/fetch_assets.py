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


def fetch_mediapipe(assets: Path, python: str) -> None:
    wanted = {inner: assets / rel for inner, (rel, _) in MEDIAPIPE_FILES.items()}
    if all(path.is_file() for path in wanted.values()):
        return
    print(f'fetching the BlazePose .tflite files from the {MEDIAPIPE_WHEEL} wheel (35 MB)')
    with tempfile.TemporaryDirectory() as scratch:
        result = subprocess.run(
            [
                python, '-m', 'pip', 'download', '-q', '--disable-pip-version-check',
                '--no-deps', '--only-binary', ':all:', '--python-version', '3.11',
                '--platform', 'manylinux_2_28_x86_64', '-d', scratch, MEDIAPIPE_WHEEL,
            ],
            check=False,
        )  # fmt: skip
        wheels = list(Path(scratch).glob('mediapipe-*.whl'))
        if result.returncode != 0 or not wheels:
            fail(
                f'pip could not download {MEDIAPIPE_WHEEL}.',
                'Check the network or PIP_INDEX_URL, then run make setup again.',
            )
        with zipfile.ZipFile(wheels[0]) as wheel:
            names = set(wheel.namelist())
            for inner, target in wanted.items():
                if inner not in names:
                    # The licence file moved in some builds; any LICENSE in the dist-info works.
                    inner = next(n for n in names if n.endswith('LICENSE'))
                target.parent.mkdir(parents=True, exist_ok=True)
                with wheel.open(inner) as source, target.open('wb') as sink:
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
    checks = {rel: digest for rel, digest in MEDIAPIPE_FILES.values()} | DEBIAN_CHECKED
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
    fetch_debian(assets)
    verify(assets)
    print(f'assets ready in {assets}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
