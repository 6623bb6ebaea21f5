"""Opening input files safely: regular files only, read with a cap, gzip inflated with a cap.

A path that names a directory, a FIFO, a device (``/dev/zero``) or a socket is refused before
anything is read from it (opening a FIFO would wait for a writer; reading ``/dev/zero`` would
never end). Whatever is read into memory is capped (:mod:`ghsim.limits`), and so is what a gzip
stream inflates to, so that a gzip bomb is refused after a bounded amount of work.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import zlib
from pathlib import Path
from typing import IO, Protocol

from ghsim.errors import InputError
from ghsim.limits import (
    MAX_INFLATE_RATIO,
    MAX_TRACE_BYTES,
    MAX_TRACE_READ_BYTES,
    MIN_INFLATE_BYTES,
)

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def size_text(nbytes: float) -> str:
    """A byte count for a message: ``64 MiB``, ``4 GiB``, ``12,345 bytes``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.4g} {unit}"
    return f"{int(nbytes):,} bytes"


def open_regular(path: Path, source: str | None = None, what: str = "a regular file"
                 ) -> IO[bytes]:
    """Open ``path`` for reading in binary, refusing anything but a regular file.

    Raises :class:`InputError` at ``source`` (default: the path) with what was expected."""
    where = source if source is not None else str(path)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(where, "", "file not found") from None
    except (OSError, ValueError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise InputError(where, "", f"cannot read file: {reason}") from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise InputError(where, "", f"expected {what}, found {file_kind(mode)}")
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def check_regular(path: Path, source: str | None = None, what: str = "a regular file") -> None:
    """Raise :class:`InputError` unless ``path`` is a regular file (it is opened, not read)."""
    open_regular(path, source, what).close()


def read_capped(path: Path, limit: int, limit_name: str, source: str | None = None,
                what: str = "a regular file") -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (``limit_name`` names the limit
    in the message when the file is larger)."""
    where = source if source is not None else str(path)
    with open_regular(path, where, what) as handle:
        size = os.fstat(handle.fileno()).st_size
        try:
            data = handle.read(limit + 1) if size <= limit else b""
        except OSError as error:
            raise InputError(where, "", f"cannot read file: {error.strerror}") from None
    if size > limit or len(data) > limit:
        raise InputError(where, "", f"the file is {size_text(max(size, len(data)))}; ghsim reads "
                         f"at most {size_text(limit)} ({limit_name})")
    return data


def inflate_limit(compressed_bytes: int) -> int:
    """How many bytes a gzip file of ``compressed_bytes`` may inflate to."""
    return min(MAX_TRACE_BYTES, max(MIN_INFLATE_BYTES, MAX_INFLATE_RATIO * compressed_bytes))


class InflateLimitError(InputError):
    """A gzip stream that inflates beyond :func:`inflate_limit` (a gzip bomb)."""


class _Readable(Protocol):
    def read(self, size: int, /) -> bytes: ...

    def close(self) -> None: ...


class _Capped(io.RawIOBase):
    """A read-only stream over ``inner`` that raises :class:`InflateLimitError` once more than
    ``limit`` bytes have been read."""

    def __init__(self, inner: _Readable, limit: int, source: str, compressed: int) -> None:
        self.inner = inner
        self.limit = limit
        self.count = 0
        self.source = source
        self.compressed = compressed

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.inner.read(min(len(buffer), self.limit + 1 - self.count))
        self.count += len(data)
        if self.count > self.limit:
            raise InflateLimitError(
                self.source, "", f"the gzip data inflates to more than {size_text(self.limit)} "
                f"from {size_text(self.compressed)} (a gzip bomb?); ghsim inflates at most "
                f"{MAX_INFLATE_RATIO} times the compressed size and at most "
                f"{size_text(MAX_TRACE_BYTES)} (ghsim.limits.MAX_INFLATE_RATIO, MAX_TRACE_BYTES)")
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.inner.close()
        super().close()


def open_trace(path: Path, source: str | None = None) -> IO[bytes]:
    """A trace file (regular, at most :data:`MAX_TRACE_BYTES`) for streaming, inflated if it is
    gzip, with the inflated size capped."""
    where = source if source is not None else str(path)
    handle = open_regular(path, where, "a trace file")
    size = os.fstat(handle.fileno()).st_size
    if size > MAX_TRACE_BYTES:
        handle.close()
        raise InputError(where, "", f"the file is {size_text(size)}; ghsim reads traces of at "
                         f"most {size_text(MAX_TRACE_BYTES)} (ghsim.limits.MAX_TRACE_BYTES)")
    if handle.read(2) != b"\x1f\x8b":
        handle.seek(0)
        return io.BufferedReader(_Capped(handle, MAX_TRACE_BYTES, where, size))
    handle.seek(0)
    inflated = gzip.GzipFile(fileobj=handle, mode="rb")
    return io.BufferedReader(_Capped(_Closing(inflated, handle), inflate_limit(size), where,
                                     size), buffer_size=1 << 16)


class _Closing:
    """A gzip reader that also closes the file beneath it."""

    def __init__(self, inflated: gzip.GzipFile, raw: IO[bytes]) -> None:
        self.inflated = inflated
        self.raw = raw

    def read(self, size: int) -> bytes:
        return self.inflated.read(size)

    def close(self) -> None:
        self.inflated.close()
        self.raw.close()


def read_trace_bytes(path: Path, source: str | None = None, limit: int = MAX_TRACE_READ_BYTES,
                     limit_name: str = "MAX_TRACE_READ_BYTES") -> bytes:
    """The whole (inflated) content of a trace file, capped as :func:`open_trace` caps it and
    at ``limit`` bytes in all (it is held in memory)."""
    where = source if source is not None else str(path)
    with open_regular(path, where, "a trace file") as raw:
        size = os.fstat(raw.fileno()).st_size
        gzipped = raw.read(2) == b"\x1f\x8b"
    too_large = InputError(where, "", f"the trace holds more than {size_text(limit)}; ghsim reads "
                           f"at most that much of this format into memory "
                           f"(ghsim.limits.{limit_name})")
    if size > limit and not gzipped:
        raise too_large
    with open_trace(path, where) as handle:
        try:
            data = handle.read(limit + 1)
            if len(data) > limit:
                raise too_large
            return data
        except (gzip.BadGzipFile, EOFError, zlib.error) as error:
            raise InputError(where, "", f"corrupted gzip data ({error})") from None
        except OSError as error:
            raise InputError(where, "", f"cannot read file: {error.strerror or error}") from None
