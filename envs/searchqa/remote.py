"""Retrieval from a server with Search-R1's API (``POST /retrieve``), the dense e5 retriever of the paper setting.

Search-R1's ``retrieval_server.py`` (and ``python -m envs.searchqa.server`` here, over the local BM25 index) takes
``{"queries": [...], "topk": k, "return_scores": true}`` and answers ``{"result": [[hit, ...], ...]}``, one list
per query, each hit ``{"document": {"id": ..., "contents": '"Title"\\ntext'}, "score": s}`` (or the document
alone without scores). A search's passages become part of the env's state (see :class:`~envs.searchqa.env.
SearchQAEnv`), so a fork never asks the server again and cannot see a different answer.
"""

from __future__ import annotations

import hashlib
import json
import time
import urllib.error
import urllib.request
from typing import Any

from envs.searchqa.corpus import Passage, split_contents


class RetrieverError(RuntimeError):
    """The retrieval server is down, too slow, or answered with an error."""


class RemoteRetriever:
    """Passages from a retrieval server with Search-R1's ``/retrieve`` API.

    Args:
        url: The endpoint, e.g. ``http://127.0.0.1:8000/retrieve``.
        timeout_s: Seconds one request may take.
        retries: Further tries after a failed or timed-out request (not after a malformed reply or a 4xx).
        backoff_s: Wait before the first retry, doubled before each further one.

    Attributes:
        remote: True: the env keeps each search's passages in its state.
    """

    remote = True

    def __init__(self, url: str, timeout_s: float = 10.0, retries: int = 2, backoff_s: float = 0.5):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"retriever_url must be an http(s) URL, got {url!r}")
        if timeout_s <= 0 or retries < 0 or backoff_s < 0:
            raise ValueError(f"bad retriever timeout_s={timeout_s}, retries={retries} or backoff_s={backoff_s}")
        self.url, self.timeout_s, self.retries, self.backoff_s = url, timeout_s, retries, backoff_s
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
            RetrieverError: the server is down, timed out on every try, or answered with an HTTP error.
            ValueError: the reply is not in Search-R1's format (the message says what is wrong).
        """
        body = json.dumps({"queries": [query], "topk": k, "return_scores": True}).encode()
        reply = self._post(body)
        return parse_reply(reply, 1, self.url)[0][:k]

    def _post(self, body: bytes) -> Any:
        delay, last = self.backoff_s, None
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
                if err.code < 500:  # the request is wrong: asking again will not help
                    raise RetrieverError(f"retriever at {self.url} answered HTTP {err.code}: {err.reason}") from err
                last = f"HTTP {err.code} {err.reason}"
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as err:
                last = f"{type(err).__name__}: {getattr(err, 'reason', err)}"
            else:
                try:
                    return json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError) as err:
                    raise ValueError(f"retriever at {self.url} sent a reply that is not JSON: {raw[:200]!r}") from err
        raise RetrieverError(
            f"retriever at {self.url} did not answer in {self.retries + 1} tries of {self.timeout_s:g} s ({last}); "
            "is it running? (python -m envs.searchqa.server serves the local BM25 index with the same API)"
        )


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


__all__ = ["RemoteRetriever", "RetrieverError", "parse_reply"]
