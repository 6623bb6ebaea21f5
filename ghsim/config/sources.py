"""Citations in config files: every number in a shipped file names its source.

A ``sources:`` mapping has keys that are dotted key paths into the same file, or several such
paths separated by commas; a source covers every number under the keys it names.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ghsim.config.cursor import KeyPath, format_path


def source_paths(key: str) -> list[KeyPath]:
    """The key paths a ``sources:`` key names: ``'gpu.memory, gpu.nvlink'``."""
    return [tuple(part.strip().split(".")) for part in key.split(",") if part.strip()]


def _numbers(node: Any, path: KeyPath) -> Iterator[KeyPath]:
    if isinstance(node, bool):
        return
    if isinstance(node, int | float):
        yield path
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _numbers(value, (*path, str(key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _numbers(value, (*path, index))


def _exists(document: dict[str, Any], path: KeyPath) -> bool:
    node: Any = document
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def dangling_sources(document: dict[str, Any]) -> list[str]:
    """``sources:`` keys that name no key of the document."""
    sources = document.get("sources")
    if not isinstance(sources, dict):
        return []
    return [
        format_path(path)
        for key in sources
        for path in source_paths(str(key))
        if not _exists(document, path)
    ]


def unsourced_numbers(document: dict[str, Any]) -> list[str]:
    """Key paths of numbers that no ``sources:`` entry covers (``schema_version`` excepted)."""
    sources = document.get("sources")
    covered = [p for key in (sources or {}) for p in source_paths(str(key))]
    body = {k: v for k, v in document.items() if k not in ("sources", "schema_version")}
    return [
        format_path(path)
        for path in _numbers(body, ())
        if not any(path[: len(c)] == c for c in covered)
    ]
