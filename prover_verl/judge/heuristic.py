"""A judge without an LLM: the first turn where a success and a failure act differently."""

from __future__ import annotations

from collections.abc import Sequence

from prover_verl.judge.base import PairJudge, Proposal, Trajectory


def first_divergence(success: Trajectory, failure: Trajectory, side: str = "success") -> Proposal | None:
    """Propose the first turn at which ``success`` and ``failure`` take different actions.

    The segment is that single turn, in the success (``side="success"``) or the failure (``side="failure"``).
    Returns None if one action sequence is a prefix of the other within the shorter length and the divergence
    turn does not exist in the chosen trajectory.
    """
    if side not in ("success", "failure"):
        raise ValueError(f"side must be 'success' or 'failure', got {side!r}")
    target = success if side == "success" else failure
    shared = min(success.num_turns, failure.num_turns)
    turn = next((t for t in range(shared) if success.actions[t].strip() != failure.actions[t].strip()), shared)
    if turn >= target.num_turns:
        return None
    return Proposal(target.traj_id, turn, turn, reason=f"first turn where the actions differ ({turn})")


class HeuristicJudge(PairJudge):
    """:func:`first_divergence` on a randomly drawn success/failure pair of the group."""

    async def propose(self, group: Sequence[Trajectory]) -> tuple[Proposal | None, str]:
        drawn = self.draw(group)
        if drawn is None:
            return None, "no_pair"
        success, failure, side = drawn
        proposal = first_divergence(success, failure, side=side)
        return (proposal, "ok") if proposal is not None else (None, "empty")
