"""See what ProVer credited: the group log (:mod:`prover_verl.eval.group_log`) as one self-contained HTML page.

    python -m prover_verl.inspect LOG_DIR --out report.html [--steps 1-5,9]

The page needs no network and no server: per step, the ``prover/*`` counts (the same numbers as the trainer's
metrics of that step, from the same counters), then each group with the pair shown to the judge side by side, the
proposed segment highlighted, the K outcomes from the fork points before and after it, the estimate with its
standard error, the credit, the judge's reason and raw answer (and the agentic judge's tool calls); checkboxes
filter the groups by outcome. Three small plots cover the run: the judge's hit rate (where the env names the
pivotal turn), the distribution of the verified estimates and the share of policy tokens credited.
"""

from __future__ import annotations

import argparse
import html
import math
import string
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from prover_verl.eval.group_log import JUDGE_FAILURES, OUTCOMES, PIVOT_KEY, read_groups
from prover_verl.metrics import ProverStats

TEMPLATE = Path(__file__).parent / "templates" / "group_report.html"

# the per-step table: metric (as the trainer logs it) -> column heading
COLUMNS = {
    "prover/groups": "groups",
    "prover/groups_with_pair": "with a pair",
    "prover/groups_with_proposal": "with a proposal",
    "prover/skipped_budget": "over budget",
    "prover/judge_malformed": "malformed",
    "prover/judge_out_of_range": "out of range",
    "prover/judge_empty": "empty",
    "prover/judge_too_long": "too long",
    "prover/judge_error": "judge error",
    "prover/judge_out_of_budget": "judge out of budget",
    "prover/verify_timeout": "verify timeout",
    "prover/verify_failed": "verify failed",
    "prover/verified_positive_rate": "verified positive rate",
    "prover/mean_estimate": "mean estimate",
    "prover/mean_credit": "mean credit",
    "prover/verify_env_steps_frac": "verify env steps / rollout",
    "prover/judge_seconds": "judge s",
    "prover/judge_tokens": "judge tokens",
    "prover/verify_seconds": "verify s",
}
OUTCOME_LABELS = {
    "no_pair": "no pair",
    "skipped_budget": "over budget",
    "malformed": "malformed",
    "out_of_range": "out of range",
    "empty": "empty",
    "too_long": "too long",
    "error": "judge error",
    "out_of_budget": "judge out of budget",
    "verify_timeout": "verify timeout",
    "verify_failed": "verify failed",
    "verified_positive": "verified positive",
    "verified_not_positive": "verified, not positive",
    "credited_unverified": "credited unverified",
}


# the order of a step's groups on the page: what was credited first, groups without a pair last
SHOW_FIRST = (
    "verified_positive",
    "credited_unverified",
    "verified_not_positive",
    *JUDGE_FAILURES,
    "verify_timeout",
    "verify_failed",
    "skipped_budget",
    "no_pair",
)


def step_metrics(records: Iterable[dict]) -> dict[int, dict[str, float]]:
    """Per step, the ``prover/*`` metrics of its logged groups (:meth:`ProverStats.metrics`, as the trainer
    derives them), plus ``credited_token_share`` and, where the env names its pivot, ``judge_hit_rate``."""
    totals: dict[int, ProverStats] = defaultdict(ProverStats)
    tokens: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    hits: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for record in records:
        step = record["step"]
        totals[step].add(ProverStats(**record["stats"]))
        tokens[step][0] += sum(c["policy_tokens"] for c in record["credits"])
        tokens[step][1] += sum(t["policy_tokens"] for t in record["trajectories"])
        hit = judge_hit(record)
        if hit is not None:
            hits[step][0] += hit
            hits[step][1] += 1
    summary = {}
    for step in sorted(totals):
        metrics = totals[step].metrics()
        credited, total = tokens[step]
        metrics["credited_token_share"] = credited / total if total else 0.0
        if hits[step][1]:
            metrics["judge_hit_rate"] = hits[step][0] / hits[step][1]
        summary[step] = metrics
    return summary


def judge_hit(record: dict) -> bool | None:
    """Whether the judge's usable proposal covers the pivotal turn of its trajectory (None: no usable proposal,
    or the env does not name that trajectory's pivot)."""
    judge = record.get("judge")
    if not judge or judge["proposal"] is None or judge["status"] != "ok" or judge["rejected"]:
        return None
    proposal = judge["proposal"]
    trajectory = next((t for t in record["trajectories"] if t["id"] == proposal["traj_id"]), None)
    pivot = None if trajectory is None else trajectory.get(PIVOT_KEY)
    return None if pivot is None else proposal["start_turn"] <= pivot <= proposal["end_turn"]


def parse_steps(text: str | None) -> set[int] | None:
    """``"1-3,7"`` -> ``{1, 2, 3, 7}`` (None: all steps)."""
    if not text:
        return None
    steps = set()
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        try:
            steps.update(range(int(first), int(last or first) + 1))
        except ValueError:
            raise ValueError(f"--steps takes numbers and ranges like 1-3,7, got {text!r}") from None
    return steps


def build_report(records: Sequence[dict], source: str, bad_lines: int = 0, steps: set[int] | None = None) -> str:
    """The HTML page of ``records`` (every step in the counts and plots; only ``steps`` in the group details)."""
    summary = step_metrics(records)
    shown = [r for r in records if steps is None or r["step"] in steps]
    outcomes = Counter(r["outcome"] for r in shown)
    by_step: dict[int, list[dict]] = defaultdict(list)
    for record in sorted(shown, key=lambda r: SHOW_FIRST.index(r["outcome"])):  # credited groups first
        by_step[record["step"]].append(record)
    note = f", {bad_lines} unreadable line(s) skipped" if bad_lines else ""
    values = {
        "title": f"ProVer group log: {html.escape(source)}",
        "source": html.escape(source),
        "overview": f"{len(records)} groups over {len(summary)} step(s){note}",
        "summary": _summary_table(summary),
        "plots": _plots(summary, records),
        "filters": "".join(
            f'<label class="o-{o}"><input type="checkbox" checked data-outcome="{o}"> '
            f"{OUTCOME_LABELS[o]} <b>{outcomes[o]}</b></label>"
            for o in OUTCOMES
            if outcomes[o]
        ),
        "nav": " ".join(f'<a href="#step-{s}">{s}</a>' for s in sorted(by_step)),
        "groups": "".join(
            f'<section id="step-{s}"><h2>Step {s}</h2>{"".join(_group(r) for r in by_step[s])}</section>'
            for s in sorted(by_step)
        ),
    }
    return string.Template(TEMPLATE.read_text()).substitute(values)


def _num(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return f"{value:.3f}"


def _summary_table(summary: dict[int, dict[str, float]]) -> str:
    extra = {"credited_token_share": "credited token share", "judge_hit_rate": "judge hit rate"}
    heads = "".join(f'<th title="{m}">{h}</th>' for m, h in {**COLUMNS, **extra}.items())
    rows = []
    for step, metrics in summary.items():
        cells = "".join(
            f'<td data-metric="{m}" data-value="{metrics[m]!r}">{_num(metrics[m])}</td>'
            if m in metrics
            else f'<td data-metric="{m}">-</td>'
            for m in {**COLUMNS, **extra}
        )
        rows.append(f'<tr data-step="{step}"><th><a href="#step-{step}">{step}</a></th>{cells}</tr>')
    return f'<table class="summary"><tr><th>step</th>{heads}</tr>{"".join(rows)}</table>'


# ----------------------------------------------------------------------------------------------- plots (SVG)
W, H, PAD = 300, 150, 30


def _frame(title: str, body: str, y_labels: Sequence[tuple[float, str]], x_labels: Sequence[tuple[float, str]]) -> str:
    ticks = "".join(
        f'<line x1="{PAD}" x2="{W - 5}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
        f'<text x="{PAD - 4}" y="{y + 4:.1f}" text-anchor="end">{t}</text>'
        for y, t in y_labels
    )
    ticks += "".join(f'<text x="{x:.1f}" y="{H - 8}" text-anchor="middle">{t}</text>' for x, t in x_labels)
    return (
        f'<figure><figcaption>{title}</figcaption><svg viewBox="0 0 {W} {H}" width="{W}" height="{H}">'
        f"{ticks}{body}</svg></figure>"
    )


def _y(value: float, low: float = 0.0, high: float = 1.0) -> float:
    return PAD / 2 + (H - 1.5 * PAD) * (1 - (value - low) / (high - low))


def _nice_top(value: float) -> float:
    """The smallest of 1, 2, 5 times a power of ten that is at least ``value`` (1 for 0)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= value)


def _line_plot(title: str, points: dict[int, float], empty: str, top: float | None = 1.0) -> str:
    """A line over steps, from 0 to ``top`` (None: the smallest round number above the points)."""
    if not points:
        return f'<figure><figcaption>{title}</figcaption><p class="empty">{empty}</p></figure>'
    top = top if top is not None else _nice_top(max(points.values()))
    steps = sorted(points)
    span = max(steps[-1] - steps[0], 1)

    def x(step: int) -> float:
        return PAD + 10 + (W - PAD - 25) * (step - steps[0]) / span

    path = " ".join(f"{x(s):.1f},{_y(points[s], 0, top):.1f}" for s in steps)
    dots = "".join(
        f'<circle cx="{x(s):.1f}" cy="{_y(points[s], 0, top):.1f}" r="3"><title>step {s}: {points[s]:.3f}</title>'
        "</circle>"
        for s in steps
    )
    labelled = steps if len(steps) <= 10 else [steps[0], steps[len(steps) // 2], steps[-1]]
    x_labels = [(x(s), str(s)) for s in labelled]
    y_labels = [(_y(v, 0, top), f"{v:g}") for v in (0.0, top / 2, top)]
    return _frame(title, f'<polyline points="{path}" class="line"/>{dots}', y_labels, x_labels)


def _sign(value: float) -> str:
    return "pos" if value > 0 else "neg" if value < 0 else "zero"


def _histogram(title: str, estimates: Sequence[float]) -> str:
    """Counts of the estimates in 17 bins centred on -1, -7/8, ..., 1 (K = 2, 4, 8 give exact bin centres)."""
    if not estimates:
        return f'<figure><figcaption>{title}</figcaption><p class="empty">no segment was verified</p></figure>'
    centres = [i / 8 for i in range(-8, 9)]
    counts = Counter(min(max(round(e * 8), -8), 8) for e in estimates)
    top = max(counts.values())
    width = (W - PAD - 10) / len(centres)
    bars = "".join(
        f'<rect x="{PAD + i * width + 1:.1f}" y="{_y(counts[c], 0, top):.1f}" width="{width - 2:.1f}" '
        f'height="{_y(0, 0, top) - _y(counts[c], 0, top):.1f}" class="{_sign(c)}">'
        f"<title>{centres[i]:+.3f}: {counts[c]}</title></rect>"
        for i, c in enumerate(range(-8, 9))
        if counts[c]
    )
    x_labels = [(PAD + (i + 0.5) * width, f"{centres[i]:g}") for i in (0, 4, 8, 12, 16)]
    y_labels = [(_y(v, 0, top), str(v)) for v in sorted({0, top})]
    return _frame(title, bars, y_labels, x_labels)


def _plots(summary: dict[int, dict[str, float]], records: Sequence[dict]) -> str:
    hit = {s: m["judge_hit_rate"] for s, m in summary.items() if "judge_hit_rate" in m}
    share = {s: m["credited_token_share"] for s, m in summary.items()}
    estimates = [seg["estimate"] for r in records for seg in r["segments"]]
    return (
        _line_plot("judge hit rate (proposal covers the pivot)", hit, f'the env names no pivot (info["{PIVOT_KEY}"])')
        + _histogram(f"verified estimates ({len(estimates)})", estimates)
        + _line_plot("credited share of policy tokens", share, "no step", top=None)
    )


# ----------------------------------------------------------------------------------------------- groups
def _esc(text: object) -> str:
    return html.escape(str(text))


def _turns(first: int, last: int) -> str:
    return f"turn {first}" if first == last else f"turns {first}-{last}"


def _runs(fork: dict) -> str:
    marks = {True: '<i class="win">&#9679;</i>', False: '<i class="loss">&#9675;</i>', None: '<i class="fail">x</i>'}
    return "".join(marks[r] for r in fork["runs"])


def _group(record: dict) -> str:
    outcome = record["outcome"]
    trajectories = {t["id"]: t for t in record["trajectories"]}
    chips = "".join(
        f'<span class="chip {"won" if t["success"] else "lost"}">#{t["id"]} {"won" if t["success"] else "lost"}, '
        f"{t['turns']} turns</span>"
        for t in record["trajectories"]
    )
    parts = [
        f'<article class="group" data-outcome="{outcome}" data-uid="{_esc(record["uid"])}">',
        f'<header><span class="badge o-{outcome}">{OUTCOME_LABELS[outcome]}</span> '
        f'<span class="uid">{_esc(record["uid"])}</span> <span class="task">{_esc(record["task"][:300])}</span>'
        f"<div>{chips}</div></header>",
    ]
    judge = record["judge"]
    if judge is not None:
        parts.append(_judge(judge, trajectories))
    if record["segments"]:
        parts.append(_segments(record))
    if record["credits"] and not record["segments"]:  # judge_only: credited without verification
        parts.append(
            "".join(
                f'<p class="credit">credited {c["value"]:.3f} (unverified) on {_turns(*c["turns"])} of #{c["traj"]}</p>'
                for c in record["credits"]
                if c["turns"]
            )
        )
    if record["text"]:
        parts.append(_pair(record, trajectories))
    parts.append("</article>")
    return "".join(parts)


def _judge(judge: dict, trajectories: dict[int, dict]) -> str:
    shown = ", ".join(
        f"#{i} ({'success' if trajectories.get(i, {}).get('success') else 'failure'})" for i in judge["shown"]
    )
    proposal = judge["proposal"]
    said = (
        f"{_turns(proposal['start_turn'], proposal['end_turn'])} of #{proposal['traj_id']}"
        if proposal
        else "no proposal"
    )
    reason = f' <q class="reason">{_esc(proposal["reason"])}</q>' if proposal and proposal["reason"] else ""
    rejected = f' <span class="rejected">rejected: {_esc(judge["rejected"])}</span>' if judge["rejected"] else ""
    labels = ", ".join(f"{k} = #{v}" for k, v in judge["labels"].items())
    answer = (
        f"<details><summary>raw answer ({_esc(labels)})</summary><pre>{_esc(judge['answer'])}</pre></details>"
        if judge["answer"] is not None
        else ""
    )
    tokens = f" ({judge['tokens']} tokens)" if judge.get("tokens") is not None else ""
    return (
        f'<div class="judge">judge shown {shown or "?"}: <b>{_esc(judge["status"])}</b>, {said}{reason}{rejected}'
        f"{tokens}{_tool_calls(judge.get('tool_calls') or [])}{answer}</div>"
    )


def _tool_calls(calls: list[dict]) -> str:
    """The agentic judge's tool calls and their results, in order (nothing for a one-shot judge)."""
    if not calls:
        return ""
    items = "".join(
        f'<li class="tool{" tool-error" if c["error"] else ""}">reply {c["call"]}: '
        f"<code>{_esc(c['tool'])}({_esc(c['arguments'])})</code><pre>{_esc(c['result'])}</pre></li>"
        for c in calls
    )
    errors = sum(bool(c["error"]) for c in calls)
    return (
        f'<details class="tool-calls"><summary>{len(calls)} tool calls ({errors} errors)</summary>'
        f"<ol>{items}</ol></details>"
    )


def _segments(record: dict) -> str:
    credits = {tuple(c["turns"]): c for c in record["credits"]}
    rows = []
    for seg in record["segments"]:
        before, after = seg["before"], seg["after"]
        after_cell = (
            f"episode end: {'won' if after['successes'] else 'lost'}"
            if after["terminal"]
            else f"{_runs(after)} {after['successes']}/{after['samples']}"
        )
        credit = credits.get(tuple(seg["turns"]))
        credit_cell = (
            f'<td class="credit">+{credit["value"]:.3f} on tokens {credit["tokens"][0]}-{credit["tokens"][1]} '
            f"({credit['policy_tokens']} policy tokens)</td>"
            if credit
            else '<td class="nocredit">not credited</td>'
        )
        rows.append(
            f"<tr><td>{_turns(*seg['turns'])}</td>"
            f"<td>turn {before['turn']}: {_runs(before)} {before['successes']}/{before['samples']}</td>"
            f"<td>turn {after['turn']}: {after_cell}</td>"
            f'<td class="estimate" data-estimate="{seg["estimate"]!r}">{seg["estimate"]:+.3f} '
            f"&plusmn; {seg['stderr']:.3f}</td>{credit_cell}</tr>"
        )
    head = "<tr><th>segment</th><th>before</th><th>after</th><th>estimate &plusmn; s.e.</th><th>credit</th></tr>"
    return f'<table class="segments">{head}{"".join(rows)}</table>'


def _pair(record: dict, trajectories: dict[int, dict]) -> str:
    judge = record["judge"] or {}
    proposal = judge.get("proposal")
    credited = {
        (c["traj"], t) for c in record["credits"] if c["turns"] for t in range(c["turns"][0], c["turns"][1] + 1)
    }
    columns = []
    for key, text in record["text"].items():
        traj_id = int(key)
        info = trajectories.get(traj_id, {})
        pivot = info.get(PIVOT_KEY)
        rows = []
        for turn, (obs, action) in enumerate(zip(text["observations"], text["actions"], strict=False)):
            classes = []
            if proposal and proposal["traj_id"] == traj_id and proposal["start_turn"] <= turn <= proposal["end_turn"]:
                classes.append("seg")
            if (traj_id, turn) in credited:
                classes.append("credited")
            mark = ' <span class="pivot" title="the env\'s pivotal turn">pivot</span>' if turn == pivot else ""
            rows.append(
                f'<tr class="{" ".join(classes)}" data-turn="{turn}"><th>{turn}{mark}</th>'
                f'<td class="obs">{_esc(obs)}</td><td class="act">{_esc(action)}</td></tr>'
            )
        outcome = "won" if info.get("success") else "lost"
        columns.append(
            f'<div class="traj" data-traj="{traj_id}"><h4 class="{outcome}">#{traj_id} {outcome}, reward '
            f"{info.get('reward', 0):g}, {info.get('turns', len(rows))} turns ({_esc(info.get('stop', ''))})</h4>"
            f"<table><tr><th>turn</th><th>observation</th><th>action</th></tr>{''.join(rows)}</table></div>"
        )
    return f'<div class="pair">{"".join(columns)}</div>'


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m prover_verl.inspect", description=__doc__.split("\n\n")[0])
    parser.add_argument("log_dir", help="the group log folder (algorithm.prover.log_dir)")
    parser.add_argument("--out", default="report.html", help="the HTML file to write (default: report.html)")
    parser.add_argument("--steps", help="steps whose groups to show in detail, e.g. 1-5,9 (default: all)")
    args = parser.parse_args(argv)
    if not Path(args.log_dir).is_dir():
        parser.error(f"{args.log_dir} is not a folder")
    records, bad = read_groups(args.log_dir)
    if not records:
        parser.error(f"no group log under {args.log_dir} (groups-*.jsonl): was algorithm.prover.log_dir set?")
    try:
        steps = parse_steps(args.steps)
    except ValueError as err:
        parser.error(str(err))
    page = build_report(records, str(args.log_dir), bad, steps)
    Path(args.out).write_text(page, encoding="utf-8")
    print(f"wrote {args.out}: {len(records)} groups, {len({r['step'] for r in records})} steps", file=sys.stderr)
    if len(page) > 50 * 2**20:
        print(f"the page holds {len(page) / 2**20:.0f} MB: --steps shows fewer groups in detail", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
