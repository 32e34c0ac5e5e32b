"""benchmarks/learning_eval.sh: every run of a learning benchmark evaluated through recipes/eval (verl stubbed)."""

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import write_val_data

ROOT = Path(__file__).resolve().parents[2]


def _learning_out(root: Path, val_samples: int = 1) -> Path:
    """benchmarks/learning.py's --out (root/out: the results) and --work (root: base data, runs with final
    checkpoints) as the script reads them."""
    (root / "base0" / "data").mkdir(parents=True)
    (root / "out").mkdir()
    settings = {"val_samples": val_samples, "env": "keydoor", "env_kwargs": "{}"}
    (root / "out" / "results.json").write_text(json.dumps({"settings": settings}))
    write_val_data(root / "base0" / "data" / "val.parquet")
    for run, ranks in (("grpo_seed1", 1), ("grpo_seed2", 1), ("prover_oracle1.0_seed1", 2), ("gigpo_seed1", None)):
        for part in ("model/config.json", "model/imitation.json", "data/train.parquet"):  # as cpu_smoke.sh leaves them
            (root / "runs" / run / part).parent.mkdir(parents=True, exist_ok=True)
            (root / "runs" / run / part).touch()
        if ranks is not None:  # gigpo: no checkpoint (a run that failed)
            ckpts = root / "runs" / run / "checkpoints"
            (ckpts / "global_step_3" / "actor").mkdir(parents=True)
            (ckpts / "latest_checkpointed_iteration.txt").write_text("3")
            (ckpts / "global_step_3" / "actor" / "fsdp_config.json").write_text(json.dumps({"world_size": ranks}))
    return root


def _run(out: Path, path: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "learning_eval.sh"), str(out / "out"), str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path},
        timeout=300,
    )


def test_every_final_checkpoint_is_evaluated_and_compared_to_grpo(tmp_path, stub_verl_path):
    out = _learning_out(tmp_path / "learn")
    done = _run(out, stub_verl_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "gigpo_seed1: no checkpoint, skipped" in done.stderr
    logs = out / "eval" / "keydoor" / "logs"
    args = (logs / "ProVer (oracle 1.0)" / "tiny" / "seed1" / "args.txt").read_text().splitlines()
    ckpt = out / "runs" / "prover_oracle1.0_seed1" / "checkpoints" / "global_step_3"
    assert f"trainer.resume_from_path='{ckpt}'" in args and "trainer.val_only=true" in args
    assert f"data.val_files={out / 'base0' / 'data' / 'val.parquet'}" in args
    assert f"actor_rollout_ref.model.path={out / 'runs' / 'prover_oracle1.0_seed1' / 'model'}" in args
    assert "trainer.n_gpus_per_node=2" in args and "trainer.device=cpu" in args  # the ranks it was saved with
    assert "actor_rollout_ref.rollout.val_kwargs.do_sample=true" not in args  # greedy, as the benchmark validated
    assert "trainer.n_gpus_per_node=1" in (logs / "GRPO" / "tiny" / "seed2" / "args.txt").read_text().splitlines()
    tables = (out / "eval" / "keydoor" / "tables.md").read_text()
    assert (
        "| GRPO/tiny/seed1 | 100.0 |\n| GRPO/tiny/seed2 | 0.0 |\n| ProVer (oracle 1.0)/tiny/seed1 | 100.0 |" in tables
    )
    compare = (out / "eval" / "compare" / "compare.md").read_text()
    assert "| GRPO | 50.0 ± 70.7 | 50.0 | +0.0 |\n| ProVer (oracle 1.0) | 100.0 | 100.0 | +100.0 |\n" in compare
    assert compare in done.stdout and "3 checkpoints evaluated" in done.stdout
    again = _run(out, stub_verl_path)  # nothing newer than its logs: nothing evaluated again, the same table
    assert again.returncode == 0 and "0 checkpoints evaluated" in again.stdout
    assert again.stdout.count("evaluated already") == 3 and compare in again.stdout


def test_not_a_learning_work_is_an_error(tmp_path, stub_verl_path):
    out = _learning_out(tmp_path / "learn")
    (out / "runs").rename(out / "elsewhere")
    done = _run(out, stub_verl_path)
    assert done.returncode == 2 and "not a benchmarks/learning.py --work" in done.stderr


def test_a_sampled_benchmark_is_evaluated_sampled_as_it_validated(tmp_path, stub_verl_path):
    out = _learning_out(tmp_path / "learn", val_samples=4)
    done = _run(out, stub_verl_path)
    assert done.returncode == 0, done.stderr[-3000:]
    args = (out / "eval" / "keydoor" / "logs" / "GRPO" / "tiny" / "seed1" / "args.txt").read_text().splitlines()
    # run_eval.sh's greedy defaults come first; hydra takes the last value of a key
    prefix = "actor_rollout_ref.rollout.val_kwargs."
    assert args.index(f"{prefix}n=4") > args.index(f"{prefix}n=1")
    assert args.index(f"{prefix}do_sample=true") > args.index(f"{prefix}do_sample=false")
    assert args.index(f"{prefix}temperature=1.0") > args.index(f"{prefix}temperature=0")
    # seeded as the run's validation was: the same draws (measured: 0.461 = the run's last validation)
    assert "actor_rollout_ref.rollout.full_determinism=true" in args and "actor_rollout_ref.rollout.seed=1" in args
    seed2 = (out / "eval" / "keydoor" / "logs" / "GRPO" / "tiny" / "seed2" / "args.txt").read_text().splitlines()
    assert "actor_rollout_ref.rollout.seed=2" in seed2


def test_an_unfinished_benchmark_is_an_error(tmp_path, stub_verl_path):
    out = _learning_out(tmp_path / "learn")
    (out / "out" / "results.json").unlink()
    done = _run(out, stub_verl_path)
    assert done.returncode == 2 and "let benchmarks/learning.py finish first" in done.stderr
