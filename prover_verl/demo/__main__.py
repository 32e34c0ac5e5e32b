"""``python -m prover_verl.demo``: the default CPU comparison of GRPO, ProVer, exhaustive Monte-Carlo credit and GiGPO.

Runs every method of :func:`~prover_verl.demo.train.default_methods` for ``--seeds`` seeds with the same
updates, prints the table and writes ``results.json``, ``results.md`` and ``success_vs_env_steps.png`` to
``--out``. Progress goes to stderr. A few minutes on 2 cores at the defaults.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.keydoor.env import task_family
from prover_verl.config import ProverConfig
from prover_verl.demo.report import HEADER, write_report
from prover_verl.demo.train import MethodSpec, RunConfig, default_methods, run_many


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options shared by the demo and the benchmark CLI."""
    defaults = RunConfig(MethodSpec("GRPO", "grpo"))
    parser.add_argument("--out", type=Path, default=Path("results/demo"), help="output folder")
    parser.add_argument("--seeds", type=int, default=8, help="seeds per method (>= 3 for a spread)")
    parser.add_argument("--updates", type=int, default=150, help="policy updates per run")
    parser.add_argument("--groups", type=int, default=defaults.groups, help="rollout groups (tasks) per update")
    parser.add_argument("--group-size", type=int, default=defaults.group_size, help="trajectories per group")
    parser.add_argument("--lr", type=float, default=defaults.lr, help="Adam learning rate")
    parser.add_argument("--eval-every", type=int, default=5, help="updates between evaluations")
    parser.add_argument("--target", type=float, default=0.8, help="success rate for 'env steps to target'")
    parser.add_argument("--workers", type=int, default=2, help="parallel processes")
    parser.add_argument(
        "--keydoor",
        type=keydoor_variant,
        default=(),
        help='KeyDoor variant, task_family keywords as JSON, e.g. \'{"doors": 2, "guard": true}\' (default: none)',
    )


def keydoor_variant(text: str) -> tuple[tuple[str, Any], ...]:
    """``--keydoor``'s JSON object as sorted ``(name, value)`` pairs, checked by drawing one task with them."""
    try:
        values = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"--keydoor must be a JSON object, got {text!r}: {err}") from None
    if not isinstance(values, dict):
        raise argparse.ArgumentTypeError(f"--keydoor must be a JSON object, got {text!r}")
    try:
        task_family("train", 1, **values)
    except (TypeError, ValueError) as err:
        raise argparse.ArgumentTypeError(f"--keydoor {text}: {err}") from None
    return tuple(sorted(values.items()))


def run_configs(args: argparse.Namespace, methods: Sequence[MethodSpec]) -> list[RunConfig]:
    """One :class:`RunConfig` per (method, seed), sharing every other setting."""
    if args.seeds < 1:
        raise SystemExit(f"--seeds must be >= 1, got {args.seeds}")
    return [
        RunConfig(
            method,
            seed=seed,
            updates=args.updates,
            groups=args.groups,
            group_size=args.group_size,
            lr=args.lr,
            eval_every=args.eval_every,
            keydoor=args.keydoor,
        )
        for method in methods
        for seed in range(args.seeds)
    ]


def execute(configs: Sequence[RunConfig], workers: int) -> dict[str, list[dict[str, Any]]]:
    """Run ``configs`` with progress on stderr; group the results by method name (in config order)."""
    start = time.perf_counter()

    def progress(done: int, total: int, result: dict[str, Any]) -> None:
        final = result["curve"][-1]["success"]
        print(
            f"[{done}/{total}] {result['method']} seed {result['seed']}: final success {final:.3f}, "
            f"{result['env_steps']:,} env steps, {result['wall_s']:.1f}s (elapsed {time.perf_counter() - start:.0f}s)",
            file=sys.stderr,
            flush=True,
        )

    results = run_many(configs, workers=workers, progress=progress)
    grouped: dict[str, list[dict[str, Any]]] = {}
    for result in results:
        grouped.setdefault(result["method"], []).append(result)
    return grouped


def settings_of(configs: Sequence[RunConfig]) -> dict[str, Any]:
    """The settings shared by ``configs`` (for the JSON), plus each method's own."""
    shared = dataclasses.asdict(configs[0])
    shared.pop("method")
    shared.pop("seed")
    shared["seeds"] = sorted({c.seed for c in configs})
    methods = {c.method.name: dataclasses.asdict(c.method) for c in configs}
    return {"run": shared, "methods": methods}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m prover_verl.demo", description=__doc__.split("\n\n")[0])
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    configs = run_configs(args, default_methods(ProverConfig()))
    print(HEADER, file=sys.stderr, flush=True)
    print(f"{len(configs)} runs ({args.seeds} seeds x {len(configs) // args.seeds} methods)", file=sys.stderr)
    report = write_report(execute(configs, args.workers), args.out, settings_of(configs), args.target)
    print(HEADER)
    print()
    print(report["table"])
    print(f"\nResults written to {args.out.resolve()} (results.json, results.md, success_vs_env_steps.png)")
    return report


if __name__ == "__main__":
    main()
