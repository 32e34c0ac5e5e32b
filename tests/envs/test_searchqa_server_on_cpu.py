"""The retrieval server as a Search-R1 drop-in (envs/searchqa/server.py), its passage and question stores
(envs/searchqa/corpus.py, build_store.py), and Lucene's checksums at open (envs/_lucene.py).

Search-R1's side is written here from reading its code (``search_r1/llm_agent/generation.py``: ``_batch_search``,
``_passages2string``; ``search_r1/search/retrieval_server.py``; ``index_builder.py``): its trainer sends every
search of a step in one ``POST /retrieve`` with ``topk`` from its config (null where unset), reads ``['result']``
and shows each hit's ``document['contents']`` split into a first line (the title, quotes kept) and the rest. Its
BM25 index is pyserini's ``JsonCollection`` with ``DefaultLuceneDocumentGenerator`` (ids only, no stored text), and
its server looks each hit up in the wiki-18 corpus by id.
"""

import asyncio
import gc
import json
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests

from envs import _lucene, store
from envs.searchqa import corpus
from envs.searchqa.build_store import main as build_store_main
from envs.searchqa.env import SearchQAEnv
from envs.searchqa.server import RetrievalService, serve_in_thread

REPO = Path(__file__).resolve().parents[2]
TRAINER_QUERIES = 512 * 5  # Search-R1's train batch x its group size: one request per search step


def search_r1_batch_search(url: str, queries: list[str], topk) -> list[str]:
    """Search-R1's ``batch_search``: one request for every query, then ``_passages2string`` on each result."""
    results = requests.post(url, json={"queries": queries, "topk": topk, "return_scores": True}).json()["result"]
    out = []
    for result in results:
        reference = ""
        for idx, doc_item in enumerate(result):
            content = doc_item["document"]["contents"]
            title, text = content.split("\n")[0], "\n".join(content.split("\n")[1:])
            reference += f"Doc {idx + 1}(Title: {title}) {text}\n"
        out.append(reference)
    return out


@pytest.fixture(scope="module")
def search_r1_data(tmp_path_factory):
    """A wiki-18 format corpus (ids are row numbers, ``contents`` is ``'"Title"\\ntext'``; one title with quotes of
    its own) and its BM25 index as Search-R1's ``index_builder.py`` builds it."""
    root = tmp_path_factory.mktemp("search_r1")
    rows = [json.loads(line) for line in corpus.DEFAULT_CORPUS.read_text().splitlines() if line.strip()]
    lines = [{"id": str(i), "contents": f'"{r["title"]}"\n{r["contents"]}'} for i, r in enumerate(rows)]
    lines.append({"id": str(len(lines)), "contents": '"The "Amber" Film"\nA film about the Amber Sea\'s ferries.'})
    (root / "temp").mkdir()
    path = root / "wiki-18.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in lines))
    (root / "temp" / "temp.jsonl").write_text(path.read_text())
    store.index_collection(root / "temp", root / "bm25", threads=1)  # JsonCollection, no -storeRaw
    return {"corpus": path, "index": root / "bm25", "rows": {row["id"]: row for row in lines}, "root": root}


def start_server(*flags: str) -> tuple[subprocess.Popen, str]:
    """``python -m envs.searchqa.server`` with ``flags``; returns the process and its URL once it serves."""
    cmd = [sys.executable, "-m", "envs.searchqa.server", *flags]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        if line.startswith("serving "):
            return proc, line.split(" at ")[-1].strip()
    raise AssertionError(f"server exited with {proc.wait()}")


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_search_r1_trainer_request_gets_a_full_answer_from_our_server_on_its_own_index(search_r1_data, tmp_path):
    data = search_r1_data
    flags = ["--index_path", str(data["index"]), "--corpus_path", str(data["corpus"]), "--topk", "3"]
    flags += ["--retriever_name", "bm25", "--port", "0", "--cache-dir", str(tmp_path), "--threads", "2"]
    proc, url = start_server(*flags)
    try:
        words = ["river", "sea", "company", "founded", "Amber film ferries", "mountain", "", "zzzunknown"]
        queries = [words[i % len(words)] for i in range(TRAINER_QUERIES)]
        shown = search_r1_batch_search(url, queries, None)  # topk null: the server's --topk
        assert len(shown) == TRAINER_QUERIES
        searcher = _lucene.open_searcher(data["index"])
        for word in words:  # what Search-R1's own server shows: the corpus row of each Lucene hit, by id
            reference = ""
            for rank, hit in enumerate(searcher.search(word, 3), 1):
                content = data["rows"][hit.docid]["contents"]
                reference += f"Doc {rank}(Title: {content.split(chr(10))[0]}) {content.split(chr(10), 1)[1]}\n"
            assert [s for q, s in zip(queries, shown, strict=True) if q == word] == [reference] * queries.count(word)
        assert shown[words.index("Amber film ferries")].startswith('Doc 1(Title: "The "Amber" Film") A film')
        assert shown[words.index("zzzunknown")] == ""
        for topk in (0, 5):  # 0 is the default too; an explicit top-k is honoured
            reply = requests.post(url, json={"queries": ["river"], "topk": topk, "return_scores": False}).json()
            assert len(reply["result"][0]) == (3 if topk == 0 else 5)
            assert set(reply["result"][0][0]) == {"id", "contents"}  # documents alone, as the corpus has them
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert store.is_store(corpus.passage_store_dir(data["corpus"], data["index"], tmp_path))  # built once, cached


def test_reply_streams_with_at_most_threads_x_chunk_queries_in_flight():
    searched = []

    class Counting:
        def documents(self, query, k):
            searched.append(query)
            return [({"id": "0", "contents": query}, 1.0)]

    service = RetrievalService(Counting(), topk=3, threads=2, chunk=4)

    async def read(request):
        parts, searched_at_first = [], None
        async for part in service.reply(request):
            parts.append(part)
            if searched_at_first is None:
                await asyncio.sleep(0.2)  # let the pool run ahead if it could
                searched_at_first = len(searched)
        return b"".join(parts), searched_at_first

    body, searched_at_first = asyncio.run(read({"queries": [f"q{i}" for i in range(50)], "return_scores": True}))
    # the first chunk sent, the pool had at most 2 more chunks of 4 queries in hand, not the other 46 queries
    assert searched_at_first <= 4 + 2 * 4
    result = json.loads(body)["result"]
    assert [hits[0]["document"]["contents"] for hits in result] == [f"q{i}" for i in range(50)]
    assert json.loads(asyncio.run(read({"queries": []}))[0]) == {"result": []}
    service.close()


def test_a_failing_search_is_a_500_naming_the_error_and_a_malformed_request_a_400():
    class Failing:
        def documents(self, query, k):
            raise OSError("index unreadable")

    running = serve_in_thread(Failing())
    try:
        reply = requests.post(running.url, json={"queries": ["river"]})
        assert reply.status_code == 500 and "OSError: index unreadable" in reply.json()["error"]
        for bad in ({"queries": "river"}, {"queries": ["a"], "topk": 1001}, {"queries": ["a"], "return_scores": 1}):
            reply = requests.post(running.url, json=bad)
            assert reply.status_code == 400, bad
    finally:
        running.close()


def jvm_threads() -> int:
    from jnius import autoclass

    return autoclass("java.lang.management.ManagementFactory").getThreadMXBean().getThreadCount()


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_threads_attached_to_the_jvm_stay_the_pools_over_many_requests(search_r1_data, tmp_path):
    retriever = corpus.open_retriever(cache_dir=tmp_path)
    running = serve_in_thread(retriever, threads=3)
    try:
        requests.post(running.url, json={"queries": ["river"]}).raise_for_status()
        before = jvm_threads()

        def client(n):
            with requests.Session() as session:
                for i in range(n):
                    session.post(running.url, json={"queries": [f"river {i}"], "topk": 2}).raise_for_status()

        clients = [threading.Thread(target=client, args=(40,)) for _ in range(6)]
        for t in clients:
            t.start()
        for t in clients:
            t.join()
        # a thread per request attached to the JVM and never detached: +240 threads; a fixed pool: +2 at most
        assert jvm_threads() - before <= 2
    finally:
        running.close()


def flip_middle_byte(index_dir: Path) -> None:
    victim = max((p for p in index_dir.iterdir() if p.suffix == ".tim"), key=lambda p: p.stat().st_size)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_corrupt_index_is_refused_at_open_naming_the_rebuild(search_r1_data, tmp_path):
    cache = tmp_path / "cache"
    built = corpus.open_retriever(corpus.DEFAULT_CORPUS, cache_dir=cache).index_dir
    flip_middle_byte(built)
    with pytest.raises(_lucene.CorruptIndexError, match=rf"(?s){re.escape(str(built))} is corrupt .*rm -r"):
        corpus.open_retriever(corpus.DEFAULT_CORPUS, cache_dir=cache)
    # an explicit index_dir that stores no text (Search-R1's): corrupt, not "stores no passage text"
    given = tmp_path / "bm25"
    shutil.copytree(search_r1_data["index"], given)
    flip_middle_byte(given)
    with pytest.raises(_lucene.CorruptIndexError, match="checksum failed.*rebuild it with"):
        corpus.open_retriever(index_dir=given)
    # a file's footer alone does not see a byte flipped mid-file: small indexes have every byte read
    assert _lucene.check_index(given, full=False, rebuild="") > 0


def test_passage_store_beside_an_id_only_index_serves_the_corpus_rows(search_r1_data, tmp_path):
    data = search_r1_data
    with pytest.raises(store.StoreMissingError, match="python -m envs.searchqa.build_store passages"):
        corpus.open_retriever(data["corpus"], data["index"], tmp_path, passage_store=True)
    out = corpus.passage_store_dir(data["corpus"].resolve(), data["index"].resolve(), tmp_path)
    build_store_main(["passages", f"--corpus-path={data['corpus']}", f"--index-dir={data['index']}", f"--out={out}"])
    retriever = corpus.open_retriever(data["corpus"], data["index"], tmp_path, passage_store=True)
    assert isinstance(retriever.passages, corpus.PassageStore) and len(retriever.passages) == len(data["rows"])
    docs = retriever.documents("Amber film ferries", 2)
    assert docs[0][0] == data["rows"][str(len(data["rows"]) - 1)]  # the row itself, inner quotes and all
    assert [p.docid for p, _ in retriever.scored("Amber film ferries", 2)] == [d["id"] for d, _ in docs]
    # an env over the same index and corpus reads the same passages without holding the corpus
    env = SearchQAEnv(corpus_path=data["corpus"], index_dir=data["index"], cache_dir=tmp_path)
    assert env.retriever.passages is not None


def write_questions(path: Path, n: int) -> list[dict]:
    rows = [
        {"id": f"q{i}", "question": f"Who is number {i}?", "golden_answers": [f"Person {i}"], "data_source": "nq"}
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_big_question_files_are_read_by_task_id_from_a_shared_store(tmp_path, monkeypatch):
    path = tmp_path / "train.jsonl"
    write_questions(path, 2000)
    expected = corpus.load_questions(path, "train")
    monkeypatch.setattr(corpus, "QUESTIONS_IN_MEMORY_BYTES", 1024, raising=False)
    gc.collect()
    before = sum(type(o) is corpus.Question for o in gc.get_objects())
    env = SearchQAEnv(questions_path=path, cache_dir=tmp_path / "cache")
    gc.collect()
    held = sum(type(o) is corpus.Question for o in gc.get_objects()) - before
    assert held < 10, f"the env holds {held} Question objects: the question set, parsed in this process"
    assert env.task_ids()[:3] == ["q0", "q1", "q2"] and len(env.task_ids()) == 2000
    assert env.question("q7") == expected[7] and env.has_task("q1999") and not env.has_task("q2000")
    assert env.task_category("q3") == "nq"
    again = SearchQAEnv(questions_path=path, cache_dir=tmp_path / "cache")
    assert again.question("q999") == expected[999]
    assert len(list((tmp_path / "cache" / "questions").glob("[!.]*"))) == 1  # built once, opened by both
    bad = tmp_path / "bad.jsonl"
    bad.write_text(path.read_text() + '{"id": "x", "question": "No answers?"}\n')
    with pytest.raises(ValueError, match=rf"{re.escape(str(bad))}:2001: no gold answers"):
        SearchQAEnv(questions_path=bad, cache_dir=tmp_path / "cache")
