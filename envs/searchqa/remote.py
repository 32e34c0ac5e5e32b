"""Retrieval from a server with Search-R1's API (``POST /retrieve``), the dense e5 retriever of the paper setting,
or verl-agent's (the same route and reply, one ``"query"`` a request; see :class:`RemoteRetriever`'s ``api``).

Search-R1's ``retrieval_server.py`` (and ``python -m envs.searchqa.server`` here, over the local BM25 index) takes
``{"queries": [...], "topk": k, "return_scores": true}`` and answers ``{"result": [[hit, ...], ...]}``, one list
per query, each hit ``{"document": {"id": ..., "contents": '"Title"\\ntext'}, "score": s}`` (or the document
alone without scores). A search's passages become part of the env's state (see :class:`~envs.searchqa.env.
SearchQAEnv`), so a fork never asks the server again and cannot see a different answer.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import time
import urllib.error
import urllib.request
from typing import Any

from envs.searchqa.corpus import Passage, split_contents


class RetrieverError(RuntimeError):
    """The retrieval server is down, too slow, or answered with an error."""


APIS = ("auto", "search_r1", "verl_agent")
RETRIED_STATUSES = (500, 502, 503, 504)  # may pass (an overloaded or restarting server); any other error will not


class RemoteRetriever:
    """Passages from a retrieval server with Search-R1's ``/retrieve`` API, or verl-agent's.

    Args:
        url: The endpoint, e.g. ``http://127.0.0.1:8000/retrieve``.
        timeout_s: Seconds one request may take.
        retries: Further tries after a request that failed in a way that may pass: no connection, a timeout,
            HTTP 500/502/503/504, a reply cut short. A 4xx or another 5xx status, or a malformed reply, fails at
            once, naming what the server said.
        backoff_s: Wait before the first retry, doubled before each further one.
        api: The request's form: ``search_r1`` (``{"queries": [q]}``, Search-R1's server and this project's),
            ``verl_agent`` (``{"query": q}``, verl-agent's server; this project's answers it too), or ``auto``:
            ``search_r1`` first and, where the server refuses it with a 422 (what each upstream server, on
            FastAPI, answers to the other's form), ``verl_agent``; the form that is answered is kept (:attr:`api`).

    Attributes:
        remote: True: the env keeps each search's passages in its state.
    """

    remote = True

    def __init__(self, url: str, timeout_s: float = 10.0, retries: int = 2, backoff_s: float = 0.5, api: str = "auto"):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"retriever_url must be an http(s) URL, got {url!r}")
        if timeout_s <= 0 or retries < 0 or backoff_s < 0:
            raise ValueError(f"bad retriever timeout_s={timeout_s}, retries={retries} or backoff_s={backoff_s}")
        if api not in APIS:
            raise ValueError(f"retriever_api must be one of {', '.join(APIS)}, got {api!r}")
        self.url, self.timeout_s, self.retries, self.backoff_s = url, timeout_s, retries, backoff_s
        self.api = api  # "auto" until a request of one form is answered
        self._fingerprint: str | None = None  # asked of the server when first needed
        self.requests = 0  # sent, retries included

    @property
    def fingerprint(self) -> str:
        """What the server serves: the content fingerprint ``GET /fingerprint`` answers (``python -m
        envs.searchqa.server``: the same as its index and corpus opened locally), else, where the server has no such
        route (Search-R1's ``retrieval_server.py``), its URL. A state or data row taken with one retriever is refused
        by another.

        Raises:
            RetrieverError: the server is down, or answered the route with another error than 404, 405 or 501.
            ValueError: the answer is not ``{"fingerprint": str}``.
        """
        if self._fingerprint is None:
            self._fingerprint = self._ask_fingerprint()
        return self._fingerprint

    def _ask_fingerprint(self) -> str:
        by_url = hashlib.sha256(f"remote:{self.url}".encode()).hexdigest()
        base, slash, last = self.url.rstrip("/").rpartition("/")
        if not slash or last != "retrieve":  # a custom route: no sibling to ask
            return by_url
        url = f"{base}/fingerprint"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as err:
            if err.code in (404, 405, 501):  # a server without the route (Search-R1's): its identity is its URL
                return by_url
            raise RetrieverError(f"retriever at {url} answered HTTP {err.code}: {err.reason}") from err
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as err:
            reason = f"{type(err).__name__}: {getattr(err, 'reason', err)}"
            raise RetrieverError(f"retriever at {url} did not answer ({reason}); is it running?") from err
        try:
            fingerprint = json.loads(raw)["fingerprint"]
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"retriever at {url} sent a malformed fingerprint: {raw[:200]!r}") from err
        if not isinstance(fingerprint, str) or not fingerprint:
            raise ValueError(f"retriever at {url} sent a malformed fingerprint: {raw[:200]!r}")
        return fingerprint

    def search(self, query: str, k: int) -> list[Passage]:
        """The top-``k`` passages the server returns for ``query``.

        Raises:
            RetrieverError: the server is down, timed out or failed on every try, or refused the request (a 4xx:
                the message has the server's reason).
            ValueError: the reply is not in Search-R1's format (the message says what is wrong).
        """
        if self.api == "auto":
            try:
                reply = self._post(self._body("search_r1", query, k))
            except _Refused as err:
                if err.status != 422:
                    raise err.error() from None
                try:  # verl-agent's server refuses Search-R1's form with a 422: ask in its own
                    reply = self._post(self._body("verl_agent", query, k))
                except _Refused as second:
                    raise RetrieverError(
                        f"{err.error()}; asked in verl-agent's form too ({{'query': str}}): {second.error()}"
                    ) from None
                self.api = "verl_agent"
            else:
                self.api = "search_r1"
        else:
            try:
                reply = self._post(self._body(self.api, query, k))
            except _Refused as err:
                raise err.error() from None
        return parse_reply(reply, 1, self.url)[0][:k]

    @staticmethod
    def _body(api: str, query: str, k: int) -> bytes:
        asked = {"query": query} if api == "verl_agent" else {"queries": [query]}
        return json.dumps({**asked, "topk": k, "return_scores": True}).encode()

    def _post(self, body: bytes) -> Any:
        delay, last, answered = self.backoff_s, None, False
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(delay)
                delay *= 2
            request = urllib.request.Request(self.url, body, {"Content-Type": "application/json"}, method="POST")
            self.requests += 1
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    raw = response.read()
            except urllib.error.HTTPError as err:
                reason = _reason(err)
                if err.code not in RETRIED_STATUSES:  # the request is wrong, or the server never serves it
                    raise _Refused(self.url, err.code, reason) from None
                last, answered = f"HTTP {err.code}: {reason}", True
            except http.client.IncompleteRead as err:  # the server failed after it sent a 200
                last, answered = f"a reply cut short after {len(err.partial)} bytes", True
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError, http.client.HTTPException) as err:
                last, answered = f"{type(err).__name__}: {getattr(err, 'reason', err)}", False
            else:
                try:
                    return json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError) as err:
                    raise ValueError(f"retriever at {self.url} sent a reply that is not JSON: {raw[:200]!r}") from err
        tries = f"{self.retries + 1} tries of {self.timeout_s:g} s"
        if answered:  # it is up: its failure is not a connection's
            raise RetrieverError(
                f"retriever at {self.url} failed on each of {tries} (last: {last}); it is running but cannot "
                "serve this request: see its log"
            )
        raise RetrieverError(
            f"retriever at {self.url} did not answer in {tries} ({last}); is it running? "
            "(python -m envs.searchqa.server serves the local BM25 index with the same API)"
        )


class _Refused(Exception):
    """A status that asking again will not change (4xx, 501, ...): raised at once, named by :meth:`error`."""

    def __init__(self, url: str, status: int, reason: str):
        super().__init__(status)
        self.url, self.status, self.reason = url, status, reason

    def error(self) -> RetrieverError:
        return RetrieverError(
            f"retriever at {self.url} refused the request with HTTP {self.status} ({self.reason}); not retried: "
            "asking again would get the same answer"
        )


def _reason(err: urllib.error.HTTPError) -> str:
    """What the server said: its JSON ``error`` or ``detail`` (FastAPI's), else the start of its body, else the
    status's phrase."""
    try:
        raw = err.read(2000)
    except Exception:  # noqa: BLE001 (a body that cannot be read leaves the status's phrase)
        raw = b""
    try:
        said = json.loads(raw)
        said = said.get("error", said.get("detail", said)) if isinstance(said, dict) else said
        text = said if isinstance(said, str) else json.dumps(said)
    except ValueError:
        text = raw.decode("utf-8", "replace").strip()
    return text[:300] or str(err.reason)


def parse_reply(reply: Any, num_queries: int, url: str = "the retriever") -> list[list[Passage]]:
    """The passages of a Search-R1 ``/retrieve`` reply, one list per query.

    Raises:
        ValueError: the reply is not ``{"result": [[hit, ...] * num_queries]}`` with hits that hold a document
            with ``contents`` (or ``title`` and ``text``).
    """

    def bad(what: str) -> ValueError:
        return ValueError(f"{url} sent a malformed reply ({what}): {json.dumps(reply)[:300]}")

    result = reply.get("result") if isinstance(reply, dict) else None
    if not isinstance(result, list) or len(result) != num_queries:
        raise bad(f"expected 'result', a list of {num_queries} lists of hits")
    passages = []
    for hits in result:
        if not isinstance(hits, list):
            raise bad("a query's hits are not a list")
        found = []
        for hit in hits:
            doc = hit.get("document", hit) if isinstance(hit, dict) else None
            if not isinstance(doc, dict):
                raise bad("a hit is not a document")
            docid = str(doc.get("id", doc.get("docid", "")))
            if isinstance(doc.get("contents"), str):
                title, text = split_contents(doc["contents"])
            elif isinstance(doc.get("text"), str):
                title, text = str(doc.get("title", "")), doc["text"]
            else:
                raise bad("a document has neither 'contents' nor 'text'")
            found.append(Passage(docid, title, text))
        passages.append(found)
    return passages


__all__ = ["APIS", "RemoteRetriever", "RetrieverError", "parse_reply"]
