"""Credit accuracy on KeyDoor (issue 39, item 1): each method's per-turn advantage against the true one.

For one batch of rollout groups of the CPU demo's policy (the MLP over KeyDoor's features, at its initial weights
or after ``--stages`` GRPO updates), the true advantage ``A*_t = V(s_{t+1}) - V(s_t)`` of every turn is estimated
by ``--samples`` continuations of the current policy from every state the batch passed through
(:func:`prover_verl.demo.values.mc_turn_advantages`, with a standard error per turn), and checked against the
exact value from dynamic programming over KeyDoor's state space. Each method's per-turn advantage on the same batch
(the demo's code: GRPO's outcome advantage on every turn, GiGPO's, ProVer's with the oracle, divergence and
heuristic judges, with the oracle judge's segment in the failure (``segment_side=failure``: the good decision a
failure made, e.g. the right key lost at the guard), with ``every_turn`` verification, and the exhaustive
Monte-Carlo baseline at ``--mc-k``) is compared with ``A*``
(:func:`prover_verl.eval.credit_accuracy.credit_accuracy`): Pearson's r; the shares of same and of opposite sign on
the pivotal turns (the key room, and the guard room in the ``guard`` variant) and on the other turns, each over
those whose ``A*`` is clearly non-zero; and the share of the gradient weight ``sum |advantage|`` on turns whose
``A*`` is about zero (``|A*| <= max(0.02, 2 sem)``), also weighted by each turn's logit-gradient size
``||onehot(a) - pi||``. Values are the mean over ``--seeds`` (a seed draws the policy's initial weights, its GRPO
updates and the batch) with the sem over seeds.

    python benchmarks/credit_accuracy.py          # every variant of VARIANTS, 5 stages, 5 seeds: ~3 min on 1 core

Variants: the demo's ``default`` family, the learning benchmark's ``hard`` one (two doors, the note by the keys,
the key room second of ten), ``distract7`` (the same with seven distractor rooms before the key room) and ``guard``
(hard plus a guard room after the key room: a second necessary decision); ``envs/keydoor/env.py`` has the knobs.

It prints a table per variant and stage and writes ``--out``/``results.json`` (command, commit, settings, per-seed
values, means and sems) and ``results.md``.

    python benchmarks/credit_accuracy.py --group-log DIR --coef 2.0

reads instead the group log of a run of verl's real loop with ``algorithm.prover.ablation=every_turn`` (whose
verifier forks every turn of one trajectory per group: ``A*`` with the run's ``k``) and prints GRPO's and ProVer's
accuracy on it (:func:`prover_verl.eval.credit_accuracy.credit_accuracy_from_group_log`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.provenance import code_commit, command_line  # noqa: E402
from envs.keydoor.env import TaskTable, task_family  # noqa: E402
from prover_verl import judge as _judge  # noqa: E402, F401  (registers the judges)
from prover_verl.config import GiGPOConfig, ProverConfig  # noqa: E402
from prover_verl.demo.methods import gigpo_advantages, grpo_advantages, mc_advantages, prover_advantages  # noqa: E402
from prover_verl.demo.policy import MLPPolicy, policy_gradient_loss  # noqa: E402
from prover_verl.demo.rollout import Rollouts, Simulator, task_text, turn_values  # noqa: E402
from prover_verl.demo.values import exact_turn_advantages, exact_values, mc_turn_advantages  # noqa: E402
from prover_verl.eval.credit_accuracy import (  # noqa: E402
    credit_accuracy,
    credit_accuracy_from_group_log,
    mean_sem,
    null_turns,
)
from prover_verl.eval.group_log import read_groups  # noqa: E402
from prover_verl.judge import make_judge  # noqa: E402
from prover_verl.verify import select_judge  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "credit_accuracy"
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "hard": {"doors": 2, "note_at_keys": True, "early_pivot": True},
    # issue 39, item 2: seven distractor rooms before the decision (two filler rooms after it) ...
    "distract7": {"doors": 2, "note_at_keys": True, "distractors": 7},
    # ... and the hard variant with a guard room after the key room (a second necessary decision)
    "guard": {"doors": 2, "note_at_keys": True, "early_pivot": True, "guard": True},
}
METRICS = (
    "correlation",
    "pivotal_sign_agreement",
    "pivotal_opposite_sign",
    "other_sign_agreement",
    "other_opposite_sign",
    "null_weight_share",
    "null_gradient_share",
    "extra_env_steps",
)
# table columns: (heading, metrics shown in the cell, joined by " / ")
COLUMNS = (
    ("r with A*", ("correlation",)),
    ("pivotal A*!=0: same / opposite sign", ("pivotal_sign_agreement", "pivotal_opposite_sign")),
    ("other A*!=0: same / opposite sign", ("other_sign_agreement", "other_opposite_sign")),
    ("weight on A*~0", ("null_weight_share",)),
    ("gradient on A*~0", ("null_gradient_share",)),
    ("extra env steps", ("extra_env_steps",)),
)


def methods(table: TaskTable, k: int, mc_k: int, seed: int) -> dict[str, Callable[..., torch.Tensor]]:
    """Each method as ``f(rollouts, sim, rng, loop) -> (rows, RESPONSE_LENGTH)`` advantages."""
    pivots = {task_text(t.task_id): t.pivot_turn for t in table.tasks}
    prover = ProverConfig(k=k)

    def grpo(rollouts, sim, rng, loop):
        return grpo_advantages(rollouts)[0]

    def gigpo(rollouts, sim, rng, loop):
        return gigpo_advantages(rollouts, GiGPOConfig())[0]

    def with_judge(config, judge):
        def run(rollouts, sim, rng, loop):
            return prover_advantages(rollouts, sim, judge, config, rng, loop)[0]

        return run

    every_turn = ProverConfig(k=k, ablation="every_turn")
    failure = ProverConfig(k=k, segment_side="failure")
    return {
        "GRPO": grpo,
        "GiGPO": gigpo,
        "ProVer (oracle judge)": with_judge(
            prover, make_judge("noisy", prover.segment_side, seed=seed, accuracy=1.0, pivots=pivots)
        ),
        "ProVer (oracle judge, failure side)": with_judge(
            failure, make_judge("noisy", failure.segment_side, seed=seed, accuracy=1.0, pivots=pivots)
        ),
        "ProVer (divergence judge)": with_judge(prover, make_judge("divergence", prover.segment_side, seed=seed)),
        "ProVer (heuristic judge)": with_judge(prover, make_judge("heuristic", prover.segment_side, seed=seed)),
        "ProVer (every_turn)": with_judge(every_turn, select_judge(every_turn, seed=seed)),
        f"Exhaustive MC (K={mc_k})": lambda rollouts, sim, rng, loop: mc_advantages(rollouts, sim, mc_k, rng)[0],
    }


def draw_batch(sim: Simulator, rng: np.random.Generator, tasks: int, groups: int, group_size: int) -> Rollouts:
    """``groups`` rollout groups of ``group_size`` on distinct train tasks."""
    chosen = rng.choice(tasks, size=groups, replace=False)
    return sim.rollouts(np.repeat(chosen, group_size), np.repeat(np.arange(groups), group_size), rng)


def grpo_updates(policy: MLPPolicy, sim: Simulator, updates: int, args: argparse.Namespace, seed: int) -> float:
    """Train ``policy`` with the demo's GRPO for ``updates`` updates; return the last batch's success rate."""
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.lr)
    rng = np.random.default_rng([seed, 1])
    success = float("nan")
    for _ in range(updates):
        rollouts = draw_batch(sim, rng, len(sim.table), args.groups, args.group_size)
        success = float(rollouts.won.mean())
        valid = torch.from_numpy(rollouts.actions >= 0)
        advantages = turn_values(grpo_advantages(rollouts)[0], rollouts)[valid]
        loss = policy_gradient_loss(
            policy, torch.from_numpy(rollouts.features)[valid], torch.from_numpy(rollouts.actions)[valid], advantages
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return success


@torch.no_grad()
def logit_gradient_size(policy: MLPPolicy, rollouts: Rollouts) -> np.ndarray:
    """``||onehot(a_t) - pi(.|s_t)||``, the size of each turn's log-probability gradient with respect to the logits
    (small where the policy is near-deterministic), ``(rows, MAX_TURNS)`` (0 past a row's end)."""
    probs = torch.softmax(policy(torch.from_numpy(rollouts.features)).double(), dim=-1).numpy()
    actions = np.maximum(rollouts.actions, 0)
    onehot = np.zeros_like(probs)
    np.put_along_axis(onehot, actions[..., None], 1.0, axis=-1)
    size = np.linalg.norm(onehot - probs, axis=-1)
    return np.where(rollouts.actions >= 0, size, 0.0)


def measure(variant: str, stage: int, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """One seed of one (variant, stage): the batch's true advantages and every method's accuracy against them."""
    torch.manual_seed(seed)
    table = TaskTable(task_family("train", args.train_tasks, seed=0, **VARIANTS[variant]))
    policy = MLPPolicy(hidden=32, seed=seed)
    sim = Simulator(table, policy)
    grpo_updates(policy, sim, stage, args, seed)
    rng = np.random.default_rng([seed, 2, stage])
    rollouts = draw_batch(sim, rng, len(table), args.groups, args.group_size)
    truth, sem, mc_steps = mc_turn_advantages(rollouts, sim, args.samples, np.random.default_rng([seed, 3, stage]))
    exact = exact_turn_advantages(rollouts, exact_values(table, policy))
    valid = rollouts.actions >= 0
    turn = np.arange(valid.shape[1])[None]
    pivotal = (turn == table.pivot_turn[rollouts.task][:, None]) | (turn == table.guard_turn[rollouts.task][:, None])
    pivotal = pivotal[valid]  # the key room, and the guard room where there is one
    truth_v, sem_v, exact_v = truth[valid], sem[valid], exact[valid]
    grad_scale = logit_gradient_size(policy, rollouts)[valid]
    result: dict[str, Any] = {
        "seed": seed,
        "batch_success": float(rollouts.won.mean()),
        "groups_with_pair": int(
            sum(0 < rollouts.won[rollouts.group == g].sum() < args.group_size for g in range(args.groups))
        ),
        "a_star": {
            "samples": args.samples,
            "env_steps": mc_steps,
            "turns": int(valid.sum()),
            "mean_sem": float(sem_v.mean()),
            "within_band_of_exact": float(np.mean(null_turns(truth_v - exact_v, sem_v))),
            "max_abs_error": float(np.abs(truth_v - exact_v).max()),
        },
        "methods": {},
    }
    loop = asyncio.new_event_loop()
    try:
        for index, (name, method) in enumerate(methods(table, args.k, args.mc_k, seed).items()):
            before = sim.env_steps
            advantages = method(rollouts, sim, np.random.default_rng([seed, 4, stage, index]), loop)
            per_turn = turn_values(advantages, rollouts).numpy().astype(np.float64)[valid]
            exact_r = credit_accuracy(per_turn, exact_v, np.zeros_like(exact_v), pivotal)["correlation"]
            accuracy = credit_accuracy(per_turn, truth_v, sem_v, pivotal, grad_scale=grad_scale)
            result["methods"][name] = accuracy | {
                "exact_correlation": exact_r,
                "extra_env_steps": sim.env_steps - before,
            }
    finally:
        loop.close()
    return result


def summarise(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean, sem and count over seeds of every method's metrics (None-valued seeds are left out and counted)."""
    names = list(per_seed[0]["methods"])
    summary = {}
    for name in names:
        summary[name] = {}
        for metric in (*METRICS, "exact_correlation"):
            mean, sem, count = mean_sem([s["methods"][name][metric] for s in per_seed])
            summary[name][metric] = {"mean": mean, "sem": sem, "seeds": count}
    return summary


def _cell(metric: str, entry: dict[str, Any]) -> str:
    if entry["mean"] is None:
        return "n/a"
    if metric == "extra_env_steps":
        return f"{entry['mean']:,.0f}"
    sem = f" ± {entry['sem']:.2f}" if entry["sem"] is not None else ""
    return f"{entry['mean']:.2f}{sem}"


def table(block: dict[str, Any]) -> str:
    """A markdown table of one (variant, stage) block."""
    lines = ["| method | " + " | ".join(c for c, _ in COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for name, entry in block["summary"].items():
        cells = [" / ".join(_cell(m, entry[m]) for m in metrics) for _, metrics in COLUMNS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def heading(block: dict[str, Any]) -> str:
    """What a block measured, in a line."""
    seeds = block["per_seed"]
    success = np.mean([s["batch_success"] for s in seeds])
    pairs = np.mean([s["groups_with_pair"] for s in seeds])
    turns = np.mean([s["a_star"]["turns"] for s in seeds])
    sem = np.mean([s["a_star"]["mean_sem"] for s in seeds])
    within = np.mean([s["a_star"]["within_band_of_exact"] for s in seeds])
    return (
        f"KeyDoor {block['variant']}, policy after {block['stage']} GRPO updates: batch success {success:.2f}, "
        f"{pairs:.1f} of {block['groups']} groups with a pair, {turns:.0f} turns a batch; A* from "
        f"{block['samples']} continuations a state (mean sem {sem:.3f}; {within:.1%} of turns within max(0.02, 2 sem) "
        f"of the exact value); {len(seeds)} seeds, mean ± sem over seeds"
    )


SHORT = {  # method -> column heading of the one-metric tables
    "GRPO": "GRPO",
    "GiGPO": "GiGPO",
    "ProVer (oracle judge)": "ProVer oracle",
    "ProVer (oracle judge, failure side)": "ProVer oracle, failure side",
    "ProVer (divergence judge)": "ProVer divergence",
    "ProVer (heuristic judge)": "ProVer heuristic",
    "ProVer (every_turn)": "ProVer every_turn",
}


def metric_table(report: dict[str, Any], metric: str) -> str:
    """One metric of every method (columns) for every (variant, stage) block (rows), with the batch's success."""
    names = list(report["blocks"][0]["summary"])
    head = ["variant", "GRPO updates", "batch success", "groups with a pair"]
    head += [SHORT.get(n, n.replace("Exhaustive ", "")) for n in names]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for block in report["blocks"]:
        seeds = block["per_seed"]
        success = np.mean([s["batch_success"] for s in seeds])
        pairs = np.mean([s["groups_with_pair"] for s in seeds])
        cells = [block["variant"], str(block["stage"]), f"{success:.2f}", f"{pairs:.1f} / {block['groups']}"]
        cells += [_cell(metric, block["summary"][n][metric]) for n in names]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


PARTS = {
    "correlation": lambda report: metric_table(report, "correlation"),
    "null_weight": lambda report: metric_table(report, "null_weight_share"),
    "null_gradient": lambda report: metric_table(report, "null_gradient_share"),
    "pivotal_same": lambda report: metric_table(report, "pivotal_sign_agreement"),
    "pivotal_opposite": lambda report: metric_table(report, "pivotal_opposite_sign"),
    "other_same": lambda report: metric_table(report, "other_sign_agreement"),
    "other_opposite": lambda report: metric_table(report, "other_opposite_sign"),
    "table": lambda report: "\n\n".join(f"{heading(b)}\n\n{table(b)}" for b in report["blocks"]),
}


def render(report: dict[str, Any], part: str) -> str:
    """A part of a results file for ``benchmarks/doc_tables.py``: one metric over every block (``correlation``,
    ``null_weight``, ``null_gradient``, ``pivotal_same``, ``pivotal_opposite``, ``other_same``,
    ``other_opposite``) or every block's full table (``table``)."""
    if part not in PARTS:
        raise ValueError(f"unknown part {part!r} of a credit_accuracy report; one of {list(PARTS)}")
    return PARTS[part](report)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {list(VARIANTS)}")
    parser.add_argument("--stages", default="0,10,30,60,100", help="GRPO updates before the batch")
    parser.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds")
    parser.add_argument("--samples", type=int, default=256, help="continuations per state for A*")
    parser.add_argument("--groups", type=int, default=8, help="rollout groups in the measured batch (and updates)")
    parser.add_argument("--group-size", type=int, default=8, help="trajectories per group")
    parser.add_argument("--train-tasks", type=int, default=128, help="train tasks of the family")
    parser.add_argument("--k", type=int, default=2, help="ProVer's continuations per fork point")
    parser.add_argument("--mc-k", type=int, default=4, help="continuations per state of the exhaustive MC baseline")
    parser.add_argument("--lr", type=float, default=0.01, help="Adam learning rate of the GRPO updates")
    parser.add_argument("--out", type=Path, default=OUT, help="output folder")
    parser.add_argument("--group-log", type=Path, default=None, help="read an every_turn run's group log instead")
    parser.add_argument("--coef", type=float, default=2.0, help="with --group-log: the run's algorithm.prover.coef")
    args = parser.parse_args(argv)
    args.variants = args.variants.split(",")
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown:
        parser.error(f"--variants: unknown {unknown}; known: {sorted(VARIANTS)}")
    args.stages = [int(s) for s in args.stages.split(",")]
    args.seeds = [int(s) for s in args.seeds.split(",")]
    if args.samples < 1 or args.groups < 1 or args.group_size < 2 or any(s < 0 for s in args.stages):
        parser.error("--samples and --groups must be >= 1, --group-size >= 2, --stages >= 0")
    return args


def from_group_log(log_dir: Path, coef: float) -> dict[str, Any]:
    """Print and return GRPO's and ProVer's credit accuracy over an ``every_turn`` run's group log."""
    records, bad = read_groups(log_dir)
    out = credit_accuracy_from_group_log(records, coef) | {"unreadable_lines": bad}
    print(f"{out['lines']} every_turn lines used, {out['skipped']} others skipped, {bad} unreadable")
    for method in ("grpo", "prover"):
        if method in out:
            print(method, {k: v if not isinstance(v, float) else round(v, 3) for k, v in out[method].items()})
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.group_log is not None:
        return from_group_log(args.group_log, args.coef)
    torch.set_num_threads(1)
    started = time.perf_counter()
    blocks = []
    for variant in args.variants:
        for stage in args.stages:
            per_seed = []
            for seed in args.seeds:
                per_seed.append(measure(variant, stage, seed, args))
                print(f"{variant} stage {stage} seed {seed} done ({time.perf_counter() - started:.0f}s)",
                      file=sys.stderr, flush=True)  # fmt: skip
            block = {
                "variant": variant,
                "variant_kwargs": VARIANTS[variant],
                "stage": stage,
                "groups": args.groups,
                "samples": args.samples,
                "summary": summarise(per_seed),
                "per_seed": per_seed,
            }
            blocks.append(block)
            print(f"\n{heading(block)}\n\n{table(block)}", flush=True)
    report = {
        "command": command_line("benchmarks/credit_accuracy.py", argv),
        "commit": code_commit(),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "out"},
        "columns": {heading: list(metrics) for heading, metrics in COLUMNS},
        "null_band": "|A*| <= max(0.02, 2 sem)",
        "wall_s": time.perf_counter() - started,
        "blocks": blocks,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / "results.md").write_text(
        f"<!-- {report['command']} (commit {report['commit']}) -->\n\n{render(report, 'table')}\n"
    )
    print(f"\nwritten to {args.out / 'results.json'}", file=sys.stderr)
    return report


if __name__ == "__main__":
    main()
