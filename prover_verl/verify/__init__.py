"""Fork-and-continue verification of proposed segments."""

from prover_verl.verify.forks import ForkPoints, fork_points, terminal_outcome

__all__ = ["ForkPoints", "fork_points", "terminal_outcome"]
