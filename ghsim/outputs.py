"""Writing output files safely: whole or not at all, and never over one of the user's inputs.

Every file ghsim writes goes to a temporary name in the same folder and is renamed into place
once complete, so an interrupted or failing run leaves the previous file (or none), never half
of one. An output path that is one of the command's inputs is refused before anything is read.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from ghsim.errors import InputError
from ghsim.files import file_kind


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
    refuse_special(path)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                             suffix=".tmp")
    try:
        # Text that cannot be encoded (a lone surrogate from a name) is written escaped.
        with os.fdopen(descriptor, mode, newline=newline,
                       encoding=None if "b" in mode else "utf-8",
                       errors=None if "b" in mode else "backslashreplace") as handle:
            yield handle
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def refuse_special(path: Path) -> None:
    """Refuse to replace anything but a regular file (or nothing): renaming over ``/dev/full``
    or a FIFO would destroy it, and a folder cannot be replaced by a file."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return
    if not stat.S_ISREG(mode):
        raise InputError(str(path), "", f"expected a regular file to write, found "
                         f"{file_kind(mode)}; choose another output path")


def output_folder(directory: Path, flag: str = "-o", create: bool = True) -> None:
    """Create the output folder ``directory`` (and its parents); an :class:`InputError` when it
    is a file or cannot be created. With ``create`` False, only check (before a long run) that
    it is a folder or could be made in the nearest folder above it that exists."""
    try:
        mode = os.stat(directory).st_mode
    except FileNotFoundError:
        mode = None
    except (OSError, ValueError) as error:
        raise InputError(str(directory), flag, f"cannot write outputs: "
                         f"{getattr(error, 'strerror', None) or error}") from None
    if mode is not None and not stat.S_ISDIR(mode):
        kind = "a regular file" if stat.S_ISREG(mode) else file_kind(mode)
        raise InputError(str(directory), flag, f"expected a folder for the outputs, found {kind}")
    if not create:
        above = directory.absolute().parent
        while not above.exists() and above != above.parent:
            above = above.parent
        if mode is None and not above.is_dir():
            raise InputError(str(directory), flag, f"cannot write outputs: {above} is not a "
                             "folder (Not a directory)")
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(str(directory), flag,
                         f"cannot write outputs: {error.strerror or error}") from None


def nonfinite_path(data: Any) -> str | None:
    """The key path of the first number in ``data`` that is not finite (nan, inf), if any."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return path or "(the value)"
        if isinstance(value, dict):
            stack.extend((f"{path}.{key}" if path else str(key), item)
                         for key, item in reversed(list(value.items())))
        elif isinstance(value, list | tuple):
            stack.extend((f"{path}[{index}]", item)
                         for index, item in reversed(list(enumerate(value))))
    return None


NONFINITE = ("an input is beyond the range ghsim simulates (a bandwidth, rate or size near 0 "
             "or near 1e300)")


def dumps_strict(data: Any, source: str, **options: Any) -> str:
    """``json.dumps`` that never writes NaN or Infinity (not JSON): a non-finite number is an
    :class:`InputError` at ``source`` naming its key path."""
    try:
        return json.dumps(data, allow_nan=False, **options)
    except ValueError:
        where = nonfinite_path(data)
        if where is None:
            raise
        raise InputError(source, where, f"is not a finite number; {NONFINITE}") from None


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


def check_outputs(outputs: Iterable[Path], inputs: Iterable[Path], flag: str = "-o") -> None:
    """Before the work: exit 2 (an :class:`InputError`) when a file about to be written is one
    of the ``inputs`` or is not a regular file (a folder, a FIFO, a device), so that a mistake
    in an output path is answered at once rather than after the run it would have ended."""
    written = list(outputs)
    refuse_inputs(written, inputs, flag)
    for output in written:
        refuse_special(output)


@contextlib.contextmanager
def directory_lock(directory: Path) -> Iterator[None]:
    """Hold ``directory/.ghsim.lock`` for the block: a second ghsim writing into the same folder
    (two sweeps sharing a cache) is refused with exit 2 instead of corrupting it."""
    import fcntl  # POSIX only; imported here so that the module loads anywhere

    output_folder(directory)
    try:
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
