"""How a Search-QA turn is read and answered: this project's rules, Search-R1's and verl-agent's.

A dialect turns the model's reply into an :class:`Action` and renders the env's replies: search results, the
answer to an invalid turn, to an answer, and to a search on the last turn. The three differ in ways that move
scores (docs/environments.md, "Search-QA protocols"):

* ``prover``: exactly one complete ``<search>`` or ``<answer>`` block; several, both kinds, or an empty one are
  invalid, with a message saying why; results ``Doc 1(Title: Paris) text`` in ``<information>``.
* ``search_r1`` (``search_r1/llm_agent/generation.py``): the reply is cut after its first ``</search>``, or, if
  it has none, after its first ``</answer>``; then its first complete block of either kind is the action, empty
  or not; anything else gets one fixed message; results ``Doc 1(Title: "Paris") text``, one a line, between
  blank lines and ``<information>`` tags; the last turn's search is not run.
* ``verl_agent`` (``agent_system/environments/env_package/search``): the same cut, then the first ``<search>``
  block, else the first ``<answer>`` block (tags in any case); a reply with both kinds of tag or a tag twice is
  played but flagged invalid (a reward penalty); no block: an empty observation; results are the retriever's
  JSON reply ``{"result": "Doc 1: \\"Paris\\"\\ntext\\n..."}`` between ``<information>`` tags; the last turn
  ends the episode before its search.

Every parse is linear in the reply's length (:mod:`envs.tags`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence

from envs import tags
from envs._lucene import MAX_QUERY_TERMS, MAX_TERM_CHARS
from envs.searchqa.corpus import Passage

_KINDS = ("search", "answer")
_FORMAT = "Reply with <search>your query</search> to search, or <answer>your answer</answer> to give the final answer."
_SEARCH_R1_INVALID = (
    "\nMy previous action is invalid. If I want to search, I should put the query between <search> and </search>. "
    "If I want to give the final answer, I should put the answer between <answer> and </answer>. Let me try again.\n"
)


@dataclasses.dataclass(frozen=True)
class Action:
    """One parsed agent turn.

    Attributes:
        kind: ``"search"``, ``"answer"`` or ``"invalid"``.
        content: The query or the answer (stripped); for ``"invalid"``, why the turn was rejected.
        valid: False for an invalid turn, and for one that is played but flagged (verl-agent's ``is_action_valid``).
    """

    kind: str
    content: str
    valid: bool = True


@dataclasses.dataclass(frozen=True)
class Dialect:
    """The rules of one protocol family; see the module docstring.

    Attributes:
        name: ``prover``, ``search_r1`` or ``verl_agent``.
        parse: Reply -> action.
        results: (passages, whether the query was cut) -> the observation of a search.
        invalid: Invalid action -> its observation.
        answered: Answer -> its observation.
        searches_on_last_turn: A search on the episode's last turn is run (else its observation is empty).
    """

    name: str
    parse: Callable[[str], Action]
    results: Callable[[Sequence[Passage], bool], str]
    invalid: Callable[[Action], str]
    answered: Callable[[Action], str]
    searches_on_last_turn: bool


# ---------------------------------------------------------------------------------------------------- prover
def parse_action(text: str) -> Action:
    """This project's rule: exactly one ``<search>q</search>`` or ``<answer>a</answer>``.

    Anything else (no complete block, several blocks, an empty query or answer) is an ``invalid`` action whose
    ``content`` says what was wrong.
    """
    count, block = 0, None
    for found in tags.scan(text, _KINDS):
        if block is not None and found.tag != block.tag:
            return Action("invalid", "found both a <search> and an <answer> tag; use only one per turn", False)
        count, block = count + 1, block or found
    if block is None:
        return Action("invalid", "no complete <search>...</search> or <answer>...</answer> tag found", False)
    if count > 1:
        return Action("invalid", f"found {count} <{block.tag}> tags; use only one per turn", False)
    content = block.content.strip()
    if not content:
        return Action("invalid", f"the <{block.tag}> tag is empty", False)
    return Action(block.tag, content)


def _prover_results(hits: Sequence[Passage], clipped: bool) -> str:
    body = "\n".join(p.render(rank) for rank, p in enumerate(hits, 1)) if hits else "No passages found."
    note = f"(Query cut to its first {MAX_QUERY_TERMS} terms of up to {MAX_TERM_CHARS} characters.)\n"
    return f"{note if clipped else ''}<information>{body}</information>"


# ---------------------------------------------------------------------------------------------------- upstream
def cut_reply(text: str) -> str:
    """The reply as Search-R1 and verl-agent keep it: up to its first ``</search>``, else its first ``</answer>``."""
    for close in ("</search>", "</answer>"):
        at = text.find(close)
        if at >= 0:
            return text[: at + len(close)]
    return text


def parse_search_r1(text: str) -> Action:
    """Search-R1's rule: in the cut reply, the first complete block of either kind, its content stripped (an empty
    query is a search)."""
    block = tags.first(cut_reply(text), _KINDS)
    if block is None:
        return Action("invalid", "no complete <search>...</search> or <answer>...</answer> block", False)
    return Action(block.tag, block.content.strip())


def parse_verl_agent(text: str) -> Action:
    """verl-agent's projection: in the cut reply, the first ``<search>`` block, else the first ``<answer>`` block
    (tags in any case); flagged invalid if the whole reply opens both kinds of tag, or one kind twice."""
    lowered = tags.ascii_lower(text)  # the same length: positions found in it hold in text
    cut = len(cut_reply(lowered))
    block = tags.first(lowered[:cut], ("search",)) or tags.first(lowered[:cut], ("answer",))
    if block is None:
        return Action("invalid", "no complete <search>...</search> or <answer>...</answer> block", False)
    searches, answers = lowered.count("<search>"), lowered.count("<answer>")
    valid = not (searches and answers) and searches <= 1 and answers <= 1
    content = text[block.start + len(block.tag) + 2 : block.end - len(block.tag) - 3].strip()
    if block.tag == "search" and "<answer>" in content and "</answer>" in content:
        # verl-agent's env ends the episode on any action holding both strings, and scores the dialogue's last
        # <answer> block: a query that holds one is that answer (one that holds none scores 0, as "" does)
        inner = [found.content for found in tags.scan(content, ("answer",))]
        return Action("answer", inner[-1].strip() if inner else "", valid)
    return Action(block.tag, content, valid)


def _search_r1_results(hits: Sequence[Passage], clipped: bool) -> str:
    # Search-R1's server returns wiki-18's contents '"Title"\ntext'; its client shows the first line as the title
    body = "".join(f'Doc {rank}(Title: "{p.title}") {p.text}\n' for rank, p in enumerate(hits, 1))
    return f"\n\n<information>{body.strip()}</information>\n\n"


def _verl_agent_results(hits: Sequence[Passage], clipped: bool) -> str:
    body = "".join(f"Doc {rank}: {_contents(p).strip()}\n" for rank, p in enumerate(hits, 1))
    return f"<information>{json.dumps({'result': body})}</information>"


def _contents(passage: Passage) -> str:
    """The passage in wiki-18's ``contents`` layout, as a Search-R1 server sends it."""
    return f'"{passage.title}"\n{passage.text}' if passage.title else passage.text


DIALECTS: dict[str, Dialect] = {
    "prover": Dialect(
        "prover",
        parse_action,
        _prover_results,
        lambda action: f"Invalid action: {action.content}. {_FORMAT}",
        lambda action: f"Final answer received: {action.content}",
        searches_on_last_turn=True,
    ),
    "search_r1": Dialect(
        "search_r1",
        parse_search_r1,
        _search_r1_results,
        lambda action: _SEARCH_R1_INVALID,
        lambda action: "",
        searches_on_last_turn=False,
    ),
    "verl_agent": Dialect(
        "verl_agent",
        parse_verl_agent,
        _verl_agent_results,
        lambda action: "",
        lambda action: "",
        searches_on_last_turn=False,
    ),
}


def dialect(name: str) -> Dialect:
    """The dialect called ``name``.

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    if name not in DIALECTS:
        raise ValueError(f"unknown searchqa dialect {name!r}; known: {', '.join(DIALECTS)}")
    return DIALECTS[name]


__all__ = [
    "DIALECTS",
    "Action",
    "Dialect",
    "cut_reply",
    "dialect",
    "parse_action",
    "parse_search_r1",
    "parse_verl_agent",
]
