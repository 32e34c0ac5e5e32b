"""Answer scoring: SQuAD / Search-R1 normalisation, exact match and token F1."""

from __future__ import annotations

import collections
import functools
import re
import string
import unicodedata
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCTUATION = str.maketrans("", "", string.punctuation)
# "unicode": every punctuation character (Unicode categories P*) and ASCII's symbols too ($, +, <, ...), as the
# SQuAD normaliser means; "ascii": string.punctuation only, as Search-R1's and verl-agent's code does
NORMALIZATIONS = ("unicode", "ascii")


@functools.lru_cache(maxsize=1 << 16)
def _is_punctuation(ch: str) -> bool:
    return ch in string.punctuation or unicodedata.category(ch).startswith("P")


def normalize_answer(text: str, punctuation: str = "unicode") -> str:
    """Lowercase, drop punctuation and the articles a/an/the, collapse whitespace (SQuAD's order).

    Args:
        text: The answer.
        punctuation: ``"unicode"`` drops every Unicode punctuation character (``"。"``, ``"’"``, ``"–"``) and
            ASCII's; ``"ascii"`` only ASCII's (Search-R1's and verl-agent's rule).
    """
    if punctuation not in NORMALIZATIONS:
        raise ValueError(f"unknown answer normalization {punctuation!r}; known: {', '.join(NORMALIZATIONS)}")
    text = text.lower()
    if punctuation == "ascii" or text.isascii():  # the C-speed path wherever the two rules agree
        text = text.translate(_ASCII_PUNCTUATION)
    else:
        text = "".join(ch for ch in text if not _is_punctuation(ch))
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, golden_answers: Iterable[str], punctuation: str = "unicode") -> float:
    """1.0 when the normalised prediction equals any normalised gold answer, else 0.0."""
    pred = normalize_answer(prediction, punctuation)
    return float(any(pred == normalize_answer(gold, punctuation) for gold in golden_answers))


def _token_f1(prediction: str, gold: str, punctuation: str) -> float:
    pred_tokens = normalize_answer(prediction, punctuation).split()
    gold_tokens = normalize_answer(gold, punctuation).split()
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = sum((collections.Counter(pred_tokens) & collections.Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, golden_answers: Iterable[str], punctuation: str = "unicode") -> float:
    """Token-level F1 of the normalised prediction, the best over the gold answers (0.0 for no golds)."""
    return max((_token_f1(prediction, gold, punctuation) for gold in golden_answers), default=0.0)
