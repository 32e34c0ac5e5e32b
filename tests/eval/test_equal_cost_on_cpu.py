"""Equal-cost readouts against hand-computed values."""

import math

import pytest
from scipy import stats

from prover_verl.eval.equal_cost import (
    HEADLINE_COLUMNS,
    auc_to,
    break_even,
    headline_rows,
    headline_table,
    paired,
    steps_to,
    success_at,
    verdict,
)

CURVE = [
    {"update": 0, "env_steps": 0.0, "success": 0.1},
    {"update": 1, "env_steps": 100.0, "success": 0.3},
    {"update": 2, "env_steps": 250.0, "success": 0.6},
]


def test_success_at_reads_the_last_measured_point_under_the_budget():
    assert success_at(CURVE, 99.0) == 0.1  # no line drawn towards the next evaluation
    assert success_at(CURVE, 100.0) == 0.3
    assert success_at(CURVE, 249.9) == 0.3
    assert success_at(CURVE, 1e9) == 0.6
    with pytest.raises(ValueError, match="no evaluation"):
        success_at(CURVE[1:], 50.0)
    with pytest.raises(ValueError, match="must not decrease"):
        success_at([CURVE[0], CURVE[2], CURVE[1]], 300.0)


def test_auc_integrates_the_step_function_up_to_the_budget():
    # 0.1 over [0, 100), 0.3 over [100, 200): (10 + 30) / 200
    assert auc_to(CURVE, 200.0) == pytest.approx(0.2)
    # past the last evaluation it holds 0.6: (10 + 45 + 0.6 * 50) / 300
    assert auc_to(CURVE, 300.0) == pytest.approx(85 / 300)
    with pytest.raises(ValueError):
        auc_to(CURVE, 0.0)


def test_steps_to_target():
    assert steps_to(CURVE, 0.3) == 100.0 and steps_to(CURVE, 0.7) is None


def test_paired_t_test_by_hand():
    a = {1: 0.5, 2: 0.6, 3: 0.4, 9: 1.0}
    b = {1: 0.4, 2: 0.4, 3: 0.4}
    d = paired(a, b)
    assert d["seeds"] == [1, 2, 3] and d["per_seed"] == pytest.approx([0.1, 0.2, 0.0])
    assert d["mean"] == pytest.approx(0.1) and d["std"] == pytest.approx(0.1)
    assert d["sem"] == pytest.approx(0.1 / math.sqrt(3)) and d["t"] == pytest.approx(math.sqrt(3))
    # two-sided p of t = sqrt(3) with 2 degrees of freedom: 1 - t / sqrt(t^2 + 2) = 1 - sqrt(3/5)
    assert d["p"] == pytest.approx(1 - math.sqrt(3 / 5))
    assert verdict(d) == "within noise"
    one = paired({1: 0.9}, {1: 0.1})
    assert one["sem"] is None and one["p"] is None and verdict(one) == "one seed"
    same = paired({1: 0.3, 2: 0.3}, {1: 0.1, 2: 0.1})
    assert same["p"] == 0.0 and verdict(same) == "above"
    assert verdict({"p": 0.01, "mean": -0.2}) == "below"
    with pytest.raises(ValueError, match="no seeds"):
        paired({1: 0.0}, {2: 0.0})


def test_break_even_crossing_of_the_dial_line():
    # gain = -0.1 + 0.2 * hit rate exactly, two runs per setting: crosses zero at hit rate 0.5
    points = [(f"oracle{h}", s, h, -0.1 + 0.2 * h) for h in (0.0, 0.25, 0.5, 1.0) for s in (1, 2)]
    out = break_even(points, resamples=200)
    assert out["intercept"] == pytest.approx(-0.1) and out["slope"] == pytest.approx(0.2)
    assert out["hit_rate"] == pytest.approx(0.5)
    assert out["interval"] == pytest.approx([0.5, 0.5]) and out["positive_slope_frac"] == 1.0
    # one run at a setting: the resamples cannot vary it, so no interval (not a zero-width one)
    single = break_even([("a", 1, 0.0, -0.1), ("b", 1, 1.0, 0.1)], resamples=50)
    assert single["hit_rate"] == pytest.approx(0.5) and single["interval"] is None
    assert single["positive_slope_frac"] is None
    # a falling line has no break-even
    flat = break_even([("a", 1, 0.0, 0.1), ("a", 2, 0.0, 0.1), ("b", 1, 1.0, -0.1), ("b", 2, 1.0, -0.12)], 50)
    assert flat["hit_rate"] is None and flat["interval"] is None
    with pytest.raises(ValueError, match="two different hit rates"):
        break_even([("a", 1, 0.5, 0.1), ("a", 2, 0.5, 0.2)])


def test_break_even_resamples_within_the_dial_setting_not_the_measured_rate():
    # two seeds of each setting measure different hit rates (the oracle at 0.0 still hits by chance): each setting
    # holds two runs, so the fit has an interval; grouped by the rate each run would be a group of one (no interval)
    points = [("oracle1.0", 1, 1.0, 0.03), ("oracle1.0", 2, 1.0, 0.01)]
    points += [("oracle0.5", 1, 0.52, 0.0), ("oracle0.5", 2, 0.46, -0.01)]
    points += [("oracle0.0", 1, 0.11, -0.04), ("oracle0.0", 2, 0.06, -0.05)]
    out = break_even(points, resamples=500)
    assert out["positive_slope_frac"] == 1.0 and out["interval"] is not None
    low, high = out["interval"]
    assert low <= out["hit_rate"] <= high and 0.0 < low < high < 1.0
    assert out["points"][2] == ["oracle0.5", 1, 0.52, 0.0]


def _run(seed, points):
    curve = [{"update": u, "env_steps": e, "success": s} for u, (e, s) in enumerate(points)]
    return {"seed": seed, "curve": curve, "env_steps": curve[-1]["env_steps"]}


def test_headline_rows_read_every_method_at_the_baselines_budget_paired_by_seed():
    runs = {  # GRPO: 100 env steps an update, ProVer 125; GRPO's median final env steps (200) is the budget
        "grpo": [_run(1, [(0, 0.1), (100, 0.2), (200, 0.4)]), _run(2, [(0, 0.2), (100, 0.2), (200, 0.3)])],
        "prover": [_run(1, [(0, 0.1), (125, 0.5), (250, 0.9)]), _run(2, [(0, 0.2), (125, 0.6), (250, 0.8)])],
        "unlisted": [_run(1, [(0, 0.0), (50, 1.0)])],
    }
    rows = headline_rows("bench", runs, ["grpo", "absent", "prover"], "grpo")
    # at 200 env steps ProVer is read at its update-1 point (0.5, 0.6); per seed +0.1, +0.3: mean 0.2, sem 0.1, t 2
    p = 2 * stats.t.sf(2.0, df=1)
    assert rows == [
        ["bench", "grpo", "2", "0.350 ± 0.050", "—", "×1.00"],
        ["bench", "prover", "2", "0.550 ± 0.050", f"+0.200 ± 0.100, p {p:.2g} (within noise)", "×1.25"],
    ]
    table = headline_table(rows).splitlines()
    assert table[0] == "| " + " | ".join(HEADLINE_COLUMNS) + " |" and len(table) == 4
    assert table[3] == "| " + " | ".join(rows[1]) + " |"
    with pytest.raises(ValueError, match="no 'GRPO' runs"):
        headline_rows("bench", runs, ["prover"], "GRPO")
    with pytest.raises(ValueError, match="2 cells"):
        headline_table([["a", "b"]])
