"""Checking what a trace file holds, at the one place each importer reads it.

Every importer reads its records (events, nodes, rows) through a :class:`Fields` of the record,
which checks each field's type and range, so that a trace with a wrong type, a missing field, a
negative, NaN or huge duration, or an out-of-range index is refused with one line naming the
file, the record and the field, instead of failing later with a traceback or replaying nonsense.
"""

from __future__ import annotations

import math
import re
import reprlib
from typing import Any

from ghsim.errors import InputError
from ghsim.limits import MAX_EVENT_US, MAX_TIMESTAMP_US, MAX_TRACE_EVENTS

_REPR = reprlib.Repr()
_REPR.maxstring = 40
_REPR.maxother = 40
_REPR.maxlevel = 2
_REPR.maxlist = _REPR.maxdict = _REPR.maxtuple = 4

INT64_MAX = 2**63 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")


class TraceError(InputError):
    """A trace file that cannot be read as the format it claims."""


def shown(value: Any) -> str:
    """A value for an error message: short, and safe whatever its size or depth."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    try:
        return _REPR.repr(value)
    except (RecursionError, ValueError):  # ValueError: an int too long to print
        return f"a {type(value).__name__}"


class Fields:
    """The fields of one record of a trace: ``where`` names it (``traceEvents[12]``)."""

    __slots__ = ("source", "where")

    def __init__(self, source: str, where: str) -> None:
        self.source = source
        self.where = where

    def fail(self, field: str, expected: str, value: Any) -> TraceError:
        key = f"{self.where}.{field}" if field else self.where
        return TraceError(self.source, key, f"expected {expected}, got {shown(value)}")

    def integer(self, value: Any, field: str, low: int = 0, high: int = INT64_MAX) -> int:
        """An integer in ``[low, high]`` (a float that is a whole number is accepted)."""
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise self.fail(field, f"an integer from {low:,} to {high:,}", value)
        return value

    def number(self, value: Any, field: str, low: float = 0.0,
               high: float = float(2**63)) -> float:
        """A finite number in ``[low, high]``."""
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) <= 2**1000:
            value = float(value)
        if not isinstance(value, float) or not math.isfinite(value) or not low <= value <= high:
            raise self.fail(field, f"a finite number from {low:g} to {high:g}", value)
        return value

    def duration(self, value: Any, field: str) -> float:
        """A duration in microseconds: from 0 to :data:`~ghsim.limits.MAX_EVENT_US`."""
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) <= 2**1000:
            value = float(value)
        if not isinstance(value, float) or not math.isfinite(value) \
                or not 0.0 <= value <= MAX_EVENT_US:
            raise self.fail(field, f"a duration from 0 to {MAX_EVENT_US:g} microseconds (one "
                            "day, ghsim.limits.MAX_EVENT_US)", value)
        return value

    def timestamp(self, value: Any, field: str) -> float:
        """A time in microseconds, finite and at most :data:`~ghsim.limits.MAX_TIMESTAMP_US`
        from zero."""
        return self.number(value, field, -MAX_TIMESTAMP_US, MAX_TIMESTAMP_US)

    def text(self, value: Any, field: str, default: str = "") -> str:
        """A string (``default`` when absent)."""
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.fail(field, "a string", value)
        if _SURROGATE.search(value):  # a lone surrogate cannot be written: keep it escaped
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value

    def mapping(self, value: Any, field: str) -> dict[str, Any]:
        """A JSON object (empty when absent)."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(field, "an object", value)
        return value

    def key(self, value: Any, field: str) -> int | str | None:
        """A process or thread id: an integer or a string (absent: None)."""
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise self.fail(field, "an integer or a string id", value)


def check_count(count: int, source: str, what: str) -> None:
    """Refuse a trace holding more than :data:`~ghsim.limits.MAX_TRACE_EVENTS` records."""
    if count > MAX_TRACE_EVENTS:
        raise TraceError(source, "", f"the trace holds more than {MAX_TRACE_EVENTS:,} {what} "
                         "(ghsim.limits.MAX_TRACE_EVENTS); import fewer iterations or ranks "
                         "per file")
