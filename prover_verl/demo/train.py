"""One training run of one credit-assignment method on KeyDoor, logged against updates and env steps."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import multiprocessing
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from envs.keydoor.env import TaskTable, task_family
from prover_verl import judge as _judge  # noqa: F401  (registers the noisy judge)
from prover_verl.config import GiGPOConfig, ProverConfig
from prover_verl.demo.methods import (
    ContinuationTokens,
    credit_summary,
    gigpo_advantages,
    grpo_advantages,
    mc_advantages,
    prover_advantages,
)
from prover_verl.demo.policy import MLPPolicy, policy_gradient_loss
from prover_verl.demo.rollout import Simulator, task_text, turn_values
from prover_verl.judge import make_judge
from prover_verl.metrics import ProverStats

KINDS = ("grpo", "prover", "mc", "gigpo")
JUDGES = ("heuristic", "noisy")  # the registered judges that need no LLM (prover_verl.judge.registry)


@dataclasses.dataclass(frozen=True)
class MethodSpec:
    """A method of the comparison.

    Attributes:
        name: Label in tables and plots.
        kind: ``grpo``, ``prover``, ``mc`` (exhaustive Monte-Carlo) or ``gigpo``.
        judge: ProVer's judge: ``heuristic`` (first divergence) or ``noisy`` (:class:`NoisyPivotJudge`).
        accuracy: The noisy judge's accuracy.
        prover: ProVer's settings (``k``, ``coef``, ``min_estimate``, ``segment_side``).
        mc_k: Continuations per state of the Monte-Carlo baseline.
        gigpo: GiGPO's settings (``gamma``, ``step_weight``, ``norm_by_std``).
    """

    name: str
    kind: str
    judge: str | None = None
    accuracy: float | None = None
    prover: ProverConfig = dataclasses.field(default_factory=ProverConfig)
    mc_k: int = 4
    gigpo: GiGPOConfig = dataclasses.field(default_factory=GiGPOConfig)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"method kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind == "prover":
            if self.judge not in JUDGES:
                raise ValueError(f"{self.name}: ProVer needs a judge in {JUDGES}, got {self.judge!r}")
            if self.judge == "noisy" and self.accuracy is None:
                raise ValueError(f"{self.name}: the noisy judge needs an accuracy")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Everything one run depends on (the method and seed vary; the rest is shared by a comparison).

    Attributes:
        method: The method.
        seed: Seeds the policy's weights, the task draws and every sampled action.
        updates: Policy updates (each on ``groups`` rollout groups of ``group_size``).
        groups: Rollout groups (tasks) per update.
        group_size: Trajectories per group (GRPO's ``n``).
        lr: Adam learning rate.
        hidden: Policy MLP width.
        norm_by_std: GRPO's std normalisation.
        train_tasks: Training tasks in the family.
        eval_tasks: Held-out evaluation tasks (fixed for every run).
        eval_samples: Sampled episodes per evaluation task.
        eval_every: Updates between evaluations (also at 0 and at the end).
        task_seed: Seeds the task family (not the run).
        keydoor: The family's variant, ``(name, value)`` pairs of :func:`~envs.keydoor.env.task_family`'s keyword
            arguments (``doors``, ``note_at_keys``, ``early_pivot``, ``distractors``, ``guard``); empty: the default.
    """

    method: MethodSpec
    seed: int = 0
    updates: int = 40
    groups: int = 8
    group_size: int = 8
    lr: float = 0.01
    hidden: int = 32
    norm_by_std: bool = True
    train_tasks: int = 128
    eval_tasks: int = 64
    eval_samples: int = 8
    eval_every: int = 4
    task_seed: int = 0
    keydoor: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self):
        for name in ("updates", "groups", "group_size", "hidden", "train_tasks", "eval_tasks", "eval_samples"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 (GRPO needs groups), got {self.group_size}")
        if self.groups > self.train_tasks:
            raise ValueError(f"groups ({self.groups}) cannot exceed train_tasks ({self.train_tasks})")
        if self.eval_every < 1 or self.lr <= 0:
            raise ValueError(f"eval_every must be >= 1 and lr > 0, got {self.eval_every}, {self.lr}")


def _make_judge(method: MethodSpec, table: TaskTable, seed: int):
    pivots = {task_text(t.task_id): t.pivot_turn for t in table.tasks}  # what the noisy judge needs
    return make_judge(method.judge, method.prover.segment_side, seed=seed, accuracy=method.accuracy, pivots=pivots)


def train(config: RunConfig) -> dict[str, Any]:
    """Train a fresh policy with ``config.method``; return its curve, totals and credit statistics.

    The curve has one point per evaluation: ``update``, cumulative ``env_steps`` (main rollouts plus
    verifier/Monte-Carlo continuations), ``main_steps``, ``extra_steps``, sampled ``success`` and
    ``greedy_success`` on the held-out tasks, and the training batch's success rate ``train_success``. With
    ``train_on_continuations`` the verifier's continuations are trained on too (their env steps are already in
    ``extra_steps``; ``continuation_tokens`` counts their tokens).
    """
    start = time.perf_counter()
    torch.manual_seed(config.seed)
    method = config.method
    variant = dict(config.keydoor)
    train_table = TaskTable(task_family("train", config.train_tasks, seed=config.task_seed, **variant))
    eval_table = TaskTable(task_family("eval", config.eval_tasks, seed=config.task_seed, **variant))
    policy = MLPPolicy(hidden=config.hidden, seed=config.seed)
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.lr)
    sim = Simulator(train_table, policy)
    eval_sim = Simulator(eval_table, policy)
    eval_rows = np.repeat(np.arange(config.eval_tasks), config.eval_samples)
    # Separate streams, so the main rollouts of update u are the same for every method until their policies differ.
    main_rng = np.random.default_rng([config.seed, 1])
    extra_rng = np.random.default_rng([config.seed, 2])
    judge = _make_judge(method, train_table, config.seed) if method.kind == "prover" else None
    loop = asyncio.new_event_loop()
    totals = ProverStats()
    judge_hits = 0
    main_steps = 0
    extra_tokens: list[ContinuationTokens] = []  # train_on_continuations: filled by prover_advantages
    continuation_tokens = 0
    curve: list[dict[str, Any]] = []
    train_success = None

    def evaluate(update: int) -> None:
        rng = np.random.default_rng([config.seed, 3, update])
        curve.append(
            {
                "update": update,
                "env_steps": main_steps + totals.verify_env_steps,
                "main_steps": main_steps,
                "extra_steps": totals.verify_env_steps,
                "success": eval_sim.evaluate(eval_rows, rng, greedy=False),
                "greedy_success": eval_sim.evaluate(np.arange(config.eval_tasks), rng, greedy=True),
                "train_success": train_success,
            }
        )

    try:
        evaluate(0)
        for update in range(1, config.updates + 1):
            tasks = main_rng.choice(config.train_tasks, size=config.groups, replace=False)
            task = np.repeat(tasks, config.group_size)
            group = np.repeat(np.arange(config.groups), config.group_size)
            before = sim.env_steps
            rollouts = sim.rollouts(task, group, main_rng)
            main_steps += sim.env_steps - before
            train_success = float(rollouts.won.mean())
            if method.kind == "grpo":
                advantages, _ = grpo_advantages(rollouts, config.norm_by_std)
                stats = ProverStats(groups=config.groups)
            elif method.kind == "prover":
                advantages, stats, hits = prover_advantages(
                    rollouts, sim, judge, method.prover, extra_rng, loop, config.norm_by_std, extra_tokens
                )
                judge_hits += hits
            elif method.kind == "gigpo":
                advantages, stats = gigpo_advantages(rollouts, method.gigpo)
            else:
                advantages, stats = mc_advantages(rollouts, sim, method.mc_k, extra_rng)
            totals.add(stats)

            valid = torch.from_numpy(rollouts.actions >= 0)
            per_turn = turn_values(advantages, rollouts)[valid]
            features = torch.from_numpy(rollouts.features)[valid]
            actions = torch.from_numpy(rollouts.actions)[valid]
            for extra in extra_tokens:  # train_on_continuations: the verifier's continuations, in the same mean
                per_turn = torch.cat([per_turn, extra.advantages])
                features = torch.cat([features, extra.features])
                actions = torch.cat([actions, extra.actions])
                continuation_tokens += len(extra.actions)
            extra_tokens.clear()
            loss = policy_gradient_loss(policy, features, actions, per_turn)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if update % config.eval_every == 0 or update == config.updates:
                evaluate(update)
    finally:
        loop.close()
    totals.env_steps = totals.gen_tokens = main_steps  # one policy token per main-rollout step
    return {
        "method": method.name,
        "kind": method.kind,
        "seed": config.seed,
        "curve": curve,
        "main_steps": main_steps,
        "extra_steps": totals.verify_env_steps,
        "env_steps": main_steps + totals.verify_env_steps,
        "credit": credit_summary(totals, judge_hits),
        "continuation_tokens": continuation_tokens,
        "wall_s": time.perf_counter() - start,
    }


def default_methods(prover: ProverConfig | None = None, mc_k: int = 4) -> list[MethodSpec]:
    """The default comparison: GRPO; ProVer with the heuristic judge and with noisy judges of accuracy 1, 0.5
    and 0 (random); the exhaustive Monte-Carlo baseline; GiGPO (last, so that the others keep their order and
    colours)."""
    prover = prover or ProverConfig()
    return [
        MethodSpec("GRPO", "grpo"),
        MethodSpec("ProVer (heuristic judge)", "prover", judge="heuristic", prover=prover),
        MethodSpec("ProVer (judge acc 1.0)", "prover", judge="noisy", accuracy=1.0, prover=prover),
        MethodSpec("ProVer (judge acc 0.5)", "prover", judge="noisy", accuracy=0.5, prover=prover),
        MethodSpec("ProVer (judge acc 0.0, random)", "prover", judge="noisy", accuracy=0.0, prover=prover),
        MethodSpec(f"Exhaustive MC (K={mc_k})", "mc", mc_k=mc_k),
        MethodSpec("GiGPO", "gigpo"),
    ]


def _train_single_threaded(config: RunConfig) -> dict[str, Any]:
    # One thread per run: runs are parallel processes, and one thread makes results bitwise reproducible.
    torch.set_num_threads(1)
    return train(config)


def run_many(
    configs: Sequence[RunConfig], workers: int = 1, progress: Callable[[int, int, dict[str, Any]], None] | None = None
) -> list[dict[str, Any]]:
    """Run every config (in ``workers`` processes when > 1); results come back in the order of ``configs``.

    Args:
        configs: The runs.
        workers: Parallel processes (1: in this process).
        progress: Called as ``progress(done, total, result)`` after each run finishes.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    results: list[dict[str, Any] | None] = [None] * len(configs)
    if workers == 1:
        threads = torch.get_num_threads()
        try:
            for i, config in enumerate(configs):
                results[i] = _train_single_threaded(config)
                if progress:
                    progress(i + 1, len(configs), results[i])
        finally:
            torch.set_num_threads(threads)
        return results
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(_train_single_threaded, c): i for i, c in enumerate(configs)}
        for done, future in enumerate(concurrent.futures.as_completed(futures), start=1):
            results[futures[future]] = future.result()
            if progress:
                progress(done, len(configs), results[futures[future]])
    return results
