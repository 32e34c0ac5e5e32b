"""``<tag>...</tag>`` blocks of model replies, found in linear time.

``re.finditer(r"<(a|b)>(.*?)</\\1>", text, re.DOTALL)`` retries its lazy scan from every opening tag, so a reply of
repeated unclosed openings costs time quadratic in its length (64 KB of ``<search>`` took ~4 s, 1 MB never
returned). :func:`scan` finds the same blocks with ``str.find`` from positions that only move forward.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple


class Block(NamedTuple):
    """One ``<tag>content</tag>`` block: its tag, where it starts and ends in the text, and its content."""

    tag: str
    start: int
    end: int
    content: str


def scan(text: str, tags: Sequence[str], start: int = 0) -> Iterator[Block]:
    """The non-overlapping blocks of any of ``tags`` in ``text`` from ``start``, left to right.

    The blocks are those of ``re.finditer(r"<(t1|t2|...)>(.*?)</\\1>", text[start:], re.DOTALL)``: the leftmost
    opening tag that has a closing tag of its kind after it, closed by the first such closing tag; then on from
    there. Linear in ``len(text)``.

    Args:
        text: The text (matched as given: lower-case it first, keeping its length, for case-insensitive tags).
        tags: Tag names, e.g. ``("search", "answer")``.
        start: Where to begin.
    """
    names = list(tags)
    opens, closes = [f"<{name}>" for name in names], [f"</{name}>" for name in names]
    # per tag: its next opening at or after pos and the first closing after that opening; alive: it still has one
    at, close, alive = [-1] * len(names), [-1] * len(names), [True] * len(names)
    pos = start
    while True:
        best = -1
        for i in range(len(names)):
            if not alive[i]:
                continue
            if at[i] < pos:
                found = text.find(opens[i], pos)
                body = found + len(opens[i])
                # the closing found before is still the first after this later opening if it lies beyond it
                ends = -1 if found < 0 else close[i] if close[i] >= body else text.find(closes[i], body)
                if ends < 0:  # no later opening of this tag can be closed either
                    alive[i] = False
                    continue
                at[i], close[i] = found, ends
            if best < 0 or at[i] < at[best]:
                best = i
        if best < 0:
            return
        pos = close[best] + len(closes[best])
        yield Block(names[best], at[best], pos, text[at[best] + len(opens[best]) : close[best]])


def first(text: str, tags: Sequence[str]) -> Block | None:
    """The first block of :func:`scan` (``re.search``'s match), or None."""
    return next(scan(text, tags), None)


def remove(text: str, tag: str) -> str:
    """``text`` without its ``<tag>...</tag>`` blocks (``re.sub(r"<tag>.*?</tag>", "", text, flags=re.DOTALL)``)."""
    parts, pos = [], 0
    for block in scan(text, (tag,)):
        parts.append(text[pos : block.start])
        pos = block.end
    parts.append(text[pos:])
    return "".join(parts)


def ascii_lower(text: str) -> str:
    """``text`` with ASCII letters lower-cased only: the same length, so positions found in it hold in ``text``."""
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}

__all__ = ["Block", "ascii_lower", "first", "remove", "scan"]
