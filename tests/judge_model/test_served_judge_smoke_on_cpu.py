"""A judge model trained here, served by ``recipes/judge/serve_judge.sh`` (``transformers serve``), judging KeyDoor
groups in verl's real loop: the recipe's 2-step ``--cpu-smoke`` with ``algorithm.prover.judge.type=openai``.

The judge is trained only long enough to answer in the judge's format (its hit rate is not the point here; the
held-out table of docs/method.md is), with ``segment_side=any`` in training and in the loop, so that a usable
proposal does not hang on the short-trained model copying the asked label: every judged group must get an answer
from the server, its proposals must be what the strict parser makes of the logged raw answers (no fallback), and
the pivot hit rate verl logged must be the one the group log's answers give. Slow: 624 s in all on 2 shared, loaded
cores (the judge's 120 training steps, the server's start, the smoke's 2 steps).
"""

from __future__ import annotations

import dataclasses
import html
import json
import os

import pytest

from benchmarks.judge_model_loop import RECIPE, judge_summary, served_judge
from prover_verl import inspect
from prover_verl.cpu.smoke import logged_steps, run_smoke
from prover_verl.eval.group_log import read_groups
from prover_verl.judge.base import JudgeStatus, Trajectory
from prover_verl.judge.parse import parse_answer
from prover_verl.judge_model import train

RUN_TIMEOUT_S = float(os.environ.get("PROVER_SMOKE_TIMEOUT_S", 900))
# enough for the answer format on KeyDoor pairs (the answer's loss only: the cheapest steps)
JUDGE_ARGS = [
    "--steps",
    "120",
    "--batch-size",
    "4",
    "--lr",
    "1e-2",
    "--prompt-weight",
    "0",
    "--train-pairs",
    "64",
    "--eval-pairs",
    "6",
]
SIDE = "any"


def logged_group(record: dict) -> list[Trajectory]:
    """The group as the judge's parser needs it (ids, outcomes and turn counts of the logged trajectories)."""
    return [
        Trajectory(t["id"], record["task"], ("",) * t["turns"], ("",) * t["turns"], t["success"], t["pivot_turn"])
        for t in record["trajectories"]
    ]


@pytest.mark.slow
@pytest.mark.timeout(int(RUN_TIMEOUT_S) + 1100)  # measured 624 s on the shared 2 cores
def test_served_judge_model_judges_groups_in_the_cpu_smoke(tmp_path):
    model_dir = tmp_path / "judge"
    train.main(["--out", str(model_dir), "--segment-side", SIDE, *JUDGE_ARGS])
    held_out = json.loads((model_dir / "results.json").read_text())["held_out"]["overall"]["model"]
    assert held_out["ok_rate"] > 0, held_out  # it answers in the format before it goes in the loop
    smoke_dir = tmp_path / "smoke"
    with served_judge(model_dir, tmp_path / "server") as overrides:
        assert f"algorithm.prover.judge.model={model_dir.resolve()}" in overrides
        overrides = [*overrides, f"algorithm.prover.segment_side={SIDE}"]
        run_smoke(RECIPE, smoke_dir, 2, timeout_s=RUN_TIMEOUT_S, overrides=overrides)
    steps = logged_steps(smoke_dir, 2)
    summary = judge_summary(steps)
    print(json.dumps(summary))
    assert summary["judge_error"] == 0 and summary["judge_too_long"] == 0, summary  # every request was answered
    assert summary["judged_groups"] > 0 and summary["judge_ok"] > 0, summary

    records, bad = read_groups(smoke_dir / "group_log")
    assert bad == 0
    judged = [r for r in records if r["judge"] is not None]
    assert len(judged) == summary["judged_groups"]
    hits = known = 0
    for record in judged:
        judge = record["judge"]
        answer = judge["answer"]
        assert isinstance(answer, str) and answer, record  # a reply of the served model, not a fallback
        group = logged_group(record)
        proposal, status = parse_answer(answer, judge["labels"], tuple(judge["labels"]), group)  # side any
        if judge["rejected"] is None:
            assert status.value == judge["status"], record
        if status is JudgeStatus.OK and judge["rejected"] is None:
            assert judge["proposal"] == dataclasses.asdict(proposal), record
            pivot = next(t.pivot_turn for t in group if t.traj_id == proposal.traj_id)
            known += 1
            hits += proposal.start_turn <= pivot <= proposal.end_turn
    assert known == summary["judge_ok"] == summary["pivot_known"] > 0
    assert hits == summary["pivot_hit"]
    assert hits / known == pytest.approx(summary["judge_pivot_hit_rate"])
    # the report shows each raw answer
    assert inspect.main([str(smoke_dir / "group_log"), "--out", str(tmp_path / "report.html")]) == 0
    page = (tmp_path / "report.html").read_text()
    assert all(html.escape(r["judge"]["answer"]) in page for r in judged)
