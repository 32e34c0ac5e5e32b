"""A judge without an LLM: the turn after which a success's and a failure's observations never match again.

The heuristic judge (first turn where the actions differ) points at the first harmless difference: two episodes
of one task differ early in filler turns (``walk on`` vs ``look around``) long before the decision that split their
outcomes. A decision that matters changes the state for good, and the state shows in every later observation
(what the agent holds, which page it is on, what it retrieved), while a harmless difference shows once and is gone.
So this judge proposes the action just before the observations start to differ at every remaining turn. It reads
only what any judge is shown (the observation and action texts), no env internals.
"""

from __future__ import annotations

from prover_verl.judge.base import PairJudge, Proposal, SegmentSide, Trajectory, side_trajectory
from prover_verl.judge.registry import register_judge


def lasting_divergence(
    success: Trajectory, failure: Trajectory, side: SegmentSide | str = SegmentSide.SUCCESS
) -> Proposal | None:
    """Propose the turn whose action precedes the lasting divergence of the pair's observations.

    Over the turns both trajectories have (``shared`` of them), let ``d`` be the first turn from which every
    observation differs between the two (``d = shared`` if the last shared observations still match: the pair then
    parts at its last shared action or by its length). The segment is the single turn ``d - 1``, the action that
    led into it, in the trajectory on ``side``; before the first turn there is no action, so ``d = 0`` proposes turn
    0.

    Returns:
        The one-turn proposal, or None where that turn does not exist in the chosen trajectory.
    """
    target = side_trajectory(success, failure, side)
    shared = min(success.num_turns, failure.num_turns)
    start = shared
    while start > 0 and success.observations[start - 1].strip() != failure.observations[start - 1].strip():
        start -= 1
    turn = max(start - 1, 0)
    if turn >= target.num_turns:
        return None
    return Proposal(target.traj_id, turn, turn, reason=f"observations differ for good from turn {start}")


class DivergenceJudge(PairJudge):
    """:func:`lasting_divergence` on a randomly drawn success/failure pair of the group."""

    def choose(self, success: Trajectory, failure: Trajectory, side: SegmentSide) -> Proposal | None:
        return lasting_divergence(success, failure, side=side)


@register_judge("divergence")
def _divergence(config, segment_side: SegmentSide, seed: int | None = None, **_context) -> DivergenceJudge:
    return DivergenceJudge(segment_side, seed=seed or 0)
