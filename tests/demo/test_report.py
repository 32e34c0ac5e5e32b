"""``prover_verl.demo.report``: the paired comparisons against GRPO, against hand-computed references."""

import pytest

from prover_verl.demo.report import paired_difference


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
