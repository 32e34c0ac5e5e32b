"""Segment proposal: judges that point at the turns most likely behind a group's divergent outcomes.

Importing the package registers the built-in judges (``policy``, ``openai``, ``heuristic``, ``divergence``,
``noisy``) in :mod:`prover_verl.judge.registry`; ``openai`` with ``judge.mode=agentic`` is
:mod:`prover_verl.judge.agentic`.
"""

from prover_verl.judge import divergence as _divergence  # noqa: F401  (registers divergence)
from prover_verl.judge import llm as _llm  # noqa: F401  (registers policy and openai)
from prover_verl.judge import noisy as _noisy  # noqa: F401  (registers noisy)
from prover_verl.judge.base import (
    Judge,
    Judgement,
    JudgeStatus,
    Proposal,
    SegmentSide,
    Trajectory,
    check_proposal,
    pick_pair,
)
from prover_verl.judge.heuristic import HeuristicJudge, first_divergence
from prover_verl.judge.registry import judge_types, make_judge, register_judge

__all__ = [
    "HeuristicJudge",
    "Judge",
    "Judgement",
    "JudgeStatus",
    "Proposal",
    "SegmentSide",
    "Trajectory",
    "check_proposal",
    "first_divergence",
    "judge_types",
    "make_judge",
    "pick_pair",
    "register_judge",
]
