import json

import pytest

from prover_verl.eval.tables import benchmark_rows, find_runs, load_episodes, main, relative_gains


def ep(env, category, won, reward=None, step=10, **extra):
    return {"step": step, "env": env, "category": category, "won": float(won), "reward": reward or float(won), **extra}


EPISODES = [
    ep("alfworld", "pick_and_place_simple", 1),
    ep("alfworld", "pick_and_place_simple", 0),
    ep("alfworld", "pick_heat_then_place_in_recep", 1),
    ep("alfworld", "pick_heat_then_place_in_recep", 1, step=5),  # an older evaluation: ignored
    ep("webshop", "webshop", 0, reward=0.5, score=0.5),
    ep("webshop", "webshop", 1, reward=1.0, score=1.0),
    ep("searchqa", "nq_mini", 1, em=1.0),
    ep("searchqa", "hotpot_mini", 0, em=0.0),
    ep("searchqa", "hotpot_mini", 1, em=1.0),
]


def write(tmp_path, name, episodes):
    d = tmp_path / name
    d.mkdir()
    (d / "episodes-1.jsonl").write_text("\n".join(json.dumps(e) for e in episodes[:5]) + "\n")
    (d / "episodes-2.jsonl").write_text("\n".join(json.dumps(e) for e in episodes[5:]) + "\n")
    return d


def test_rows_hand_computed(tmp_path):
    rows = benchmark_rows(load_episodes(write(tmp_path, "r", EPISODES)))
    assert rows["alfworld"]["pick"] == 50.0 and rows["alfworld"]["heat"] == 100.0
    assert rows["alfworld"]["all"] == pytest.approx(200 / 3) and rows["alfworld"]["cool"] is None
    assert rows["webshop"] == {"score": 75.0, "success": 50.0}
    assert rows["searchqa"] == {"hotpot_mini": 50.0, "nq_mini": 100.0, "avg": 75.0}


def test_episodes_without_category_are_counted_apart():
    rows = benchmark_rows([ep("searchqa", None, 1, em=1.0), ep("searchqa", "nq_mini", 0, em=0.0)])
    assert rows["searchqa"] == {"nq_mini": 0.0, "unknown": 100.0, "avg": 50.0}
    rows = benchmark_rows([ep("alfworld", None, 1), ep("alfworld", "pick_and_place_simple", 0)])
    assert rows["alfworld"]["pick"] == 0.0 and rows["alfworld"]["all"] == 50.0


def test_relative_gain_and_cli(tmp_path, capsys):
    base = write(tmp_path, "grpo", EPISODES)
    better = [dict(e, won=1.0, em=1.0, reward=1.0) if e["env"] != "alfworld" else e for e in EPISODES]
    prover = write(tmp_path, "prover", better)
    runs = {"GRPO": benchmark_rows(load_episodes(base)), "ProVer": benchmark_rows(load_episodes(prover))}
    gains = relative_gains(runs, "GRPO")
    assert gains["ProVer"]["alfworld"] == 0.0
    assert gains["ProVer"]["webshop"] == 100.0  # success 50 -> 100
    assert gains["ProVer"]["searchqa"] == pytest.approx(100 * (100 - 75) / 75)
    assert gains["ProVer"]["mean"] == pytest.approx((0 + 100 + 100 / 3) / 3)
    main(["--run", f"GRPO={base}", "--run", f"ProVer={prover}", "--baseline", "GRPO", "--out", str(tmp_path / "o")])
    md = (tmp_path / "o" / "tables.md").read_text()
    assert "| ProVer | 0.0 | 100.0 | 33.3 | 44.4 |" in md
    assert (tmp_path / "o" / "alfworld.csv").read_text().splitlines()[0].startswith("run,pick,look")


def test_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no episodes"):
        load_episodes(tmp_path)
    (tmp_path / "episodes-1.jsonl").write_text("{not json\n")
    with pytest.raises(ValueError, match="episodes-1.jsonl:1"):
        load_episodes(tmp_path)


def test_keydoor_has_a_success_row_and_gains_only_over_the_benchmarks_run(tmp_path):
    grpo = write(tmp_path, "grpo", [ep("keydoor", None, w) for w in (1, 0, 0, 1)])  # 50
    prover = write(tmp_path, "prover", [ep("keydoor", None, w) for w in (1, 1, 0, 1)])  # 75
    main(["--run", f"GRPO={grpo}", "--run", f"ProVer={prover}", "--baseline", "GRPO", "--out", str(tmp_path / "o")])
    md = (tmp_path / "o" / "tables.md").read_text()
    assert "### keydoor\n\n| run | success |\n|---|---|\n| GRPO | 50.0 |\n| ProVer | 75.0 |\n" in md
    # the gain table has the benchmarks of these runs only, not a '-' column per registered env
    assert "| run | keydoor | mean |\n|---|---|---|\n| GRPO | 0.0 | 0.0 |\n| ProVer | 50.0 | 50.0 |\n" in md
    assert not (tmp_path / "o" / "alfworld.csv").exists()
    assert (tmp_path / "o" / "keydoor.csv").read_text().splitlines() == ["run,success", "GRPO,50.0", "ProVer,75.0"]


def test_logs_folder_tabulates_every_run_logged_under_it_by_its_path(tmp_path):
    (tmp_path / "logs" / "GRPO" / "tiny").mkdir(parents=True)
    (tmp_path / "logs" / "ProVer (oracle 1.0)" / "tiny").mkdir(parents=True)
    write(tmp_path / "logs" / "GRPO" / "tiny", "seed1", [ep("keydoor", None, w) for w in (1, 0)])
    write(tmp_path / "logs" / "ProVer (oracle 1.0)" / "tiny", "seed1", [ep("keydoor", None, 1)])
    (tmp_path / "logs" / "empty").mkdir()  # no episodes: not a run
    assert list(find_runs(tmp_path / "logs")) == ["GRPO/tiny/seed1", "ProVer (oracle 1.0)/tiny/seed1"]
    main(["--logs", str(tmp_path / "logs"), "--baseline", "GRPO/tiny/seed1", "--out", str(tmp_path / "o")])
    md = (tmp_path / "o" / "tables.md").read_text()
    assert "| GRPO/tiny/seed1 | 50.0 |\n| ProVer (oracle 1.0)/tiny/seed1 | 100.0 |" in md
    assert "| ProVer (oracle 1.0)/tiny/seed1 | 100.0 | 100.0 |" in md  # the gain over GRPO/tiny/seed1
    with pytest.raises(FileNotFoundError, match="no episodes"):
        find_runs(tmp_path / "logs" / "empty")
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path / "o")])  # neither --run nor --logs


def test_alfworld_in_and_out_of_distribution_are_tabulated_apart(tmp_path):
    seen = [dict(ep("alfworld", "pick_and_place_simple", w), split="valid_seen") for w in (1, 1, 0, 1)]
    unseen = [dict(ep("alfworld", "pick_heat_then_place_in_recep", w), split="valid_unseen") for w in (0, 1)]
    rows = benchmark_rows(seen + unseen)
    # the env's own row is valid_seen (verl-agent's published number); each split also has a row
    assert rows["alfworld"]["all"] == rows["alfworld_valid_seen"]["all"] == 75.0
    assert rows["alfworld_valid_unseen"]["all"] == 50.0 and rows["alfworld_valid_unseen"]["heat"] == 50.0
    assert benchmark_rows(unseen) == {"alfworld": benchmark_rows(unseen)["alfworld"]}  # one split: one row, as before
    main(["--run", f"R={write(tmp_path, 'r', seen + unseen)}", "--out", str(tmp_path / "o")])
    md = (tmp_path / "o" / "tables.md").read_text()
    assert md.index("### alfworld\n") < md.index("### alfworld_valid_seen (in-distribution)")
    assert md.index("### alfworld_valid_seen") < md.index("### alfworld_valid_unseen (out-of-distribution)")
    assert (tmp_path / "o" / "alfworld_valid_unseen.csv").is_file()


def test_webshop_score_is_the_purchase_score_not_the_reward():
    # verl-agent's protocol rewards a win with 10: the score column reads the logged purchase score
    rows = benchmark_rows([ep("webshop", "beauty", 1, reward=10.0, score=1.0), ep("webshop", "beauty", 0, score=0.5)])
    assert rows["webshop"] == {"score": 75.0, "success": 50.0}
