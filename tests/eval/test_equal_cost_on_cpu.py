"""Equal-cost readouts against hand-computed values."""

import math

import pytest

from prover_verl.eval.equal_cost import auc_to, break_even, paired, steps_to, success_at, verdict

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
