"""The LLM judge: a chat model shown a success and a failure, asked for the decisive span of turns; its backends
(the policy's own rollout servers, any OpenAI-compatible endpoint) and the ``policy`` and ``openai`` judge types."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from uuid import uuid4

from prover_verl.judge.agentic import AgenticJudge
from prover_verl.judge.base import (
    Judge,
    Judgement,
    JudgeStatus,
    SegmentSide,
    Trajectory,
    pick_pair,
)
from prover_verl.judge.chat import ChatBackend, ChatJudge, ChatReply, JudgeRequestError, ToolCall, why_failed
from prover_verl.judge.parse import parse_answer
from prover_verl.judge.prompt import PromptTooLong, build_prompt
from prover_verl.judge.registry import register_judge

if TYPE_CHECKING:  # config imports the judge package (for the registry and the enums), so only for annotations
    from prover_verl.config import JudgeConfig

logger = logging.getLogger(__name__)

# The OpenAI client's backoff before retry n when the server names no Retry-After: at most 0.5 * 2**n s, up to 8 s
# (its INITIAL_RETRY_DELAY and MAX_RETRY_DELAY); and the slack the deadline over a call leaves the client's own.
FIRST_BACKOFF_S, MAX_BACKOFF_S, DEADLINE_SLACK_S = 0.5, 8.0, 1.0


class PolicyServerBackend(ChatBackend):
    """The policy's own rollout servers, through verl's ``LLMServerClient.generate`` (token ids in and out).

    Args:
        server_manager: verl's client of the rollout servers.
        tokenizer: The policy's tokenizer (with its chat template).
        config: The judge's settings (``temperature``, ``max_tokens``).
        chat_template_kwargs: Passed to the chat template (e.g. ``enable_thinking``).
        max_model_len: The rollout servers' context (prompt and answer tokens); the prompt gets what is left after
            ``config.max_tokens``. None: the servers' own limit, unknown here (only the character budget holds).

    Raises:
        ValueError: ``max_model_len`` leaves no room for a prompt beside ``judge.max_tokens``.
    """

    def __init__(
        self,
        server_manager: Any,
        tokenizer: Any,
        config: JudgeConfig,
        chat_template_kwargs: dict | None = None,
        max_model_len: int | None = None,
    ):
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.config = config
        self.chat_template_kwargs = chat_template_kwargs or {}
        if max_model_len is not None:
            if max_model_len - config.max_tokens < 256:
                raise ValueError(
                    f"rollout max_model_len={max_model_len} leaves no room for a judge prompt beside "
                    f"algorithm.prover.judge.max_tokens={config.max_tokens}"
                )
            self.max_prompt_tokens = max_model_len - config.max_tokens

    def _prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        ids = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, **self.chat_template_kwargs
        )
        return list(ids if isinstance(ids, list) else ids["input_ids"])  # transformers 5 returns a BatchEncoding

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        return len(self._prompt_ids(messages))

    async def complete(self, messages: list[dict[str, str]]) -> str:
        prompt_ids = self._prompt_ids(messages)
        sampling = {"temperature": self.config.temperature, "top_p": 1.0, "max_tokens": self.config.max_tokens}
        # no wall-clock limit (judge.timeout_s is the remote endpoint's): on the policy's replicas the request
        # queues behind the step's rollouts, and a cancelled wait would not stop it there anyway
        output = await self.server_manager.generate(uuid4().hex, prompt_ids=prompt_ids, sampling_params=sampling)
        return self.tokenizer.decode(output.token_ids, skip_special_tokens=True)


class OpenAIBackend(ChatBackend):
    """Any OpenAI-compatible chat endpoint (vLLM, SGLang, ``transformers serve``, a hosted API) at ``config.url``.

    A request gets ``judge.timeout_s`` per attempt and ``judge.max_retries`` retries (the OpenAI client's, with its
    backoff and the server's ``Retry-After``), and the whole call a deadline over them all (:attr:`deadline_s`): a
    server that trickles its reply byte by byte never trips a per-read timeout, and one that asks for long waits
    between rate-limited attempts (``Retry-After``, honoured up to two minutes) would hold the group as long as it
    asks.
    """

    def __init__(self, config: JudgeConfig):
        from openai import AsyncOpenAI, DefaultAsyncHttpxClient

        if not config.url or not config.model:
            raise ValueError("algorithm.prover.judge.url and .model must be set for judge.type=openai")
        self.config = config
        # every HTTP request the client sends (retries included) is counted for the call that sent it, so that a
        # failure says how many attempts were made, not how many were allowed
        http_client = DefaultAsyncHttpxClient(event_hooks={"request": [_count_attempt]})
        self.client = AsyncOpenAI(
            base_url=config.url,
            api_key=api_key(config),
            timeout=config.timeout_s,
            max_retries=config.max_retries,
            http_client=http_client,
        )

    @property
    def deadline_s(self) -> float:
        """Seconds one call may take in all: every attempt's timeout and the backoffs between them."""
        backoffs = sum(min(FIRST_BACKOFF_S * 2**n, MAX_BACKOFF_S) for n in range(self.config.max_retries))
        return (self.config.max_retries + 1) * self.config.timeout_s + backoffs + DEADLINE_SLACK_S

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict] | None = None) -> ChatReply:
        request = {
            "model": self.config.model,
            "messages": messages,
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
        }
        if tools:
            request["tools"] = tools
        sent = [0]
        token = _ATTEMPTS.set(sent)
        try:
            async with asyncio.timeout(self.deadline_s):
                reply = await self.client.chat.completions.create(**request)
        except Exception as err:
            raise JudgeRequestError(f"judge at {self.config.url}: {describe_failure(err, self, sent[0])}") from err
        finally:
            _ATTEMPTS.reset(token)
        return _chat_reply(reply, self.config.url)

    async def complete(self, messages: list[dict[str, str]]) -> str:
        return (await self.chat(messages)).content or ""


_ATTEMPTS: contextvars.ContextVar[list[int]] = contextvars.ContextVar("judge_attempts")
# the connection broke after the server took the request: an answer cut short, not an endpoint that is down
_BROKEN_REPLY = ("RemoteProtocolError", "ReadError", "IncompleteRead")


async def _count_attempt(request: Any) -> None:
    """The HTTP client's request hook: one more attempt for the call running in this task (:meth:`chat`)."""
    sent = _ATTEMPTS.get(None)
    if sent is not None:
        sent[0] += 1


def describe_failure(err: BaseException, backend: OpenAIBackend, attempts: int | None = None) -> str:
    """Why a request to an OpenAI-compatible endpoint failed, in words for the log line.

    Args:
        err: What the call raised.
        backend: The backend that made it.
        attempts: HTTP requests the call sent (None: unknown, taken as all ``judge.max_retries + 1`` allowed).
    """
    import openai

    allowed = backend.config.max_retries + 1
    made = allowed if attempts is None else attempts
    tries = f"{made} attempt{'' if made == 1 else 's'}"
    each = f"each of {tries}" if made > 1 else tries
    if isinstance(err, TimeoutError):  # the deadline over all attempts
        return (
            f"no answer within {backend.deadline_s:g} s (the deadline over {allowed} attempts of judge.timeout_s and "
            f"their backoffs; {tries} sent)"
        )
    if isinstance(err, openai.APITimeoutError):
        return f"no answer within judge.timeout_s={backend.config.timeout_s:g} s on {each}"
    if isinstance(err, openai.RateLimitError):
        why = ""
        if made < allowed:  # the client does not retry a Retry-After over its limit (two minutes)
            why = f" (not retried: Retry-After {err.response.headers.get('retry-after', '?')} s is too long)"
        return f"rate-limited (HTTP 429) on {each}{why}: {err.message}"
    if isinstance(err, openai.APIConnectionError):
        cause = err.__cause__ or err.__context__
        what = f"{type(cause).__name__ if cause else 'connection'}: {cause}"
        if type(cause).__name__ in _BROKEN_REPLY:
            return f"the reply broke off (a body cut short, or a server that hung up) on {each} ({what})"
        return f"unreachable after {tries} ({what})"
    if isinstance(err, openai.APIStatusError):
        return f"HTTP {err.status_code}: {str(err.message)[:300]}"
    return f"{type(err).__name__}: {str(err)[:300]}"


def _chat_reply(reply: Any, url: str) -> ChatReply:
    """The :class:`ChatReply` of an OpenAI chat completion; a JudgeRequestError if ``reply`` is not one (a server
    answering HTTP 200 with an HTML page or a truncated body)."""
    try:
        message = reply.choices[0].message
        calls = tuple(
            ToolCall(str(call.id), str(call.function.name), str(call.function.arguments or ""))
            for call in message.tool_calls or ()
        )
        usage = getattr(reply, "usage", None)
        tokens = None if usage is None else int(usage.prompt_tokens) + int(usage.completion_tokens or 0)
        content = message.content
    except (AttributeError, IndexError, TypeError, ValueError) as err:
        raise JudgeRequestError(
            f"judge at {url}: the reply is not an OpenAI chat completion ({type(err).__name__}: {err}; "
            f"got {str(reply)[:200]!r})"
        ) from err
    if content is not None and not isinstance(content, str):
        raise JudgeRequestError(f"judge at {url}: the reply's content is not text: {content!r:.200}")
    return ChatReply(content, calls, tokens)


def api_key(config: JudgeConfig) -> str:
    """The judge endpoint's API key, from the variable ``config.api_key_env`` names ("EMPTY" if it names none).

    Raises:
        ValueError: the variable is named but not set in this process. On a Ray cluster the agent-loop workers
            see only the variables forwarded to them; a missing key would otherwise turn every judge call into an
            authentication error.
    """
    if not config.api_key_env:
        return "EMPTY"  # an endpoint without authentication (the OpenAI client insists on some key)
    key = os.environ.get(config.api_key_env)
    if not key:
        raise ValueError(
            f"algorithm.prover.judge.api_key_env={config.api_key_env} is not set in this process: export it (on a "
            "Ray cluster, on every node before `ray start`), or set algorithm.prover.judge.api_key_env=null for an "
            "endpoint without a key"
        )
    return key


class LLMJudge(ChatJudge):
    """Prompts a chat model with one success/failure pair of the group and parses its answer strictly.

    Any failure of the model (an exception, a timeout, an unusable answer) yields no proposal with a status
    naming why; the group then keeps plain GRPO. Nothing here raises on a bad answer.
    """

    async def judgement(self, group: Sequence[Trajectory]) -> Judgement:
        pair = pick_pair(group, self.rng)
        if pair is None:
            return Judgement(None, JudgeStatus.NO_PAIR)
        shown = (pair[0].traj_id, pair[1].traj_id)
        try:
            prompt = build_prompt(
                *pair,
                self.segment_side,
                self.rng,
                self.config.max_obs_chars,
                self.config.max_prompt_chars,
                count_tokens=self.backend.count_tokens if self.backend.max_prompt_tokens is not None else None,
                max_prompt_tokens=self.backend.max_prompt_tokens,
            )
        except PromptTooLong as err:  # a request past the model's context would fail anyway; counted apart
            logger.warning("judge prompt skipped, the group keeps GRPO (prover/judge_too_long): %s", err)
            return Judgement(None, JudgeStatus.TOO_LONG, shown)
        try:
            reply = await self.backend.chat(prompt.messages)
        except Exception as err:  # a judge outage must not stop training; it is counted as status "error"
            logger.warning("judge request failed, the group keeps GRPO (prover/judge_error): %s", why_failed(err))
            return Judgement(None, JudgeStatus.ERROR, shown, prompt.labels)
        text = reply.content
        try:
            proposal, status = parse_answer(text, prompt.labels, prompt.allowed, list(group))
        except Exception as err:  # whatever the model wrote, the group keeps GRPO and the answer is counted
            logger.warning("judge answer could not be parsed: %r", err)
            proposal, status = None, JudgeStatus.MALFORMED
        if status is not JudgeStatus.OK:
            logger.warning("judge answer unusable, the group keeps GRPO (prover/judge_%s): %r", status, _head(text))
        return Judgement(proposal, status, shown, prompt.labels, text, tokens=reply.tokens)


def _head(text: str | None, chars: int = 200) -> str | None:
    return text if text is None or len(text) <= chars else text[:chars] + "..."


@register_judge("policy")
def _policy(
    config: JudgeConfig,
    segment_side: SegmentSide,
    seed: int | None = None,
    server_manager: Any = None,
    tokenizer: Any = None,
    chat_template_kwargs: dict | None = None,
    max_model_len: int | None = None,
    **_context,
) -> LLMJudge:
    if server_manager is None or tokenizer is None:
        raise ValueError("judge.type=policy needs the rollout server client and the tokenizer")
    backend = PolicyServerBackend(server_manager, tokenizer, config, chat_template_kwargs, max_model_len)
    return LLMJudge(backend, config, segment_side, seed=seed)


@register_judge("openai")
def _openai(config: JudgeConfig, segment_side: SegmentSide, seed: int | None = None, **_context) -> Judge:
    if config.mode == "agentic":
        return AgenticJudge(_openai_backend(config), config, segment_side, seed=seed)
    return LLMJudge(_openai_backend(config), config, segment_side, seed=seed)


# one client (and its connection pool) per process, endpoint and event loop, not one per group; an httpx pool
# belongs to the loop it was opened in, and a client used from another loop fails every request
_OPENAI_BACKENDS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[JudgeConfig, OpenAIBackend]] = (
    weakref.WeakKeyDictionary()
)
_OUTSIDE_A_LOOP: dict[JudgeConfig, OpenAIBackend] = {}


def _openai_backend(config: JudgeConfig) -> OpenAIBackend:
    try:
        backends = _OPENAI_BACKENDS.setdefault(asyncio.get_running_loop(), {})
    except RuntimeError:  # built outside a running loop (a script, a test)
        backends = _OUTSIDE_A_LOOP
    if config not in backends:
        backends[config] = OpenAIBackend(config)
    return backends[config]
