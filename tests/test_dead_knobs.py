"""Every hardware and system key moves some prediction the way the hardware would, or is marked
informational, or is explained, and scenario knobs turned toward more work never speed a step
up (tools/dead_knobs.py: each numeric key halved on 32 small scenarios that between them run
every mechanism, and 29 knobs turned on 9 training scenarios; about 90 s of CPU)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_no_key_is_dead_or_moves_a_prediction_the_wrong_way() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "dead_knobs.py"), "-j", "1"],
                         capture_output=True, text=True, check=False, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert "  0 read by no mechanism, or by none this suite reaches:" in lines
    assert any(line.startswith("0 of ") and line.endswith("moved a case the wrong way")
               for line in lines)
    assert any(line.startswith("0 of ") and line.endswith("toward more work ran faster")
               for line in lines)
