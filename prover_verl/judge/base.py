"""What a judge sees (a group's trajectories) and what it returns (one segment proposal, or none)."""

from __future__ import annotations

import abc
import dataclasses
import random
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class Trajectory:
    """One finished episode of a rollout group, as turns.

    Attributes:
        traj_id: Position of the trajectory in its group.
        task: The task instruction.
        observations: ``observations[t]`` is what the agent saw before its action of turn ``t``.
        actions: ``actions[t]`` is the agent's action text of turn ``t``.
        success: Whether the episode succeeded.
    """

    traj_id: int
    task: str
    observations: tuple[str, ...]
    actions: tuple[str, ...]
    success: bool

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
    async def propose(self, group: Sequence[Trajectory]) -> tuple[Proposal | None, str]:
        """Propose one segment for ``group``.

        Returns:
            ``(proposal, status)``: the proposal, or None with a status saying why there is none
            (``"no_pair"``, ``"malformed"``, ``"out_of_range"``, ``"empty"``, ``"too_long"``,
            ``"error"``); ``"ok"`` otherwise.
        """


class PairJudge(Judge):
    """A judge without an LLM that draws one success/failure pair of the group and the side to propose in.

    Args:
        segment_side: ``"success"`` or ``"failure"`` (the side of the pair the segment lies in), or ``"any"``
            (drawn per group).
        seed: Seed of the judge's own random draws.
    """

    def __init__(self, segment_side: str = "success", seed: int = 0):
        if segment_side not in ("success", "failure", "any"):
            raise ValueError(f"segment_side must be success, failure or any, got {segment_side!r}")
        self.segment_side = segment_side
        self.rng = random.Random(seed)

    def draw(self, group: Sequence[Trajectory]) -> tuple[Trajectory, Trajectory, str] | None:
        """``(success, failure, side)`` drawn from ``group``, or None if it lacks a success or a failure."""
        pair = pick_pair(group, self.rng)
        if pair is None:
            return None
        side = self.segment_side if self.segment_side != "any" else self.rng.choice(["success", "failure"])
        return pair[0], pair[1], side
