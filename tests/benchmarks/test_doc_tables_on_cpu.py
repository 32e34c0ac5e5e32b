"""doc_tables' blocks that join several results files into one table (the README's), and the demo's renderer."""

from __future__ import annotations

import json

import pytest

from benchmarks import doc_tables, learning_report
from prover_verl.demo import report as demo_report
from prover_verl.eval.equal_cost import HEADLINE_COLUMNS

DEMO = doc_tables.ROOT / "benchmarks/results/demo/results.json"


def run(method, seed, points):
    curve = [{"update": u, "env_steps": e, "success": s} for u, (e, s) in enumerate(points)]
    kind = "grpo" if method == "grpo" else "prover"
    return {"method": method, "kind": kind, "seed": seed, "curve": curve, "env_steps": curve[-1]["env_steps"]}


def learning_runs(prover_final: float) -> dict:
    return {
        "grpo": [run("grpo", 1, [(0, 0.1), (100, 0.4)]), run("grpo", 2, [(0, 0.2), (100, 0.3)])],
        "prover_divergence": [
            run("prover_divergence", 1, [(0, 0.1), (100, prover_final)]),
            run("prover_divergence", 2, [(0, 0.2), (100, prover_final)]),
        ],
    }


def test_a_block_naming_two_files_holds_one_table_with_both_files_rows(tmp_path):
    for name, final in (("x", 0.5), ("y", 0.9)):
        learning_report.write(learning_runs(final), tmp_path / f"benchmarks/results/learning/{name}", {}, "c", "a", 0.5)
    both = "benchmarks/results/learning/x/results.json+benchmarks/results/learning/y/results.json"
    text, changed = doc_tables.regenerate(f"<!-- generated: {both} headline -->\n<!-- end generated -->\n", tmp_path)
    assert changed == [f"{both} headline"]
    lines = text.splitlines()[1:-1]
    assert lines[0] == "| " + " | ".join(HEADLINE_COLUMNS) + " |" and lines[1].startswith("|---|")
    assert sum(line.startswith("| benchmark |") for line in lines) == 1  # one header for both files
    rows = [line.split(" | ") for line in lines[2:]]
    assert [(r[1], r[3]) for r in rows] == [
        ("grpo", "0.350 ± 0.050"),
        ("prover_divergence", "0.500 ± 0.000"),  # x's rows, then y's
        ("grpo", "0.350 ± 0.050"),
        ("prover_divergence", "0.900 ± 0.000"),
    ]
    assert doc_tables.regenerate(text, tmp_path) == (text, [])


def test_joining_needs_bare_tables_with_one_header():
    table = "| a | b |\n|---|---|\n| 1 | 2 |"
    assert doc_tables.join_tables([table, table.replace("| 1 | 2 |", "| 3 | 4 |")], "s") == table + "\n| 3 | 4 |"
    assert doc_tables.join_tables(["any text"], "s") == "any text"  # one file: its part as rendered
    with pytest.raises(ValueError, match="headers differ"):
        doc_tables.join_tables([table, table.replace("| a |", "| c |")], "s")
    with pytest.raises(ValueError, match="bare tables"):
        doc_tables.join_tables([table, table + "\n\nA note under the table."], "s")


def test_the_demos_committed_run_renders_its_table_and_the_readme_rows():
    report = json.loads(DEMO.read_text())
    assert doc_tables.renderer("benchmarks/results/demo/results.json") is demo_report.render
    assert demo_report.render(report, "table") == report["table"]
    rows = [line.split(" | ") for line in demo_report.render(report, "headline").splitlines()[2:]]
    assert [r[1] for r in rows] == list(demo_report.HEADLINE)
    assert rows[0][4] == "—" and rows[0][5] == "×1.00 |"  # GRPO is the baseline
    assert all(r[0] == "| CPU demo" and r[2] == "8" for r in rows)
    with pytest.raises(ValueError, match="unknown part"):
        demo_report.render(report, "nope")


def test_the_readme_holds_one_results_table_generated_from_the_demo_and_the_learning_benchmark():
    readme = (doc_tables.ROOT / "README.md").read_text()
    blocks = doc_tables.BLOCK.findall(readme)
    assert [(b[1], b[2]) for b in blocks] == [
        ("benchmarks/results/demo/results.json+benchmarks/results/learning/keydoor_hard/results.json", "headline")
    ]
    table = blocks[0][3]
    assert "| CPU demo | GRPO |" in table and "| learning in verl's loop | grpo |" in table
