"""Answer scoring (SQuAD / Search-R1 normalisation, exact match, token F1) and parsing of agent actions."""

from __future__ import annotations

import collections
import dataclasses
import re
import string
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)
_TAG = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)


def normalize_answer(text: str) -> str:
    """Lowercase, drop ASCII punctuation and the articles a/an/the, collapse whitespace (SQuAD's order)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, golden_answers: Iterable[str]) -> float:
    """1.0 when the normalised prediction equals any normalised gold answer, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(gold) for gold in golden_answers))


def _token_f1(prediction: str, gold: str) -> float:
    pred_tokens, gold_tokens = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = sum((collections.Counter(pred_tokens) & collections.Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, golden_answers: Iterable[str]) -> float:
    """Token-level F1 of the normalised prediction, the best over the gold answers (0.0 for no golds)."""
    return max((_token_f1(prediction, gold) for gold in golden_answers), default=0.0)


@dataclasses.dataclass(frozen=True)
class Action:
    """One parsed agent turn.

    Attributes:
        kind: ``"search"``, ``"answer"`` or ``"invalid"``.
        content: The query or the answer (stripped); for ``"invalid"``, why the turn was rejected.
    """

    kind: str
    content: str


def parse_action(text: str) -> Action:
    """Parse a turn of the Search-R1 protocol: exactly one ``<search>q</search>`` or ``<answer>a</answer>``.

    Anything else (no complete tag, several tags, an empty query or answer) is an ``invalid`` action whose
    ``content`` says what was wrong.
    """
    tags = _TAG.findall(text)
    kinds = [kind for kind, _ in tags]
    if not tags:
        return Action("invalid", "no complete <search>...</search> or <answer>...</answer> tag found")
    if "search" in kinds and "answer" in kinds:
        return Action("invalid", "found both a <search> and an <answer> tag; use only one per turn")
    if len(tags) > 1:
        return Action("invalid", f"found {len(tags)} <{kinds[0]}> tags; use only one per turn")
    kind, content = tags[0]
    content = content.strip()
    if not content:
        return Action("invalid", f"the <{kind}> tag is empty")
    return Action(kind, content)
