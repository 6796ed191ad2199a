# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Point the ROS wheels' exported CMake targets at this interpreter's include directories.

The ROS 2 wheels on PyPI were built in a manylinux container; their exported
``*__rosidl_generator_pyExport.cmake`` files name that container's Python and NumPy
include directories (``/opt/python/cp311-cp311/...``). CMake refuses to generate a
package that links these targets until the paths exist, so rewrite them to the
running interpreter's directories. Running it again changes nothing.
"""

import argparse
import re
import sys
import sysconfig
from pathlib import Path

import numpy

# An include directory of the build container: Python headers or NumPy headers.
_FOREIGN_PYTHON_INCLUDE = re.compile(r'/opt/python/cp3\d+-cp3\d+/include/python3\.\d+')
_FOREIGN_NUMPY_INCLUDE = re.compile(
    r'/opt/python/cp3\d+-cp3\d+/lib/python3\.\d+/site-packages/numpy/_core/include'
)


def rewrite(text: str, python_include: str, numpy_include: str) -> str:
    """Return text with the build container's include directories replaced."""
    text = _FOREIGN_NUMPY_INCLUDE.sub(numpy_include, text)
    return _FOREIGN_PYTHON_INCLUDE.sub(python_include, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('prefix', type=Path, help='prefix holding share/<pkg>/cmake (the venv)')
    args = parser.parse_args(argv)

    python_include = sysconfig.get_paths()['include']
    numpy_include = numpy.get_include()
    for required in (Path(python_include) / 'Python.h', Path(numpy_include) / 'numpy'):
        if not required.exists():
            print(
                f'error: {required} is missing; install the Python development headers',
                file=sys.stderr,
            )
            return 1

    changed = 0
    for cmake_file in sorted((args.prefix / 'share').glob('*/cmake/*.cmake')):
        text = cmake_file.read_text()
        fixed = rewrite(text, python_include, numpy_include)
        if fixed != text:
            cmake_file.write_text(fixed)
            changed += 1
    print(f'fix_wheel_cmake_exports: rewrote {changed} CMake export file(s)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
