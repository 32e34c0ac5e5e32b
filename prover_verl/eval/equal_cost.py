"""Learning curves compared at equal cost: success read at an env-step budget, paired tests, the judge dial.

A run is a learning curve, ``[{"update", "env_steps", "success"}, ...]`` from update 0 (no env steps spent), as
``benchmarks/learning.py`` records it. ProVer spends more env steps per update than GRPO (the verifier's
continuations), so comparing at equal updates flatters it; every number here is read at an equal env-step budget.

Reading at a budget uses measured points only: a run's success at ``B`` env steps is its last evaluation that had
spent at most ``B`` (no line drawn between evaluations), and its area is the same step function integrated over
``[0, B]``. Differences are paired by seed (each seed starts from the same model and draws the same validation), and
tested with the paired t-test over seeds. The judge dial fits the paired gain of the noisy oracle judges against
their measured hit rate and reads where the line crosses zero: the break-even hit rate, with a bootstrap interval
over seeds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

Curve = Sequence[Mapping[str, float]]


def success_at(curve: Curve, budget: float) -> float:
    """Success of the last evaluation that had spent at most ``budget`` env steps.

    Raises:
        ValueError: the curve has no evaluation at or under ``budget`` (update 0 spends none, so only a curve
            without it), or its env steps decrease.
    """
    steps = np.array([p["env_steps"] for p in curve], dtype=np.float64)
    if np.any(np.diff(steps) < 0):
        raise ValueError(f"env steps must not decrease along a curve: {steps.tolist()}")
    under = np.nonzero(steps <= budget)[0]
    if not len(under):
        raise ValueError(f"no evaluation at or under {budget:,.0f} env steps (first at {steps[0]:,.0f})")
    return float(curve[int(under[-1])]["success"])


def auc_to(curve: Curve, budget: float) -> float:
    """Mean success over ``[0, budget]`` env steps: :func:`success_at`'s step function integrated, over ``budget``.

    A run that stops before ``budget`` holds its last success to the end (its reach is reported separately).
    """
    if budget <= 0:
        raise ValueError(f"budget must be positive, got {budget}")
    success_at(curve, 0.0)  # checks the curve starts at 0 env steps and never goes back
    edges = [min(p["env_steps"], budget) for p in curve] + [budget]
    return float(sum(p["success"] * (edges[i + 1] - edges[i]) for i, p in enumerate(curve)) / budget)


def steps_to(curve: Curve, target: float) -> float | None:
    """Env steps at the first evaluation with success ``>= target`` (None if never)."""
    return next((float(p["env_steps"]) for p in curve if p["success"] >= target), None)


def paired(a: Mapping[int, float], b: Mapping[int, float]) -> dict[str, Any]:
    """``a - b`` over the seeds both have: per-seed values, mean, std, sem, the paired t-test's t and two-sided p.

    With one seed there is no noise estimate: sem, t and p are None (never a zero sem that makes any difference
    significant).
    """
    seeds = sorted(set(a) & set(b))
    if not seeds:
        raise ValueError("no seeds in common")
    diffs = np.array([a[s] - b[s] for s in seeds], dtype=np.float64)
    out: dict[str, Any] = {"seeds": seeds, "per_seed": diffs.tolist(), "mean": float(diffs.mean())}
    if len(diffs) < 2:
        return out | {"std": None, "sem": None, "t": None, "p": None}
    std = float(diffs.std(ddof=1))
    sem = std / math.sqrt(len(diffs))
    if sem == 0.0:  # every seed gave the same difference: the t-test is undefined, the sign is not in doubt
        t, p = (math.copysign(math.inf, diffs.mean()), 0.0) if diffs.mean() else (0.0, 1.0)
    else:
        t = float(diffs.mean() / sem)
        p = float(2 * stats.t.sf(abs(t), df=len(diffs) - 1))
    return out | {"std": std, "sem": sem, "t": t, "p": p}


def verdict(diff: Mapping[str, Any], alpha: float = 0.05) -> str:
    """``above``/``below`` where the paired test rejects no difference at ``alpha`` (two-sided), else ``within
    noise``; ``one seed`` where there is no test."""
    if diff.get("p") is None:
        return "one seed"
    if diff["p"] >= alpha:
        return "within noise"
    return "above" if diff["mean"] > 0 else "below"


# The README's one results table: every benchmark that renders a ``headline`` gives rows with these columns, so
# that ``benchmarks/doc_tables.py`` can join several sources' rows under one header.
HEADLINE_COLUMNS = (
    "benchmark",
    "method",
    "seeds",
    "success at GRPO's env-step budget",
    "− GRPO there (paired by seed)",
    "env steps / update",
)


def format_paired(diff: Mapping[str, Any] | None) -> str:
    """A :func:`paired` difference as ``+0.012 ± 0.004, p 0.03 (above)``; ``—`` for None, the mean alone for one
    seed."""
    if diff is None:
        return "—"
    sem = "" if diff["sem"] is None else f" ± {diff['sem']:.3f}, p {diff['p']:.2g}"
    return f"{diff['mean']:+.3f}{sem} ({verdict(diff)})"


def headline_table(rows: Sequence[Sequence[str]]) -> str:
    """A markdown table of :data:`HEADLINE_COLUMNS` holding ``rows`` (one cell per column, already formatted)."""
    for row in rows:
        if len(row) != len(HEADLINE_COLUMNS):
            raise ValueError(f"a headline row has {len(row)} cells, not {len(HEADLINE_COLUMNS)}: {row}")
    lines = ["| " + " | ".join(HEADLINE_COLUMNS) + " |", "|" + "---|" * len(HEADLINE_COLUMNS)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def headline_rows(
    benchmark: str,
    runs: Mapping[str, Sequence[Mapping[str, Any]]],
    methods: Sequence[str],
    baseline: str,
) -> list[list[str]]:
    """The headline rows of ``methods`` (those of them in ``runs``, in that order), read at equal cost.

    The budget is ``baseline``'s median final env steps; each run is read there with :func:`success_at`, its
    difference from ``baseline``'s run of the same seed tested with :func:`paired`; env steps an update are the
    mean over seeds of a run's env steps over its last update, shown as a multiple of ``baseline``'s.

    Raises:
        ValueError: ``baseline`` is not in ``runs``.
    """
    if baseline not in runs:
        raise ValueError(f"no {baseline!r} runs to read the others against (methods: {list(runs)})")
    budget = float(np.median([r["env_steps"] for r in runs[baseline]]))
    at = {m: {r["seed"]: success_at(r["curve"], budget) for r in rs} for m, rs in runs.items()}
    per_update = {m: float(np.mean([r["env_steps"] / r["curve"][-1]["update"] for r in rs])) for m, rs in runs.items()}
    rows = []
    for method in (m for m in methods if m in runs):
        values = list(at[method].values())
        sem = f" ± {np.std(values, ddof=1) / math.sqrt(len(values)):.3f}" if len(values) > 1 else ""
        diff = None if method == baseline else paired(at[method], at[baseline])
        ratio = per_update[method] / per_update[baseline]
        rows.append(
            [benchmark, method, str(len(values)), f"{np.mean(values):.3f}{sem}", format_paired(diff), f"×{ratio:.2f}"]
        )
    return rows


def break_even(points: Sequence[tuple[str, int, float, float]], resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """The hit rate at which a judge's paired gain crosses zero, from the noisy-oracle dial.

    Args:
        points: ``(setting, seed, hit_rate, gain)`` per run of the dial: the setting it ran at (e.g. the oracle's
            accuracy), the hit rate measured in that run (runs of one setting measure different rates), its gain
            (paired difference against the baseline at the budget); at least two distinct hit rates.
        resamples: Bootstrap resamples (runs drawn with replacement within each setting).
        seed: The bootstrap's random seed.

    Returns:
        ``intercept`` and ``slope`` of the least-squares line gain = intercept + slope · hit_rate, ``hit_rate``
        (where it crosses zero: None if the slope is not positive), and its 2.5-97.5 % bootstrap interval
        ``interval`` (None where fewer than 95 % of resamples have a positive slope, or where a setting has one run
        only), ``positive_slope_frac`` (None with one run at a setting).
    """
    labels = [p[0] for p in points]
    rates = np.array([p[2] for p in points], dtype=np.float64)
    gains = np.array([p[3] for p in points], dtype=np.float64)
    if len(np.unique(np.round(rates, 9))) < 2:
        raise ValueError("the break-even fit needs runs at two different hit rates at least")

    def fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        slope, intercept = np.polyfit(x, y, 1)
        return float(intercept), float(slope)

    intercept, slope = fit(rates, gains)
    # resample within each dial setting, so every resample keeps the settings' spread of hit rates; grouped by the
    # setting, not the measured rate (two seeds of one setting never measure the same rate: no group would hold two)
    groups = [np.array([i for i, label in enumerate(labels) if label == s]) for s in dict.fromkeys(labels)]
    rng = np.random.default_rng(seed)
    crossings, positive = [], 0
    for _ in range(resamples):
        pick = np.concatenate([rng.choice(g, size=len(g)) for g in groups])
        b_intercept, b_slope = fit(rates[pick], gains[pick])
        if b_slope > 0:
            positive += 1
            crossings.append(-b_intercept / b_slope)
    frac = positive / resamples
    interval = None
    if min(len(g) for g in groups) < 2:  # one run at a setting: resampling cannot vary it, so no interval at all
        frac = None
    elif frac >= 0.95:
        low, high = np.percentile(crossings, [2.5, 97.5])
        interval = [float(low), float(high)]
    return {
        "intercept": intercept,
        "slope": slope,
        "hit_rate": -intercept / slope if slope > 0 else None,
        "interval": interval,
        "positive_slope_frac": frac,
        "points": [[str(label), int(s), float(h), float(g)] for label, s, h, g in points],
    }
