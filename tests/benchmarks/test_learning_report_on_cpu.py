"""The learning benchmark's equal-cost analysis and its generated doc tables, on hand-made runs."""

from __future__ import annotations

import json

import pytest

from benchmarks import doc_tables, learning_report


def run(method, seed, points, hit=None):
    curve = [{"update": u, "env_steps": e, "success": s} for u, (e, s) in enumerate(points)]
    return {
        "method": method,
        "kind": "grpo" if method.startswith("grpo") else "prover",
        "seed": seed,
        "curve": curve,
        "env_steps": curve[-1]["env_steps"],
        "main_steps": curve[-1]["env_steps"],
        "extra_steps": 0.0,
        "wall_s": 1.0,
        "credit": {"judge_accuracy": hit},
    }


# GRPO spends 100 env steps an update, the control and ProVer 125: at GRPO's final 200 they have made one update
RUNS = {
    "grpo": [run("grpo", 1, [(0, 0.1), (100, 0.2), (200, 0.4)]), run("grpo", 2, [(0, 0.2), (100, 0.2), (200, 0.3)])],
    "grpo_control": [
        run("grpo_control", 1, [(0, 0.1), (125, 0.3), (250, 0.5)]),
        run("grpo_control", 2, [(0, 0.2), (125, 0.3), (250, 0.4)]),
    ],
    "prover_oracle1.0": [
        run("prover_oracle1.0", 1, [(0, 0.1), (125, 0.5), (250, 0.9)], hit=1.0),
        run("prover_oracle1.0", 2, [(0, 0.2), (125, 0.6), (250, 0.8)], hit=1.0),
    ],
    "prover_oracle0.0": [
        run("prover_oracle0.0", 1, [(0, 0.1), (125, 0.1), (250, 0.2)], hit=0.0),
        run("prover_oracle0.0", 2, [(0, 0.2), (125, 0.2), (250, 0.3)], hit=0.0),
    ],
    "prover_divergence": [
        run("prover_divergence", 1, [(0, 0.1), (125, 0.3), (250, 0.6)], hit=0.8),
        run("prover_divergence", 2, [(0, 0.2), (125, 0.2), (250, 0.7)], hit=0.6),
    ],
}


def test_every_method_is_read_at_grpos_budget_and_paired_by_seed():
    a = learning_report.analyse(RUNS, target=0.45)
    assert a["budget"] == 200.0
    grpo, control, oracle = (a["per_seed"][m] for m in ("grpo", "grpo_control", "prover_oracle1.0"))
    assert (grpo[1]["at_budget"], control[1]["at_budget"], oracle[2]["at_budget"]) == (0.4, 0.3, 0.6)
    assert oracle[1]["updates_at_budget"] == 1 and grpo[1]["updates_at_budget"] == 2
    # mean success over [0, 200]: GRPO seed 1 = (0.1 * 100 + 0.2 * 100) / 200; the oracle (0.1 * 125 + 0.5 * 75) / 200
    assert grpo[1]["auc"] == pytest.approx(0.15) and oracle[1]["auc"] == pytest.approx(0.25)
    assert oracle[1]["steps_to_target"] == 125.0 and grpo[2]["steps_to_target"] is None
    diff = a["methods"]["prover_oracle1.0"]["minus_grpo"]["at_budget"]
    assert diff["per_seed"] == pytest.approx([0.1, 0.3]) and diff["mean"] == pytest.approx(0.2)
    assert diff["sem"] == pytest.approx(0.1) and diff["t"] == pytest.approx(2.0)
    vs_control = a["methods"]["prover_oracle1.0"]["minus_grpo_control"]["at_budget"]
    assert vs_control["per_seed"] == pytest.approx([0.2, 0.3])
    # the per-update column is the last evaluation, whatever it cost
    assert a["methods"]["prover_oracle1.0"]["final"]["mean"] == pytest.approx(0.85)
    assert a["methods"]["grpo_control"]["steps_per_update"] == 125.0


def test_break_even_places_the_judges_a_user_can_run_on_the_dial():
    a = learning_report.analyse(RUNS, target=0.45)
    fit = a["break_even"]["grpo"]
    # oracle points (hit, gain): (1.0, +0.1), (1.0, +0.3), (0.0, -0.3), (0.0, -0.1): gain = -0.2 + 0.4 * hit
    assert fit["slope"] == pytest.approx(0.4) and fit["intercept"] == pytest.approx(-0.2)
    assert fit["hit_rate"] == pytest.approx(0.5)
    judge = fit["judges"]["prover_divergence"]
    assert judge["hit_rate"] == pytest.approx(0.7) and judge["predicted_gain"] == pytest.approx(0.08)
    assert judge["gain"] == pytest.approx(-0.1)


def test_a_crossing_past_a_perfect_judge_is_read_as_no_break_even_in_the_dial():
    fit = {
        "intercept": -0.032,
        "slope": 0.025,
        "interval": None,
        "positive_slope_frac": 0.94,
        "points": [],
        "judges": {},
    }
    text = learning_report.render({"analysis": {"break_even": {"grpo": fit | {"hit_rate": 1.28}}}}, "break_even")
    assert "gain 0 at hit rate 1.28, past a perfect judge's 1.00: the fitted line is below 0 at every hit rate" in text
    inside = learning_report.render({"analysis": {"break_even": {"grpo": fit | {"hit_rate": 0.6}}}}, "break_even")
    assert "gain 0 at hit rate 0.60 (slope positive" in inside


def test_rendered_tables_name_the_oracle_and_survive_a_json_round_trip(tmp_path):
    report = learning_report.write(RUNS, tmp_path, {"env": "keydoor"}, "python benchmarks/learning.py", "abc", 0.45)
    again = json.loads((tmp_path / "results.json").read_text())
    assert again["command"] == "python benchmarks/learning.py" and again["commit"] == "abc"
    for part in learning_report.PARTS:
        assert learning_report.render(again, part) == learning_report.render(report, part)
    table = learning_report.render(again, "table")
    assert "| prover_oracle1.0 (oracle) | 2 | 0.550 ± 0.050 |" in table
    assert "| prover_divergence | 2 |" in table and "success at 200 env steps" in table
    assert "0.100 → 0.300 (1 upd)" in learning_report.render(again, "per_seed")
    assert "gain 0 at hit rate 0.50" in learning_report.render(again, "break_even")
    assert (tmp_path / "success_vs_env_steps.png").stat().st_size > 0
    assert "Partial" not in table
    partial = again | {"settings": {"missing_runs": ["grpo_seed3"]}}
    assert "**Partial**: 1 planned runs are not in the results yet (grpo_seed3)." in learning_report.render(
        partial, "table"
    )
    sparse = again | {"settings": {"test_freq": 6, "jobs": 2, "trained": {"runs": 12, "elapsed_s": 2900.0}}}
    sparse_table = learning_report.render(sparse, "table")
    assert "| prover_oracle1.0 (oracle) | 2 | 0.550 ± 0.050 | not read (sparse validation) |" in sparse_table
    assert "not read" not in table
    assert "This command trained 12 runs, 2 at a time, in 48 min elapsed" in sparse_table
    history = [{"command": "python benchmarks/learning.py --seeds 4", "jobs": 2, "runs": 3, "elapsed_s": 1980.0}]
    with_history = learning_report.render(sparse | {"settings": sparse["settings"] | {"commands": history}}, "table")
    assert "`python benchmarks/learning.py --seeds 4`: 3 runs, 2 at a time, 33 min." in with_history
    assert "This command trained" not in with_history
    with pytest.raises(ValueError, match="unknown part"):
        learning_report.render(again, "nope")


def test_doc_blocks_regenerate_from_their_file_and_stale_ones_are_named(tmp_path):
    learning_report.write(RUNS, tmp_path / "benchmarks/results/learning/x", {}, "cmd", "abc", 0.45)
    source = "benchmarks/results/learning/x/results.json"
    stale = f"text\n<!-- generated: {source} table -->\nold\n<!-- end generated -->\nmore\n"
    fresh, changed = doc_tables.regenerate(stale, root=tmp_path)
    assert (
        changed == [f"{source} table"] and "| grpo | 2 |" in fresh and fresh.endswith("<!-- end generated -->\nmore\n")
    )
    assert doc_tables.regenerate(fresh, root=tmp_path) == (fresh, [])
    with pytest.raises(FileNotFoundError, match="missing.json"):
        doc_tables.regenerate(
            "<!-- generated: benchmarks/results/learning/missing.json table -->\n<!-- end generated -->", root=tmp_path
        )
    with pytest.raises(ValueError, match="no renderer"):
        doc_tables.regenerate("<!-- generated: elsewhere/r.json table -->\n<!-- end generated -->", root=tmp_path)


def test_the_docs_tables_match_their_committed_results_files():
    assert doc_tables.main(["--check"]) == 0, "run: python benchmarks/doc_tables.py"
