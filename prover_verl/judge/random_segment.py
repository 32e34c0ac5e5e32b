"""The random-segment ablation's proposer: no judge, a uniformly random segment of a drawn pair."""

from __future__ import annotations

import random
from collections.abc import Sequence

from prover_verl.judge.base import Judge, Proposal, Trajectory, pick_pair


class RandomSegmentJudge(Judge):
    """A random segment: in the pair's success (or failure, or either, by ``segment_side``), a start turn drawn
    uniformly, then an end turn drawn uniformly from the start to the last turn. It is then verified as usual, so
    it measures what the judge's choice of *where* adds over chance."""

    def __init__(self, segment_side: str = "success", seed: int = 0):
        if segment_side not in ("success", "failure", "any"):
            raise ValueError(f"segment_side must be success, failure or any, got {segment_side!r}")
        self.segment_side = segment_side
        self.rng = random.Random(seed)

    async def propose(self, group: Sequence[Trajectory]) -> tuple[Proposal | None, str]:
        pair = pick_pair(group, self.rng)
        if pair is None:
            return None, "no_pair"
        side = self.segment_side if self.segment_side != "any" else self.rng.choice(["success", "failure"])
        target = pair[0] if side == "success" else pair[1]
        if target.num_turns == 0:
            return None, "empty"
        start = self.rng.randrange(target.num_turns)
        end = self.rng.randrange(start, target.num_turns)
        return Proposal(target.traj_id, start, end, reason="random segment (ablation)"), "ok"
