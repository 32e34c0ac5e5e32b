"""``benchmarks/judge_model_loop.py``: the served judge's numbers pooled over a run's steps (hand-computed)."""

from __future__ import annotations

from benchmarks.judge_model_loop import judge_summary


def test_judge_summary_pools_counts_over_steps():
    step1 = {
        "prover/groups": 2,
        "prover/groups_with_pair": 1.0,  # 2 pairs, both judged
        "prover/skipped_budget": 0,
        "prover/groups_with_proposal": 0.5,  # 1 usable proposal
        "prover/judge_malformed": 1,
        "prover/judge_out_of_range": 0,
        "prover/judge_empty": 0,
        "prover/judge_too_long": 0,
        "prover/judge_error": 0,
        "prover/pivot_known": 1,
        "prover/pivot_hit": 1,
        "prover/verified": 1,
        "prover/positive": 1,
        "prover/judge_seconds": 3.0,
        "timing_s/step": 30.0,
    }
    step2 = {
        **step1,
        "prover/groups_with_pair": 0.5,  # 1 pair
        "prover/judge_malformed": 0,
        "prover/pivot_hit": 0,
        "prover/positive": 0,
        "prover/judge_seconds": 1.0,
        "timing_s/step": 10.0,
    }
    summary = judge_summary({1: step1, 2: step2})
    assert (summary["groups"], summary["judged_groups"], summary["judge_ok"], summary["judge_malformed"]) == (
        4,
        3,
        2,
        1,
    )
    assert summary["judge_pivot_hit_rate"] == 0.5  # 1 hit of 2 proposals, not the mean of the steps' 1.0 and 0.0
    assert summary["verified_positive_rate"] == 0.5
    assert summary["judge_seconds_per_judged_group"] == round(4.0 / 3, 3)
    assert summary["judge_share_of_step"] == 0.1  # 4 judge seconds in 40 step seconds
