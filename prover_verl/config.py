"""ProVer's settings, read from ``algorithm.prover`` of a verl config and checked before anything runs."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from prover_verl.judge.base import SegmentSide
from prover_verl.judge.registry import judge_types

PREFIX = "algorithm.prover"
SEGMENT_SIDES = tuple(side.value for side in SegmentSide)
# none: ProVer; judge_only: the judge's segment credited unverified with judge_only_estimate; random_segment: a
# random segment, verified; every_turn: every turn of the pair's trajectory verified (exhaustive)
ABLATIONS = ("none", "judge_only", "random_segment", "every_turn")
# oneshot: the whole pair in one prompt; agentic: an outline and tools to read the turns (judge.type=openai only)
JUDGE_MODES = ("oneshot", "agentic")


@dataclasses.dataclass(frozen=True)
class JudgeConfig:
    """The agentic judge that proposes segments (``algorithm.prover.judge``).

    Attributes:
        type: A registered judge (:mod:`prover_verl.judge.registry`): ``policy`` (the policy's own rollout
            server), ``openai`` (any OpenAI-compatible endpoint at ``url``), ``heuristic`` (first turn where a
            success's and a failure's actions differ; no LLM) or ``divergence`` (the turn after which their
            observations differ for good; no LLM).
        url: Base URL of the OpenAI-compatible endpoint (``type=openai``), e.g. ``http://host:8000/v1``.
        model: Model name sent to that endpoint.
        api_key_env: Name of the environment variable holding its API key (the key itself never sits in config);
            it must be set in every process that calls the judge. None: the endpoint needs no key.
        temperature: Judge sampling temperature.
        max_tokens: Longest judge answer.
        max_obs_chars: Each observation is cut to this many characters in the judge prompt.
        max_prompt_chars: Budget of the whole judge prompt; observations are cut shorter until it fits, and a pair
            that cannot fit is skipped (status ``too_long``). Keep it under the judge model's context: with the
            policy as judge, about 3 characters per token of ``prompt_length + response_length - max_tokens``.
            None: no budget.
        timeout_s: Per-request timeout (one attempt) of an ``openai`` endpoint. The ``policy`` judge has none: it
            shares the rollout replicas, where its request waits behind the step's own rollouts and
            continuations, so a wall-clock limit would count that queue, not an outage (and could not stop the
            request at the server); its answer is bounded by ``max_tokens``.
        max_retries: Retries of a failed ``openai`` request (the OpenAI client's, after a backoff of 0.5, 1, 2, ...
            up to 8 s, or the server's ``Retry-After``); a deadline of ``(max_retries + 1) * timeout_s``, those
            backoffs and 1 s bounds the whole call, however slowly the server answers.
        accuracy: ``type=noisy`` only (an env that knows its pivot, e.g. ``keydoor``): the probability that it
            proposes the true pivotal turn, else a uniformly random turn.
        mode: ``oneshot`` (the pair in one prompt, cut to ``max_prompt_chars``) or ``agentic`` (``type=openai``
            only: the judge is shown the pair's outline and reads turns through tool calls of the chat API,
            :mod:`prover_verl.judge.agentic`).
        max_calls: ``mode=agentic`` only: the most replies the judge model gives per group, tool calls and the
            answer together; a judge still calling tools at its last reply has no proposal (``out_of_budget``).
        token_budget: ``mode=agentic`` only: the most prompt and completion tokens (as the endpoint reports them)
            the judge spends per group; once spent, it is asked nothing more (``out_of_budget``), so a group can
            pass the budget by its last reply.
    """

    type: str = "policy"
    url: str | None = None
    model: str | None = None
    api_key_env: str | None = "PROVER_JUDGE_API_KEY"
    temperature: float = 0.0
    max_tokens: int = 512
    max_obs_chars: int = 600
    max_prompt_chars: int | None = 16000
    timeout_s: float = 120.0
    max_retries: int = 1
    accuracy: float = 1.0
    mode: str = "oneshot"
    max_calls: int = 8
    token_budget: int = 32000


@dataclasses.dataclass(frozen=True)
class ProverConfig:
    """ProVer's knobs (``algorithm.prover``); see docs/method.md for why each default is what it is.

    Attributes:
        k: Continuations sampled from each fork point (before and after the segment).
        coef: Scale of the verified credit added to the GRPO advantage.
        min_estimate: Only estimates strictly above it are credited (0: every positive estimate).
        segment_side: Which trajectory the judge's segment must lie in (a
            :class:`~prover_verl.judge.base.SegmentSide`; a plain string is converted): the ``success`` of the pair
            (credit the decision that made it succeed), the ``failure``, or ``any``.
        max_segments_per_step: Most groups verified per training step, counted over the whole job (all of
            verl's ``rollout.agent.num_workers`` agent-loop workers together; -1: no limit).
        max_continuation_turns: Most turns one continuation may take (None: up to the env's own limit).
        verify_timeout_s: Wall-clock budget of one group's verification; past it the group keeps plain GRPO
            and is counted in the metrics.
        ablation: ``none`` (ProVer), or one of the ablations (docs/method.md): ``judge_only`` credits the judge's
            segment without verifying it, ``random_segment`` verifies a random segment instead of the judge's,
            ``every_turn`` verifies every turn of the pair's trajectory (on ``segment_side``).
        judge_only_estimate: The fixed estimate a ``judge_only`` segment is credited with, in (0, 1].
        train_on_continuations: Also train on the verifier's continuations: each fork point's ``k`` continuations
            form a group whose policy tokens after the fork get outcome minus group mean
            (:mod:`prover_verl.core.continuations`); stale ones are never trained. Implemented in the CPU demo;
            verl's agent loop refuses it until it returns the continuations as outputs.
        judge: The judge's settings.
        log_dir: If set, every group ProVer looks at is logged there as one JSON line (the pair shown to the judge,
            its answer, the continuations' outcomes, the credit: :mod:`prover_verl.eval.group_log`), for
            ``python -m prover_verl.inspect``; an absolute path. None: no log.
        log_max_chars: Each observation and action of a logged trajectory is cut to this many characters.
        log_file_mb: A log file is closed and the next one started once it would pass this size (MB).
    """

    k: int = 2
    coef: float = 2.0
    min_estimate: float = 0.0
    segment_side: SegmentSide = SegmentSide.SUCCESS
    max_segments_per_step: int = -1
    max_continuation_turns: int | None = None
    verify_timeout_s: float = 900.0
    ablation: str = "none"
    judge_only_estimate: float = 1.0
    train_on_continuations: bool = False
    judge: JudgeConfig = dataclasses.field(default_factory=JudgeConfig)
    log_dir: str | None = None
    log_max_chars: int = 1000
    log_file_mb: float = 64.0

    def __post_init__(self):
        _check(_is_int(self.k) and self.k >= 1, "k", self.k, "an integer >= 1")
        _check(_is_number(self.coef) and self.coef >= 0, "coef", self.coef, "a number >= 0")
        _check(
            _is_number(self.min_estimate) and 0 <= self.min_estimate < 1,
            "min_estimate",
            self.min_estimate,
            "a number in [0, 1)",
        )
        _check(self.segment_side in SEGMENT_SIDES, "segment_side", self.segment_side, f"one of {SEGMENT_SIDES}")
        object.__setattr__(self, "segment_side", SegmentSide(self.segment_side))  # frozen: set once, as the enum
        _check(
            isinstance(self.max_segments_per_step, int)
            and (self.max_segments_per_step == -1 or self.max_segments_per_step >= 1),
            "max_segments_per_step",
            self.max_segments_per_step,
            "-1 or an integer >= 1",
        )
        _check(
            self.max_continuation_turns is None
            or (_is_int(self.max_continuation_turns) and self.max_continuation_turns >= 1),
            "max_continuation_turns",
            self.max_continuation_turns,
            "null or an integer >= 1",
        )
        _check(
            _is_number(self.verify_timeout_s) and self.verify_timeout_s > 0,
            "verify_timeout_s",
            self.verify_timeout_s,
            "a number > 0",
        )
        _check(self.ablation in ABLATIONS, "ablation", self.ablation, f"one of {ABLATIONS}")
        _check(
            _is_number(self.judge_only_estimate) and 0 < self.judge_only_estimate <= 1,
            "judge_only_estimate",
            self.judge_only_estimate,
            "a number in (0, 1]",
        )
        _check(
            self.ablation == "judge_only" or self.judge_only_estimate == 1.0,
            "judge_only_estimate",
            self.judge_only_estimate,
            "left at 1.0 unless ablation=judge_only (it is used by no other mode)",
        )
        _check(
            self.judge_only_estimate > self.min_estimate,
            "judge_only_estimate",
            self.judge_only_estimate,
            f"above min_estimate={self.min_estimate} (else nothing is ever credited)",
        )
        _check(
            isinstance(self.train_on_continuations, bool),
            "train_on_continuations",
            self.train_on_continuations,
            "true or false",
        )
        _check(
            self.log_dir is None or (isinstance(self.log_dir, str) and os.path.isabs(self.log_dir)),
            "log_dir",
            self.log_dir,
            "null or an absolute path (the agent-loop workers that write it need not share the driver's folder)",
        )
        _check(
            _is_int(self.log_max_chars) and self.log_max_chars >= 16,
            "log_max_chars",
            self.log_max_chars,
            "an integer >= 16",
        )
        _check(_is_number(self.log_file_mb) and self.log_file_mb > 0, "log_file_mb", self.log_file_mb, "a number > 0")
        j = self.judge
        _check(j.type in judge_types(), "judge.type", j.type, f"one of the registered judges {judge_types()}")
        _check(j.type != "openai" or bool(j.url), "judge.url", j.url, "set when judge.type=openai")
        _check(j.type != "openai" or bool(j.model), "judge.model", j.model, "set when judge.type=openai")
        _check(_is_int(j.max_retries) and j.max_retries >= 0, "judge.max_retries", j.max_retries, "an integer >= 0")
        _check(_is_number(j.accuracy) and 0 <= j.accuracy <= 1, "judge.accuracy", j.accuracy, "a number in [0, 1]")
        _check(_is_number(j.temperature) and j.temperature >= 0, "judge.temperature", j.temperature, "a number >= 0")
        _check(_is_int(j.max_tokens) and j.max_tokens >= 16, "judge.max_tokens", j.max_tokens, "an integer >= 16")
        _check(
            _is_int(j.max_obs_chars) and j.max_obs_chars >= 1,
            "judge.max_obs_chars",
            j.max_obs_chars,
            "an integer >= 1",
        )
        _check(
            j.max_prompt_chars is None or (_is_int(j.max_prompt_chars) and j.max_prompt_chars >= 1000),
            "judge.max_prompt_chars",
            j.max_prompt_chars,
            "null or an integer >= 1000",
        )
        _check(_is_number(j.timeout_s) and j.timeout_s > 0, "judge.timeout_s", j.timeout_s, "a number > 0")
        _check(j.mode in JUDGE_MODES, "judge.mode", j.mode, f"one of {JUDGE_MODES}")
        _check(
            j.mode != "agentic" or j.type == "openai",
            "judge.mode",
            j.mode,
            "oneshot unless judge.type=openai (the agentic judge needs the chat API's tool calls)",
        )
        _check(_is_int(j.max_calls) and j.max_calls >= 1, "judge.max_calls", j.max_calls, "an integer >= 1")
        _check(
            _is_int(j.token_budget) and j.token_budget >= 1000,
            "judge.token_budget",
            j.token_budget,
            "an integer >= 1000",
        )
        defaults = JudgeConfig()
        for key in ("max_calls", "token_budget"):  # set for a one-shot judge, they would silently do nothing
            _check(
                j.mode == "agentic" or getattr(j, key) == getattr(defaults, key),
                f"judge.{key}",
                getattr(j, key),
                f"left at {getattr(defaults, key)} unless judge.mode=agentic (no other mode uses it)",
            )

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> ProverConfig:
        """Build from the ``algorithm.prover`` mapping; unknown keys fail naming the key."""
        values = _to_dict(values)
        judge = _to_dict(values.pop("judge", None))
        _reject_unknown(values, cls, PREFIX)
        _reject_unknown(judge, JudgeConfig, f"{PREFIX}.judge")
        return cls(**values, judge=JudgeConfig(**judge))

    @classmethod
    def from_algorithm_config(cls, algorithm: Any) -> ProverConfig:
        """Build from verl's ``algorithm`` config (a DictConfig, an ``AlgoConfig`` or a dict; may be None)."""
        if algorithm is None:
            return cls()
        prover = algorithm.get("prover") if hasattr(algorithm, "get") else getattr(algorithm, "prover", None)
        return cls.from_mapping(prover)


@dataclasses.dataclass(frozen=True)
class GiGPOConfig:
    """GiGPO's knobs (``algorithm.gigpo``); defaults are those of the GiGPO paper's released scripts.

    Attributes:
        gamma: Discount of the step-level returns, in (0, 1] (verl-agent: ``algorithm.gamma=0.95``).
        step_weight: ``omega``, weight of the step-level advantage, >= 0 (verl-agent: ``step_advantage_w=1.0``).
        norm_by_std: Std normalisation at the episode and the step level (verl-agent's ``mode=mean_std_norm``;
            false: ``mean_norm``).
    """

    gamma: float = 0.95
    step_weight: float = 1.0
    norm_by_std: bool = True

    def __post_init__(self):
        p = "algorithm.gigpo"
        _check(_is_number(self.gamma) and 0 < self.gamma <= 1, "gamma", self.gamma, "a number in (0, 1]", p)
        _check(
            _is_number(self.step_weight) and self.step_weight >= 0, "step_weight", self.step_weight, "a number >= 0", p
        )
        _check(isinstance(self.norm_by_std, bool), "norm_by_std", self.norm_by_std, "true or false", p)

    @classmethod
    def from_algorithm_config(cls, algorithm: Any) -> GiGPOConfig:
        """Build from verl's ``algorithm`` config (``algorithm.gigpo``; may be absent); unknown keys fail."""
        if algorithm is None:
            return cls()
        gigpo = algorithm.get("gigpo") if hasattr(algorithm, "get") else getattr(algorithm, "gigpo", None)
        values = _to_dict(gigpo)
        _reject_unknown(values, cls, "algorithm.gigpo")
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class EnvConfig:
    """The environment the ProVer agent loop plays (top-level ``env`` section of the training config).

    Attributes:
        name: Registered environment (``alfworld``, ``webshop``, ``searchqa``); a data row's
            ``extra_info.env`` overrides it.
        kwargs: Constructor arguments of the environment (data paths, ``max_steps``, ...).
        protocol: The env's named protocol (``envs/<env>/protocol.py``: e.g. Search-QA's ``search_r1``), put into
            ``kwargs`` as ``protocol``; None: ``kwargs``'s own, else the env's default.
        pool_workers: Ray env-worker processes per node, shared by all agent-loop workers of the node (each loads
            the env's data once); 0 runs the envs in each agent-loop process instead.
        max_turns: Most policy turns per episode.
        max_obs_chars: Observations are cut to this many characters in the prompt.
        call_timeout_s: Timeout of one env call (Ray pool only).
        start_timeout_s: Seconds an env worker may take to start, i.e. import the env and load its data (Ray
            pool only); a worker that does not start in time fails the pool.
        eval_log_dir: If set, every validation episode (``extra_info.verify: false``) is logged there as one
            JSON line, for ``python -m prover_verl.eval.tables``.
    """

    name: str = "alfworld"
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    protocol: str | None = None
    pool_workers: int = 0
    max_turns: int = 50
    max_obs_chars: int = 2000
    call_timeout_s: float = 120.0
    start_timeout_s: float = 300.0
    eval_log_dir: str | None = None

    def __post_init__(self):
        p = "env"
        _check(isinstance(self.name, str) and bool(self.name), "name", self.name, "an environment name", p)
        _check(isinstance(self.kwargs, dict), "kwargs", self.kwargs, "a mapping", p)
        _check(self.protocol is None or isinstance(self.protocol, str), "protocol", self.protocol, "a name", p)
        if self.protocol is not None:
            if self.kwargs.get("protocol", self.protocol) != self.protocol:
                raise ValueError(
                    f"env.protocol={self.protocol!r} and env.kwargs.protocol={self.kwargs['protocol']!r} disagree; "
                    "give one"
                )
            self.kwargs["protocol"] = self.protocol  # every consumer (pools, adapters, data) reads the kwargs
        _check(
            _is_int(self.pool_workers) and self.pool_workers >= 0,
            "pool_workers",
            self.pool_workers,
            "an integer >= 0",
            p,
        )
        _check(_is_int(self.max_turns) and self.max_turns >= 1, "max_turns", self.max_turns, "an integer >= 1", p)
        _check(
            _is_int(self.max_obs_chars) and self.max_obs_chars >= 1,
            "max_obs_chars",
            self.max_obs_chars,
            "an integer >= 1",
            p,
        )
        _check(
            _is_number(self.call_timeout_s) and self.call_timeout_s > 0,
            "call_timeout_s",
            self.call_timeout_s,
            "a number > 0",
            p,
        )
        _check(
            _is_number(self.start_timeout_s) and self.start_timeout_s > 0,
            "start_timeout_s",
            self.start_timeout_s,
            "a number > 0",
            p,
        )

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> EnvConfig:
        """Build from the ``env`` mapping; unknown keys fail naming the key, and an unregistered ``env.name``
        fails naming the registered envs.

        ``kwargs`` may also be a JSON object in a string (the recipes pass ``ENV_KWARGS`` so, the same text that
        ``python -m prover_verl.data --env-kwargs`` takes). Environments registered at run time
        (``envs.register_env``) must be registered before, in every process that reads the config.
        """
        values = _to_dict(values)
        _reject_unknown(values, cls, "env")
        if isinstance(values.get("kwargs"), str):
            values["kwargs"] = _json_object(values["kwargs"], "env.kwargs")
        config = cls(**values)
        _check_env_name(config.name)
        return config


def _check_env_name(name: str) -> None:
    # without this a typo passed every config check and failed at the first reset, inside an agent-loop worker,
    # after the model had loaded
    import envs  # here: the config module stays importable without the envs' registry

    if name not in envs.env_names():
        raise ValueError(
            f"env.name='{name}' is not a registered environment; registered: {', '.join(envs.env_names())}"
        )


def _to_dict(values: Any) -> dict[str, Any]:
    if values is None:
        return {}
    if isinstance(values, DictConfig):
        return OmegaConf.to_container(values, resolve=True)
    if isinstance(values, Mapping):
        return dict(values)
    raise TypeError(f"expected a mapping, got {type(values).__name__}: {values!r:.80}")


def _json_object(text: str, key: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as err:
        raise ValueError(f"{key} must be a JSON object, got {text!r}: {err}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{key} must be a JSON object, got {text!r}")
    return value


def _reject_unknown(values: Mapping[str, Any], cls: type, prefix: str) -> None:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(f'{prefix}.{k}' for k in unknown)}; known: {sorted(known)}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check(ok: bool, key: str, value: Any, expected: str, prefix: str = PREFIX) -> None:
    if not ok:
        raise ValueError(f"{prefix}.{key} must be {expected}, got {value!r}")
