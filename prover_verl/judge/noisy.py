"""A judge of known accuracy: the true pivotal turn with probability ``accuracy``, else a random turn.

It exists to measure what the verifier does with a judge that is right, half right or useless (``accuracy=0``
is a uniformly random judge); it needs the task's true pivotal turn, which only a synthetic env can give: the
demo passes ``pivots`` by task; in verl's loop (``algorithm.prover.judge.type=noisy``, ``judge.accuracy=p``) each
trajectory carries it from the env's ``info["pivot_turn"]`` (the ``keydoor`` env).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from prover_verl.judge.base import (
    Judge,
    JudgeStatus,
    Proposal,
    SegmentSide,
    Trajectory,
    draw_side,
    pick_pair,
    segment_side_of,
    side_trajectory,
)
from prover_verl.judge.registry import register_judge


class NoisyPivotJudge(Judge):
    """Proposes a one-turn segment of a drawn success/failure pair: the pivotal turn, or a uniformly random turn.

    Args:
        accuracy: Probability of proposing the true pivotal turn, in [0, 1].
        pivots: Pivotal turn per task instruction (:attr:`Trajectory.task`); None: each trajectory's own
            :attr:`Trajectory.pivot_turn`.
        segment_side: Which trajectory of the pair the segment lies in (:class:`SegmentSide`).
        seed: Seeds the pair draw, the side draw and the judge's errors.
    """

    def __init__(
        self,
        accuracy: float,
        pivots: Mapping[str, int] | None,
        segment_side: SegmentSide | str = SegmentSide.SUCCESS,
        seed: int = 0,
    ):
        if not 0.0 <= accuracy <= 1.0:
            raise ValueError(f"judge accuracy must lie in [0, 1], got {accuracy}")
        self.accuracy = accuracy
        self.pivots = None if pivots is None else dict(pivots)
        self.segment_side = segment_side_of(segment_side)
        self.rng = random.Random(seed)

    async def propose(self, group: Sequence[Trajectory]) -> tuple[Proposal | None, JudgeStatus]:
        return self.propose_now(group)

    def propose_now(self, group: Sequence[Trajectory]) -> tuple[Proposal | None, JudgeStatus]:
        """Synchronous :meth:`propose`."""
        pair = pick_pair(group, self.rng)
        if pair is None:
            return None, JudgeStatus.NO_PAIR
        side = draw_side(self.segment_side, self.rng)
        target = side_trajectory(*pair, side)
        pivot = target.pivot_turn if self.pivots is None else self.pivots.get(target.task)
        if pivot is None:
            raise KeyError(
                f"no pivotal turn known for task {target.task!r}: the noisy judge needs an env that reports "
                "info['pivot_turn'] (keydoor) or the demo's pivots"
            )
        if self.rng.random() < self.accuracy:
            turn, reason = pivot, "the true pivotal turn"
        else:
            turn, reason = self.rng.randrange(target.num_turns), "a uniformly random turn"
        return Proposal(target.traj_id, turn, turn, reason=reason), JudgeStatus.OK


@register_judge("noisy")
def _noisy(
    config, segment_side: SegmentSide, seed: int | None = None, accuracy: float | None = None, pivots=None, **_context
) -> NoisyPivotJudge:
    if accuracy is None:  # verl's loop: from algorithm.prover.judge.accuracy
        accuracy = config.accuracy
    return NoisyPivotJudge(accuracy, pivots, segment_side, seed=seed or 0)
