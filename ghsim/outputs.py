"""Writing output files safely: whole or not at all, and never over one of the user's inputs.

Every file ghsim writes goes to a temporary name in the same folder and is renamed into place
once complete, so an interrupted or failing run leaves the previous file (or none), never half
of one. An output path that is one of the command's inputs is refused before anything is read.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from ghsim.errors import InputError


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_open(path: Path, mode: str = "w", newline: str | None = None) -> Iterator[IO[str]]:
    """Open a temporary file beside ``path`` (text or, with ``"wb"``, binary); it replaces
    ``path`` when the block ends without an exception and is removed otherwise."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes only ('w' or 'wb'), got {mode!r}")
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                             suffix=".tmp")
    try:
        with os.fdopen(descriptor, mode, newline=newline,
                       encoding=None if "b" in mode else "utf-8") as handle:
            yield handle
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole, or leave ``path`` as it was."""
    with atomic_open(path) as handle:
        handle.write(text)


def write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole, or leave ``path`` as it was."""
    with atomic_open(path, "wb") as handle:
        handle.write(data)  # type: ignore[arg-type]


def _same(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def refuse_inputs(outputs: Iterable[Path], inputs: Iterable[Path], flag: str = "-o") -> None:
    """Exit 2 (an :class:`InputError`) when a file about to be written is one of the
    ``inputs`` (the same file by any path or link): writing it would destroy what the user gave."""
    given = [p for p in inputs if p.is_file()]
    for output in outputs:
        for path in given:
            if _same(output, path):
                raise InputError(str(output), flag,
                                 f"is the input {path}; choose another output path (ghsim never "
                                 "writes over its inputs)")


@contextlib.contextmanager
def directory_lock(directory: Path) -> Iterator[None]:
    """Hold ``directory/.ghsim.lock`` for the block: a second ghsim writing into the same folder
    (two sweeps sharing a cache) is refused with exit 2 instead of corrupting it."""
    import fcntl  # POSIX only; imported here so that the module loads anywhere

    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle = (directory / ".ghsim.lock").open("a")
    except OSError as error:
        raise InputError(str(directory), "-o", f"cannot write outputs: {error.strerror}") from None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(str(directory), "-o", "another ghsim is writing into this folder; "
                             "wait for it or choose another output folder") from None
        yield
