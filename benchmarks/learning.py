"""Learning in verl's real loop: GRPO, ProVer and GiGPO trained by the recipes' own program on KeyDoor, on CPU.

Every run is the env's recipe with ``--cpu-smoke`` (``recipes/<env>/run_<method>_qwen3.5_2b.sh``: verl's v1
trainer, the CPU replica, this project's agent loop, judge, verifier and estimators) with a tiny model, all from
one start: the tiny model with a tokenizer that knows the env's words, imitated on the expert's episodes of some
train tasks (``prover_verl.imitate``) until it replays them with a set probability. Success is verl's validation
(by default 2 episodes a held-out task sampled at temperature 1, ``mean@2``) before training and every
``--test-freq`` steps; env steps count each step's own episodes plus ProVer's verifier continuations. The default
KeyDoor is the single-door variant (every door opens with red) started from the six-door expert's imitation: the
tiny model cannot learn to copy the note's colour, so six doors teach it nothing in this budget (docs/method.md).

    python benchmarks/learning.py                      # default: ~1 h on 2 cores, see docs/method.md
    python benchmarks/learning.py --methods all        # every method below
    python benchmarks/learning.py --env-kwargs '{}' --val-samples 1 --steps 10 --test-freq 5
                                                       # six doors, greedy validation: nothing learned (docs)
    python benchmarks/learning.py --env searchqa --methods grpo,prover_heuristic --group 4 --train-tasks 32 \
        --val-tasks 32 --val-split train --imitate-episodes 32 --imitate-replay 0.5 --lr 1e-4
                                                       # a real env, ~15 min: no rise (docs/method.md)

It prints the demo's table (:mod:`prover_verl.demo.report`) and writes ``results.json``, ``results.md`` and
``success_vs_env_steps.png`` under ``--out``. A run whose ``run.json`` exists under ``--out`` is read back, not run
again, so an interrupted benchmark resumes; every run is seeded (``SEED`` and ``rollout.full_determinism``).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prover_verl.cpu import smoke  # noqa: E402
from prover_verl.demo.report import write_report  # noqa: E402

# name -> (estimator, judge type, judge accuracy); the noisy judge is the oracle that points at KeyDoor's pivotal
# turn with probability `accuracy`, else at a random wrong segment (prover_verl/judge/noisy.py)
METHODS: dict[str, tuple[str, str, float | None]] = {
    "grpo": ("grpo", "heuristic", None),
    "prover_oracle1.0": ("prover", "noisy", 1.0),
    "prover_oracle0.5": ("prover", "noisy", 0.5),
    "prover_oracle0.0": ("prover", "noisy", 0.0),
    "prover_heuristic": ("prover", "heuristic", None),
    "gigpo": ("gigpo", "heuristic", None),
}
DEFAULT_METHODS = "grpo,prover_oracle1.0"
HEADER = (
    "Learning in verl's real loop on CPU (benchmarks/learning.py): the recipes' program (recipes/common.sh "
    "--cpu-smoke) with a tiny model imitated to a partial policy; success is verl's validation on the {tasks} "
    "({how}); env steps count each step's episodes plus ProVer's verifier continuations."
)


def _run(cmd: list[str], log: Path) -> str:
    """Run ``cmd`` from the repository root, its stderr to ``log``; return its stdout."""
    with log.open("a") as err:
        err.write(f"$ {' '.join(cmd)}\n")
        err.flush()
        done = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True)
    if done.returncode:
        raise RuntimeError(f"{cmd[:4]} exited with {done.returncode}: see {log}")
    return done.stdout


def prepare_base(args: argparse.Namespace) -> Path:
    """The shared start of every run: tiny model, data, imitation (made once; reused while its settings hold)."""
    base = args.out / "base"
    settings = {
        "env": args.env,
        "env_kwargs": args.env_kwargs,
        "train_tasks": args.train_tasks,
        "val_tasks": args.val_tasks,
        "imitate_episodes": args.imitate_episodes,
        "imitate_replay": args.imitate_replay,
        "imitate_seed": args.imitate_seed,
        "imitate_env_kwargs": args.imitate_env_kwargs,
        "val_split": args.val_split,
    }
    stamp = base / "base.json"
    if stamp.exists() and json.loads(stamp.read_text())["settings"] == settings:
        return base
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    log = base / "prepare.log"
    py = sys.executable
    _run([py, "-m", "prover_verl.tiny_model", "--out", str(base / "model"), "--corpus-env", args.env], log)
    _run(
        [py, "-m", "prover_verl.data", "--env", args.env, "--out", str(base / "data"), "--env-kwargs", args.env_kwargs]
        + ["--max-train", str(args.train_tasks), "--max-val", str(args.val_tasks)]
        + (["--val-split", args.val_split] if args.val_split else []),
        log,
    )
    start = time.perf_counter()
    imitation = _run(
        [py, "-m", "prover_verl.imitate", "--model", str(base / "model"), "--env", args.env]
        + ["--data-dir", str(base / "data"), "--env-kwargs", args.imitate_env_kwargs or args.env_kwargs]
        + ["--target-replay", str(args.imitate_replay), "--max-episodes", str(args.imitate_episodes)]
        + ["--seed", str(args.imitate_seed)],
        log,
    )
    imitation = json.loads(imitation.strip().splitlines()[-1])
    # cpu_smoke.sh takes a model with imitation.json as imitated already
    (base / "model" / "imitation.json").write_text(json.dumps(imitation) + "\n")
    stamp.write_text(json.dumps({"settings": settings, "imitation": imitation, "seconds": time.perf_counter() - start}))
    return base


def overrides(method: str, args: argparse.Namespace) -> list[str]:
    """The hydra overrides of one run beyond the smoke recipe's own."""
    _, _, accuracy = METHODS[method]
    extra = [
        "trainer.val_before_train=true",
        f"trainer.test_freq={args.test_freq}",
        f"trainer.save_freq={args.steps}",  # the final weights, for recipes/eval/run_eval.sh
        "actor_rollout_ref.rollout.full_determinism=true",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={args.batch // args.mini_batches}",
        f"actor_rollout_ref.actor.loss_agg_mode={args.loss_agg_mode}",
    ]
    if args.val_samples > 1:  # sampled like training (temperature 1), n episodes a task: success moves smoothly
        extra += [
            "actor_rollout_ref.rollout.val_kwargs.do_sample=true",
            "actor_rollout_ref.rollout.val_kwargs.temperature=1.0",
            f"actor_rollout_ref.rollout.val_kwargs.n={args.val_samples}",
        ]
    if accuracy is not None:
        extra.append(f"algorithm.prover.judge.accuracy={accuracy}")
    return extra


def run_one(method: str, seed: int, base: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Train one method with one seed through its recipe; return its curve in the demo report's format."""
    run_dir = args.out / "runs" / f"{method}_seed{seed}"
    done = run_dir / "run.json"
    if done.exists():
        return json.loads(done.read_text())
    shutil.rmtree(run_dir, ignore_errors=True)
    estimator, judge, _ = METHODS[method]
    start = time.perf_counter()
    smoke.run_smoke(
        ROOT / "recipes" / args.env / f"run_{estimator}_qwen3.5_2b.sh",  # --cpu-smoke puts the tiny model in
        run_dir,
        args.steps,
        assets=base,
        overrides=overrides(method, args),
        ENV_KWARGS=args.env_kwargs,
        SEED=str(seed),
        SMOKE_BATCH=str(args.batch),
        SMOKE_GROUP=str(args.group),
        SMOKE_LR=str(args.lr),
        SMOKE_K=str(args.k),
        SMOKE_JUDGE=judge,
        SMOKE_GROUP_LOG="",
        N_GPUS=str(args.ranks),
        AGENT_WORKERS=str(args.ranks),
        ENV_WORKERS=str(args.ranks),
    )
    run = curve_of(method, seed, smoke.logged_steps(run_dir, args.steps), args.env)
    run["wall_s"] = time.perf_counter() - start
    done.write_text(json.dumps(run))
    return run


def val_success(data: dict[str, float], env_name: str) -> float | None:
    """A step's validation success: verl's val-core reward mean (``mean@n`` over a task's n episodes), averaged over
    the env's data sources unweighted (Search-QA logs one per question set, as the paper's table averages them); None
    if the step did not validate."""
    prefix = f"val-core/{env_name}/"
    values = [v for k, v in data.items() if k.startswith(prefix) and re.search(r"/reward/mean@\d+$", k)]
    return float(np.mean(values)) if values else None


def curve_of(method: str, seed: int, steps: dict[int, dict[str, float]], env_name: str) -> dict[str, Any]:
    """One run's learning curve and totals from verl's metrics per step (:func:`prover_verl.cpu.smoke.logged_steps`)."""
    curve, main, extra = [], 0.0, 0.0
    counts = dict.fromkeys(("pivot_known", "pivot_hit", "verified", "positive", "estimate", "credit"), 0.0)
    token_fracs = []
    for step in sorted(steps):
        data = steps[step]
        own = data.get("rollout/env_steps", 0.0)
        main += own
        extra += own * data.get("prover/verify_env_steps_frac", 0.0)
        for key in ("pivot_known", "pivot_hit", "verified", "positive"):
            counts[key] += data.get(f"prover/{key}", 0.0)
        # the logged means are per verified / per credited segment: weight them back into sums
        counts["estimate"] += data.get("prover/mean_estimate", 0.0) * data.get("prover/verified", 0.0)
        counts["credit"] += data.get("prover/mean_credit", 0.0) * data.get("prover/positive", 0.0)
        if "prover/credited_token_frac" in data:
            token_fracs.append(data["prover/credited_token_frac"])
        success = val_success(data, env_name)
        if success is not None:
            curve.append({"update": step, "env_steps": main + extra, "success": success, "greedy_success": success})
    if len(curve) < 2:
        raise RuntimeError(f"{method} seed {seed}: fewer than 2 validations (val-core/{env_name}/...) logged")

    def ratio(num: str, den: str) -> float | None:
        return counts[num] / counts[den] if counts[den] else None

    return {
        "kind": METHODS[method][0],
        "seed": seed,
        "curve": curve,
        "env_steps": main + extra,
        "main_steps": main,
        "extra_steps": extra,
        "credit": {
            "judge_accuracy": ratio("pivot_hit", "pivot_known"),
            "verified_positive_rate": ratio("positive", "verified"),
            "mean_credit": ratio("credit", "positive"),
            "mean_estimate": ratio("estimate", "verified"),
            "credited_token_frac": float(np.mean(token_fracs)) if token_fracs else None,
        },
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings, env-dependent defaults resolved, ``methods`` and ``seeds`` as lists."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="keydoor")
    parser.add_argument(
        "--env-kwargs",
        default=None,
        help='env kwargs (JSON) of the train and held-out tasks; default {"doors": 1} on keydoor (one door colour: '
        "the tiny model cannot learn to read the note's colour, docs/method.md), else {}",
    )
    parser.add_argument("--methods", default=DEFAULT_METHODS, help=f"comma-separated of {', '.join(METHODS)}, or all")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--steps", type=int, default=6, help="training steps a run")
    parser.add_argument("--test-freq", type=int, default=3, help="validate every N steps (and before training)")
    parser.add_argument("--batch", type=int, default=8, help="tasks a step")
    parser.add_argument("--group", type=int, default=8, help="episodes a task")
    parser.add_argument("--mini-batches", type=int, default=4, help="PPO mini-batches a step")
    parser.add_argument("--loss-agg-mode", default="token-mean")
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--k", type=int, default=2, help="ProVer continuations per fork point")
    parser.add_argument("--ranks", type=int, default=1, help="FSDP ranks = replicas = agent / env workers")
    parser.add_argument("--train-tasks", type=int, default=64)
    parser.add_argument("--val-tasks", type=int, default=64)
    parser.add_argument("--imitate-episodes", type=int, default=64)
    parser.add_argument("--imitate-replay", type=float, default=0.1)
    parser.add_argument("--imitate-seed", type=int, default=0)
    parser.add_argument(
        "--imitate-env-kwargs",
        default=None,
        help="env kwargs of the expert episodes imitated, on the train tasks' ids; default {} on keydoor (the "
        "six-door expert: a start that knows the rooms but not the single-door variant's key), else --env-kwargs",
    )
    parser.add_argument(
        "--val-samples",
        type=int,
        default=2,
        help="episodes a held-out task at each validation: 1 greedy, n > 1 sampled at temperature 1 (success moves "
        "smoothly instead of flipping with the greedy choice)",
    )
    parser.add_argument(
        "--val-split",
        default=None,
        help="the split validated on (default the env's held-out split); the train split measures whether the "
        "policy improves on the tasks it trains on, where a tiny model cannot generalise (Search-QA)",
    )
    parser.add_argument("--target", type=float, default=0.5, help="success rate for 'env steps to target'")
    parser.add_argument("--out", type=Path, default=Path("/tmp/prover_learning"))
    args = parser.parse_args(argv)
    if args.env_kwargs is None:
        args.env_kwargs = '{"doors": 1}' if args.env == "keydoor" else "{}"
    if args.imitate_env_kwargs is None:
        args.imitate_env_kwargs = "{}" if args.env == "keydoor" else ""
    methods = list(METHODS) if args.methods == "all" else args.methods.split(",")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        parser.error(f"--methods: unknown {unknown}; choose from {list(METHODS)} or all")
    if args.val_samples < 1:
        parser.error(f"--val-samples {args.val_samples} must be at least 1")
    if args.batch % args.mini_batches:
        parser.error(f"--batch {args.batch} must be a multiple of --mini-batches {args.mini_batches}")
    args.methods, args.seeds = methods, [int(s) for s in args.seeds.split(",")]
    args.out = args.out.resolve()
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    start = time.perf_counter()
    base = prepare_base(args)
    results: dict[str, list[dict[str, Any]]] = {}
    for method in args.methods:
        for seed in args.seeds:
            print(f"[learning] {method} seed {seed} starts ({time.perf_counter() - start:.0f} s)", flush=True)
            results.setdefault(method, []).append(run_one(method, seed, base, args))
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    settings["base"] = json.loads((base / "base.json").read_text())
    how = "greedy" if args.val_samples == 1 else f"sampled, mean of {args.val_samples} episodes a task"
    tasks = "held-out tasks" if args.val_split is None else f"first {args.val_tasks} {args.val_split} tasks"
    report = write_report(
        results,
        args.out,
        settings,
        args.target,
        header=HEADER.format(how=how, tasks=tasks),
        title=f"{args.env}: learning in verl's real loop on CPU (tiny model)",
        success_note=f"Success: validation on the {tasks} ({how}), at the last validation",
        ylabel=f"success rate ({tasks}, {how})",
    )
    print(report["table"])
    print(f"[learning] {time.perf_counter() - start:.0f} s; wrote {args.out}/results.json, results.md, .png")
    return report


if __name__ == "__main__":
    main()
