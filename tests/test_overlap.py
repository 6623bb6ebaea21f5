"""CommActivity: the union of a rank class's communication spans, by hand."""

from __future__ import annotations

import pytest

from ghsim.engine.overlap import CommActivity


def test_overlapping_collectives_count_once_and_a_running_one_up_to_now() -> None:
    activity = CommActivity()
    activity.begin("stage0", 0.0)
    activity.begin("stage0", 1.0)  # a second stream's collective while the first runs
    activity.end("stage0", 2.0)
    activity.end("stage0", 3.0)  # one busy span, [0, 3]
    activity.begin("stage0", 5.0)  # still running
    assert activity.overlap_s("stage0", 0.5, 2.5) == pytest.approx(2.0)
    assert activity.overlap_s("stage0", 2.0, 6.0) == pytest.approx(1.0 + 1.0)
    assert activity.overlap_s("stage0", 3.0, 5.0) == 0.0
    assert activity.overlap_s("stage1", 0.0, 6.0) == 0.0  # another class's are not its own


def test_a_span_of_no_time_leaves_nothing() -> None:
    activity = CommActivity()
    activity.begin("stage0", 1.0)
    activity.end("stage0", 1.0)
    assert activity.overlap_s("stage0", 0.0, 2.0) == 0.0
