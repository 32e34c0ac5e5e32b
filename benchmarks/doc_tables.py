"""Regenerate the docs' result tables from the committed results files (never typed by hand).

A generated block in a markdown file under ``docs/`` (or the README) is::

    <!-- generated: benchmarks/results/learning/keydoor_hard/results.json table -->
    ...the table...
    <!-- end generated -->

and holds that part of that file as its benchmark renders it (:data:`RENDERERS`, by the file's folder). A block may
name several files joined by ``+`` (``a.json+b.json headline``): each renders that part as a markdown table with the
same header, and the block holds one table, the header once and then every file's rows in the order named (the
README's results table).

    python benchmarks/doc_tables.py          # rewrite every block
    python benchmarks/doc_tables.py --check  # exit 1, naming the blocks that differ from their files
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import (  # noqa: E402
    credit_accuracy,
    credit_assignment,
    judge_agentic,
    keydoor_probe,
    keydoor_reading,
    learning_report,
)
from prover_verl.demo import report as demo_report  # noqa: E402
from prover_verl.judge_model import report as judge_model_report  # noqa: E402


def _judge_model(report: dict, part: str) -> str:
    if part != "table":
        raise ValueError(f"unknown part {part!r} of a judge_model report; only 'table'")
    return judge_model_report.table(report)


# results folder -> the function that renders a part of its files
RENDERERS = {
    "benchmarks/results/learning/": learning_report.render,
    "benchmarks/results/keydoor_probe/": keydoor_probe.render,
    "benchmarks/results/keydoor_reading/": keydoor_reading.render,
    "benchmarks/results/judge_agentic/": judge_agentic.render,
    "benchmarks/results/judge_model/": _judge_model,
    "benchmarks/results/demo/": demo_report.render,
    "benchmarks/results/demo_continuations/": credit_assignment.render,
    "benchmarks/results/demo_continuations_k4/": credit_assignment.render,
    "benchmarks/results/ceiling_demo/": credit_assignment.render,
    "benchmarks/results/credit_accuracy/": credit_accuracy.render,
}


def renderer(source: str):
    """The renderer of the results file ``source`` (a path from the repository root)."""
    for folder, render in RENDERERS.items():
        if source.startswith(folder):
            return render
    raise ValueError(f"generated block names {source}: no renderer for it (known folders: {list(RENDERERS)})")


BLOCK = re.compile(r"(<!-- generated: (\S+) (\w+) -->\n)(.*?)(<!-- end generated -->)", re.DOTALL)


def documents(root: Path = ROOT) -> list[Path]:
    """The markdown files that may hold generated blocks."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def render_part(source: str, part: str, root: Path = ROOT) -> str:
    """``part`` of the results file ``source`` as its benchmark renders it."""
    render, path = renderer(source), root / source
    if not path.exists():
        raise FileNotFoundError(f"generated block names {source}, which does not exist")
    return render(json.loads(path.read_text()), part)


def join_tables(bodies: list[str], source: str) -> str:
    """One rendered part as is; several as one markdown table: the first's header, then every body's rows.

    Raises:
        ValueError: with several bodies, one is not a bare table or its header differs from the first's.
    """
    if len(bodies) == 1:
        return bodies[0]
    tables = [body.splitlines() for body in bodies]
    for lines in tables:
        if len(lines) < 2 or not all(line.startswith("|") for line in lines):
            raise ValueError(f"generated block {source}: joining several files needs bare tables, got {lines[:3]}")
        if lines[:2] != tables[0][:2]:
            raise ValueError(f"generated block {source}: headers differ ({lines[0]} vs {tables[0][0]})")
    return "\n".join(tables[0][:2] + [row for lines in tables for row in lines[2:]])


def regenerate(text: str, root: Path = ROOT) -> tuple[str, list[str]]:
    """``text`` with every generated block rendered anew from its results file, and the blocks that changed."""
    changed = []

    def fill(match: re.Match) -> str:
        source, part = match.group(2), match.group(3)
        body = join_tables([render_part(name, part, root) for name in source.split("+")], source) + "\n"
        if body != match.group(4):
            changed.append(f"{source} {part}")
        return match.group(1) + body + match.group(5)

    return BLOCK.sub(fill, text), changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a block is stale")
    args = parser.parse_args(argv)
    stale = []
    for doc in documents():
        text = doc.read_text()
        new, changed = regenerate(text)
        stale += [f"{doc.relative_to(ROOT)}: {c}" for c in changed]
        if changed and not args.check:
            doc.write_text(new)
    for line in stale:
        print(("stale " if args.check else "rewrote ") + line)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
