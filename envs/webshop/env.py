"""WebShop in text mode: search a product catalog, open products, pick options, buy; scored by the WebShop reward.

The page flow and action syntax are the original environment's:

* search page: ``search[query]`` (BM25 over the products, top 50 results, 10 per page);
* results page: ``click[<asin>]`` opens a product, ``click[next >]`` / ``click[< prev]`` page,
  ``click[back to search]``;
* item page: ``click[<option value>]`` selects an option, ``click[description]`` / ``click[features]`` /
  ``click[reviews]`` open a sub-page, ``click[< prev]`` returns to the results, ``click[buy now]`` ends the
  episode with the :func:`~envs.webshop.reward.purchase_reward` of the product and options chosen;
* sub-page: ``click[< prev]`` returns to the item page, ``click[back to search]``.

Click arguments are matched case-insensitively, as in the original. ``info["admissible_actions"]`` lists the
clicks of the page (``search[...]`` on the search page). Anything else is an invalid action: the page is shown
again under an ``Invalid action`` line, and the step counts. ``search`` is only valid on the search page (the
original accepts it anywhere, but offers it only there).

A protocol (:mod:`envs.webshop.protocol`) picks the goals, splits, step limit, reward and page text: with
``pages="original"`` (the ``original`` and ``verl_agent`` protocols) the pages are the original text mode's, an
action is parsed as the original parses it and an invalid one changes nothing, without a notice.

The whole state is the session (goal, page, query, results page, product, chosen options, sub-page and the last
invalid-action notice), so a snapshot is a handful of strings; search is deterministic (and memoized), so
:meth:`WebShopEnv.restore` re-renders the page from it, in this process or another one.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from pathlib import Path
from typing import Any

from envs import _lucene, store
from envs import protocol as protocols
from envs._shared import abs_path, load_once
from envs.base import EnvState, StepReturn, TextEnv, UnknownTaskError
from envs.webshop.catalog import DATA_DIR, Catalog, Goal, Product, load_catalog, open_catalog, resolve_sources
from envs.webshop.protocol import PROTOCOLS
from envs.webshop.reward import purchase_reward, token_set_ratio

PRODUCTS_PER_PAGE = 10
# train_and_eval: every goal but the test goals (verl-agent's train split: goals [500, n) on the original bounds)
SPLITS = ("train", "eval", "test", "all", "train_and_eval")
SPLIT_SCHEMES = ("default", "original", "verl_agent")
# The original splits of the shuffled goals: test = [0, 500), eval = [500, 1500), train = the rest.
ORIGINAL_SPLIT_BOUNDS = (500, 1500)
SMALL_SPLIT_FRACTIONS = (0.2, 0.1)  # test, eval shares of a goal list too small for the original bounds
SMALL_FILES = ("items_shuffle_1000.json", "items_ins_v2_1000.json")  # the original's 1,000-product subset
PAGE_MODES = ("ours", "original")  # this project's page text, the original text mode's

BACK_TO_SEARCH = "back to search"
NEXT_PAGE = "next >"
PREV_PAGE = "< prev"
BUY_NOW = "buy now"
SUB_PAGES = {"description": "Description", "features": "Features", "reviews": "Reviews"}
PAGES = ("search", "results", "item", "sub", "done")
SEARCH_ACTION = "search[...]"
_NAV = (BACK_TO_SEARCH, PREV_PAGE)
MAX_NOTICE_CHARS = 200

_ACTION = re.compile(r"^\s*([A-Za-z_]+)\s*\[(.*)\]\s*$", re.DOTALL)
ORIGINAL_SEARCH_ACTION = "search[<your query>]"  # how verl-agent lists the search bar
_PRICE_CLAUSE = re.compile(r",?\s*and price lower than [\d.]+ dollars\s*$")
# fmt: off
_FILLER = frozenset({
    "i", "i'm", "im", "am", "looking", "look", "need", "want", "wanted", "would", "like", "to", "buy", "find",
    "get", "me", "please", "help", "a", "an", "the", "that", "is", "which", "are", "it", "its", "some", "for",
    "with", "and", "in", "of", "also",
})
# fmt: on


def parse_action(action: str) -> tuple[str, str] | None:
    """``"click[Buy Now]"`` -> ``("click", "buy now")``; None if it is not ``name[argument]``."""
    m = _ACTION.match(action)
    if m is None or not m.group(2).strip():
        return None
    return m.group(1).lower(), m.group(2).strip().lower()


def expert_query(goal: Goal) -> str:
    """The instruction's key words: the instruction without its price clause and filler words."""
    text = _PRICE_CLAUSE.sub("", goal.instruction.lower())
    words = re.findall(r"[a-z0-9][a-z0-9'.%-]*", text)
    return " ".join(w.strip(".") for w in words if w.strip(".") not in _FILLER)


def parse_action_original(action: str) -> tuple[str, str | None]:
    """The original's ``parse_action`` (``re.match(r"(.+)\\[(.+)\\]", action)``, argument lower-cased), in linear time.

    Both groups lie on the first line (``.`` stops at a newline); the greedy name ends at the last ``[`` that has a
    ``]`` two or more characters after it, and the argument runs to the last ``]``. Anything else is the action's
    whole text as the name and no argument. (The regex itself backtracks quadratically on a long ``click[[[...``.)
    """
    line = action.split("\n", 1)[0]
    close = line.rfind("]")
    open_ = line.rfind("[", 1, close - 1) if close >= 3 else -1
    if open_ < 1:
        return action, None
    return line[:open_], line[open_ + 1 : close].lower()


def split_goal_ids(num_goals: int, split: str, scheme: str = "default") -> list[str]:
    """Goal ids of a split under a split scheme.

    * ``default``: the original bounds (test = [0, 500), eval = [500, 1500), train = the rest) when there are more
      than 1,500 goals, else 20 % / 10 % / 70 %;
    * ``original``: the original bounds whatever the number of goals (``baseline_models/env.py``);
    * ``verl_agent``: test = [0, 500) and train = [500, n) (verl-agent's ``goal_idxs``; eval is the original's).

    ``train_and_eval`` is every goal after the test goals, ``all`` every goal.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown WebShop split {split!r}; choose one of {', '.join(SPLITS)}")
    if scheme not in SPLIT_SCHEMES:
        raise ValueError(f"unknown WebShop split scheme {scheme!r}; choose one of {', '.join(SPLIT_SCHEMES)}")
    if scheme != "default" or num_goals > ORIGINAL_SPLIT_BOUNDS[1]:
        test_end, eval_end = ORIGINAL_SPLIT_BOUNDS
    else:
        test_end = math.ceil(num_goals * SMALL_SPLIT_FRACTIONS[0])
        eval_end = test_end + math.ceil(num_goals * SMALL_SPLIT_FRACTIONS[1])
    ranges = {
        "test": (0, test_end),
        "eval": (test_end, eval_end),
        "train": (test_end if scheme == "verl_agent" else eval_end, num_goals),
        "train_and_eval": (test_end, num_goals),
    }
    start, end = ranges.get(split, (0, num_goals))
    return [str(i) for i in range(start, min(end, num_goals))]


@dataclasses.dataclass
class Session:
    """Everything the next observation and transition depend on (with the catalog)."""

    goal_id: str
    page: str = "search"
    keywords: str | None = None
    page_num: int = 1
    asin: str | None = None
    options: dict[str, str] = dataclasses.field(default_factory=dict)
    sub_page: str | None = None
    notice: str | None = None
    steps: int = 0


class WebShopEnv(TextEnv):
    """The WebShop shopping environment in text mode.

    With no arguments it plays the small catalog shipped in ``envs/webshop/data`` (175 products, 5 categories).
    Point ``data_dir`` at the original WebShop ``data`` folder to play the original catalog and instructions.

    Args:
        data_dir: Folder with the WebShop files (see :mod:`envs.webshop.catalog`); None: the shipped catalog.
        num_products: Use only the first N products of the product file (as the original's ``num_products``).
        split: ``train``, ``eval``, ``test``, ``all`` or ``train_and_eval`` (see :func:`split_goal_ids`; the
            protocol's split scheme says which goals each holds).
        max_steps: Steps before the episode is truncated; None: the protocol's.
        human_goals: Goals from the human instructions (standard benchmark), else the synthetic ones; None: the
            protocol's.
        products_file, attributes_file, human_file, reviews_file: Override one file of ``data_dir``.
        cache_dir: Where the catalog's store is kept (default ``~/.cache/prover_verl/webshop``); data up to
            :data:`envs.store.AUTO_PREPARE_BYTES` is prepared there on first use, larger data needs ``store_dir``.
        store_dir: A store made by ``python -m envs.webshop.prepare`` (instead of the data arguments): how the
            full catalog is played; every env process opens it read-only and shares its pages.
        index_dir: A prebuilt Lucene index of the products (the original repo's ``search_engine/indexes``), to
            search instead of building one.
        use_small: Read ``items_shuffle_1000.json`` and ``items_ins_v2_1000.json`` of ``data_dir`` (verl-agent's
            ``use_small``) even where the full files are there too; None: the protocol's.
        split_scheme: Which goals each split holds (:func:`split_goal_ids`); None: the protocol's.
        pages: ``ours`` or ``original`` (the original text mode: its pages, parsing and silent invalid actions);
            None: the protocol's.
        win_reward: The reward of a purchase scoring 1 (any other: 0) instead of the score; None: the protocol's
            (the score under ``default`` and ``original``, 10 under ``verl_agent``).
        protocol: A preset of :data:`envs.webshop.protocol.PROTOCOLS` (``default``, ``original``, ``verl_agent``):
            the defaults of ``max_steps``, ``human_goals``, ``use_small``, ``split_scheme``, ``pages`` and
            ``win_reward`` (:func:`envs.protocol.settings`).

    Raises:
        FileNotFoundError: a needed file is missing (the message names it).
        StoreMissingError: no store at ``store_dir``, or large data without one (the message gives the command).
        ValueError: a malformed file (the message names it), an unknown split or protocol, or a store prepared
            with other goals than the protocol plays.
    """

    name = "webshop"

    def __init__(
        self,
        data_dir: str | os.PathLike | None = None,
        num_products: int | None = None,
        split: str = "train",
        max_steps: int | None = None,
        human_goals: bool | None = None,
        products_file: str | os.PathLike | None = None,
        attributes_file: str | os.PathLike | None = None,
        human_file: str | os.PathLike | None = None,
        reviews_file: str | os.PathLike | None = None,
        cache_dir: str | os.PathLike | None = None,
        store_dir: str | os.PathLike | None = None,
        index_dir: str | os.PathLike | None = None,
        use_small: bool | None = None,
        split_scheme: str | None = None,
        pages: str | None = None,
        win_reward: float | None = None,
        protocol: str = protocols.DEFAULT,
    ):
        given = {"max_steps": max_steps, "human_goals": human_goals, "use_small": use_small,
                 "split_scheme": split_scheme, "pages": pages, "win_reward": win_reward}  # fmt: skip
        settings = protocols.settings(self.name, PROTOCOLS, protocol, given)
        super().__init__(settings["max_steps"])
        self.protocol = protocol
        self.pages: str = settings["pages"]
        if self.pages not in PAGE_MODES:
            raise ValueError(f"pages must be one of {PAGE_MODES}, got {self.pages!r}")
        self.win_reward: float | None = settings["win_reward"]
        if self.win_reward is not None and (not isinstance(self.win_reward, int | float) or self.win_reward <= 0):
            raise ValueError(f"win_reward must be a number > 0 (or None: the score), got {self.win_reward!r}")
        self.split_scheme: str = settings["split_scheme"]
        explicit_goals = human_goals
        human_goals, use_small = settings["human_goals"], settings["use_small"]
        if num_products is not None and num_products < 1:
            raise ValueError(f"num_products must be >= 1, got {num_products}")
        if split not in SPLITS:
            raise ValueError(f"unknown WebShop split {split!r}; choose one of {', '.join(SPLITS)}")
        if store_dir is not None:
            given = {"data_dir": data_dir, "num_products": num_products, "products_file": products_file,
                     "attributes_file": attributes_file, "human_file": human_file, "reviews_file": reviews_file,
                     "index_dir": index_dir, "human_goals": explicit_goals}  # fmt: skip
            clash = sorted(k for k, v in given.items() if v is not None)
            if clash:
                raise ValueError(
                    f"store_dir holds a prepared catalog (its files and options); do not also pass {clash}"
                )
            manifest = Path(store_dir).expanduser() / store.MANIFEST
            key = ("webshop store", abs_path(store_dir))
            self.catalog: Catalog = load_once(key, lambda: open_catalog(store_dir), (manifest,))
            prepared = self.catalog.store.manifest["sources"].get("human_goals")
            if prepared is not None and bool(prepared) != human_goals:
                kinds = {True: "human goals", False: "synthetic goals (--synthetic-goals)"}
                raise ValueError(
                    f"the WebShop store {store_dir} holds {kinds[bool(prepared)]}, but protocol {protocol!r} plays "
                    f"{kinds[human_goals]}: prepare a store of those, or choose another protocol"
                )
        else:
            root = Path(data_dir).expanduser() if data_dir is not None else DATA_DIR
            if use_small:  # verl-agent's use_small: the 1,000-product files, even beside the full ones
                products_file = products_file if products_file is not None else root / SMALL_FILES[0]
                attributes_file = attributes_file if attributes_file is not None else root / SMALL_FILES[1]
            files = (products_file, attributes_file, human_file, reviews_file)
            cache = abs_path(cache_dir) if cache_dir is not None else str(_lucene.default_cache_dir("webshop"))
            key = (
                "webshop",
                abs_path(root),
                *map(abs_path, files),
                num_products,
                human_goals,
                cache,
                abs_path(index_dir),
            )
            sources = lambda: resolve_sources(  # noqa: E731
                root,
                *(Path(f).expanduser() if f is not None else None for f in files),
                num_products=num_products,
                human_goals=human_goals,
                index_dir=index_dir,
            )
            cache_path = Path(cache_dir).expanduser() if cache_dir is not None else None
            self.catalog = load_once(key, lambda: load_catalog(sources(), cache_path), (root, *files))
        self.split = split
        self._task_ids = split_goal_ids(len(self.catalog.goals), split, self.split_scheme)
        self._session: Session | None = None

    # ------------------------------------------------------------------ tasks
    def data_source(self) -> str:
        files = ", ".join(f"{role} {path}" for role, path in self.catalog.files.items())
        return f"{files} (store {self.catalog.store.root})"

    def task_ids(self) -> list[str]:
        return list(self._task_ids)

    def data_fingerprint(self) -> str:
        """The catalog's: its products, prices and goals (and a prebuilt index)."""
        return self.catalog.fingerprint

    def task_category(self, task_id: str) -> str:
        """The goal product's top category (``fashion``, ``beauty``, ...)."""
        return self.goal(task_id).category

    def has_task(self, task_id: str) -> bool:
        """Any goal of the catalog, whatever the split (the split only chooses which goals are listed and drawn)."""
        try:
            index = int(task_id)
        except (TypeError, ValueError):
            return False
        return 0 <= index < len(self.catalog.goals) and str(index) == str(task_id)

    def unknown_task(self, task_id: str) -> UnknownTaskError:
        return UnknownTaskError(
            f"no WebShop goal {task_id!r} (the catalog has goals '0'..'{len(self.catalog.goals) - 1}')"
        )

    def goal(self, task_id: str) -> Goal:
        """The goal of a task (any goal of the catalog, whatever the split)."""
        return self.catalog.goals[int(self.check_task(task_id))]

    # ------------------------------------------------------------------ episode
    def _start(self, task_id: str) -> tuple[str, dict[str, Any]]:
        self._session = Session(goal_id=self.goal(task_id).goal_id)
        return self._observe()

    def _step(self, action: str) -> StepReturn:
        before = self._session
        if before is None:
            raise RuntimeError("WebShopEnv.step before reset or restore")
        if before.page == "done" or before.steps >= self.max_steps:
            raise RuntimeError("WebShopEnv.step after the episode ended; reset or restore first")
        # the step works on a copy, kept only once its page is rendered: a search that raises changes nothing
        s = dataclasses.replace(before, options=dict(before.options), steps=before.steps + 1, notice=None)
        original = self.pages == "original"
        parsed = parse_action_original(action) if original else parse_action(action)
        if not self._apply(s, parsed) and not original:  # the original shows the page unchanged, without a word
            s.notice = " ".join(action.split())[:MAX_NOTICE_CHARS]
        self._session = s
        try:
            obs, info = self._observe()
        except BaseException:
            self._session = before
            raise
        terminated = s.page == "done"
        truncated = not terminated and s.steps >= self.max_steps
        return obs, info["reward"] if terminated else 0.0, terminated, truncated, info

    def _apply(self, s: Session, parsed: tuple[str, str | None] | None) -> bool:
        """Apply a parsed action to the session; False if it is not valid on the current page."""
        if parsed is None or not parsed[1]:
            return False
        kind, arg = parsed
        if kind == "search":
            if s.page != "search" and self.pages != "original":  # the original searches from any page
                return False
            # the page shows the query the engine ran, cut to its bounds (a 1 MB query must not come back 1 MB)
            s.page, s.keywords, s.page_num, s.asin, s.options = "results", _lucene.clip_query(arg)[0], 1, None, {}
            return True
        # the search bar's button is listed by the original but not clickable
        target = self._clickables(s).get(arg) if kind == "click" and arg != "search" else None
        if target is None:
            return False
        if arg == BACK_TO_SEARCH:
            s.page, s.keywords, s.page_num, s.asin, s.options, s.sub_page = "search", None, 1, None, {}, None
        elif s.page == "results":
            if arg in (NEXT_PAGE, PREV_PAGE):
                s.page_num += 1 if arg == NEXT_PAGE else -1
            else:
                s.page, s.asin, s.options = "item", target, {}
        elif s.page == "item":
            if arg == PREV_PAGE:
                s.page, s.asin, s.options = "results", None, {}
            elif arg == BUY_NOW:
                s.page = "done"
            elif arg in SUB_PAGES:
                s.page, s.sub_page = "sub", SUB_PAGES[arg]
            else:
                s.options[target] = arg
        elif s.page == "sub":  # only "< prev" is left here
            s.page, s.sub_page = "item", None
        return True

    # ------------------------------------------------------------------ pages
    def _results(self, s: Session) -> tuple[str, ...]:
        return self.catalog.search(s.keywords or "")

    def _clickables(self, s: Session) -> dict[str, str]:
        """Lowercased click arguments of the current page -> what they point at (asin, option type, button)."""
        if s.page == "search":
            return {"search": "search"} if self.pages == "original" else {}
        if s.page == "results":
            ranked = self._results(s)
            out = {BACK_TO_SEARCH: BACK_TO_SEARCH}
            if s.page_num > 1:
                out[PREV_PAGE] = PREV_PAGE
            if s.page_num * PRODUCTS_PER_PAGE < len(ranked) or self.pages == "original":  # the original: always
                out[NEXT_PAGE] = NEXT_PAGE
            start = (s.page_num - 1) * PRODUCTS_PER_PAGE
            out.update({asin.lower(): asin for asin in ranked[start : start + PRODUCTS_PER_PAGE]})
            return out
        if s.page == "item":
            out = {BACK_TO_SEARCH: BACK_TO_SEARCH, PREV_PAGE: PREV_PAGE}
            buttons = {**{k: k for k in SUB_PAGES}, BUY_NOW: BUY_NOW}
            for option_type, values in self.catalog.products[s.asin].options.items():
                # A value shared by two option types selects the last one, as the original's page; the buttons
                # keep their meaning over an option value of the same text.
                out.update({v: option_type for v in values if v not in buttons and v not in _NAV})
            if self.pages == "original":  # the original lists its buttons before the option values
                return {**{k: out.pop(k) for k in _NAV}, **buttons, **out}
            return {**out, **buttons}
        if s.page == "sub":
            return {BACK_TO_SEARCH: BACK_TO_SEARCH, PREV_PAGE: PREV_PAGE}
        return {}

    def _observe(self) -> tuple[str, dict[str, Any]]:
        s = self._session
        goal = self.catalog.goals[int(s.goal_id)]
        info: dict[str, Any] = {"won": False, "task": goal.instruction, "step": s.steps, "page": s.page, "score": 0.0}
        original = self.pages == "original"
        if s.page == "done":
            product = self.catalog.products[s.asin]
            score, parts = purchase_reward(product, goal, self.catalog.prices[s.asin], s.options)
            won = score == 1.0
            # the reward the trainer sees: the score, or the protocol's reward for a win (verl-agent: 10, else 0)
            reward = score if self.win_reward is None else (self.win_reward if won else 0.0)
            info.update(won=won, reward=reward, score=score, reward_info=parts, admissible_actions=[])
            info["purchased"] = {"asin": s.asin, "options": dict(s.options)}
            if original:
                info["available_actions"] = {"has_search_bar": False, "clickables": []}
            body = self._render_done_original(score) if original else self._render_done(product, s, score)
        else:
            clicks = list(self._clickables(s))
            if original:  # the original's get_available_actions, listed as verl-agent lists it
                info["available_actions"] = {"has_search_bar": s.page == "search", "clickables": clicks}
                search = [ORIGINAL_SEARCH_ACTION] if s.page == "search" else []
                info["admissible_actions"] = [*search, *(f"click[{c}]" for c in clicks)]
            else:
                info["admissible_actions"] = [SEARCH_ACTION] if s.page == "search" else [f"click[{c}]" for c in clicks]
            body = self._render_original(s, goal) if original else self._render(s, goal)
        if s.notice is not None:
            body = f"Invalid action: {s.notice}\n{body}"
        return body, info

    def _render(self, s: Session, goal: Goal) -> str:
        head = f"Instruction:\n{goal.instruction}\n"
        if s.page == "search":
            return f"WebShop\n{head}Search box: search[your query]"
        if s.page == "results":
            ranked = self._results(s)
            lines = [f"{head}Current query: {s.keywords}", "[Back to Search]"]
            lines.append(f"Page {s.page_num} (Total results: {len(ranked)})")
            if s.page_num > 1:
                lines.append("[< Prev]")
            if s.page_num * PRODUCTS_PER_PAGE < len(ranked):
                lines.append("[Next >]")
            start = (s.page_num - 1) * PRODUCTS_PER_PAGE
            for asin in ranked[start : start + PRODUCTS_PER_PAGE]:
                p = self.catalog.products[asin]
                lines += [f"[{asin}]", p.title, p.price_tag]
            return "\n".join(lines)
        product = self.catalog.products[s.asin]
        if s.page == "sub":
            return "\n".join([f"{head}[Back to Search]", "[< Prev]", self._sub_page_text(product, s.sub_page)])
        lines = [f"{head}[Back to Search]", "[< Prev]"]
        for option_type, values in product.options.items():
            lines.append(f"{option_type}: " + " ".join(f"[{v}]" for v in values))
        lines += [f"You have clicked {v}." for v in s.options.values()]
        lines += [product.title, f"Price: {product.price_tag}", f"Rating: {product.rating}"]
        lines += ["[Description] [Features] [Reviews]", "[Buy Now]"]
        return "\n".join(lines)

    def _render_original(self, s: Session, goal: Goal) -> str:
        """The page in the original's text mode: its template's visible texts, stripped, joined by `` [SEP] ``."""
        if s.page == "search":
            return _sep("WebShop", "Instruction:", goal.instruction, "Search")
        head = ["Instruction:", goal.instruction, "Back to Search"]
        if s.page == "results":
            ranked = self._results(s)
            texts = [*head, f"Page {s.page_num} (Total results: {len(ranked)})"]
            texts += ["< Prev", "Next >"] if s.page_num > 1 else ["Next >"]
            start = (s.page_num - 1) * PRODUCTS_PER_PAGE
            for asin in ranked[start : start + PRODUCTS_PER_PAGE]:
                p = self.catalog.products[asin]
                texts += [asin, p.title, p.price_tag]
            return _sep(*texts)
        product = self.catalog.products[s.asin]
        if s.page == "sub":
            if s.sub_page == "Description":
                body = [product.description]
            elif s.sub_page == "Features":
                body = list(product.bullets)
            else:
                body = [t for r in product.reviews for t in (f'"{r.title}"', str(r.score), r.body)]
            return _sep(*head, "< Prev", *body)
        texts = [*head, "< Prev"]
        for option_type, values in product.options.items():
            texts += [option_type, *values]
        texts += [product.title, f"Price: {product.price_tag}", f"Rating: {product.rating}"]
        return _sep(*texts, "Description", "Features", "Reviews", "Buy Now")

    @staticmethod
    def _render_done_original(score: float) -> str:
        # The original's done page also holds hidden debugging text; never shown to a policy (the episode ends).
        return _sep("Thank you for shopping with us!", "Your score (min 0.0, max 1.0)", str(score))

    @staticmethod
    def _sub_page_text(product: Product, sub_page: str) -> str:
        if sub_page == "Description":
            return product.description or "No description."
        if sub_page == "Features":
            return "\n".join(product.bullets) or "No features."
        if not product.reviews:
            return "No reviews found"
        return "\n".join(f'"{r.title}" {r.score} stars\n{r.body}' for r in product.reviews)

    @staticmethod
    def _render_done(product: Product, s: Session, reward: float) -> str:
        chosen = ", ".join(f"{k}: {v}" for k, v in s.options.items()) or "none"
        return (
            f"Thank you for shopping with us!\nPurchased: [{product.asin}] {product.title}\nOptions: {chosen}\n"
            f"Your score (min 0.0, max 1.0): {round(reward, 4)}"
        )

    # ------------------------------------------------------------------ fork
    def snapshot(self) -> EnvState:
        s = self._session
        if s is None:
            raise RuntimeError("WebShopEnv.snapshot before reset or restore")
        payload = (
            self.catalog.fingerprint,
            s.page,
            s.keywords,
            s.page_num,
            s.asin,
            tuple(s.options.items()),
            s.sub_page,
            s.notice,
        )
        return EnvState(self.name, s.goal_id, s.steps, payload)

    def restore(self, state: EnvState) -> tuple[str, dict[str, Any]]:
        self._check_state(state)
        goal = self.goal(state.task_id)
        try:
            fingerprint, page, keywords, page_num, asin, options, sub_page, notice = state.payload
            options = {str(k): str(v) for k, v in options}
        except (TypeError, ValueError):
            raise ValueError(
                "malformed webshop EnvState payload: expected (fingerprint, page, keywords, page_num, asin, "
                "options, sub_page, notice)"
            ) from None
        if fingerprint != self.catalog.fingerprint:
            raise ValueError(f"webshop state of goal {state.task_id!r} was taken on another catalog than this env's")
        if not isinstance(state.step_count, int) or not 0 <= state.step_count <= self.max_steps:
            raise ValueError(f"webshop state has step_count {state.step_count!r}, max_steps is {self.max_steps}")
        needs_asin = page in ("item", "sub", "done")
        valid = (
            page in PAGES
            and isinstance(page_num, int)
            and page_num >= 1
            and (keywords is None or isinstance(keywords, str))
            and (asin in self.catalog.products if needs_asin else asin is None)
            and (sub_page in SUB_PAGES.values()) == (page == "sub")
            and (notice is None or isinstance(notice, str))
        )
        if not valid:
            raise ValueError(f"malformed webshop EnvState: inconsistent session {state.payload!r}")
        self._session = Session(
            goal.goal_id, page, keywords, page_num, asin, options, sub_page, notice, state.step_count
        )
        return self._observe()

    # ------------------------------------------------------------------ expert
    def expert_actions(self) -> list[str]:
        """Search the instruction's key words, page to the goal product, open it, select the goal options, buy.

        Falls back to searching the product's title if the key words do not bring it into the top 50.
        """
        if self._session is None:
            raise RuntimeError("WebShopEnv.expert_actions before reset")
        goal = self.catalog.goals[int(self._session.goal_id)]
        for query in (expert_query(goal), goal.name.lower()):
            ranked = self.catalog.search(query)
            if goal.asin in ranked:
                break
        else:
            raise RuntimeError(f"the goal product {goal.asin} of goal {goal.goal_id} is not retrievable")
        rank = ranked.index(goal.asin)
        actions = [f"search[{query}]", *[f"click[{NEXT_PAGE}]"] * (rank // PRODUCTS_PER_PAGE)]
        actions.append(f"click[{goal.asin.lower()}]")
        product = self.catalog.products[goal.asin]
        values = [v for vals in product.options.values() for v in vals]
        for wanted in goal.options:
            value = _closest_option(wanted, values)
            if value is not None:
                actions.append(f"click[{value}]")
        return [*actions, f"click[{BUY_NOW}]"]


def _sep(*texts: str) -> str:
    """Visible texts as the original's simple text mode joins them (empty ones have no text node)."""
    return " [SEP] ".join(t.strip() for t in texts if t.strip())


def _closest_option(wanted: str, values: list[str]) -> str | None:
    """The product option value a goal option names: equal, equal once normalized, else the best fuzzy match."""
    normalized = wanted.strip().replace("/", " | ").lower()
    for value in values:
        if value in (wanted, normalized):
            return value
    scored = [(token_set_ratio(normalized, v), v) for v in values]
    best = max(scored, default=(0, None))
    return best[1] if best[0] > 85 else None
