"""Segment proposal: judges that point at the turns most likely behind a group's divergent outcomes."""

from prover_verl.judge.base import Judge, Proposal, Trajectory, check_proposal, pick_pair
from prover_verl.judge.heuristic import HeuristicJudge, first_divergence

__all__ = ["HeuristicJudge", "Judge", "Proposal", "Trajectory", "check_proposal", "first_divergence", "pick_pair"]
