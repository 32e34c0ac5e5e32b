"""ProVer with the served judge model in verl's real loop (a recipe's ``--cpu-smoke``), read from the run's metrics.

``python benchmarks/judge_model_loop.py --judge MODEL_DIR --out OUT`` serves the judge model
(``python -m prover_verl.judge_model.train``) with ``recipes/judge/serve_judge.sh``, runs the KeyDoor ProVer
recipe's ``--cpu-smoke`` with ``algorithm.prover.judge.type=openai`` pointed at it (nothing else changes), stops the
server, and writes ``OUT/summary.json``: the judge's statuses, its pivot hit rate, the verified-positive rate and
the judge's seconds per judged group and as a share of verl's step time, pooled over the steps; and
``OUT/report.html`` (``python -m prover_verl.inspect``), which shows each group's raw answer.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVE = ROOT / "recipes" / "judge" / "serve_judge.sh"
RECIPE = ROOT / "recipes" / "keydoor" / "run_prover_qwen3.5_2b.sh"
JUDGE_COUNTS = ("malformed", "out_of_range", "empty", "too_long", "error")


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def served_judge(model_dir: Path, work_dir: Path, ready_timeout_s: float = 600) -> Iterator[list[str]]:
    """Serve ``model_dir`` with ``recipes/judge/serve_judge.sh`` on a free port until the block ends; yields the
    hydra overrides that point ``algorithm.prover.judge`` at it (``type=openai``, its URL and model name).

    Raises:
        RuntimeError: the server did not come up (the message holds its log's last lines).
    """
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # this venv's servers
        "JUDGE_HOST": "127.0.0.1",  # a local run: loopback only (the script's default serves every interface)
        "JUDGE_PORT": str(free_port()),
        "JUDGE_DIR": str(work_dir),
        "JUDGE_READY_TIMEOUT_S": str(int(ready_timeout_s)),
    }
    started = subprocess.run(["bash", str(SERVE), str(model_dir)], env=env, capture_output=True, text=True)
    if started.returncode != 0:
        raise RuntimeError(f"{SERVE} failed (exit {started.returncode}):\n{started.stderr}")
    try:
        yield started.stdout.split()
    finally:
        subprocess.run(["bash", str(SERVE), "--stop"], env=env, check=False)


def judge_summary(steps: dict[int, dict]) -> dict[str, float]:
    """The served judge's counts and rates pooled over the logged steps (``prover/*`` and ``timing_s/step``)."""

    def total(name: str) -> float:
        return sum(metrics[name] for metrics in steps.values())

    groups = total("prover/groups")
    judged = {
        s: round(m["prover/groups_with_pair"] * m["prover/groups"]) - m["prover/skipped_budget"]
        for s, m in steps.items()
    }
    ok = sum(round(m["prover/groups_with_proposal"] * m["prover/groups"]) for m in steps.values())
    pivot_known, verified = total("prover/pivot_known"), total("prover/verified")
    judge_s, step_s = total("prover/judge_seconds"), total("timing_s/step")
    return {
        "steps": len(steps),
        "groups": groups,
        "judged_groups": sum(judged.values()),
        "judge_ok": ok,
        **{f"judge_{name}": total(f"prover/judge_{name}") for name in JUDGE_COUNTS},
        "pivot_known": pivot_known,
        "pivot_hit": total("prover/pivot_hit"),
        "judge_pivot_hit_rate": total("prover/pivot_hit") / pivot_known if pivot_known else None,
        "verified": verified,
        "positive": total("prover/positive"),
        "verified_positive_rate": total("prover/positive") / verified if verified else None,
        "judge_seconds": round(judge_s, 2),
        "judge_seconds_per_judged_group": round(judge_s / sum(judged.values()), 3) if sum(judged.values()) else None,
        "step_seconds": round(step_s, 1),
        # the groups of a step are judged concurrently: summed judge seconds over the step's wall time
        "judge_share_of_step": round(judge_s / step_s, 4) if step_s else None,
    }


def main(argv: list[str] | None = None) -> None:
    from prover_verl import inspect
    from prover_verl.cpu.smoke import logged_steps, run_smoke

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--judge", required=True, help="judge model directory (python -m prover_verl.judge_model.train)"
    )
    parser.add_argument("--out", required=True, help="run directory (SMOKE_DIR) and summary")
    parser.add_argument("--steps", type=int, default=2, help="SMOKE_STEPS")
    parser.add_argument("--env-kwargs", default="{}", help="ENV_KWARGS of the recipe (the judge's env kwargs)")
    parser.add_argument("--timeout-s", type=float, default=1800, help="limit of the training run")
    parser.add_argument("overrides", nargs="*", help="further hydra overrides of the recipe")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    with served_judge(Path(args.judge), out / "judge_server") as judge_overrides:
        run_smoke(
            RECIPE,
            out,
            args.steps,
            timeout_s=args.timeout_s,
            overrides=[*judge_overrides, *args.overrides],
            ENV_KWARGS=args.env_kwargs,
        )
    summary = {
        "judge": str(Path(args.judge).resolve()),
        "overrides": judge_overrides,
        **judge_summary(logged_steps(out, args.steps)),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    inspect.main([str(out / "group_log"), "--out", str(out / "report.html")])
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
