"""Fork-and-continue verification of proposed segments."""

from prover_verl.verify.forks import ForkPoints, fork_points, terminal_outcome
from prover_verl.verify.verifier import Continuation, Verification, VerificationError, verify_segment, verify_turns

__all__ = [
    "Continuation",
    "ForkPoints",
    "Verification",
    "VerificationError",
    "fork_points",
    "terminal_outcome",
    "verify_segment",
    "verify_turns",
]
