"""Aggregating the demo's runs: summary per method, the comparisons asked of ProVer, a table, JSON and a plot."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from prover_verl.eval.equal_cost import headline_rows, headline_table

HEADER = (
    "ProVer credit-assignment demo — a CPU TOY, not the paper's LLM setting: a small MLP policy over "
    "featurised text observations of KeyDoor (a synthetic corridor task with one pivotal key choice), trained "
    "with REINFORCE on token-level advantages; env steps count main rollouts plus every verifier / Monte-Carlo "
    "continuation step."
)


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    values = np.asarray(values, dtype=np.float64)
    return float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else 0.0


def steps_to_target(curve: Sequence[dict[str, Any]], target: float) -> int | None:
    """Cumulative env steps at the first evaluation with ``success >= target`` (None if never)."""
    return next((p["env_steps"] for p in curve if p["success"] >= target), None)


def _auc(curve: Sequence[dict[str, Any]]) -> float:
    # Mean success over the evaluations (evenly spaced in updates): one number for the whole learning curve.
    return float(np.mean([p["success"] for p in curve]))


def summarise(runs: Sequence[dict[str, Any]], target: float) -> dict[str, Any]:
    """Summary of one method's runs (one per seed)."""
    if not runs:
        raise ValueError("no runs to summarise")
    finals = [r["curve"][-1]["success"] for r in runs]
    reached = [s for s in (steps_to_target(r["curve"], target) for r in runs) if s is not None]
    credit = [r["credit"] for r in runs]

    def credit_mean(key: str) -> float | None:
        values = [c[key] for c in credit if c.get(key) is not None]
        return float(np.mean(values)) if values else None

    main = float(np.mean([r["main_steps"] for r in runs]))
    extra = float(np.mean([r["extra_steps"] for r in runs]))
    return {
        "kind": runs[0]["kind"],
        "seeds": [r["seed"] for r in runs],
        "final_success": _mean_std(finals),
        "final_greedy_success": _mean_std([r["curve"][-1]["greedy_success"] for r in runs]),
        "auc": _mean_std([_auc(r["curve"]) for r in runs]),
        "steps_to_target": _mean_std(reached) if reached else None,
        "target_reached": f"{len(reached)}/{len(runs)}",
        "env_steps": float(np.mean([r["env_steps"] for r in runs])),
        "main_steps": main,
        "extra_steps": extra,
        "extra_over_own_main": extra / main,
        "judge_accuracy": credit_mean("judge_accuracy"),
        "verified_positive_rate": credit_mean("verified_positive_rate"),
        "mean_credit": credit_mean("mean_credit"),
        "mean_estimate": credit_mean("mean_estimate"),
        "credited_token_frac": credit_mean("credited_token_frac"),
        "wall_s": float(np.sum([r["wall_s"] for r in runs])),
    }


def paired_difference(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``a - b`` per seed, mean ± std and the standard error of the mean: final success, AUC, and at equal cost
    (``equal_env_steps``: ``a``'s success at ``b``'s final env steps, linear between ``a``'s evaluations, ``a``'s last
    if ``b`` spent more, minus ``b``'s final), which charges ProVer's verifier steps against its gain."""
    by_seed = {r["seed"]: r for r in b}
    pairs = [(r, by_seed[r["seed"]]) for r in a if r["seed"] in by_seed]
    if not pairs:
        raise ValueError("no seeds in common")

    def at_env_steps(run: dict[str, Any], env_steps: float) -> float:
        points = run["curve"]
        return float(np.interp(env_steps, [p["env_steps"] for p in points], [p["success"] for p in points]))

    measures = {
        "final": lambda x, y: x["curve"][-1]["success"] - y["curve"][-1]["success"],
        "auc": lambda x, y: _auc(x["curve"]) - _auc(y["curve"]),
        "equal_env_steps": lambda x, y: at_env_steps(x, y["curve"][-1]["env_steps"]) - y["curve"][-1]["success"],
    }
    out = {"seeds": len(pairs)}
    for key, measure in measures.items():
        diffs = [measure(x, y) for x, y in pairs]
        mean, std = _mean_std(diffs)
        # "Below beyond noise": the mean difference is under minus two standard errors; one seed has no noise
        # estimate, so no verdict (None), not a zero standard error that makes any difference "beyond noise"
        sem = std / math.sqrt(len(diffs)) if len(diffs) > 1 else None
        below = None if sem is None else mean < -2 * sem
        out[key] = {"mean": mean, "std": std, "sem": sem, "below_beyond_noise": below, "per_seed": diffs}
    return out


def compare(results: dict[str, list[dict[str, Any]]], summaries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The comparisons the demo reports: ProVer's extra cost against GRPO and the exhaustive baseline, and each
    ProVer variant minus GRPO (the random judge's difference shows whether the verifier protects)."""
    grpo = next((m for m, s in summaries.items() if s["kind"] == "grpo"), None)
    mc = next((m for m, s in summaries.items() if s["kind"] == "mc"), None)
    out: dict[str, Any] = {"grpo": grpo, "exhaustive": mc, "prover": {}}
    for name, summary in summaries.items():
        if summary["kind"] != "prover":
            continue
        entry: dict[str, Any] = {}
        if grpo:
            entry["extra_over_grpo_sampling"] = summary["extra_steps"] / summaries[grpo]["main_steps"]
            entry["minus_grpo"] = paired_difference(results[name], results[grpo])
        if mc:
            entry["extra_over_exhaustive_extra"] = summary["extra_steps"] / summaries[mc]["extra_steps"]
        out["prover"][name] = entry
    return out


def _fmt(pair: tuple[float, float] | None, digits: int = 3) -> str:
    return "n/a" if pair is None else f"{pair[0]:.{digits}f} ± {pair[1]:.{digits}f}"


def _opt(value: float | None, spec: str = ".3f") -> str:
    return "—" if value is None else format(value, spec)


SUCCESS_NOTE = "Success: sampled policy on held-out tasks, at the last update"


def table(
    summaries: dict[str, dict[str, Any]], comparisons: dict[str, Any], target: float, success_note: str = SUCCESS_NOTE
) -> str:
    """The markdown results table plus the comparison lines (``success_note`` says how success was measured)."""
    lines = [
        f"| method | final success | success AUC | env steps to {target:.0%} (reached) | total env steps | "
        "extra steps / own main | judge hits pivot | verified positive | mean credit | credited tokens |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in summaries.items():
        to_target = (
            "not reached"
            if s["steps_to_target"] is None
            else f"{_fmt(s['steps_to_target'], 0)} ({s['target_reached']})"
        )
        lines.append(
            f"| {name} | {_fmt(s['final_success'])} | {_fmt(s['auc'])} | {to_target} | {s['env_steps']:,.0f} | "
            f"{s['extra_over_own_main']:.2f} | {_opt(s['judge_accuracy'], '.2f')} | "
            f"{_opt(s['verified_positive_rate'], '.2f')} | {_opt(s['mean_credit'])} | "
            f"{_opt(s['credited_token_frac'], '.1%')} |"
        )
    lines.append("")
    lines.append(
        f"{success_note}; ± is the std over seeds. AUC: mean success "
        "over the evaluations. Steps to target: mean over the seeds that reached it. 'Below beyond noise': mean "
        "paired difference < -2 sem."
    )
    for name, c in comparisons["prover"].items():
        parts = []
        if "extra_over_grpo_sampling" in c:
            parts.append(f"verifier steps = {c['extra_over_grpo_sampling']:.1%} of GRPO's sampling")
        if "extra_over_exhaustive_extra" in c:
            parts.append(f"{c['extra_over_exhaustive_extra']:.1%} of the exhaustive baseline's extra steps")
        if "minus_grpo" in c:
            d = c["minus_grpo"]
            if d["seeds"] < 2:
                verdict = "one seed: no noise estimate, no verdict"
            elif d["final"]["below_beyond_noise"] or d["auc"]["below_beyond_noise"]:
                verdict = "BELOW GRPO beyond noise"
            else:
                verdict = "not below GRPO beyond noise"
            parts.append(
                f"minus GRPO (paired by seed): final {_diff(d['final'])}, AUC {_diff(d['auc'])}, "
                f"at GRPO's final env steps {_diff(d['equal_env_steps'])} -> {verdict}"
            )
        lines.append(f"- {name}: " + "; ".join(parts))
    return "\n".join(lines)


def _diff(entry: dict[str, Any]) -> str:
    """A paired difference as ``mean ± std (sem s)``; ``sem -`` where one seed gives none."""
    sem = "-" if entry["sem"] is None else f"{entry['sem']:.3f}"
    return f"{entry['mean']:+.3f} ± {entry['std']:.3f} (sem {sem})"


def _band(
    runs: Sequence[dict[str, Any]], x_key: str, log: bool = False, points: int = 80
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # Seeds evaluate at different env-step counts: interpolate onto a grid up to the shortest run.
    xs = [np.array([p[x_key] for p in r["curve"]], dtype=np.float64) for r in runs]
    ys = [np.array([p["success"] for p in r["curve"]]) for r in runs]
    low, high = max(x[1 if log else 0] for x in xs), min(x[-1] for x in xs)
    grid = np.geomspace(low, high, points) if log else np.linspace(low, high, points)
    values = np.stack([np.interp(grid, x, y) for x, y in zip(xs, ys, strict=True)])
    return grid, values.mean(axis=0), values.std(axis=0)


def plot(
    results: dict[str, list[dict[str, Any]]],
    path: Path,
    target: float,
    title: str,
    ylabel: str,
) -> None:
    """Success rate vs cumulative env steps (linear, zoomed on the cheap methods; and log scale) and vs updates,
    mean over seeds with a ±1 std band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (
        ("env_steps", False, "cumulative env steps (main + verification / MC)"),
        ("env_steps", True, "cumulative env steps, log scale"),
        ("update", False, "updates"),
    )
    fig, axes = plt.subplots(1, 3, figsize=(18, 5))
    cheap = []
    for name, runs in results.items():
        colour = None
        for ax, (key, log, _) in zip(axes, panels, strict=True):
            grid, mean, std = _band(runs, key, log=log)
            (line,) = ax.plot(grid, mean, label=name, color=colour)
            colour = line.get_color()
            ax.fill_between(grid, mean - std, mean + std, color=colour, alpha=0.15)
        if runs[0]["kind"] != "mc":
            cheap.append(min(r["env_steps"] for r in runs))
    for ax, (_, log, label) in zip(axes, panels, strict=True):
        ax.axhline(target, color="grey", linestyle="--", linewidth=0.8)
        ax.set_xlabel(label)
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        if log:
            ax.set_xscale("log")
    if cheap:
        axes[0].set_xlim(0, 1.05 * max(cheap))
    axes[2].legend(fontsize=8, loc="lower right")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_report(
    results: dict[str, list[dict[str, Any]]],
    out: Path,
    settings: dict[str, Any],
    target: float,
    header: str = HEADER,
    title: str = "KeyDoor CPU toy (not the paper's LLM setting)",
    success_note: str = SUCCESS_NOTE,
    ylabel: str = "success rate (held-out tasks, sampled)",
) -> dict[str, Any]:
    """Write ``results.json``, ``results.md`` and ``success_vs_env_steps.png`` under ``out``; return the report.

    Args:
        results: Runs per method name (one per seed), as :func:`~prover_verl.demo.train.train` returns them.
        out: Output folder (created).
        settings: The shared run settings, recorded in the JSON.
        target: Success rate for "env steps to target".
        header: The report's first paragraph (what was run).
        title: The plot's title.
        success_note: How success was measured (under the table).
        ylabel: The plot's y label.
    """
    out.mkdir(parents=True, exist_ok=True)
    summaries = {name: summarise(runs, target) for name, runs in results.items()}
    comparisons = compare(results, summaries)
    text = table(summaries, comparisons, target, success_note)
    report = {
        "header": header,
        "settings": settings,
        "target": target,
        "summary": summaries,
        "comparisons": comparisons,
        "table": text,
        "runs": results,
    }
    (out / "results.json").write_text(json.dumps(report, indent=1, default=_jsonable))
    (out / "results.md").write_text(f"{header}\n\n{text}\n")
    plot(results, out / "success_vs_env_steps.png", target, title, ylabel)
    return report


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple | set):
        return list(value)
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


# the README's rows: GRPO, ProVer with the judge a user can run and at the two ends of the noisy judge, GiGPO
HEADLINE = ("GRPO", "ProVer (heuristic judge)", "ProVer (judge acc 1.0)", "ProVer (judge acc 0.0, random)", "GiGPO")


def _headline(report: dict[str, Any]) -> str:
    grpo = next(m for m, s in report["summary"].items() if s["kind"] == "grpo")
    return headline_table(headline_rows("CPU demo", report["runs"], HEADLINE, grpo))


PARTS = {"table": lambda report: report["table"], "headline": _headline}


def render(report: dict[str, Any], part: str) -> str:
    """The markdown of one ``part`` of a ``results.json`` the demo wrote, for ``benchmarks/doc_tables.py``.

    Args:
        report: The JSON :func:`write_report` wrote.
        part: ``table`` (the demo's own table and comparisons) or ``headline`` (the README's rows: :data:`HEADLINE`
            read at GRPO's median env steps, paired by seed; :func:`~prover_verl.eval.equal_cost.headline_rows`).

    Raises:
        ValueError: an unknown part.
    """
    if part not in PARTS:
        raise ValueError(f"unknown part {part!r} of a demo report; one of {list(PARTS)}")
    return PARTS[part](report)
