"""Mapping a segment of turns to the span of response tokens it covers."""

from __future__ import annotations

from collections.abc import Sequence


def segment_token_span(turn_spans: Sequence[tuple[int, int]], start_turn: int, end_turn: int) -> tuple[int, int]:
    """Return the response-token span ``[start, end)`` of turns ``start_turn..end_turn`` (inclusive).

    ``turn_spans[t]`` is the ``[start, end)`` span of the tokens the policy generated in turn ``t``. The segment
    runs from the first policy token of its first turn to the last policy token of its last turn; observation
    tokens between its turns fall inside the span but carry ``response_mask == 0``, so they are never credited.

    Raises:
        ValueError: the turns are out of range or reversed, or the spans are malformed.
    """
    if not 0 <= start_turn <= end_turn < len(turn_spans):
        raise ValueError(f"turns {start_turn}..{end_turn} outside a trajectory of {len(turn_spans)} turns")
    start, end = turn_spans[start_turn][0], turn_spans[end_turn][1]
    if not 0 <= start < end:
        raise ValueError(f"turn spans give an empty or negative token span [{start}, {end})")
    return start, end
