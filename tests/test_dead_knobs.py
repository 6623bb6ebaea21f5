"""Every hardware and system key moves some prediction the way the hardware would, or is marked
informational, or is explained (tools/dead_knobs.py: each numeric key halved on 32 small
scenarios that between them run every mechanism, about a minute of CPU)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_no_key_is_dead_or_moves_a_prediction_the_wrong_way() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "dead_knobs.py"), "-j", "1"],
                         capture_output=True, text=True, check=False, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 read by no mechanism" in run.stdout
    assert "0 of " in run.stdout and "moved a case the wrong way" in run.stdout
