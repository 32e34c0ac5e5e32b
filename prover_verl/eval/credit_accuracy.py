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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
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
