"""One ProVer group step, engine-agnostic: pair filter, judge, proposal check, verification, segment credit.

verl's agent loop (:mod:`prover_verl.agent.env_agent_loop`) and the CPU demo (:mod:`prover_verl.demo.methods`)
both call :func:`group_step`; they differ only in how a continuation is played (an LLM rollout from an env
snapshot, or a batched KeyDoor simulation) and in what they do with the credits (a per-token batch field, or
advantages merged in place).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from prover_verl.config import ProverConfig
from prover_verl.core import FixedCredit, SegmentCredit, segment_token_span
from prover_verl.judge.base import Judge, Judgement, JudgeStatus, Proposal, Trajectory, check_proposal
from prover_verl.judge.random_segment import RandomSegmentJudge
from prover_verl.judge.registry import make_judge
from prover_verl.metrics import ProverStats
from prover_verl.verify.verifier import Continuation, Verification, VerificationError, verify_segment, verify_turns

logger = logging.getLogger(__name__)

# (traj_id, fork point as number of actions taken, continuation index) -> that continuation run to the end
ForkFn = Callable[[int, int, int], Awaitable[Continuation]]
# traj_id -> [start, end) response-token span of each of its turns
SpansFn = Callable[[int], Sequence[tuple[int, int]]]


@dataclasses.dataclass(frozen=True)
class VerifiedSegment:
    """One verified segment (turns ``start_turn..end_turn`` of the proposal's trajectory) and its credit, if any."""

    start_turn: int
    end_turn: int
    verification: Verification
    credit: SegmentCredit | None = None


@dataclasses.dataclass
class GroupStep:
    """What one group step produced: the credits and counters the trainer uses, and the record of how they came
    about (what the judge was shown and said, each verification), which the group log writes.

    Attributes:
        credits: The credited segments (estimate above ``min_estimate``), ``row`` = the trajectory's ``traj_id``;
            the caller maps it to its batch row.
        stats: The step's counters (``groups`` = 1).
        proposal: The proposal that was verified or credited (None if there was none, or it failed).
        judgement: The judge's answer as it gave it (None: the judge was not asked).
        rejected: Why the judge's proposal was refused (the side or turn check), else None.
        verified: The segments whose verification finished, credited or not, in turn order.
    """

    credits: list[SegmentCredit | FixedCredit] = dataclasses.field(default_factory=list)
    stats: ProverStats = dataclasses.field(default_factory=lambda: ProverStats(groups=1))
    proposal: Proposal | None = None
    judgement: Judgement | None = None
    rejected: str | None = None
    verified: list[VerifiedSegment] = dataclasses.field(default_factory=list)


def select_judge(config: ProverConfig, seed: int | None = None, **context: Any) -> Judge:
    """The judge ``config`` asks for: the random-segment proposer under the ``random_segment`` and ``every_turn``
    ablations (no judge), else the registered ``judge.type`` (``context``: what the engine offers its factory)."""
    if config.ablation in ("random_segment", "every_turn"):
        return RandomSegmentJudge(config.segment_side, seed=seed or 0)
    return make_judge(config.judge, config.segment_side, seed=seed, **context)


async def group_step(
    trajectories: Sequence[Trajectory],
    judge: Judge,
    config: ProverConfig,
    continue_from: ForkFn,
    turn_spans: SpansFn,
    admit: Callable[[], bool | Awaitable[bool]] | None = None,
    timeout_s: float | None = None,
    label: Any = None,
    clock: Callable[[], float] | None = None,
) -> GroupStep:
    """Propose, verify and credit one complete rollout group.

    A group with only successes or only failures is skipped (``judge_no_pair``). Otherwise the judge proposes a
    segment, which must lie in a trajectory on ``config.segment_side`` (else ``judge_out_of_range``); it is then
    verified and credited as ``config.ablation`` says: ``none`` and ``random_segment`` verify the proposed segment
    with ``k`` continuations from each fork point around it; ``every_turn`` verifies every turn of that trajectory
    on its own; ``judge_only`` credits the proposal with ``judge_only_estimate``, unverified. Only estimates above
    ``config.min_estimate`` are credited (here, and nowhere else).

    Args:
        trajectories: The group, as the judge sees it (``traj_id`` names a trajectory for the other arguments).
        judge: Proposes the segment (see :func:`select_judge`).
        config: ``k``, ``min_estimate``, ``segment_side``, ``ablation``, ``judge_only_estimate``.
        continue_from: Plays one continuation of a trajectory from a fork point to the end.
        turn_spans: The response-token spans of a trajectory's turns (where its credit goes).
        admit: Engine budget, asked once the group has a pair (it may be a coroutine function); False skips the
            group (``skipped_budget``).
        timeout_s: Wall-clock budget of the verification (``verify_timeout``); None: no limit.
        label: Names the group in log lines.
        clock: Seconds counter (e.g. ``time.perf_counter``) timing the judge and the verification into
            ``judge_seconds``/``verify_seconds``; None leaves them 0 (the demo's runs stay reproducible).
    """
    clock = clock or (lambda: 0.0)
    step = GroupStep()
    stats = step.stats
    if all(t.success for t in trajectories) or not any(t.success for t in trajectories):
        stats.count_judge(JudgeStatus.NO_PAIR)
        return step
    stats.pairs = 1
    admitted = True if admit is None else admit()
    if inspect.isawaitable(admitted):
        admitted = await admitted
    if not admitted:
        stats.skipped_budget = 1
        return step
    started = clock()
    step.judgement = await judge.judgement(trajectories)
    stats.judge_seconds = clock() - started
    stats.judge_tokens = step.judgement.tokens or 0
    proposal, status = step.judgement.proposal, step.judgement.status
    if proposal is not None:
        allowed = [t.traj_id for t in trajectories if config.segment_side.admits(t.success)]
        step.rejected = check_proposal(proposal, trajectories, allowed)
        if step.rejected is not None:
            logger.warning("group %s: judge proposal rejected: %s", label, step.rejected)
            proposal, status = None, JudgeStatus.OUT_OF_RANGE
    stats.count_judge(status)
    if proposal is None:
        return step
    chosen = next(t for t in trajectories if t.traj_id == proposal.traj_id)
    num_turns, success = chosen.num_turns, chosen.success
    if chosen.pivot_turn is not None:  # the env knows which turn decided it (keydoor): score the judge
        stats.pivot_known = 1
        stats.pivot_hit = int(proposal.start_turn <= chosen.pivot_turn <= proposal.end_turn)
    spans = turn_spans(proposal.traj_id)
    if config.ablation == "judge_only":
        start, end = segment_token_span(spans, proposal.start_turn, proposal.end_turn)
        step.credits.append(FixedCredit(proposal.traj_id, start, end, config.judge_only_estimate))
        stats.positive, stats.credit_sum = 1, config.judge_only_estimate
        step.proposal = proposal
        return step

    def play(turn: int, index: int) -> Awaitable[Continuation]:
        return continue_from(proposal.traj_id, turn, index)

    if config.ablation == "every_turn":
        turns = [(t, t) for t in range(num_turns)]
        run = verify_turns(num_turns, success, config.k, play)
    else:
        turns = [(proposal.start_turn, proposal.end_turn)]
        run = verify_segment(proposal, num_turns, success, config.k, play)
    started = clock()
    try:
        result = await (run if timeout_s is None else asyncio.wait_for(run, timeout=timeout_s))
    except TimeoutError:
        stats.verify_timeout = 1
        return step
    except VerificationError as err:
        logger.warning("group %s: %s", label, err)
        stats.verify_failed = 1
        return step
    finally:
        stats.verify_seconds = clock() - started
    verifications: list[Verification] = result if isinstance(result, list) else [result]
    for (first, last), verification in zip(turns, verifications, strict=True):
        stats.verified += 1  # per verified segment, as the rates read it
        stats.estimate_sum += verification.estimate
        stats.verify_env_steps += verification.env_steps
        stats.verify_gen_tokens += verification.gen_tokens
        stats.verify_cached_prefix_tokens += verification.cached_prefix_tokens
        stats.verify_stale += verification.stale
        credit = None
        if verification.estimate > config.min_estimate:
            stats.positive += 1
            stats.credit_sum += verification.estimate
            start, end = segment_token_span(spans, first, last)
            credit = SegmentCredit(proposal.traj_id, start, end, verification.before, verification.after)
            step.credits.append(credit)
        step.verified.append(VerifiedSegment(first, last, verification, credit))
        logger.info(
            "group %s: turns %d-%d of trajectory %d, success %.2f -> %.2f",
            label,
            first,
            last,
            proposal.traj_id,
            verification.before.rate,
            verification.after.rate,
        )
    step.proposal = proposal
    return step
