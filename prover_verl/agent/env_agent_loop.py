"""verl agent loop that plays ALFWorld / WebShop / Search-QA episodes and runs ProVer on each rollout group.

One trajectory is one continuous token sequence (verl's Continuous Token layout): the task prompt, then per
turn the policy's reply (``response_mask`` 1) and the next observation (``response_mask`` 0). Every turn
records a fork point (message count, token count, env snapshot), so a segment can later be continued from the
exact context the policy acted in. With ``algorithm.adv_estimator=prover`` the n sessions of a group meet in
:class:`~prover_verl.agent.group.GroupRendezvous`; the last to finish asks the judge for a segment, verifies
it with K continuations from each fork point, and every session writes its credit into the ``prover_credit``
field of its output.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
import zlib
from collections.abc import Mapping
from typing import Any
from uuid import uuid4

import torch
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register

from prover_verl.agent import AGENT_NAME, budget, layout
from prover_verl.agent.abort import AbortCount, generate
from prover_verl.agent.adapters import PromptAdapter, make_adapter
from prover_verl.agent.episode import Conversation, Episode, PlayResult, TurnMark
from prover_verl.agent.group import GroupRendezvous, GroupResult
from prover_verl.agent.pools import check_data_fingerprint, get_env_pool
from prover_verl.config import EnvConfig, ProverConfig
from prover_verl.core import credit_tensor
from prover_verl.core.gigpo import turn_fields
from prover_verl.credit_channel import CREDIT_FIELD
from prover_verl.eval.episode_log import log_episode
from prover_verl.eval.group_log import write_group
from prover_verl.gigpo import NAME as GIGPO
from prover_verl.gigpo import STATE_FIELD, TURNS_FIELD
from prover_verl.metrics import FIELD_PREFIX, STAT_KEYS, ProverStats
from prover_verl.verify import Continuation, group_step, select_judge

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))


# Process-wide state shared by the agent-loop instances of one verl AgentLoopWorker (one instance per sample).
_RENDEZVOUS: GroupRendezvous | None = None


def _rendezvous() -> GroupRendezvous:
    global _RENDEZVOUS
    if _RENDEZVOUS is None:
        _RENDEZVOUS = GroupRendezvous()
    return _RENDEZVOUS


class ProverAgentLoopOutput(AgentLoopOutput):
    """verl's agent-loop output plus the per-token ProVer credit and the per-row ProVer counters."""

    prover_credit: list[float] | None = None
    prover_stats: dict[str, float] = {}
    # GiGPO's turn record (adv_estimator=gigpo only), per response token: see prover_verl.core.gigpo.turn_fields
    gigpo_fields: dict[str, list[int]] | None = None

    def as_dict(self) -> dict[str, Any]:
        output = super().as_dict()
        credit = output.pop("prover_credit", None)
        stats = output.pop("prover_stats", {})
        for name, values in (output.pop("gigpo_fields", None) or {}).items():
            output[name] = torch.tensor(values, dtype=torch.int64)
        length = output["responses"].size(0)
        output[CREDIT_FIELD] = torch.tensor(credit if credit is not None else [0.0] * length, dtype=torch.float32)
        for key in STAT_KEYS:  # every row carries every counter: verl stacks rows by the first row's keys
            output[FIELD_PREFIX + key] = torch.tensor(float(stats.get(key, 0.0)), dtype=torch.float32)
        return output


def request_seed(rollout_seed: int, seed_key: str, turn: int) -> int:
    """The sampling seed of one generation: a function of ``rollout.seed``, the play's identity and the turn only.

    Requests reach a replica in whatever order the agent loops, env workers and Ray deliver them; seeding each
    from what it is, not from a shared stream, makes a rerun draw the same samples.
    """
    return zlib.crc32(f"{rollout_seed}|{seed_key}|{turn}".encode()) & 0x7FFFFFFF


@register(AGENT_NAME)
class EnvAgentLoop(AgentLoopBase):
    """Multi-turn environment agent with ProVer's propose-and-verify on complete rollout groups.

    Data rows name the task in ``extra_info``: ``{"env": "alfworld", "task_id": ..., "verify": true}``;
    ``verify: false`` (validation rows) plays the episode without ProVer. With ``adv_estimator=prover`` every row
    must say which it is: the group size is ``rollout.n``, so a per-row ``__rollout_n__`` is not supported.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.env_config = EnvConfig.from_mapping(self.config.get("env"))
        self.prover = ProverConfig.from_algorithm_config(self.config.algorithm)
        self.use_prover = self.config.algorithm.adv_estimator == "prover"
        if self.use_prover and self.prover.train_on_continuations:
            raise ValueError(
                "algorithm.prover.train_on_continuations=true is implemented in the CPU demo only: this agent loop "
                "does not yet return the verifier's continuations as outputs (issue 39, item 4)"
            )
        self.use_gigpo = self.config.algorithm.adv_estimator == GIGPO
        self.response_length = self.rollout_config.response_length
        self.group_size = self.rollout_config.n

    # ------------------------------------------------------------------ rollout
    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        extra = kwargs.get("extra_info") or {}
        if not isinstance(extra, Mapping):  # dict() of a list raised an unrelated TypeError about sequence elements
            raise TypeError(
                f"{AGENT_NAME}: a data row's extra_info must be a mapping (env, task_id, verify, ...), "
                f"got {type(extra).__name__}: {str(extra)[:200]}"
            )
        extra = dict(extra)
        train_row = extra.get("verify")
        if self.use_prover and train_row not in (True, False):  # also numpy bools from parquet
            # The agent loop cannot tell training from validation (verl does not pass it), and a validation
            # group of val_kwargs.n sessions must not wait for rollout.n: the row has to say.
            raise ValueError(
                f"{AGENT_NAME} with adv_estimator=prover needs extra_info.verify (true on training rows, false on "
                f"validation rows; python -m prover_verl.data writes it), got {train_row!r}"
            )
        verify = self.use_prover and bool(train_row)
        uid, session_id = kwargs.get("uid"), kwargs.get("session_id")
        if verify and (uid is None or session_id is None):
            raise RuntimeError("ProVer needs verl's v1 agent-loop worker (rows with uid and session_id)")
        seed_key = None
        # under full determinism the same step, task and session sample the same, in any arrival order
        if getattr(self.rollout_config, "full_determinism", False):
            seed_key = f"{kwargs.get('global_steps', -1)}|{extra.get('task_id')}|{session_id}"
        try:
            episode, pool, adapter = await self._rollout(extra, session_id, sampling_params, seed_key)
        except Exception as err:
            if verify:  # siblings must not wait for an episode that will never come; they train on plain GRPO
                _rendezvous().abort(uid, self.group_size, err)
            raise
        group = GroupResult()
        if verify:
            process = lambda episodes: self._process_group(episodes, pool, adapter, sampling_params, kwargs)  # noqa: E731
            group = await _rendezvous().submit(
                uid, self.group_size, episode, process, timeout_s=4 * self.prover.verify_timeout_s
            )
        if train_row is not None and not train_row and self.env_config.eval_log_dir:  # validation rows, any estimator
            log_episode(
                self.env_config.eval_log_dir,
                step=kwargs.get("global_steps", -1),
                env=extra.get("env", self.env_config.name),
                extra=extra,
                outcome=_outcome(episode.result),
                reward=episode.result.reward,
                turns=episode.num_turns,
                stop=episode.result.stop,
            )
        return self._output(episode, group, verify)

    async def _rollout(self, extra: dict, session_id, sampling_params: dict[str, Any], seed_key: str | None = None):
        if "task_id" not in extra:
            raise ValueError(f"{AGENT_NAME} needs extra_info.task_id in every data row, got keys {sorted(extra)}")
        env_name = extra.get("env", self.env_config.name)
        adapter = make_adapter(env_name, self.env_config.max_obs_chars, self.env_config.kwargs)
        split = extra.get("split")
        pool = get_env_pool(env_name, self.env_config, None if split is None else str(split))
        if extra.get("data_fingerprint") is not None:
            await check_data_fingerprint(pool, env_name, split, str(extra["data_fingerprint"]))
        episode_id, obs, info = await pool.reset(task_id=str(extra["task_id"]))
        try:
            conv = await self._initial_conversation(adapter, obs, info)
            result = await self._play(
                pool, episode_id, adapter, conv, obs, info, 0, sampling_params, True, seed_key=seed_key
            )
        finally:
            await pool.close(episode_id)
        return Episode(int(session_id or 0), info.get("task", ""), conv, result), pool, adapter

    def _cap_text_prompt_length(self, prompt_ids: list[int]) -> list[int]:
        # verl cuts an over-long first prompt from the left (the system prompt first) with only a warning; here
        # that would change the task the policy sees, so it is a configuration error
        if len(prompt_ids) > self.rollout_config.prompt_length:
            raise ValueError(
                f"a first prompt of {len(prompt_ids)} tokens exceeds rollout.prompt_length="
                f"{self.rollout_config.prompt_length}: raise data.max_prompt_length"
            )
        return prompt_ids

    async def _initial_conversation(self, adapter: PromptAdapter, obs: str, info: dict) -> Conversation:
        messages = adapter.initial_messages(obs, info)
        ids = await self.ct_build_initial_tokens(messages)
        return Conversation(messages, list(ids), len(ids), [], [] if self.rollout_config.calculate_log_probs else None)

    async def _play(
        self,
        pool,
        episode_id: str,
        adapter: PromptAdapter,
        conv: Conversation,
        obs: str,
        info: dict,
        first_turn: int,
        sampling_params: dict[str, Any],
        record: bool,
        max_turns: int | None = None,
        request_id: str | None = None,
        seed_key: str | None = None,
        aborts: AbortCount | None = None,
    ) -> PlayResult:
        """Play from ``conv`` (which already shows ``obs``) until the episode or a budget ends.

        ``request_id`` is verl's sticky-session key: every turn with the same key goes to the same replica, whose
        prefix cache then holds the conversation so far. A new episode gets a new key (least-loaded replica); a
        continuation passes its trajectory's, so that its fork prefix is served from that replica's cache.
        ``seed_key`` (under ``rollout.full_determinism``) seeds each turn's sampling (:func:`request_seed`).
        With ``aborts`` (a continuation), a turn cancelled at the server (verify timeout) is aborted there and
        counted in it (:func:`prover_verl.agent.abort.generate`).
        """
        result = PlayResult(request_id=request_id or uuid4().hex, seed_key=seed_key)
        last_turn = self.env_config.max_turns if max_turns is None else min(self.env_config.max_turns, max_turns)
        for turn in range(first_turn, last_turn):
            if len(conv.response_mask) >= self.response_length:
                result.stop = "max_tokens"
                break
            if record:
                state = await pool.snapshot(episode_id)
                result.marks.append(TurnMark(len(conv.messages), len(conv.token_ids), state, obs, info))
            params = {**self._turn_params(sampling_params, len(conv.response_mask)), **adapter.sampling_params()}
            if seed_key is not None:
                params["seed"] = request_seed(getattr(self.rollout_config, "seed", 0), seed_key, turn)
            output = await generate(
                self.server_manager, result.request_id, prompt_ids=conv.token_ids, sampling_params=params, aborts=aborts
            )
            await self._append_assistant(conv, output)
            result.gen_tokens += len(output.token_ids)
            _track_policy_version(result, output.extra_fields)
            if turn == first_turn:  # a continuation's fork prefix is sent with its first generation
                cached = (output.extra_fields or {}).get("num_cached_tokens")
                result.first_cached_tokens = None if cached is None else int(cached)
            reply = self.tokenizer.decode(output.token_ids, skip_special_tokens=True)
            conv.messages.append({"role": "assistant", "content": reply})
            action = adapter.parse_action(reply)
            result.actions.append(action)
            obs, reward, terminated, truncated, info = await pool.step(episode_id, action)
            result.env_steps += 1
            if terminated or truncated:
                result.won, result.reward = bool(info.get("won", False)), float(reward)
                result.final_info = info
                result.stop = "terminated" if terminated else "truncated"
                break
            await self._append_observation(conv, adapter.observation_message(obs, info), adapter.inline_observations)
        else:
            result.stop = "max_turns"
        return result

    def _turn_params(self, sampling_params: dict[str, Any], used: int) -> dict[str, Any]:
        """The turn's sampling params, its ``max_tokens`` capped at what is left of ``response_length``.

        Without a cap the server allows ``prompt_length + response_length`` minus the whole context, i.e. the
        response budget plus the first prompt's unused room: the last turn could then run past
        ``response_length``, and the batch row would lose the tail of the very action the env was given.
        """
        left = self.response_length - used
        cap = sampling_params.get("max_tokens")
        return {**sampling_params, "max_tokens": left if cap is None else min(int(cap), left)}

    async def _append_assistant(self, conv: Conversation, output) -> None:
        merged, mask, logprobs = await self.ct_merge_assistant_token(
            conv.token_ids,
            list(output.token_ids),
            conv.response_mask,
            conv.response_logprobs,
            assistant_logprobs=output.log_probs if conv.response_logprobs is not None else None,
        )
        conv.token_ids, conv.response_mask = merged.token_ids, mask
        if logprobs is not None:
            conv.response_logprobs = logprobs

    async def _append_observation(self, conv: Conversation, text: str, inline: bool = False) -> None:
        """Append an observation (response mask 0) by :mod:`prover_verl.agent.layout`'s rule: a user turn of the chat
        template after the reply's closed turn, or with ``inline`` plain text that continues the assistant's turn
        (Search-R1's layout); ``messages`` records it as a user message both ways.
        """
        updated = [*conv.messages, {"role": "user", "content": text}]
        if inline:
            added = layout.inline_tokens(self.tokenizer, text)
        else:
            added = layout.closing_tokens(conv.token_ids, self.tokenizer)
        conv.token_ids = [*conv.token_ids, *added]
        conv.response_mask = [*conv.response_mask, *[0] * len(added)]
        if conv.response_logprobs is not None:
            conv.response_logprobs = [*conv.response_logprobs, *[0.0] * len(added)]
        if inline:
            conv.messages = updated
            return
        merged, mask, logprobs = await self.ct_merge_context_msg(
            conv.messages, updated, conv.token_ids, conv.response_mask, conv.response_logprobs
        )
        conv.messages, conv.token_ids, conv.response_mask = updated, merged.token_ids, mask
        if logprobs is not None:
            conv.response_logprobs = logprobs

    # ------------------------------------------------------------------ ProVer
    async def _continue_from(
        self,
        episode: Episode,
        turn: int,
        index: int,
        pool,
        adapter: PromptAdapter,
        sampling_params: dict[str, Any],
        aborts: AbortCount | None = None,
    ) -> Continuation:
        """Run one continuation of ``episode`` from its fork point before turn ``turn`` to the end (``aborts``
        counts its server requests aborted by a cancellation)."""
        mark = episode.result.marks[turn]
        conv = episode.conversation.prefix(mark)
        episode_id, obs, _ = await pool.restore(mark.state)
        try:
            if obs != mark.observation:
                raise RuntimeError(f"fork at turn {turn} restored a different observation: the env fork is not exact")
            cap = self.prover.max_continuation_turns
            max_turns = None if cap is None else turn + cap
            sticky = self._continuation_request_id(episode, turn, index)
            result = await self._play(
                pool,
                episode_id,
                adapter,
                conv,
                mark.observation,
                mark.info,
                turn,
                sampling_params,
                False,
                max_turns,
                request_id=sticky,
                seed_key=None if episode.result.seed_key is None else f"{episode.result.seed_key}|fork{turn}.{index}",
                aborts=aborts,
            )
        finally:
            await pool.close(episode_id)
        # what the server says its prefix cache served of the fork prefix (the sticky key only makes a hit likely:
        # the cache may have evicted it, and a hybrid model's linear-attention layers limit prefix caching);
        # 0 where the server reports nothing (the hf replica)
        cached = result.first_cached_tokens or 0
        return Continuation(result.won, result.env_steps, result.gen_tokens, cached, _stale(result, episode.result))

    def _continuation_request_id(self, episode: Episode, turn: int, index: int) -> str:
        """The trajectory's own sticky key, so the continuation reaches the replica that holds its prefix.

        Under ``rollout.full_determinism`` verl hands the key to vLLM as the request id itself, which must be
        unique among requests in flight: each continuation then gets its own key (and its own hashed replica).
        """
        if getattr(self.rollout_config, "full_determinism", False):
            return f"{episode.result.request_id}-{turn}-{index}"
        return episode.result.request_id

    async def _process_group(
        self, episodes: dict[int, Episode], pool, adapter: PromptAdapter, sampling_params: dict, kwargs: dict
    ) -> GroupResult:
        """Run :func:`~prover_verl.verify.group_step` on one complete group (``traj_id`` = session id); the
        continuations are LLM rollouts from the recorded env snapshots, the budget and the timeout this worker's."""
        uid = kwargs.get("uid")
        # the group's pair draw is reproducible within a run; across runs too under rollout.full_determinism
        first = episodes[min(episodes)].result.seed_key
        judge = select_judge(
            self.prover,
            seed=zlib.crc32(str(uid if first is None else first.rsplit("|", 1)[0]).encode()),
            server_manager=self.server_manager,
            tokenizer=self.tokenizer,
            chat_template_kwargs=self.apply_chat_template_kwargs,
            # the policy judge's prompt must fit the replicas' context beside its answer (None: the model's own)
            max_model_len=getattr(self.rollout_config, "max_model_len", None),
        )
        aborts = AbortCount()  # the continuations' requests a verify timeout aborted on the servers
        step = await group_step(
            [episodes[s].trajectory() for s in sorted(episodes)],
            judge,
            self.prover,
            lambda session, turn, i: self._continue_from(
                episodes[session], turn, i, pool, adapter, sampling_params, aborts
            ),
            lambda session: episodes[session].turn_spans(),
            # the cap is job-wide (one count for all agent-loop workers) and per training step, which verl knows
            admit=lambda: budget.take(self.prover.max_segments_per_step, int(kwargs.get("global_steps", -1))),
            timeout_s=self.prover.verify_timeout_s,
            label=uid,
            clock=time.perf_counter,
        )
        step.stats.verify_aborted_requests = aborts.requests
        if self.prover.log_dir:  # the group log, for python -m prover_verl.inspect; its cost: prover/log_seconds
            step.stats.log_seconds = write_group(self.prover, step, episodes, int(kwargs.get("global_steps", -1)), uid)
        group = GroupResult(stats=step.stats)
        for credit in step.credits:
            group.credits.setdefault(credit.row, []).append(credit)
        return group

    def _output(self, episode: Episode, group: GroupResult, verify: bool) -> ProverAgentLoopOutput:
        conv = episode.conversation
        length = min(len(conv.response_mask), self.response_length)
        response_ids = conv.token_ids[conv.prompt_len :][:length]
        mask = conv.response_mask[:length]
        credit = None
        if verify:
            segments = [  # this row's segments, clipped to the response budget
                dataclasses.replace(seg, row=0, token_end=min(seg.token_end, length))
                for seg in group.credits.get(episode.session_id, [])
                if seg.token_start < length
            ]
            credit = credit_tensor(segments, torch.tensor([mask]))[0].tolist()  # group_step kept only credited ones
        own = {"env_steps": episode.result.env_steps, "gen_tokens": episode.result.gen_tokens}
        reported = group.stats if episode.session_id == group.reporter else ProverStats()
        stats = dataclasses.replace(reported, **own).as_dict()
        return ProverAgentLoopOutput(
            prompt_ids=conv.token_ids[: conv.prompt_len],
            response_ids=response_ids,
            response_mask=mask,
            response_logprobs=conv.response_logprobs[:length] if conv.response_logprobs is not None else None,
            reward_score=episode.result.reward,
            num_turns=2 * episode.num_turns + 1,
            metrics={},
            extra_fields={
                # numeric per-episode outcomes; verl's validation reports their means per data_source
                "reward_extra_info": _outcome(episode.result),
                # the policy versions the trajectory was sampled with: verl's TransferQueue tags and staleness
                # metrics read them (as verl's own ToolAgentLoop passes them on)
                "min_global_steps": episode.result.min_global_steps,
                "max_global_steps": episode.result.max_global_steps,
            },
            prover_credit=credit,
            prover_stats=stats,
            gigpo_fields=_gigpo_fields(episode, length) if self.use_gigpo else None,
        )


def state_key(mark: TurnMark) -> int:
    """GiGPO's key of the state a turn acted in: the env snapshot's fingerprint as a non-zero 60-bit integer.

    Exact state identity (:meth:`envs.base.EnvState.fingerprint`), not observation text: two states that render
    alike are not merged, and a state is recognised however it is rendered.
    """
    return int(mark.state.fingerprint()[:15], 16) or 1


def _gigpo_fields(episode: Episode, length: int) -> dict[str, list[int]]:
    """Per response token: turns left in the episode and the key of the state of its turn (0 off turns)."""
    turns_left, keys = turn_fields(episode.turn_spans(), [state_key(m) for m in episode.result.marks], length)
    return {TURNS_FIELD: turns_left, STATE_FIELD: keys}


def _track_policy_version(result: PlayResult, extra_fields: dict[str, Any]) -> None:
    """Keep the first ``min_global_steps`` and the latest ``max_global_steps`` that the server reported."""
    if result.min_global_steps is None:
        result.min_global_steps = extra_fields.get("min_global_steps")
    latest = extra_fields.get("max_global_steps")
    if latest is not None:
        result.max_global_steps = latest


def _stale(continuation: PlayResult, trajectory: PlayResult) -> bool:
    """Whether a continuation saw other weights than its trajectory (by the policy versions the servers report).

    ProVer's estimate is of the *current* policy: in sync mode every generation of a step shares one version.
    """
    version = trajectory.max_global_steps
    if version is None:  # a server that reports no version: nothing to compare
        return False
    return {continuation.min_global_steps, continuation.max_global_steps} != {version}


def _outcome(result: PlayResult) -> dict[str, float]:
    """The episode's success and the env's own numeric scores (EM, F1, ...) of its last step."""
    outcome = {"won": float(result.won), "env_steps": float(result.env_steps)}
    for key, value in (result.final_info or {}).items():
        if key not in outcome and isinstance(value, int | float) and not isinstance(value, bool):
            outcome[key] = float(value)
    return outcome
