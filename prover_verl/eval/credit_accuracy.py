"""Credit accuracy: how well a method's per-turn advantage matches each turn's true advantage.

On an env whose states can be forked exactly, the true advantage of turn ``t`` of a logged trajectory under the
current policy is ``A*(s_t, a_t) = Q(s_t, a_t) - V(s_t)``; with a deterministic transition and the outcome as the
only reward, ``Q(s_t, a_t) = V(s_{t+1})``, so ``A*_t = V(s_{t+1}) - V(s_t)``, and ``V`` of every state the
trajectory passed through is estimated by continuations from it (:func:`true_advantages`). The terminal state's
value is the trajectory's own outcome, known without sampling.

:func:`credit_accuracy` then compares any method's per-turn advantage (GRPO's, which is the row's outcome
advantage on every turn; GiGPO's; ProVer's, GRPO plus the verified segment's credit) with those estimates:

* ``correlation``: Pearson's r between the method's advantage and ``A*`` over all turns;
* ``pivotal_sign_agreement`` / ``other_sign_agreement``: over the turns whose ``A*`` is clearly non-zero
  (:func:`null_turns`), the share where the method's advantage has ``A*``'s sign and the share where it has the
  opposite sign (a zero advantage, e.g. GRPO's in a group without a pair, is in neither), on the pivotal turns and
  on the others;
* ``null_weight_share``: the share of the method's gradient weight ``sum |advantage|`` on the turns whose ``A*``
  is about zero, i.e. turns whose action did not matter: a policy-gradient step puts that share of its weight on
  pure noise; ``null_gradient_share`` weighs each turn also by the size of its log-probability's gradient (given as
  ``grad_scale``, e.g. ``||onehot(a) - pi(.|s)||`` with respect to the logits), which is small where the policy is
  already near-deterministic, so that turns a policy no longer varies on count for little.

Nothing here samples; the benchmark (``benchmarks/credit_accuracy.py``) plays the continuations.
:func:`credit_accuracy_from_group_log` reads the same comparison off the group log of an ``every_turn`` run of
verl's real loop, whose verifier already forked every turn of one trajectory per group.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from prover_verl.core import ForkOutcome

NULL_TOLERANCE = 0.02
NULL_SEMS = 2.0


def true_advantages(values: Sequence[ForkOutcome]) -> tuple[np.ndarray, np.ndarray]:
    """Per-turn true advantages of one trajectory from its state values.

    Args:
        values: ``T + 1`` outcomes: ``values[t]`` of the continuations from the state before turn ``t``,
            ``values[T]`` the trajectory's own outcome (``ForkOutcome(int(won), 1)``: variance 0).

    Returns:
        ``(advantage, sem)``, both ``(T,)``: ``rate[t + 1] - rate[t]`` and its standard error from independent
        continuations, ``sqrt(var[t] + var[t + 1])`` with the plug-in Bernoulli variances.
    """
    if len(values) < 2:
        raise ValueError(f"need the values of at least two states (one turn), got {len(values)}")
    rate = np.array([v.rate for v in values], dtype=np.float64)
    variance = np.array([v.variance for v in values], dtype=np.float64)
    return rate[1:] - rate[:-1], np.sqrt(variance[1:] + variance[:-1])


def null_turns(
    advantage: np.ndarray, sem: np.ndarray, tolerance: float = NULL_TOLERANCE, sems: float = NULL_SEMS
) -> np.ndarray:
    """Turns whose true advantage is about zero: ``|A*| <= max(tolerance, sems * sem)``."""
    advantage, sem = np.asarray(advantage, dtype=np.float64), np.asarray(sem, dtype=np.float64)
    if advantage.shape != sem.shape:
        raise ValueError(f"advantage {advantage.shape} and sem {sem.shape} must have one shape")
    return np.abs(advantage) <= np.maximum(tolerance, sems * sem)


def _sign_shares(method: np.ndarray, truth: np.ndarray) -> tuple[float | None, float | None]:
    """Shares of turns where the method's sign is ``truth``'s, and where it is the opposite (zero is neither)."""
    if truth.size == 0:
        return None, None
    product = np.sign(method) * np.sign(truth)
    return float(np.mean(product > 0)), float(np.mean(product < 0))


def credit_accuracy(
    method: np.ndarray,
    truth: np.ndarray,
    sem: np.ndarray,
    pivotal: np.ndarray,
    tolerance: float = NULL_TOLERANCE,
    sems: float = NULL_SEMS,
    grad_scale: np.ndarray | None = None,
) -> dict[str, Any]:
    """Compare a method's per-turn advantages with the true ones, over the turns of a batch (flattened).

    Args:
        method: ``(turns,)`` the method's advantage of each turn (its policy tokens' value).
        truth: ``(turns,)`` the estimated true advantage ``A*`` of each turn.
        sem: ``(turns,)`` the standard error of ``truth``.
        pivotal: ``(turns,)`` bool, the turns the env marks as the decision (e.g. KeyDoor's key room).
        tolerance: ``A*`` at most this (or ``sems`` standard errors) counts as zero (:func:`null_turns`).
        sems: See ``tolerance``.
        grad_scale: ``(turns,)`` the size of each turn's log-probability gradient, for ``null_gradient_share``
            (None: that entry is None).

    Returns:
        ``turns``, ``null_turns``, ``pivotal_turns`` and ``other_turns`` (the clearly non-zero ones, on which the
        sign agreements are measured), ``correlation`` (None where either side is constant),
        ``pivotal_sign_agreement``, ``other_sign_agreement`` (None where no such turn) and
        ``pivotal_opposite_sign``, ``other_opposite_sign`` (the share with the opposite sign; a zero advantage is in
        neither), ``null_weight_share`` and ``null_gradient_share`` (None where the method's advantages are all
        zero, or no ``grad_scale``).
    """
    method, truth = np.asarray(method, dtype=np.float64), np.asarray(truth, dtype=np.float64)
    pivotal = np.asarray(pivotal, dtype=bool)
    if not method.shape == truth.shape == pivotal.shape == np.shape(sem) or method.ndim != 1:
        raise ValueError(
            f"method {method.shape}, truth {truth.shape}, sem {np.shape(sem)} and pivotal {pivotal.shape} must be "
            "one 1-D shape"
        )
    null = null_turns(truth, sem, tolerance, sems)
    signed_pivotal = pivotal & ~null
    signed_other = ~pivotal & ~null
    correlation = None
    if method.size > 1 and method.std() > 0 and truth.std() > 0:
        correlation = float(np.corrcoef(method, truth)[0, 1])
    weight = np.abs(method)
    total = float(weight.sum())
    gradient_share = None
    if grad_scale is not None:
        grad_scale = np.asarray(grad_scale, dtype=np.float64)
        if grad_scale.shape != method.shape or (grad_scale < 0).any():
            raise ValueError(f"grad_scale must be {method.shape}, non-negative, got {grad_scale.shape}")
        gradient = weight * grad_scale
        gradient_share = float(gradient[null].sum() / gradient.sum()) if gradient.sum() > 0 else None
    pivotal_agree, pivotal_opposite = _sign_shares(method[signed_pivotal], truth[signed_pivotal])
    other_agree, other_opposite = _sign_shares(method[signed_other], truth[signed_other])
    return {
        "turns": int(method.size),
        "null_turns": int(null.sum()),
        "pivotal_turns": int(signed_pivotal.sum()),
        "other_turns": int(signed_other.sum()),
        "correlation": correlation,
        "pivotal_sign_agreement": pivotal_agree,
        "pivotal_opposite_sign": pivotal_opposite,
        "other_sign_agreement": other_agree,
        "other_opposite_sign": other_opposite,
        "null_weight_share": float(weight[null].sum()) / total if total > 0 else None,
        "null_gradient_share": gradient_share,
    }


def mean_sem(values: Sequence[float | None]) -> tuple[float | None, float | None, int]:
    """Mean, standard error of the mean (None with fewer than two values) and count of the values that are not
    None."""
    kept = [float(v) for v in values if v is not None]
    if not kept:
        return None, None, 0
    mean = sum(kept) / len(kept)
    if len(kept) < 2:
        return mean, None, 1
    variance = sum((v - mean) ** 2 for v in kept) / (len(kept) - 1)
    return mean, math.sqrt(variance / len(kept)), len(kept)


def every_turn_record_turns(
    record: Mapping[str, Any], coef: float, norm_by_std: bool = True, epsilon: float = 1e-6
) -> dict[str, np.ndarray] | None:
    """The per-turn true advantages and methods' advantages that one group-log line of an ``every_turn`` run holds.

    With ``algorithm.prover.ablation=every_turn`` the group log (:mod:`prover_verl.eval.group_log`) records, for the
    proposed trajectory, every turn's fork outcomes before and after it: ``A*_t`` with its sem from those ``k``
    continuations, on a batch of verl's real loop. Beside it the trajectory's GRPO advantage (from the group's
    rewards, as :func:`~prover_verl.core.group_outcome_advantage`) and ProVer's (GRPO's plus ``coef`` times the
    logged credit, divided by ``std + epsilon`` as the ``prover`` estimator does under ``norm_by_std``).

    Returns:
        ``truth``, ``sem``, ``pivotal``, ``grpo`` and ``prover``, one entry a turn; None for a line that is not a
        complete ``every_turn`` verification (no proposal, or segments that are not each single turn of it).
    """
    judge = record.get("judge") or {}
    proposal = judge.get("proposal")
    segments = record.get("segments") or []
    if proposal is None or not segments:
        return None
    traj = proposal["traj_id"]
    trajectories = {t["id"]: t for t in record["trajectories"]}
    turns = trajectories[traj]["turns"]
    if sorted(tuple(s["turns"]) for s in segments) != [(t, t) for t in range(turns)]:
        return None
    truth, sem = np.zeros(turns), np.zeros(turns)
    for s in segments:
        before = ForkOutcome(s["before"]["successes"], s["before"]["samples"])
        after = ForkOutcome(s["after"]["successes"], s["after"]["samples"])
        (truth[s["turns"][0]],), (sem[s["turns"][0]],) = true_advantages([before, after])
    rewards = np.array([t["reward"] for t in record["trajectories"]], dtype=np.float64)
    mean = rewards.mean()
    std = rewards.std(ddof=1) if len(rewards) > 1 else 1.0
    reward = float(trajectories[traj]["reward"])
    grpo = (reward - mean) / (std + epsilon) if norm_by_std else reward - mean
    credit = np.zeros(turns)
    for c in record.get("credits") or []:
        if c["traj"] == traj and c["turns"]:
            span = slice(c["turns"][0], c["turns"][1] + 1)
            credit[span] = np.maximum(credit[span], c["value"])
    scale = 1.0 / (std + epsilon) if norm_by_std else 1.0
    pivot = trajectories[traj].get("pivot_turn")
    return {
        "truth": truth,
        "sem": sem,
        "pivotal": np.arange(turns) == (pivot if pivot is not None else -1),
        "grpo": np.full(turns, grpo),
        "prover": grpo + coef * scale * credit,
    }


def credit_accuracy_from_group_log(
    records: Sequence[Mapping[str, Any]], coef: float, norm_by_std: bool = True
) -> dict[str, Any]:
    """GRPO's and ProVer's credit accuracy (:func:`credit_accuracy`) over every complete ``every_turn`` line of a
    group log (:func:`every_turn_record_turns`), pooled; ``lines`` counts the lines used and ``skipped`` the others.
    With the log's small ``k`` each ``A*`` is noisy (its sem is in the null band), so run the diagnostic with a
    larger ``algorithm.prover.k``."""
    used = [t for t in (every_turn_record_turns(r, coef, norm_by_std) for r in records) if t is not None]
    out: dict[str, Any] = {"lines": len(used), "skipped": len(records) - len(used)}
    if not used:
        return out
    pooled = {key: np.concatenate([t[key] for t in used]) for key in used[0]}
    for method in ("grpo", "prover"):
        out[method] = credit_accuracy(pooled[method], pooled["truth"], pooled["sem"], pooled["pivotal"])
    return out
