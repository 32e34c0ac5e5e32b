"""Where a segment is verified: the fork points around it, and what is known without sampling."""

from __future__ import annotations

import dataclasses

from prover_verl.core import ForkOutcome
from prover_verl.judge.base import Proposal


@dataclasses.dataclass(frozen=True)
class ForkPoints:
    """Fork points of a segment, as numbers of actions already taken.

    ``before`` = ``start_turn`` (the state the segment's first action was taken in); ``after`` =
    ``end_turn + 1`` (the state its last action led to). ``after_is_terminal``: the segment ends the episode,
    so the outcome after it is the trajectory's own, known without sampling.
    """

    before: int
    after: int
    after_is_terminal: bool


def fork_points(proposal: Proposal, num_turns: int) -> ForkPoints:
    """Return the fork points of ``proposal`` in a trajectory of ``num_turns`` turns."""
    if not 0 <= proposal.start_turn <= proposal.end_turn < num_turns:
        raise ValueError(f"turns {proposal.start_turn}..{proposal.end_turn} outside a {num_turns}-turn trajectory")
    return ForkPoints(proposal.start_turn, proposal.end_turn + 1, proposal.end_turn + 1 == num_turns)


def terminal_outcome(success: bool) -> ForkOutcome:
    """The outcome after a segment that ends the episode: its own result, with no sampling uncertainty."""
    return ForkOutcome(int(success), 1)
