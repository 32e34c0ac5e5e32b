"""Data at official size: memory per env process, start time, latencies and prepare time, as a function of size.

    python benchmarks/data_scale.py --products 10000 100000 1000000 --passages 20000 200000 2000000 \\
        --games 18 600 3553 --work-dir /scratch/data_scale --out data_scale.json

For each size it synthesises official-format data (``data_synth.py``: WebShop ``items_shuffle.json`` and its
instruction files, 3.4 KB a product; a wiki-18 JSONL corpus, ~650 bytes a passage; an ALFWorld data root of that
many games), prepares the store once (``python -m envs.webshop.prepare`` / ``envs.searchqa.prepare``, ``--threads``
index threads; a store already in ``--work-dir`` is reused and its recorded build time reported; ALFWorld has
nothing to prepare), then starts ``--workers`` env processes on it at once. Each reports how its start splits
(imports, opening the env's data, first reset; ``start_s`` is wall time from launching the interpreter to after
the first reset) and the median latency of reset, step, search and fork (snapshot + restore) over ``--episodes``
episodes. While all of them are alive the parent reads each one's memory from ``/proc/PID/smaps_rollup``: USS
(private pages, what the process alone holds), PSS (shared pages divided among the processes that map them, so a
file page shared through the page cache counts once in all), anonymous memory (heaps: USS also counts the pages
of a memory-mapped index that no other process happens to map, which the page cache could drop) and RSS.
``search/query`` divides a search step by the Lucene query alone timed in the same process (what the old
in-memory catalog and corpus added to it was a dict lookup), so what the store adds to a search shows as a ratio.
Rows show the worse process; the Markdown table goes to stdout, everything (every process) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import data_synth  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, random, statistics, sys, time
args = json.loads(sys.argv[1])
kind, rng = args["kind"], random.Random(args["seed"])
t0 = time.perf_counter()
import envs
envs.env_class(kind)  # imports the env's module
t1 = time.perf_counter()
env = envs.make(kind, **args["env"])
t2 = time.perf_counter()
tasks = env.task_ids()
_, info = env.reset(options={"task_id": tasks[0]})
t3 = time.perf_counter()
print("STARTED " + json.dumps({"wall": time.time(), "import_s": t1 - t0, "open_s": t2 - t1, "first_reset_s": t3 - t2}),
      flush=True)
times = {"reset": [], "step": [], "search": [], "query": [], "fork": []}

def timed(name, fn, *a, **kw):
    t = time.perf_counter()
    out = fn(*a, **kw)
    times[name].append(time.perf_counter() - t)
    return out

def fork():
    timed("fork", lambda: env.restore(env.snapshot()))

def query():  # a query no memo has seen: the instruction's or question's words and two random ones
    if kind == "webshop":
        from envs.webshop.env import expert_query
        base = expert_query(env.goal(env._session.goal_id))
    else:
        base = env._question.question
    return f"{base} {' '.join(rng.sample(args['words'], 2))}"

for i in range(args["episodes"]):
    _, info = timed("reset", env.reset, options={"task_id": tasks[(i * 7919) % len(tasks)]})
    if kind == "alfworld":
        for _ in range(3):
            obs, _, term, trunc, info = timed("step", env.step, info["admissible_actions"][0])
            fork()
        continue
    q = query()
    if kind == "webshop":
        timed("query", env.catalog.index.searcher.search, q, 50)
        _, _, _, _, info = timed("search", env.step, f"search[{q}]")
        fork()
        clicks = [a for a in info["admissible_actions"] if a not in ("click[back to search]", "click[next >]")]
        if clicks:
            timed("step", env.step, clicks[0])
            fork()
            timed("step", env.step, "click[buy now]")
    else:
        timed("query", env.retriever.searcher.search, q, env.topk)
        timed("search", env.step, f"<search>{q}</search>")
        fork()
        timed("step", env.step, "<answer>unknown</answer>")
row = {f"{k}_ms": round(1e3 * statistics.median(v), 3) if v else None for k, v in times.items()}
print("READY " + json.dumps({**row, "tasks": len(tasks)}), flush=True)
sys.stdin.readline()  # held open while the parent reads every process's memory
"""


def memory(pid: int) -> dict[str, float]:
    """USS, anonymous memory, PSS and RSS of a process in MB (``/proc/PID/smaps_rollup``)."""
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value = line.split(":", 1)
        fields[name] = int(value.split()[0]) / 1024
    uss = fields["Private_Clean"] + fields["Private_Dirty"]
    return {
        "uss_mb": round(uss, 1),
        "anon_mb": round(fields["Anonymous"], 1),
        "pss_mb": round(fields["Pss"], 1),
        "rss_mb": round(fields["Rss"], 1),
    }


def _read(child: subprocess.Popen, tag: str) -> dict:
    line = child.stdout.readline()
    while line and not line.startswith(tag):
        line = child.stdout.readline()
    if not line:
        raise RuntimeError(f"env process failed (exit {child.wait()}): {child.stderr.read()[-3000:]}")
    return json.loads(line[len(tag) :])


def run_processes(kind: str, env_kwargs: dict, workers: int, episodes: int) -> list[dict]:
    """Start ``workers`` env processes at once; return each one's figures, memory read while all are alive."""
    words = random.Random(1).sample(data_synth.VOCABULARY[:5000], 2000)
    children, launched = [], time.time()
    for seed in range(workers):
        payload = json.dumps({"kind": kind, "env": env_kwargs, "episodes": episodes, "seed": seed, "words": words})
        children.append(
            subprocess.Popen(
                [sys.executable, "-c", CHILD, payload],
                cwd=REPO,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    rows = []
    for child in children:
        started = _read(child, "STARTED ")
        row = {"start_s": round(started.pop("wall") - launched, 2), **{k: round(v, 2) for k, v in started.items()}}
        rows.append({**row, **_read(child, "READY ")})
    for child, row in zip(children, rows, strict=True):  # all alive: shared pages divided among all of them
        row.update(memory(child.pid))
    for child in children:
        child.stdin.close()
        child.wait(timeout=120)
    return rows


def prepare(kind: str, size: int, work: Path, threads: int) -> tuple[dict, float, float, float]:
    """Synthesise (if missing) and prepare (if missing) data of ``size``; returns the env kwargs, the prepare
    seconds, and the data's and the store's GB on disk."""
    data = work / "synth" / f"{kind}_{size}"
    out = work / "stores" / data.name
    if kind == "alfworld":
        if not data.is_dir():
            data_synth.alfworld(data, size)
        return {"data_dir": str(data), "split": "train"}, 0.0, _gb(data), 0.0
    if kind == "webshop":
        from envs.webshop.prepare import main as prepare_webshop

        if not (data / "items_human_ins.json").is_file():
            data_synth.webshop(data, size)
        if not (out / "store.json").is_file():
            prepare_webshop(["--data-dir", str(data), "--out", str(out), "--threads", str(threads)])
        kwargs = {"store_dir": str(out), "split": "all"}
    else:
        from envs.searchqa.corpus import prepare_index

        if not (data / "wiki-18.jsonl").is_file():
            data_synth.wiki(data, size)
        if not (out / "store.json").is_file():
            prepare_index(data / "wiki-18.jsonl", out, threads)
        kwargs = {"index_dir": str(out), "split": "train"}
    manifest = json.loads((out / "store.json").read_text())
    return kwargs, manifest["build_seconds"], _gb(data), _gb(out)


def _gb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e9, 3)


COLUMNS = ["env", "size", "data_gb", "store_gb", "prepare_s", "start_s", "import_s", "open_s", "first_reset_s"]
COLUMNS += ["uss_mb", "uss_growth_mb", "anon_mb", "pss_mb", "rss_mb", "reset_ms", "step_ms", "search_ms", "query_ms"]
COLUMNS += ["search/query", "fork_ms"]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--products", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--passages", type=int, nargs="*", default=[20_000, 200_000, 2_000_000])
    parser.add_argument("--games", type=int, nargs="*", default=[18, 600, 3553])
    parser.add_argument("--workers", type=int, default=2, help="env processes started at once on each store")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2, help="index build threads")
    parser.add_argument("--work-dir", type=Path, required=True, help="synthetic data and stores (GBs at 1 M)")
    parser.add_argument("--out", type=Path, default=Path("data_scale.json"))
    args = parser.parse_args(argv)
    rows = []
    for kind, sizes in (("alfworld", args.games), ("webshop", args.products), ("searchqa", args.passages)):
        for size in sizes:
            kwargs, prepare_s, data_gb, store_gb = prepare(kind, size, args.work_dir, args.threads)
            per_process = run_processes(kind, kwargs, args.workers, args.episodes)
            row = {"env": kind, "size": size, "data_gb": data_gb, "store_gb": store_gb, "prepare_s": prepare_s}
            for key, value in per_process[0].items():
                values = [p[key] for p in per_process]
                row[key] = max(values) if value is not None else None  # the worse process
            if row["query_ms"]:
                row["search/query"] = round(row["search_ms"] / row["query_ms"], 2)
            row["per_process"] = per_process
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "per_process"}), file=sys.stderr, flush=True)
    for kind in ("alfworld", "webshop", "searchqa"):
        mine = [r for r in rows if r["env"] == kind]
        for r in mine:
            r["uss_growth_mb"] = round(r["uss_mb"] - mine[0]["uss_mb"], 1)
    print("| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS))
    for r in rows:
        print("| " + " | ".join("" if r.get(c) is None else str(r[c]) for c in COLUMNS) + " |")
    result = {"workers": args.workers, "episodes": args.episodes, "threads": args.threads, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
