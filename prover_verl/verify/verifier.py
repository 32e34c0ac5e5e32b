"""Fork-and-continue verification: K continuations from the state before and after a proposed segment."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable

from prover_verl.core import ForkOutcome, estimate_stderr
from prover_verl.judge.base import Proposal
from prover_verl.verify.forks import fork_points, terminal_outcome

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Continuation:
    """One continuation's outcome and cost.

    Attributes:
        won: It ended in success.
        env_steps: Environment steps it took.
        gen_tokens: Tokens it generated.
        cached_prefix_tokens: Prompt tokens of its first turn the server served from its prefix cache (as reported).
        stale: Some of its turns came from other weights than the trajectory it continues (the policy changed).
    """

    won: bool
    env_steps: int
    gen_tokens: int
    cached_prefix_tokens: int = 0
    stale: bool = False


# (fork point as number of actions taken, continuation index) -> the continuation run to the end
ContinueFn = Callable[[int, int], Awaitable[Continuation]]


@dataclasses.dataclass(frozen=True)
class Verification:
    """The verified outcomes around a segment and what verifying it cost.

    Attributes:
        before: Outcomes of the continuations from the state before the segment.
        after: Outcomes from the state after it (the trajectory's own outcome if the segment ends the episode).
        env_steps: Environment steps all continuations took.
        gen_tokens: Tokens all continuations generated.
        failed: Continuations that raised and were left out of the rates.
        cached_prefix_tokens: Prompt tokens of all continuations' first turns the servers served from cache.
        stale: Continuations sampled (in part) with other weights than the trajectory's.
        before_runs: Each continuation's outcome from the state before, in index order (None: it raised).
        after_runs: The same after (empty when the segment ends the episode: nothing was sampled).
    """

    before: ForkOutcome
    after: ForkOutcome
    env_steps: int
    gen_tokens: int
    failed: int
    cached_prefix_tokens: int = 0
    stale: int = 0
    before_runs: tuple[bool | None, ...] = ()
    after_runs: tuple[bool | None, ...] = ()

    @property
    def estimate(self) -> float:
        """``success_rate(after) - success_rate(before)``."""
        return self.after.rate - self.before.rate

    @property
    def stderr(self) -> float:
        """Standard error of :attr:`estimate`."""
        return estimate_stderr(self.before, self.after)


class VerificationError(RuntimeError):
    """Every continuation from a fork point failed, so no rate could be measured."""


async def verify_segment(
    proposal: Proposal, num_turns: int, success: bool, k: int, continue_from: ContinueFn
) -> Verification:
    """Measure a segment's advantage with ``k`` continuations from each of its fork points.

    All continuations run concurrently. One that raises is logged, counted in ``failed`` and left out; if all
    of a fork point's continuations fail, :class:`VerificationError` is raised.

    Args:
        proposal: The segment (turns of the trajectory that ``continue_from`` forks).
        num_turns: Turns in that trajectory.
        success: That trajectory's outcome (used when the segment ends the episode).
        k: Continuations per fork point.
        continue_from: Runs one continuation from a fork point to the end of the episode.
    """
    points = fork_points(proposal, num_turns)
    sampled = [points.before] + ([] if points.after_is_terminal else [points.after])
    sample = await _sample(sampled, k, continue_from)
    rates = sample.rates
    after = terminal_outcome(success) if points.after_is_terminal else rates[points.after]
    after_runs = () if points.after_is_terminal else sample.runs[points.after]
    return Verification(
        rates[points.before], after, *sample.cost, before_runs=sample.runs[points.before], after_runs=after_runs
    )


async def verify_turns(num_turns: int, success: bool, k: int, continue_from: ContinueFn) -> list[Verification]:
    """Verify every turn of a trajectory on its own (the exhaustive ablation): ``k`` continuations from each of
    its ``num_turns`` fork points, each sampled once; turn ``t``'s estimate is ``rate(t + 1) - rate(t)``.

    The cost of all continuations is reported on the first turn's :class:`Verification` (0 on the others), so
    summing over turns counts it once.
    """
    sample = await _sample(list(range(num_turns)), k, continue_from)
    rates, runs, cost = sample.rates, sample.runs, sample.cost
    rates[num_turns], runs[num_turns] = terminal_outcome(success), ()
    return [
        Verification(
            rates[t], rates[t + 1], *(cost if t == 0 else (0,) * len(cost)), before_runs=runs[t], after_runs=runs[t + 1]
        )
        for t in range(num_turns)
    ]


@dataclasses.dataclass
class _Sample:
    """The continuations from a set of fork points: rate and per-continuation outcomes per point, and their cost as
    Verification's ``(env_steps, gen_tokens, failed, cached_prefix_tokens, stale)``."""

    rates: dict[int, ForkOutcome]
    runs: dict[int, tuple[bool | None, ...]]
    cost: tuple[int, ...]


async def _sample(points: list[int], k: int, continue_from: ContinueFn) -> _Sample:
    """``k`` concurrent continuations from each fork point."""
    starts = [p for p in points for _ in range(k)]
    results = await asyncio.gather(*(continue_from(p, i % k) for i, p in enumerate(starts)), return_exceptions=True)
    outcomes: dict[int, list[Continuation | None]] = {p: [] for p in points}
    for point, result in zip(starts, results, strict=True):
        if isinstance(result, BaseException):
            if not isinstance(result, Exception):
                raise result  # cancellation and interpreter exits are not continuation failures
            logger.warning("continuation from turn %d failed: %r", point, result)
            result = None
        outcomes[point].append(result)
    rates = {}
    for point, runs in outcomes.items():
        done = [r for r in runs if r is not None]
        if not done:
            raise VerificationError(f"all {k} continuations from turn {point} failed")
        rates[point] = ForkOutcome(sum(r.won for r in done), len(done))
    done = [r for runs in outcomes.values() for r in runs if r is not None]
    cost = (
        sum(r.env_steps for r in done),
        sum(r.gen_tokens for r in done),
        len(starts) - len(done),
        sum(r.cached_prefix_tokens for r in done),
        sum(r.stale for r in done),
    )
    runs = {point: tuple(None if r is None else r.won for r in results) for point, results in outcomes.items()}
    return _Sample(rates, runs, cost)
