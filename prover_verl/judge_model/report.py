"""The held-out table of a judge model's results JSON, as docs/method.md shows it.

``python -m prover_verl.judge_model.report RESULTS_JSON`` prints it (Markdown).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from prover_verl.judge_model.train import PROMPT_CLASSES

JUDGES = {"model": "judge model", "heuristic": "heuristic (first divergence)", "random": "random segment"}
CLASS_NAMES = {"fits": "prompt as rendered", "cut": "cut to fit", "too_long": "too long (skipped)"}


def _pct(value: float) -> str:
    return f"{100 * value:.1f} %"


def table(results: dict[str, Any]) -> str:
    """Markdown: per judge, the hit rate over all held-out pairs and over its proposals, its malformed,
    out-of-range and too-long rates and its mean segment length; then the hit rate per prompt class."""
    held = results["held_out"]
    lines = [
        "| judge | pairs | hits pivot (all pairs) | hits pivot (of proposals) | malformed | out of range | too long "
        "| mean segment turns |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, name in JUDGES.items():
        r = held["overall"][key]
        lines.append(
            f"| {name} | {r['pairs']} | {_pct(r['hit_rate'])} | {_pct(r['proposal_hit_rate'])} "
            f"| {_pct(r['malformed_rate'])} | {_pct(r['out_of_range_rate'])} | {_pct(r['too_long_rate'])} "
            f"| {r['mean_segment_turns']:.2f} |"
        )
    lines += ["", "| judge | " + " | ".join(f"{CLASS_NAMES[c]}: hit (pairs)" for c in PROMPT_CLASSES) + " |"]
    lines.append("|---|" + "---|" * len(PROMPT_CLASSES))
    for key, name in JUDGES.items():
        cells = [held["by_prompt"][key][c] for c in PROMPT_CLASSES]
        lines.append(f"| {name} | " + " | ".join(f"{_pct(c['hit_rate'])} ({c['pairs']})" for c in cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="results JSON of python -m prover_verl.judge_model.train")
    args = parser.parse_args(argv)
    print(table(json.loads(Path(args.results).read_text())))


if __name__ == "__main__":
    main()
