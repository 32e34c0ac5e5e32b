"""``benchmarks/credit_accuracy.py``: a small run writes every method's per-seed accuracy and a clean command."""

import json

import numpy as np

from benchmarks import credit_accuracy


def test_small_run_writes_per_seed_values_and_summaries(tmp_path):
    argv = ["--variants", "hard", "--stages", "0,5", "--seeds", "0,1", "--samples", "32", "--groups", "4"]
    report = credit_accuracy.main([*argv, "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["command"].endswith("--out <path>") and str(tmp_path) not in saved["command"]
    assert [(b["variant"], b["stage"]) for b in saved["blocks"]] == [("hard", 0), ("hard", 5)]
    block = report["blocks"][0]
    assert [s["seed"] for s in block["per_seed"]] == [0, 1]
    names = list(block["summary"])
    assert names[:2] == ["GRPO", "GiGPO"] and "ProVer (every_turn)" in names and "ProVer (oracle judge)" in names
    for seed in block["per_seed"]:
        assert seed["a_star"]["samples"] == 32 and seed["a_star"]["turns"] == 4 * 8 * 10  # hard: 10 turns
        grpo = seed["methods"]["GRPO"]
        assert grpo["extra_env_steps"] == 0 and grpo["turns"] == seed["a_star"]["turns"]
        for values in seed["methods"].values():
            for side in ("pivotal", "other"):
                same, opposite = values[f"{side}_sign_agreement"], values[f"{side}_opposite_sign"]
                assert same is None or 0 <= same + opposite <= 1
    grpo = block["summary"]["GRPO"]["null_weight_share"]
    shares = [s["methods"]["GRPO"]["null_weight_share"] for s in block["per_seed"]]
    assert grpo["mean"] == np.mean([v for v in shares if v is not None])
    assert "| GRPO |" in (tmp_path / "results.md").read_text()


async def test_group_log_mode_reads_an_every_turn_run(play_group, make_config, scripted_server, tmp_path):
    config = make_config(k=4, ablation="every_turn", log_dir=str(tmp_path))
    await play_group(config, scripted_server(), uid="e1", env="pivotroad", global_steps=1)
    out = credit_accuracy.main(["--group-log", str(tmp_path), "--coef", "1.0"])
    assert (out["lines"], out["skipped"], out["unreadable_lines"]) == (1, 0, 0)
    assert out["grpo"]["turns"] == out["prover"]["turns"] == 3
