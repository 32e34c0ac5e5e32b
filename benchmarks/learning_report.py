"""The learning benchmark's analysis and tables: every method read at one env-step budget, paired by seed.

:func:`analyse` turns the runs (``benchmarks/learning.py``'s per-run JSON) into per-seed values, summaries, paired
tests against GRPO and against the equal-cost control, and the judge dial's break-even hit rate
(:mod:`prover_verl.eval.equal_cost`). :func:`render` makes the markdown tables from ``results.json`` alone, so
``benchmarks/doc_tables.py`` regenerates the docs' tables from the committed file and a test checks they agree.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from prover_verl.eval.equal_cost import (
    auc_to,
    break_even,
    format_paired,
    headline_rows,
    headline_table,
    paired,
    steps_to,
    success_at,
)

BASELINE, CONTROL = "grpo", "grpo_control"
MEASURES = ("at_budget", "auc", "final")


def per_seed(run: Mapping[str, Any], budget: float, target: float) -> dict[str, Any]:
    """One run's readouts: success at ``budget`` env steps, mean success over ``[0, budget]``, env steps to
    ``target``, success after its last update (per update, not at equal cost), and its costs and judge counts."""
    curve = run["curve"]
    credit = run.get("credit", {})
    return {
        "at_budget": success_at(curve, budget),
        "auc": auc_to(curve, budget),
        "final": curve[-1]["success"],
        "start": curve[0]["success"],
        "steps_to_target": steps_to(curve, target),
        "reached_budget": curve[-1]["env_steps"] >= budget,
        "updates_at_budget": max(p["update"] for p in curve if p["env_steps"] <= budget),
        "env_steps": run["env_steps"],
        "steps_per_update": run["env_steps"] / curve[-1]["update"],
        "hit_rate": credit.get("judge_accuracy"),
        "verified_positive_rate": credit.get("verified_positive_rate"),
        "credited_token_frac": credit.get("credited_token_frac"),
    }


def _mean_sem(values: Sequence[float | None]) -> dict[str, Any]:
    values = [v for v in values if v is not None]
    if not values:
        return {"n": 0, "mean": None, "sem": None}
    sem = float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) > 1 else None
    return {"n": len(values), "mean": float(np.mean(values)), "sem": sem}


def analyse(runs: Mapping[str, Sequence[Mapping[str, Any]]], target: float) -> dict[str, Any]:
    """Per-seed readouts, summaries, paired tests and the break-even hit rate of the benchmark's runs.

    The budget is GRPO's median final env steps (every method's shortest median where GRPO was not run): every
    method is read there, so ProVer's verifier steps and the control's larger groups are charged.
    """
    if not runs:
        raise ValueError("no runs to analyse")
    finals = {m: float(np.median([r["env_steps"] for r in rs])) for m, rs in runs.items()}
    budget = finals[BASELINE] if BASELINE in finals else min(finals.values())
    seeds = {m: {r["seed"]: per_seed(r, budget, target) for r in rs} for m, rs in runs.items()}
    methods: dict[str, Any] = {}
    for method, values in seeds.items():
        rows = list(values.values())
        summary = {key: _mean_sem([v[key] for v in rows]) for key in (*MEASURES, "start", "hit_rate")}
        summary |= {
            "seeds": sorted(values),
            "reached_target": sum(v["steps_to_target"] is not None for v in rows),
            "steps_to_target": _mean_sem([v["steps_to_target"] for v in rows]),
            "reached_budget": sum(v["reached_budget"] for v in rows),
            "steps_per_update": float(np.mean([v["steps_per_update"] for v in rows])),
            "verified_positive_rate": _mean_sem([v["verified_positive_rate"] for v in rows])["mean"],
            "credited_token_frac": _mean_sem([v["credited_token_frac"] for v in rows])["mean"],
        }
        for ref in (BASELINE, CONTROL):
            if ref in seeds and ref != method:
                summary[f"minus_{ref}"] = {
                    key: paired({s: v[key] for s, v in values.items()}, {s: v[key] for s, v in seeds[ref].items()})
                    for key in MEASURES
                }
        methods[method] = summary
    return {
        "budget": budget,
        "target": target,
        "per_seed": seeds,
        "methods": methods,
        "break_even": {ref: dial(runs, seeds, ref) for ref in (BASELINE, CONTROL) if ref in seeds},
        "bases": base_spread(runs, seeds),
    }


def base_spread(runs: Mapping[str, Sequence[Mapping[str, Any]]], seeds: Mapping[str, Any]) -> dict[str, Any] | None:
    """How much the start moves the readouts: per base (the runs' ``base.index``), its fingerprint and imitation,
    and per method the mean over that base's seeds of success before training, at the budget, and minus GRPO at the
    budget (paired), with the largest difference between bases and the seeds' own spread within a base (pooled sd).
    A base's seeds also draw their own training and validation samples, so a difference between bases is the
    start's effect plus that noise; the within-base sd says how large the noise is. None with fewer than two
    bases."""
    index = {r["seed"]: r["base"]["index"] for rs in runs.values() for r in rs if "index" in (r.get("base") or {})}
    if len(set(index.values())) < 2:
        return None
    bases: dict[int, dict[str, Any]] = {}
    for rs in runs.values():
        for r in rs:
            base = r.get("base") or {}
            if "index" in base and base["index"] not in bases:
                fingerprint, imitation = base.get("fingerprint"), base.get("imitation") or {}
                bases[base["index"]] = {
                    "fingerprint": fingerprint["id"] if fingerprint else None,
                    "fingerprint_source": base.get("fingerprint_source"),
                    "imitation_steps": imitation.get("steps"),
                    "replay_probability": imitation.get("replay_probability"),
                }
    for i in bases:
        bases[i]["seeds"] = sorted(s for s, j in index.items() if j == i)
    grpo = seeds.get(BASELINE, {})
    readouts = {
        "start": lambda s, v: v["start"],
        "at_budget": lambda s, v: v["at_budget"],
        "minus_grpo": lambda s, v: v["at_budget"] - grpo[s]["at_budget"] if s in grpo else None,
    }
    methods: dict[str, Any] = {}
    for method, values in seeds.items():
        entry: dict[str, Any] = {}
        for key, read in readouts.items():
            if key == "minus_grpo" and method == BASELINE:
                continue
            groups = {i: [read(s, v) for s, v in values.items() if index.get(s) == i] for i in sorted(bases)}
            groups = {i: [x for x in xs if x is not None] for i, xs in groups.items()}
            means = {i: _mean_sem(xs) for i, xs in groups.items() if xs}
            if len(means) < 2:
                continue
            deviations = [x - float(np.mean(xs)) for xs in groups.values() if len(xs) > 1 for x in xs]
            dof = sum(len(xs) - 1 for xs in groups.values() if len(xs) > 1)
            spread = [m["mean"] for m in means.values()]
            entry[key] = {
                "by_base": {str(i): m for i, m in means.items()},
                "between_bases": float(max(spread) - min(spread)),
                "within_base_sd": float(math.sqrt(sum(d * d for d in deviations) / dof)) if dof else None,
            }
        if entry:
            methods[method] = entry
    return {"bases": {str(i): b for i, b in sorted(bases.items())}, "methods": methods}


def dial(runs: Mapping[str, Sequence[Mapping[str, Any]]], seeds: Mapping[str, Any], ref: str) -> dict[str, Any] | None:
    """The noisy-oracle dial against ``ref``: each oracle run's measured hit rate and its gain at the budget over
    ``ref``'s run of the same seed, the break-even fit, and where each judge a user can run falls (its measured hit
    rate, the gain the line predicts there, the gain it had). None with fewer than two dial settings."""
    oracle = [m for m, rs in runs.items() if rs and rs[0].get("method", m).startswith("prover_oracle")]
    points = [
        (m, s, v["hit_rate"], v["at_budget"] - seeds[ref][s]["at_budget"])
        for m in oracle
        for s, v in seeds[m].items()
        if s in seeds[ref] and v["hit_rate"] is not None
    ]
    if len({round(p[2], 2) for p in points}) < 2:
        return None
    fit = break_even(points)
    judges = {}
    for method, values in seeds.items():
        if not method.startswith("prover_") or method in oracle:
            continue
        rate = _mean_sem([v["hit_rate"] for v in values.values()])["mean"]
        gain = paired(
            {s: v["at_budget"] for s, v in values.items()}, {s: v["at_budget"] for s, v in seeds[ref].items()}
        )
        predicted = None if rate is None else fit["intercept"] + fit["slope"] * rate
        judges[method] = {"hit_rate": rate, "predicted_gain": predicted, "gain": gain["mean"], "sem": gain["sem"]}
    return fit | {"judges": judges}


def write(
    runs: Mapping[str, Sequence[Mapping[str, Any]]],
    out: Path,
    settings: Mapping[str, Any],
    command: str,
    commit: str,
    target: float,
) -> dict[str, Any]:
    """Write ``results.json`` (command, commit, settings, the runs, the analysis), ``results.md`` and the PNG under
    ``out``; return the report with its rendered ``table``."""
    from prover_verl.demo.report import plot

    out.mkdir(parents=True, exist_ok=True)
    report = {
        "command": command,
        "commit": commit,
        "settings": dict(settings),
        "runs": {m: list(rs) for m, rs in runs.items()},
        "analysis": analyse(runs, target),
    }
    (out / "results.json").write_text(json.dumps(report, indent=1) + "\n")
    text = "\n\n".join(render(report, part) for part in PARTS)
    (out / "results.md").write_text(f"`{command}` (commit {commit})\n\n{text}\n")
    plot(
        {m: list(rs) for m, rs in runs.items()},
        out / "success_vs_env_steps.png",
        target,
        f"{settings.get('env', '')} {settings.get('env_kwargs', '')}: learning in verl's real loop on CPU (tiny model)",
        "success rate (held-out tasks, sampled)",
    )
    return report | {"table": text}


def _num(value: float | None, spec: str = ".3f") -> str:
    return "—" if value is None else format(value, spec)


def _ms(entry: Mapping[str, Any], spec: str = ".3f") -> str:
    """``mean ± sem`` (``mean`` alone with one seed)."""
    if entry["mean"] is None:
        return "—"
    return _num(entry["mean"], spec) + ("" if entry["sem"] is None else f" ± {_num(entry['sem'], spec)}")


_diff = format_paired


def _table(report: Mapping[str, Any]) -> str:
    a = report["analysis"]
    target = a["target"]
    lines = [
        f"| method | seeds | success at {a['budget']:,.0f} env steps | mean success over [0, budget] | env steps "
        f"to {target:.0%} (reached) | − GRPO at budget | − control at budget | judge hit rate | verified positive | "
        "env steps / update | success after the last update (per update) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    grpo_steps = a["methods"].get(BASELINE, {}).get("steps_per_update")
    # the curve's area and its first crossing of the target need a validation after every update (not --quick's)
    every_update = report["settings"].get("test_freq", 1) == 1
    for name, m in a["methods"].items():
        oracle = " (oracle)" if name.startswith("prover_oracle") else ""
        reached = f"{_ms(m['steps_to_target'], ',.0f')} ({m['reached_target']}/{len(m['seeds'])})"
        auc = _ms(m["auc"])
        if not every_update:
            reached = auc = "not read (sparse validation)"
        ratio = f"{m['steps_per_update']:,.0f}" + (
            f" (×{m['steps_per_update'] / grpo_steps:.2f})" if grpo_steps else ""
        )
        lines.append(
            f"| {name}{oracle} | {len(m['seeds'])} | {_ms(m['at_budget'])} | {auc} | {reached} | "
            f"{_diff(m.get('minus_grpo', {}).get('at_budget'))} | "
            f"{_diff(m.get('minus_grpo_control', {}).get('at_budget'))} | {_ms(m['hit_rate'], '.2f')} | "
            f"{_num(m['verified_positive_rate'], '.2f')} | {ratio} | {_ms(m['final'])} |"
        )
    lines += [
        "",
        f"Budget: GRPO's median final env steps ({a['budget']:,.0f}); each run is read at its last validation that had "
        "spent at most that (no interpolation). ± is the sem over seeds; differences are paired by seed (same "
        "imitated base, same validation draws), with the paired t-test's two-sided p; 'above'/'below' where p < "
        "0.05. The oracle judges read the env's hidden pivot: a dial, not a judge a user can run.",
    ]
    walls = [r["wall_s"] / 60 for rs in report["runs"].values() for r in rs if "wall_s" in r]
    if walls:
        lines.append(
            f"\nWall time a run (2 CPU cores, shared with other work while these ran): "
            f"{min(walls):.0f}–{max(walls):.0f} min, {sum(walls):.0f} min in all ({len(walls)} runs)."
        )
    trained = report["settings"].get("trained") or {}
    commands = report["settings"].get("commands")
    if commands:  # every command on record that trained runs into this folder (learning.command_history)
        lines.append(
            "\nCommands on record that trained these runs (elapsed, bases and judge made on the way included): "
            + "; ".join(
                f"`{c['command']}`: {c['runs']} runs, {c['jobs']} at a time, {c['elapsed_s'] / 60:.0f} min"
                for c in commands
            )
            + "."
        )
    elif trained.get("runs"):  # a file written before the history was kept
        lines.append(
            f"\nThis command trained {trained['runs']} runs, {report['settings'].get('jobs', 1)} at a time, in "
            f"{trained['elapsed_s'] / 60:.0f} min elapsed (bases and judge made on the way included)."
        )
    missing = report["settings"].get("missing_runs")
    if missing:
        lines.append(f"\n**Partial**: {len(missing)} planned runs are not in the results yet ({', '.join(missing)}).")
    return "\n".join(lines)


def _per_seed_table(report: Mapping[str, Any]) -> str:
    a = report["analysis"]
    seeds = sorted({s for values in a["per_seed"].values() for s in map(int, values)})
    lines = [
        "| method | " + " | ".join(f"seed {s}" for s in seeds) + " |",
        "|---|" + "---|" * len(seeds),
    ]
    for name, values in a["per_seed"].items():
        cells = []
        for s in seeds:
            v = values.get(str(s), values.get(s))
            cells.append("" if v is None else f"{v['start']:.3f} → {v['at_budget']:.3f} ({v['updates_at_budget']} upd)")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "Per seed: success before training → at the budget (updates done within it)."]
    return "\n".join(lines)


def _break_even(report: Mapping[str, Any]) -> str:
    lines = []
    for ref, fit in report["analysis"]["break_even"].items():
        name = "GRPO" if ref == BASELINE else "the equal-cost control"
        if fit is None:
            lines.append(f"- Against {name}: fewer than two oracle settings were run; no break-even.")
            continue
        where = (
            "the line does not rise with the hit rate: no break-even"
            if fit["hit_rate"] is None
            else f"gain 0 at hit rate {fit['hit_rate']:.2f}"
            + _outside_the_dial(fit["hit_rate"])
            + (
                f" (95 % bootstrap interval {fit['interval'][0]:.2f}–{fit['interval'][1]:.2f})"
                if fit["interval"]
                else " (one run at a dial setting: no interval, no verdict)"
                if fit["positive_slope_frac"] is None
                else f" (slope positive in only {fit['positive_slope_frac']:.0%} of bootstrap resamples: no interval)"
            )
        )
        lines.append(
            f"- Against {name}: gain at budget = {fit['intercept']:+.3f} + {fit['slope']:.3f} × hit rate over "
            f"{len(fit['points'])} oracle runs; {where}."
        )
        for judge, j in fit["judges"].items():
            sem = "" if j["sem"] is None else f" ± {j['sem']:.3f}"
            lines.append(
                f"  - {judge}: hit rate {_num(j['hit_rate'], '.2f')}, the line predicts "
                f"{_num(j['predicted_gain'], '+.3f')}, measured {_num(j['gain'], '+.3f')}{sem}"
            )
    return "\n".join(lines)


def _outside_the_dial(rate: float) -> str:
    """A crossing the line reaches only by extrapolating past the hit rates a judge can have."""
    if rate > 1:
        return ", past a perfect judge's 1.00: the fitted line is below 0 at every hit rate"
    if rate < 0:
        return ", below 0: the fitted line is above 0 at every hit rate"
    return ""


def _bases(report: Mapping[str, Any]) -> str:
    spread = report["analysis"].get("bases")
    if not spread:
        return "Fewer than two bases among the runs (or a file analysed before bases were read): no base spread."
    bases = spread["bases"]
    head = []
    for i, b in bases.items():
        fingerprint = b["fingerprint"] or "no fingerprint"
        imitation = f"{b['imitation_steps']} steps, replay {b['replay_probability']}"
        head.append(f"base {i} (seeds {', '.join(map(str, b['seeds']))}; {fingerprint}; imitation {imitation})")
    names = {"start": "before training", "at_budget": "at the budget", "minus_grpo": "− GRPO at the budget"}
    lines = [
        "| method | readout | " + " | ".join(f"base {i}" for i in bases) + " | largest gap between bases | "
        "sd of a seed within a base |",
        "|---|---|" + "---|" * len(bases) + "---|---|",
    ]
    shown = set()  # a start is the seeds' base and validation draws: each set of seeds' is shown once
    for method, entry in spread["methods"].items():
        for key, value in entry.items():
            cells = [_ms(value["by_base"][i]) if i in value["by_base"] else "—" for i in bases]
            if key == "start":
                if tuple(cells) in shown:
                    continue
                shown.add(tuple(cells))
            lines.append(
                f"| {method} | {names[key]} | " + " | ".join(cells) + f" | {value['between_bases']:.3f} | "
                f"{_num(value['within_base_sd'])} |"
            )
    lines += [
        "",
        "Bases: " + "; ".join(head) + ". Mean ± sem over a base's seeds; 'before training' once for each set of "
        "seeds (it is the same for every method on them). A base's seeds draw their own training and validation "
        "samples too, so the gap between bases is the start's effect plus that noise, of about the within-base sd "
        "of one seed.",
    ]
    return "\n".join(lines)


# the README's rows: the baseline, the equal-cost control and the judges a user can run (no oracle dial)
HEADLINE = (BASELINE, CONTROL, "prover_heuristic", "prover_divergence", "prover_judge_model")


def _headline(report: Mapping[str, Any]) -> str:
    """The README's rows of this benchmark (:data:`HEADLINE`), at GRPO's budget as in :func:`_table`."""
    return headline_table(headline_rows("learning in verl's loop", report["runs"], HEADLINE, BASELINE))


PARTS = {
    "table": _table,
    "per_seed": _per_seed_table,
    "break_even": _break_even,
    "bases": _bases,
    "headline": _headline,
}


def render(report: Mapping[str, Any], part: str) -> str:
    """The markdown of one ``part`` (:data:`PARTS`) of a ``results.json`` report."""
    if part not in PARTS:
        raise ValueError(f"unknown part {part!r}; one of {list(PARTS)}")
    return PARTS[part](report)
