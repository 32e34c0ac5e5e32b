"""A pair as a judge-model training example: the judge's own prompt (exactly what ``judge.type=openai`` sends) and
the answer in the judge's format that names the pivotal turn."""

from __future__ import annotations

import json
import random
from typing import Any

from prover_verl.judge.base import SegmentSide
from prover_verl.judge.prompt import JudgePrompt, PromptTooLong, build_prompt
from prover_verl.judge_model.pairs import Pair

REASON = "the decision at this turn separates the success from the failure"


def target_answer(prompt: JudgePrompt, pair: Pair) -> str:
    """The answer naming the pivotal turn of the trajectory the prompt asks about (the success where the prompt
    allows either), as one JSON object in the judge's answer format."""
    label_of = {traj_id: label for label, traj_id in prompt.labels.items()}
    if len(prompt.allowed) == 1:
        label = prompt.allowed[0]
    else:
        label = label_of[pair.success.traj_id]
    traj = pair.success if prompt.labels[label] == pair.success.traj_id else pair.failure
    pivot = traj.pivot_turn
    return json.dumps({"trajectory": label, "start_turn": pivot, "end_turn": pivot, "reason": REASON})


def render_example(
    pair: Pair,
    side: SegmentSide,
    rng: random.Random,
    max_obs_chars: int,
    max_prompt_chars: int | None,
) -> tuple[list[dict[str, str]], str] | None:
    """The judge's chat messages for ``pair`` and the target answer; None if the prompt cannot fit
    ``max_prompt_chars`` (the judge would skip the pair as ``too_long``)."""
    try:
        prompt = build_prompt(pair.success, pair.failure, side, rng, max_obs_chars, max_prompt_chars)
    except PromptTooLong:
        return None
    return prompt.messages, target_answer(prompt, pair)


def prompt_chars(pair: Pair, side: SegmentSide, max_obs_chars: int) -> int:
    """Characters of the pair's judge prompt before any cut to a budget (the order and nonce do not change it)."""
    prompt = build_prompt(pair.success, pair.failure, side, random.Random(0), max_obs_chars, None)
    return sum(len(m["content"]) for m in prompt.messages)


def chat_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of ``messages`` through the tokenizer's chat template with the generation prompt, as an
    OpenAI-compatible server renders a chat request."""
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return list(ids if isinstance(ids, list) else ids["input_ids"])  # transformers 5 returns a BatchEncoding


def encode_example(tokenizer: Any, messages: list[dict[str, str]], answer: str) -> tuple[list[int], list[int]]:
    """Token ids of the prompt and the answer with its end-of-turn token, and labels on the answer only (-100
    elsewhere)."""
    prompt = chat_ids(tokenizer, messages)
    reply = tokenizer.encode(answer, add_special_tokens=False) + [tokenizer.eos_token_id]
    return prompt + reply, [-100] * len(prompt) + reply
