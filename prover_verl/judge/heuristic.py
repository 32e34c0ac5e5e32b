"""A judge without an LLM: the first turn where a success and a failure act differently."""

from __future__ import annotations

from prover_verl.judge.base import PairJudge, Proposal, SegmentSide, Trajectory, side_trajectory
from prover_verl.judge.registry import register_judge


def differing_turns(a: Trajectory, b: Trajectory) -> list[int]:
    """The turns at which ``a`` and ``b`` act differently: different actions, or a turn only one of them has."""
    shared = min(a.num_turns, b.num_turns)
    differ = [t for t in range(shared) if a.actions[t].strip() != b.actions[t].strip()]
    return differ + list(range(shared, max(a.num_turns, b.num_turns)))


def first_divergence(
    success: Trajectory, failure: Trajectory, side: SegmentSide | str = SegmentSide.SUCCESS
) -> Proposal | None:
    """Propose the first turn at which ``success`` and ``failure`` take different actions.

    The segment is that single turn, in the success (``side="success"``) or the failure (``side="failure"``).
    Returns None if one action sequence is a prefix of the other within the shorter length and the divergence
    turn does not exist in the chosen trajectory.
    """
    target = side_trajectory(success, failure, side)
    differ = differing_turns(success, failure)
    if not differ or differ[0] >= target.num_turns:
        return None
    turn = differ[0]
    return Proposal(target.traj_id, turn, turn, reason=f"first turn where the actions differ ({turn})")


class HeuristicJudge(PairJudge):
    """:func:`first_divergence` on a randomly drawn success/failure pair of the group."""

    def choose(self, success: Trajectory, failure: Trajectory, side: SegmentSide) -> Proposal | None:
        return first_divergence(success, failure, side=side)


@register_judge("heuristic")
def _heuristic(config, segment_side: SegmentSide, seed: int | None = None, **_context) -> HeuristicJudge:
    return HeuristicJudge(segment_side, seed=seed or 0)
