"""verl v1 trainer mode ``prover_sync``: verl's synchronous PPO trainer with ProVer's credit (or GiGPO's turn
record) bound to the advantage computation.

Propose and verify already ran inside the rollout (see :mod:`prover_verl.agent.env_agent_loop`), while the
replicas were awake; the batch holds each row's ``prover_credit``. This trainer fetches it with the batch,
logs the ProVer counters, and binds it for the ``prover`` estimator during verl's own ``_compute_advantage``.
With ``adv_estimator=gigpo`` it fetches and binds the per-token ``gigpo_*`` fields the same way.
"""

from __future__ import annotations

import os

import torch
import transfer_queue as tq
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from prover_verl.credit_channel import CREDIT_FIELD, bind_credit, bind_fields, check_credit, whole_groups
from prover_verl.estimator import NAME as ESTIMATOR
from prover_verl.gigpo import FIELDS as GIGPO_FIELDS
from prover_verl.gigpo import NAME as GIGPO
from prover_verl.metrics import FIELD_PREFIX, stat_fields, summarize

TRAINER_MODE = "prover_sync"
VERL_MODE = "sync"
# with trainer.v1.sampler.sync_refill_failed_groups, verl refills every failed group until the step has its batch,
# with no bound: an agent-loop worker whose env pool cannot work (its node cannot host the pool, or the env cannot
# open its data) fails each prompt routed to it, for ever. Refilling more than this many batches in one step fails
# the job instead.
MAX_REFILL_BATCHES = 4
# when set, each step's advantage inputs and outputs are saved there (batch_step<N>.pt): the CPU smoke test
# checks the credited advantages against GRPO's from them (tests/recipes/test_cpu_smoke_on_cpu.py)
DUMP_ENV = "PROVER_DUMP_BATCH_DIR"


@register_trainer(TRAINER_MODE)
class ProverTrainerSync(PPOTrainerSync):
    """Synchronous (on-policy) PPO with ProVer credit; with any other estimator it is verl's ``sync`` trainer."""

    # verl's trainer branches on the literal mode "sync" (replay buffer, refill of failed groups, what goes into
    # TransferQueue and its checkpoints, the trainer.v1.sync.* settings); this trainer must take every one of
    # those branches, so the mode it reports is verl's.
    @property
    def trainer_mode(self) -> str:
        return VERL_MODE

    @trainer_mode.setter
    def trainer_mode(self, value: str) -> None:
        if value not in (TRAINER_MODE, VERL_MODE):
            raise ValueError(f"{type(self).__name__} runs trainer.v1.trainer_mode={TRAINER_MODE}, not {value!r}")

    def prepare_step(self) -> dict:
        self._refilled_prompts = 0
        return super().prepare_step()

    def _add_prompts_to_generate(self, num_prompts: int) -> int:
        # verl's refill of failed groups (its only other caller is the async warm-up, not this sync trainer)
        self._refilled_prompts = getattr(self, "_refilled_prompts", 0) + num_prompts
        check_refills(self._refilled_prompts, self.config.data.train_batch_size, self.global_steps)
        return super()._add_prompts_to_generate(num_prompts)

    def _balance_batch(self, batch, metrics, logging_prefix="global_seqlen", keep_minibatch=False):
        # The replay buffer hands rows over in the order their episodes finished, which changes from run to run,
        # and verl's keys start with a random uid; seqlen balancing, micro-batch packing and the seeded mini-batch
        # shuffle all start from that order, so an update was not a function of the data (measured: identical
        # step-1 rollouts, different pg_loss). Under rollout.full_determinism the rows go first into an order of
        # their content.
        if self.config.actor_rollout_ref.rollout.get("full_determinism", False):
            batch.reorder(content_order(batch))
        return super()._balance_batch(batch, metrics, logging_prefix=logging_prefix, keep_minibatch=keep_minibatch)

    def _compute_advantage(self, batch, metrics: dict):
        estimator = self.config.algorithm.adv_estimator
        metrics.update(self._rollout_counts(batch))
        if estimator == GIGPO:
            fields = self._gigpo_fields(batch)
            with bind_fields(**fields):
                return self._dump_batch(super()._compute_advantage(batch, metrics), **fields)
        if estimator != ESTIMATOR:
            return self._dump_batch(super()._compute_advantage(batch, metrics))
        fields = ["uid", CREDIT_FIELD, "response_mask", *stat_fields()]
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
        padded = data.to_padded_tensor()  # same rows and padding as the fetch in verl's _compute_advantage
        # verl pads a batch to a divisible size with copies of its first row (response_mask zeroed): the copies
        # must carry neither its credit nor its counters
        real = _real_rows(batch)
        credit = padded[CREDIT_FIELD].float() * real.unsqueeze(-1)
        check_credit(credit, padded["response_mask"])
        metrics.update(summarize({key: padded[key] * real for key in stat_fields()}))
        # a group that lost a session after verification trains on plain GRPO (counted, not a crash)
        whole = whole_groups(padded.get("uid").tolist(), real, self.config.actor_rollout_ref.rollout.n)
        partial = (credit.sum(dim=-1) > 0) & ~whole
        metrics["prover/credit_dropped_partial_group"] = float(partial.sum())
        credit = credit * whole.unsqueeze(-1)
        # the share of the step's policy tokens whose advantage ProVer raised (credit lies on policy tokens only)
        policy_tokens = float((padded["response_mask"] * real.unsqueeze(-1)).sum())
        metrics["prover/credited_token_frac"] = float((credit > 0).sum()) / policy_tokens if policy_tokens else 0.0
        with bind_credit(credit):
            return self._dump_batch(super()._compute_advantage(batch, metrics), credit=credit)

    def _rollout_counts(self, batch) -> dict[str, float]:
        """``rollout/env_steps`` and ``rollout/gen_tokens``: what the step's own episodes cost, for every estimator
        (the agent loop writes both counters on each row), so methods can be compared by env steps."""
        fields = [FIELD_PREFIX + "env_steps", FIELD_PREFIX + "gen_tokens"]
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
        padded, real = data.to_padded_tensor(), _real_rows(batch)
        return {f"rollout/{name[len(FIELD_PREFIX) :]}": float((padded[name] * real).sum()) for name in fields}

    def _gigpo_fields(self, batch) -> dict[str, torch.Tensor]:
        """GiGPO's per-token turn record of the batch, as the estimator must see it."""
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=list(GIGPO_FIELDS))
        padded = data.to_padded_tensor()
        # padding rows copy the first row's turns: left in, they would join its anchor groups
        real = _real_rows(batch).unsqueeze(-1)
        return {name: padded[name].long() * real for name in GIGPO_FIELDS}

    def _dump_batch(self, batch, credit: torch.Tensor | None = None, **bound: torch.Tensor):
        """Save the step's scores, mask, groups, log-probs, credit (or other ``bound`` estimator fields) and
        advantages where ``PROVER_DUMP_BATCH_DIR`` says."""
        out = os.environ.get(DUMP_ENV)
        if not out:
            return batch
        fields = ["uid", "response_mask", "rm_scores", "advantages"]
        # the log-probs of the step, where it has them (the KL loss's reference, the actor's, the rollout's)
        optional = ("old_log_probs", "ref_log_prob", "rollout_log_probs", "values")
        fields += [f for f in optional if f in (batch.fields or ())]
        padded = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
        padded = padded.to_padded_tensor()
        dump = {key: padded[key] for key in fields if key != "uid"}
        dump["uid"] = list(padded.get("uid").tolist())
        dump["is_padding"] = [tag.get("is_padding", False) for tag in batch.tags]
        dump["credit"] = credit
        dump.update(bound)
        # (bs, 4, len) where verl built Qwen-VL multimodal positions (text and 3 rotary axes), else (bs, len)
        positions = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["position_ids"])
        dump["position_ids_dim"] = positions["position_ids"].dim()
        os.makedirs(out, exist_ok=True)
        torch.save(dump, os.path.join(out, f"batch_step{self.global_steps}.pt"))
        return batch


def check_refills(refilled: int, batch_size: int, step: int, max_batches: int = MAX_REFILL_BATCHES) -> None:
    """Fail once a step has refilled more than ``max_batches`` batches of failed groups.

    Raises:
        RuntimeError: Naming the step, the count and where the cause is logged.
    """
    if refilled > max_batches * batch_size:
        raise RuntimeError(
            f"step {step}: {refilled} prompts refilled for failed groups, more than {max_batches} batches of "
            f"{batch_size} (trainer.v1.sampler.sync_refill_failed_groups): the rollouts keep failing, e.g. an env "
            f"pool that cannot start on a node; the agent-loop workers' logs say why ('Error in _run_prompt')"
        )


def content_order(batch) -> list[int]:
    """The batch's rows sorted by their tokens (prompt and response), then by their ProVer credit: an order that does
    not depend on when an episode finished or on verl's random uids. Two episodes of a group can play the same tokens
    while only one of them holds the verified segment's credit, so tokens alone leave a tie that is not
    interchangeable (measured: identical step-1 rollouts and counters, different ProVer update); rows equal in both
    are."""
    fields = ["input_ids", CREDIT_FIELD]
    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
    columns = [data[field].unbind(0) for field in fields]
    rows = [tuple(tuple(part.tolist()) for part in parts) for parts in zip(*columns, strict=True)]
    return sorted(range(len(rows)), key=rows.__getitem__)


def _real_rows(batch) -> torch.Tensor:
    """``(bs,)`` bool, false for the copies of the first row verl pads a batch with (tagged ``is_padding``)."""
    return torch.tensor([not tag.get("is_padding", False) for tag in batch.tags], dtype=torch.bool)
