"""Every case of the hostile corpus (tests/hostile.py) ends cleanly, as a real process.

Each case runs ``python -m ghsim`` under a 2 GiB address-space limit and a 30 s timeout, and
must: end with its exit status, print at most 3 lines on stderr and never a traceback, leave its
input files as they were, print strict JSON (no NaN, no Infinity) when ``--json`` succeeded, and,
where asked, print no raw control character. The cases run two at a time.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.hostile import Case, generate

MEMORY = 2 * 2**30
TIMEOUT = 30
_CONTROL = {chr(c) for c in range(32) if chr(c) not in "\n\t"} | {"\x7f"}


@dataclass(frozen=True)
class Outcome:
    status: int | None
    """None: the process ran past the timeout and was killed."""
    stdout: bytes
    stderr: str
    seconds: float


def _limits(fsize: int | None) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write fails with EFBIG instead
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    return apply


def _environment() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "COLUMNS": "100",
            "PYTHONDONTWRITEBYTECODE": "1"}


def run_case(case: Case) -> Outcome:
    """Run one case as ``python -m ghsim`` with its standard output as the case asks."""
    argv = [sys.executable, "-m", "ghsim", *case.argv]
    stdout: int | None = subprocess.PIPE
    closing: list[int] = []
    preexec = _limits(case.fsize)
    if case.stdout == "full":
        stdout = os.open("/dev/full", os.O_WRONLY)
        closing.append(stdout)
    elif case.stdout == "broken":
        reader, stdout = os.pipe()
        os.close(reader)
        closing.append(stdout)
    elif case.stdout == "closed":
        stdout = None

        def preexec() -> None:
            _limits(case.fsize)()
            os.close(1)

    start = time.monotonic()
    process = subprocess.Popen(argv, cwd=ROOT, env=_environment(), stdin=subprocess.DEVNULL,
                               stdout=stdout, stderr=subprocess.PIPE, preexec_fn=preexec)
    for descriptor in closing:
        os.close(descriptor)
    try:
        out, err = process.communicate(timeout=TIMEOUT)
        status: int | None = process.returncode
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        status = None
    return Outcome(status, out or b"", err.decode("utf-8", "replace"),
                   time.monotonic() - start)


def _digest(folder: Path) -> dict[str, str]:
    """SHA-256 of every regular file under ``folder`` (FIFOs and devices are not read)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            found[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
        elif not path.is_dir():
            found[str(path.relative_to(folder))] = "special"
    return found


@dataclass(frozen=True)
class Corpus:
    folder: Path
    cases: dict[str, Case]
    outcomes: dict[str, Outcome]
    before: dict[str, str]
    after: dict[str, str]
    dev_full_is_a_device: bool


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    folder = tmp_path_factory.mktemp("hostile")
    cases = generate(folder)
    before = _digest(folder / "in")
    # The slowest first, so that two workers finish together.
    order = sorted(cases, key=lambda c: c.status != 0)
    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = dict(zip((c.name for c in order), pool.map(run_case, order), strict=True))
    return Corpus(folder, {c.name: c for c in cases}, outcomes, before,
                  _digest(folder / "in"), Path("/dev/full").is_char_device())


def _names() -> list[str]:
    """The names of the cases, without writing the corpus (generated into a scratch folder)."""
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        return [case.name for case in generate(Path(scratch))]


@pytest.mark.parametrize("name", _names())
def test_hostile_case(corpus: Corpus, name: str) -> None:
    case, outcome = corpus.cases[name], corpus.outcomes[name]
    shown = f"{case.argv!r:.300}: status {outcome.status}, stderr {outcome.stderr[-600:]!r}"
    assert outcome.status is not None, f"ran past {TIMEOUT} s: {shown}"
    assert "Traceback" not in outcome.stderr, shown
    lines = outcome.stderr.splitlines()
    assert len(lines) <= 3, shown
    assert outcome.status == case.status, shown
    if case.status != 0:
        assert lines and lines[-1].startswith("ghsim: error: "), shown
        assert case.expect in lines[-1], f"{case.expect!r} not in the line: {shown}"
    if case.json:
        text = outcome.stdout.decode("utf-8")
        json.loads(text, parse_constant=_refuse)  # strict: NaN and Infinity are not JSON
    if case.clean:
        text = outcome.stdout.decode("utf-8")  # strict: no lone surrogate escaped raw
        assert not _CONTROL & set(text), f"raw control characters on stdout: {shown}"
        for relative in case.outputs:
            written = (corpus.folder / relative).read_bytes().decode("utf-8")
            assert not _CONTROL & set(written), f"raw control characters in {relative}"
    assert not _CONTROL & set(outcome.stderr), f"raw control characters on stderr: {shown}"


def _refuse(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def test_the_inputs_are_left_unchanged(corpus: Corpus) -> None:
    assert corpus.after == corpus.before
    assert corpus.dev_full_is_a_device, "/dev/full was replaced: an output was renamed over it"


def test_the_corpus_is_broad_and_fast(corpus: Corpus) -> None:
    assert len(corpus.cases) >= 100
    assert sum(1 for c in corpus.cases.values() if c.status == 0) >= 10  # valid inputs pass
    slowest = max(corpus.outcomes.items(), key=lambda item: item[1].seconds)
    assert slowest[1].seconds < 20, f"{slowest[0]} took {slowest[1].seconds:.1f} s"
