"""Credit-assignment benchmark on the KeyDoor CPU toy: the demo's comparison, and ablations of ProVer's knobs.

    python benchmarks/credit_assignment.py --suite main            # same as python -m prover_verl.demo
    python benchmarks/credit_assignment.py --suite ablations       # k, coef, segment_side, min_estimate
    python benchmarks/credit_assignment.py --suite ablations --only k,coef --judge noisy:1.0 --seeds 3
    python benchmarks/credit_assignment.py --only continuations --judge noisy:1.0   # train_on_continuations
    python benchmarks/credit_assignment.py --only every_turn,continuations --judge noisy:1.0 \
        --keydoor '{"doors": 2, "note_at_keys": true, "early_pivot": true, "guard": true}'   # a KeyDoor variant

Each ablation changes one knob of the ``ProverConfig`` defaults (k=2, coef=2, segment_side=success,
min_estimate=0) and runs against GRPO with the same seeds and updates; the table and JSON go to ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.provenance import code_commit, command_line  # noqa: E402
from prover_verl.config import ProverConfig  # noqa: E402
from prover_verl.demo import report as demo_report  # noqa: E402
from prover_verl.demo.__main__ import add_run_arguments, execute, run_configs, settings_of  # noqa: E402
from prover_verl.demo.report import HEADER, write_report  # noqa: E402
from prover_verl.demo.train import MethodSpec, default_methods  # noqa: E402

ABLATIONS = {
    "k": ("k", (2, 4, 8)),
    "coef": ("coef", (0.5, 1.0, 2.0, 4.0)),
    "side": ("segment_side", ("success", "failure", "any")),
    "min_estimate": ("min_estimate", (0.0, 0.5)),  # K=2 estimates are multiples of 0.5
    "continuations": ("train_on_continuations", (False, True)),  # also train on the verifier's continuations
    "every_turn": ("ablation", ("none", "every_turn")),  # every turn of the pair's trajectory verified: the ceiling
}


def parse_judge(text: str) -> tuple[str, float | None]:
    """``heuristic`` or ``noisy:<accuracy>``."""
    if text == "heuristic":
        return "heuristic", None
    kind, _, accuracy = text.partition(":")
    try:
        value = float(accuracy)
    except ValueError:
        value = None
    if kind != "noisy" or value is None or not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"--judge must be 'heuristic' or 'noisy:<accuracy in [0, 1]>', got {text!r}")
    return kind, value


def parse_base(text: str) -> dict:
    """``k=2,coef=2.0``: ProverConfig fields the ablations start from instead of the defaults."""
    known = {field for field, _ in ABLATIONS.values()}
    fields = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep or key not in known:
            raise argparse.ArgumentTypeError(
                f"--base expects field=value with a field of {sorted(known)}, got {item!r}"
            )
        if key == "train_on_continuations":
            fields[key] = {"true": True, "false": False}.get(value.lower(), value)  # else the config names it
        else:
            fields[key] = value if key in ("segment_side", "ablation") else (int(value) if key == "k" else float(value))
    return fields


def ablation_methods(
    only: Sequence[str], judge: tuple[str, float | None], base: dict | None = None
) -> list[MethodSpec]:
    """GRPO, ProVer at the defaults (or ``base``), and ProVer with one knob changed per entry of ``only``."""
    kind, accuracy = judge
    label = "heuristic judge" if kind == "heuristic" else f"judge acc {accuracy}"
    default = dataclasses.replace(ProverConfig(), **(base or {}))
    tag = "defaults" if not base else ",".join(f"{k}={v}" for k, v in base.items())
    methods = [
        MethodSpec("GRPO", "grpo"),
        MethodSpec(f"ProVer {tag} ({label})", "prover", judge=kind, accuracy=accuracy, prover=default),
    ]
    for name in only:
        if name not in ABLATIONS:
            raise SystemExit(f"unknown ablation {name!r}; known: {sorted(ABLATIONS)}")
        field, values = ABLATIONS[name]
        for value in values:
            if value == getattr(default, field):
                continue
            config = dataclasses.replace(default, **{field: value})
            name = f"ProVer {field}={value}" + (f" ({tag})" if base else "")
            methods.append(MethodSpec(name, "prover", judge=kind, accuracy=accuracy, prover=config))
    return methods


def variant_name(report: dict) -> str:
    """The KeyDoor variant a results file trained on: its name in ``benchmarks/credit_accuracy.py``'s ``VARIANTS``,
    else its keywords (``default``: none)."""
    from benchmarks.credit_accuracy import VARIANTS

    keywords = {k: v for k, v in report["settings"]["run"].get("keydoor", [])}
    for name, values in VARIANTS.items():
        if values == keywords:
            return name
    return json.dumps(keywords, sort_keys=True)


def gaps(report: dict, reference: str = "GRPO") -> str:
    """Each method's success minus ``reference``'s at equal updates, paired by seed, as a markdown table: the mean
    over the evaluations (the AUC difference) with its sem over seeds, and the largest mean paired difference at one
    evaluation with its update (a maximum over noisy points: an upper estimate). Methods listed before the reference
    are left out."""
    runs = report["runs"]
    grpo = sorted(runs[reference], key=lambda r: r["seed"])
    lines = [
        "| variant | method | minus | seeds | success AUC difference (sem) | largest mean gap at one update (update) |",
        "|---|---|---|---|---|---|",
    ]
    names = list(runs)
    for name in names[names.index(reference) + 1 :]:
        method_runs = runs[name]
        method_runs = sorted(method_runs, key=lambda r: r["seed"])
        if [r["seed"] for r in method_runs] != [r["seed"] for r in grpo]:
            raise ValueError(f"{name}: seeds differ from {reference}'s")
        diffs = np.array([[p["success"] - q["success"] for p, q in zip(m["curve"], g["curve"], strict=True)]
                          for m, g in zip(method_runs, grpo, strict=True)])  # fmt: skip
        auc = diffs.mean(axis=1)
        sem = auc.std(ddof=1) / np.sqrt(len(auc)) if len(auc) > 1 else float("nan")
        at = int(np.argmax(diffs.mean(axis=0)))
        update = grpo[0]["curve"][at]["update"]
        lines.append(
            f"| {variant_name(report)} | {name} | {reference} | {len(auc)} | {auc.mean():+.3f} ({sem:.3f}) | "
            f"{diffs.mean(axis=0)[at]:+.3f} ({update}) |"
        )
    return "\n".join(lines)


def render(report: dict, part: str) -> str:
    """A part of a results file this benchmark wrote, for ``benchmarks/doc_tables.py``: ``gaps`` (:func:`gaps`
    against GRPO), ``gaps_base`` (against the ablations' base ProVer, the second method, e.g. the effect of
    ``train_on_continuations``), or any part the demo's report renders (``table``, ``headline``)."""
    if part == "gaps":
        return gaps(report)
    if part == "gaps_base":
        return gaps(report, reference=list(report["runs"])[1])
    return demo_report.render(report, part)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_arguments(parser)
    parser.add_argument("--suite", choices=("main", "ablations"), default="ablations")
    parser.add_argument("--only", default=",".join(ABLATIONS), help=f"comma-separated subset of {list(ABLATIONS)}")
    parser.add_argument("--judge", type=parse_judge, default=("noisy", 0.5), help="heuristic or noisy:<accuracy>")
    parser.add_argument("--base", type=parse_base, default=None, help="start the ablations from e.g. k=2,coef=2.0")
    parser.set_defaults(out=Path("results/credit_assignment"), seeds=3)
    args = parser.parse_args(argv)
    if args.suite == "main":
        methods = default_methods(ProverConfig())
    else:
        methods = ablation_methods([s for s in args.only.split(",") if s], args.judge, args.base)
    configs = run_configs(args, methods)
    print(HEADER, file=sys.stderr, flush=True)
    report = write_report(execute(configs, args.workers), args.out, settings_of(configs), args.target)
    saved = json.loads((args.out / "results.json").read_text())  # what ran, for committed results files
    provenance = {"command": command_line("benchmarks/credit_assignment.py", argv), "commit": code_commit()}
    (args.out / "results.json").write_text(json.dumps(provenance | saved, indent=1) + "\n")
    print(report["table"])
    print(f"\nResults written to {args.out.resolve()}")


if __name__ == "__main__":
    main()
