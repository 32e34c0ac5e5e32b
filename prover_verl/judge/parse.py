"""Strict parsing of a judge answer: one JSON object with a trajectory label and an in-range turn span."""

from __future__ import annotations

import json
import re

from prover_verl.judge.base import JudgeStatus, Proposal, Trajectory

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL | re.IGNORECASE)
_KEYS = {"trajectory", "start_turn", "end_turn", "reason"}


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    # json's default keeps the last of repeated keys, so '{"trajectory": "B", ..., "trajectory": "A"}' would say A
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"duplicate keys in {keys}")
    return dict(pairs)


def _decode(body: str) -> object:
    return json.loads(body, object_pairs_hook=_unique_keys)


def _unfence(text: str) -> str:
    fenced = _FENCE.match(text)
    return fenced.group(1).strip() if fenced else text


def _answer_text(text: str) -> str:
    """The answer without a leading reasoning block and without a code fence ("" if it holds only reasoning).

    Reasoning comes first and may have been opened by the chat template (the reply only closes it); an opened but
    unclosed block means the answer was cut off inside its reasoning. Think tags inside the JSON's strings are
    the answer's own text: the block ends at its first ``</think>``, and a reply that decodes as JSON as it
    stands has no block.
    """
    body = text.strip()
    if body.startswith("<think>"):
        _, closed, body = body.partition("</think>")
        return _unfence(body.strip()) if closed else ""
    if "</think>" in body:
        try:
            _decode(_unfence(body))
        except (ValueError, RecursionError):
            body = body.partition("</think>")[2].strip()
    return _unfence(body)


def parse_answer(
    text: str | None,
    labels: dict[str, int],
    allowed: tuple[str, ...],
    group: list[Trajectory],
) -> tuple[Proposal | None, JudgeStatus]:
    """Parse a judge answer into a proposal.

    The answer, after dropping a leading reasoning block (up to its ``</think>``, see :func:`_answer_text`) and an
    optional Markdown code fence, must be exactly one JSON object with ``trajectory`` (one of ``allowed``), integer
    ``start_turn`` <= ``end_turn`` inside that trajectory, and optionally a string ``reason``; no other keys, and
    no key twice.

    Returns:
        ``(proposal, OK)``, or ``(None, status)`` with status ``EMPTY``, ``MALFORMED`` or ``OUT_OF_RANGE``.
    """
    body = None if text is None else _answer_text(text)
    if not body:
        return None, JudgeStatus.EMPTY
    try:
        answer = _decode(body)
    except (ValueError, RecursionError):  # JSONDecodeError, over-long integers, absurd nesting
        return None, JudgeStatus.MALFORMED
    if not isinstance(answer, dict) or not {"trajectory", "start_turn", "end_turn"} <= set(answer) <= _KEYS:
        return None, JudgeStatus.MALFORMED
    label, start, end, reason = answer["trajectory"], answer["start_turn"], answer["end_turn"], answer.get("reason", "")
    if not isinstance(label, str) or not isinstance(reason, str):
        return None, JudgeStatus.MALFORMED
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
        return None, JudgeStatus.MALFORMED
    if label not in allowed or label not in labels:
        return None, JudgeStatus.OUT_OF_RANGE
    traj_id = labels[label]
    turns = next(t.num_turns for t in group if t.traj_id == traj_id)
    if not 0 <= start <= end < turns:
        return None, JudgeStatus.OUT_OF_RANGE
    return Proposal(traj_id, start, end, reason=reason.strip()), JudgeStatus.OK
