"""The judge model's data, examples, loss and scoring (``prover_verl.judge_model``), on KeyDoor pairs and hand-built
trajectories."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest
import torch

from prover_verl import tiny_model
from prover_verl.config import JudgeConfig
from prover_verl.judge.base import JudgeStatus, SegmentSide, Trajectory
from prover_verl.judge.heuristic import HeuristicJudge
from prover_verl.judge.llm import ChatBackend, LLMJudge
from prover_verl.judge.parse import parse_answer
from prover_verl.judge.prompt import build_prompt
from prover_verl.judge_model import report
from prover_verl.judge_model.examples import encode_example, prompt_chars, render_example, target_answer
from prover_verl.judge_model.pairs import Pair, make_pairs, play
from prover_verl.judge_model.scoring import Outcome, Score, score
from prover_verl.judge_model.train import answer_loss, build_model, prompt_class


@pytest.fixture(scope="module")
def keydoor_pairs() -> list[Pair]:
    return make_pairs("keydoor", {}, "train", 12, seed=0)


def test_pairs_are_a_success_and_a_failure_of_one_task_with_the_envs_pivot(keydoor_pairs):
    import envs

    env = envs.make("keydoor", split="train")
    tasks = {t.task_id: t for t in env.table.tasks}
    assert [p.task_id for p in keydoor_pairs] == env.task_ids()[:12]  # tasks in order, one pair each
    for pair in keydoor_pairs:
        assert pair.success.success and not pair.failure.success
        assert (pair.success.traj_id, pair.failure.traj_id) == (0, 1)
        assert pair.success.task == pair.failure.task
        assert pair.success.pivot_turn == pair.failure.pivot_turn == tasks[pair.task_id].pivot_turn
        # replaying the recorded actions reproduces each outcome
        for traj in (pair.success, pair.failure):
            obs, _ = env.reset(options={"task_id": pair.task_id})
            for turn, action in enumerate(traj.actions):
                assert obs == traj.observations[turn]
                obs, _, done, _, info = env.step(action)
            assert done and info["won"] == traj.success
    assert make_pairs("keydoor", {}, "train", 12, seed=0) == keydoor_pairs  # the seed fixes the pairs
    held_out = make_pairs("keydoor", {}, "eval", 4, seed=0)
    assert not {p.task_id for p in held_out} & {p.task_id for p in keydoor_pairs}


def test_pairs_take_the_env_kwargs_and_refuse_a_split_or_an_env_without_pivot():
    pairs = make_pairs("keydoor", {"doors": 1, "num_tasks": 3}, "train", 5, seed=1)
    assert {p.task_id for p in pairs} == {"keydoor-train-000", "keydoor-train-001", "keydoor-train-002"}
    assert all("red key" in p.success.actions[p.success.pivot_turn] for p in pairs)  # doors=1: every door is red
    with pytest.raises(ValueError, match="split"):
        make_pairs("keydoor", {"split": "eval"}, "train", 1, seed=0)
    from envs.keydoor.env import KeyDoorEnv

    class NoPivot(KeyDoorEnv):
        def _info(self):
            return {k: v for k, v in super()._info().items() if k != "pivot_turn"}

    env = NoPivot()
    with pytest.raises(ValueError, match="pivot_turn"):
        play(env, env.task_ids()[0], random.Random(0), 0.0, 0.0, traj_id=0)


@pytest.mark.parametrize("side", list(SegmentSide))
def test_target_answer_parses_strictly_to_the_pivot_on_the_side(keydoor_pairs, side):
    pair = keydoor_pairs[0]
    messages, answer = render_example(pair, side, random.Random(5), 600, None)
    prompt = build_prompt(pair.success, pair.failure, side, random.Random(5), 600, None)
    assert messages == prompt.messages  # exactly the loop's judge prompt for the same draws
    proposal, status = parse_answer(answer, prompt.labels, prompt.allowed, pair.group)
    assert status == JudgeStatus.OK
    expected = pair.failure.traj_id if side is SegmentSide.FAILURE else pair.success.traj_id
    pivot = pair.success.pivot_turn
    assert (proposal.traj_id, proposal.start_turn, proposal.end_turn) == (expected, pivot, pivot)
    assert answer == target_answer(prompt, pair)


def test_prompt_classes_follow_the_budget(keydoor_pairs):
    pair = max(keydoor_pairs, key=lambda p: prompt_chars(p, SegmentSide.SUCCESS, 600))
    full = prompt_chars(pair, SegmentSide.SUCCESS, 600)
    assert prompt_class(pair, SegmentSide.SUCCESS, 600, None) == "fits"
    assert prompt_class(pair, SegmentSide.SUCCESS, 600, full) == "fits"
    assert prompt_class(pair, SegmentSide.SUCCESS, 600, 100) == "too_long"
    assert render_example(pair, SegmentSide.SUCCESS, random.Random(0), 600, 100) is None
    # observations shorter than the clip: halving it to 75 cuts the long ones, so the prompt fits a smaller budget
    cut = build_prompt(pair.success, pair.failure, "success", random.Random(0), 75, None)
    budget = sum(len(m["content"]) for m in cut.messages)
    assert budget < full and prompt_class(pair, SegmentSide.SUCCESS, 600, budget) == "cut"
    messages, _ = render_example(pair, SegmentSide.SUCCESS, random.Random(0), 600, budget)
    assert "...[truncated]" in messages[1]["content"]


class Scripted(ChatBackend):
    """Answers each judge prompt with ``reply(prompt text)``."""

    def __init__(self, reply):
        self.reply = reply

    async def complete(self, messages):
        return self.reply(messages[0]["content"] + messages[1]["content"])


def test_score_counts_hits_statuses_and_segment_lengths():
    def traj(tid, actions, won):
        return Trajectory(tid, "t", tuple(f"room {i}" for i in range(len(actions))), tuple(actions), won, 1)

    # the heuristic's first divergence is turn 1 (the pivot) in the first pair, turn 0 in the second
    pairs = [
        Pair("a", traj(0, ["w", "red", "w"], True), traj(1, ["w", "blue", "w"], False)),
        Pair("b", traj(0, ["x", "red", "w"], True), traj(1, ["w", "red", "drop"], False)),
    ]
    total, outcomes = score(HeuristicJudge(SegmentSide.SUCCESS), pairs, SegmentSide.SUCCESS)
    assert outcomes == [Outcome(JudgeStatus.OK, True, 1), Outcome(JudgeStatus.OK, False, 1)]
    assert total.rates()["hit_rate"] == 0.5 and total.rates()["proposal_hit_rate"] == 0.5

    def two_turns_at_pivot(text: str) -> str:  # turns 1..2 of the success label
        label = text.split("span of turns in trajectory ")[1][0]
        return json.dumps({"trajectory": label, "start_turn": 1, "end_turn": 2})

    judge = LLMJudge(Scripted(two_turns_at_pivot), JudgeConfig(), SegmentSide.SUCCESS, seed=0)
    total, _ = score(judge, pairs, SegmentSide.SUCCESS)
    assert (total.hits, total.proposals, total.turns) == (2, 2, 4)
    assert total.rates()["mean_segment_turns"] == 2.0
    replies = iter(["not json", json.dumps({"trajectory": "A", "start_turn": 0, "end_turn": 9})])
    judge = LLMJudge(Scripted(lambda _: next(replies)), JudgeConfig(), SegmentSide.ANY, seed=0)
    total, _ = score(judge, pairs, SegmentSide.ANY)
    rates = total.rates()
    assert (rates["malformed_rate"], rates["out_of_range_rate"], rates["hit_rate"], total.proposals) == (0.5, 0.5, 0, 0)
    judge = LLMJudge(Scripted(two_turns_at_pivot), JudgeConfig(max_prompt_chars=50), SegmentSide.SUCCESS, seed=0)
    assert score(judge, pairs, SegmentSide.SUCCESS)[0].rates()["too_long_rate"] == 1.0


def test_answer_loss_is_the_answer_tokens_nll(keydoor_pairs):
    def short(traj: Trajectory, turns: int) -> Trajectory:  # a few turns: short sequences, a fast test
        return dataclasses.replace(traj, observations=traj.observations[:turns], actions=traj.actions[:turns])

    pairs = [
        Pair(p.task_id, short(p.success, n), short(p.failure, n))
        for p, n in zip(keydoor_pairs[:3], (1, 2, 3), strict=True)
    ]
    model, tokenizer = build_model(pairs, 400, {"hidden_size": 32, "head_dim": 8}, 0, "keydoor")
    rng = random.Random(0)
    batch = [encode_example(tokenizer, *render_example(p, SegmentSide.SUCCESS, rng, 600, None)) for p in pairs]
    assert len({len(ids) for ids, _ in batch}) > 1  # padding is exercised
    answer, prompt = [], []
    for ids, labels in batch:  # each sequence alone, unpadded, with the full logits
        log_p = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, :-1].float(), -1)
        for pos, (token, label) in enumerate(zip(ids[1:], labels[1:], strict=True)):
            (prompt if label == -100 else answer).append(-log_p[pos, token])
    answer_nll, prompt_nll = torch.stack(answer).mean(), torch.stack(prompt).mean()
    torch.testing.assert_close(answer_loss(model, tokenizer, batch), answer_nll)
    torch.testing.assert_close(answer_loss(model, tokenizer, batch, prompt_weight=0.3), answer_nll + 0.3 * prompt_nll)
    ids, labels = batch[0]
    reply = [t for t in labels if t != -100]
    assert ids[-len(reply) :] == reply and reply[-1] == tokenizer.eos_token_id


def test_model_config_sizes_only_for_the_dense_arch():
    tok = tiny_model.build_tokenizer(300)
    assert tiny_model.model_config("qwen3", tok, hidden_size=32, num_hidden_layers=3).num_hidden_layers == 3
    assert tiny_model.model_config("qwen3", tok).hidden_size == 64  # the tiny model itself is unchanged
    with pytest.raises(ValueError, match="qwen3 only"):
        tiny_model.model_config("qwen3_5", tok, hidden_size=32)


def test_report_table_from_results():
    rates = Score(pairs=4, proposals=2, hits=1, turns=3).rates()
    results = {
        "held_out": {
            "overall": {j: rates for j in report.JUDGES},
            "by_prompt": {j: {c: rates for c in ("fits", "cut", "too_long")} for j in report.JUDGES},
        }
    }
    text = report.table(results)
    assert "| judge model | 4 | 25.0 % | 50.0 % | 0.0 % | 0.0 % | 0.0 % | 1.50 |" in text
    assert "| random segment | 25.0 % (4) | 25.0 % (4) | 25.0 % (4) |" in text


def test_results_record_the_command_without_machine_paths():
    from prover_verl.judge_model.train import command_line

    argv = ["--out", "/home/me/judge", "--steps", "600", "--results", "/home/me/r.json", "--env-kwargs", "{}"]
    expected = "python -m prover_verl.judge_model.train --out DIR --steps 600 --results RESULTS --env-kwargs {}"
    assert command_line(argv) == expected
