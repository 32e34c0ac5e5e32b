"""Paper-style tables from validation episodes logged by the agent loop (``env.eval_log_dir``).

``python -m prover_verl.eval.tables --run GRPO=logs/grpo --run ProVer=logs/prover --baseline GRPO --out results``
(or ``--logs logs``: every run logged under a folder, named by its path there) writes ``tables.md`` and one CSV
per benchmark:

* ALFWorld: success rate (%) per task type and over all tasks, on valid_seen (in-distribution, verl-agent's
  published number) when logged, else valid_unseen; with both logged, also a row per split (``alfworld_valid_seen``,
  ``alfworld_valid_unseen``);
* WebShop: score (mean final reward x 100) and success rate (%);
* Search-QA: exact match (%) per dataset and their unweighted mean;

and, with ``--baseline``, each run's relative gain over the baseline on each benchmark's headline number
(ALFWorld all, WebShop success, Search-QA mean EM) and their mean, the form of the paper's summary figure.
Each benchmark's columns are declared by its env's :class:`envs.TableSpec` (``envs/<name>/spec.py``); any
registered env with one has a table (e.g. the toy KeyDoor: success %).
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
from collections import defaultdict
from pathlib import Path

import envs
from envs.spec import TableSpec


def load_episodes(log_dir: str | os.PathLike, step: int | None = None) -> list[dict]:
    """Read every ``episodes-*.jsonl`` in ``log_dir``; keep the latest step (or ``step``) only."""
    files = sorted(glob.glob(os.path.join(str(log_dir), "episodes-*.jsonl")))
    if not files:
        raise FileNotFoundError(f"no episodes-*.jsonl in {log_dir} (was env.eval_log_dir set for validation?)")
    records = []
    for path in files:
        with open(path) as f:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise ValueError(f"{path}:{line_no}: not a JSON episode record ({err})") from None
    wanted = max(r["step"] for r in records) if step is None else step
    kept = [r for r in records if r["step"] == wanted]
    if not kept:
        raise ValueError(f"{log_dir}: no episodes at step {wanted}")
    return kept


def find_runs(root: str | os.PathLike) -> dict[str, Path]:
    """Every folder under ``root`` holding ``episodes-*.jsonl``, by its path relative to ``root`` (``/``-separated,
    sorted): the run names ``recipes/eval/run_eval.sh`` logged under ``$OUT/logs``.

    Raises:
        FileNotFoundError: No such folder under ``root``.
    """
    root = Path(root)
    dirs = sorted({p.parent for p in root.rglob("episodes-*.jsonl")})
    if not dirs:
        raise FileNotFoundError(f"no episodes-*.jsonl under {root}")
    return {d.relative_to(root).as_posix(): d for d in dirs}


def _pct(values: list[float]) -> float | None:
    return 100.0 * sum(values) / len(values) if values else None


def _tables() -> dict[str, TableSpec]:
    """The benchmarks, in registration order: every registered env whose spec has a table."""
    return {spec.name: spec.table for spec in envs.specs() if spec.table is not None}


def _field(episode: dict, field: str) -> float:
    """``episode[field]``; ``"a|b"``: ``a``, else ``b`` (a field older logs lack)."""
    names = field.split("|")
    return episode[next((name for name in names if name in episode), names[-1])]


def table_row(spec: TableSpec, episodes: list[dict]) -> dict[str, float | None]:
    """The table columns of one run on one benchmark (see :class:`envs.TableSpec`)."""
    row: dict[str, float | None] = {}
    if spec.per_category:
        per: dict[str, list[float]] = defaultdict(list)
        for ep in episodes:
            category = ep.get("category") or "unknown"
            per[spec.category_names.get(category, category)].append(ep.get(spec.per_category, ep["won"]))
        if spec.categories:
            row.update({c: _pct(per.get(c, [])) for c in spec.categories})
        else:
            row.update({c: _pct(v) for c, v in sorted(per.items())})
    if spec.mean_column:
        row[spec.mean_column] = sum(row.values()) / len(row)
    for column, field in spec.totals.items():
        row[column] = _pct([_field(ep, field) for ep in episodes])
    return row


def benchmark_rows(episodes: list[dict]) -> dict[str, dict[str, float | None]]:
    """Per benchmark, the table columns of one run.

    An env whose table names validation splits (:attr:`envs.TableSpec.split_names`, ALFWorld's in- and
    out-of-distribution) is tabulated on the first of them that was logged, and with several splits logged each
    split also gets a row ``<env>_<split>``.
    """
    by_env: dict[str, list[dict]] = defaultdict(list)
    for ep in episodes:
        by_env[ep["env"]].append(ep)
    rows = {}
    for name, spec in _tables().items():
        if name not in by_env:
            continue
        by_split: dict[str, list[dict]] = defaultdict(list)
        for ep in by_env[name]:
            by_split[str(ep.get("split"))].append(ep)
        listed = [split for split in spec.split_names if split in by_split]
        if not listed:
            rows[name] = table_row(spec, by_env[name])
            continue
        rows[name] = table_row(spec, by_split[listed[0]])
        if len(by_split) > 1:
            for split in [*listed, *sorted(s for s in by_split if s not in spec.split_names)]:
                rows[f"{name}_{split}"] = table_row(spec, by_split[split])
    return rows


def _env_split(bench: str) -> tuple[str, str | None]:
    """A benchmark row name (an env, or ``<env>_<split>``) as its env and split."""
    tables = _tables()
    if bench in tables:
        return bench, None
    name = next(name for name in tables if bench.startswith(f"{name}_"))
    return name, bench[len(name) + 1 :]


def _spec(bench: str) -> TableSpec:
    """The table spec of a benchmark row name."""
    return _tables()[_env_split(bench)[0]]


def _benches(runs: dict[str, dict]) -> list[str]:
    """The benchmark rows of any run, each env's own first, then its splits in the order its spec lists them."""
    present = {bench for tables in runs.values() for bench in tables}
    out = []
    for name, spec in _tables().items():
        splits = sorted(
            (b for b in present if b.startswith(f"{name}_")),
            key=lambda b: (list(spec.split_names).index(b[len(name) + 1 :]) if b[len(name) + 1 :] in spec.split_names
                           else len(spec.split_names), b),
        )  # fmt: skip
        out += [name] * (name in present) + splits
    return out


def headlines(runs: dict[str, dict] | None = None) -> dict[str, str]:
    """Benchmark -> the column its relative gains are computed on (the form of the paper's summary figure); with
    ``runs``, only the benchmarks present in one of them."""
    return {
        name: table.headline
        for name, table in _tables().items()
        if runs is None or any(name in tables for tables in runs.values())
    }


def relative_gains(runs: dict[str, dict], baseline: str) -> dict[str, dict[str, float]]:
    """Relative gain (%) of each run over ``baseline`` on each benchmark's headline number, and their mean."""
    if baseline not in runs:
        raise ValueError(f"baseline run '{baseline}' not among {sorted(runs)}")
    gains = {}
    for name, tables in runs.items():
        row = {}
        for bench, column in headlines(runs).items():
            base = runs[baseline].get(bench, {}).get(column)
            value = tables.get(bench, {}).get(column)
            if base and value is not None:
                row[bench] = 100.0 * (value - base) / base
        if row:
            row["mean"] = sum(row.values()) / len(row)
        gains[name] = row
    return gains


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def markdown(runs: dict[str, dict], gains: dict[str, dict] | None = None) -> str:
    """Markdown tables, one per benchmark present in any run."""
    out = []
    for bench in _benches(runs):
        columns = _columns(runs, bench)
        if not columns:
            continue
        split = _env_split(bench)[1]
        label = f" ({_spec(bench).split_names.get(split, split)})" if split else ""
        out.append(f"### {bench}{label}\n")
        out.append("| run | " + " | ".join(columns) + " |")
        out.append("|---|" + "---|" * len(columns))
        for name, tables in runs.items():
            row = tables.get(bench, {})
            out.append(f"| {name} | " + " | ".join(_fmt(row.get(c)) for c in columns) + " |")
        out.append("")
    if gains:
        columns = [*headlines(runs), "mean"]
        out.append("### relative gain over the baseline (%)\n")
        out.append("| run | " + " | ".join(columns) + " |")
        out.append("|---|" + "---|" * len(columns))
        for name, row in gains.items():
            out.append(f"| {name} | " + " | ".join(_fmt(row.get(c)) for c in columns) + " |")
    return "\n".join(out) + "\n"


def _columns(runs: dict[str, dict], bench: str) -> list[str]:
    """The columns of ``bench`` in any run: the spec's fixed columns in order, then the others sorted, the mean
    column last."""
    spec = _spec(bench)
    fixed = spec.fixed_columns()

    def order(c: str) -> tuple:
        return (c == spec.mean_column, fixed.index(c) if c in fixed else len(fixed), c)

    return sorted({c for t in runs.values() for c in t.get(bench, {})}, key=order)


def write_tables(runs: dict[str, dict], out_dir: str | os.PathLike, baseline: str | None = None) -> Path:
    """Write ``tables.md`` and ``<benchmark>.csv`` files; returns the Markdown path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    gains = relative_gains(runs, baseline) if baseline else None
    md = out / "tables.md"
    md.write_text(markdown(runs, gains))
    for bench in _benches(runs):
        columns = _columns(runs, bench)
        if not columns:
            continue
        with open(out / f"{bench}.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["run", *columns])
            for name, tables in runs.items():
                writer.writerow([name, *(tables.get(bench, {}).get(c, "") for c in columns)])
    return md


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Paper-style tables from logged validation episodes.")
    parser.add_argument("--run", action="append", default=[], help="NAME=LOG_DIR (repeatable)")
    parser.add_argument("--logs", default=None, help="also every run logged under this folder, named by its path")
    parser.add_argument("--baseline", default=None, help="run name to report relative gains against")
    parser.add_argument("--step", type=int, default=None, help="evaluation step to use (default: latest)")
    parser.add_argument("--out", default="results/tables")
    args = parser.parse_args(argv)
    if not args.run and args.logs is None:
        parser.error("give --run NAME=LOG_DIR or --logs DIR")
    log_dirs: dict[str, str | os.PathLike] = dict(find_runs(args.logs)) if args.logs is not None else {}
    for spec in args.run:
        name, sep, log_dir = spec.partition("=")
        if not sep:
            parser.error(f"--run expects NAME=LOG_DIR, got {spec!r}")
        log_dirs[name] = log_dir
    runs = {name: benchmark_rows(load_episodes(log_dir, args.step)) for name, log_dir in log_dirs.items()}
    md = write_tables(runs, args.out, args.baseline)
    print(md.read_text())
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
