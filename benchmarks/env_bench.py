"""Environment benchmark: step and fork cost of each env, in process and through the Ray :class:`EnvPool`.

    python benchmarks/env_bench.py                     # every importable env, default sizes (a few minutes)
    python benchmarks/env_bench.py --quick             # smoke run
    python benchmarks/env_bench.py --envs searchqa --episodes 32 --workers 2 --concurrency 16

For each env one workload (``--episodes`` episodes, alternately the expert's actions and random valid actions,
fixed seeds) is played by a single in-process env and then by the pool with ``--concurrency`` concurrent
episodes on ``--workers`` workers; both must give the same total reward. Each side first plays ``--warmup`` other
episodes (JIT, caches), and afterwards two probe episodes alone, which give the pool's per-call overhead. Fork =
snapshot + restore into another env instance (in process) or into another worker (pool). Every ratio divides by
a baseline measured in the same run: fork / step, pool probe step / in-process probe step, pool steps/s /
single-env steps/s. The Markdown table goes to stdout, everything to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray

import envs
from envs.base import TextEnv
from envs.pools.ray_pool import EnvPool

ENVS = tuple(spec.name for spec in envs.specs())  # the registered envs (the built-in ones)
envs.register_env("toy", "envs.toy:ToyEnv")


def available(name: str) -> bool:
    """The env is registered and the module its spec names exists."""
    if name not in envs.env_names():
        return False
    target = envs.spec(name).target
    return not isinstance(target, str) or importlib.util.find_spec(target.partition(":")[0]) is not None


class Policy:
    """Chooses the actions of one episode: the expert's, or random valid ones (seeded, so replays agree).

    Random actions come from ``info["admissible_actions"]``; an env without them (Search-QA) gets a search
    of random words of its task, or, one time in four, one of the expert's actions (which may answer).
    """

    def __init__(self, kind: str, seed: int, max_steps: int):
        self.kind, self.rng, self.max_steps = kind, random.Random(seed), max_steps
        self.expert: list[str] = []

    def action(self, step: int, info: dict[str, Any]) -> str | None:
        if self.kind == "expert":
            return self.expert[step] if step < len(self.expert) else None
        if step >= self.max_steps:
            return None
        if info.get("admissible_actions"):
            return self.rng.choice(info["admissible_actions"])
        if self.expert and self.rng.random() < 0.25:
            return self.rng.choice(self.expert)
        words = str(info.get("task", "")).split() or ["the"]
        return "<search>" + " ".join(self.rng.choice(words) for _ in range(3)) + "</search>"


def workload(task_ids: list[str], episodes: int, offset: int = 0) -> list[tuple[str, str, int]]:
    """``(task_id, policy kind, seed)`` per episode: tasks in turn from ``offset``, expert and random alternating.

    Warm-up and probe workloads use other offsets than the measured one, so that no measured step repeats a
    step an earlier pass made (a cache would flatter it).
    """
    return [(task_ids[i % len(task_ids)], ("expert", "random")[i % 2], i) for i in range(offset, offset + episodes)]


def summary(latencies_s: list[float]) -> dict[str, float]:
    """Mean / p50 / p95 in milliseconds."""
    ordered = sorted(latencies_s)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3  # noqa: E731
    return {"mean_ms": statistics.fmean(ordered) * 1e3, "p50_ms": pick(0.5), "p95_ms": pick(0.95), "n": len(ordered)}


def timed(fn: Callable, *args, **kwargs) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def play_local(env: TextEnv, jobs: list, random_steps: int, forks: int) -> dict[str, Any]:
    """Play ``jobs`` one after another on ``env``; keep the states at step 2 of the first ``forks`` episodes."""
    steps: dict[str, list[float]] = {"expert": [], "random": []}
    job_steps: list[list[float]] = []
    resets, states, total_reward = [], [], 0.0
    start = time.perf_counter()
    for task_id, kind, seed in jobs:
        (_, info), elapsed = timed(env.reset, options={"task_id": task_id})
        resets.append(elapsed)
        job_steps.append([])
        policy = Policy(kind, seed, random_steps)
        policy.expert = env.expert_actions()
        step = 0
        while (action := policy.action(step, info)) is not None:
            (_, reward, terminated, truncated, info), elapsed = timed(env.step, action)
            steps[kind].append(elapsed)
            job_steps[-1].append(elapsed)
            total_reward += reward
            step += 1
            if terminated or truncated:
                break
            if len(states) < forks and step == 2:
                states.append(env.snapshot())
    wall = time.perf_counter() - start
    return {
        "steps": steps,
        "job_steps": job_steps,
        "resets": resets,
        "states": states,
        "reward": total_reward,
        "wall_s": wall,
    }


def bench_single(name: str, env_kwargs: dict, args: argparse.Namespace) -> dict[str, Any]:
    """Warm-up, the measured workload, forks, and the two probe episodes on one in-process env."""
    env, build_cold = timed(envs.make, name, **env_kwargs)
    other, build_warm = timed(envs.make, name, **env_kwargs)  # the restore target of the forks
    task_ids = env.task_ids()
    jobs = workload(task_ids, args.episodes)
    warmup = workload(task_ids, args.warmup, offset=args.episodes)
    probe = workload(task_ids, 2, offset=args.episodes + args.warmup)
    play_local(env, warmup, args.random_steps, 0)  # JIT, page and query caches
    run = play_local(env, jobs, args.random_steps, args.forks)
    probe_steps = [t for times in play_local(env, probe, args.random_steps, 0)["job_steps"] for t in times]
    steps, states = run["steps"], run["states"]
    all_steps = steps["expert"] + steps["random"]
    snapshot_s, restore_s = [], []
    for state in states:
        env.restore(state)
        snapshot_s.append(timed(env.snapshot)[1])
        restore_s.append(timed(other.restore, state)[1])
    step_mean = statistics.fmean(all_steps)
    fork_mean = statistics.fmean(snapshot_s) + statistics.fmean(restore_s)
    return {
        "tasks": len(task_ids),
        "build_cold_s": build_cold,
        "build_warm_s": build_warm,
        "episodes": len(jobs),
        "steps": len(all_steps),
        "total_reward": run["reward"],
        "steps_per_s": len(all_steps) / run["wall_s"],
        "step": summary(all_steps),
        "step_expert": summary(steps["expert"]),
        "step_random": summary(steps["random"]) if steps["random"] else None,
        "reset": summary(run["resets"]),
        "snapshot": summary(snapshot_s),
        "restore": summary(restore_s),
        "fork_ms": fork_mean * 1e3,
        "fork_over_step": fork_mean / step_mean,
        "probe_step": summary(probe_steps),
        "_jobs": (warmup, jobs, probe),
        "_states": states,
    }


async def play_jobs(pool: EnvPool, jobs: list, random_steps: int, concurrency: int) -> dict[str, Any]:
    """Play ``jobs`` through the pool, ``concurrency`` episodes at a time."""
    queue = list(reversed(jobs))
    step_s: list[float] = []
    totals = {"reward": 0.0, "steps": 0}

    async def runner() -> None:
        while queue:
            task_id, kind, seed = queue.pop()
            episode_id, _, info = await pool.reset(task_id=task_id)
            policy = Policy(kind, seed, random_steps)
            policy.expert = await pool.expert_actions(episode_id)
            step = 0
            while (action := policy.action(step, info)) is not None:
                start = time.perf_counter()
                _, reward, terminated, truncated, info = await pool.step(episode_id, action)
                step_s.append(time.perf_counter() - start)
                totals["reward"] += reward
                totals["steps"] += 1
                step += 1
                if terminated or truncated:
                    break
            await pool.close(episode_id)

    start = time.perf_counter()
    await asyncio.gather(*(runner() for _ in range(concurrency)))
    return {**totals, "wall_s": time.perf_counter() - start, "step_s": step_s}


async def bench_pool(name: str, env_kwargs: dict, jobs: tuple, states: list, args: argparse.Namespace) -> dict:
    """The single env's passes through the pool: warm-up and workload under load, probes alone; forks."""
    warmup, main_jobs, probe = jobs
    workers, concurrency, random_steps = args.workers, args.concurrency, args.random_steps
    pool, build = timed(EnvPool, name, env_kwargs, num_workers=workers, call_timeout_s=300.0)
    try:
        await play_jobs(pool, warmup, random_steps, concurrency)
        loaded = await play_jobs(pool, main_jobs, random_steps, concurrency)
        serial = await play_jobs(pool, probe, random_steps, 1)  # the latency one agent sees
        snapshot_s, restore_s = [], []
        for state in states:  # snapshot in worker 0, restore in worker 1
            episode_id, _, _ = await pool.restore(state, worker=0)
            begin = time.perf_counter()
            fork_state = await pool.snapshot(episode_id)
            snapshot_s.append(time.perf_counter() - begin)
            begin = time.perf_counter()
            fork_id, _, _ = await pool.restore(fork_state, worker=min(1, workers - 1))
            restore_s.append(time.perf_counter() - begin)
            await pool.close(episode_id)
            await pool.close(fork_id)
        fork_mean = statistics.fmean(snapshot_s) + statistics.fmean(restore_s)
        return {
            "workers": workers,
            "concurrency": concurrency,
            "build_s": build,
            "steps": loaded["steps"],
            "total_reward": loaded["reward"],
            "steps_per_s": loaded["steps"] / loaded["wall_s"],
            "step_under_load": summary(loaded["step_s"]),
            "step_serial": summary(serial["step_s"]),
            "snapshot": summary(snapshot_s),
            "restore": summary(restore_s),
            "fork_ms": fork_mean * 1e3,
            "fork_over_step": fork_mean / statistics.fmean(serial["step_s"]),
            "stats": pool.stats(),
        }
    finally:
        pool.shutdown()


def bench_env(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Single-env and pool numbers of one env, with the ratios between them."""
    kwargs = json.loads(args.env_kwargs).get(name, {})
    single = bench_single(name, kwargs, args)
    jobs, states = single.pop("_jobs"), single.pop("_states")
    pooled = asyncio.run(bench_pool(name, kwargs, jobs, states, args))
    if pooled["steps"] != single["steps"] or abs(pooled["total_reward"] - single["total_reward"]) > 1e-9:
        raise SystemExit(
            f"{name}: the pool played the workload differently ({pooled['steps']} steps, reward "
            f"{pooled['total_reward']}) from the single env ({single['steps']} steps, reward {single['total_reward']})"
        )
    return {
        "single": single,
        "pool": pooled,
        "pool_over_single_steps_per_s": pooled["steps_per_s"] / single["steps_per_s"],
        # the same two episodes, alone in the pool vs in process: the pool's per-step overhead
        "pool_serial_step_over_single_step": pooled["step_serial"]["mean_ms"] / single["probe_step"]["mean_ms"],
    }


def table(results: dict[str, dict]) -> str:
    """The Markdown table of the report."""
    header = (
        "| env | tasks | build cold / warm (s) | step ms (expert / random) | steps/s single | fork ms "
        "(snap + restore) | fork / step | pool step ms alone (/ same steps in process) | pool fork / pool step "
        "| pool steps/s (N workers, C eps) | pool / single |"
    )
    rows = [header, "|" + "---|" * (header.count("|") - 1)]
    for name, result in results.items():
        s, p = result["single"], result["pool"]
        random_ms = f"{s['step_random']['mean_ms']:.2f}" if s["step_random"] else "-"
        rows.append(
            f"| {name} | {s['tasks']} | {s['build_cold_s']:.2f} / {s['build_warm_s']:.3f} "
            f"| {s['step_expert']['mean_ms']:.2f} / {random_ms} | {s['steps_per_s']:.0f} "
            f"| {s['fork_ms']:.2f} ({s['snapshot']['mean_ms']:.2f} + {s['restore']['mean_ms']:.2f}) "
            f"| {s['fork_over_step']:.2f} | {p['step_serial']['mean_ms']:.2f} "
            f"({result['pool_serial_step_over_single_step']:.1f}x) "
            f"| {p['fork_over_step']:.2f} "
            f"| {p['steps_per_s']:.0f} ({p['workers']}, {p['concurrency']}) "
            f"| {result['pool_over_single_steps_per_s']:.2f} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", default=",".join((*ENVS, "toy")), help="comma-separated env names")
    parser.add_argument("--episodes", type=int, default=24, help="episodes of the workload per env")
    parser.add_argument("--warmup", type=int, default=8, help="unmeasured episodes played first")
    parser.add_argument("--random-steps", type=int, default=12, help="steps of a random-policy episode")
    parser.add_argument("--forks", type=int, default=8, help="snapshot/restore measurements per env")
    parser.add_argument("--workers", type=int, default=2, help="pool workers")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent pool episodes")
    parser.add_argument("--env-kwargs", default="{}", help='JSON {"env name": {constructor kwargs}}')
    parser.add_argument("--quick", action="store_true", help="smoke run: 4 episodes, 2 warm-up, 2 forks, 4 concurrent")
    parser.add_argument("--out", default="results/env_bench.json")
    args = parser.parse_args(argv)
    if args.quick:
        args.episodes, args.warmup, args.forks, args.concurrency, args.random_steps = 4, 2, 2, 4, 4
    names = [name for name in args.envs.split(",") if name]
    missing = [name for name in names if not available(name)]
    for name in missing:
        print(f"skipping {name}: not registered, or its env module is not importable", file=sys.stderr)
    if not ray.is_initialized():
        ray.init(num_cpus=max(args.workers, 2), include_dashboard=False, log_to_driver=False)
    results = {}
    for name in names:
        if name not in missing:
            print(f"benchmarking {name} ...", file=sys.stderr, flush=True)
            results[name] = bench_env(name, args)
    ray.shutdown()
    print(table(results))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    config = {key: value for key, value in vars(args).items() if key != "out"}
    out.write_text(json.dumps({"config": config, "skipped": missing, "results": results}, indent=2, default=str))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
