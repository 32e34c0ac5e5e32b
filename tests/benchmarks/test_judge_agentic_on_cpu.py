"""``benchmarks/judge_agentic.py``: the scripted judge's table on long pairs, end to end against its server."""

from __future__ import annotations

import json

import pytest

from benchmarks import judge_agentic


def test_the_pairs_hold_their_pivot_where_the_inventory_changes():
    import random

    win, lose = judge_agentic.make_pair(random.Random(0), 30, 0)
    pivot = win.pivot_turn
    assert win.success and not lose.success and lose.pivot_turn == pivot and win.num_turns == 30
    assert win.actions[pivot] != lose.actions[pivot] and "take" in win.actions[pivot]
    assert [judge_agentic.CARRY in o for o in win.observations].index(True) == pivot + 1


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_benchmark_table(tmp_path, capsys):
    out = tmp_path / "ja.json"
    assert judge_agentic.main(["--pairs", "3", "--turns", "10", "50", "--out", str(out)]) == 0
    rows = {(r["turns"], r["mode"]): r for r in json.loads(out.read_text())["rows"]}
    heuristic, divergence, cut, whole, agentic = judge_agentic.MODES
    # at 10 turns the whole pair fits the default budget; at 50 the cut loses the inventory line
    assert rows[(10, cut)]["hit_rate"] == rows[(10, whole)]["hit_rate"] == 1.0
    assert rows[(50, cut)]["hit_rate"] == 0.0 and rows[(50, whole)]["hit_rate"] == 1.0
    assert rows[(50, agentic)]["hit_rate"] == 1.0 and rows[(50, agentic)]["statuses"] == {"ok": 3}
    assert 0 < rows[(50, agentic)]["tokens_per_group_mean"] < rows[(50, whole)]["tokens_per_group_mean"]
    assert rows[(50, heuristic)]["tokens_per_group_mean"] == 0
    # the key in hand stays in every later observation: the lasting difference starts right after the pivot
    assert rows[(50, divergence)]["hit_rate"] == 1.0 and rows[(50, heuristic)]["hit_rate"] == 0.0
    assert agentic in capsys.readouterr().out


def test_render_is_the_docs_table():
    report = {"rows": [{"turns": 10, "mode": "m", "hit_rate": 0.5, "tokens_per_group_mean": 1234.4,
                        "tool_replies_per_group_mean": 0}]}  # fmt: skip
    assert judge_agentic.render(report).splitlines()[-1] == "| 10 | m | 0.50 | 1,234 | – |"
    with pytest.raises(ValueError, match="unknown part"):
        judge_agentic.render(report, "other")
