"""``judge.mode=agentic`` in verl's real loop: the KeyDoor ProVer recipe's CPU smoke (1 step) judged by a served
scripted policy that reads turns through tool calls (benchmarks/judge_agentic.py's reader)."""

from pathlib import Path

import pytest

from prover_verl.cpu import smoke
from prover_verl.eval.group_log import read_groups

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(1800)  # 349 s on 2 loaded cores (2026-12-06: tiny model, imitation, one step)
def test_the_agentic_judge_judges_groups_in_the_loop(tmp_path, own_server):
    served = own_server(policy=f"{ROOT / 'benchmarks' / 'judge_agentic.py'}:reader_policy")
    overrides = [
        f"algorithm.prover.judge.url={served.url}",
        "algorithm.prover.judge.model=scripted",
        "algorithm.prover.judge.api_key_env=null",
        "algorithm.prover.judge.mode=agentic",
        "algorithm.prover.judge.max_calls=6",
    ]
    smoke_dir = tmp_path / "smoke"
    smoke.run_smoke(
        ROOT / "recipes" / "keydoor" / "run_prover_qwen3.5_2b.sh",
        smoke_dir,
        1,
        None,
        1200,
        overrides,
        SMOKE_JUDGE="openai",
    )
    records, bad = read_groups(smoke_dir / "group_log")
    judged = [r for r in records if r["judge"] is not None]
    assert bad == 0 and judged, "no group had a pair to judge"
    assert all(r["judge"]["tool_calls"] and r["judge"]["tokens"] > 0 for r in judged)
    assert all(r["judge"]["status"] in ("ok", "out_of_budget", "out_of_range") for r in judged), judged
    assert all(c["tool"] == "read_turns" and not c["error"] for r in judged for c in r["judge"]["tool_calls"])
    assert len(served.requests()) == sum(
        len(r["judge"]["tool_calls"]) + (r["judge"]["answer"] is not None) for r in judged
    )
    metrics = smoke.logged_steps(smoke_dir, 1)[1]
    assert metrics["prover/judge_tokens"] == sum(r["judge"]["tokens"] for r in judged)
    assert metrics["prover/judge_error"] == 0
