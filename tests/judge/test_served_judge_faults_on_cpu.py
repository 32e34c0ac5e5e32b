"""Faults of a served judge (``judge.type=openai``) against a real server process: each gives the group plain GRPO,
counted in ``prover/judge_*``, with a log line that says what happened, and never stalls or crashes the step."""

import json
import time

import pytest

from prover_verl.config import JudgeConfig, ProverConfig
from prover_verl.judge import Trajectory, make_judge
from prover_verl.verify import group_step

WIN = Trajectory(0, "open the door", ("hall", "red key here", "door"), ("walk on", "take red key", "open"), True)
LOSE = Trajectory(1, "open the door", ("hall", "red key here", "door"), ("walk on", "take blue key", "open"), False)
ANSWER = json.dumps({"trajectory": "A", "start_turn": 1, "end_turn": 1, "reason": "took the key"})
ANSWER_B = json.dumps({"trajectory": "B", "start_turn": 1, "end_turn": 1, "reason": "took the key"})


def config(url, **overrides):
    values = {"type": "openai", "url": url, "model": "judge", "api_key_env": None, "timeout_s": 1.0} | overrides
    return ProverConfig(ablation="judge_only", judge=JudgeConfig(**values))


async def step(prover):
    """One group step with the served judge; judge_only, so a proposal is credited without continuations."""

    async def no_forks(*_):
        raise AssertionError("judge_only plays no continuation")

    judge = make_judge(prover.judge, prover.segment_side, seed=0)
    started = time.monotonic()
    result = await group_step([WIN, LOSE], judge, prover, no_forks, lambda _: [(0, 1), (2, 3), (4, 5)])
    return result, time.monotonic() - started


@pytest.mark.slow
@pytest.mark.timeout(60)  # ~5 s on 2 loaded cores (backoffs, a server's start)
async def test_endpoint_down_at_start(down_url, caplog):
    prover = config(down_url)
    result, seconds = await step(prover)
    assert result.stats.judge_error == 1 and not result.credits
    assert seconds < 10  # two refused connections and one backoff
    assert "judge request failed, the group keeps GRPO (prover/judge_error)" in caplog.text
    assert "unreachable after 2 attempts" in caplog.text and prover.judge.url in caplog.text


@pytest.mark.slow
@pytest.mark.timeout(60)  # ~5 s on 2 loaded cores (backoffs, a server's start)
async def test_endpoint_dies_mid_run(own_server, caplog):
    served = own_server([{"content": ANSWER}, {"die": True}])
    prover = config(served.url)
    first, _ = await step(prover)
    assert first.stats.judge_ok + first.stats.judge_out_of_range == 1  # answered (its label is drawn per group)
    second, seconds = await step(prover)  # the server exits on this request, unanswered
    assert served.process.wait(timeout=5) == 0
    assert second.stats.judge_error == 1 and not second.credits and seconds < 10
    assert "unreachable after 2 attempts" in caplog.text
    third, _ = await step(prover)  # and stays down
    assert third.stats.judge_error == 1


async def test_endpoint_answers_past_the_timeout(openai_server, caplog):
    served = openai_server([{"content": ANSWER, "delay_s": 30}])
    result, seconds = await step(config(served.url, timeout_s=0.5))
    assert result.stats.judge_error == 1 and seconds < 10  # 2 attempts of 0.5 s and a backoff, not 30 s
    assert "no answer within judge.timeout_s=0.5 s on each of 2 attempts" in caplog.text
    assert len(served.requests()) == 2  # the retry was sent


async def test_endpoint_trickling_its_reply_is_cut_at_the_deadline(openai_server, caplog):
    # each byte comes within the per-read timeout, so only a deadline over the whole call ends it
    prover = config(openai_server([{"content": ANSWER, "trickle_s": 30}]).url, timeout_s=0.5)
    result, seconds = await step(prover)
    assert result.stats.judge_error == 1 and seconds < 10
    assert "no answer within 2.5 s" in caplog.text  # 2 attempts of 0.5 s, a backoff of at most 0.5 s and 1 s


@pytest.mark.parametrize(
    "garbage,status,logged",
    [
        ({"body": "<html>502 Bad Gateway</html>"}, "error", "not an OpenAI chat completion"),
        ({"body": '{"choices": []}'}, "error", "not an OpenAI chat completion"),
        ({"content": "The decisive turn is clearly the key."}, "malformed", "prover/judge_malformed"),
        ({"content": None}, "empty", "prover/judge_empty"),
    ],
)
async def test_endpoint_answering_garbage(openai_server, caplog, garbage, status, logged):
    result, seconds = await step(config(openai_server([garbage]).url))
    assert getattr(result.stats, f"judge_{status}") == 1 and not result.credits and seconds < 10
    assert logged in caplog.text and "the group keeps GRPO" in caplog.text


@pytest.mark.slow
@pytest.mark.timeout(60)  # ~5 s on 2 loaded cores (backoffs, a server's start)
async def test_endpoint_rate_limiting(openai_server, caplog):
    # Retry-After 60 would hold each retry a minute; the deadline over the call bounds it
    result, seconds = await step(config(openai_server([{"status": 429, "headers": {"Retry-After": "60"}}]).url))
    assert result.stats.judge_error == 1 and seconds < 10
    assert "no answer within 3.5 s" in caplog.text  # 2 attempts of 1 s, a backoff of at most 0.5 s and 1 s
    served = openai_server([{"status": 429, "headers": {"Retry-After": "0.2"}}])
    result, seconds = await step(config(served.url))
    assert result.stats.judge_error == 1 and seconds < 10
    assert "rate-limited (HTTP 429) on each of 2 attempts" in caplog.text and len(served.requests()) == 2


async def test_a_served_judge_that_answers_is_credited(openai_server):
    served = openai_server([{"content": ANSWER}])
    result, _ = await step(config(served.url))
    request = served.requests()[0]
    assert request["model"] == "judge" and request["messages"][0]["role"] == "system" and "tools" not in request
    assert result.judgement.tokens > 0 and result.stats.judge_tokens == result.judgement.tokens
