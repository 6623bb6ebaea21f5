"""By hand: the one line an input error prints (escaped, shortened, naming its key), and the
citation check every shipped file passes (which numbers a ``sources:`` entry covers, which
entries name nothing)."""

from __future__ import annotations

from typing import Any

from ghsim.config.sources import dangling_sources, source_paths, unsourced_numbers
from ghsim.errors import MAX_PART_CHARS, InputError, printable, shorten

DOCUMENT: dict[str, Any] = {
    "schema_version": 1, "kind": "hardware", "name": "part",
    "gpu": {"sms": 132, "clocks": [1.6, 1.98], "coherent": True, "memory": {"gib": 96}},
    "power_w": 700,
}


def test_an_entry_covers_every_number_under_the_keys_it_names() -> None:
    """A comma-separated key names several paths; a path covers what lies under it; booleans
    and schema_version are not numbers to cite."""
    assert unsourced_numbers({**DOCUMENT, "sources": {}}) == [
        "gpu.sms", "gpu.clocks[0]", "gpu.clocks[1]", "gpu.memory.gib", "power_w"]
    assert unsourced_numbers({**DOCUMENT, "sources": {"gpu.sms, power_w": "spec"}}) == [
        "gpu.clocks[0]", "gpu.clocks[1]", "gpu.memory.gib"]
    assert unsourced_numbers({**DOCUMENT, "sources": {"gpu": "spec", "power_w": "x"}}) == []
    assert source_paths(" gpu.sms ,power_w,") == [("gpu", "sms"), ("power_w",)]


def test_an_entry_that_names_no_key_is_dangling() -> None:
    sources = {"gpu.sms, gpu.smz": "spec", "gpu.memory": "x", "fan.rpm": "y"}
    assert dangling_sources({**DOCUMENT, "sources": sources}) == ["gpu.smz", "fan.rpm"]
    assert dangling_sources(DOCUMENT) == []


def test_an_error_line_names_its_source_and_key_path_once() -> None:
    assert InputError("f.yaml", "", "expected a mapping").line() == "f.yaml: expected a mapping"
    assert InputError("f.yaml", "gpu.sms", "expected a number > 0, got 0").line() == (
        "f.yaml: gpu.sms: expected a number > 0, got 0")
    assert printable("a\x1b[31mb\nc\udc80") == "a\\x1b[31mb\\nc\\udc80"


def test_long_parts_are_cut_in_the_middle_saying_how_long_they_were() -> None:
    exact = "k" * MAX_PART_CHARS
    assert shorten(exact) == exact
    long = "a" * 200 + "b" * 10_000 + "c" * 200
    cut = shorten(long)
    assert len(cut) <= MAX_PART_CHARS and "(10,400 characters)" in cut
    assert cut.startswith("a" * 100) and cut.endswith("c" * 100)
    assert len(InputError("s", long, "m").line()) < 2 * MAX_PART_CHARS
