"""``--set KEY.PATH=VALUE`` overrides: parsing them, and applying them to a raw document.

The value is read as YAML (``4`` is a number, ``bf16`` a string, ``[1, 2]`` a list). A key path
may walk into a referenced file (``system.node.gpus=4`` with ``system: dgx-h100``); the caller
resolves the reference on the way. A key the schema does not know is reported against the
override, with a suggestion.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ghsim.config.cursor import KeyPath, format_path
from ghsim.config.yamlio import YamlLimitError, parse_yaml
from ghsim.errors import ConfigError, OverrideError

_SEGMENT = re.compile(r"^(?P<key>[A-Za-z_][A-Za-z0-9_\-]*|\d+)(?P<index>(?:\[\d+\])*)$")
"""A key (a name, or the digits of a key of a mapping keyed by numbers such as a head
dimension) and the list indices after it."""


@dataclass(frozen=True)
class Override:
    """One parsed ``--set``: where, what, and how the user wrote it."""

    path: KeyPath
    value: Any
    text: str
    origin: str = ""
    """Where it comes from when not the command line (a sweep file's axis)."""

    @property
    def label(self) -> str:
        """How errors name this override."""
        return self.origin or f"--set {self.text}"


def parse_key_path(text: str, label: str) -> KeyPath:
    """``points[2].scenario.tp`` as ``('points', 2, 'scenario', 'tp')``."""
    path: list[str | int] = []
    for segment in text.split("."):
        match = _SEGMENT.match(segment)
        if match is None:
            raise OverrideError(
                label, text, f"expected a dotted key path like parallelism.tp, got {text!r}"
            )
        path.append(match["key"])
        path.extend(int(i) for i in re.findall(r"\[(\d+)\]", match["index"]))
    return tuple(path)


def parse_override(text: str, origin: str = "") -> Override:
    """Parse ``KEY.PATH=VALUE`` (``origin``: where it was written when not on the command
    line)."""
    label = origin or f"--set {text}"
    key, sep, raw_value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise OverrideError(label, "", "expected KEY.PATH=VALUE, for example parallelism.tp=4")
    if not raw_value.strip():
        raise OverrideError(label, key, "expected a value after '='")
    try:
        value = parse_yaml(raw_value, label)
    except YamlLimitError as exc:
        raise OverrideError(label, key, exc.message) from None
    except ConfigError as exc:
        raise OverrideError(label, key, f"the value is not valid YAML ({exc.message})") from None
    return Override(parse_key_path(key, label), value, text, origin)


def outer_first(overrides: list[Override]) -> list[Override]:
    """The order to apply ``overrides`` in: a key before the keys inside it, otherwise as given
    (a stable sort by depth), so a later ``system=dgx-h200`` never discards an earlier
    ``system.node.gpu_power_limit_w=400``, nor a sweep case's system a grid axis inside it."""
    return sorted(overrides, key=lambda override: len(override.path))


def container_at(document: dict[str, Any], override: Override) -> dict[str, Any] | list[Any]:
    """The mapping or list that holds the override's last key, creating empty mappings on the way.

    Raises :class:`OverrideError` when the path runs into a scalar or past the end of a list.
    """
    node: Any = document
    for depth, key in enumerate(override.path[:-1]):
        here = format_path(override.path[: depth + 1])
        if isinstance(node, dict) and isinstance(key, str):
            if key.isdigit() and key not in node and int(key) in node:
                key = int(key)  # a mapping keyed by numbers, as YAML read it
            if node.get(key) is None:
                node[key] = {}
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int):
            if key >= len(node):
                raise OverrideError(
                    override.label, here, f"index {key} is out of range (the list has {len(node)})"
                )
            node = node[key]
        else:
            raise OverrideError(override.label, here, _wrong_container(node, key))
    last = override.path[-1]
    if isinstance(node, dict) and isinstance(last, str):
        return node
    if isinstance(node, list) and isinstance(last, int):
        if last >= len(node):
            where = format_path(override.path)
            raise OverrideError(
                override.label, where, f"index {last} is out of range (the list has {len(node)})"
            )
        return node
    raise OverrideError(override.label, format_path(override.path), _wrong_container(node, last))


def _wrong_container(node: Any, key: str | int) -> str:
    if isinstance(key, int):
        return f"expected a list to index, found {_describe(node)}"
    return f"expected a mapping to hold key {key!r}, found {_describe(node)}"


def _describe(node: Any) -> str:
    if isinstance(node, dict):
        return "a mapping"
    if isinstance(node, list):
        return "a list"
    return f"the value {node!r}"
