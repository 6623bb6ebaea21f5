"""Walking a spec class along a key path: which keys are allowed there, and which are references.

Used by the loader to resolve names and overrides before validation, and by the error formatter
to suggest the key the user meant.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from ghsim.config.schema.refs import ref_kind

KeyPath = tuple[str | int, ...]


def informational_key(root: type[BaseModel], path: KeyPath) -> bool:
    """Whether ``path`` under ``root`` ends at a key no mechanism reads (or inside one)."""
    slot: Slot | None = Slot(root)
    for key in path:
        slot = child(slot, key) if slot is not None else None
        if slot is None:
            return False
        if slot.informational:
            return True
    return False


@dataclass(frozen=True)
class Slot:
    """What may stand at one key path: a type, and the file kind if it is a reference."""

    annotation: Any
    ref: str | None = None
    informational: bool = False
    """A key no mechanism reads (its ``json_schema_extra`` is ``schema.base.INFORMATIONAL``)."""

    @property
    def model(self) -> type[BaseModel] | None:
        """The spec class at this slot, if it holds a mapping of fixed keys."""
        return _model_of(self.annotation)

    @property
    def bare(self) -> Any:
        """The type here without ``Annotated`` and ``X | None`` (a ``Literal``'s choices show
        through ``get_args``)."""
        return _strip(self.annotation)

    @property
    def keyed_by_numbers(self) -> bool:
        """Whether a mapping here has integer keys (a head dimension's rate)."""
        bare = self.bare
        return get_origin(bare) is dict and _strip(get_args(bare)[0]) is int

    def keys(self) -> list[str]:
        """The keys a mapping here may have (empty when it is not a fixed-key mapping)."""
        model = self.model
        return list(model.model_fields) if model is not None else []


def _strip(annotation: Any) -> Any:
    """Drop ``Annotated`` and ``X | None`` wrappers."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            members = [arg for arg in get_args(annotation) if arg is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        else:
            return annotation


def _model_of(annotation: Any) -> type[BaseModel] | None:
    bare = _strip(annotation)
    if isinstance(bare, type) and issubclass(bare, BaseModel):
        return bare
    return None


def is_union(slot: Slot | None) -> bool:
    """Whether ``slot`` holds a union of several types (``X | None`` aside)."""
    return slot is not None and get_origin(_strip(slot.annotation)) in (Union, types.UnionType)


def _union_models(annotation: Any) -> list[type[BaseModel]]:
    """The spec classes of a union of them (a tagged union of scenario forms), else []."""
    bare = _strip(annotation)
    if get_origin(bare) not in (Union, types.UnionType):
        return []
    models = [_model_of(arg) for arg in get_args(bare)]
    return [m for m in models if m is not None] if all(models) else []


def narrowed(slot: Slot, node: Any) -> Slot:
    """The slot of a union of spec classes narrowed to the one ``node`` (a mapping) is meant
    for: the first whose keys include every key of ``node`` (a training scenario has
    ``training:``, a serving one ``inference:``), else the first; other slots unchanged."""
    members = _union_models(slot.annotation)
    if not members or not isinstance(node, dict):
        return slot
    keys = set(node)
    for model in members:
        if keys <= set(model.model_fields):
            return Slot(model, slot.ref)
    return Slot(members[0], slot.ref)


def child(slot: Slot, key: str | int) -> Slot | None:
    """The slot under ``key``, or None if the schema has no such key there."""
    model = slot.model
    if model is not None:
        field = model.model_fields.get(key) if isinstance(key, str) else None
        if field is None:
            return None
        extra = field.json_schema_extra
        return Slot(field.annotation, ref_kind(field.metadata),
                    isinstance(extra, dict) and bool(extra.get("informational")))
    for member in _union_models(slot.annotation):  # the first form that has the key
        found = child(Slot(member), key)
        if found is not None:
            return found
    bare = _strip(slot.annotation)
    origin = get_origin(bare)
    args = get_args(bare)
    if origin is list and isinstance(key, int):
        return Slot(args[0])
    if origin is dict and isinstance(key, str):
        return Slot(args[1])
    return None


def slot_at(root: type[BaseModel], path: KeyPath) -> Slot | None:
    """The slot at ``path`` under ``root``, or None if the path leaves the schema."""
    slot: Slot | None = Slot(root)
    for key in path:
        if slot is None:
            return None
        slot = child(slot, key)
    return slot


def format_path(path: KeyPath) -> str:
    """``('points', 3, 'scenario', 'tp')`` as ``points[3].scenario.tp``."""
    text = ""
    for key in path:
        if isinstance(key, int):
            text += f"[{key}]"
        else:
            text += f".{key}" if text else key
    return text
