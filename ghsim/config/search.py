"""Finding a file by name: ``system: dgx-h100`` is ``configs/systems/dgx-h100.yaml``.

A name is looked up, in order, under the current directory, under each folder of the
``GHSIM_PATH`` environment variable (``os.pathsep``-separated), under the project that holds the
referring file, and under ghsim's shipped files (``ghsim validate calibration`` reads
``validation/calibration.yaml``). A reference containing ``/`` or ending in
``.yaml`` is a path, relative to the referring file and then to the current directory.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

KIND_DIRS: dict[str, tuple[str, ...]] = {
    "hardware": ("configs", "hardware"),
    "system": ("configs", "systems"),
    "model": ("models",),
    "scenario": ("configs", "scenarios"),
    "sweep": ("configs", "sweeps"),
    "validation_points": ("validation",),
    "inference_points": ("validation",),
}
_SUFFIXES = (".yaml", ".yml")


def builtin_root() -> Path:
    """Where the shipped ``configs/``, ``models/`` and ``validation/`` live (wheel data, else
    the checkout)."""
    package = Path(__file__).resolve().parents[1]
    data = package / "_data"
    return data if data.is_dir() else package.parent


def shipped_files(kind: str) -> list[Path]:
    """Every file of ``kind``'s folder that ghsim ships (not the local ones), sorted by name."""
    folder = builtin_root().joinpath(*KIND_DIRS[kind])
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix in _SUFFIXES and p.is_file())


def search_roots(near: Path | None = None) -> list[Path]:
    """Roots under which ``configs/...`` and ``models/`` are looked for, first match wins."""
    roots = [Path.cwd()]
    roots += [Path(entry) for entry in os.environ.get("GHSIM_PATH", "").split(os.pathsep) if entry]
    if near is not None:
        roots += list(near.resolve().parents)[:3]
    roots.append(builtin_root())
    unique: list[Path] = []
    for root in roots:
        if root not in unique:
            unique.append(root)
    return unique


def _expand(reference: str) -> Path:
    """``Path(reference).expanduser()``, leaving ``~nosuchuser`` as it is."""
    try:
        return Path(reference).expanduser()
    except RuntimeError:
        return Path(reference)


def _probe(path: Path, is_file: bool = False) -> bool:
    """Whether ``path`` exists (is a file), False when the OS cannot even look (a name too
    long, a folder without permission)."""
    try:
        return path.is_file() if is_file else path.exists()
    except (OSError, ValueError):
        return False


def is_path_like(reference: str) -> bool:
    """True when ``reference`` is a path rather than a bare name."""
    return "/" in reference or os.sep in reference or reference.endswith(_SUFFIXES)


def find_path(reference: str, near: Path | None = None) -> Path | None:
    """Resolve a path-like reference relative to ``near`` (a folder), then the current folder."""
    candidate = _expand(reference)
    if candidate.is_absolute():
        return candidate if _probe(candidate) else None
    for base in ([near] if near is not None else []) + [Path.cwd()]:
        if _probe(base / candidate):
            return base / candidate
    return None


def _folders(root: Path, kind: str) -> list[Path]:
    """``kind``'s folder under ``root`` and its sub-folders (one level, sorted by name):
    ``ghsim run gh200-h2d-copy`` finds ``configs/scenarios/microbench/gh200-h2d-copy.yaml``."""
    folder = root.joinpath(*KIND_DIRS[kind])
    try:
        subfolders = sorted(p for p in folder.iterdir()
                            if p.is_dir() and not p.name.startswith((".", "_")))
    except OSError:
        return [folder]
    return [folder, *subfolders]


def find_named(kind: str, name: str, near: Path | None = None) -> Path | None:
    """The file of ``kind`` whose stem is ``name``, or None: in each root, a file of the
    kind's folder first, then one of its sub-folders."""
    for root in search_roots(near):
        for folder in _folders(root, kind):
            for suffix in _SUFFIXES:
                candidate = folder / f"{name}{suffix}"
                if _probe(candidate, is_file=True):
                    return candidate
    return None


def known_names(kind: str, near: Path | None = None) -> list[str]:
    """Every name of ``kind`` that :func:`find_named` can resolve, sorted."""
    names: set[str] = set()
    for root in search_roots(near):
        for folder in _folders(root, kind):
            if folder.is_dir():
                names.update(p.stem for p in folder.iterdir() if p.suffix in _SUFFIXES)
    return sorted(names)


def not_found_message(kind: str, name: str, near: Path | None = None) -> str:
    """What to tell a user whose name resolves to nothing."""
    if is_path_like(name):
        return f"expected the path of a {kind} file, but {name!r} does not exist"
    names = known_names(kind, near)
    close = difflib.get_close_matches(name, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    listing = ", ".join(names) if len(names) <= 12 else ", ".join(names[:12]) + ", ..."
    return f"no {kind} named {name!r}{hint}; known: {listing or 'none'}"


def display(path: Path) -> str:
    """A path as the user should read it: relative to the current folder when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def not_found_any_message(reference: str) -> str:
    """What to tell a user whose command-line file is neither a path nor a known name."""
    if is_path_like(reference):
        return "file not found"
    names = sorted({name for kind in KIND_DIRS for name in known_names(kind)})
    close = difflib.get_close_matches(reference, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"no such file, and no shipped or local config of that name{hint}"


def locate_any(reference: str) -> Path | None:
    """A file given on the command line: a path, or the name of any kind of file."""
    candidate = _expand(reference)
    if _probe(candidate):
        return candidate
    if is_path_like(reference):
        return None
    for kind in KIND_DIRS:
        found = find_named(kind, reference)
        if found is not None:
            return found
    return None
