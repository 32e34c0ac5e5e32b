"""Engine-agnostic math: GRPO outcome advantages, segment credit from fork results and the merge, GiGPO.

Nothing here imports verl; these functions are what the verl estimator, the CPU demo and the tests share.
"""

from prover_verl.core.continuations import fork_group_advantage, fork_token_advantages
from prover_verl.core.credit import (
    FixedCredit,
    ForkOutcome,
    SegmentCredit,
    credit_tensor,
    estimate_stderr,
    merge_credit,
)
from prover_verl.core.gigpo import gigpo_advantage
from prover_verl.core.grpo import group_outcome_advantage
from prover_verl.core.spans import segment_token_span

__all__ = [
    "FixedCredit",
    "ForkOutcome",
    "SegmentCredit",
    "credit_tensor",
    "estimate_stderr",
    "fork_group_advantage",
    "fork_token_advantages",
    "gigpo_advantage",
    "group_outcome_advantage",
    "merge_credit",
    "segment_token_span",
]
