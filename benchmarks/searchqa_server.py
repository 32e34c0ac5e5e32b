"""The Search-QA retrieval server as a Search-R1 drop-in at full size: memory and threads per server process, and
per env process with Search-R1's full question split.

    python benchmarks/searchqa_server.py --passages 200000 2000000 --work-dir /scratch/sq --out searchqa_server.json

For each corpus size it synthesises a wiki-18 JSONL corpus (``data_synth.wiki``), indexes it as Search-R1's
``index_builder.py`` does (Anserini ``IndexCollection``, ``JsonCollection``, ``DefaultLuceneDocumentGenerator``,
ids only), then starts ``python -m envs.searchqa.server`` with Search-R1's flags (``--index_path --corpus_path
--topk 3 --retriever_name bm25``). Its first start builds the passage store (timed). Then ``--requests`` one-query
requests from ``--clients`` concurrent clients (an env worker's traffic), then ``--trainer-requests`` requests as
Search-R1's trainer sends them (2,560 queries, ``topk`` null). The server's memory (``/proc/PID/smaps_rollup``:
USS, anonymous, PSS, RSS) and OS threads are read after start, after the small requests and after the trainer's;
``peak_rss_mb`` is its ``VmHWM``. Anonymous memory is what the process alone holds (JVM heap, Python); USS also
counts index and store pages that only it has read (page cache, shared with any other reader).

With ``--questions N`` it writes a questions parquet of N rows in the layout of Search-R1's processed NQ/HotpotQA
train split (169,615 rows: ``id``, ``question``, ``golden_answers``, ``data_source``, ``prompt``, ``ability``,
``reward_model``, ``extra_info``), and starts env processes on it (``retriever_url`` set, so only the questions
count): the first builds the question store, then two start at once and are measured; a last one parses the file
in its own process, as every env process did before. The Markdown tables go to stdout, everything to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import data_synth  # noqa: E402
from data_scale import memory  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TRAINER_QUERIES = 512 * 5


def threads_and_peak(pid: int) -> dict[str, float]:
    """OS threads and peak RSS (MB) of a process."""
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return {"threads": int(status["Threads"]), "peak_rss_mb": round(int(status["VmHWM"].split()[0]) / 1024, 1)}


def search_r1_index(size: int, work: Path, threads: int) -> tuple[Path, Path, float]:
    """The corpus of ``size`` passages and its Search-R1 BM25 index (built if missing); returns both and the index
    build seconds (0 if it was there)."""
    from envs.store import index_collection

    data = work / f"wiki_{size}"
    corpus, index = data / "wiki-18.jsonl", data / "bm25"
    if not corpus.is_file():
        data_synth.wiki(data, size)
    seconds = 0.0
    if not any(index.glob("segments_*")):
        (data / "temp").mkdir(exist_ok=True)
        link = data / "temp" / "temp.jsonl"
        if not link.exists():
            link.symlink_to(corpus)
        start = time.perf_counter()
        index_collection(data / "temp", index, threads)
        seconds = time.perf_counter() - start
    return corpus, index, round(seconds, 1)


def query(rng: random.Random) -> str:
    return " ".join(rng.choices(data_synth.VOCABULARY[:5000], k=3))


def post(session, url: str, queries: list[str], topk) -> list:
    reply = session.post(url, json={"queries": queries, "topk": topk, "return_scores": True}, timeout=3600)
    reply.raise_for_status()
    result = reply.json()["result"]
    if len(result) != len(queries):
        raise RuntimeError(f"{len(result)} results for {len(queries)} queries")
    return result


def run_server(size: int, args: argparse.Namespace) -> dict:
    import requests

    corpus, index, index_s = search_r1_index(size, args.work_dir, args.threads)
    flags = ["--index_path", str(index), "--corpus_path", str(corpus), "--topk", "3", "--retriever_name", "bm25"]
    flags += ["--port", "0", "--cache-dir", str(args.work_dir / "cache"), "--threads", str(args.search_threads)]
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "envs.searchqa.server", *flags], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    built = False
    for line in proc.stdout:
        built |= line.startswith("building the passage store")
        if line.startswith("serving "):
            url = line.split(" at ")[-1].strip()
            break
    else:
        raise RuntimeError(f"server exited with {proc.wait()}")
    row = {"passages": size, "index_build_s": index_s, "start_s": round(time.perf_counter() - start, 1)}
    row["passage_store_built"] = built
    try:
        row["after_start"] = {**memory(proc.pid), **threads_and_peak(proc.pid)}
        rng, latencies = random.Random(0), []

        def client(n: int) -> None:
            with requests.Session() as session:
                for _ in range(n):
                    t = time.perf_counter()
                    post(session, url, [query(rng)], None)
                    latencies.append(time.perf_counter() - t)

        clients = [threading.Thread(target=client, args=(args.requests // args.clients,)) for _ in range(args.clients)]
        for t in clients:
            t.start()
        for t in clients:
            t.join()
        row["small_requests"] = len(latencies)
        row["small_request_ms_median"] = round(1e3 * statistics.median(latencies), 1)
        row["after_small"] = {**memory(proc.pid), **threads_and_peak(proc.pid)}
        trainer = []
        with requests.Session() as session:
            for _ in range(args.trainer_requests):
                t = time.perf_counter()
                post(session, url, [query(rng) for _ in range(TRAINER_QUERIES)], None)
                trainer.append(time.perf_counter() - t)
        row["trainer_request_s"] = [round(t, 1) for t in trainer]
        row["after_trainer"] = {**memory(proc.pid), **threads_and_peak(proc.pid)}
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return row


QUESTION_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
args = json.loads(sys.argv[1])
from envs.searchqa import corpus
if args["in_process"]:
    corpus.QUESTIONS_IN_MEMORY_BYTES = 1 << 62  # parse the file here, as every env process did before
from envs.searchqa.env import SearchQAEnv
env = SearchQAEnv(questions_path=args["path"], split="train", cache_dir=args["cache"],
                  retriever_url="http://127.0.0.1:9/retrieve")
tasks = env.task_ids()
env.reset(options={"task_id": tasks[len(tasks) // 2]})
print("READY " + json.dumps({"start_s": round(time.perf_counter() - t0, 2), "tasks": len(tasks)}), flush=True)
sys.stdin.readline()
"""


def write_questions(path: Path, n: int) -> None:
    """A parquet of ``n`` questions in the layout of Search-R1's processed train split."""
    import pandas as pd

    rng = random.Random(0)
    rows = []
    for i in range(n):
        source = "nq" if i < n * 79168 // 169615 else "hotpotqa"  # NQ's share of Search-R1's train split
        question = " ".join(data_synth.words(rng, rng.randint(8, 20))) + "?"
        golds = [" ".join(data_synth.words(rng, rng.randint(1, 3))) for _ in range(rng.randint(1, 3))]
        prompt = f"Answer the given question. ... {' '.join(data_synth.words(rng, 110))} Question: {question}\n"
        rows.append(
            {
                "id": f"train_{i}",
                "question": question,
                "golden_answers": golds,
                "data_source": source,
                "prompt": [{"content": prompt, "role": "user"}],
                "ability": "fact-reasoning",
                "reward_model": {"ground_truth": {"target": golds}, "style": "rule"},
                "extra_info": {"index": i, "split": "train"},
            }
        )
    pd.DataFrame(rows).to_parquet(path)


def run_questions(n: int, work: Path) -> list[dict]:
    path = work / f"questions_{n}" / "train.parquet"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_questions(path, n)
    rows = []
    for label, in_process, count in (("store, first start", False, 1), ("store", False, 2), ("in process", True, 1)):
        payload = json.dumps({"path": str(path), "cache": str(work / "cache"), "in_process": in_process})
        children = [
            subprocess.Popen(
                [sys.executable, "-c", QUESTION_CHILD, payload],
                cwd=REPO,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(count)
        ]
        for child in children:
            line = child.stdout.readline()
            if not line.startswith("READY "):
                raise RuntimeError(f"env process failed (exit {child.wait()})")
            row = {"questions": n, "mode": label, **json.loads(line[6:])}
            rows.append({**row, **memory(child.pid), **threads_and_peak(child.pid)})
        for child in children:
            child.stdin.close()
            child.wait(timeout=120)
    return rows


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, nargs="*", default=[200_000, 2_000_000])
    parser.add_argument("--questions", type=int, default=169_615, help="0: skip the questions measurement")
    parser.add_argument("--requests", type=int, default=5000, help="one-query requests")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients sending them")
    parser.add_argument("--trainer-requests", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="index build threads")
    parser.add_argument("--search-threads", type=int, default=4, help="the server's --threads")
    parser.add_argument("--work-dir", type=Path, required=True, help="synthetic data, indexes and stores (GBs)")
    parser.add_argument("--out", type=Path, default=Path("searchqa_server.json"))
    args = parser.parse_args(argv)
    servers = []
    for size in args.passages:
        servers.append(run_server(size, args))
        print(json.dumps(servers[-1]), file=sys.stderr, flush=True)
    questions = run_questions(args.questions, args.work_dir) if args.questions else []
    columns = ["passages", "start (s)", "store built", "phase", "USS (MB)", "anonymous (MB)", "PSS (MB)", "RSS (MB)"]
    columns += ["peak RSS (MB)", "threads"]
    print("| " + " | ".join(columns) + " |\n|" + "---|" * len(columns))
    for r in servers:
        for phase in ("after_start", "after_small", "after_trainer"):
            m = r[phase]
            print(
                f"| {r['passages']:,} | {r['start_s']} | {r['passage_store_built']} | {phase} | {m['uss_mb']} "
                f"| {m['anon_mb']} | {m['pss_mb']} | {m['rss_mb']} | {m['peak_rss_mb']} | {m['threads']} |"
            )
    for r in servers:
        print(
            f"\n{r['passages']:,} passages: {r['small_requests']} one-query requests, median "
            f"{r['small_request_ms_median']} ms; trainer requests ({TRAINER_QUERIES} queries): "
            f"{r['trainer_request_s']} s"
        )
    if questions:
        print("\n| questions | mode | start (s) | USS (MB) | anonymous (MB) | PSS (MB) | RSS (MB) | peak RSS (MB) |")
        print("|---|---|---|---|---|---|---|---|")
        for q in questions:
            print(
                f"| {q['questions']:,} | {q['mode']} | {q['start_s']} | {q['uss_mb']} | {q['anon_mb']} | {q['pss_mb']} "
                f"| {q['rss_mb']} | {q['peak_rss_mb']} |"
            )
    result = {"args": {k: str(v) for k, v in vars(args).items()}, "servers": servers, "questions": questions}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
