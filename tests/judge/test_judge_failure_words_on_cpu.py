"""A served judge's failure says what happened (issue 41, item 3): how many attempts were actually sent (one 429
with a Retry-After over the client's two-minute limit is not retried: it was logged as "on each of 2 attempts"),
and a reply cut short is not an endpoint that is "unreachable"."""

import socket

import pytest

from prover_verl.config import JudgeConfig
from prover_verl.judge.chat import JudgeRequestError
from prover_verl.judge.llm import OpenAIBackend
from tests.http_stub import canned_server

MESSAGES = [{"role": "user", "content": "which turn decided it?"}]


def serve(status: int, body: bytes, headers: dict[str, str], declared: int | None = None):
    """An endpoint answering every request with ``status``, ``headers`` and ``body`` (declaring ``declared``
    bytes: more than it sends cuts the reply short); returns the server, its base URL and the paths asked for."""
    server, root, seen = canned_server(status, body, {"Content-Type": "application/json", **headers}, declared)
    return server, f"{root}/v1", seen


def backend(url: str) -> OpenAIBackend:
    return OpenAIBackend(JudgeConfig(type="openai", url=url, model="judge", api_key_env=None, timeout_s=2.0))


async def failure(url: str) -> str:
    with pytest.raises(JudgeRequestError) as raised:
        await backend(url).chat(MESSAGES)
    return str(raised.value)


async def test_a_429_with_a_long_retry_after_is_one_attempt_and_says_so():
    error = b'{"error": {"message": "slow down", "type": "rate_limit"}}'
    server, url, seen = serve(429, error, {"Retry-After": "3600"})
    message = await failure(url)
    assert len(seen) == 1  # the client does not wait an hour
    assert "rate-limited (HTTP 429) on 1 attempt (not retried: Retry-After 3600 s is too long)" in message
    assert "each of 2 attempts" not in message  # before: "rate-limited (HTTP 429) on each of 2 attempts"
    server.shutdown()


async def test_a_429_retried_counts_both_attempts():
    server, url, seen = serve(429, b'{"error": {"message": "slow down"}}', {"Retry-After": "0.1"})
    assert "rate-limited (HTTP 429) on each of 2 attempts" in await failure(url) and len(seen) == 2
    server.shutdown()


async def test_a_reply_cut_short_is_not_called_unreachable():
    server, url, seen = serve(200, b'{"id": "x", "choices": [{"mess', {}, declared=4000)
    message = await failure(url)
    assert len(seen) == 2  # retried: a reply may break off once
    assert "the reply broke off (a body cut short, or a server that hung up) on each of 2 attempts" in message
    assert "unreachable" not in message  # before: "unreachable after 2 attempts (RemoteProtocolError: ...)"
    server.shutdown()


async def test_an_endpoint_that_is_down_is_unreachable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert "unreachable after 2 attempts (ConnectError" in await failure(f"http://127.0.0.1:{port}/v1")
