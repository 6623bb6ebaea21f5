"""Turning a pydantic validation error into the one line a user reads.

Each message says what was expected and what was found, in the file's own terms (``a number
> 0``, ``one of bf16, fp16``), and an unknown key gets the closest known key as a suggestion.
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel

from ghsim.config.cursor import KeyPath, is_union, slot_at

_TYPE_WORDS = {
    "float_type": "a number",
    "float_parsing": "a number",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a mapping of keys to values",
    "model_type": "a mapping of keys to values",
    "model_attributes_type": "a mapping of keys to values",
}


def show_value(value: Any) -> str:
    """A short rendering of a value the user gave."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "nothing (null)"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def suggest_key(root: type[BaseModel], parent: KeyPath, key: str) -> str:
    """``unknown key 'tpp' (did you mean 'tp'?)`` with the keys allowed at ``parent``."""
    slot = slot_at(root, parent)
    allowed = slot.keys() if slot is not None else []
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        return f"unknown key {key!r} (did you mean {close[0]!r}?)"
    if allowed:
        return f"unknown key {key!r}; expected one of: {', '.join(allowed)}"
    return f"unknown key {key!r}"


def union_branch(first: dict[str, Any], errors: list[dict[str, Any]],
                 root: type[BaseModel]) -> tuple[dict[str, Any], int]:
    """The error to report for ``first`` when it is one member's complaint about a value that
    fits no member of a union-typed key, with the member's tag taken out of its location; and
    how many of ``errors`` are that value's (1 when ``first`` has no tag).

    pydantic reports such a value once per member, each under the member's tag
    (``gemm_k_half.constrained-float``: "a valid number"; ``gemm_k_half.dict[...].bf16``:
    "greater than 0"). A member that only says the value is of another type is not the one the
    value was written for; the first member that says more is."""
    loc = tuple(first["loc"])
    tag = next((i for i in range(len(loc)) if isinstance(loc[i], str)
                and slot_at(root, loc[: i + 1]) is None and is_union(slot_at(root, loc[:i]))),
               None)
    if tag is None:
        return first, 1
    members = [e for e in errors if tuple(e["loc"][:tag]) == loc[:tag] and len(e["loc"]) > tag]
    branch = next((e for e in members if e["type"] not in _TYPE_WORDS), first)
    return {**branch, "loc": (*loc[:tag], *tuple(branch["loc"])[tag + 1:])}, max(1, len(members))


def describe(error: dict[str, Any], root: type[BaseModel]) -> str:
    """The message for one pydantic error (without its location)."""
    kind = error["type"]
    given = error.get("input")
    ctx = error.get("ctx") or {}
    loc: KeyPath = tuple(error["loc"])
    if kind == "extra_forbidden":
        return suggest_key(root, loc[:-1], str(loc[-1]))
    if kind == "missing":
        return "required key is missing"
    if kind in _TYPE_WORDS:
        slot = slot_at(root, loc)
        if slot is not None and slot.ref is not None:
            what = f"the name of a {slot.ref} file or a mapping of keys to values"
            return f"expected {what}, got {show_value(given)}"
        return f"expected {_TYPE_WORDS[kind]}, got {show_value(given)}"
    if kind == "invalid_key":
        return f"expected string keys, got {loc[-1]}"
    if kind == "finite_number":
        return f"expected a finite number, got {show_value(given)}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        op = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<",
              "less_than_equal": "<="}[kind]
        bound = next(iter(ctx.values()))
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)
        return f"expected a number {op} {bound}, got {show_value(given)}"
    if kind == "literal_error" and loc and loc[-1] == "[key]":
        expected = str(ctx.get("expected", "")).replace("'", "")
        return f"unknown key {show_value(given)}; expected one of {expected}"
    if kind == "literal_error":
        expected = str(ctx.get("expected", "")).replace("'", "")
        return f"expected one of {expected}, got {show_value(given)}"
    if kind in ("too_short", "too_long"):
        return f"expected {error['msg'].lower()}"
    if kind == "string_too_short":
        return "expected a non-empty string"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    return f"{error['msg'][0].lower()}{error['msg'][1:]}, got {show_value(given)}"
