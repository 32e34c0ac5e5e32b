"""Cost of ProVer in verl's real training loop on CPU: the recipes' ``--cpu-smoke`` at K = 2 and K = 4.

    python benchmarks/loop_bench.py                                   # alfworld, webshop, searchqa; K = 2, 4
    python benchmarks/loop_bench.py --envs searchqa --ks 2,4,8 --steps 3 --out /tmp/loop_bench

For each env the same tiny imitated model and data (built once, recipes/cpu_smoke.sh) train ``--steps`` steps per
K. From verl's own timing metrics and the ``prover/*`` counters of each run it reports, per step (mean over the
steps after the first, which pays the warm-up): rollout (``timing_s/gen``, which contains the judge and the
verifier: they run inside the rollout while the replicas are awake), the judge's and the verifier's time
(``prover/judge_seconds``, ``prover/verify_seconds``: summed over a step's groups, which overlap one another), the
advantage, and the update (old log-prob + actor update + weight sync); and the verifier's env steps and generated
tokens as a ratio of the main rollout's. Step time is also given as a ratio to the first K's, measured in the
same invocation. A random tiny model says nothing about learning: these are costs of the loop's machinery.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from prover_verl.cpu.smoke import logged_steps, run_smoke

ROOT = Path(__file__).resolve().parents[1]
PHASES = {
    "rollout_s": ("timing_s/gen",),
    "judge_s": ("prover/judge_seconds",),
    "verify_s": ("prover/verify_seconds",),
    "adv_s": ("timing_s/adv",),
    "update_s": ("timing_s/old_log_prob", "timing_s/update_actor", "timing_s/update_weights"),
    "step_s": ("timing_s/step",),
}
RATIOS = {"verify_env_steps_x": "prover/verify_env_steps_frac", "verify_gen_tokens_x": "prover/verify_gen_tokens_frac"}


def summarize(steps: dict[int, dict]) -> dict[str, float]:
    """Mean per step over the steps after the first (all of them if there is only one)."""
    measured = [steps[s] for s in sorted(steps)[1:]] or list(steps.values())
    row = {}
    for name, keys in PHASES.items():
        row[name] = sum(sum(float(m.get(key, 0.0)) for key in keys) for m in measured) / len(measured)
    for name, key in RATIOS.items():
        row[name] = sum(float(m.get(key, 0.0)) for m in measured) / len(measured)
    row["groups_with_pair"] = sum(float(m.get("prover/groups_with_pair", 0.0)) for m in measured) / len(measured)
    row["steps_measured"] = len(measured)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", default="alfworld,webshop,searchqa")
    parser.add_argument("--ks", default="2,4", help="comma-separated K values; the first is the baseline")
    parser.add_argument("--steps", type=int, default=3, help="training steps per run (the first is not measured)")
    parser.add_argument("--out", default="loop_bench", help="directory for the runs, the table and loop_bench.json")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    ks = [int(k) for k in args.ks.split(",")]
    results = []
    for env in args.envs.split(","):
        assets = None
        base_step = None
        for k in ks:
            started = time.perf_counter()
            print(f"{env} K={k}: running {args.steps} steps ...", file=sys.stderr, flush=True)
            recipe = ROOT / "recipes" / env / "run_prover_qwen3.5_2b.sh"
            run_dir = out / f"{env}_k{k}"
            run_smoke(recipe, run_dir, args.steps, assets, SMOKE_K=str(k), SMOKE_JUDGE="heuristic")
            row = summarize(logged_steps(run_dir, args.steps))
            assets = assets or run_dir
            base_step = base_step or row["step_s"]
            row.update(env=env, k=k, step_vs_first_k=row["step_s"] / base_step)
            row["run_wall_s"] = time.perf_counter() - started
            results.append(row)
    columns = ["env", "k", *PHASES, "step_vs_first_k", *RATIOS, "groups_with_pair"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in results:
        cells = [f"{row[c]:.2f}" if isinstance(row[c], float) else str(row[c]) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(table)
    (out / "loop_bench.md").write_text(table + "\n")
    (out / "loop_bench.json").write_text(json.dumps({"steps": args.steps, "results": results}, indent=1))
    print(f"wrote {out / 'loop_bench.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
