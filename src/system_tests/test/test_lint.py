# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Whole-tree style checks: ruff lint and format, licence headers, package manifests."""

import subprocess
import sys
from pathlib import Path

import pytest
from catkin_pkg.package import parse_package

ROOT = Path(__file__).resolve().parents[3]
SKIPPED_DIRS = {'.git', '.venv', 'build', 'install', 'log', '__pycache__'}
PACKAGE_DIRS = sorted(path.parent for path in (ROOT / 'src').glob('*/package.xml'))


def _source_files(*suffixes: str) -> list[Path]:
    files = []
    for path in ROOT.rglob('*'):
        relative = path.relative_to(ROOT)
        if SKIPPED_DIRS.intersection(relative.parts) or not path.is_file():
            continue
        if path.suffix in suffixes or (path.parent.name == '.ci' and not path.suffix):
            files.append(path)
    return files


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, '-m', 'ruff', *args], cwd=ROOT, capture_output=True, text=True
    )


def test_ruff_lint_is_clean():
    result = _ruff('check', '--no-cache', '.')
    assert result.returncode == 0, f'ruff check found problems:\n{result.stdout}{result.stderr}'


def test_ruff_format_is_clean():
    result = _ruff('format', '--check', '--no-cache', '.')
    assert result.returncode == 0, (
        f'run `make format`; unformatted files:\n{result.stdout}{result.stderr}'
    )


def test_every_source_file_has_a_licence_header():
    missing = [
        str(path.relative_to(ROOT))
        for path in _source_files('.py', '.sh')
        if 'SPDX-License-Identifier: Apache-2.0'
        not in ''.join(path.read_text().splitlines(True)[:6])
    ]
    assert not missing, f'files without the Apache-2.0 SPDX header: {missing}'


def test_workspace_has_the_designed_packages():
    names = {path.name for path in PACKAGE_DIRS}
    assert names == {
        'offload_interfaces',
        'edge_offload',
        'edge_offload_testing',
        'edge_offload_zoo',
        'rrto_ros',
        'lopinfer_ros',
        'accumo_ros',
        'people_following',
        'arise_ros',
        'bringup',
        'system_tests',
    }


@pytest.mark.parametrize('package_dir', PACKAGE_DIRS, ids=lambda path: path.name)
def test_package_manifest_is_valid_format_3(package_dir):
    # parse_package validates the manifest (catkin_pkg is what colcon and rosdep use).
    package = parse_package(package_dir / 'package.xml')
    assert package.package_format == 3
    assert package.name == package_dir.name
    assert package.licenses == ['Apache-2.0']
    build_type = package.get_build_type()
    if build_type == 'ament_python':
        assert (package_dir / 'resource' / package.name).is_file()
        if (package_dir / package.name / '__init__.py').is_file():
            # Executables go where ros2 run finds them.
            setup_cfg = (package_dir / 'setup.cfg').read_text()
            assert f'script_dir=$base/lib/{package.name}' in setup_cfg
            assert f'install_scripts=$base/lib/{package.name}' in setup_cfg
        else:
            # Launch, parameter or test files only: nothing to import, nothing to run.
            assert not list(package_dir.glob('*/__init__.py')), package.name
            assert 'packages=[]' in (package_dir / 'setup.py').read_text(), package.name
        assert any((package_dir / 'test').glob('test_*.py')), 'every package has tests'
    else:
        assert build_type == 'ament_cmake'
