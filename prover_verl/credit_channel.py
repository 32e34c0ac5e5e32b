"""How per-token batch fields reach an estimator inside verl's dispatcher: ProVer's credit, GiGPO's steps.

verl's ``compute_advantage`` hands a registered estimator only ``token_level_rewards``, ``response_mask``,
``index`` and ``config``: no other batch field. The batch carries ProVer's credit as the per-token field
``prover_credit`` (and GiGPO's per-turn state keys as ``gigpo_*`` fields), written by the agent loop and fetched
with the batch by the ``prover_sync`` trainer; the trainer binds those tensors here for the duration of the
``compute_advantage`` call, and the estimator reads them back. A context variable keeps concurrent calls
(threads, asyncio tasks) apart, and an estimator refuses to run with nothing bound, so ProVer or GiGPO can never
silently degrade to GRPO.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections import Counter
from collections.abc import Iterator, Sequence

import torch

CREDIT_FIELD = "prover_credit"

_fields: contextvars.ContextVar[dict[str, torch.Tensor] | None] = contextvars.ContextVar(
    "prover_batch_fields", default=None
)


@contextlib.contextmanager
def bind_fields(**fields: torch.Tensor) -> Iterator[dict[str, torch.Tensor]]:
    """Make per-token batch fields (each ``(bs, response_length)``, rows in batch order) visible to the estimator."""
    for name, value in fields.items():
        if not isinstance(value, torch.Tensor) or value.dim() != 2:
            raise ValueError(f"{name} must be a 2-D tensor (bs, response_length), got {value!r:.80}")
    token = _fields.set(dict(fields))
    try:
        yield fields
    finally:
        _fields.reset(token)


@contextlib.contextmanager
def bind_credit(credit: torch.Tensor) -> Iterator[torch.Tensor]:
    """Make ``credit`` (``(bs, response_length)``, rows in batch order) visible to the ``prover`` estimator."""
    with bind_fields(**{CREDIT_FIELD: credit}):
        yield credit


def bound_field(name: str, estimator: str, description: str) -> torch.Tensor:
    """Return the field ``name`` bound by :func:`bind_fields` for ``algorithm.adv_estimator=estimator``.

    Args:
        name: The batch field.
        estimator: The estimator asking (named in the error).
        description: What the field holds, for the error (e.g. "ProVer credit").

    Raises:
        RuntimeError: nothing (or not that field) is bound: the estimator runs without the ``prover_sync`` trainer.
    """
    fields = _fields.get() or {}
    if name not in fields:
        raise RuntimeError(
            f"algorithm.adv_estimator={estimator} found no {description} ('{name}') for this batch. It comes from the "
            "ProVer agent loop and is bound by the ProVer trainer (trainer.v1.trainer_mode=prover_sync); "
            "to train plain GRPO set algorithm.adv_estimator=grpo."
        )
    return fields[name]


def check_credit(credit: torch.Tensor, response_mask: torch.Tensor, policy_tokens_only: bool = True) -> None:
    """Check per-token credit against a response mask.

    Args:
        credit: ``(bs, response_length)``.
        response_mask: ``(bs, response_length)``, 1 for policy tokens.
        policy_tokens_only: Also require zero credit where the mask is 0; true against the mask the agent loop
            wrote the credit with, false against a mask that verl may have narrowed since.

    Raises:
        ValueError: the shapes differ, a value is negative (only positive estimates are credited), or (with
            ``policy_tokens_only``) an environment / padding token carries credit.
    """
    if credit.shape != response_mask.shape:
        raise ValueError(
            f"{CREDIT_FIELD} has shape {tuple(credit.shape)} but response_mask has {tuple(response_mask.shape)}; "
            "the credit must be fetched with the same batch rows"
        )
    if (credit < 0).any():
        raise ValueError(f"{CREDIT_FIELD} holds negative values: only positive verified estimates are credited")
    if policy_tokens_only and (credit[response_mask == 0] != 0).any():
        raise ValueError(f"{CREDIT_FIELD} is non-zero on non-policy tokens: credit and response_mask are misaligned")


def whole_groups(uids: Sequence[str], real: torch.Tensor, group_size: int) -> torch.Tensor:
    """Which rows belong to a group that reached the batch whole: all ``group_size`` of its real rows.

    The verifier credited a segment against the full group it saw. A session that fails after that (a
    rendezvous timeout, an error in verl's post-processing) leaves a partial group in the batch, whose GRPO
    std is not the one the credit was meant for and may be 0 (uniform survivors).

    Args:
        uids: Group id per row.
        real: ``(bs,)`` bool, false for verl's padding rows.
        group_size: Rows per group (``actor_rollout_ref.rollout.n``).

    Returns:
        ``(bs,)`` bool.
    """
    rows = list(zip(uids, real.tolist(), strict=True))
    counts = Counter(uid for uid, is_real in rows if is_real)
    return torch.tensor([is_real and counts[uid] == group_size for uid, is_real in rows], dtype=torch.bool)


def bound_credit() -> torch.Tensor:
    """Return the credit bound by :func:`bind_credit`.

    Raises:
        RuntimeError: nothing is bound (``adv_estimator=prover`` used without the ProVer trainer).
    """
    return bound_field(CREDIT_FIELD, "prover", "ProVer credit")
