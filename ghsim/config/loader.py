"""Loading a YAML file of any kind into a validated spec.

The steps: read the file (one mapping), check its header (``schema_version``, ``kind``), apply
the ``--set`` overrides, replace every name that refers to another file by that file's mapping,
then validate the whole tree at once. Every part of the tree remembers where it came from, so an
error names the file (or override) the user must fix and the key path inside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ghsim.config.cursor import KeyPath, Slot, child, format_path, narrowed, slot_at
from ghsim.config.diagnose import describe, show_value, union_branch
from ghsim.config.neutral import from_neutral
from ghsim.config.overrides import Override, container_at, outer_first, parse_override
from ghsim.config.schema import (
    SCHEMA_VERSION,
    SPEC_BY_KIND,
    DocumentSpec,
    Spec,
    spec_for_document,
)
from ghsim.config.schema.sweep import SCENARIO_FORMS
from ghsim.config.search import (
    display,
    find_named,
    find_path,
    is_path_like,
    not_found_message,
)
from ghsim.config.sources import dangling_sources
from ghsim.config.yamlio import ensure_mapping, read_mapping
from ghsim.errors import ConfigError, InputError, OverrideError

_ALL_KINDS = ("hardware", "system", "model", "scenario", "sweep", "validation_points",
              "inference_points")


def read_document(path: Path, expected_kind: str | None) -> dict[str, Any]:
    """Read a top-level file and check its ``schema_version`` and ``kind`` (a neutral-form
    file, :mod:`ghsim.config.neutral`, read as the kind it stands for)."""
    document = from_neutral(read_mapping(path))
    source = display(path)
    version = document.get("schema_version")
    if "schema_version" not in document:
        raise ConfigError(
            source, "schema_version", f"required key is missing; expected {SCHEMA_VERSION}"
        )
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise ConfigError(
            source, "schema_version", f"expected {SCHEMA_VERSION}, got {show_value(version)}"
        )
    kind = document.get("kind")
    if "kind" not in document:
        want = expected_kind or " | ".join(_ALL_KINDS)
        raise ConfigError(source, "kind", f"required key is missing; expected {want}")
    if kind not in _ALL_KINDS:
        known = ", ".join(_ALL_KINDS)
        raise ConfigError(source, "kind", f"expected one of {known}, got {show_value(kind)}")
    if expected_kind is not None and kind != expected_kind:
        raise ConfigError(source, "kind", f"expected a {expected_kind} file, got kind {kind!r}")
    dangling = dangling_sources(document)
    if dangling:
        raise ConfigError(
            source, f"sources.{dangling[0]}", "names a key that is not in this file"
        )
    return document


def locate(kind: str, reference: str | Path, near: Path | None, source: str, key: str) -> Path:
    """The file a reference names, or a :class:`ConfigError` at ``source``/``key``."""
    text = str(reference)
    found = find_path(text, near) if isinstance(reference, Path) or is_path_like(text) else None
    if found is None and not is_path_like(text):
        found = find_named(kind, text, near)
    if found is None:
        raise ConfigError(source, key, not_found_message(kind, text, near))
    return found


class _Tree:
    """A document being assembled from files and overrides, with the origin of each part."""

    def __init__(self, root: type[BaseModel], data: dict[str, Any], path: Path) -> None:
        self.root = root
        self.data = data
        self.files: list[tuple[KeyPath, Path]] = [((), path)]
        self.overrides: list[tuple[KeyPath, str]] = []
        self.loading: list[Path] = [path.resolve()]

    # -- origins -----------------------------------------------------------------------------

    def file_at(self, path: KeyPath) -> tuple[KeyPath, Path]:
        """The file that the value at ``path`` was read from, and where it sits in the tree."""
        return max(
            ((p, f) for p, f in self.files if path[: len(p)] == p), key=lambda item: len(item[0])
        )

    def error(self, path: KeyPath, message: str) -> InputError:
        """An error at ``path`` attributed to the file or override that put it there."""
        prefix, file = self.file_at(path)
        for where, label in reversed(self.overrides):
            # The override set the value at fault, a mapping above it, or a value inside the
            # mapping at fault (a check across its keys, like heads and kv_heads).
            related = path[: len(where)] == where or where[: len(path)] == path
            if related and (len(where) > len(prefix) or where == path):
                return OverrideError(label, format_path(path), message)
        return ConfigError(display(file), format_path(path[len(prefix):]), message)

    # -- references --------------------------------------------------------------------------

    def load_reference(self, kind: str, reference: str, path: KeyPath) -> dict[str, Any]:
        """Read the file that ``reference`` at ``path`` names, and resolve the references in it."""
        _, holder = self.file_at(path)
        try:
            target = locate(kind, reference, holder.parent, "", "")
        except ConfigError as exc:
            raise self.error(path, exc.message) from None
        if target.resolve() in self.loading:
            raise self.error(path, f"reference cycle: {reference!r} refers back to itself")
        if target.is_dir():
            raise self.error(path, f"expected a {kind} file, but {reference!r} is a directory")
        document = read_document(target, None)
        if document["kind"] != kind:
            found = f"{display(target)} is a {document['kind']} file"
            raise self.error(path, f"expected the name or path of a {kind} file, but {found}")
        self.files.append((path, target))
        self.loading.append(target.resolve())
        slot = slot_at(self.root, path)
        assert slot is not None  # only called for schema slots
        self.resolve(document, narrowed(Slot(slot.annotation), document), path)
        self.loading.pop()
        return document

    def resolve(self, node: Any, slot: Slot, path: KeyPath) -> None:
        """Replace every reference by name under ``node`` with the file it names."""
        slot = narrowed(slot, node)
        if isinstance(node, dict) and slot.keyed_by_numbers:
            self._number_keys(node, path)
        if isinstance(node, dict):
            for key, value in list(node.items()):
                sub = child(slot, key)
                if sub is None:
                    continue  # an unknown key: validation reports it with a suggestion
                if sub.ref is not None and isinstance(value, str):
                    node[key] = self.load_reference(sub.ref, value, (*path, key))
                else:
                    self.resolve(value, sub, (*path, key))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                sub = child(slot, index)
                if sub is not None:
                    self.resolve(value, sub, (*path, index))

    def _number_keys(self, node: dict[Any, Any], path: KeyPath) -> None:
        """Read a mapping keyed by numbers (a head dimension's rate) whose keys are written in
        digits as strings, as JSON writes every key (a result's ``inputs.scenario``), as the
        numbers YAML reads from ``128:``."""
        for key in [k for k in node if isinstance(k, str) and k.isdigit()]:
            if int(key) in node:
                raise self.error((*path, key), f"the key {int(key)} is given twice, as a number "
                                 f"and as the string {key!r}")
            node[int(key)] = node.pop(key)

    # -- overrides ---------------------------------------------------------------------------

    def apply(self, override: Override) -> None:
        """Set one override, loading any referenced file its key path walks into."""
        for depth in range(1, len(override.path)):
            prefix = override.path[:depth]
            slot = slot_at(self.root, prefix)
            if slot is None:
                hint = describe({"type": "extra_forbidden", "loc": prefix}, self.root)
                raise OverrideError(override.label, format_path(prefix), hint)
            value = _get(self.data, prefix)
            if slot.ref is not None and isinstance(value, str):
                _set(self.data, prefix, self.load_reference(slot.ref, value, prefix))
        container = container_at(self.data, override)
        self._replace_alternative(override, container)
        last = override.path[-1]
        if isinstance(last, str) and last.isdigit():
            holder = slot_at(self.root, override.path[:-1])
            if holder is not None and holder.keyed_by_numbers:
                last = int(last)  # YAML reads a key 64: as the number, and so does the schema
        container[last] = override.value  # type: ignore[index]
        self.overrides.append((override.path, override.label))
        # the files that gave the replaced value give nothing under it any more
        depth = len(override.path)
        self.files = [(p, f) for p, f in self.files if p[:depth] != override.path]

    def _replace_alternative(self, override: Override, container: Any) -> None:
        """An override of one way to give a rate (``h2d_copy_gb_s``) replaces the other way
        (``h2d_copy_efficiency``) where a file gave it; given both by overrides, validation
        reports them. A key inside a mapping (``peak_tflops.bf16``) replaces that key of the
        other mapping (``flops_per_clock_per_sm.bf16``)."""
        path, given = override.path, {where for where, _ in self.overrides}
        key = path[-1]
        other = _alternative(slot_at(self.root, path[:-1]), key)
        if other is not None and isinstance(container, dict):
            if (*path[:-1], other) in given or other not in container:
                return
            if isinstance(override.value, dict) and isinstance(container[other], dict):
                for inner in override.value:
                    if (*path[:-1], other, inner) not in given:
                        container[other].pop(inner, None)
            else:
                del container[other]
            return
        if len(path) < 3 or not isinstance(path[-2], str):
            return
        other = _alternative(slot_at(self.root, path[:-2]), path[-2])
        sibling = _get(self.data, (*path[:-2], other)) if other is not None else None
        if isinstance(sibling, dict) and (*path[:-2], other, key) not in given:
            sibling.pop(key, None)

    def validate(self) -> BaseModel:
        """Validate the assembled tree; the first problem becomes the error."""
        try:
            return self.root.model_validate(self.data)
        except ValidationError as exc:
            errors: list[dict[str, Any]] = [
                {**e, "loc": tuple(k for k in e["loc"] if k not in SCENARIO_FORMS)}
                for e in exc.errors()]
            first = errors[0]
            if first["type"] == "missing":
                # A missing key beside an unknown one is most likely that key misspelt.
                misspelt = (
                    e for e in errors
                    if e["type"] == "extra_forbidden" and e["loc"][:-1] == first["loc"][:-1]
                )
                first = next(misspelt, first)
            first, members = union_branch(first, errors, self.root)
            message = describe(first, self.root)
            more = len(errors) - members
            if more:
                message += f" (and {more} more problem{'s' * (more > 1)})"
            raw = tuple(first["loc"])
            # A mapping key (before "[key]", or the key of a non-string key) is not a list index.
            loc = tuple(
                str(key) if raw[i + 1 : i + 2] == ("[key]",) else key
                for i, key in enumerate(raw) if key != "[key]"
            )
            if first["type"] == "invalid_key":
                loc = loc[:-1]
            raise self.error(loc, message) from None


def _alternative(slot: Slot | None, key: str | int) -> str | None:
    """The other key of ``key``'s pair of alternatives in the spec at ``slot``, if any."""
    model = slot.model if slot is not None else None
    if model is None or not issubclass(model, Spec) or not isinstance(key, str):
        return None
    return model.alternative(key)


def _get(data: Any, path: KeyPath) -> Any:
    for key in path:
        if isinstance(data, dict) and isinstance(key, str):
            data = data.get(key)
        elif isinstance(data, list) and isinstance(key, int) and key < len(data):
            data = data[key]
        else:
            return None
    return data


def _set(data: dict[str, Any], path: KeyPath, value: Any) -> None:
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _point_overrides(item: Any, prefix: KeyPath, origin: str) -> list[Override]:
    """A validation point's own ``overrides``, placed on its scenario (the point sits at
    ``prefix``); entries of the wrong type are left for validation to report."""
    texts = item.get("overrides") if isinstance(item, dict) else None
    if not isinstance(texts, list):
        return []
    found = [parse_override(text, f"{origin}.overrides[{index}]")
             for index, text in enumerate(texts) if isinstance(text, str)]
    return [replace(o, path=(*prefix, "scenario", *o.path)) for o in found]


def load_tree(
    reference: str | Path, kind: str | None = None, overrides: Sequence[str] = ()
) -> tuple[DocumentSpec, Path]:
    """Load, override, resolve and validate one file; return its spec and its path.

    ``kind`` is the kind expected (a name is then looked up among files of that kind); None
    accepts any kind, read from the file.
    """
    if kind is not None:
        path = locate(kind, reference, None, str(reference), "")
    else:
        path = Path(reference)
    document = read_document(path, kind)
    spec_cls = spec_for_document(document["kind"], document)
    if spec_cls is None:
        message = f"ghsim cannot load {document['kind']!r} files yet"
        raise ConfigError(display(path), "kind", message)
    tree = _Tree(spec_cls, document, path)
    points = document.get("points") if document["kind"] == "validation_points" else None
    for index, item in enumerate(points if isinstance(points, list) else []):
        origin = f"{display(path)} points[{index}]"
        for override in outer_first(_point_overrides(item, ("points", index), origin)):
            tree.apply(override)
    for override in outer_first([parse_override(text) for text in overrides]):
        tree.apply(override)
    tree.resolve(tree.data, Slot(spec_cls), ())
    spec = tree.validate()
    assert isinstance(spec, DocumentSpec)
    return spec, path


def _within(error: InputError, source: str, prefix: str) -> InputError:
    """``error`` with its key path placed under ``prefix`` when it is about ``source``."""
    if error.source != source:
        return error
    key = f"{prefix}.{error.key_path}" if error.key_path else prefix
    return type(error)(error.source, key, error.message)


def load_entries(
    reference: str | Path, kind: str, key: str, entry: type[BaseModel]
) -> list[BaseModel | InputError]:
    """Each item of the list ``key`` of a file, validated on its own, so that one broken item
    is reported as its error while the others load (``ghsim validate`` runs the rest)."""
    path = locate(kind, reference, None, str(reference), "")
    document = read_document(path, kind)
    source = display(path)
    spec_cls = SPEC_BY_KIND[kind]
    for name in document:
        if name not in spec_cls.model_fields:
            hint = describe({"type": "extra_forbidden", "loc": (name,)}, spec_cls)
            raise ConfigError(source, name, hint)
    items = document.get(key)
    if not isinstance(items, list) or not items:
        raise ConfigError(source, key, "expected a non-empty list")
    loaded: list[BaseModel | InputError] = []
    for index, item in enumerate(items):
        where = f"{key}[{index}]"
        try:
            tree = _Tree(entry, ensure_mapping(item, source, ""), path)
            if "overrides" in entry.model_fields:
                for override in outer_first(_point_overrides(item, (), f"{source} {where}")):
                    tree.apply(override)
            tree.resolve(tree.data, Slot(entry), ())
            loaded.append(tree.validate())
        except InputError as error:
            loaded.append(_within(error, source, where))
    return loaded
