"""Credit accuracy: true advantages from state values, and each metric against hand computations."""

import math

import numpy as np
import pytest

from prover_verl.core import ForkOutcome
from prover_verl.eval.credit_accuracy import (
    credit_accuracy,
    credit_accuracy_from_group_log,
    every_turn_record_turns,
    mean_sem,
    null_turns,
    true_advantages,
)


def test_true_advantages_are_value_differences_with_independent_errors():
    # V(s0) = 2/8, V(s1) = 6/8, V(s2) = own outcome 1 (exact)
    advantage, sem = true_advantages([ForkOutcome(2, 8), ForkOutcome(6, 8), ForkOutcome(1, 1)])
    np.testing.assert_allclose(advantage, [0.5, 0.25])
    v0, v1 = 0.25 * 0.75 / 8, 0.75 * 0.25 / 8
    np.testing.assert_allclose(sem, [math.sqrt(v0 + v1), math.sqrt(v1)])
    with pytest.raises(ValueError):
        true_advantages([ForkOutcome(1, 1)])


def test_null_turns_use_the_larger_of_tolerance_and_sems():
    null = null_turns(np.array([0.01, 0.05, 0.05, -0.3]), np.array([0.0, 0.0, 0.03, 0.1]), tolerance=0.02, sems=2)
    assert null.tolist() == [True, False, True, False]  # 0.05 <= 2 * 0.03; 0.3 > 0.2


def test_credit_accuracy_against_hand_computed_values():
    truth = np.array([0.5, -0.4, 0.0, 0.01, 0.3, -0.2])
    sem = np.zeros(6)
    pivotal = np.array([True, True, False, False, False, False])
    method = np.array([1.0, 1.0, 1.0, -1.0, 0.0, -1.0])
    out = credit_accuracy(method, truth, sem, pivotal, tolerance=0.02, sems=2)
    assert out["turns"] == 6 and out["null_turns"] == 2  # 0.0 and 0.01
    assert out["pivotal_turns"] == 2 and out["other_turns"] == 2
    assert out["pivotal_sign_agreement"] == 0.5 and out["pivotal_opposite_sign"] == 0.5
    # other signed turns: 0.3 gets 0 (neither), -0.2 gets -1 (same)
    assert out["other_sign_agreement"] == 0.5 and out["other_opposite_sign"] == 0.0
    assert out["null_weight_share"] == pytest.approx(2 / 5)  # |1| + |-1| of 1 + 1 + 1 + 1 + 0 + 1
    assert out["null_gradient_share"] is None
    scale = np.array([1.0, 1.0, 0.5, 0.0, 2.0, 1.0])  # the null turns 2, 3 weigh 0.5 and 0
    weighted = credit_accuracy(method, truth, sem, pivotal, tolerance=0.02, sems=2, grad_scale=scale)
    assert weighted["null_gradient_share"] == pytest.approx(0.5 / (1 + 1 + 0.5 + 0 + 0 + 1))
    with pytest.raises(ValueError):
        credit_accuracy(method, truth, sem, pivotal, grad_scale=-scale)
    m, t = method - method.mean(), truth - truth.mean()
    assert out["correlation"] == pytest.approx(float((m * t).sum() / math.sqrt((m * m).sum() * (t * t).sum())))


def test_credit_accuracy_undefined_cases_and_shapes():
    out = credit_accuracy(np.zeros(3), np.array([0.5, 0.0, -0.5]), np.zeros(3), np.array([True, False, False]))
    assert out["correlation"] is None and out["null_weight_share"] is None
    assert out["pivotal_sign_agreement"] == 0.0 and out["pivotal_opposite_sign"] == 0.0  # zero is neither
    none_signed = credit_accuracy(np.ones(2), np.zeros(2), np.zeros(2), np.array([True, False]))
    assert none_signed["pivotal_sign_agreement"] is None and none_signed["null_weight_share"] == 1.0
    with pytest.raises(ValueError):
        credit_accuracy(np.ones(2), np.ones(3), np.zeros(3), np.zeros(3, dtype=bool))


def test_mean_sem():
    mean, sem, count = mean_sem([1.0, None, 3.0])
    assert (mean, count) == (2.0, 2) and sem == pytest.approx(1.0)  # sd sqrt(2) / sqrt(2)
    assert mean_sem([None]) == (None, None, 0)
    assert mean_sem([0.5]) == (0.5, None, 1)


def _segment(turn, before, after, samples=4):
    return {
        "turns": [turn, turn],
        "before": {"turn": turn, "successes": before, "samples": samples},
        "after": {"turn": turn + 1, "successes": after, "samples": samples if after is not None else 1},
    }


def test_an_every_turn_log_line_gives_the_true_and_the_methods_advantages_by_hand():
    record = {
        "trajectories": [
            {"id": 0, "reward": 1.0, "turns": 3, "pivot_turn": 1},
            {"id": 1, "reward": 0.0, "turns": 3, "pivot_turn": 1},
            {"id": 2, "reward": 0.0, "turns": 3, "pivot_turn": 1},
        ],
        "judge": {"proposal": {"traj_id": 0, "start_turn": 0, "end_turn": 0}},
        # V: 1/4 -> 1/4 -> 3/4 -> won (1, exact)
        "segments": [
            _segment(0, 1, 1),
            _segment(1, 1, 3),
            {**_segment(2, 3, 1), "after": {"successes": 1, "samples": 1}},
        ],
        "credits": [{"traj": 0, "turns": [1, 1], "value": 0.5}, {"traj": 0, "turns": [2, 2], "value": 0.25}],
    }
    turns = every_turn_record_turns(record, coef=2.0, epsilon=0.0)
    np.testing.assert_allclose(turns["truth"], [0.0, 0.5, 0.25])
    assert turns["pivotal"].tolist() == [False, True, False]
    std = math.sqrt(((2 / 3) ** 2 + 2 * (1 / 3) ** 2) / 2)  # rewards 1, 0, 0: mean 1/3, unbiased std
    np.testing.assert_allclose(turns["grpo"], [(2 / 3) / std] * 3)
    np.testing.assert_allclose(turns["prover"], (2 / 3) / std + 2.0 * np.array([0.0, 0.5, 0.25]) / std)
    single = {**record, "segments": [_segment(1, 1, 3)]}  # one segment: not an every_turn line
    assert every_turn_record_turns(single, coef=2.0) is None
    out = credit_accuracy_from_group_log([record, single], coef=2.0)
    assert (out["lines"], out["skipped"]) == (1, 1) and out["grpo"]["turns"] == 3


async def test_the_group_log_of_an_every_turn_run_reads_back(play_group, make_config, scripted_server, tmp_path):
    from prover_verl.eval.group_log import read_groups

    config = make_config(k=4, ablation="every_turn", log_dir=str(tmp_path))
    await play_group(config, scripted_server(), uid="e1", env="pivotroad", global_steps=1)
    (record,), _ = read_groups(tmp_path)
    turns = every_turn_record_turns(record, coef=1.0)
    segments = sorted(record["segments"], key=lambda s: s["turns"][0])
    rates = [s["before"]["successes"] / s["before"]["samples"] for s in segments]
    rates.append(segments[-1]["after"]["successes"] / segments[-1]["after"]["samples"])
    np.testing.assert_allclose(turns["truth"], np.diff(rates))
    assert turns["pivotal"].tolist() == [True, False, False]  # pivotroad: the fork at turn 0
    assert abs(turns["grpo"][0]) == pytest.approx(0.5 / math.sqrt(1 / 3), rel=1e-4)  # two wins of four
    assert credit_accuracy_from_group_log([record], coef=1.0)["lines"] == 1
