"""References between files: a field that takes a file name or an inline mapping.

``system: dgx-h100`` names ``configs/systems/dgx-h100.yaml``; ``system: {node: ...}`` is the same
thing written inline. In the validated spec the field holds the resolved spec; the loader swaps
names for mappings before validation, guided by the :class:`Ref` marker on the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema


@dataclass(frozen=True)
class Ref:
    """Marks a field as naming a file of ``kind`` (or holding it inline)."""

    kind: str

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        inline = handler(core_schema)
        by_name = {"type": "string", "description": f"name of a {self.kind} file (its stem)"}
        return {"anyOf": [by_name, inline]}


def ref_kind(metadata: list[Any]) -> str | None:
    """The kind a field refers to, or None for an ordinary field."""
    for item in metadata:
        if isinstance(item, Ref):
            return item.kind
    return None
