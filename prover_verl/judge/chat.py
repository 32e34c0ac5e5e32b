"""What a judge asks of a chat model: messages (and tools) in, a :class:`ChatReply` out, failures in words."""

from __future__ import annotations

import abc
import dataclasses
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from prover_verl.judge.base import Judge, JudgeStatus, Proposal, SegmentSide, Trajectory, segment_side_of

if TYPE_CHECKING:
    from prover_verl.config import JudgeConfig


@dataclasses.dataclass(frozen=True)
class ToolCall:
    """One tool call of a chat reply: its id, the function's name and its arguments (JSON text, as sent)."""

    id: str
    name: str
    arguments: str


@dataclasses.dataclass(frozen=True)
class ChatReply:
    """A chat model's reply.

    Attributes:
        content: The reply's text (None: it holds only tool calls, or nothing).
        tool_calls: The tool calls it makes.
        tokens: Prompt and completion tokens of the request, as the endpoint reports them (None: not reported).
    """

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    tokens: int | None = None


class JudgeRequestError(RuntimeError):
    """A request to the judge model that failed; the message says why in words (it goes to the log line)."""


class ChatBackend(abc.ABC):
    """Turns chat messages into the judge model's answer.

    Attributes:
        max_prompt_tokens: The most prompt tokens the judge model can take with room for its answer (None: the
            backend cannot count them, and only ``judge.max_prompt_chars`` bounds the prompt).
    """

    max_prompt_tokens: int | None = None

    @abc.abstractmethod
    async def complete(self, messages: list[dict[str, str]]) -> str:
        """Return the model's reply to ``messages``."""

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict] | None = None) -> ChatReply:
        """The model's reply to ``messages``, offered ``tools`` (a backend without tool calls offers none)."""
        if tools:
            raise JudgeRequestError(f"{type(self).__name__} cannot offer tools")
        return ChatReply(await self.complete(messages))

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        """Tokens of ``messages`` as the judge model sees them (where :attr:`max_prompt_tokens` is set)."""
        raise NotImplementedError(f"{type(self).__name__} does not count tokens")


def why_failed(err: BaseException) -> str:
    """Why a judge request failed, for the log line (a JudgeRequestError already says it in words)."""
    return str(err) if isinstance(err, JudgeRequestError) else f"{type(err).__name__}: {str(err)[:300]}"


class ChatJudge(Judge):
    """A judge that asks a chat model (:class:`ChatBackend`) about one success/failure pair of the group; the
    one-shot prompt (:class:`~prover_verl.judge.llm.LLMJudge`) and the agentic mode
    (:class:`~prover_verl.judge.agentic.AgenticJudge`) differ only in :meth:`judgement`.

    Args:
        backend: The chat model.
        config: The judge's settings.
        segment_side: The side of the pair the segment must lie in.
        seed: Seed of the pair's draw, order and fence nonce.
    """

    def __init__(
        self,
        backend: ChatBackend,
        config: JudgeConfig,
        segment_side: SegmentSide | str = SegmentSide.SUCCESS,
        seed: int | None = None,
    ):
        self.backend = backend
        self.config = config
        self.segment_side = segment_side_of(segment_side)
        self.rng = random.Random(seed)

    async def propose(self, group: Sequence[Trajectory]) -> tuple[Proposal | None, JudgeStatus]:
        judgement = await self.judgement(group)
        return judgement.proposal, judgement.status
