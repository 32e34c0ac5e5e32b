"""What a judge sees (a group's trajectories) and what it returns (one segment proposal, or none)."""

from __future__ import annotations

import abc
import dataclasses
import enum
import random
from collections.abc import Sequence


class SegmentSide(enum.StrEnum):
    """Which trajectory of the success/failure pair a proposed segment must lie in (``algorithm.prover.segment_side``).

    A str enum, so configs, JSON and metric names keep the plain values.
    """

    SUCCESS = "success"  # credit the decision that made the success succeed
    FAILURE = "failure"
    ANY = "any"  # drawn per group

    def admits(self, success: bool) -> bool:
        """Whether a trajectory with outcome ``success`` lies on this side."""
        return self is SegmentSide.ANY or success == (self is SegmentSide.SUCCESS)


class JudgeStatus(enum.StrEnum):
    """Why a judge returned what it did; each is counted in the metric ``prover/judge_<value>``."""

    OK = "ok"  # a usable proposal
    NO_PAIR = "no_pair"  # the group lacks a success or a failure
    MALFORMED = "malformed"  # the answer could not be parsed
    OUT_OF_RANGE = "out_of_range"  # the answer names a trajectory or turns it may not
    EMPTY = "empty"  # no segment exists or was named
    TOO_LONG = "too_long"  # the prompt exceeds its budget
    ERROR = "error"  # the request to the judge model failed
    OUT_OF_BUDGET = "out_of_budget"  # the agentic judge spent its calls or tokens without answering


@dataclasses.dataclass(frozen=True)
class Trajectory:
    """One finished episode of a rollout group, as turns.

    Attributes:
        traj_id: Position of the trajectory in its group.
        task: The task instruction.
        observations: ``observations[t]`` is what the agent saw before its action of turn ``t``.
        actions: ``actions[t]`` is the agent's action text of turn ``t``.
        success: Whether the episode succeeded.
        pivot_turn: The turn that decided the episode, where the env knows it (``info["pivot_turn"]``), else None.
    """

    traj_id: int
    task: str
    observations: tuple[str, ...]
    actions: tuple[str, ...]
    success: bool
    pivot_turn: int | None = None

    def __post_init__(self):
        if len(self.observations) != len(self.actions):
            raise ValueError(f"{len(self.observations)} observations for {len(self.actions)} actions")

    @property
    def num_turns(self) -> int:
        """Turns (actions) in the episode."""
        return len(self.actions)


@dataclasses.dataclass(frozen=True)
class Proposal:
    """A segment of turns ``start_turn..end_turn`` (inclusive) of trajectory ``traj_id``, with the judge's reason."""

    traj_id: int
    start_turn: int
    end_turn: int
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class Judgement:
    """A judge's answer for one group together with what it was shown (the group log records it).

    Attributes:
        proposal: The proposed segment, or None.
        status: Why there is (no) proposal.
        shown: ``traj_id`` of the success and of the failure the judge was shown (empty if it does not say).
        labels: Label used in the judge's prompt -> ``traj_id`` (an LLM judge's answer names labels).
        answer: The judge model's raw reply (None: no model was asked).
        tokens: Prompt and completion tokens the judge model spent on the group, as its endpoint reports them
            (None: not reported, or no model was asked).
        tool_calls: The agentic judge's tool calls in order, each ``{"call", "tool", "arguments", "result",
            "error"}`` (``call``: which of its replies made it); empty for a one-shot judge.
    """

    proposal: Proposal | None
    status: JudgeStatus
    shown: tuple[int, ...] = ()
    labels: dict[str, int] = dataclasses.field(default_factory=dict)
    answer: str | None = None
    tokens: int | None = None
    tool_calls: tuple[dict, ...] = ()


def pick_pair(group: Sequence[Trajectory], rng: random.Random) -> tuple[Trajectory, Trajectory] | None:
    """Draw one success and one failure of ``group`` uniformly, or None if the group lacks either."""
    successes = [t for t in group if t.success]
    failures = [t for t in group if not t.success]
    if not successes or not failures:
        return None
    return rng.choice(successes), rng.choice(failures)


def check_proposal(proposal: Proposal, group: Sequence[Trajectory], allowed: Sequence[int]) -> str | None:
    """Return why ``proposal`` is unusable for ``group`` (None if it is usable).

    Args:
        proposal: The judge's proposal.
        group: The rollout group.
        allowed: The ``traj_id`` values the segment may lie in (the pair shown, filtered by the segment side).
    """
    by_id = {t.traj_id: t for t in group}
    if proposal.traj_id not in allowed or proposal.traj_id not in by_id:
        return f"trajectory {proposal.traj_id} is not one of {list(allowed)}"
    turns = by_id[proposal.traj_id].num_turns
    if not 0 <= proposal.start_turn <= proposal.end_turn < turns:
        return f"turns {proposal.start_turn}..{proposal.end_turn} outside 0..{turns - 1}"
    return None


class Judge(abc.ABC):
    """Proposes the segment most likely responsible for a group's divergent outcomes."""

    @abc.abstractmethod
    async def propose(self, group: Sequence[Trajectory]) -> tuple[Proposal | None, JudgeStatus]:
        """Propose one segment for ``group``.

        Returns:
            ``(proposal, status)``: the proposal and :attr:`JudgeStatus.OK`, or None with the status saying why
            there is none.
        """

    async def judgement(self, group: Sequence[Trajectory]) -> Judgement:
        """:meth:`propose`, with what the judge was shown and answered where it knows (judges override this)."""
        return Judgement(*await self.propose(group))


class PairJudge(Judge):
    """A judge without an LLM that draws one success/failure pair of the group and the side to propose in.

    Args:
        segment_side: The side of the pair the segment lies in (:class:`SegmentSide`; ``any``: drawn per group).
        seed: Seed of the judge's own random draws.
    """

    def __init__(self, segment_side: SegmentSide | str = SegmentSide.SUCCESS, seed: int = 0):
        self.segment_side = segment_side_of(segment_side)
        self.rng = random.Random(seed)

    def draw(self, group: Sequence[Trajectory]) -> tuple[Trajectory, Trajectory, SegmentSide] | None:
        """``(success, failure, side)`` drawn from ``group``, or None if it lacks a success or a failure."""
        pair = pick_pair(group, self.rng)
        if pair is None:
            return None
        return pair[0], pair[1], draw_side(self.segment_side, self.rng)

    @abc.abstractmethod
    def choose(self, success: Trajectory, failure: Trajectory, side: SegmentSide) -> Proposal | None:
        """The segment for the drawn pair, in the trajectory on ``side`` (None: there is none)."""

    async def propose(self, group: Sequence[Trajectory]) -> tuple[Proposal | None, JudgeStatus]:
        judgement = await self.judgement(group)
        return judgement.proposal, judgement.status

    async def judgement(self, group: Sequence[Trajectory]) -> Judgement:
        drawn = self.draw(group)
        if drawn is None:
            return Judgement(None, JudgeStatus.NO_PAIR)
        success, failure, side = drawn
        proposal = self.choose(success, failure, side)
        status = JudgeStatus.OK if proposal is not None else JudgeStatus.EMPTY
        return Judgement(proposal, status, shown=(success.traj_id, failure.traj_id))


def segment_side_of(value: SegmentSide | str) -> SegmentSide:
    """``value`` as a :class:`SegmentSide`; a ValueError naming the allowed values otherwise."""
    try:
        return SegmentSide(value)
    except ValueError:
        raise ValueError(f"segment_side must be one of {[s.value for s in SegmentSide]}, got {value!r}") from None


def side_trajectory(success: Trajectory, failure: Trajectory, side: SegmentSide) -> Trajectory:
    """The trajectory of the pair on ``side`` (a drawn side: success or failure, never ``any``).

    Raises:
        ValueError: ``side`` is neither the success nor the failure.
    """
    if side not in (SegmentSide.SUCCESS, SegmentSide.FAILURE):
        raise ValueError(f"side must be 'success' or 'failure', got {side!r}")
    return success if side == SegmentSide.SUCCESS else failure


def draw_side(side: SegmentSide, rng: random.Random) -> SegmentSide:
    """``side`` itself, or for :attr:`SegmentSide.ANY` the success or the failure, drawn with ``rng``."""
    return side if side is not SegmentSide.ANY else rng.choice([SegmentSide.SUCCESS, SegmentSide.FAILURE])
