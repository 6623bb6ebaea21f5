"""Shared pieces of the YAML schemas: the strict base model, number types, sources.

Every spec is strict (no string-to-number coercion), forbids unknown keys, rejects NaN and
infinity, and is frozen: validated input data is never modified after load.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SCHEMA_VERSION = 1
Kind = Literal["hardware", "system", "model", "scenario", "sweep", "validation_points",
               "inference_points"]


class Spec(BaseModel):
    """Base of every validated input: strict, closed, finite, immutable."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        frozen=True,
        populate_by_name=False,
        defer_build=True,
    )

    ALTERNATIVES: ClassVar[tuple[tuple[str, str], ...]] = ()
    """Pairs of keys that give one quantity two ways (a measured absolute rate and its
    efficiency of a physical capacity). A document gives at most one key of each pair; an
    override of one key replaces the other key of its pair where a file gave it."""

    @classmethod
    def alternative(cls, key: str) -> str | None:
        """The other key of ``key``'s pair in :attr:`ALTERNATIVES`, if it has one."""
        for first, second in cls.ALTERNATIVES:
            if key == first:
                return second
            if key == second:
                return first
        return None

    def _derive(self, name: str, value: Any) -> None:
        """Fill a field from others in an ``after`` validator (the spec is frozen otherwise).

        The field is not marked as set, so ``model_dump(exclude_unset=True)`` gives back what
        the user wrote, and validating that again derives the same value."""
        object.__setattr__(self, name, value)

    def resolved(self) -> dict[str, Any]:
        """Every field, defaults included, as JSON data that validates back to an equal spec
        (a result's ``inputs.scenario``, which a user may run again): what validation derived
        for one key of a pair of :attr:`ALTERNATIVES` is left out beside the key given, since
        a file may not give both."""
        return self.model_dump(mode="json", exclude=_excluded(self, _derived) or None)

    def digest(self) -> str:
        """SHA-256 of the spec, less the documents' ``schema_version`` and ``kind``, with its
        mappings' keys in order: equal digests simulate identically, and the same values given
        inline or by file, or in another order (a result's ``inputs.scenario`` written back
        with sorted keys), have the same digest."""
        data = self.model_dump(mode="json", exclude=_excluded(self, _envelope) or None)
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def _derived(spec: Spec) -> set[str]:
    """The keys of ``spec`` that validation derived from the other key of their pair."""
    given = spec.model_fields_set
    return {name for pair in spec.ALTERNATIVES for name, other in (pair, pair[::-1])
            if name not in given and other in given}


def _envelope(spec: Spec) -> set[str]:
    """A document's fields that say what the file is, not what it describes."""
    return {"schema_version", "kind"} if isinstance(spec, DocumentSpec) else set()


def _excluded(value: Any, own: Callable[[Spec], set[str]]) -> dict[Any, Any]:
    """``model_dump``'s nested ``exclude`` of what ``own`` picks in every spec under
    ``value``."""
    if isinstance(value, Spec):
        exclude: dict[Any, Any] = dict.fromkeys(own(value), True)
        for name in type(value).model_fields:
            if name not in exclude and (inner := _excluded(getattr(value, name), own)):
                exclude[name] = inner
        return exclude
    if isinstance(value, (list, tuple)):
        return {i: inner for i, item in enumerate(value) if (inner := _excluded(item, own))}
    if isinstance(value, dict):
        return {key: inner for key, item in value.items() if (inner := _excluded(item, own))}
    return {}


INFORMATIONAL: dict[str, Any] = {"informational": True}
"""``json_schema_extra`` of a key no mechanism reads (a label, a boost clock, a cache size, a
latency only ``ghsim inspect`` shows on routes): ``--set`` on it warns, a sweep axis on it is
refused, and ``ghsim schema`` says so to editors."""

ROUTE = (" Informational: ``ghsim inspect`` shows it on the routes, and no cost reads it: "
         "kernels, copies and in-place accesses are costed from measured rates, collectives "
         "from NCCL's latency model.")
"""The description's end of a latency that only routes show."""

PositiveFloat = Annotated[float, Field(gt=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]
MAX_INT = 2**53
"""The largest integer a file may give: exact as a float, so sizes never overflow arithmetic."""
PositiveInt = Annotated[int, Field(gt=0, le=MAX_INT)]
NonNegativeInt = Annotated[int, Field(ge=0, le=MAX_INT)]
Fraction = Annotated[float, Field(gt=0, le=1)]
Name = Annotated[str, Field(min_length=1)]

Sources = dict[str, Name]
"""Citations: a dotted key path inside the file (``gpu.memory``, ``gpu.memory.stream_efficiency``)
mapped to the source of the numbers under it. Every number in a shipped file is covered by one
entry."""


class DocumentSpec(Spec):
    """Fields every top-level file carries. Inline mappings may leave them out."""

    KIND: ClassVar[str] = ""

    schema_version: Literal[1] | None = None
    kind: Kind | None = None
    description: str = ""

    def resolved(self) -> dict[str, Any]:
        """:meth:`Spec.resolved` as a whole file of its kind (an inline mapping leaves out
        ``schema_version`` and ``kind``)."""
        return {**super().resolved(), "schema_version": SCHEMA_VERSION, "kind": self.KIND}

    @model_validator(mode="after")
    def _kind_matches(self) -> DocumentSpec:
        if self.kind is not None and self.kind != self.KIND:
            raise ValueError(f"kind: expected {self.KIND!r} here, got {self.kind!r}")
        return self
