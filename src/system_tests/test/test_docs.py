# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The documentation: a short front door, a README per package, links that resolve."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGE_DIRS = sorted(path.parent for path in (ROOT / 'src').glob('*/package.xml'))
SKIPPED_DIRS = {'.git', '.venv', 'build', 'install', 'log', 'results', 'node_modules'}
# Three screens of about 60 lines.
README_MAX_LINES = 180

LINK = re.compile(r'\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
HEADING = re.compile(r'^#{1,6}\s+(.*?)\s*#*\s*$')
FENCE = re.compile(r'^\s*(```|~~~)')


def _markdown_files() -> list[Path]:
    return sorted(
        path
        for path in ROOT.rglob('*.md')
        if not SKIPPED_DIRS.intersection(path.relative_to(ROOT).parts)
    )


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """Return the lines outside code fences, inline code blanked (links there are examples)."""
    lines, in_fence = [], False
    for number, line in enumerate(text.split('\n'), 1):
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            lines.append((number, re.sub(r'`[^`]*`', lambda m: ' ' * len(m.group(0)), line)))
    return lines


def _anchors(path: Path) -> set[str]:
    """Return GitHub's heading anchors of a Markdown file."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in _prose_lines(path.read_text(encoding='utf-8')):
        match = HEADING.match(line)
        if not match:
            continue
        text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', match.group(1)).replace('`', '')
        slug = re.sub(r'[^\w\- ]', '', text.strip().lower()).replace(' ', '-')
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f'{slug}-{count}')
    return found


def _broken_links(path: Path, root: Path = ROOT) -> list[str]:
    broken = []
    for number, line in _prose_lines(path.read_text(encoding='utf-8')):
        for target in LINK.findall(line):
            if re.match(r'^[a-z][a-z0-9+.-]*:', target):  # http:, mailto: ...
                continue
            file_part, _, anchor = target.partition('#')
            resolved = (path.parent / file_part).resolve() if file_part else path
            where = f'{path.relative_to(root)}:{number}: {target}'
            if not resolved.exists():
                broken.append(f'{where} (no such file)')
            elif anchor and resolved.suffix == '.md' and anchor not in _anchors(resolved):
                broken.append(f'{where} (no such heading)')
    return broken


def test_the_link_check_finds_broken_links(tmp_path):
    (tmp_path / 'a.md').write_text('# Top\n[ok](#top) [bad](#nope) [gone](b.md) `[x](y)`\n')
    assert _broken_links(tmp_path / 'a.md', tmp_path) == [
        'a.md:2: #nope (no such heading)',
        'a.md:2: b.md (no such file)',
    ]


def test_every_relative_link_in_the_documentation_resolves():
    files = _markdown_files()
    assert ROOT / 'README.md' in files
    assert ROOT / 'docs' / 'results.md' in files
    assert [problem for path in files for problem in _broken_links(path)] == []


def test_the_readme_is_a_front_door():
    text = (ROOT / 'README.md').read_text(encoding='utf-8')
    assert len(text.splitlines()) <= README_MAX_LINES
    # The two commands come first.
    first_block = text.split('```')[1]
    assert text.index('```') < 100
    assert 'make setup run' in first_block
    assert 'make test' in first_block
    for package in PACKAGE_DIRS:
        assert f'({package.relative_to(ROOT)}/README.md)' in text, package.name


@pytest.mark.parametrize('package', PACKAGE_DIRS, ids=lambda path: path.name)
def test_each_package_readme_names_its_nodes_and_executables(package):
    readme = package / 'README.md'
    assert readme.is_file(), f'{package.name} has no README.md'
    text = readme.read_text(encoding='utf-8')
    setup = package / 'setup.py'
    if setup.is_file():
        scripts = re.findall(r"'(\w+) = [\w.]+:\w+'", setup.read_text())
        console = [name for name in scripts if name not in _plugin_names(setup.read_text())]
        missing = [name for name in console if name not in text]
        assert missing == [], f'{package.name}/README.md does not name {missing}'


def _plugin_names(setup_text: str) -> set[str]:
    """Return the names registered in entry-point groups other than console_scripts."""
    groups = re.findall(r"'([\w.]+)': \[(.*?)\]", setup_text, re.S)
    return {
        name
        for group, body in groups
        if group != 'console_scripts'
        for name in re.findall(r"'(\w+) = ", body)
    }
