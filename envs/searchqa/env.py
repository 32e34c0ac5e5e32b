"""Search-QA environment: search a BM25 knowledge base, then answer (Search-R1's task).

Each agent turn is a ``<search>query</search>`` (the reply is the top-k passages inside
``<information>...</information>``) or an ``<answer>...</answer>`` (ends the episode; reward 1.0 on an exact match
with a gold answer after SQuAD normalisation). Any other turn gets the protocol's feedback and still counts as a
step. How a reply is read and how results are shown is the protocol's (``protocol=``: ``default``, ``search_r1``,
``verl_agent``; :mod:`envs.searchqa.protocol`, :mod:`envs.searchqa.dialect`).

The state is the question and the parsed turns so far; BM25 is deterministic, so :meth:`SearchQAEnv.restore`
only reruns the last turn to rebuild its observation.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

from envs import protocol as protocols
from envs._lucene import clip_query
from envs._shared import abs_path, load_once
from envs.base import EnvState, StepReturn, TextEnv, UnknownTaskError
from envs.searchqa import dialect as dialects
from envs.searchqa.answer import NORMALIZATIONS, exact_match, f1_score
from envs.searchqa.corpus import (
    DEFAULT_CORPUS,
    DEFAULT_QUESTIONS,
    Question,
    Retriever,
    open_questions,
    open_retriever,
    resolve_questions,
)
from envs.searchqa.dialect import Action
from envs.searchqa.protocol import PROTOCOLS
from envs.searchqa.remote import RemoteRetriever

_KINDS = ("search", "answer", "invalid")


class SearchQAEnv(TextEnv):
    """Question answering with a BM25 search tool (Search-R1 style).

    With no arguments it plays the questions shipped in ``envs/searchqa/data`` over the shipped corpus.

    Args:
        corpus_path: JSONL corpus (see :mod:`envs.searchqa.corpus`); None: the shipped one, unless ``index_dir``
            is given, whose stored text is then used.
        questions_path: Questions file, ``{split}`` pattern or directory of ``<split>.jsonl|parquet``; None: the
            shipped questions.
        index_dir: Prebuilt Lucene index; None: the corpus's index, built once into ``cache_dir``.
        split: Question split (the shipped data has ``train`` and ``test``).
        protocol: The named protocol whose settings the next seven default to (:mod:`envs.searchqa.protocol`).
        max_steps: Turns before the episode is truncated.
        topk: Passages returned per search.
        dialect: How replies are parsed and results shown: ``prover``, ``search_r1``, ``verl_agent``.
        prompt_template: The first observation; ``{question}``, ``{max_steps}`` and ``{topk}`` are filled in.
        question_mark: End the question with ``?`` where it lacks one (Search-R1's data scripts do).
        normalization: EM/F1 punctuation rule, ``unicode`` or ``ascii`` (:func:`.answer.normalize_answer`).
        invalid_penalty: Taken off the final reward per invalid turn (``em``, ``won`` are not changed).
        cache_dir: Where built indexes are cached (default ``~/.cache/prover_verl/searchqa``).
        retriever_url: A retrieval server with Search-R1's ``POST /retrieve`` API (Search-R1's e5 server, or
            ``python -m envs.searchqa.server``) instead of an index in this process; then no corpus or index is
            given. A search's reply is then kept in the env's state, so a fork restores it without asking again.
        retriever_timeout_s: Seconds one request to ``retriever_url`` may take.
        retriever_retries: Further tries of a failed or timed-out request.
        retriever_api: The request form ``retriever_url`` takes: ``search_r1`` (``{"queries": [...]}``),
            ``verl_agent`` (``{"query": ...}``, verl-agent's server) or ``auto`` (the first, else the second where the
            server refuses it with a 422; :class:`~envs.searchqa.remote.RemoteRetriever`). This project's server takes
            both.

    Raises:
        FileNotFoundError: a data file, split or index is missing (the message names it).
        ValueError: a malformed data file, or an index that cannot serve passages.
    """

    name = "searchqa"

    def __init__(
        self,
        corpus_path: str | os.PathLike | None = None,
        questions_path: str | os.PathLike | None = None,
        index_dir: str | os.PathLike | None = None,
        split: str = "train",
        protocol: str = protocols.DEFAULT,
        max_steps: int | None = None,
        topk: int | None = None,
        dialect: str | None = None,
        prompt_template: str | None = None,
        question_mark: bool | None = None,
        normalization: str | None = None,
        invalid_penalty: float | None = None,
        cache_dir: str | os.PathLike | None = None,
        retriever_url: str | None = None,
        retriever_timeout_s: float = 10.0,
        retriever_retries: int = 2,
        retriever_api: str = "auto",
    ):
        given = {
            "max_steps": max_steps,
            "topk": topk,
            "dialect": dialect,
            "prompt_template": prompt_template,
            "question_mark": question_mark,
            "normalization": normalization,
            "invalid_penalty": invalid_penalty,
        }
        self.protocol = protocol
        self.settings = protocols.settings(self.name, PROTOCOLS, protocol, given)
        super().__init__(self.settings["max_steps"])
        self.topk = self.settings["topk"]
        if not isinstance(self.topk, int) or self.topk < 1:
            raise ValueError(f"topk must be an integer >= 1, got {self.topk!r}")
        self.dialect = dialects.dialect(self.settings["dialect"])
        if self.settings["normalization"] not in NORMALIZATIONS:
            raise ValueError(f"normalization must be one of {NORMALIZATIONS}, got {self.settings['normalization']!r}")
        if not isinstance(self.settings["invalid_penalty"], int | float) or self.settings["invalid_penalty"] < 0:
            raise ValueError(f"invalid_penalty must be a number >= 0, got {self.settings['invalid_penalty']!r}")
        self._first_observation("a question?")  # a template that cannot be filled fails here, not at reset
        self.split = split
        # the questions first: a split or file typo must fail in seconds, not after the corpus is indexed
        qfile = resolve_questions(questions_path if questions_path is not None else DEFAULT_QUESTIONS, split)
        # by task id: a big file's questions are read from a store shared by the node's env processes
        self._questions: Mapping[str, Question] = open_questions(qfile, split, cache_dir)
        self.questions_file = qfile
        self._data_fingerprint: str | None = None  # computed when first asked
        if retriever_url is not None:
            if corpus_path is not None or index_dir is not None:
                raise ValueError("give either retriever_url or corpus_path/index_dir, not both")
            self.retriever: Retriever | RemoteRetriever = RemoteRetriever(
                retriever_url, retriever_timeout_s, retriever_retries, api=retriever_api
            )
        else:
            # keyed by the data; where its index is cached does not matter
            key = ("searchqa retriever", abs_path(corpus_path), abs_path(index_dir))
            read = (DEFAULT_CORPUS if corpus_path is None and index_dir is None else corpus_path, index_dir)
            self.retriever = load_once(key, lambda: open_retriever(corpus_path, index_dir, cache_dir), read)
        self._obs = ""  # the reply to the last turn, kept in the state where the retriever is remote
        self._question: Question | None = None
        self._turns: list[Action] = []

    # ------------------------------------------------------------------ tasks
    def data_source(self) -> str:
        passages = getattr(self.retriever, "url", None) or self.retriever.corpus_path or self.retriever.index_dir
        return f"questions {self.questions_file}, passages {passages}"

    def task_ids(self) -> list[str]:
        return list(self._questions)

    def data_fingerprint(self) -> str:
        """The retriever's (index and corpus) and the split's questions with their gold answers."""
        if self._data_fingerprint is None:
            digest = hashlib.sha256(self.retriever.fingerprint.encode())
            stored = getattr(self._questions, "fingerprint", None)
            if stored is not None:  # a node's question store: its content fingerprint, without reading every row
                digest.update(f"questions store {stored}".encode())
            else:
                for q in self._questions.values():
                    digest.update("\x1e".join([q.qid, q.question, *q.golden_answers]).encode() + b"\x1d")
            self._data_fingerprint = digest.hexdigest()[:24]
        return self._data_fingerprint

    def task_category(self, task_id: str) -> str:
        """The question's ``data_source`` (``nq_mini``, ``hotpot_mini``, ``nq``, ``hotpotqa``, ...)."""
        return self._task(task_id).data_source

    def question(self, task_id: str) -> Question:
        """The question, gold answers and data source of a task."""
        return self._task(task_id)

    def has_task(self, task_id: str) -> bool:
        return task_id in self._questions

    def unknown_task(self, task_id: str) -> UnknownTaskError:
        return UnknownTaskError(f"no question {task_id!r} in split '{self.split}' ({len(self._questions)} questions)")

    def _task(self, task_id: str) -> Question:
        return self._questions[self.check_task(task_id)]

    # ------------------------------------------------------------------ episode
    def _start(self, task_id: str) -> tuple[str, dict[str, Any]]:
        self._question, self._turns = self._task(task_id), []
        return self._observe()

    def _step(self, action: str) -> StepReturn:
        if self._question is None:
            raise RuntimeError("SearchQAEnv.step before reset or restore")
        if self._over():
            raise RuntimeError("SearchQAEnv.step after the episode ended; reset or restore first")
        turn = self.dialect.parse(action)
        self._turns.append(turn)
        try:
            obs, info = self._observe()  # sets self._obs only once the reply is there
        except BaseException:
            self._turns.pop()  # a search that raised (a retriever down): the step did not happen
            raise
        terminated = turn.kind == "answer"
        truncated = not terminated and len(self._turns) >= self.max_steps
        return obs, self._reward(info) if terminated or truncated else 0.0, terminated, truncated, info

    def _reward(self, info: dict[str, Any]) -> float:
        """The episode's reward: EM, less the protocol's penalty per invalid turn."""
        return info["em"] - self.settings["invalid_penalty"] * sum(not t.valid for t in self._turns)

    def _over(self) -> bool:
        return bool(self._turns) and (self._turns[-1].kind == "answer" or len(self._turns) >= self.max_steps)

    def _observe(self, reply: str | None = None) -> tuple[str, dict[str, Any]]:
        """Observation and info of the current state (the reply to the last turn: ``reply`` if given)."""
        q = self._question
        answer = self._turns[-1].content if self._turns and self._turns[-1].kind == "answer" else None
        rule = self.settings["normalization"]
        em = exact_match(answer, q.golden_answers, rule) if answer is not None else 0.0
        info = {
            "won": em == 1.0,
            "admissible_actions": None,
            "task": q.question,
            "step": len(self._turns),
            "em": em,
            "f1": f1_score(answer, q.golden_answers, rule) if answer is not None else 0.0,
            "answer": answer,
            "data_source": q.data_source,
            "num_searches": sum(t.kind == "search" for t in self._turns),
            "action_type": self._turns[-1].kind if self._turns else None,
            "invalid_turns": sum(not t.valid for t in self._turns),
        }
        self._obs = reply if reply is not None else self._reply(self._turns[-1] if self._turns else None)
        return self._obs, info

    def _reply(self, turn: Action | None) -> str:
        if turn is None:
            return self._first_observation(self._question.question)
        if turn.kind == "invalid":
            return self.dialect.invalid(turn)
        if turn.kind == "answer":
            return self.dialect.answered(turn)
        if len(self._turns) >= self.max_steps and not self.dialect.searches_on_last_turn:
            return ""  # the upstream harnesses end the episode before running the last turn's search
        return self.search(turn.content)

    def _first_observation(self, question: str) -> str:
        question = question.strip()
        if self.settings["question_mark"] and not question.endswith("?"):
            question += "?"
        fields = {"question": question, "max_steps": self.max_steps, "topk": self.topk}
        try:
            return self.settings["prompt_template"].format_map(fields)
        except (KeyError, IndexError, ValueError, AttributeError) as err:
            raise ValueError(
                f"searchqa prompt_template cannot be filled ({type(err).__name__}: {err}); it may use {{question}}, "
                "{max_steps} and {topk}, and must write a literal brace as {{ or }}"
            ) from None

    def search(self, query: str) -> str:
        """The observation a ``<search>query</search>`` turn gets."""
        query, clipped = clip_query(query)
        return self.dialect.results(self.retriever.search(query, self.topk), clipped)

    # ------------------------------------------------------------------ fork
    def _fingerprint(self, q: Question) -> str:
        """Data this state's observations depend on: index, corpus, top-k and the question itself."""
        protocol = [str(self.settings[key]) for key in sorted(self.settings) if key != "max_steps"]
        text = "\x1f".join([self.retriever.fingerprint, *protocol, q.qid, q.question, *q.golden_answers])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def snapshot(self) -> EnvState:
        if self._question is None:
            raise RuntimeError("SearchQAEnv.snapshot before reset or restore")
        turns = tuple((t.kind, t.content, t.valid) for t in self._turns)
        payload = (self._fingerprint(self._question), turns)
        if self.retriever.remote:  # the server's answer is part of the state: a fork must not ask again
            payload += (self._obs,)
        return EnvState(self.name, self._question.qid, len(turns), payload)

    def restore(self, state: EnvState) -> tuple[str, dict[str, Any]]:
        self._check_state(state)
        q = self._task(state.task_id)
        try:
            fingerprint, raw_turns, *kept = state.payload
            turns = [Action(kind, content, valid) for kind, content, valid in raw_turns]
        except (TypeError, ValueError):
            kept = None
        if kept is not None and len(kept) in (0, 1) and len(kept) != int(self.retriever.remote):
            where = ("a local index", "a retrieval server")
            raise ValueError(
                f"searchqa state of {state.task_id!r} was taken with {where[len(kept) > 0]}, this env searches "
                f"{where[self.retriever.remote]}: another retriever (a server's answers are kept in its states)"
            )
        if kept is not None and fingerprint != self._fingerprint(q):
            raise ValueError(
                f"searchqa state of {state.task_id!r} was taken on other data, another retriever or other protocol "
                "settings (topk, dialect, prompt, normalization, penalty) than this env has"
            )
        if kept is None or len(kept) != int(self.retriever.remote) or not all(isinstance(o, str) for o in kept):
            raise ValueError(
                "malformed searchqa EnvState payload: expected (fingerprint, ((kind, text, valid), ...)), and the last "
                "observation where the retriever is remote"
            )
        if len(turns) != state.step_count or len(turns) > self.max_steps:
            raise ValueError(
                f"searchqa state has {len(turns)} turns, step_count {state.step_count}, max_steps {self.max_steps}"
            )
        if any(t.kind not in _KINDS or not isinstance(t.valid, bool) for t in turns) or any(
            t.kind == "answer" for t in turns[:-1]
        ):
            raise ValueError("malformed searchqa EnvState: unknown turn kind, or a turn after the answer")
        self._question, self._turns = q, turns
        return self._observe(kept[0] if kept else None)

    # ------------------------------------------------------------------ expert
    def expert_actions(self) -> list[str]:
        """Searches for the supporting passages (the question's expert queries, else the question), then the gold."""
        if self._question is None:
            raise RuntimeError("SearchQAEnv.expert_actions before reset")
        q = self._question
        queries = q.expert_queries or (q.question,)
        return [f"<search>{query}</search>" for query in queries] + [f"<answer>{q.golden_answers[0]}</answer>"]
