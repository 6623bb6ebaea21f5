#!/usr/bin/env python3
"""Fuzz the command line: mutated inputs must end in a result or a one-line error, in time.

Each case mutates a shipped input and runs ``ghsim`` in this process, as a user would, then
checks the outcome: exit status 0, or 2 with exactly one line on stderr; never a traceback, a
hang past ``--timeout`` seconds, or another status. Modes:

* ``deep``: a shipped scenario (training or serving) with one to three ``--set`` overrides of
  numeric or boolean keys anywhere in the resolved document: the system, its hardware parts,
  the model, the training or serving settings (``ghsim run``);
* ``inspect``: the same overrides under ``ghsim inspect`` (``--routes``, ``--workload``);
* ``trace``: a real trace of ``tests/data/traces`` with its JSON edited, truncated or its bytes
  flipped (``ghsim import``);
* ``sweep``: a shipped sweep file with nodes replaced or deleted (``ghsim sweep``); a sweep that
  runs past the timeout is reported as slow, not failed (a valid sweep of large points may).

Every failing case is printed with what was mutated, so it can be replayed by hand; the script
exits 1 if any failed. It found, in December 2026: a ZeroDivisionError on an empty GEMM, a
serving run past every time bound, a UnicodeDecodeError from a corrupt nsys export, a dense
model's MTP modules crashing the breakdown, nodes of a million parts, a complex clock, and two
routes that raised ValueError (git log, "found by fuzzing").

    python tools/fuzz_cli.py deep -n 500 --seed 1
    python tools/fuzz_cli.py trace -n 300
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gzip
import io
import json
import random
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ghsim.cli import main as ghsim  # noqa: E402
from ghsim.config.api import load_any_scenario  # noqa: E402

SCENARIOS = sorted((ROOT / "configs" / "scenarios").glob("*.yaml"))
SWEEPS = sorted((ROOT / "configs" / "sweeps").glob("*.yaml"))
TRACES = [p for p in (ROOT / "tests" / "data" / "traces").rglob("*")
          if p.suffix in (".gz", ".json", ".et", ".sqlite") and p.stat().st_size < 3_000_000]
JUNK: list[Any] = [None, 0, -1, 1, 2, 0.5, 1e9, 2**70, "x", [], {}, True, float("nan")]


class _Timeout(Exception):
    pass


def _alarm(_signum: int, _frame: object) -> None:
    raise _Timeout


def run_case(argv: list[str], timeout_s: int) -> tuple[bool, str]:
    """Run ``ghsim argv``; (passed, what went wrong)."""
    err = io.StringIO()
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout_s)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            status: object = ghsim(argv)
    except SystemExit as exit_:
        status = exit_.code
    except _Timeout:
        return False, f"ran past {timeout_s} s"
    except BaseException as error:  # the point: anything escaping the CLI is a defect
        return False, f"{type(error).__name__}: {error}\n{traceback.format_exc()[-1200:]}"
    finally:
        signal.alarm(0)
    text = err.getvalue()
    if status not in (0, None, 2):
        return False, f"exit status {status}: {text[-400:]}"
    if "Traceback" in text or (status == 2 and text.count("\n") > 1):
        return False, f"not one line: {text[-400:]}"
    return True, ""


def _leaves(document: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(document, dict):
        for key, value in document.items():
            yield from _leaves(value, (*path, str(key)))
    elif not isinstance(document, list):
        yield path, document


def _mutated(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return rng.choice([0, 1, 2, 3, 7, 64, 1000, 2**20, value * 3, max(1, value // 3)])
    return rng.choice([0.0, 1e-9, 1e-3, 0.5, 0.999, 1.0, 2.0, 1e6, 1e12, value * 10, value / 10])


def deep_cases(rng: random.Random, command: str) -> Iterator[tuple[str, list[str]]]:
    """Overrides of numeric keys of resolved scenarios (``command``: run or inspect)."""
    leaves: dict[Path, list[tuple[tuple[str, ...], Any]]] = {}
    for path in SCENARIOS:
        spec = load_any_scenario(path).spec.model_dump(mode="json")
        leaves[path] = [(k, v) for k, v in _leaves(spec) if isinstance(v, int | float)]
    while True:
        path = rng.choice(SCENARIOS)
        sets: list[str] = []
        for _ in range(rng.choice([1, 1, 2, 3])):
            key, value = rng.choice(leaves[path])
            new = _mutated(value, rng)
            text = str(new).lower() if isinstance(new, bool) else str(new)
            sets += ["--set", f"{'.'.join(key)}={text}"]
        extra = [rng.choice(["--routes", "--workload", "--json"])] if command == "inspect" else \
            ["--json"]
        yield f"{path.name} {' '.join(sets[1::2])}", [command, str(path), *extra, *sets]


def _edit_json(document: Any, rng: random.Random) -> Any:
    containers: list[Any] = []

    def walk(node: Any, depth: int) -> None:
        if depth > 6 or not isinstance(node, dict | list):
            return
        containers.append(node)
        values = list(node.values()) if isinstance(node, dict) else node
        for value in rng.sample(values, min(len(values), 30)):
            walk(value, depth + 1)

    walk(document, 0)
    for _ in range(rng.randint(1, 5)):
        node = rng.choice(containers)
        if isinstance(node, dict) and node:
            key = rng.choice(list(node))
            if rng.random() < 0.6:
                node[key] = rng.choice(JUNK)
            else:
                del node[key]
        elif isinstance(node, list) and node:
            node[rng.randrange(len(node))] = rng.choice(JUNK)
    return document


def trace_cases(rng: random.Random, folder: Path) -> Iterator[tuple[str, list[str]]]:
    """Real traces with their JSON edited, truncated or bytes flipped (ghsim import)."""
    for i in range(sys.maxsize):
        source = rng.choice(TRACES)
        raw = source.read_bytes()
        data = gzip.decompress(raw) if source.suffix == ".gz" else raw
        how = rng.random()
        if how < 0.6 and data[:1] in (b"{", b"["):
            data = json.dumps(_edit_json(json.loads(data), rng)).encode()
        elif how < 0.8:
            data = data[:rng.randrange(max(1, len(data)))]
        else:
            flipped = bytearray(data)
            for _ in range(rng.randint(1, 20)):
                flipped[rng.randrange(len(flipped))] = rng.randrange(256)
            data = bytes(flipped)
        target = folder / f"{i}-{source.name}"
        target.write_bytes(gzip.compress(data) if source.suffix == ".gz" else data)
        yield f"{source.name} ({'edited' if how < 0.6 else 'cut' if how < 0.8 else 'flipped'})", \
            ["import", str(target), "-o", str(folder / f"{i}.yaml")]


def _nodes(document: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(document, dict):
        for key, value in document.items():
            yield from _nodes(value, (*path, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            yield from _nodes(value, (*path, index))


def sweep_cases(rng: random.Random, folder: Path) -> Iterator[tuple[str, list[str]]]:
    """Shipped sweeps with nodes replaced or deleted (ghsim sweep, one worker)."""
    for i in range(sys.maxsize):
        source = rng.choice(SWEEPS)
        document = yaml.safe_load(source.read_text())
        changed = []
        for _ in range(rng.randint(1, 3)):
            paths = [p for p in _nodes(document) if p and p[0] not in ("schema_version", "kind")]
            path = rng.choice(paths)
            parent = document
            for key in path[:-1]:
                parent = parent[key]
            if isinstance(parent, dict) and rng.random() < 0.3:
                del parent[path[-1]]
                changed.append(f"del {path}")
            else:
                parent[path[-1]] = copy.deepcopy(rng.choice(JUNK[:-1]))
                changed.append(f"{path}={parent[path[-1]]!r}")
        target = folder / f"{i}-{source.name}"
        target.write_text(yaml.safe_dump(document))
        yield f"{source.name} {'; '.join(changed)}", \
            ["sweep", str(target), "--workers", "1", "-o", str(folder / f"out{i}")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["deep", "inspect", "trace", "sweep"])
    parser.add_argument("-n", type=int, default=200, help="cases to run (default 200)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=int, default=60,
                        help="seconds a case may run (default 60)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cases = {"deep": lambda: deep_cases(rng, "run"),
                 "inspect": lambda: deep_cases(rng, "inspect"),
                 "trace": lambda: trace_cases(rng, folder),
                 "sweep": lambda: sweep_cases(rng, folder)}[args.mode]()
        for _, (label, argv) in zip(range(args.n), cases, strict=False):
            start = time.monotonic()
            passed, why = run_case(argv, args.timeout)
            if not passed and args.mode == "sweep" and why.startswith("ran past"):
                # a valid sweep of many large points may well take longer; only say so
                print(f"slow ({why}) {label}", flush=True)
            elif not passed:
                failed += 1
                print(f"FAILED ({time.monotonic() - start:.1f} s) {label}: {why}", flush=True)
    print(f"{args.n} cases, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
