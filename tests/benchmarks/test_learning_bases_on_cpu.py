"""``benchmarks/learning.py``'s starts: every base has a fingerprint, runs record it, runs of different bases are
never mixed, the base's spread is reported, and ``--verify`` rebuilds a committed run and names its first
difference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from benchmarks import learning, learning_report
from prover_verl import imitate, tiny_model
from prover_verl.data import write_dataset


def test_a_base_fingerprint_is_its_weights_and_its_tokenizer(tmp_path):
    one, again, other = (tiny_model.build(tmp_path / name, seed=seed) for name, seed in (("a", 0), ("b", 0), ("c", 1)))
    first = learning.base_fingerprint(one)
    assert first == learning.base_fingerprint(again) and len(first["id"]) == 12
    moved = learning.base_fingerprint(other)  # another init: other weights, the same tokenizer
    assert moved["weights"] != first["weights"] and moved["tokenizer"] == first["tokenizer"]
    template = one / "chat_template.jinja"
    template.write_text(template.read_text() + " ")
    assert learning.base_fingerprint(one)["tokenizer"] != first["tokenizer"]
    assert learning.base_fingerprint(tmp_path / "empty") is None


def test_the_imitation_fixes_its_threads_and_gives_the_callers_back(tmp_path):
    """Full-batch imitation draws nothing: on 1 and on 2 threads it is the same weights, bit for bit, and the
    caller's torch threads and deterministic-algorithms setting are as they were."""
    write_dataset("searchqa", tmp_path / "data", "train", "test", max_train=2, max_val=1)
    before = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    prints, results = [], []
    for threads in (1, 2):
        model = tiny_model.build(tmp_path / f"t{threads}")
        trace: list[float] = []
        kwargs = dict(target_replay=0.05, max_steps=40, threads=threads, trace=trace)
        results.append(imitate.imitate(model, "searchqa", tmp_path / "data", {}, **kwargs))
        prints.append(learning.base_fingerprint(model))
        assert len(trace) == results[-1]["steps"] + 1 and trace[-1] >= 0.05 > trace[-2]
        assert imitate.stop_margin(trace, 0.05) == min(abs(x - 0.05) / 0.05 for x in trace[-2:])
    assert prints[0] == prints[1] and results[0] == results[1]
    assert (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()) == before
    with pytest.raises(ValueError, match="threads"):
        imitate.imitate(model, "searchqa", tmp_path / "data", {}, threads=0)


def test_the_imitations_command_line_records_its_arithmetic(monkeypatch, capsys):
    def fake(*args, trace, threads, **kw):
        trace += [0.05, 0.1004]
        return {"episodes": 1, "steps": 1, "replay_probability": 0.1}

    monkeypatch.setattr(imitate, "imitate", fake)
    imitate.main(["--model", "m", "--env", "keydoor", "--data-dir", "d", "--target-replay", "0.1", "--trace"])
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["numerics"]["threads"] == 1 and record["numerics"]["torch"] == torch.__version__
    assert record["trace"] == [0.05, 0.1004] and record["margin"] == pytest.approx(0.004)


def _run(method, seed, index, fingerprint, success=(0.25, 0.5)):
    curve = [{"update": u, "env_steps": 640.0 * u, "success": s} for u, s in enumerate(success)]
    base = {"index": index, "settings": {}, "imitation": {"steps": 98, "replay_probability": 0.114}}
    if fingerprint:
        base["fingerprint"] = {"id": fingerprint, "weights": fingerprint * 2, "tokenizer": "t"}
    return {"method": method, "kind": "grpo", "seed": seed, "curve": curve, "env_steps": 640.0, "main_steps": 640.0,
            "extra_steps": 0.0, "credit": {}, "base": base}  # fmt: skip


def test_runs_from_different_bases_are_refused_naming_them():
    runs = {("grpo", 1): _run("grpo", 1, 0, "aaa"), ("grpo", 3): _run("grpo", 3, 0, "bbb")}
    runs[("grpo", 2)] = _run("grpo", 2, 1, "ccc")
    with pytest.raises(SystemExit, match=r"base 0: aaa: grpo_seed1; bbb: grpo_seed3") as error:
        learning.check_bases(runs)
    assert "base 1" not in str(error.value)
    # one base per index is fine; a base built now must be that one, and a run without a fingerprint is not mixed
    learning.check_bases({k: v for k, v in runs.items() if k != ("grpo", 3)})
    with pytest.raises(SystemExit, match=r"base 1: ccc: grpo_seed2; ddd: the base built now \(w/base1\)"):
        learning.check_bases({("grpo", 2): runs[("grpo", 2)]}, {1: {"id": "ddd"}}, Path("w"))
    with pytest.raises(SystemExit, match="no fingerprint recorded: grpo_seed5"):
        learning.check_bases({("grpo", 1): runs[("grpo", 1)], ("grpo", 5): _run("grpo", 5, 0, None)})


def _fake_benchmark(monkeypatch, tmp_path, fingerprint):
    """run_smoke and the curve stubbed; the base built is one with ``fingerprint``."""
    smokes = []

    def prepare_base(args, index=0):
        base = tmp_path / f"base{index}"
        base.mkdir(exist_ok=True)
        stamp = {"settings": {}, "imitation": {"steps": 98}, "fingerprint": {"id": fingerprint}}
        (base / "base.json").write_text(json.dumps(stamp))
        return base

    monkeypatch.setattr(learning, "prepare_base", prepare_base)
    monkeypatch.setattr(learning.smoke, "run_smoke", lambda recipe, run_dir, steps, **kw: smokes.append(run_dir.name))
    monkeypatch.setattr(learning.smoke, "logged_steps", lambda run_dir, steps: {})
    curve = [{"update": 0, "env_steps": 0.0, "success": 0.1}, {"update": 1, "env_steps": 640.0, "success": 0.3}]
    monkeypatch.setattr(learning, "curve_of", lambda m, seed, *a: {"method": m, "seed": seed, "curve": curve,
                                                                   "env_steps": 640.0, "credit": {}})  # fmt: skip
    monkeypatch.setattr(learning.learning_report, "write", lambda results, *a: {"runs": results, "table": ""})
    return smokes


def test_every_run_records_its_base_fingerprint_and_a_rebuilt_base_that_differs_trains_nothing(tmp_path, monkeypatch):
    """The reporter's case: base 0 rebuilt elsewhere is another base; the runs trained on it would have been
    averaged with the committed ones. Now the benchmark stops before it trains, naming both."""
    smokes = _fake_benchmark(monkeypatch, tmp_path, "aaa")
    out, work = str(tmp_path / "out"), str(tmp_path / "work")
    common = ["--methods", "grpo", "--bases", "1", "--out", out, "--work", work]
    learning.main(["--seeds", "1", *common])
    saved = json.loads((tmp_path / "out" / "runs" / "grpo_seed1.json").read_text())
    assert saved["base"]["fingerprint"] == {"id": "aaa"} and smokes == ["grpo_seed1"]
    _fake_benchmark(monkeypatch, tmp_path, "bbb")  # the same base settings, rebuilt into other weights
    smokes.clear()
    with pytest.raises(SystemExit, match=r"base 0: aaa: grpo_seed1; bbb: the base built now"):
        learning.main(["--seeds", "1,9", *common])
    assert smokes == [] and not (tmp_path / "out" / "runs" / "grpo_seed9.json").exists()


def test_report_only_names_a_mismatch_instead_of_averaging_it(tmp_path, monkeypatch):
    _fake_benchmark(monkeypatch, tmp_path, "aaa")
    runs = tmp_path / "out" / "runs"
    runs.mkdir(parents=True)
    for seed, fingerprint in ((1, "aaa"), (3, "bbb")):
        run = _run("grpo", seed, 0, fingerprint) | {"settings": learning.run_settings("grpo", learning.parse_args([]))}
        (runs / f"grpo_seed{seed}.json").write_text(json.dumps(run))
    argv = ["--report-only", "--methods", "grpo", "--seeds", "1,3", "--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit, match=r"base 0: aaa: grpo_seed1; bbb: grpo_seed3"):
        learning.main(argv + ["--work", str(tmp_path / "work")])


def test_the_report_says_how_far_the_start_alone_moves_each_readout():
    def run(method, seed, index, start, final):
        return _run(method, seed, index, f"b{index}", success=(start, final))

    runs = {
        "grpo": [run("grpo", 1, 0, 0.2, 0.4), run("grpo", 3, 0, 0.3, 0.5), run("grpo", 2, 1, 0.1, 0.2)],
        "prover_divergence": [
            run("prover_divergence", 1, 0, 0.2, 0.5),
            run("prover_divergence", 3, 0, 0.3, 0.6),
            run("prover_divergence", 2, 1, 0.1, 0.1),
        ],
    }
    spread = learning_report.analyse(runs, target=0.9)["bases"]
    assert spread["bases"]["0"]["seeds"] == [1, 3] and spread["bases"]["1"]["fingerprint"] == "b1"
    grpo = spread["methods"]["grpo"]["at_budget"]
    assert grpo["by_base"]["0"]["mean"] == pytest.approx(0.45) and grpo["between_bases"] == pytest.approx(0.25)
    assert grpo["within_base_sd"] == pytest.approx(0.0707, abs=1e-4)  # seeds 1 and 3: 0.4, 0.5
    gain = spread["methods"]["prover_divergence"]["minus_grpo"]
    assert gain["by_base"]["0"]["mean"] == pytest.approx(0.1) and gain["by_base"]["1"]["mean"] == pytest.approx(-0.1)
    report = {"analysis": {"bases": spread}}
    text = learning_report.render(report, "bases")
    assert "| prover_divergence | − GRPO at the budget | 0.100 ± 0.000 | -0.100 | 0.200 |" in text
    assert "base 0 (seeds 1, 3; b0; imitation 98 steps, replay 0.114)" in text
    one_base = {"grpo": [run("grpo", 1, 0, 0.2, 0.4)]}
    assert learning_report.analyse(one_base, target=0.9)["bases"] is None


def _committed(tmp_path, **base):
    args = learning.parse_args(["--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")])
    run = _run("grpo", 1, 0, "aaa", success=(0.25, 0.5)) | {"settings": learning.run_settings("grpo", args)}
    run["base"] |= base
    (tmp_path / "out" / "runs").mkdir(parents=True)
    (tmp_path / "out" / "runs" / "grpo_seed1.json").write_text(json.dumps(run))
    return run


def _rebuild(monkeypatch, tmp_path, steps=98, success=(0.25, 0.5), fingerprint="aaa"):
    """prepare_base and run_one stubbed: the rebuilt base and run; records what was trained."""
    trained = []

    def prepare_base(args, index=0):
        base = args.work / f"base{index}"
        base.mkdir(parents=True)
        fp = {"id": fingerprint, "weights": fingerprint * 2, "tokenizer": "t"}
        stamp = {"settings": {}, "imitation": {"steps": steps, "replay_probability": 0.114}, "fingerprint": fp}
        (base / "base.json").write_text(json.dumps(stamp))
        return base

    def run_one(method, seed, args):
        trained.append((method, seed, args.out))
        return _run(method, seed, 0, fingerprint, success=success)

    monkeypatch.setattr(learning, "prepare_base", prepare_base)
    monkeypatch.setattr(learning, "run_one", run_one)
    return trained


def test_verify_rebuilds_a_committed_run_and_says_it_matches(tmp_path, monkeypatch, capsys):
    _committed(tmp_path)
    trained = _rebuild(monkeypatch, tmp_path)
    argv = ["--verify", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")]
    report = learning.main(argv)
    assert report["match"] and report["first_difference"] is None
    assert trained == [("grpo", 1, tmp_path / "work" / "verify" / "out")]  # never into the committed folder
    assert "MATCH: base 0 and grpo_seed1 rebuilt equal to the committed file" in capsys.readouterr().out
    written = json.loads((tmp_path / "work" / "verify" / "verify.json").read_text())
    assert (
        written["match"] and written["command"] == "python benchmarks/learning.py --verify --out <path> --work <path>"
    )


@pytest.mark.parametrize(
    ("rebuilt", "difference", "trains"),
    [
        ({"success": (0.25, 0.51)}, "validation 1 (update 1) success: 0.51 rebuilt, 0.5 committed", True),
        ({"fingerprint": "bbb"}, "base 0 weights sha256: bbbbbb rebuilt, aaaaaa committed", False),
        ({"steps": 90}, "base 0 imitation steps: 90 rebuilt, 98 committed", False),
    ],
)
def test_verify_names_the_first_difference(tmp_path, monkeypatch, capsys, rebuilt, difference, trains):
    _committed(tmp_path)
    trained = _rebuild(monkeypatch, tmp_path, **rebuilt)
    with pytest.raises(SystemExit) as code:
        learning.main(["--verify", "grpo_seed1", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")])
    assert code.value.code == 1 and f"MISMATCH: first difference: {difference}" in capsys.readouterr().out
    assert bool(trained) == trains  # a base that differs is the answer: its run is not trained


def test_verify_of_a_run_without_a_fingerprint_compares_the_imitation_record(tmp_path, monkeypatch, capsys):
    run = _committed(tmp_path)
    del run["base"]["fingerprint"]
    (tmp_path / "out" / "runs" / "grpo_seed1.json").write_text(json.dumps(run))
    _rebuild(monkeypatch, tmp_path)
    learning.main(["--verify", "--verify-base-only", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "w")])
    out = capsys.readouterr().out
    assert "committed: none recorded" in out and "MATCH: base 0 rebuilt equal" in out


def test_a_base_can_be_built_on_a_pinned_cpu_code_path(tmp_path, monkeypatch):
    """torch's AVX512 and AVX2 kernels sum in other orders (base 0's first update differs in its bits), so a base is
    the same on two machines only on one code path: ``--imitate-cpu-capability avx2`` runs the base's commands with
    it pinned and is part of the base's settings; the machine's own path (the committed bases') leaves the settings
    as they were."""
    calls = []

    def run(cmd, log):
        calls.append(cmd)
        if "prover_verl.tiny_model" in cmd:
            Path(cmd[cmd.index("--out") + 1]).mkdir(parents=True)
        return '{"steps": 1, "replay_probability": 0.1}\n'

    monkeypatch.setattr(learning, "_run", run)
    pinned = learning.parse_args(["--work", str(tmp_path / "a"), "--imitate-cpu-capability", "avx2"])
    learning.prepare_base(pinned)
    assert len(calls) == 3 and all(cmd[:2] == ["env", "ATEN_CPU_CAPABILITY=avx2"] for cmd in calls)
    assert "MKL_CBWR=AVX2" in calls[-1] and learning.base_settings(pinned, 0)["imitate_cpu_capability"] == "avx2"
    calls.clear()
    native = learning.parse_args(["--work", str(tmp_path / "b")])
    learning.prepare_base(native)
    assert all(cmd[0] != "env" for cmd in calls) and "imitate_cpu_capability" not in learning.base_settings(native, 0)
    committed = json.loads(
        (learning.ROOT / "benchmarks/results/learning/keydoor_hard/runs/grpo_seed1.json").read_text()
    )
    assert committed["settings"]["base"] == learning.base_settings(native, 0)


def test_the_imitations_record_names_a_pinned_code_path(monkeypatch):
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    assert imitate.numerics(1)["ATEN_CPU_CAPABILITY"] == "avx2"


def test_verify_can_check_the_first_updates_of_a_run_on_the_base_it_rebuilt_before(tmp_path, monkeypatch, capsys):
    """A run is a quarter hour on 2 cores: ``--verify-updates 1`` trains its first update only and compares the
    validations up to it (a later one that would differ is not read); ``--verify-reuse-base`` keeps the base an
    earlier ``--verify`` rebuilt in that ``--work``."""
    committed = _committed(tmp_path)
    committed["curve"].append({"update": 2, "env_steps": 1280.0, "success": 0.75})
    (tmp_path / "out" / "runs" / "grpo_seed1.json").write_text(json.dumps(committed))
    steps = []
    _rebuild(monkeypatch, tmp_path)
    run_one = learning.run_one
    monkeypatch.setattr(learning, "run_one", lambda m, s, args: steps.append(args.steps) or run_one(m, s, args))
    argv = ["--verify", "--verify-updates", "1", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")]
    report = learning.main(argv)
    assert report["match"] and steps == [1] and report["checked"] == "base 0 and grpo_seed1 (its first 1 update)"
    base = tmp_path / "work" / "verify" / "base0" / "base.json"
    monkeypatch.setattr(learning, "prepare_base", lambda args, index=0: base.parent)  # the one rebuilt above
    assert learning.main([*argv, "--verify-reuse-base"])["match"] and "reusing the base" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="--verify-updates 7"):
        learning.main([*argv[:2], "7", *argv[3:]])
