"""``ghsim import`` by hand, on tiny traces: which reader each file goes to, and ranks that two
files claim alike numbered apart."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ghsim.importers.cli_import import detect, import_traces

from .hostile import KERNEL, LAUNCH, OP


def _kineto(path: Path, rank: int) -> Path:
    path.write_text(json.dumps({"distributedInfo": {"rank": rank},
                                "traceEvents": [OP, LAUNCH, KERNEL]}))
    return path


def test_each_file_goes_to_the_reader_its_name_and_keys_say(tmp_path: Path) -> None:
    """Chakra by its suffix, gzipped or not; nsys by its SQLite suffix; Chakra's JSON form by
    its workload_graph; a profiler trace otherwise."""
    (tmp_path / "feeder.json").write_text(json.dumps({"workload_graph": []}))
    assert [detect(tmp_path / name) for name in ("r.0.et", "r.0.et.gz", "p.sqlite", "p.db")] \
        == ["chakra", "chakra", "nsys", "nsys"]
    assert detect(tmp_path / "feeder.json") == "chakra-json"
    assert detect(_kineto(tmp_path / "rank0.json", 0)) == "kineto"


def test_ranks_two_files_claim_alike_are_numbered_apart(tmp_path: Path) -> None:
    """Two profiles that both say rank 3 (one job's trace, copied) are ranks 0 and 1 of the
    workload; distinct ranks keep their own numbers."""
    same = [_kineto(tmp_path / f"a{i}.json", 3) for i in range(2)]
    ranks = import_traces([str(p) for p in same], tmp_path / "same.workload.yaml")
    assert [r.rank for r in ranks] == [0, 1]
    written = yaml.safe_load((tmp_path / "same.workload.yaml").read_text())
    assert [r["rank"] for r in written["ranks"]] == [0, 1]
    apart = [_kineto(tmp_path / f"b{i}.json", 5 + i) for i in range(2)]
    assert [r.rank for r in import_traces([str(p) for p in apart],
                                          tmp_path / "apart.workload.yaml")] == [5, 6]
