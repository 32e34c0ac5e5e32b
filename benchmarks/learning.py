"""Learning in verl's real loop at equal cost: GRPO, a GRPO control that spends ProVer's env steps, and ProVer with
a dial of judges, trained by the recipes' own program on KeyDoor, on CPU.

Every run is the env's recipe with ``--cpu-smoke`` (``recipes/<env>/run_<method>_qwen3.5_2b.sh``: verl's v1
trainer, the CPU replica, this project's agent loop, judge, verifier and estimators) with a tiny model, started
from an imitated base: the tiny model with a tokenizer that knows the env's words, imitated on the expert's
episodes of some train tasks (``prover_verl.imitate``) until it replays them with a set probability. ``--bases``
such bases start from the tiny model initialised with different seeds (the full-batch imitation draws nothing) and
seed ``s`` starts from base ``(s - 1) % bases``, so the start's
variance is in the error bars; paired differences pair runs of the same seed (same base, same validation draws).

The default task is KeyDoor's hard variant (``{"doors": 2, "note_at_keys": true, "early_pivot": true}``): the
right key depends on a note the agent reads (red or blue), the decision is the second of ten rooms, and the outcome
comes eight filler rooms later. Success is verl's validation on 64 held-out tasks after every update, 4 episodes a
task sampled at temperature 1 (``mean@4``, 256 episodes: binomial sd <= 0.032). Env steps count each update's own
episodes plus ProVer's verifier continuations.

Methods: ``grpo``; ``grpo_control``, GRPO with ``--control-group`` episodes a task (sized to spend what ProVer
spends); ProVer with the noisy *oracle* judge at accuracy 1.0 / 0.5 / 0.25 / 0.0 (it reads the env's hidden pivot:
a dial, not a judge a user has); ProVer with the ``heuristic`` judge (first turn where the actions differ), the
``divergence`` judge (the turn after which the observations differ for good) and the ``judge_model`` (a tiny judge
model trained on the env's pairs, ``prover_verl.judge_model``, served by ``recipes/judge/serve_judge.sh`` and asked
through ``judge.type=openai``), judges a user can run.

    python benchmarks/learning.py                  # the full benchmark (docs/method.md states its time)
    python benchmarks/learning.py --quick          # the headline at lower fidelity, <= 1 h (see --quick)
    python benchmarks/learning.py --env searchqa --methods grpo,prover_heuristic --group 4 --train-tasks 32 \
        --val-tasks 32 --val-split train --imitate-episodes 32 --imitate-replay 0.5 --lr 1e-4 --val-samples 2 \
        --test-freq 3 --bases 1 --seeds 1,2,3 --out benchmarks/results/learning/searchqa
                                                   # a real env, ~15 min: no rise (docs/method.md)

The report (``benchmarks/learning_report.py``) reads every method at the same env-step budget (GRPO's median
final env steps): success there, mean success over ``[0, budget]``, env steps to ``--target``, each per seed with
its paired t-test against GRPO and against the control, and the judges' break-even hit rate. ``--out`` (committed
for the documented runs, small files only) receives ``runs/<method>_seed<s>.json`` as each run ends, then
``results.json`` (command, commit, settings, per-seed values, analysis), ``results.md`` and a PNG; a run whose
JSON is there is read back, not run again, so the benchmark resumes and can be run in parts (``--methods``,
``--seeds``); a run made with other settings is an error naming them, never mixed in. Models, data and logs go to
``--work`` (``/tmp/prover_learning``; quick's apart, ``/tmp/prover_learning_quick``). ``--jobs 2`` trains two runs
at once (one run keeps about 1.5 of 2 cores busy).

Every base is fingerprinted (:func:`base_fingerprint`: sha256 of its weights and of its tokenizer) and every run
records its base's fingerprint and imitation (steps, replay probability, the arithmetic it ran on): runs of one base
index with different fingerprints, or a base rebuilt into other weights than the runs already in ``--out`` started
from, are refused before anything trains, and ``--report-only`` names such a mix instead of averaging it. The
imitation runs on one torch thread with deterministic algorithms (``prover_verl.imitate``); a machine whose CPU
takes another code path may still compute other bits, and at the imitation's learning rate a bit becomes another
base. ``--verify`` checks that on the machine at hand:

    python benchmarks/learning.py --verify                    # rebuild base 0 and GRPO seed 1, compare (~30 min)
    python benchmarks/learning.py --verify --verify-base-only # base 0 only (~5-15 min)

rebuilds the run (and its base) under ``--work``/verify, compares the base's fingerprint and imitation record and
then every validation of the curve with the committed file, and prints MATCH or MISMATCH with the first differing
quantity (exit status 1). The results report how far the start alone moves each readout (``bases``).

``--quick`` runs the headline (GRPO, the control, the oracle at 1.0 and the divergence judge; seeds 1,2,3 unless
``--seeds`` says otherwise) at lower fidelity, to ``benchmarks/results/learning/keydoor_hard_quick``: it validates
before training and after the last update only, on 2 episodes a held-out task (128 episodes: sd <= 0.044), every
method but GRPO stops at the last update GRPO's budget can hold (``--trim-to-budget``), and two runs train at once.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import learning_report  # noqa: E402
from benchmarks.provenance import code_commit as _commit  # noqa: E402
from benchmarks.provenance import command_line  # noqa: E402
from prover_verl.cpu import smoke  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Method:
    """One method of the benchmark.

    Attributes:
        estimator: verl's ``algorithm.adv_estimator`` (the recipe ``run_<estimator>_qwen3.5_2b.sh``).
        judge: ``algorithm.prover.judge.type`` (ProVer only).
        accuracy: The noisy oracle judge's accuracy (None: not that judge).
        control: GRPO with ``--control-group`` episodes a task, the control that spends ProVer's env steps.
        served: The judge is the trained judge model (``prover_verl.judge_model``), served as users serve judges
            (``recipes/judge/serve_judge.sh``) and asked through ``judge.type=openai``.
    """

    estimator: str
    judge: str = "heuristic"
    accuracy: float | None = None
    control: bool = False
    served: bool = False

    @property
    def oracle(self) -> bool:
        """Whether the judge reads the env's hidden pivot (not a judge a user can run)."""
        return self.accuracy is not None


METHODS: dict[str, Method] = {
    "grpo": Method("grpo"),
    "grpo_control": Method("grpo", control=True),
    "prover_oracle1.0": Method("prover", "noisy", 1.0),
    "prover_oracle0.5": Method("prover", "noisy", 0.5),
    "prover_oracle0.25": Method("prover", "noisy", 0.25),
    "prover_oracle0.0": Method("prover", "noisy", 0.0),
    "prover_heuristic": Method("prover", "heuristic"),
    "prover_divergence": Method("prover", "divergence"),
    "prover_judge_model": Method("prover", "openai", served=True),
    "gigpo": Method("gigpo"),
}
DEFAULT_METHODS = [m for m in METHODS if m != "gigpo"]
JUDGE_TRAIN_STEPS = 600  # prover_verl.judge_model.train's default (docs/method.md, "A judge model that answers")
# the comparison a reviewer asks for first, run with the most seeds: GRPO, its equal-cost control, the best judge
# there is (the exact oracle) and the best judge a user can run
HEADLINE = ["grpo", "grpo_control", "prover_oracle1.0", "prover_divergence"]
HARD_KEYDOOR = '{"doors": 2, "note_at_keys": true, "early_pivot": true}'


def _run(cmd: list[str], log: Path) -> str:
    """Run ``cmd`` from the repository root, its stderr to ``log``; return its stdout."""
    with log.open("a") as err:
        err.write(f"$ {' '.join(cmd)}\n")
        err.flush()
        done = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True)
    if done.returncode:
        raise RuntimeError(f"{cmd[:4]} exited with {done.returncode}: see {log}")
    return done.stdout


def base_settings(args: argparse.Namespace, index: int) -> dict[str, Any]:
    """Everything that shapes base ``index`` (a base is rebuilt when any of it changes)."""
    return {
        "env": args.env,
        "env_kwargs": args.env_kwargs,
        "train_tasks": args.train_tasks,
        "val_tasks": args.val_tasks,
        "imitate_episodes": args.imitate_episodes,
        "imitate_replay": args.imitate_replay,
        "imitate_seed": args.imitate_seed + index,
        # the imitation is full-batch and draws nothing: bases differ only by the tiny model's initial weights
        "init_seed": args.imitate_seed + index,
        "imitate_env_kwargs": args.imitate_env_kwargs,
        "val_split": args.val_split,
    } | ({"imitate_cpu_capability": args.imitate_cpu_capability} if args.imitate_cpu_capability else {})


# what pins a CPU code path for the base's arithmetic (--imitate-cpu-capability): torch's own kernels (ATen's
# dispatch), MKL's (its conditional numerical reproducibility branch) and oneDNN's; set before torch starts
CPU_PINS = {"avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}}


def _pinned(args: argparse.Namespace) -> list[str]:
    """The ``env`` prefix that runs a base's commands on ``--imitate-cpu-capability``'s code path (none: the
    machine's own)."""
    pins = CPU_PINS.get(args.imitate_cpu_capability or "", {})
    return ["env", *(f"{k}={v}" for k, v in pins.items())] if pins else []


# the files of a model directory that make its tokenizer (those present are hashed, in this order)
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "vocab.json",
    "merges.txt",
    "special_tokens_map.json",
    "added_tokens.json",
)


def base_fingerprint(model_dir: Path) -> dict[str, str] | None:
    """A base's identity: the sha256 of its weights (every tensor of its safetensors files by name: name, dtype,
    shape, bytes) and of its tokenizer (:data:`TOKENIZER_FILES`, name and bytes), and ``id``, 12 hex digits of both
    together. None where ``model_dir`` holds no weights."""
    from safetensors import safe_open

    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        return None
    weights = hashlib.sha256()
    for file in files:
        with safe_open(file, framework="np") as f:
            for name in sorted(f.keys()):
                tensor = f.get_tensor(name)
                weights.update(f"{name}|{tensor.dtype}|{list(tensor.shape)}|".encode())
                weights.update(np.ascontiguousarray(tensor).tobytes())
    tokenizer = hashlib.sha256()
    for name in TOKENIZER_FILES:
        if (Path(model_dir) / name).exists():
            tokenizer.update(f"{name}|".encode() + (Path(model_dir) / name).read_bytes())
    both = hashlib.sha256(f"{weights.hexdigest()}|{tokenizer.hexdigest()}".encode()).hexdigest()
    return {"id": both[:12], "weights": weights.hexdigest(), "tokenizer": tokenizer.hexdigest()}


def prepare_base(args: argparse.Namespace, index: int = 0) -> Path:
    """Base ``index``: tiny model, data, imitation with seed ``--imitate-seed + index`` (made once; reused while its
    settings hold); ``base.json`` keeps its settings, the imitation's record and its :func:`base_fingerprint`."""
    base = args.work / f"base{index}"
    settings = base_settings(args, index)
    stamp = base / "base.json"
    if stamp.exists() and json.loads(stamp.read_text())["settings"] == settings:
        record = json.loads(stamp.read_text())
        if "fingerprint" not in record and (base / "model").exists():  # a base made before fingerprints
            record["fingerprint"] = base_fingerprint(base / "model")
            stamp.write_text(json.dumps(record))
        return base
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    log = base / "prepare.log"
    py = [*_pinned(args), sys.executable]
    print(f"[learning] imitating base {index} (seed {settings['imitate_seed']})", flush=True)
    model = [*py, "-m", "prover_verl.tiny_model", "--out", str(base / "model"), "--corpus-env", args.env]
    _run(model + ["--seed", str(settings["init_seed"])], log)
    _run(
        [*py, "-m", "prover_verl.data", "--env", args.env, "--out", str(base / "data"), "--env-kwargs", args.env_kwargs]
        + ["--max-train", str(args.train_tasks), "--max-val", str(args.val_tasks)]
        + (["--val-split", args.val_split] if args.val_split else []),
        log,
    )
    start = time.perf_counter()
    imitation = _run(
        [*py, "-m", "prover_verl.imitate", "--model", str(base / "model"), "--env", args.env]
        + ["--data-dir", str(base / "data"), "--env-kwargs", args.imitate_env_kwargs or args.env_kwargs]
        + ["--target-replay", str(args.imitate_replay), "--max-episodes", str(args.imitate_episodes)]
        + ["--seed", str(settings["imitate_seed"]), "--trace"],
        log,
    )
    imitation = json.loads(imitation.strip().splitlines()[-1])
    # cpu_smoke.sh takes a model with imitation.json as imitated already
    (base / "model" / "imitation.json").write_text(json.dumps(imitation) + "\n")
    record = {"settings": settings, "imitation": imitation, "seconds": time.perf_counter() - start}
    stamp.write_text(json.dumps(record | {"fingerprint": base_fingerprint(base / "model")}))
    return base


def prepare_judge_model(args: argparse.Namespace) -> Path:
    """The judge model for ``--env-kwargs``, trained once on the env's train split (reused while its settings hold);
    its held-out table (``prover_verl.judge_model.train --results``) is kept beside the runs, ``judge_model.json``."""
    out = args.work / "judge_model"
    settings = {"env": args.env, "env_kwargs": args.env_kwargs, "steps": args.judge_steps}
    stamp = out / "judge.json"
    if not stamp.exists() or json.loads(stamp.read_text())["settings"] != settings:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        print(f"[learning] training the judge model ({args.judge_steps} steps)", flush=True)
        _run(
            [sys.executable, "-m", "prover_verl.judge_model.train", "--out", str(out), "--env", args.env]
            + ["--env-kwargs", args.env_kwargs, "--steps", str(args.judge_steps)]
            + ["--results", str(out / "held_out.json")],
            args.work / "judge_model.log",
        )
        held_out = json.loads((out / "held_out.json").read_text())["held_out"]["overall"]
        stamp.write_text(json.dumps({"settings": settings, "held_out": held_out}))
    args.out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(out / "held_out.json", args.out / "judge_model.json")
    return out


def run_steps(method: str, args: argparse.Namespace) -> int:
    """Updates ``method`` trains: ``--steps``, or with ``--trim-to-budget`` (every method but GRPO) the updates that
    fit GRPO's budget at the control's size, ``steps x group / control_group`` (the control is sized to what ProVer's
    verifier spends), since a run is read at its last validation within the budget and later updates are not read."""
    if not args.trim_to_budget or method == "grpo":
        return args.steps
    return max(1, args.steps * args.group // args.control_group)


def run_settings(method: str, args: argparse.Namespace) -> dict[str, Any]:
    """Everything that shapes one run of ``method`` besides its seed (a run made with other settings is not read
    back as this one)."""
    keys = ("env", "env_kwargs", "test_freq", "batch", "mini_batches", "loss_agg_mode", "lr", "k", "ranks")
    keys += ("val_samples", "bases")
    spec = METHODS[method]
    return {
        **{k: getattr(args, k) for k in keys},
        "steps": run_steps(method, args),
        "group": args.control_group if spec.control else args.group,
        "judge_steps": args.judge_steps if spec.served else None,
        "base": base_settings(args, 0),  # the family: base i is seeded --imitate-seed + i
    }


def overrides(method: str, args: argparse.Namespace) -> list[str]:
    """The hydra overrides of one run beyond the smoke recipe's own."""
    steps = run_steps(method, args)
    extra = [
        "trainer.val_before_train=true",
        f"trainer.test_freq={min(args.test_freq, steps)}",
        f"trainer.save_freq={steps}",  # the final weights, for recipes/eval/run_eval.sh
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
    accuracy = METHODS[method].accuracy
    if accuracy is not None:
        extra.append(f"algorithm.prover.judge.accuracy={accuracy}")
    return extra


def run_one(method: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """Train one method with one seed through its recipe; return its curve (kept in ``--out``/runs)."""
    done = args.out / "runs" / f"{method}_seed{seed}.json"
    settings = run_settings(method, args)
    if done.exists():
        run = json.loads(done.read_text())
        if run.get("settings") != settings:
            old = run.get("settings") or {}
            keys = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
            raise SystemExit(
                f"{done} was trained with other settings ({', '.join(keys)}: {[old.get(k) for k in keys]} there, "
                f"{[settings.get(k) for k in keys]} now): use another --out, or delete it to train it again"
            )
        return run
    spec = METHODS[method]
    steps = settings["steps"]
    base_index = (seed - 1) % args.bases
    base = prepare_base(args, base_index)
    run_dir = args.work / "runs" / f"{method}_seed{seed}"
    shutil.rmtree(run_dir, ignore_errors=True)
    group = args.control_group if spec.control else args.group
    start = time.perf_counter()
    with contextlib.ExitStack() as stack:
        judge = []
        if spec.served:  # the served judge lives as long as the run: its overrides point the judge at it
            from benchmarks.judge_model_loop import served_judge

            judge = stack.enter_context(
                served_judge(prepare_judge_model(args), run_dir.parent / f"{run_dir.name}_judge")
            )
        smoke.run_smoke(
            ROOT / "recipes" / args.env / f"run_{spec.estimator}_qwen3.5_2b.sh",  # --cpu-smoke puts the tiny model in
            run_dir,
            steps,
            assets=base,
            overrides=[*overrides(method, args), *judge],
            ENV_KWARGS=args.env_kwargs,
            SEED=str(seed),
            SMOKE_BATCH=str(args.batch),
            SMOKE_GROUP=str(group),
            SMOKE_LR=str(args.lr),
            SMOKE_K=str(args.k),
            SMOKE_JUDGE="heuristic" if spec.served else spec.judge,  # the served judge's overrides win
            SMOKE_GROUP_LOG="",
            N_GPUS=str(args.ranks),
            AGENT_WORKERS=str(args.ranks),
            ENV_WORKERS=str(args.ranks),
        )
    run = curve_of(method, seed, smoke.logged_steps(run_dir, steps), args.env)
    stamp = json.loads((base / "base.json").read_text())
    stamp["imitation"] = {k: v for k, v in stamp["imitation"].items() if k != "trace"}  # kept in base.json only
    run |= {"base": {"index": base_index, **stamp}, "group": group, "wall_s": time.perf_counter() - start}
    run["settings"] = settings
    done.parent.mkdir(parents=True, exist_ok=True)
    done.write_text(json.dumps(run, indent=1) + "\n")
    return run


def _base_id(base: dict[str, Any] | None) -> str:
    fingerprint = (base or {}).get("fingerprint")
    return fingerprint["id"] if fingerprint else "no fingerprint recorded"


def check_bases(
    runs: dict[tuple[str, int], dict[str, Any]],
    built: dict[int, dict[str, Any] | None] | None = None,
    work: Path | None = None,
) -> None:
    """Refuse to mix starts: every run of one base index (so of one seed, and of one report) must record one base
    fingerprint, and a base built now to train more runs must be that one too. A run that records no fingerprint
    cannot be shown to share a base with one that does, so the two are not mixed either (runs without a base record
    at all are not checked). Raises SystemExit naming each base's fingerprints and the runs of each."""
    groups: dict[int, dict[str, list[str]]] = {}
    for (method, seed), run in sorted(runs.items(), key=lambda item: (item[0][1], item[0][0])):
        base = run.get("base")
        if base and "index" in base:
            groups.setdefault(base["index"], {}).setdefault(_base_id(base), []).append(f"{method}_seed{seed}")
    for index, fingerprint in sorted((built or {}).items()):
        where = f"the base built now ({work / f'base{index}'})" if work else "the base built now"
        groups.setdefault(index, {}).setdefault(_base_id({"fingerprint": fingerprint}), []).append(where)
    mixed = {index: by_id for index, by_id in sorted(groups.items()) if len(by_id) > 1}
    if mixed:
        lines = [
            f"  base {index}: " + "; ".join(f"{fid}: {', '.join(names)}" for fid, names in by_id.items())
            for index, by_id in mixed.items()
        ]
        raise SystemExit(
            "runs from different bases would be mixed under one seed and one report (base fingerprints differ):\n"
            + "\n".join(lines)
            + "\nuse another --out (or --work), or run --verify to see where a rebuilt base departs from the record"
        )


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
            curve.append({"update": step, "env_steps": main + extra, "success": success})
    if len(curve) < 2:
        raise RuntimeError(f"{method} seed {seed}: fewer than 2 validations (val-core/{env_name}/...) logged")

    def ratio(num: str, den: str) -> float | None:
        return counts[num] / counts[den] if counts[den] else None

    return {
        "method": method,
        "kind": METHODS[method].estimator,
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


def _csv_ints(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's settings, env-dependent defaults resolved; ``methods`` a list, ``plan`` method -> seeds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="keydoor")
    parser.add_argument(
        "--env-kwargs",
        default=None,
        help=f"env kwargs (JSON) of the train and held-out tasks; default {HARD_KEYDOOR} on keydoor, else {{}}",
    )
    parser.add_argument(
        "--methods", default=None, help=f"comma-separated of {', '.join(METHODS)}, or all (default: all but gigpo)"
    )
    parser.add_argument(
        "--seeds", default=None, help=f"seeds of the headline methods {', '.join(HEADLINE)} (1,2,3,4,5; quick 1,2,3)"
    )
    parser.add_argument("--dial-seeds", default="1,2,3", help="seeds of every other method")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the headline methods at lower fidelity (--val-samples 2, --test-freq = --steps, --trim-to-budget, "
        "--jobs 2, --out .../keydoor_hard_quick; each can still be set): 12 runs, docs/method.md states its time",
    )
    parser.add_argument("--jobs", type=int, default=None, help="runs trained at once (1; quick 2)")
    parser.add_argument(
        "--trim-to-budget",
        action="store_true",
        default=None,
        help="every method but GRPO trains only the updates GRPO's budget can hold (see run_steps; on in --quick)",
    )
    parser.add_argument("--bases", type=int, default=2, help="imitated bases; seed s starts from base (s-1) %% bases")
    parser.add_argument("--steps", type=int, default=6, help="training steps a run")
    parser.add_argument(
        "--test-freq", type=int, default=None, help="validate every N steps, before training and after the last (1)"
    )
    parser.add_argument("--batch", type=int, default=8, help="tasks a step")
    parser.add_argument("--group", type=int, default=8, help="episodes a task")
    parser.add_argument(
        "--control-group",
        type=int,
        default=11,
        help="episodes a task of grpo_control; default 11 = 8 x 1.375: ProVer's verifier added 42.5 %% to GRPO's env "
        "steps in the first updates of the hard variant (divergence judge, seed 1; the extra depends on how many "
        "groups hold both a success and a failure)",
    )
    parser.add_argument(
        "--judge-steps", type=int, default=JUDGE_TRAIN_STEPS, help="training steps of prover_judge_model's judge"
    )
    parser.add_argument("--mini-batches", type=int, default=4, help="PPO mini-batches a step")
    parser.add_argument("--loss-agg-mode", default="token-mean")
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--k", type=int, default=2, help="ProVer continuations per fork point")
    parser.add_argument("--ranks", type=int, default=1, help="FSDP ranks = replicas = agent / env workers")
    parser.add_argument("--train-tasks", type=int, default=64)
    parser.add_argument("--val-tasks", type=int, default=64)
    parser.add_argument("--imitate-episodes", type=int, default=64)
    parser.add_argument("--imitate-replay", type=float, default=0.1)
    parser.add_argument(
        "--imitate-seed", type=int, default=0, help="base i starts from the tiny model initialised with this seed + i"
    )
    parser.add_argument(
        "--imitate-cpu-capability",
        choices=sorted(CPU_PINS),
        default=None,
        help="build the bases on this CPU code path (torch's ATen kernels, MKL, oneDNN), not the machine's own: the "
        "same bits on any x86 machine that has it (the committed runs' bases were built on the machine's own AVX512)",
    )
    parser.add_argument(
        "--imitate-env-kwargs", default="", help="env kwargs of the expert episodes imitated (default --env-kwargs)"
    )
    parser.add_argument(
        "--val-samples",
        type=int,
        default=None,
        help="episodes a held-out task at each validation: 1 greedy, n > 1 sampled at temperature 1 (4; quick 2)",
    )
    parser.add_argument(
        "--val-split",
        default=None,
        help="the split validated on (default the env's held-out split); the train split measures whether the "
        "policy improves on the tasks it trains on, where a tiny model cannot generalise (Search-QA)",
    )
    parser.add_argument("--target", type=float, default=0.7, help="success rate for 'env steps to target'")
    parser.add_argument("--out", type=Path, default=None, help="results (benchmarks/results/learning/<name>)")
    parser.add_argument(
        "--work", type=Path, default=None, help="models, data, run logs (/tmp/prover_learning, quick: ..._quick)"
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="train nothing: report the planned runs whose JSON is in --out, and list the missing ones",
    )
    parser.add_argument(
        "--verify",
        nargs="?",
        const="grpo_seed1",
        default=None,
        metavar="RUN",
        help="rebuild committed run RUN (default grpo_seed1) and its base under --work/verify and compare them with "
        "--out/runs/RUN.json: prints MATCH, or MISMATCH with the first differing quantity (exit 1)",
    )
    parser.add_argument("--verify-base-only", action="store_true", help="--verify the base only, not the run")
    parser.add_argument(
        "--verify-updates",
        type=int,
        default=None,
        help="--verify the run's first N updates only (its validations up to update N; a run's quarter hour is most "
        "of a check, and the first updates are the same arithmetic)",
    )
    parser.add_argument(
        "--verify-reuse-base",
        action="store_true",
        help="--verify with the base an earlier --verify rebuilt in the same --work (default: rebuilt from nothing)",
    )
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    quick = {"val_samples": 2, "test_freq": args.steps, "trim_to_budget": True, "jobs": 2, "seeds": "1,2,3"}
    full = {"val_samples": 4, "test_freq": 1, "trim_to_budget": False, "jobs": 1, "seeds": "1,2,3,4,5"}
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.out is None:
        name = "keydoor_hard_quick" if args.quick else "keydoor_hard"
        args.out = ROOT / "benchmarks" / "results" / "learning" / name
    if args.work is None:  # apart, so that quick's runs never replace the full benchmark's checkpoints of a name
        args.work = Path("/tmp/prover_learning_quick" if args.quick else "/tmp/prover_learning")
    if args.env_kwargs is None:
        args.env_kwargs = HARD_KEYDOOR if args.env == "keydoor" else "{}"
    if args.methods is None:  # an env other than KeyDoor has no known pivot: no oracle judge there
        methods = [
            m for m in (HEADLINE if args.quick else DEFAULT_METHODS) if args.env == "keydoor" or not METHODS[m].oracle
        ]
    else:
        methods = list(METHODS) if args.methods == "all" else args.methods.split(",")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        parser.error(f"--methods: unknown {unknown}; choose from {list(METHODS)} or all")
    if args.env != "keydoor" and any(METHODS[m].oracle for m in methods):
        parser.error(f"--methods: the oracle judges need KeyDoor's known pivot, not --env {args.env}")
    for flag in ("val_samples", "test_freq", "jobs", "steps"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} {getattr(args, flag)} must be at least 1")
    if args.batch % args.mini_batches:
        parser.error(f"--batch {args.batch} must be a multiple of --mini-batches {args.mini_batches}")
    if args.bases < 1:
        parser.error(f"--bases {args.bases} must be at least 1")
    try:
        seeds, dial = _csv_ints(args.seeds), _csv_ints(args.dial_seeds)
    except ValueError:
        parser.error(f"--seeds {args.seeds!r} / --dial-seeds {args.dial_seeds!r}: comma-separated integers")
    if not seeds or not dial or min(seeds + dial) < 1:
        parser.error("--seeds and --dial-seeds: positive integers")
    args.methods = methods
    args.plan = {m: seeds if m in HEADLINE else dial for m in methods}
    args.out, args.work = args.out.resolve(), args.work.resolve()
    return args


def command_history(out: Path) -> list[dict[str, Any]]:
    """The commands on record in ``out/results.json`` that trained runs, oldest first: each command rewrites the
    file with its own settings, so a later ``--report-only`` (or a command on other runs) would otherwise lose what
    an earlier one trained and how long it took. A file written before the history was kept gives its own command."""
    path = out / "results.json"
    if not path.exists():
        return []
    old = json.loads(path.read_text())
    history = list(old["settings"].get("commands", []))
    trained = old["settings"].get("trained") or {}
    if trained.get("runs") and not history:
        history.append(
            {"command": old["command"], "commit": old["commit"], "jobs": old["settings"].get("jobs", 1)} | trained
        )
    return history


CURVE_KEYS = ("update", "env_steps", "success")
TOTAL_KEYS = ("env_steps", "main_steps", "extra_steps")


def first_difference(
    committed: dict[str, Any], rebuilt: dict[str, Any], base_only: bool = False, updates: int | None = None
) -> str | None:
    """The first quantity in which a rebuilt run differs from its committed file, in the order they are made: the
    base's tokenizer and weights (where the committed file records its fingerprint), its imitation (steps, replay
    probability), then the run (every validation's update, env steps and success, the totals, the credit
    counts); None if every one is equal, to the bit. ``base_only``: the base only (``rebuilt`` is a base.json);
    ``updates``: the rebuilt run trained only this many updates, so only the validations up to it are compared."""
    ours, theirs = (rebuilt if base_only else rebuilt["base"]), committed["base"]
    pairs: list[tuple[str, Any, Any]] = []
    if theirs.get("fingerprint"):
        for key in ("tokenizer", "weights"):
            pairs.append((f"base {theirs['index']} {key} sha256", (ours.get("fingerprint") or {}).get(key),
                          theirs["fingerprint"][key]))  # fmt: skip
    for key in ("steps", "replay_probability"):
        pairs.append((f"base {theirs['index']} imitation {key}", ours["imitation"].get(key), theirs["imitation"][key]))
    if not base_only:
        curve = [p for p in committed["curve"] if updates is None or p["update"] <= updates]
        for i, point in enumerate(curve):
            mine = rebuilt["curve"][i] if i < len(rebuilt["curve"]) else {}
            for key in CURVE_KEYS:
                pairs.append((f"validation {i} (update {point['update']}) {key}", mine.get(key), point[key]))
        pairs.append(("validations", len(rebuilt["curve"]), len(curve)))
        if updates is None:  # totals of the whole run
            pairs += [(key, rebuilt.get(key), committed.get(key)) for key in TOTAL_KEYS]
            pairs += [(f"credit {k}", rebuilt["credit"].get(k), v) for k, v in committed.get("credit", {}).items()]
    for label, here, there in pairs:
        if here != there:
            return f"{label}: {here} rebuilt, {there} committed"
    return None


def verify(args: argparse.Namespace) -> dict[str, Any]:
    """Rebuild one committed run and its base from nothing (``--work``/verify, emptied first; the committed files are
    only read) and compare them with the committed file: base fingerprint, imitation record, then every validation
    of the curve. Prints match or mismatch with the first differing quantity, writes ``verify.json`` there, and
    exits 1 on a mismatch. ``--verify-base-only`` stops after the base (minutes instead of a run's quarter hour)."""
    commit = _commit()  # the code that runs, before anything can change it
    path = args.out / "runs" / f"{args.verify}.json"
    if not path.exists():
        raise SystemExit(f"--verify {args.verify}: no committed run {path}")
    committed = json.loads(path.read_text())
    method, seed = committed["method"], committed["seed"]
    settings = run_settings(method, args)
    if committed.get("settings") != settings:
        keys = sorted(k for k in set(settings) | set(committed.get("settings") or {})
                      if (committed.get("settings") or {}).get(k) != settings.get(k))  # fmt: skip
        raise SystemExit(f"--verify {args.verify}: the committed run was made with other settings ({', '.join(keys)})"
                         ": give the flags it was made with")  # fmt: skip
    work = args.work / "verify"
    if args.verify_reuse_base and (work / f"base{committed['base']['index']}" / "base.json").exists():
        print(f"[verify] reusing the base an earlier --verify rebuilt in {work} (its settings are checked)", flush=True)
        for folder in ("runs", "out"):
            shutil.rmtree(work / folder, ignore_errors=True)
    else:
        shutil.rmtree(work, ignore_errors=True)
    updates = args.verify_updates
    if updates is not None and not 1 <= updates <= settings["steps"]:
        raise SystemExit(f"--verify-updates {updates}: the committed run trained 1 to {settings['steps']} updates")
    rebuild = argparse.Namespace(**{**vars(args), "work": work, "out": work / "out"})
    if updates is not None:  # the first updates of the run: the same arithmetic, fewer of them
        rebuild.steps = updates
    index = committed["base"]["index"]
    start = time.perf_counter()
    base = json.loads((prepare_base(rebuild, index) / "base.json").read_text())
    fingerprint, recorded = base.get("fingerprint") or {}, committed["base"].get("fingerprint")
    imitation, theirs = base["imitation"], committed["base"]["imitation"]
    print(f"[verify] base {index} rebuilt in {time.perf_counter() - start:.0f} s: fingerprint {fingerprint.get('id')} "
          f"(committed: {recorded['id'] if recorded else 'none recorded'}); imitation {imitation['steps']} steps, "
          f"replay {imitation['replay_probability']} (committed: {theirs['steps']} steps, replay "
          f"{theirs['replay_probability']}); numerics {imitation.get('numerics')}", flush=True)  # fmt: skip
    difference = first_difference(committed, base, base_only=True)
    run = None
    if difference is None and not args.verify_base_only:
        run = run_one(method, seed, rebuild)
        curve = [round(p["success"], 4) for p in run["curve"]]
        print(f"[verify] {args.verify} rebuilt: success {curve} (committed: "
              f"{[round(p['success'], 4) for p in committed['curve']]})", flush=True)  # fmt: skip
        difference = first_difference(committed, run, updates=updates)
    part = "" if updates is None else f" (its first {updates} update{'s' * (updates > 1)})"
    checked = f"base {index}" + ("" if run is None else f" and {args.verify}{part}")
    verdict = f"MATCH: {checked} rebuilt equal to the committed file" if difference is None else (
        f"MISMATCH: first difference: {difference}")  # fmt: skip
    report = {
        "command": command_line("benchmarks/learning.py", args.argv),  # no machine paths
        "commit": commit,
        "run": args.verify,
        "updates": updates,
        "checked": checked,
        "match": difference is None,
        "first_difference": difference,
        "base": {"fingerprint": base.get("fingerprint"), "imitation": imitation},
        "committed_base": {"fingerprint": recorded, "imitation": theirs},
        "curve": None if run is None else run["curve"],
        "seconds": round(time.perf_counter() - start, 1),
    }
    (work / "verify.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"[verify] {verdict} ({report['seconds']:.0f} s; {work / 'verify.json'})", flush=True)
    if difference is not None:
        raise SystemExit(1)
    return report


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.verify:
        return verify(args)
    start, commit = time.perf_counter(), _commit()  # the code that runs, before anything can change it
    planned = [(m, seed) for m, seeds in args.plan.items() for seed in seeds]
    there = [(m, seed) for m, seed in planned if (args.out / "runs" / f"{m}_seed{seed}.json").exists()]
    missing = [f"{m}_seed{seed}" for m, seed in planned if (m, seed) not in there] if args.report_only else []
    trained = [] if args.report_only else [item for item in planned if item not in there]
    # read back first: a run made with other settings, or from another base, stops the benchmark before it trains
    done = {item: run_one(*item, args) for item in there}
    check_bases(done)

    def train(number: int, method: str, seed: int) -> dict[str, Any]:
        print(f"[learning] run {number}/{len(trained)}: {method} seed {seed} ({time.perf_counter() - start:.0f} s)")
        sys.stdout.flush()
        run = run_one(method, seed, args)
        print(f"[learning] done: {method} seed {seed} ({time.perf_counter() - start:.0f} s)", flush=True)
        return run

    # what runs share is made first, one at a time (an imitation keeps both cores busy: two at once took 434 s each,
    # one alone 166 s), so that runs trained at once never build it twice
    built = {}
    for index in sorted({(seed - 1) % args.bases for _, seed in trained}):
        built[index] = json.loads((prepare_base(args, index) / "base.json").read_text()).get("fingerprint")
    check_bases(done, built, args.work)  # a rebuilt base that is not the one of the runs there trains nothing
    if any(METHODS[m].served for m, _ in trained):
        prepare_judge_model(args)
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = {item: pool.submit(train, n, *item) for n, item in enumerate(trained, 1)}
    for item, future in futures.items():  # every run has ended (and is saved) before the first failure is raised
        done[item] = future.result()
    results: dict[str, list[dict[str, Any]]] = {}
    for item in planned:
        if item in done:
            results.setdefault(item[0], []).append(done[item])
    if missing:
        print(f"[learning] --report-only: {len(missing)} of {len(planned)} planned runs missing: {', '.join(missing)}")
    if not results:
        raise SystemExit(f"no run of the plan is in {args.out / 'runs'}")
    settings = {
        k: (str(v) if isinstance(v, Path) else v)
        for k, v in vars(args).items()
        if not k.startswith("verify") and k not in ("out", "work", "argv")
    }
    settings["missing_runs"] = missing
    settings["trained"] = {"runs": len(trained), "elapsed_s": round(time.perf_counter() - start, 1)}
    command = "python benchmarks/learning.py " + " ".join(sys.argv[1:] if argv is None else argv)
    settings["commands"] = command_history(args.out)
    if trained:
        entry = {"command": command.strip(), "commit": commit, "jobs": args.jobs} | settings["trained"]
        settings["commands"].append(entry | {"names": [f"{m}_seed{seed}" for m, seed in trained]})
    report = learning_report.write(results, args.out, settings, command.strip(), commit, args.target)
    print(report["table"])
    print(f"[learning] {time.perf_counter() - start:.0f} s; wrote {args.out}/results.json, results.md, .png")
    return report


if __name__ == "__main__":
    main()
