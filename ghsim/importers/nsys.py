"""Nsight Systems SQLite exports (``nsys export --type sqlite``): kernels, copies, sets, the
runtime calls that launched them, NVTX ranges and the GPU's name.

Column sets differ between nsys versions (``TARGET_INFO_GPU`` keys its rows by ``id`` or by
``deviceId``; ``mangledName`` comes and goes; NVTX and memset tables may be absent), so each
table is read by the columns it has and missing optional tables are simply empty. A table ghsim
reads that lacks a column it needs, a row whose values have the wrong type or range (an end
before its start, a duration beyond a day), or a database too large or corrupt is refused,
naming the table, the row and the column. Times are nanoseconds.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from ghsim.errors import InputError
from ghsim.files import check_regular
from ghsim.importers.checks import Fields, TraceError, check_count
from ghsim.importers.classify import kernel_class
from ghsim.importers.kineto import GpuEvent, TraceRank

_KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
_RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
_NEEDED = {
    _KERNELS: ("start", "end", "streamId", "correlationId"),
    _RUNTIME: ("correlationId", "start"),
    "CUPTI_ACTIVITY_KIND_MEMCPY": ("start", "end", "streamId", "correlationId", "bytes"),
    "CUPTI_ACTIVITY_KIND_MEMSET": ("start", "end", "streamId", "correlationId", "bytes"),
    "StringIds": ("id", "value"),
    "TARGET_INFO_GPU": ("name",),
}
"""The columns ghsim reads from each table it reads."""


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"pragma table_info({table})")}


def _tables(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("select name from sqlite_master where type='table'")}


def _check_columns(db: sqlite3.Connection, tables: set[str], source: str) -> str:
    """Refuse a table that lacks a column ghsim reads; return the kernel name column."""
    for table, needed in _NEEDED.items():
        if table not in tables:
            continue
        have = _columns(db, table)
        missing = [c for c in needed if c not in have]
        if missing:
            raise TraceError(source, table, f"expected the column(s) {', '.join(missing)} "
                             "(an Nsight Systems SQLite export)")
    names = _columns(db, _KERNELS)
    for column in ("demangledName", "shortName"):
        if column in names:
            return column
    raise TraceError(source, _KERNELS, "expected a demangledName or shortName column")


def _rows(db: sqlite3.Connection, table: str, columns: str, source: str) -> list[Any]:
    (count,) = db.execute(f"select count(*) from {table}").fetchone()
    check_count(int(count), source, f"rows in {table}")
    return list(db.execute(f"select {columns} from {table}"))


def _read(path: Path, source: str) -> tuple[list[tuple[Any, ...]], dict[Any, Any],
                                            dict[Any, Any], str]:
    try:
        db = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
    except sqlite3.Error as error:
        raise TraceError(source, "", f"not an Nsight Systems SQLite export ({error})") from None
    try:
        with db:
            tables = _tables(db)
            if _KERNELS not in tables:
                raise TraceError(source, "", "expected an Nsight Systems SQLite export with a "
                                 f"{_KERNELS} table")
            kernel_name = _check_columns(db, tables, source)
            names = dict(_rows(db, "StringIds", "id, value", source)) \
                if "StringIds" in tables else {}
            launches = dict(_rows(db, _RUNTIME, "correlationId, start", source)) \
                if _RUNTIME in tables else {}
            rows = [(_KERNELS, "kernel", *r) for r in _rows(
                db, _KERNELS, f"start, end, streamId, correlationId, {kernel_name}, 0", source)]
            for table, kind in (("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"),
                                ("CUPTI_ACTIVITY_KIND_MEMSET", "memset")):
                if table in tables:
                    rows += [(table, kind, *r) for r in _rows(
                        db, table, "start, end, streamId, correlationId, NULL, bytes", source)]
                    check_count(len(rows), source, "GPU activities")
            device = ""
            if "TARGET_INFO_GPU" in tables:
                found = db.execute("select name from TARGET_INFO_GPU limit 1").fetchone()
                device = str(found[0]) if found and found[0] is not None else ""
    except sqlite3.Error as error:
        raise TraceError(source, "", f"not an Nsight Systems SQLite export, or a corrupt one "
                         f"({error})") from None
    except UnicodeDecodeError:  # sqlite3 decodes TEXT, its error messages too, as UTF-8
        raise TraceError(source, "", "a corrupt Nsight Systems SQLite export (text that is "
                         "not UTF-8 in its schema or values)") from None
    finally:
        db.close()
    return rows, names, launches, device


def _micros(nanoseconds: Any) -> Any:
    """Nanoseconds as microseconds (anything else unchanged, for the check to name)."""
    if isinstance(nanoseconds, int | float) and not isinstance(nanoseconds, bool):
        return nanoseconds / 1e3
    return nanoseconds


def read_nsys(path: Path, rank: int = 0) -> TraceRank:
    """One nsys SQLite export as a replayable rank (all its GPU work)."""
    source = str(path)
    try:
        check_regular(path, source, "an Nsight Systems SQLite export")
    except TraceError:
        raise
    except InputError as error:
        raise TraceError(error.source, error.key_path, error.message) from None
    rows, names, launches, device = _read(path, source)
    orphans: Counter[str] = Counter()
    checked = []
    counters: Counter[str] = Counter()
    for table, kind, start, end, stream, correlation, name_id, nbytes in rows:
        fields = Fields(source, f"{table}[row {counters[table]}]")
        counters[table] += 1
        start_us = fields.timestamp(_micros(start), "start")
        end_us = fields.timestamp(_micros(end), "end")
        duration = fields.duration(end_us - start_us, "end")
        stream_id = fields.integer(stream, "streamId", -(2**31))
        if correlation is not None:
            correlation = fields.integer(correlation, "correlationId", -1)
        size = fields.number(nbytes or 0, "bytes")
        launch = launches.get(correlation)
        if launch is not None:
            launch = fields.timestamp(_micros(launch), f"start of the runtime call {correlation}")
        name = str(names.get(name_id, kind)) if kind == "kernel" else kind
        checked.append((start_us, kind, name, stream_id, duration, launch, size))
    events = []
    for start_us, kind, name, stream_id, duration, launch, size in sorted(
            checked, key=lambda r: r[0]):
        if launch is None:
            orphans["gpu event without its launching runtime call"] += 1
        events.append(GpuEvent(name, kind, stream_id, start_us, duration,
                               kernel_class(name) if kind == "kernel" else kind, launch,
                               bytes=size))
    if not events:
        raise TraceError(source, "", "the export holds no GPU kernels, copies or sets")
    return TraceRank(source, rank, device, events, None, 0, orphans, path.stat().st_size)
