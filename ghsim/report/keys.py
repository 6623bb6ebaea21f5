"""Key paths as a reader sees them: shortened from the left when long."""

from __future__ import annotations

from typing import Any


def short_key(key: str, width: int = 26) -> str:
    """A dotted key path shortened from the left to its last components, at most ``width``
    characters: ``system.node.gpu.gpu.host_link.bandwidth_gb_s`` is
    ``…host_link.bandwidth_gb_s``. The last component is always kept whole."""
    if len(key) <= width:
        return key
    parts = key.split(".")
    tail = parts[-1]
    for part in reversed(parts[:-1]):
        if len(part) + len(tail) + 2 > width:
            break
        tail = f"{part}.{tail}"
    return "…" + tail


def short_label(overrides: dict[str, Any]) -> str:
    """A point's overrides as ``key=value, ...`` with every long key path shortened."""
    return ", ".join(f"{short_key(k)}={v}" for k, v in overrides.items()) or "(base)"
