"""The recipes' ``--cpu-smoke``: verl's real v1 training loop on CPU, end to end, checked from the run's outputs.

Each case runs a shipped recipe with the tiny model of recipes/cpu_smoke.sh (random init, then imitation of the
env's expert to a 0.5 replay probability, so that groups hold wins and losses): 2 training steps with validation
and a checkpoint at step 2. The ALFWorld ProVer case then runs again with 3 steps, which must resume from that
checkpoint, with the policy as the judge. The tiny model and data of an env are built once and shared by its cases.
Slow (2-4 minutes a run on 2 cores, about 15 minutes in all): marked ``slow`` and given a time budget.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from prover_verl.config import ProverConfig
from prover_verl.cpu import smoke
from prover_verl.cpu.hf_replica import DUMP_ENV as REPLICA_DUMP_ENV
from prover_verl.cpu.smoke import logged_steps
from prover_verl.trainer import DUMP_ENV as BATCH_DUMP_ENV

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 900
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2 * RUN_TIMEOUT_S + 120)]
_ASSETS: dict[str, Path] = {}  # env -> smoke dir whose tiny model and data later cases of that env copy


def run_smoke(recipe: str, smoke_dir: Path, steps: int, judge: str = "heuristic") -> None:
    """Run ``recipe --cpu-smoke`` in ``smoke_dir`` with the batch and replica dumps on, sharing the env's assets."""
    env_name = recipe.split("/")[1]
    dumps = {BATCH_DUMP_ENV: str(smoke_dir / "batches"), REPLICA_DUMP_ENV: str(smoke_dir / "replica")}
    smoke.run_smoke(ROOT / recipe, smoke_dir, steps, _ASSETS.get(env_name), RUN_TIMEOUT_S, SMOKE_JUDGE=judge, **dumps)
    _ASSETS.setdefault(env_name, smoke_dir)


def check_credit_is_exactly_the_prover_term(dump: dict, coef: float, eps: float = 1e-6) -> int:
    """Recompute GRPO from the dumped scores: advantages differ from it only where credited, by coef*c/(std+eps).

    Returns the number of credited tokens.
    """
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    real = ~torch.tensor(dump["is_padding"])
    mask = dump["response_mask"].float()
    scores = dump["rm_scores"].float()
    index = np.array(dump["uid"], dtype=object)
    grpo, _ = compute_grpo_outcome_advantage(scores, mask, index, epsilon=eps, norm_adv_by_std_in_grpo=True)
    diff = (dump["advantages"].float() - grpo) * mask
    credit = dump["credit"] if dump["credit"] is not None else torch.zeros_like(mask)
    credited = (credit > 0) & (mask > 0) & real.unsqueeze(-1)
    outcome = scores.sum(-1)
    expected = torch.zeros_like(diff)
    for row in torch.nonzero(credited.any(-1)).flatten().tolist():
        group = [i for i, u in enumerate(dump["uid"]) if u == dump["uid"][row] and real[i]]
        std = torch.std(outcome[group])
        expected[row] = coef * credit[row] / (std + eps) * mask[row]
    torch.testing.assert_close(diff[real], expected[real], atol=1e-5, rtol=1e-5)
    return int(credited.sum())


def check_weights(smoke_dir: Path) -> None:
    """The actor changed after an update, and the replica holds the actor's weights after each sync."""
    replica = smoke_dir / "replica"
    initial = torch.load(replica / "replica0_step0.pt")
    after_step1 = torch.load(replica / "replica0_step1.pt")
    assert any(not torch.equal(initial[k], after_step1[k]) for k in initial), "the update changed no weight"
    after_step2 = torch.load(replica / "replica0_step2.pt")
    actor = actor_weights(smoke_dir / "checkpoints" / "global_step_2" / "actor")
    for name, tensor in actor.items():
        torch.testing.assert_close(after_step2[name], tensor.float(), msg=f"replica differs from actor on {name}")


def actor_weights(actor_dir: Path) -> dict[str, torch.Tensor]:
    """The actor's full weights from verl's checkpoint (its Hugging Face export when present)."""
    hf = actor_dir / "huggingface"
    if (hf / "model.safetensors").exists():
        from safetensors.torch import load_file

        return load_file(hf / "model.safetensors")
    shards = sorted(actor_dir.glob("model_world_size_1_rank_0.pt"))
    assert shards, f"no actor weights under {actor_dir}: {sorted(p.name for p in actor_dir.iterdir())}"
    state = torch.load(shards[0], weights_only=False)
    return {k: (v.full_tensor() if hasattr(v, "full_tensor") else v) for k, v in state.items()}


def check_run(smoke_dir: Path, estimator: str) -> dict[int, dict]:
    """Assertions shared by every case, on steps 1-2; returns the metrics per step."""
    steps = logged_steps(smoke_dir, 2)
    assert {1, 2} <= set(steps), f"steps logged: {sorted(steps)}"
    assert any(k.startswith("val-core/") for k in steps[2]), "no validation metrics at step 2"
    assert (smoke_dir / "checkpoints" / "global_step_2").is_dir()
    assert (smoke_dir / "checkpoints" / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    credited = 0
    for step in (1, 2):
        dump = torch.load(smoke_dir / "batches" / f"batch_step{step}.pt", weights_only=False)
        credited += check_credit_is_exactly_the_prover_term(dump, coef=ProverConfig().coef)
        if estimator == "grpo":
            assert dump["credit"] is None
    check_weights(smoke_dir)
    if estimator == "prover":
        for step in (1, 2):
            assert {"prover/groups", "prover/groups_with_pair", "prover/verify_env_steps_frac"} <= set(steps[step])
            assert steps[step]["prover/groups"] == 2
        # the imitated policy wins some episodes and loses others: groups with a pair are verified
        assert sum(steps[s]["prover/groups_with_pair"] for s in (1, 2)) > 0, steps
        assert sum(steps[s]["prover/verify_env_steps_frac"] for s in (1, 2)) > 0, steps
    else:
        assert credited == 0 and not any(k.startswith("prover/") for k in steps[1])
    return steps


def check_policy_judge_step(metrics: dict) -> None:
    """With the policy as judge every group with a pair got an answer from the replica, classified, not raised."""
    groups = metrics["prover/groups"]
    pairs = round(metrics["prover/groups_with_pair"] * groups)
    answered = round(metrics["prover/groups_with_proposal"] * groups) + sum(
        metrics[f"prover/judge_{s}"] for s in ("malformed", "out_of_range", "empty")
    )
    assert metrics["prover/judge_error"] == 0 and metrics["prover/judge_too_long"] == 0, metrics
    assert pairs > 0 and answered == pairs, metrics


CASES = [
    ("recipes/alfworld/run_prover_qwen3.5_2b.sh", "prover"),
    ("recipes/webshop/run_prover_qwen3.5_2b.sh", "prover"),
    ("recipes/searchqa/run_prover_qwen3.5_2b.sh", "prover"),
    ("recipes/alfworld/run_grpo_qwen3.5_2b.sh", "grpo"),
]


@pytest.mark.parametrize(("recipe", "estimator"), CASES, ids=lambda v: v.split("/")[1] if "/" in v else v)
def test_cpu_smoke_trains_validates_and_checkpoints(tmp_path, recipe, estimator):
    smoke_dir = tmp_path / "smoke"
    run_smoke(recipe, smoke_dir, steps=2)
    steps = check_run(smoke_dir, estimator)
    print(json.dumps({k: v for k, v in steps[2].items() if k.startswith(("prover/", "timing_s/"))}, indent=1))
    if recipe == CASES[0][0]:
        # resume from the step-2 checkpoint, with the policy's own replica as the judge this time
        run_smoke(recipe, smoke_dir, steps=3, judge="policy")
        resumed = logged_steps(smoke_dir, 3)
        assert set(resumed) == {3}, f"the resumed run logged steps {sorted(resumed)}, not only step 3"
        check_policy_judge_step(resumed[3])
        dump = torch.load(smoke_dir / "batches" / "batch_step3.pt", weights_only=False)
        check_credit_is_exactly_the_prover_term(dump, coef=ProverConfig().coef)
