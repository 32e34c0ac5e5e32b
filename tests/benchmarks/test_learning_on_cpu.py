"""``benchmarks/learning.py``: learning curves read from verl's metrics, and GRPO learning in the real loop (CI)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from benchmarks import learning


def test_curve_reads_validation_and_pools_prover_counts():
    """Success is verl's val-core mean (unweighted over data sources); env steps add each step's episodes and the
    verifier's share; rates pool the counts over steps instead of averaging per-step rates."""
    steps = {
        0: {"val-core/searchqa/nq/reward/mean@1": 0.2, "val-core/searchqa/hotpot/reward/mean@1": 0.4},
        1: {
            "rollout/env_steps": 100.0,
            "prover/verify_env_steps_frac": 0.5,
            "prover/pivot_known": 4.0,
            "prover/pivot_hit": 1.0,
            "prover/verified": 2.0,
            "prover/positive": 1.0,
            "prover/mean_estimate": 0.25,
            "prover/mean_credit": 0.5,
            "prover/credited_token_frac": 0.1,
        },
        2: {
            "rollout/env_steps": 60.0,
            "prover/verify_env_steps_frac": 0.0,
            "prover/pivot_known": 6.0,
            "prover/pivot_hit": 6.0,
            "prover/verified": 2.0,
            "prover/positive": 0.0,
            "prover/mean_estimate": -0.5,
            "prover/credited_token_frac": 0.0,
            "val-core/searchqa/nq/reward/mean@1": 0.5,
            "val-core/searchqa/hotpot/reward/mean@1": 0.7,
            "val-aux/searchqa/nq/won/mean@1": 0.0,
        },
    }
    run = learning.curve_of("prover_oracle1.0", 3, steps, "searchqa")
    assert [(p["update"], p["env_steps"], round(p["success"], 6)) for p in run["curve"]] == [
        (0, 0.0, 0.3),
        (2, 210.0, 0.6),
    ]
    assert (run["main_steps"], run["extra_steps"], run["kind"], run["seed"]) == (160.0, 50.0, "prover", 3)
    assert run["method"] == "prover_oracle1.0"
    credit = run["credit"]
    assert credit["judge_accuracy"] == 7 / 10 and credit["verified_positive_rate"] == 1 / 4
    assert credit["mean_estimate"] == (0.25 * 2 - 0.5 * 2) / 4 and credit["mean_credit"] == 0.5
    assert credit["credited_token_frac"] == pytest.approx(0.05)
    with pytest.raises(RuntimeError, match="fewer than 2 validations"):
        learning.curve_of("grpo", 1, {1: steps[1], 2: steps[0]}, "keydoor")


def test_val_success_reads_mean_at_n_of_sampled_validation():
    data = {"val-core/keydoor/keydoor/reward/mean@4": 0.25, "val-core/keydoor/keydoor/reward/best@4/mean": 1.0}
    assert learning.val_success(data, "keydoor") == 0.25
    assert learning.val_success({"val-aux/keydoor/keydoor/won/mean@1": 1.0}, "keydoor") is None


def test_defaults_are_the_hard_keydoor_dial_with_more_seeds_for_the_headline():
    args = learning.parse_args([])
    assert args.env_kwargs == learning.HARD_KEYDOOR and args.imitate_env_kwargs == ""  # imitates on --env-kwargs
    assert (args.val_samples, args.test_freq, args.bases, args.control_group) == (4, 1, 2, 11)
    assert args.methods == [m for m in learning.METHODS if m != "gigpo"]
    assert args.plan["grpo"] == args.plan["grpo_control"] == args.plan["prover_divergence"] == [1, 2, 3, 4, 5]
    assert args.plan["prover_oracle1.0"] == [1, 2, 3, 4, 5] and args.plan["prover_oracle0.5"] == [1, 2, 3]
    assert sum(map(bool, (m.oracle for m in map(learning.METHODS.get, args.methods)))) == 4
    non_oracle = [m for m in args.methods if m.startswith("prover_") and not learning.METHODS[m].oracle]
    assert len(non_oracle) >= 2
    quick = learning.parse_args(["--quick"])
    assert quick.plan == dict.fromkeys(learning.HEADLINE, [1, 2, 3])
    other = learning.parse_args(["--env", "searchqa", "--methods", "grpo,prover_heuristic"])
    assert other.env_kwargs == "{}"


def test_control_group_and_oracle_accuracy_reach_the_run(tmp_path, monkeypatch):
    """The control trains GRPO with the larger group; the oracle's accuracy and the judge reach the recipe."""
    calls = []
    monkeypatch.setattr(learning, "prepare_base", lambda args, index=0: calls.append(("base", index)) or tmp_path)
    monkeypatch.setattr(learning.smoke, "run_smoke", lambda recipe, run_dir, steps, **kw: calls.append((recipe, kw)))
    monkeypatch.setattr(learning.smoke, "logged_steps", lambda run_dir, steps: {})
    monkeypatch.setattr(learning, "curve_of", lambda *a: {"curve": []})
    (tmp_path / "base.json").write_text('{"settings": {}, "imitation": {}}')
    args = learning.parse_args(["--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"), "--bases", "2"])
    learning.run_one("grpo_control", 2, args)
    (_, base), (recipe, kw) = calls[:2]
    assert base == 1 and recipe.name == "run_grpo_qwen3.5_2b.sh" and kw["SMOKE_GROUP"] == "11"
    learning.run_one("prover_oracle0.25", 3, args)
    (_, base), (recipe, kw) = calls[2:4]
    assert base == 0 and recipe.name == "run_prover_qwen3.5_2b.sh" and kw["SMOKE_GROUP"] == "8"
    assert kw["SMOKE_JUDGE"] == "noisy" and "algorithm.prover.judge.accuracy=0.25" in kw["overrides"]
    # the judge model: trained once, served for the run, its overrides after the method's own
    import benchmarks.judge_model_loop as loop

    served = []
    monkeypatch.setattr(learning, "prepare_judge_model", lambda args: tmp_path / "judge")

    @contextlib.contextmanager
    def fake_served(model_dir, work_dir):
        served.append(("up", model_dir))
        yield ["algorithm.prover.judge.type=openai", "algorithm.prover.judge.url=http://127.0.0.1:1/v1"]
        served.append(("down", model_dir))

    monkeypatch.setattr(loop, "served_judge", fake_served)
    learning.run_one("prover_judge_model", 1, args)
    (recipe, kw) = calls[-1]
    assert recipe.name == "run_prover_qwen3.5_2b.sh" and served == [
        ("up", tmp_path / "judge"),
        ("down", tmp_path / "judge"),
    ]
    assert kw["overrides"][-2:] == [
        "algorithm.prover.judge.type=openai",
        "algorithm.prover.judge.url=http://127.0.0.1:1/v1",
    ]
    saved = json.loads((tmp_path / "out" / "runs" / "prover_oracle0.25_seed3.json").read_text())
    assert saved["group"] == 8 and saved["base"]["index"] == 0
    calls.clear()
    learning.run_one("prover_oracle0.25", 3, args)  # read back, not run again
    assert calls == []


def test_quick_is_the_headline_at_lower_fidelity_in_its_own_folder_and_each_choice_can_be_set():
    quick = learning.parse_args(["--quick"])
    assert quick.out.name == "keydoor_hard_quick" and learning.parse_args([]).out.name == "keydoor_hard"
    assert quick.work.name == "prover_learning_quick" and learning.parse_args([]).work.name == "prover_learning"
    assert (quick.val_samples, quick.test_freq, quick.trim_to_budget, quick.jobs) == (2, 6, True, 2)
    # the control is sized to ProVer's spend: 6 x 8 / 11 -> 4 updates fit GRPO's budget of 6 x 8 episodes
    assert {m: learning.run_steps(m, quick) for m in quick.methods} == {
        "grpo": 6,
        "grpo_control": 4,
        "prover_oracle1.0": 4,
        "prover_divergence": 4,
    }
    assert "trainer.test_freq=4" in learning.overrides("prover_divergence", quick)
    assert "trainer.save_freq=4" in learning.overrides("grpo_control", quick)
    assert "actor_rollout_ref.rollout.val_kwargs.n=2" in learning.overrides("grpo", quick)
    full = learning.parse_args([])
    assert {learning.run_steps(m, full) for m in full.methods} == {6} and full.jobs == 1
    other = learning.parse_args(["--quick", "--seeds", "6,7,8", "--val-samples", "4", "--jobs", "1"])
    assert other.plan == dict.fromkeys(learning.HEADLINE, [6, 7, 8]) and (other.val_samples, other.jobs) == (4, 1)


def _fake_runs(monkeypatch, tmp_path, seconds=0.0, fail=None):
    """run_smoke and the curve stubbed: each run sleeps ``seconds`` and records how many ran at once."""
    import threading
    import time

    state = {"running": 0, "most": 0, "smokes": [], "bases": []}
    lock = threading.Lock()

    def run_smoke(recipe, run_dir, steps, **kw):
        with lock:
            state["running"] += 1
            state["most"] = max(state["most"], state["running"])
            state["smokes"].append((run_dir.name, steps))
        time.sleep(seconds)
        with lock:
            state["running"] -= 1
        if run_dir.name == fail:
            raise RuntimeError(f"{fail} failed")

    def prepare_base(args, index=0):
        base = tmp_path / f"base{index}"
        if not base.exists():  # made once, as the real one is while its settings hold
            state["bases"].append(index)
            base.mkdir()
            (base / "base.json").write_text('{"settings": {}, "imitation": {}}')
        return base

    monkeypatch.setattr(learning, "prepare_base", prepare_base)
    monkeypatch.setattr(learning.smoke, "run_smoke", run_smoke)
    monkeypatch.setattr(learning.smoke, "logged_steps", lambda run_dir, steps: {})
    curve = [{"update": 0, "env_steps": 0.0, "success": 0.1}, {"update": 1, "env_steps": 640.0, "success": 0.3}]
    monkeypatch.setattr(learning, "curve_of", lambda m, seed, *a: {"method": m, "seed": seed, "curve": curve,
                                                                   "env_steps": 640.0, "credit": {}})  # fmt: skip
    monkeypatch.setattr(learning.learning_report, "write", lambda results, *a: {"runs": results, "table": ""})
    return state


def test_jobs_train_runs_at_once_and_keep_the_plans_order(tmp_path, monkeypatch):
    state = _fake_runs(monkeypatch, tmp_path, seconds=0.2)
    out, work = str(tmp_path / "out"), str(tmp_path / "work")
    report = learning.main(["--quick", "--seeds", "1,2", "--out", out, "--work", work])
    assert state["most"] == 2 and len(state["smokes"]) == 8 and sorted(state["bases"]) == [0, 1]
    assert list(report["runs"]) == learning.HEADLINE
    assert [[r["seed"] for r in rs] for rs in report["runs"].values()] == [[1, 2]] * 4
    assert dict(state["smokes"])["grpo_seed1"] == 6 and dict(state["smokes"])["grpo_control_seed2"] == 4
    state["smokes"].clear()
    learning.main(["--quick", "--seeds", "1,2", "--out", out, "--work", work])  # all read back
    assert state["smokes"] == []


def test_results_name_the_commit_the_runs_started_from_not_the_one_at_their_end(tmp_path, monkeypatch):
    _fake_runs(monkeypatch, tmp_path)
    commits = iter(["started", "committed while training"])
    monkeypatch.setattr(learning, "_commit", lambda: next(commits))
    written = []
    monkeypatch.setattr(learning.learning_report, "write", lambda *a: written.append(a) or {"table": ""})
    learning.main(["--quick", "--seeds", "1", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")])
    (results, out, settings, command, commit, target) = written[0]
    assert commit == "started" and settings["trained"]["runs"] == 4


def test_each_command_that_trained_runs_stays_on_record_through_later_commands(tmp_path, monkeypatch):
    """A command rewrites results.json with its own settings: what earlier commands trained, and their elapsed time,
    is carried over, and a file written before the history was kept gives its own command."""
    _fake_runs(monkeypatch, tmp_path)

    def write(results, out, settings, command, commit, target):
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps({"command": command, "commit": commit, "settings": settings}))
        return {"settings": settings, "table": ""}

    monkeypatch.setattr(learning.learning_report, "write", write)
    out = tmp_path / "out"
    common = ["--quick", "--seeds", "1", "--out", str(out), "--work", str(tmp_path / "work")]
    out.mkdir()
    old = {"command": "python benchmarks/learning.py --quick", "commit": "c0", "settings": {"jobs": 2}}
    (out / "results.json").write_text(
        json.dumps(old | {"settings": {"jobs": 2, "trained": {"runs": 5, "elapsed_s": 9.0}}})
    )
    learning.main([*common, "--methods", "grpo"])
    learning.main([*common, "--report-only"])
    report = learning.main([*common, "--methods", "grpo,grpo_control"])
    history = report["settings"]["commands"]
    assert [(c["command"], c["runs"]) for c in history] == [
        ("python benchmarks/learning.py --quick", 5),
        ("python benchmarks/learning.py " + " ".join([*common, "--methods", "grpo"]), 1),
        ("python benchmarks/learning.py " + " ".join([*common, "--methods", "grpo,grpo_control"]), 1),
    ]
    assert history[1]["names"] == ["grpo_seed1"] and history[2]["names"] == ["grpo_control_seed1"]
    assert history[0]["elapsed_s"] == 9.0 and history[1]["jobs"] == 2


def test_a_failed_run_is_raised_after_the_others_end_and_are_saved(tmp_path, monkeypatch):
    _fake_runs(monkeypatch, tmp_path, seconds=0.1, fail="grpo_control_seed1")
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="grpo_control_seed1 failed"):
        learning.main(["--quick", "--seeds", "1", "--out", str(out), "--work", str(tmp_path / "work")])
    saved = sorted(f.name for f in (out / "runs").iterdir())
    assert saved == ["grpo_seed1.json", "prover_divergence_seed1.json", "prover_oracle1.0_seed1.json"]


def test_a_run_made_with_other_settings_stops_the_benchmark_before_it_trains(tmp_path, monkeypatch):
    """Quick's runs (2 validation episodes a task, 4 updates) are not the full benchmark's: never read back as them."""
    state = _fake_runs(monkeypatch, tmp_path)
    out, work = str(tmp_path / "out"), str(tmp_path / "work")
    learning.main(["--quick", "--seeds", "1", "--methods", "prover_divergence", "--out", out, "--work", work])
    state["smokes"].clear()
    with pytest.raises(SystemExit, match=r"prover_divergence_seed1.json was trained with other settings \(steps, "
                       r"test_freq, val_samples: \[4, 6, 2\] there, \[6, 1, 4\] now\)"):  # fmt: skip
        learning.main(["--methods", "grpo,prover_divergence", "--seeds", "1", "--out", out, "--work", work])
    assert state["smokes"] == []


def test_bases_start_from_differently_initialised_tiny_models(tmp_path, monkeypatch):
    """The imitation is full-batch and deterministic: two bases imitated from one initial model are the same weights
    (as the first 21 runs' two bases were), so a base's seed must reach the tiny model's initialisation."""
    seeds = []

    def run(cmd, log):
        if "prover_verl.tiny_model" in cmd:
            seeds.append(cmd[cmd.index("--seed") + 1])
            Path(cmd[cmd.index("--out") + 1]).mkdir(parents=True)
        return '{"replay": 0.1}\n'

    monkeypatch.setattr(learning, "_run", run)
    args = learning.parse_args(["--work", str(tmp_path), "--imitate-seed", "5"])
    learning.prepare_base(args, 0), learning.prepare_base(args, 1)
    assert seeds == ["5", "6"]
    assert learning.base_settings(args, 1)["init_seed"] == 6


def test_val_split_reaches_the_data_and_the_base_settings(tmp_path, monkeypatch):
    """``--val-split train`` validates on the train split's tasks (a tiny model cannot generalise on Search-QA): the
    data builder gets the split, and a base made for the held-out split is not reused for it."""
    calls = []

    def run(cmd, log):  # what the base's commands would leave behind: a model directory, the imitation's line
        calls.append(cmd)
        (tmp_path / "base0" / "model").mkdir(exist_ok=True)
        return '{"replay": 0.5}\n'

    monkeypatch.setattr(learning, "_run", run)
    args = learning.parse_args(["--env", "searchqa", "--val-split", "train", "--work", str(tmp_path)])
    learning.prepare_base(args)
    data = next(cmd for cmd in calls if "prover_verl.data" in cmd)
    assert data[data.index("--val-split") + 1] == "train"
    calls.clear()
    learning.prepare_base(args)
    assert calls == []  # same settings: the base is reused
    held_out = learning.parse_args(["--env", "searchqa", "--work", str(tmp_path)])
    assert held_out.val_split is None
    learning.prepare_base(held_out)
    assert "--val-split" not in next(cmd for cmd in calls if "prover_verl.data" in cmd)


@pytest.mark.parametrize(
    "bad",
    [
        ["--val-samples", "0"],
        ["--jobs", "0"],
        ["--steps", "0"],
        ["--batch", "6"],
        ["--methods", "grpo,ppo"],
        ["--bases", "0"],
        ["--seeds", "1,x"],
        ["--env", "searchqa", "--methods", "grpo,prover_oracle1.0"],
    ],
)
def test_bad_settings_are_errors_naming_the_flag(bad, capsys):
    with pytest.raises(SystemExit):
        learning.parse_args(bad)
    assert bad[0] in capsys.readouterr().err


# GRPO in verl's real loop must raise held-out success. KeyDoor with one door colour (every door opens with the red
# key): the start, imitated on the six-door family's expert, knows the rooms and actions but takes a key at random
# (its greedy choice is some colour); learning the key is a preference GRPO finds in a few updates, while the
# six-door task's copy of the note's colour is beyond the tiny model in minutes (docs/method.md). Measured (seed 1,
# greedy validation on 64 held-out tasks): 0.00 at the start, 1.00 after 2 and 4 steps; with verl's GRPO
# advantages zeroed by hand, 0.00 after 4 steps (the note of issue 19). The margin asked, 0.5, is 32 tasks of 64;
# the noise of a 64-task difference is about 0.07-0.09. 6.5 minutes on 2 cores (base 2, run 4.5).
LEARNING_ARGS = [
    "--env-kwargs", '{"doors": 1}', "--imitate-env-kwargs", "{}", "--methods", "grpo", "--seeds", "1",
    "--bases", "1", "--steps", "4", "--test-freq", "4", "--val-samples", "1",
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(1200)  # 3x its 6.5 min on a quiet 2-core machine: under load in CI it ran past 900 s
def test_grpo_learns_the_single_door_key_in_the_real_loop(tmp_path):
    report = learning.main(LEARNING_ARGS + ["--out", str(tmp_path), "--work", str(tmp_path / "work")])
    (run,) = json.loads((tmp_path / "results.json").read_text())["runs"]["grpo"]
    curve = [point["success"] for point in run["curve"]]
    assert len(curve) == 2 and report["table"]
    assert curve[-1] - curve[0] >= 0.5, f"held-out success {curve}: GRPO did not learn"


def test_report_only_reports_the_runs_there_and_names_the_missing(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    (out / "runs").mkdir(parents=True)
    for method in ("grpo", "prover_divergence"):
        run = {"method": method, "kind": "grpo", "seed": 1, "env_steps": 200.0, "credit": {}}
        run["curve"] = [
            {"update": 0, "env_steps": 0.0, "success": 0.1},
            {"update": 1, "env_steps": 200.0, "success": 0.3},
        ]
        (out / "runs" / f"{method}_seed1.json").write_text(json.dumps(run))
    monkeypatch.setattr(learning, "run_one", lambda method, seed, args: json.loads(
        (args.out / "runs" / f"{method}_seed{seed}.json").read_text()))  # fmt: skip
    report = learning.main(["--quick", "--report-only", "--out", str(out), "--work", str(tmp_path / "work")])
    assert list(report["runs"]) == ["grpo", "prover_divergence"]
    assert len(report["settings"]["missing_runs"]) == 10 and "grpo_control_seed1" in report["settings"]["missing_runs"]
    assert "10 of 12 planned runs missing" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no run of the plan"):
        learning.main(["--quick", "--report-only", "--out", str(tmp_path / "empty"), "--work", str(tmp_path / "w")])


def test_judge_model_is_trained_once_and_its_held_out_table_kept_beside_the_runs(tmp_path, monkeypatch):
    """The judge is retrained only when its settings change; every call (re)writes ``--out/judge_model.json`` from
    the judge that the runs use, so a table deleted or left by another judge is replaced."""
    trained = []

    def fake_run(command, log):
        results = command[command.index("--results") + 1]
        trained.append(command[command.index("--env-kwargs") + 1])
        held_out = {"held_out": {"overall": {"hit": len(trained)}}}
        with open(results, "w") as f:
            json.dump(held_out, f)

    monkeypatch.setattr(learning, "_run", fake_run)
    args = learning.parse_args(["--work", str(tmp_path / "work"), "--out", str(tmp_path / "out")])
    table = tmp_path / "out" / "judge_model.json"
    for _ in range(2):
        assert learning.prepare_judge_model(args) == tmp_path / "work" / "judge_model"
    assert len(trained) == 1 and json.loads(table.read_text())["held_out"]["overall"] == {"hit": 1}
    table.unlink()
    learning.prepare_judge_model(args)
    assert len(trained) == 1 and table.exists()
    table.write_text("{}")  # another judge's table
    learning.prepare_judge_model(args)
    assert len(trained) == 1 and json.loads(table.read_text())["held_out"]["overall"] == {"hit": 1}
    args.env_kwargs = '{"doors": 1}'
    learning.prepare_judge_model(args)
    assert trained == [learning.HARD_KEYDOOR, '{"doors": 1}']
    assert json.loads(table.read_text())["held_out"]["overall"] == {"hit": 2}
