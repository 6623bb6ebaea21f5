"""Nothing the user gave is modified or lost; outputs are written whole or not at all."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

import pytest

from ghsim.cli import main
from ghsim.errors import InputError
from ghsim.outputs import atomic_open, directory_lock, write_text
from tests.conftest import ROOT, TRACES


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_import_refuses_to_write_over_its_input(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "rank0.json"
    trace.write_text('{"traceEvents": []}')
    before = _digest(trace)
    for output in (trace, tmp_path / "." / "rank0.json"):
        assert main(["import", str(trace), "-o", str(output)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "is the input" in err[0]
        assert _digest(trace) == before


def test_run_refuses_an_output_folder_holding_its_scenario(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "result.json"
    shutil.copy(ROOT / "configs" / "scenarios" / "llama3-8b-gh200.yaml", scenario)
    before = _digest(scenario)
    assert main(["run", str(scenario), "-o", str(tmp_path)]) == 2
    assert "is the input" in capsys.readouterr().err
    assert _digest(scenario) == before


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    write_text(path, "old")
    with pytest.raises(RuntimeError), atomic_open(path) as handle:
        handle.write("half of the new")
        raise RuntimeError("interrupted")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_written_files_have_ordinary_permissions(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    write_text(path, "x")
    assert path.stat().st_mode & 0o644 == 0o644


def test_two_writers_into_one_folder_are_refused(tmp_path: Path) -> None:
    with (directory_lock(tmp_path), pytest.raises(InputError, match="another ghsim"),
          directory_lock(tmp_path)):
        pass
    with directory_lock(tmp_path):  # released after the first block
        pass


def test_fp8_on_a_gpu_without_fp8_is_one_clear_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "gpt3-175b-mlperf-h100-10752", "--set", "system=dgx-a100"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no FP8 tensor cores" in err[0], err


def test_an_output_path_naming_a_fifo_is_refused_first_and_kept(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Renaming a finished file over a FIFO (or a device) would destroy it: exit 2 before any
    input is read or any step simulated (this trace is not even valid), the FIFO is still one,
    and no temporary file is left."""
    trace = tmp_path / "rank0.json"
    trace.write_text('{"traceEvents": []}')
    fifo = tmp_path / "workload.yaml"
    os.mkfifo(fifo)
    assert main(["import", str(trace), "-o", str(fifo)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "expected a regular file to write, found a FIFO" in err[0]
    with pytest.raises(InputError, match="found a FIFO"):
        write_text(fifo, "x")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank0.json", "workload.yaml"]
    folder = tmp_path / "out"
    folder.mkdir()
    os.mkfifo(folder / "trace.json")
    assert main(["run", "llama3-8b-gh200", "--set", "model.layers=1000000", "-o",
                 str(folder)]) == 2  # refused before the (huge) step is lowered
    assert "trace.json: expected a regular file to write" in capsys.readouterr().err
    assert sorted(p.name for p in folder.iterdir()) == ["trace.json"]


def test_import_makes_the_output_folder(tmp_path: Path) -> None:
    kineto = TRACES / "facebookresearch_param" / "et_replay__tests__inputs__linear_kineto.json.gz"
    output = tmp_path / "new" / "folder" / "workload.yaml"
    assert main(["import", str(kineto), "-o", str(output)]) == 0
    assert output.is_file()
