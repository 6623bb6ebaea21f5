"""Loading: references by name and path, inline mappings, overrides, YAML details."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ghsim.config import load_file, load_scenario, load_system, load_validation_points, yamlio
from ghsim.config.yamlio import parse_yaml
from ghsim.errors import ConfigError, LayoutError, OverrideError

SCENARIO = """\
schema_version: 1
kind: scenario
name: mine
system: {system}
num_gpus: 16
model: llama2-7b
training: {{seq_len: 4096, micro_batch: 1, global_batch: 128, precision: bf16}}
parallelism: {{tp: 2, pp: 2}}
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_names_resolve_and_dp_is_derived(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, "s.yaml", SCENARIO.format(system="dgx-h100")))
    assert scenario.spec.system.node.gpu.name == "h100-sxm5-80gb"
    assert scenario.spec.parallelism.dp == 4
    assert scenario.layout.micro_batches == 32
    assert scenario.name == "mine"


def test_inline_mapping_wherever_a_name_can_stand(tmp_path: Path) -> None:
    inline = "{name: tiny, node: {name: n, gpus: 8, gpu: h100-sxm5-80gb, cpus: 2, cpu: xeon-8480c,"
    inline += " nvlink: {topology: switch}, nics: 0, nic_attach: gpu}}"
    text = SCENARIO.format(system=inline).replace("num_gpus: 16", "num_gpus: 8")
    text = text.replace("tp: 2, pp: 2", "tp: 8")
    scenario = load_scenario(write(tmp_path, "s.yaml", text))
    assert scenario.spec.system.name == "tiny"
    assert scenario.spec.system.fabric is None


def test_relative_path_reference_and_user_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = (Path(__file__).parents[1] / "configs/systems/dgx-h200.yaml").read_text()
    write(tmp_path, "configs/systems/my-dgx.yaml", system.replace("name: dgx-h200", "name: my-dgx"))
    monkeypatch.chdir(tmp_path)
    by_name = load_scenario(write(tmp_path, "runs/a.yaml", SCENARIO.format(system="my-dgx")))
    assert by_name.spec.system.name == "my-dgx"
    by_path = load_scenario(write(
        tmp_path, "runs/b.yaml", SCENARIO.format(system="../configs/systems/my-dgx.yaml")))
    assert by_path.spec.system.name == "my-dgx"


def test_a_local_file_shadows_the_shipped_one_of_its_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``configs/systems/dgx-h100.yaml`` under the current folder is the user's own DGX H100
    (a what-if on the shipped one): it wins over the shipped file of that name."""
    shipped = (Path(__file__).parents[1] / "configs/systems/dgx-h100.yaml").read_text()
    write(tmp_path, "configs/systems/dgx-h100.yaml",
          shipped.replace("name: dgx-h100", "name: my-edited-dgx-h100"))
    monkeypatch.chdir(tmp_path)
    assert load_system("dgx-h100").name == "my-edited-dgx-h100"


def test_a_relative_path_is_read_beside_the_file_that_names_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``system: my-system.yaml`` in runs/a.yaml is runs/my-system.yaml, even when the current
    folder holds a file of that name too."""
    system = (Path(__file__).parents[1] / "configs/systems/dgx-h100.yaml").read_text()
    write(tmp_path, "runs/my-system.yaml", system.replace("name: dgx-h100", "name: beside"))
    write(tmp_path, "my-system.yaml", system.replace("name: dgx-h100", "name: in-cwd"))
    monkeypatch.chdir(tmp_path)
    scenario = write(tmp_path, "runs/a.yaml", SCENARIO.format(system="my-system.yaml"))
    assert load_scenario(scenario).spec.system.name == "beside"


def test_a_document_with_keys_that_are_not_strings_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "numbers.yaml", "1: a\nname: b\n")
    with pytest.raises(ConfigError, match="expected string keys, got 1"):
        yamlio.read_mapping(path)


def test_ghsim_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = (Path(__file__).parents[1] / "models/llama2-7b.yaml").read_text()
    write(tmp_path / "lib", "models/my-model.yaml", model.replace("name: Llama 2 7B", "name: Mine"))
    monkeypatch.setenv("GHSIM_PATH", str(tmp_path / "lib"))
    text = SCENARIO.format(system="dgx-h100").replace("model: llama2-7b", "model: my-model")
    assert load_scenario(write(tmp_path, "s.yaml", text)).spec.model.name == "Mine"


def test_overrides_reach_into_referenced_files(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", SCENARIO.format(system="dgx-h100"))
    before = path.read_bytes()
    scenario = load_scenario(path, [
        "parallelism.tp=4", "parallelism.pp=1", "system.node.gpu.gpu.memory.capacity_gib=96",
        "training.precision=fp8", "model=llama3-8b",
    ])
    assert scenario.spec.parallelism.tp == 4
    assert scenario.spec.system.node.gpu.gpu is not None
    assert scenario.spec.system.node.gpu.gpu.memory.capacity_gib == 96
    assert scenario.spec.model.name == "Llama 3 8B"
    assert path.read_bytes() == before, "the user's file is never modified"


def test_override_naming_an_unknown_key(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", SCENARIO.format(system="dgx-h100"))
    with pytest.raises(OverrideError, match="did you mean 'tp'") as error:
        load_scenario(path, ["parallelism.tpp=4"])
    assert error.value.source == "--set parallelism.tpp=4"
    with pytest.raises(LayoutError, match="num_gpus / \\(tp x pp x cp\\)"):
        load_scenario(path, ["parallelism.dp=3"])



HEAD_DIM = "system.node.gpu.gpu.compute.attention_head_dim_efficiency"


def test_an_override_reaches_a_mapping_keyed_by_numbers() -> None:
    """A head dimension's attention rate is a mapping keyed by numbers (YAML reads ``64:`` as
    the integer): ``.64`` sets that entry, adds a new one, and a key below a number is refused
    as a key below any value is."""
    def rates(*sets: str) -> dict[int, float]:
        gpu = load_scenario("llama3-8b-gh200", list(sets)).spec.system.node.gpu.gpu
        assert gpu is not None
        return gpu.compute.attention_head_dim_efficiency
    shipped = rates()
    assert shipped[64] == 0.787
    assert rates(f"{HEAD_DIM}.64=0.5") == {**shipped, 64: 0.5}
    assert rates(f"{HEAD_DIM}.96=0.9") == {**shipped, 96: 0.9}
    with pytest.raises(OverrideError, match=r"expected a mapping to hold key 'x', found "
                       r"the value 0\.787"):
        rates(f"{HEAD_DIM}.64.x=1")
    with pytest.raises(OverrideError, match="unknown key '7'"):
        rates("parallelism.7=1")


def test_a_file_may_write_number_keys_as_strings(tmp_path: Path) -> None:
    """JSON writes every key as a string, so a mapping keyed by numbers reads ``"64"`` as 64
    (a result's inputs.scenario saved as JSON runs again); the same key given both ways is
    refused with its file and key path."""
    system = (Path(__file__).parents[1] / "configs/systems/gh200-single.yaml").read_text()
    system = system.replace("gpu: gh200-96gb", "gpu: gpu.yaml")
    gpu = (Path(__file__).parents[1] / "configs/hardware/gh200-96gb.yaml").read_text()
    assert "      64: 0.787\n" in gpu
    write(tmp_path, "gpu.yaml", gpu.replace("      64: 0.787\n", "      '64': 0.5\n"))
    write(tmp_path, "system.yaml", system)
    scenario = write(tmp_path, "s.yaml", SCENARIO.format(system="system.yaml").replace(
        "num_gpus: 16", "num_gpus: 1").replace("{tp: 2, pp: 2}", "{tp: 1}"))
    node = load_scenario(scenario).spec.system.node
    assert node.gpu.gpu is not None
    assert node.gpu.gpu.compute.attention_head_dim_efficiency[64] == 0.5
    both = "      64: 0.787\n      '64': 0.5\n"
    write(tmp_path, "gpu.yaml", gpu.replace("      64: 0.787\n", both))
    with pytest.raises(ConfigError, match=r"the key 64 is given twice, as a number and as the "
                       r"string '64'") as error:
        load_scenario(scenario)
    assert error.value.source.endswith("gpu.yaml")
    assert error.value.key_path == "gpu.compute.attention_head_dim_efficiency.64"

def test_errors_name_the_file_that_holds_the_mistake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = (Path(__file__).parents[1] / "configs/systems/dgx-h100.yaml").read_text()
    bad = write(tmp_path, "configs/systems/bad.yaml", system.replace("gpus: 8", "gpus: -8"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as error:
        load_scenario(write(tmp_path, "s.yaml", SCENARIO.format(system="bad")))
    assert error.value.source == str(bad.relative_to(tmp_path))
    assert error.value.key_path == "node.gpus"
    assert "expected a number > 0, got -8" in error.value.line()


def test_layout_errors(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", SCENARIO.format(system="dgx-h100"))
    with pytest.raises(LayoutError, match="attention heads"):
        load_scenario(path, ["parallelism.tp=3", "num_gpus=24"])
    with pytest.raises(LayoutError, match="micro_batch x dp"):
        load_scenario(path, ["training.global_batch=130"])


def test_a_sequence_longer_than_a_learned_position_embedding_is_refused() -> None:
    """GPT-3 learned 2,048 positions: a longer sequence has no row to embed (Megatron-LM
    asserts max_position_embeddings >= seq_length). Rotary models extend past their trained
    context, so their max_position_embeddings bounds nothing."""
    gpt3 = ["model=gpt3-175b", "model.layers=2", "system=gh200-single", "num_gpus=1"]
    assert load_scenario("llama3-8b-gh200", [*gpt3, "training.seq_len=2048"])
    with pytest.raises(LayoutError, match=r"at most model\.max_position_embeddings = 2,048") as e:
        load_scenario("llama3-8b-gh200", [*gpt3, "training.seq_len=4096"])
    assert (e.value.source, e.value.key_path) == ("--set training.seq_len=4096",
                                                  "training.seq_len")
    assert load_scenario("llama3-8b-gh200", ["model.max_position_embeddings=1024",
                                             "training.seq_len=4096"])

def test_yaml_reads_numbers_and_booleans_as_people_write_them() -> None:
    assert parse_yaml("a: 1e9\nb: 5e-3\nc: no\nd: true\ne: 1_000", "x") == {
        "a": 1e9, "b": 5e-3, "c": "no", "d": True, "e": 1000}
    with pytest.raises(ConfigError, match="given twice"):
        parse_yaml("a: 1\na: 2", "x")


def test_calibration_points_load(calibration_file: Path) -> None:
    points = load_validation_points(calibration_file)
    assert len(points.points) == 30
    from ghsim.config import scenario_from_spec

    for point in points.points:
        scenario = scenario_from_spec(point.scenario, str(calibration_file))
        assert scenario.spec.parallelism.dp == point.scenario.parallelism.dp


def test_load_file_by_name() -> None:
    assert load_file("dgx-h100").KIND == "system"
    assert load_system("gh200-quad").node.gpus == 4
    assert os.path.basename(str(load_scenario("llama3-8b-gh200").source)) == "llama3-8b-gh200.yaml"


def _outcome(text: str, loader: type) -> object:
    try:
        return parse_yaml(text, "f", loader)
    except ConfigError:
        return ConfigError


def test_libyaml_and_python_parsers_read_every_file_alike() -> None:
    """ghsim reads YAML with libyaml's parser under its own composer and constructor; PyYAML's
    pure-Python parser, the fallback, gives the same data for every shipped and test file, and
    both refuse the malformed ones (their messages may be worded differently)."""
    assert yamlio._StrictSafeLoader is not yamlio._PythonLoader  # libyaml is installed here
    root = Path(__file__).resolve().parents[1]
    files = [path for folder in ("configs", "models", "validation", "examples", "tests/data")
             for path in sorted((root / folder).rglob("*.yaml"))]
    assert len(files) > 100
    for path in files:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        fast = _outcome(text, yamlio._StrictSafeLoader)
        assert fast == _outcome(text, yamlio._PythonLoader), path
        if path.name.startswith("yaml-"):  # the broken corpus's malformed documents
            assert fast is ConfigError, path


def test_a_key_after_a_yaml_merge_overrides_the_merged_value(tmp_path: Path) -> None:
    from ghsim.config.yamlio import read_mapping

    path = tmp_path / "merge.yaml"
    path.write_text("defaults: &d {a: 1, b: 2}\nthing:\n  <<: *d\n  b: 3\n"
                    "twice:\n  <<: [{a: 1}, {a: 9, c: 4}]\n")
    data = read_mapping(path)
    assert data["thing"] == {"a": 1, "b": 3}
    assert data["twice"] == {"a": 1, "c": 4}  # the first merged mapping wins
    path.write_text("thing:\n  <<: {a: 1}\n  b: 2\n  b: 3\n")
    with pytest.raises(ConfigError, match="'b' is given twice"):
        read_mapping(path)


def test_no_field_bound_is_silently_overridden_by_its_type() -> None:
    """A ``Field(le=N)`` on a ``PositiveInt`` field is dropped: the type's own ``le`` comes
    later and pydantic keeps the last bound of a kind (so node.cpus accepted 10^6 and took
    minutes to build). Every field carries at most one bound of each kind."""
    import importlib
    import pkgutil

    from pydantic import BaseModel

    import ghsim.config.schema as schema

    doubled = []
    for info in pkgutil.iter_modules(schema.__path__):
        module = importlib.import_module(f"ghsim.config.schema.{info.name}")
        for cls in vars(module).values():
            if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
                continue
            for name, field in cls.model_fields.items():
                kinds = [type(m).__name__ for m in field.metadata
                         if type(m).__name__ in ("Le", "Lt", "Ge", "Gt")]
                if len(kinds) != len(set(kinds)):
                    doubled.append(f"{cls.__name__}.{name}: {kinds}")
    assert not doubled, doubled


@pytest.mark.parametrize(("overrides", "message"), [
    (["model.attention.type=gqa", "model.kv_heads=32"],
     "attention type 'gqa' needs kv_heads < heads, got 32 of both"),
    (["model.attention.type=mha"], "attention type 'mha' needs kv_heads == heads, got 8 and 32"),
])
def test_an_attention_type_that_contradicts_the_heads_is_refused(
        overrides: list[str], message: str) -> None:
    """Llama 3 8B has 32 query heads and 8 key-value heads: grouped-query attention."""
    with pytest.raises(OverrideError, match=message):
        load_scenario("llama3-8b-gh200", overrides)
