# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The workspace's import structure: layers point one way, no cycles, no test code at run time.

Read from the sources (every ``import`` statement, those under ``TYPE_CHECKING`` and inside
functions included), so a cycle that only shows on some import order is found too.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# Lower layers never import higher ones: substrate <- plug-ins <- applications.
LAYERS = {
    'edge_offload': 0,
    'edge_offload_zoo': 1,
    'rrto_ros': 1,
    'lopinfer_ros': 1,
    'accumo_ros': 2,
    'people_following': 3,
    'arise_ros': 3,
}
TEST_HARNESS = 'edge_offload_testing'


def _runtime_modules() -> dict[str, Path]:
    modules = {}
    for package_dir in sorted((ROOT / 'src').iterdir()):
        for path in package_dir.glob('*/**/*.py'):
            relative = path.relative_to(package_dir)
            if relative.parts[0] in ('test', 'launch') or relative.name == 'setup.py':
                continue
            parts = relative.with_suffix('').parts
            name = '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)
            modules[name] = path
    return modules


def _imports(name: str, path: Path) -> set[str]:
    """Return every module ``path`` imports (``from a import b`` gives ``a`` and ``a.b``)."""
    package = name if path.name == '__init__.py' else name.rpartition('.')[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                anchor = package.split('.')[: len(package.split('.')) - node.level + 1]
                base = '.'.join([*anchor, *([base] if base else [])])
            found.add(base)
            found.update(f'{base}.{alias.name}' for alias in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _runtime_modules()
    return {
        name: {other for other in _imports(name, path) if other in modules and other != name}
        for name, path in modules.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_the_scan_sees_the_workspace():
    graph = _graph()
    assert 'edge_offload.client' in graph
    assert 'edge_offload.errors' in graph['edge_offload.client']
    assert _cycles({'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}) == [['a', 'b', 'c']]


def test_no_import_cycle():
    assert _cycles(_graph()) == []


def test_runtime_code_never_imports_the_test_harness():
    offenders = sorted(
        f'{module} imports {other}'
        for module, imported in _graph().items()
        if not module.startswith(TEST_HARNESS)
        for other in imported
        if other.startswith(TEST_HARNESS)
    )
    assert offenders == []


def test_layers_point_one_way():
    def layer(module: str) -> int | None:
        return LAYERS.get(module.partition('.')[0])

    offenders = sorted(
        f'{module} imports {other}'
        for module, imported in _graph().items()
        for other in imported
        if layer(module) is not None and layer(other) is not None and layer(other) > layer(module)
    )
    assert offenders == []
