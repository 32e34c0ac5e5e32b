"""The random-segment ablation's proposer: no judge, a uniformly random segment of a drawn pair."""

from __future__ import annotations

from prover_verl.judge.base import PairJudge, Proposal, SegmentSide, Trajectory, side_trajectory


class RandomSegmentJudge(PairJudge):
    """A random segment: in the pair's success (or failure, or either, by ``segment_side``), a start turn drawn
    uniformly, then an end turn drawn uniformly from the start to the last turn. It is then verified as usual, so
    it measures what the judge's choice of *where* adds over chance."""

    def choose(self, success: Trajectory, failure: Trajectory, side: SegmentSide) -> Proposal | None:
        target = side_trajectory(success, failure, side)
        if target.num_turns == 0:
            return None
        start = self.rng.randrange(target.num_turns)
        end = self.rng.randrange(start, target.num_turns)
        return Proposal(target.traj_id, start, end, reason="random segment (ablation)")
