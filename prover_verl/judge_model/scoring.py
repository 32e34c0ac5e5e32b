"""Score a judge on pairs whose pivotal turn is known: how often its proposal holds the pivot, and why it failed.

Every judge is asked through :meth:`~prover_verl.judge.base.Judge.judgement` with the pair as its group (so each
judge is shown exactly that success and failure) and its proposal is checked as the loop's group step checks it
(:func:`~prover_verl.judge.base.check_proposal` against the segment side). A model judge is the loop's own
:class:`~prover_verl.judge.llm.LLMJudge` (prompt, truncation, strict parsing) over :class:`LocalChatBackend`, which
generates in this process as an OpenAI-compatible server would for the same messages.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from prover_verl.judge.base import Judge, JudgeStatus, SegmentSide, check_proposal
from prover_verl.judge.llm import ChatBackend
from prover_verl.judge_model.examples import chat_ids
from prover_verl.judge_model.pairs import Pair


class LocalChatBackend(ChatBackend):
    """Greedy generation with a model in this process, the messages rendered by its tokenizer's chat template.

    Args:
        model: A causal LM.
        tokenizer: Its tokenizer (with the chat template and end-of-turn token the model was trained with).
        max_tokens: Longest answer (``judge.max_tokens``).
    """

    def __init__(self, model: Any, tokenizer: Any, max_tokens: int):
        self.model = model
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens

    async def complete(self, messages: list[dict[str, str]]) -> str:
        ids = torch.tensor([chat_ids(self.tokenizer, messages)])
        with torch.no_grad():
            out = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=self.max_tokens,
                do_sample=False,
                eos_token_id=self.tokenizer.eos_token_id,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        return self.tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """A judge's result on one pair: its status, and for a usable proposal whether it holds the pivot and its
    length in turns (``hit`` None and ``turns`` 0 without one)."""

    status: JudgeStatus
    hit: bool | None = None
    turns: int = 0


@dataclasses.dataclass
class Score:
    """A judge's counts over pairs.

    Attributes:
        pairs: Pairs judged.
        proposals: Pairs with a usable proposal (status ``ok`` and on the segment side).
        hits: Proposals whose segment holds the pivotal turn of its trajectory.
        turns: Turns in the proposals' segments, summed.
        statuses: Count per :class:`~prover_verl.judge.base.JudgeStatus` value (a proposal refused by the side
            check counts as ``out_of_range``, as in the loop).
    """

    pairs: int = 0
    proposals: int = 0
    hits: int = 0
    turns: int = 0
    statuses: dict[str, int] = dataclasses.field(default_factory=lambda: {s.value: 0 for s in JudgeStatus})

    def add(self, outcome: Outcome) -> None:
        """Count one pair's outcome."""
        self.pairs += 1
        self.statuses[outcome.status.value] += 1
        if outcome.hit is not None:
            self.proposals += 1
            self.hits += int(outcome.hit)
            self.turns += outcome.turns

    def rates(self) -> dict[str, float | int]:
        """Hit rate over all pairs and over proposals (the loop's ``prover/judge_pivot_hit_rate``), the share of
        pairs per status, and the mean segment length of the proposals (a longer segment holds the pivot more
        often, and says less about where it is)."""

        def share(count: int, total: int) -> float:
            return round(count / total, 4) if total else 0.0

        return {
            "pairs": self.pairs,
            "hit_rate": share(self.hits, self.pairs),
            "proposal_hit_rate": share(self.hits, self.proposals),
            "mean_segment_turns": share(self.turns, self.proposals),
            **{f"{s}_rate": share(n, self.pairs) for s, n in self.statuses.items() if s != JudgeStatus.NO_PAIR},
        }


async def judge_pair(judge: Judge, pair: Pair, side: SegmentSide) -> Outcome:
    """The judge's :class:`Outcome` on ``pair``."""
    group = pair.group
    judgement = await judge.judgement(group)
    proposal, status = judgement.proposal, judgement.status
    if proposal is None:
        return Outcome(status)
    allowed = [t.traj_id for t in group if side.admits(t.success)]
    if check_proposal(proposal, group, allowed) is not None:
        return Outcome(JudgeStatus.OUT_OF_RANGE)
    pivot = group[proposal.traj_id].pivot_turn
    hit = proposal.start_turn <= pivot <= proposal.end_turn
    return Outcome(JudgeStatus.OK, hit, proposal.end_turn - proposal.start_turn + 1)


def score(judge: Judge, pairs: Sequence[Pair], side: SegmentSide) -> tuple[Score, list[Outcome]]:
    """The judge's :class:`Score` over ``pairs`` and its outcome per pair, in order."""

    async def run() -> list[Outcome]:
        return [await judge_pair(judge, pair, side) for pair in pairs]

    outcomes = asyncio.run(run())
    total = Score()
    for outcome in outcomes:
        total.add(outcome)
    return total, outcomes
