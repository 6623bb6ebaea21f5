"""Property tests: whatever a user writes, loading ends in a spec or an :class:`InputError` whose
line is one line naming where the mistake is, never another exception.

Hypothesis reuses function-scoped fixtures across examples, so every example writes its file
into its own fresh temporary folder.
"""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from ghsim.config import load_file, load_scenario
from ghsim.config.cursor import format_path
from ghsim.config.schema import SPEC_BY_KIND
from ghsim.config.search import find_named
from ghsim.config.yamlio import read_mapping
from ghsim.errors import InputError
from tests.conftest import ROOT, shipped

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

SHIPPED = shipped("configs/scenarios", "configs/systems", "models")
SCENARIO = ROOT / "configs" / "scenarios" / "llama3-70b-gh200-nvl32.yaml"
KINDS = [*SPEC_BY_KIND, "sweep", "scenery", ""]
NAMES = sorted({path.stem for path in shipped("configs", "models")})


def _schema_keys() -> list[str]:
    """Every key any spec knows, so that random documents reach deep into the schema."""
    keys: set[str] = set()
    todo: list[type[BaseModel]] = list(SPEC_BY_KIND.values())
    seen: set[type[BaseModel]] = set()
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            keys.add(name)
            annotations = [field.annotation]
            while annotations:  # models inside lists, dicts, unions and Annotated too
                annotation = annotations.pop()
                if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                    todo.append(annotation)
                annotations.extend(get_args(annotation))
    return sorted(keys)


KEYS = _schema_keys()
REFERENCES = [*NAMES, "/", "~", "~/", "./", "~nosuchuser/x.yaml", "x" * 300, "../nowhere.yaml"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(REFERENCES),
    st.sampled_from(["bf16", "fp8", "switch", "fat_tree", "gpu", "cpu", "nic", "hbm3", "1e9"]),
)
keys = st.one_of(
    st.sampled_from(KEYS), st.text(max_size=12), st.integers(-3, 3), st.booleans(), st.none()
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=5)
    ),
    max_leaves=25,
)
YAMLISH = "{}[]:,-#&*!|>?'\"%@` \n\t\\abcdefkinsty019._~/"


def dump(document: Any) -> str:
    return yaml.safe_dump(document, allow_unicode=True, sort_keys=False)


def assert_one_line(error: InputError, *names: str) -> None:
    line = error.line()
    assert len(line.splitlines()) == 1, repr(line)
    assert any(name in line for name in names), f"{line!r} names none of {names}"


def load_text(text: str, name: str = "fuzzed.yaml") -> None:
    """Write ``text`` to a fresh folder and load it: a spec or an InputError naming the file."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        raw = text.encode("utf-8")
        path.write_bytes(raw)
        try:
            load_file(path)
        except InputError as error:
            assert_one_line(error, name)
        assert path.read_bytes() == raw


# -- (a) random documents -----------------------------------------------------------------------


@FUZZ
@given(
    version=st.one_of(st.just(1), scalars),
    kind=st.one_of(st.sampled_from(KINDS), scalars),
    body=st.dictionaries(keys, values, max_size=8),
)
def test_random_documents(version: Any, kind: Any, body: dict[Any, Any]) -> None:
    document = {"schema_version": version, "kind": kind}
    document.update({k: v for k, v in body.items() if k not in document})
    load_text(dump(document))


@FUZZ
@given(document=values)
def test_random_top_level_values(document: Any) -> None:
    load_text(dump(document))


@FUZZ
@given(
    kind=st.sampled_from(KINDS),
    text=st.one_of(st.text(alphabet=YAMLISH, max_size=80), st.text(max_size=80)),
)
def test_random_yamlish_text(kind: str, text: str) -> None:
    load_text(f"schema_version: 1\nkind: {kind}\n{text}")


# -- (b) mutations of shipped files -------------------------------------------------------------


def key_paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key path into a document, containers included."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*path, key)
            yield from key_paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield (*path, index)
            yield from key_paths(value, (*path, index))


def containers(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Key paths of every mapping in a document, the document itself included."""
    if isinstance(node, dict):
        yield path
        for key, value in node.items():
            yield from containers(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from containers(value, (*path, index))


def at(document: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        document = document[key]
    return document


def inlined(kind: str, document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with every reference by name replaced by the mapping it names, so that
    mutations reach into systems, models and hardware parts written inline."""
    refs = {"scenario": {"system": "system", "model": "model"}, "system": {"node": None}}
    result = copy.deepcopy(document)
    for key, ref in refs.get(kind, {}).items():
        if key == "node" and isinstance(result.get("node"), dict):
            for part in ("gpu", "cpu", "nic"):
                name = result["node"].get(part)
                if isinstance(name, str):
                    found = find_named("hardware", name)
                    assert found is not None
                    result["node"][part] = read_mapping(found)
        elif ref is not None and isinstance(result.get(key), str):
            found = find_named(ref, result[key])
            assert found is not None
            result[key] = inlined(ref, read_mapping(found))
    return result


ORIGINALS = {path.name: read_mapping(path) for path in SHIPPED}
ORIGINALS.update({
    f"inlined-{path.name}": inlined(doc["kind"], doc)
    for path, doc in ((path, read_mapping(path)) for path in SHIPPED)
    if doc["kind"] in ("scenario", "system")
})


@FUZZ
@given(
    source=st.sampled_from(sorted(ORIGINALS)),
    operation=st.sampled_from(["set", "delete", "add"]),
    value=values,
    new_key=keys,
    data=st.data(),
)
def test_mutated_shipped_files(
    source: str, operation: str, value: Any, new_key: Any, data: st.DataObject
) -> None:
    document = copy.deepcopy(ORIGINALS[source])
    if operation == "add":
        where = data.draw(st.sampled_from(list(containers(document))), label="mapping")
        at(document, where)[new_key] = value
    else:
        path = data.draw(st.sampled_from(list(key_paths(document))), label="key path")
        parent = at(document, path[:-1])
        if operation == "set":
            parent[path[-1]] = value
        else:
            del parent[path[-1]]
    load_text(dump(document), name=f"mutated-{source}")


# -- (c) random overrides -----------------------------------------------------------------------

REAL_PATHS = sorted(
    format_path(path) for path in key_paths(inlined("scenario", read_mapping(SCENARIO)))
)
key_path_texts = st.one_of(
    st.sampled_from(REAL_PATHS),
    st.lists(
        st.one_of(st.sampled_from(KEYS), st.sampled_from(["system", "model", "x[0]"]),
                  st.text(max_size=6)),
        min_size=1, max_size=5,
    ).map(".".join),
)
override_values = st.one_of(
    st.text(max_size=20),
    st.text(alphabet=YAMLISH, max_size=20),
    scalars.map(lambda v: yaml.safe_dump(v, default_flow_style=True).removesuffix("\n...\n")),
    values.map(lambda v: yaml.safe_dump(v, default_flow_style=True, width=10**6).strip()),
)
overrides = st.one_of(
    st.text(max_size=40),
    st.tuples(key_path_texts, st.sampled_from(["=", "==", " = ", ""]), override_values).map(
        "".join
    ),
)


@FUZZ
@given(texts=st.lists(overrides, min_size=1, max_size=3))
def test_random_overrides(texts: list[str]) -> None:
    before = SCENARIO.read_bytes()
    try:
        load_scenario(SCENARIO, texts)
    except InputError as error:
        assert_one_line(error, "--set", SCENARIO.name)
    assert SCENARIO.read_bytes() == before


@pytest.mark.parametrize("text", ["system.node.gpu={}", "system.node={}",
                                  "system.node.gpu.gpu={}"])
def test_an_override_that_replaces_a_files_part_is_blamed_for_it(text: str) -> None:
    """Found by test_random_overrides: an override replacing a whole referenced part with an
    empty mapping was reported as the part's file missing its keys; the override is at fault."""
    with pytest.raises(InputError) as caught:
        load_scenario(SCENARIO, [text])
    assert_one_line(caught.value, "--set")
    assert "--set" in str(caught.value)


def test_overrides_that_are_fine_still_load() -> None:
    """The strategies above do reach success: a sanity check of the harness."""
    scenario = load_scenario(SCENARIO, ["parallelism.tp=8", "training.global_batch=256"])
    assert scenario.layout.tp == 8


@pytest.mark.parametrize("source", sorted(ORIGINALS))
def test_unmutated_round_trip_loads(source: str) -> None:
    """Dumping a shipped file, or its inlined form, and loading it from a temporary folder
    works: the mutations start from documents that load."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / source
        path.write_text(dump(ORIGINALS[source]), encoding="utf-8")
        load_file(path)
