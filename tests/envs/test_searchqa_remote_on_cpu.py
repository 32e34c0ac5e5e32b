"""Search-QA against a retrieval server with Search-R1's API: our BM25 server on localhost, and fake servers that are
down, slow or malformed (envs/searchqa/remote.py, envs/searchqa/server.py)."""

import json
import time
import urllib.error
import urllib.request

import pytest

from envs.searchqa import corpus
from envs.searchqa.env import SearchQAEnv
from envs.searchqa.remote import RemoteRetriever, RetrieverError, parse_reply
from envs.searchqa.server import retrieve, serve_in_thread
from tests.http_stub import canned_server

# a reply as Search-R1's retrieval_server.py writes it (return_scores=True), for two queries
SEARCH_R1_REPLY = {
    "result": [
        [
            {"document": {"id": "42", "contents": '"Ada Lovelace"\nAda Lovelace was a mathematician.'}, "score": 0.91},
            {"document": {"id": "7", "contents": '"Analytical Engine"\nA proposed computer.'}, "score": 0.85},
        ],
        [{"document": {"id": "3", "contents": "no title line"}, "score": 0.5}],
    ]
}


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    return SearchQAEnv(cache_dir=str(tmp_path_factory.mktemp("searchqa_cache")))


@pytest.fixture
def server(local):
    running = serve_in_thread(local.retriever)
    yield running.url
    running.close()


def fake_server(status=200, body=b"{}", delay_s=0.0):
    """A server answering every POST and GET with ``status`` and ``body`` after ``delay_s``; returns it and its URL."""
    server, root, _ = canned_server(status, body, delay_s=delay_s)
    return server, f"{root}/retrieve"


def expert_episode(env, task):
    start = env.reset(options={"task_id": task})
    return [start] + [env.step(action) for action in env.expert_actions()]


def test_remote_env_plays_exactly_as_the_local_one(local, server):
    remote = SearchQAEnv(retriever_url=server)
    for task in local.task_ids()[:10]:
        assert expert_episode(remote, task) == expert_episode(local, task)
    assert remote.retriever.requests > 0


def test_fork_restores_the_servers_answer_without_asking_again(local, server):
    env = SearchQAEnv(retriever_url=server)
    task = local.task_ids()[0]
    env.reset(options={"task_id": task})
    first = env.step(env.expert_actions()[0])
    state = env.snapshot()
    assert state.payload[-1] == first[0]  # the search's reply is in the state
    fork = SearchQAEnv(retriever_url=server)
    assert fork.restore(state) == (first[0], first[4]) and fork.retriever.requests == 0
    with pytest.raises(ValueError, match="taken with a retrieval server, this env searches a local index"):
        local.restore(state)  # a state of the remote retriever is not one of the local index
    local.reset(options={"task_id": task})
    with pytest.raises(ValueError, match="taken with a local index, this env searches a retrieval server"):
        fork.restore(local.snapshot())


def test_served_index_has_the_local_indexs_fingerprint_so_data_rows_carry_over(local, server, tmp_path):
    """Rows written from the local index are the same data when our server serves that index (the CPU smoke writes
    rows locally and trains against a server); another corpus served is other data."""
    remote = SearchQAEnv(retriever_url=server)
    assert remote.retriever.fingerprint == local.retriever.fingerprint
    assert remote.data_fingerprint() == local.data_fingerprint()
    corpus_path = tmp_path / "other.jsonl"
    corpus_path.write_text(json.dumps({"id": "0", "contents": '"T"\nanother corpus'}) + "\n")
    other = serve_in_thread(corpus.open_retriever(corpus_path=str(corpus_path), cache_dir=str(tmp_path / "c")))
    try:
        elsewhere = SearchQAEnv(retriever_url=other.url)
        assert elsewhere.data_fingerprint() != local.data_fingerprint()
    finally:
        other.close()


@pytest.mark.parametrize("status", [404, 405, 501])
def test_a_server_without_the_fingerprint_route_is_known_by_its_url(status):
    """Search-R1's own server has no ``GET /fingerprint``: its URL is its identity (stable, not its content)."""
    server, url = fake_server(status=status, body=b"{}")
    first, second = RemoteRetriever(url), RemoteRetriever(url)
    assert first.fingerprint == second.fingerprint
    assert first.fingerprint != RemoteRetriever(url.replace("/retrieve", "/other/retrieve")).fingerprint
    server.shutdown()


def test_a_fingerprint_route_that_fails_or_lies_is_an_error():
    server, url = fake_server(status=500, body=b"{}")
    with pytest.raises(RetrieverError, match="HTTP 500"):
        _ = RemoteRetriever(url).fingerprint
    server.shutdown()
    server, url = fake_server(status=200, body=b'{"fingerprint": 3}')
    with pytest.raises(ValueError, match="malformed fingerprint"):
        _ = RemoteRetriever(url).fingerprint
    server.shutdown()
    server.server_close()
    with pytest.raises(RetrieverError, match="did not answer"):
        _ = RemoteRetriever(url).fingerprint


def test_server_down_fails_naming_the_url_and_the_fix():
    server, url = fake_server()
    server.shutdown()
    server.server_close()
    env = SearchQAEnv(retriever_url=url, retriever_retries=1)
    env.reset(options={"task_id": env.task_ids()[0]})
    with pytest.raises(RetrieverError, match=rf"retriever at {url} did not answer in 2 tries.*envs.searchqa.server"):
        env.step("<search>anything</search>")
    assert env.retriever.requests == 2


def test_slow_server_times_out_after_its_retries():
    server, url = fake_server(body=json.dumps(SEARCH_R1_REPLY).encode(), delay_s=3.0)
    retriever = RemoteRetriever(url, timeout_s=0.3, retries=1, backoff_s=0.01)
    started = time.perf_counter()
    with pytest.raises(RetrieverError, match="did not answer in 2 tries of 0.3 s"):
        retriever.search("q", 2)
    assert time.perf_counter() - started < 2.5
    server.shutdown()


@pytest.mark.parametrize(
    ("status", "body", "error", "message"),
    [
        (200, b"<html>not json</html>", ValueError, "not JSON"),
        (200, b'{"results": []}', ValueError, "expected 'result', a list of 1 lists"),
        (200, b'{"result": [{"id": 1}]}', ValueError, "hits are not a list"),
        (200, b'{"result": [[{"document": {"id": 1}}]]}', ValueError, "neither 'contents' nor 'text'"),
        (400, b'{"error": "bad"}', RetrieverError, "HTTP 400"),
    ],
)
def test_malformed_or_refused_replies_fail_naming_what_is_wrong(status, body, error, message):
    server, url = fake_server(status, body)
    retriever = RemoteRetriever(url, retries=2, backoff_s=0.01)
    with pytest.raises(error, match=message):
        retriever.search("q", 2)
    assert retriever.requests == 1  # a malformed reply or a 4xx is not asked again
    server.shutdown()


def test_search_r1_reply_parses():
    (first, second) = parse_reply(SEARCH_R1_REPLY, 2)
    assert first == [
        corpus.Passage("42", "Ada Lovelace", "Ada Lovelace was a mathematician."),
        corpus.Passage("7", "Analytical Engine", "A proposed computer."),
    ]
    assert second == [corpus.Passage("3", "", "no title line")]
    without_scores = {"result": [[hit["document"] for hit in hits] for hits in SEARCH_R1_REPLY["result"]]}
    assert parse_reply(without_scores, 2) == [first, second]


def test_our_server_answers_in_search_r1_format_and_refuses_bad_requests(local, server):
    request = {"queries": ["river", "mountain"], "topk": 2, "return_scores": True}
    reply = retrieve(local.retriever, request)
    assert [len(hits) for hits in reply["result"]] == [2, 2]
    assert all(set(hit) == {"document", "score"} for hits in reply["result"] for hit in hits)
    assert parse_reply(reply, 2)[0] == local.retriever.search("river", 2)
    for bad in ({"queries": "river"}, {"queries": ["a"], "topk": -1}, {"queries": ["a"], "topk": True}, ["river"]):
        with pytest.raises(ValueError):
            retrieve(local.retriever, bad)
    http = urllib.request.Request(server, b'{"queries": 3}', {"Content-Type": "application/json"}, method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(http, timeout=10)
    assert refused.value.code == 400
