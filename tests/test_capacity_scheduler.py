"""The serving engine's two KV capacity schedulers, by hand: GUARANTEED_NO_EVICT admits a request
only with blocks for its whole output; MAX_UTILIZATION admits it with blocks for its prompt,
grows it a block at a time and pauses the latest arrival when the pool runs dry
(TensorRT-LLM cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ghsim.cli import main
from ghsim.serving.engine import EngineConfig, EngineRun, ReplicaEngine, request_blocks
from ghsim.serving.requests import Request
from tests.serving_stub import OneMillisecond


def _run(capacity: str, blocks: int, requests: list[Request],
         block_tokens: int = 4) -> tuple[EngineRun, OneMillisecond]:
    model = OneMillisecond()
    config = EngineConfig(policy="inflight", max_batch_size=64, max_num_tokens=8192,
                          chunked_prefill=False, block_tokens=block_tokens, hbm_blocks=blocks,
                          host_blocks=0, beam_width=1, arrival="offline", rate_per_s=None,
                          concurrency=None, capacity=capacity)
    engine = ReplicaEngine(model, config, requests, None)  # type: ignore[arg-type]
    return engine.run(), model


def _pair() -> list[Request]:
    """Two requests of 3 prompt and 10 output tokens, each reserving its prompt and output."""
    return [Request(i, 3, 10, reserve_tokens=13) for i in range(2)]


def test_no_evict_runs_two_requests_one_after_the_other_when_blocks_hold_one() -> None:
    """Five blocks of 4 tokens; a request reserves ceil(13 / 4) = 4: the second waits for the
    first (its prefill and 9 decode iterations), then takes as long: 20 iterations."""
    run, _ = _run("guaranteed_no_evict", 5, _pair())
    assert run.end_s == pytest.approx(20e-3)
    assert run.paused == 0


def test_max_utilization_runs_both_and_pauses_the_later_one_when_blocks_run_out() -> None:
    """Both join with one block (prompt and first token, 4 tokens) and prefill in iteration 0.
    Their contexts need a second block in iteration 2 (3 left free) and a third in iteration 6:
    the first takes the last free block, so the second, the later arrival, is paused, having
    produced 6 tokens. The first ends after iteration 9; the second then prefills its 3 + 6
    tokens again in iteration 10 (its 7th token) and decodes 3 more: 14 iterations, against 20
    without eviction, and every one of the 20 output tokens produced once."""
    requests = _pair()
    run, model = _run("max_utilization", 5, requests)
    assert run.paused == 1
    assert run.end_s == pytest.approx(14e-3)
    assert sum(run.iterations.tokens_out) == 20
    assert [b.prefill_tokens for b in model.batches] == [6] + [0] * 9 + [9] + [0] * 3
    assert [b.decode_seqs for b in model.batches] == [0] + [2] * 5 + [1] * 4 + [0] + [1] * 3
    later = requests[1]
    assert later.first_token_s == pytest.approx(1e-3)  # its first token is not taken back
    assert later.finish_s == pytest.approx(14e-3)
    assert max(run.iterations.hbm_blocks_used) <= 5


def test_without_a_shortage_max_utilization_never_pauses() -> None:
    """Six blocks hold both to the end (3 blocks each): 10 iterations, nothing paused."""
    run, _ = _run("max_utilization", 6, _pair())
    assert (run.end_s, run.paused) == (pytest.approx(10e-3), 0)


def test_a_tight_pool_conserves_every_token_and_its_blocks() -> None:
    """Forty requests of varied lengths through 30 blocks of 16 tokens (each needs up to 9):
    pauses happen, blocks in use never exceed the pool, every request ends with all its
    output, and the pool is whole again at the end."""
    requests = [Request(i, 20 + 7 * (i % 5), 30 + 11 * (i % 7), reserve_tokens=0)
                for i in range(40)]
    run, _ = _run("max_utilization", 30, requests, block_tokens=16)
    assert run.paused > 0
    assert max(run.iterations.hbm_blocks_used) <= 30
    assert sum(run.iterations.tokens_out) == sum(r.output_tokens for r in requests)
    assert all(r.finish_s >= r.first_token_s > 0 for r in requests)


def _scenario(tmp_path: Path, **inference: Any) -> Path:
    document = {"schema_version": 1, "kind": "scenario", "name": "t", "system": "dgx-h200",
                "num_gpus": 1, "model": "llama3-8b",
                "inference": {"precision": "bf16", "scheduler": {"capacity": "max_utilization"},
                              "requests": {"count": 64, "input_tokens": 128,
                                           "output_tokens": 64}, **inference}}
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.mark.parametrize(("inference", "expected"), [
    ({"beam_width": 4}, "one beam"),
    ({"kv_offload": {"policy": "reload"}}, "without KV offload"),
])
def test_unmodelled_combinations_are_refused_on_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], inference: dict[str, Any],
        expected: str) -> None:
    path = _scenario(tmp_path, **inference)
    assert main(["run", str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "inference" in err and expected in err, err


def test_a_served_model_with_attention_windows_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _scenario(tmp_path)
    text = path.read_text().replace("llama3-8b", "gpt-oss-20b")
    path.write_text(text)
    assert main(["run", str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "inference.scheduler.capacity" in err and "windows" in err, err


def test_beams_share_the_prompts_full_kv_blocks_by_hand() -> None:
    """TensorRT-LLM reserves a prompt's full blocks once and the rest per beam: 1,000 prompt
    tokens and 100 output in blocks of 64 fill 18 blocks, the first 15 the prompt's alone; four
    beams reserve 15 + 4 x 3 = 27, not 4 x 18 = 72. One beam reserves its 18."""
    request = Request(0, 1000, 100, reserve_tokens=1100)
    assert request_blocks(request, 64, beams=4) == 27
    assert request_blocks(request, 64, beams=1) == 18
