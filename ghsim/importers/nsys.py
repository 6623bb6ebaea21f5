"""Nsight Systems SQLite exports (``nsys export --type sqlite``): kernels, copies, sets, the
runtime calls that launched them, NVTX ranges and the GPU's name.

Column sets differ between nsys versions (``TARGET_INFO_GPU`` keys its rows by ``id`` or by
``deviceId``; ``mangledName`` comes and goes; NVTX and memset tables may be absent), so each
table is read by the columns it has and missing tables are simply empty. Times are nanoseconds.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

from ghsim.importers.classify import kernel_class
from ghsim.importers.kineto import GpuEvent, TraceError, TraceRank


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"pragma table_info({table})")}


def _tables(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("select name from sqlite_master where type='table'")}


def read_nsys(path: Path, rank: int = 0) -> TraceRank:
    """One nsys SQLite export as a replayable rank (all its GPU work)."""
    try:
        db = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
        tables = _tables(db)
    except sqlite3.DatabaseError as error:
        raise TraceError(str(path), "", f"not an Nsight Systems SQLite export ({error})") \
            from None
    with db:
        if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
            raise TraceError(str(path), "", "expected an Nsight Systems SQLite export with a "
                             "CUPTI_ACTIVITY_KIND_KERNEL table")
        names = dict(db.execute("select id, value from StringIds")) if "StringIds" in tables \
            else {}
        launches = {}
        if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
            launches = dict(db.execute(
                "select correlationId, start from CUPTI_ACTIVITY_KIND_RUNTIME"))
        kernel_name = "demangledName" if "demangledName" in _columns(
            db, "CUPTI_ACTIVITY_KIND_KERNEL") else "shortName"
        rows = [("kernel", *r) for r in db.execute(
            f"select start, end, streamId, correlationId, {kernel_name}, 0 "
            "from CUPTI_ACTIVITY_KIND_KERNEL")]
        for table, kind in (("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"),
                            ("CUPTI_ACTIVITY_KIND_MEMSET", "memset")):
            if table in tables:
                rows += [(kind, *r) for r in db.execute(
                    f"select start, end, streamId, correlationId, NULL, bytes from {table}")]
        device = ""
        if "TARGET_INFO_GPU" in tables:
            found = db.execute("select name from TARGET_INFO_GPU limit 1").fetchone()
            device = str(found[0]) if found else ""
    orphans: Counter[str] = Counter()
    events = []
    for kind, start, end, stream, correlation, name_id, nbytes in sorted(rows, key=lambda r: r[1]):
        name = str(names.get(name_id, kind)) if kind == "kernel" else kind
        launch = launches.get(correlation)
        if launch is None:
            orphans["gpu event without its launching runtime call"] += 1
        events.append(GpuEvent(name, kind, int(stream), start / 1e3, (end - start) / 1e3,
                               kernel_class(name) if kind == "kernel" else kind,
                               None if launch is None else launch / 1e3,
                               bytes=float(nbytes or 0)))
    if not events:
        raise TraceError(str(path), "", "the export holds no GPU kernels, copies or sets")
    return TraceRank(str(path), rank, device, events, None, 0, orphans, path.stat().st_size)
