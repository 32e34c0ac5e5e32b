"""A BM25 retrieval server with Search-R1's ``POST /retrieve`` API, one process per node, on FastAPI and uvicorn
(as Search-R1's ``retrieval_server.py``).

    python -m envs.searchqa.server --port 8000                                       # the shipped corpus
    python -m envs.searchqa.server --index-dir STORE --host 0.0.0.0 --port 8000      # a prepared store
    python -m envs.searchqa.server --index_path wiki-18/bm25 --corpus_path wiki-18.jsonl --topk 3 \\
        --retriever_name bm25                                                         # Search-R1's own flags

Every Search-QA env worker then opens ``SearchQAEnv(retriever_url="http://HOST:8000/retrieve")``, and Search-R1's
trainer its ``retriever.url``. With Search-R1's BM25 index (its ``index_builder.py``: pyserini ``JsonCollection``,
ids only, no text) and its ``wiki-18.jsonl``, the corpus's rows are served from a passage store built once on the
first start (:mod:`envs.searchqa.build_store`, SQLite, read through the page cache), never from the corpus in
memory. Requests: ``{"queries": [...], "topk": k, "return_scores": bool}`` with any number of queries (a missing,
null or 0 ``topk`` is ``--topk``), or verl-agent's ``{"query": "...", ...}``, one query; replies:
``{"result": [[{"document": {"id", "contents", ...}, "score"}, ...], ...]}`` (documents alone without scores).
A malformed request is a 400 before anything is searched or sent (:meth:`RetrievalService.reply` says which status
a failure gets when). ``GET /fingerprint`` answers ``{"fingerprint": ...}``, the content fingerprint of the index and
corpus served, which env workers put in their data's fingerprint (a data row written from the local index is the
same data when served). The queries are searched in chunks on a fixed pool of ``--threads``
threads (the only threads that call into the JVM, so its thread attachments stay fixed), at most ``--threads``
chunks of one request at a time, and the reply streams out chunk by chunk: a request's memory is bounded by
``--threads`` x ``--chunk`` queries' hits, whatever its size.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import socket
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from envs._lucene import clip_query, default_cache_dir
from envs.base import clean_text
from envs.searchqa.corpus import Retriever, open_retriever, passage_store_dir

DEFAULT_TOPK = 3  # Search-R1's --topk default
MAX_TOPK = 1000  # Lucene keeps a queue of topk hits per query; a huge topk would hold memory for nothing
DEFAULT_THREADS = 4
DEFAULT_CHUNK = 64  # queries per pool task: large enough to amortise a task's overhead, small for memory


MAX_JSON_DEPTH = 4  # a request is an object of a list of strings (depth 2); anything nested deeper is refused


def _check_depth(value: Any) -> None:
    """Refuse a request nested deeper than :data:`MAX_JSON_DEPTH` (iteratively: the check itself cannot recurse)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > MAX_JSON_DEPTH:
                    raise ValueError(f"the request is nested deeper than {MAX_JSON_DEPTH} levels")
                stack.append((child, depth + 1))


def parse_body(body: bytes) -> Any:
    """The JSON of a request's body.

    Raises:
        ValueError: not JSON, not UTF-8, or nested deeper than :data:`MAX_JSON_DEPTH` (also where so deep that the
            parser itself would recurse past Python's limit: that was an uncaught ``RecursionError``, a 500).
    """
    try:
        request = json.loads(body)
    except RecursionError:
        raise ValueError(f"the request is nested deeper than {MAX_JSON_DEPTH} levels") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"the request is not UTF-8 ({err})") from None
    _check_depth(request)
    return request


def parse_request(request: Any, default_topk: int = DEFAULT_TOPK) -> tuple[list[str], int, bool]:
    """The queries, top-k and ``return_scores`` of a ``/retrieve`` request, all checked before any search.

    The request is Search-R1's ``{"queries": [str, ...]}`` or verl-agent's ``{"query": str}`` (one query; the
    reply is the same ``{"result": [[hit, ...]]}``, which is what verl-agent's search tool reads), with ``topk``
    missing, null or 0 meaning ``default_topk`` (as Search-R1's server), else an integer 1 to :data:`MAX_TOPK`.
    Each query's lone UTF-16 surrogates become U+FFFD, as at every env's boundary (:func:`envs.base.clean_text`;
    the JVM cannot take them).

    Raises:
        ValueError: anything else, naming the key (and the query's index) and what it must be.
    """
    if not isinstance(request, dict):
        raise ValueError("the request must be a JSON object")
    if "query" in request and "queries" in request:
        raise ValueError("give 'queries' (Search-R1's list of strings) or 'query' (verl-agent's string), not both")
    if "query" in request:
        if not isinstance(request["query"], str):
            raise ValueError(f"'query' must be a string, got {type(request['query']).__name__}")
        queries = [request["query"]]
    else:
        queries = request.get("queries")
        if not isinstance(queries, list):
            raise ValueError("'queries' must be a list of strings (or 'query' one string)")
        bad = next((i for i, q in enumerate(queries) if not isinstance(q, str)), None)
        if bad is not None:
            what = json.dumps(queries[bad])[:80]
            raise ValueError(f"'queries' must be a list of strings: 'queries'[{bad}] is {what}")
    topk = request.get("topk")
    if topk is None or (type(topk) is int and topk == 0):
        topk = default_topk
    elif type(topk) is not int or not 1 <= topk <= MAX_TOPK:  # bool, float, "3", [], {}: refused, not defaulted
        raise ValueError(
            f"'topk' must be null, 0 (the server's default, {default_topk}) or an integer 1-{MAX_TOPK}, got "
            f"{json.dumps(topk)[:80]}"
        )
    scores = request.get("return_scores", False)
    if not isinstance(scores, bool):
        raise ValueError(f"'return_scores' must be true or false, got {json.dumps(scores)[:80]}")
    return [clean_text(q) for q in queries], topk, scores


def search_chunk(retriever: Retriever, queries: list[str], topk: int, scores: bool) -> list[list[dict]]:
    """The hits of each query, as Search-R1's server writes them (with or without scores)."""
    result = []
    for query in queries:
        found = retriever.documents(clip_query(query)[0], topk)
        result.append([{"document": doc, "score": score} if scores else doc for doc, score in found])
    return result


def retrieve(retriever: Retriever, request: Any, default_topk: int = DEFAULT_TOPK) -> dict[str, Any]:
    """The reply to one ``/retrieve`` request, in this thread (the server streams the same, chunk by chunk).

    Raises:
        ValueError: a malformed request (see :func:`parse_request`).
    """
    queries, topk, scores = parse_request(request, default_topk)
    return {"result": search_chunk(retriever, queries, topk, scores)}


class RetrievalService:
    """Answers ``/retrieve`` requests from a fixed pool of search threads.

    Args:
        retriever: The BM25 retriever (its JVM calls are thread-safe).
        topk: The top-k of a request that gives none (or null, or 0).
        threads: Search threads (each attaches to the JVM once, for the server's life).
        chunk: Queries per pool task.
    """

    def __init__(self, retriever: Retriever, topk: int, threads: int, chunk: int):
        if threads < 1 or chunk < 1 or not 1 <= topk <= MAX_TOPK:
            raise ValueError(f"bad server settings: threads={threads}, chunk={chunk}, topk={topk}")
        self.retriever, self.topk, self.threads, self.chunk = retriever, topk, threads, chunk
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="searchqa-search")

    def reply(self, request: Any) -> AsyncIterator[bytes]:
        """The reply's bytes, chunk by chunk, with at most :attr:`threads` chunks searched or waiting to be sent.

        The server never sends a 200 it cannot keep for a reason in the request: every query, ``topk`` and
        ``return_scores`` is checked here, before anything is searched (a 400). Nothing is yielded before the first
        chunk is searched, so a search that fails there fails the request as a whole, a 500 (always for requests
        of at most ``chunk`` queries, an env worker's). A search failing later, after the 200 went out, is the
        index's or the JVM's failure, not the request's: the chunked reply then ends without its last chunk, so
        the client reads an incomplete body (``IncompleteRead``), never a well-formed partial answer.

        Raises:
            ValueError: a malformed request (at once, before any search).
        """
        queries, topk, scores = parse_request(request, self.topk)
        return self._stream(queries, topk, scores)

    async def _stream(self, queries: list[str], topk: int, scores: bool) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        starts = iter(range(0, len(queries), self.chunk))
        pending: collections.deque[asyncio.Future] = collections.deque()

        def submit() -> None:
            start = next(starts, None)
            if start is not None:
                part = queries[start : start + self.chunk]
                pending.append(loop.run_in_executor(self.pool, search_chunk, self.retriever, part, topk, scores))

        for _ in range(self.threads):
            submit()
        opening = b'{"result": ['
        try:
            while pending:
                hits = await pending.popleft()
                submit()
                yield opening + json.dumps(hits)[1:-1].encode()
                opening = b", "
        finally:  # a client gone mid-reply, or a failed search: searches not started yet are dropped
            for future in pending:
                future.cancel()
        yield (b"" if opening == b", " else opening) + b"]}"  # the opening too where there were no queries

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def make_app(service: RetrievalService) -> FastAPI:
    """The FastAPI app answering ``POST /retrieve`` and ``GET /fingerprint`` from ``service``."""
    app = FastAPI(title="Search-QA BM25 retrieval (Search-R1 API)")

    @app.get("/fingerprint")
    async def fingerprint_endpoint():
        fingerprint = getattr(service.retriever, "fingerprint", None)
        if not isinstance(fingerprint, str):
            return JSONResponse({"error": "this retriever has no content fingerprint"}, status_code=404)
        return {"fingerprint": fingerprint}

    @app.post("/retrieve")
    async def retrieve_endpoint(request: Request):
        try:  # the whole request is checked here, before anything is searched or sent
            stream = service.reply(parse_body(await request.body()))
        except ValueError as err:  # json.JSONDecodeError is a ValueError
            return JSONResponse({"error": str(err)}, status_code=400)
        try:
            first = await anext(stream)  # the first chunk searched: its failure is the request's, a 500
        except Exception as err:  # noqa: BLE001 (whatever the search raised, Java's included, is the reply)
            return JSONResponse({"error": f"search failed: {type(err).__name__}: {err}"}, status_code=500)

        async def rest() -> AsyncIterator[bytes]:
            yield first
            async for part in stream:
                yield part

        return StreamingResponse(rest(), media_type="application/json")

    return app


class RunningServer:
    """A server running in a daemon thread (:func:`serve_in_thread`).

    Attributes:
        url: Its ``/retrieve`` URL.
        service: What answers the requests.
    """

    def __init__(self, server, thread: threading.Thread, url: str, service: RetrievalService):
        self._server, self._thread, self.url, self.service = server, thread, url, service

    def close(self) -> None:
        """Stop serving, wait for the thread, and stop the search pool."""
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self.service.close()


def _uvicorn(service: RetrievalService) -> uvicorn.Server:
    config = uvicorn.Config(make_app(service), log_level="warning", access_log=False, lifespan="off")
    return uvicorn.Server(config)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family)


def serve_in_thread(
    retriever: Retriever,
    host: str = "127.0.0.1",
    port: int = 0,
    topk: int = DEFAULT_TOPK,
    threads: int = DEFAULT_THREADS,
    chunk: int = DEFAULT_CHUNK,
) -> RunningServer:
    """Start a server in a daemon thread (``port=0``: any free port), for tests and notebooks."""
    service = RetrievalService(retriever, topk, threads, chunk)
    server, sock = _uvicorn(service), _bind(host, port)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="searchqa-server", daemon=True)
    thread.start()
    url = f"http://{host}:{sock.getsockname()[1]}/retrieve"
    return RunningServer(server, thread, url, service)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The server's flags: this project's, and Search-R1's ``retrieval_server.py`` ones, which mean the same."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus-path", "--corpus_path", dest="corpus_path", default=None, help="JSONL corpus")
    parser.add_argument(
        "--index-dir", "--index_path", dest="index_dir", default=None, help="Lucene index or prepared store"
    )
    parser.add_argument("--topk", type=int, default=DEFAULT_TOPK, help="top-k of a request that gives none")
    parser.add_argument("--retriever-name", "--retriever_name", dest="retriever_name", default="bm25")
    parser.add_argument("--retriever-model", "--retriever_model", dest="retriever_model", default=None,
                        help="Search-R1's dense model flag; unused by BM25")  # fmt: skip
    parser.add_argument("--faiss-gpu", "--faiss_gpu", dest="faiss_gpu", action="store_true",
                        help="Search-R1's dense index flag; unused by BM25")  # fmt: skip
    parser.add_argument("--cache-dir", default=None, help="where built indexes and passage stores are kept")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (0.0.0.0: all, as Search-R1)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS, help="search threads")
    parser.add_argument("--chunk", type=int, default=DEFAULT_CHUNK, help="queries per search task")
    args = parser.parse_args(argv)
    if args.retriever_name.lower() != "bm25":
        parser.error(
            f"--retriever_name {args.retriever_name}: this server is BM25 only; serve a dense retriever with "
            "Search-R1's retrieval_server.py (SearchQAEnv's retriever_url works with either)"
        )
    return args


def open_for_server(args: argparse.Namespace) -> Retriever:
    """The retriever the flags name; with both an index and a corpus, their passage store is built first if this is
    the first start on this data (printing what it does)."""
    if args.index_dir is not None and args.corpus_path is not None:
        from envs.searchqa.build_store import build_passages
        from envs.store import is_store

        corpus, index = Path(args.corpus_path).expanduser().resolve(), Path(args.index_dir).expanduser().resolve()
        cache = Path(args.cache_dir).expanduser() if args.cache_dir else default_cache_dir("searchqa")
        out = passage_store_dir(corpus, index, cache)
        if not is_store(out):
            print(f"building the passage store of {corpus} in {out} (once)", flush=True)
            build_passages(corpus, index, out)
        return open_retriever(corpus, index, cache, passage_store=True, full_check=True)
    return open_retriever(args.corpus_path, args.index_dir, args.cache_dir, full_check=True)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    retriever = open_for_server(args)
    service = RetrievalService(retriever, args.topk, args.threads, args.chunk)
    sock = _bind(args.host, args.port)
    where = retriever.corpus_path or retriever.index_dir
    print(f"serving {where} at http://{args.host}:{sock.getsockname()[1]}/retrieve", flush=True)
    try:
        _uvicorn(service).run(sockets=[sock])
    finally:
        service.close()


if __name__ == "__main__":
    main()
