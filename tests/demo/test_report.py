"""``prover_verl.demo.report``: the paired comparisons against GRPO, against hand-computed references."""

import pytest

from prover_verl.demo.report import compare, paired_difference, summarise, table


def _run(seed: int, points: list[tuple[float, float]]) -> dict:
    return {"seed": seed, "curve": [{"env_steps": e, "success": s} for e, s in points]}


def test_paired_difference_charges_the_extra_env_steps():
    prover = [_run(1, [(0, 0.1), (100, 0.3), (200, 0.6)]), _run(2, [(0, 0.2), (100, 0.5)]), _run(9, [(0, 0.0)])]
    grpo = [_run(1, [(0, 0.1), (80, 0.2), (160, 0.4)]), _run(2, [(0, 0.2), (150, 0.45)])]
    d = paired_difference(prover, grpo)
    assert d["seeds"] == 2  # seed 9 has no GRPO run
    assert d["final"]["per_seed"] == pytest.approx([0.6 - 0.4, 0.5 - 0.45])
    assert d["auc"]["per_seed"] == pytest.approx([(1.0 - 0.7) / 3, 0.35 - 0.325])
    # seed 1: ProVer at 160 env steps is 0.3 + 0.6 * (0.6 - 0.3) = 0.48; seed 2: GRPO spent more, ProVer's last 0.5
    assert d["equal_env_steps"]["per_seed"] == pytest.approx([0.48 - 0.4, 0.5 - 0.45])
    assert d["equal_env_steps"]["mean"] == pytest.approx(0.065)


def test_paired_difference_needs_a_common_seed():
    with pytest.raises(ValueError, match="no seeds in common"):
        paired_difference([_run(1, [(0, 0.0)])], [_run(2, [(0, 0.0)])])


def test_one_seed_gives_no_noise_verdict():
    """One seed has no standard error: the difference is reported without a verdict, not as 'beyond noise'."""

    def run(kind: str, points: list[tuple[float, float]]) -> dict:
        steps = points[-1][0]
        totals = {"kind": kind, "env_steps": steps, "main_steps": steps, "extra_steps": 0.0, "wall_s": 1.0}
        curve = [{"env_steps": e, "success": s, "greedy_success": s} for e, s in points]
        return _run(1, points) | totals | {"curve": curve, "credit": {}}

    prover, grpo = [run("prover", [(0, 0.6), (100, 0.3)])], [run("grpo", [(0, 0.6), (80, 0.35)])]
    d = paired_difference(prover, grpo)
    assert d["final"]["sem"] is None and d["final"]["below_beyond_noise"] is None
    summaries = {"grpo": summarise(grpo, 0.5), "prover": summarise(prover, 0.5)}
    lines = table(summaries, compare({"grpo": grpo, "prover": prover}, summaries), 0.5)
    assert "one seed: no noise estimate" in lines and "BELOW" not in lines and "(sem -)" in lines
    two = paired_difference(prover + [_run(2, [(0, 0.6), (100, 0.2)])], grpo + [_run(2, [(0, 0.6), (80, 0.5)])])
    # differences -0.05 and -0.3: std 0.177, sem 0.125, mean -0.175 is not under -0.25
    assert two["final"]["sem"] == pytest.approx(0.125) and two["final"]["below_beyond_noise"] is False
