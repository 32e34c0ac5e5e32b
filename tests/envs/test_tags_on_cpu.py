"""envs.tags: the blocks re.finditer finds, in linear time."""

import random
import re
import time

import pytest

from envs import tags

_PIECES = ["<search>", "</search>", "<answer>", "</answer>", "<search", "search>", "x", " ", "<", "/", "\n"]


def _regex_blocks(text, names):
    pattern = re.compile(rf"<({'|'.join(names)})>(.*?)</\1>", re.DOTALL)
    return [(m.group(1), m.start(), m.end(), m.group(2)) for m in pattern.finditer(text)]


def test_scan_finds_what_the_regex_finds():
    rng = random.Random(0)
    for _ in range(3000):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 24)))
        for names in (("search",), ("answer",), ("search", "answer"), ("answer", "search")):
            assert [tuple(b) for b in tags.scan(text, names)] == _regex_blocks(text, names), (text, names)
        assert tags.remove(text, "search") == re.sub(r"<search>.*?</search>", "", text, flags=re.DOTALL)


def test_first_and_ascii_lower():
    assert tags.first("a <answer>x</answer> <search>y</search>", ("search", "answer")) == tags.Block(
        "answer", 2, 20, "x"
    )
    assert tags.first("<search>open", ("search",)) is None
    assert tags.ascii_lower("<SEARCH>İ</Search>") == "<search>İ</search>"  # non-ASCII untouched: same length


@pytest.mark.parametrize(
    "text",
    [
        "<search>" * 131072,
        "<answer>" * 131072,
        "<search><answer>" * 65536,
        "<search>" + "x" * 2**20,
        "</search>" * 116508,
        "<search>a</search>" * 58254,
    ],
    ids=["search", "answer", "both", "one-open", "closings", "closed"],
)
def test_a_megabyte_is_scanned_in_linear_time(text):
    # CPU time, not wall time: the bound must hold on a machine others load too
    start = time.process_time()
    found = list(tags.scan(text, ("search", "answer")))
    assert time.process_time() - start < 1.0
    assert len(found) == (58254 if text.startswith("<search>a</search>") else 0)
