"""The agentic judge's protocol against a real server process that answers with tool calls (a scripted policy)."""

import json
import re
from pathlib import Path

import pytest

from prover_verl.agent.episode import Conversation, Episode, PlayResult, TurnMark
from prover_verl.config import JudgeConfig, ProverConfig
from prover_verl.eval.group_log import group_record, read_groups
from prover_verl.inspect import _judge as render_judge
from prover_verl.judge import Trajectory, make_judge
from prover_verl.judge.agentic import AgenticJudge
from prover_verl.verify import group_step

TASK = "open the door"
WIN = Trajectory(0, TASK, ("hall", "keys: red, blue", "door"), ("walk on", "take red key", "open door"), True)
LOSE = Trajectory(1, TASK, ("hall", "keys: red, blue", "door"), ("walk on", "take blue key", "open door"), False)
OUTCOME = {True: "SUCCEEDED", False: "FAILED"}


def judge_config(url, **overrides):
    values = {"type": "openai", "url": url, "model": "judge", "api_key_env": None, "timeout_s": 5.0}
    return JudgeConfig(**(values | {"mode": "agentic"} | overrides))


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


def answer(label, turn):
    return json.dumps({"trajectory": label, "start_turn": turn, "end_turn": turn, "reason": "the key"})


async def judge_once(url, group=(WIN, LOSE), **overrides):
    judge = make_judge(judge_config(url, **overrides), "any", seed=0)
    assert isinstance(judge, AgenticJudge)
    return await judge.judgement(list(group))


def nonce_of(request):
    return request["messages"][0]["content"].split("<data-")[1].split(">")[0]


async def test_tool_results_are_exact_and_the_answer_is_parsed_strictly(openai_server):
    served = openai_server(
        [
            {"tool_calls": [call("read_turns", trajectory="A", start=0, end=1), call("read_differences")]},
            {"content": answer("B", 1)},
        ]
    )
    judgement = await judge_once(served.url)
    first, second = served.requests()
    nonce = nonce_of(first)
    a, b = (WIN, LOSE) if judgement.labels["A"] == 0 else (LOSE, WIN)
    # the outline: lengths, outcomes and where the actions differ, no turn's text; the two tools offered
    assert [t["function"]["name"] for t in first["tools"]] == ["read_turns", "read_differences"]
    outline = first["messages"][1]["content"]
    assert f"Trajectory A: {OUTCOME[a.success]}, 3 turns (0..2).\nTrajectory B: {OUTCOME[b.success]}" in outline
    assert "They first act differently at turn 1, and at 1 turns in all." in outline
    assert "take red key" not in outline and "keys: red" not in outline
    # the second request replays the tool calls and carries their results, fenced as data
    assistant, read, differences = second["messages"][2:]
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["read_turns", "read_differences"]
    assert read == {
        "role": "tool",
        "tool_call_id": assistant["tool_calls"][0]["id"],
        "content": f"Trajectory A ({OUTCOME[a.success]}), turns 0..1:\n<data-{nonce}>\n"
        f"[turn 0] observation: hall\n[turn 0] action: walk on\n"
        f"[turn 1] observation: keys: red, blue\n[turn 1] action: {a.actions[1]}\n</data-{nonce}>",
    }
    text, left = differences["content"].rsplit("\n", 1)
    assert text == (
        f"Turns where A and B act differently, from turn 0:\n<data-{nonce}>\n"
        f"[turn 1] A: {a.actions[1]} | B: {b.actions[1]}\n</data-{nonce}>"
    )
    spent_first = 32000 - int(re.fullmatch(r"\(7 replies and (\d+) tokens left\.\)", left).group(1))
    assert 0 < spent_first < judgement.tokens  # the first reply's tokens, of both replies'
    assert judgement.status == "ok" and judgement.proposal.traj_id == judgement.labels["B"]
    assert judgement.proposal.start_turn == 1 and judgement.answer == answer("B", 1)
    assert [(c["call"], c["tool"], c["error"]) for c in judgement.tool_calls] == [
        (0, "read_turns", False),
        (0, "read_differences", False),
    ]
    assert judgement.tool_calls[0]["result"] == read["content"]


async def test_bad_tool_calls_get_error_results_not_a_crash(openai_server):
    bad = [
        {"name": "read_turns", "arguments": "{not json"},
        call("read_turns", trajectory="C", start=0, end=0),
        call("read_turns", trajectory="A", start=2, end=3),
        call("read_turns", trajectory="A", start=True, end=1),
        call("read_turns", trajectory="A", start=0),
        call("read_differences", start=-1),
        call("open_door"),
        call("read_turns", trajectory="A", start=0, end=0),  # a fifth call of one reply: not run
    ]
    served = openai_server([{"tool_calls": bad[:3]}, {"tool_calls": bad[3:]}, {"content": answer("A", 0)}])
    judgement = await judge_once(served.url)
    results = [c["result"] for c in judgement.tool_calls]
    assert all(c["error"] for c in judgement.tool_calls) and len(results) == 8, results
    assert results[0].startswith("error: the arguments are not JSON")
    assert results[1] == 'error: trajectory must be "A" or "B", got \'C\''
    assert results[2] == "error: turns 2..3 outside trajectory A's 0..2 (or start > end)"
    assert results[3] == "error: start must be an integer, got True"
    assert results[4] == "error: read_turns takes trajectory, start and end; got ['start', 'trajectory']"
    assert results[5] == "error: start must be >= 0, got -1"
    assert results[6].startswith("error: no tool 'open_door'")
    assert results[7] == "error: at most 4 tool calls per reply are run"
    assert len(served.requests()) == 3 and judgement.status == "ok"


async def test_budgets_end_with_no_proposal_counted(openai_server, caplog):
    reading = {"tool_calls": [call("read_turns", trajectory="A", start=0, end=2)]}
    served = openai_server([reading])
    judgement = await judge_once(served.url, max_calls=3)
    assert judgement.status == "out_of_budget" and judgement.proposal is None
    assert len(served.requests()) == 3 and len(judgement.tool_calls) == 3  # no fourth reply was asked for
    assert "Your next reply is your last" in served.requests()[2]["messages"][-1]["content"]
    assert "spent its budget (3 replies" in caplog.text and "prover/judge_out_of_budget" in caplog.text

    # a token budget smaller than two replies: asked once more after the first, then no more
    long = [Trajectory(t.traj_id, TASK, ("x " * 400,) * 3, t.actions, t.success) for t in (WIN, LOSE)]
    served = openai_server([reading])
    judgement = await judge_once(served.url, group=long, token_budget=1000)
    assert judgement.status == "out_of_budget" and judgement.tokens >= 1000
    assert len(served.requests()) == 2  # the first reply left budget, the second spent it

    # in the group step: counted, and the group keeps GRPO
    prover = ProverConfig(ablation="judge_only", judge=judge_config(served.url, max_calls=2))
    step = await group_step([WIN, LOSE], make_judge(prover.judge, "success", seed=0), prover, None, None)
    assert step.stats.judge_out_of_budget == 1 and not step.credits and step.stats.judge_tokens > 0


async def test_an_endpoint_without_token_usage_is_an_error(openai_server, caplog):
    served = openai_server([{"content": answer("A", 1), "usage": False}])
    judgement = await judge_once(served.url)
    assert judgement.status == "error" and "reports no token usage" in caplog.text


async def test_every_tool_call_and_the_answer_reach_the_group_log_and_the_report(openai_server):
    served = openai_server(
        [
            {"tool_calls": [call("read_differences"), call("read_turns", trajectory="Z", start=0, end=0)]},
            {"content": answer("A", 1)},
        ]
    )
    prover = ProverConfig(ablation="judge_only", judge=judge_config(served.url))
    episodes = {t.traj_id: _episode(t) for t in (WIN, LOSE)}
    spans = {t.traj_id: episodes[t.traj_id].turn_spans() for t in (WIN, LOSE)}
    step = await group_step([WIN, LOSE], make_judge(prover.judge, "any", seed=0), prover, None, spans.get)
    record = group_record(step, episodes, global_step=1, uid="g", max_chars=1000)
    logged = record["judge"]
    assert logged["answer"] == answer("A", 1) and logged["tokens"] == step.judgement.tokens > 0
    assert [(c["tool"], c["error"]) for c in logged["tool_calls"]] == [
        ("read_differences", False),
        ("read_turns", True),
    ]
    assert logged["tool_calls"][0]["result"] == step.judgement.tool_calls[0]["result"]
    html = render_judge(json.loads(json.dumps(logged)), {0: {"success": True}, 1: {"success": False}})
    assert "2 tool calls (1 errors)" in html and "read_differences({})" in html
    assert "error: trajectory must be" in html and f"({logged['tokens']} tokens)" in html


def _episode(traj):
    # three turns of two policy tokens each, between observation tokens
    marks = [TurnMark(2 * t + 1, 3 * t, None, obs, {}) for t, obs in enumerate(traj.observations)]
    mask = [0, 1, 1] * traj.num_turns
    result = PlayResult(traj.success, float(traj.success), 3, 6, list(traj.actions), marks, "terminated")
    return Episode(traj.traj_id, TASK, Conversation([], list(range(len(mask))), 0, mask), result)


READER = f"{Path(__file__).resolve().parents[2] / 'benchmarks' / 'judge_agentic.py'}:reader_policy"


@pytest.mark.slow
@pytest.mark.timeout(60)  # ~5 s on 2 loaded cores (a server process of its own)
async def test_the_agent_loop_runs_the_agentic_judge_from_its_config(
    play_group, make_config, scripted_server, own_server, tmp_path
):
    # verl's agent loop, as the trainer builds it (config -> select_judge -> group step -> group log), with the
    # benchmark's scripted reader answering through tool calls
    served = own_server(policy=READER)
    config = make_config(k=2, log_dir=str(tmp_path))
    config.algorithm.prover.judge = {"type": "openai", "url": served.url, "model": "judge", "api_key_env": None}
    config.algorithm.prover.judge.mode = "agentic"
    await play_group(config, scripted_server(), uid="g1", env="pivotroad")
    ((record,), bad) = read_groups(tmp_path)
    judge = record["judge"]
    assert bad == 0 and judge["status"] == "ok" and judge["tokens"] > 0
    assert [c["tool"] for c in judge["tool_calls"]] == ["read_turns"] and not judge["tool_calls"][0]["error"]
    assert len(served.requests()) == 2 and all(r["tools"] for r in served.requests())
    assert record["stats"]["judge_tokens"] == judge["tokens"] and record["segments"]  # then verified as usual
