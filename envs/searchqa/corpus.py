"""Search-QA data: passages, questions, and the BM25 retriever over a Lucene index (built once and cached).

Accepted formats:

* corpus: JSONL, one passage a line, with ``id`` and either ``title`` plus ``text``/``contents``, or ``contents``
  alone, where ``"Title"\\ntext`` (the Search-R1 wiki-18 layout) gives the title as its first line;
* questions: JSONL or parquet rows with the question in ``question`` (FlashRAG / Search-R1) or, where the row has
  none, in ``extra_info.question`` (verl-agent's processed Search-R1 parquet), and the gold answers in
  ``golden_answers`` (FlashRAG / Search-R1), ``answers``, ``answer``, ``reward_model.ground_truth.target``
  (Search-R1's and verl-agent's processed parquet) or ``extra_info.tools_kwargs.search.create_kwargs.ground_truth``;
  a gold answer that normalises to nothing (``"The"``, ``"."``) is dropped with a warning, and a row left with no
  gold answer fails;
* index: a Lucene directory; without a corpus, passage text comes from the index's stored ``raw`` or ``contents``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
from pathlib import Path
from typing import Any

from envs import _lucene, store
from envs._shared import file_digest
from envs.searchqa.answer import normalize_answer

DATA_DIR = Path(__file__).resolve().parent / "data"
DEFAULT_CORPUS = DATA_DIR / "corpus.jsonl"
DEFAULT_QUESTIONS = DATA_DIR / "questions"
# Bump when what goes into a cached index changes, so that old caches are not reused.
INDEX_FORMAT = "searchqa-bm25-v2"
_GOLD_KEYS = ("golden_answers", "answers", "answer")
logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Passage:
    """A retrievable passage."""

    docid: str
    title: str
    text: str

    def index_text(self) -> str:
        """What BM25 sees: title and text."""
        return f"{self.title}\n{self.text}" if self.title else self.text

    def render(self, rank: int) -> str:
        """The passage as Search-R1 shows it: ``Doc 1(Title: ...) text``."""
        return f"Doc {rank}(Title: {self.title}) {self.text}"


@dataclasses.dataclass(frozen=True)
class Question:
    """One task: a question and its gold answers."""

    qid: str
    question: str
    golden_answers: tuple[str, ...]
    data_source: str
    expert_queries: tuple[str, ...] = ()


def split_contents(contents: str) -> tuple[str, str]:
    """``'"Title"\\ntext'`` -> ``("Title", "text")``; contents without a line break have no title."""
    first, sep, rest = contents.partition("\n")
    if not sep:
        return "", contents.strip()
    return first.strip().strip('"').strip(), rest.strip()


def _passage(row: Any, where: str) -> Passage:
    if not isinstance(row, dict) or "id" not in row:
        raise ValueError(f"{where}: a passage must be a JSON object with an 'id'")
    body = row.get("text", row.get("contents"))
    if not isinstance(body, str):
        raise ValueError(f"{where}: passage {row['id']!r} needs a string 'contents' or 'text'")
    if "title" in row:
        return Passage(str(row["id"]), str(row["title"]).strip(), body.strip())
    title, text = split_contents(body)
    return Passage(str(row["id"]), title, text)


def _read_jsonl(path: Path):
    # Bytes decoded line by line: a text-mode read would raise a bare UnicodeDecodeError, naming no file or line.
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(f"{path}:{lineno}: not UTF-8 text ({err.reason} at byte {err.start})") from None
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({err.msg})") from None


def load_corpus(path: str | os.PathLike) -> dict[str, Passage]:
    """Read a JSONL corpus into ``{docid: Passage}``.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: a malformed line, a duplicate id or an empty file (the message names the file and line).
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"corpus file {path} not found")
    passages: dict[str, Passage] = {}
    for lineno, row in _read_jsonl(path):
        passage = _passage(row, f"{path}:{lineno}")
        if passage.docid in passages:
            raise ValueError(f"{path}:{lineno}: duplicate passage id {passage.docid!r}")
        passages[passage.docid] = passage
    if not passages:
        raise ValueError(f"corpus file {path} holds no passages")
    return passages


def resolve_questions(path: str | os.PathLike, split: str) -> Path:
    """The questions file of ``split``.

    ``path`` is a file (used whatever the split), a path with ``{split}`` in it, or a directory holding
    ``<split>.jsonl`` or ``<split>.parquet`` (the layout of Search-R1's and FlashRAG's data).
    """
    path = Path(str(Path(path).expanduser()).replace("{split}", split))
    if path.is_dir():
        found = [path / f"{split}{ext}" for ext in (".jsonl", ".parquet") if (path / f"{split}{ext}").is_file()]
        if not found:
            have = sorted(p.name for p in path.iterdir() if p.suffix in (".jsonl", ".parquet"))
            raise FileNotFoundError(f"no {split}.jsonl or {split}.parquet in questions directory {path}; has {have}")
        path = found[0]
    if not path.is_file():
        raise FileNotFoundError(f"questions file {path} not found")
    return path


def _rows(path: Path) -> list[tuple[str, Any]]:
    if path.suffix == ".jsonl":
        return [(f"{path}:{lineno}", row) for lineno, row in _read_jsonl(path)]
    if path.suffix == ".parquet":
        import pandas as pd

        try:
            frame = pd.read_parquet(path)
        except Exception as err:
            raise ValueError(f"cannot read parquet questions file {path}: {err}") from err
        # a column that some rows lack reads back as None or NaN in those rows
        records = [{k: v for k, v in row.items() if not _missing(v)} for row in frame.to_dict("records")]
        return [(f"{path} row {i}", row) for i, row in enumerate(records)]
    raise ValueError(f"questions file {path} must be .jsonl or .parquet")


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _strings(value: Any) -> list[str] | None:
    if hasattr(value, "tolist"):  # numpy arrays from parquet
        value = value.tolist()
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _golds(row: dict) -> list[str] | None:
    for key in _GOLD_KEYS:
        if row.get(key) is not None:
            return _strings(row[key])
    create = _mapping(_mapping(_mapping(row.get("extra_info")).get("tools_kwargs")).get("search")).get("create_kwargs")
    for truth in (_mapping(row.get("reward_model")).get("ground_truth"), _mapping(create).get("ground_truth")):
        if isinstance(truth, dict) and truth.get("target") is not None:
            return _strings(truth["target"])
        if truth is not None and _strings(truth) is not None:
            return _strings(truth)
    return None


def _question_text(row: Any) -> str | None:
    """The row's question: its own ``question``, else ``extra_info.question`` (verl-agent keeps it only there)."""
    if not isinstance(row, dict):
        return None
    for text in (row.get("question"), _mapping(row.get("extra_info")).get("question")):
        if isinstance(text, str) and text.strip():
            return text.strip()
    return None


def _question(row: Any, where: str, default_source: str, index: int, dropped: list[str]) -> Question:
    text = _question_text(row)
    if text is None:
        raise ValueError(f"{where}: a question row needs a non-empty string 'question' (or 'extra_info.question')")
    golds = [g.strip() for g in (_golds(row) or []) if g.strip()]
    if not golds:
        raise ValueError(f"{where}: no gold answers (expected a list of strings in one of {_GOLD_KEYS})")
    # a gold answer that normalises to nothing would match every answer that does too ("a", "."): dropped; the
    # Unicode rule strips a superset of the ASCII one, so no protocol's normalisation can leave one empty
    kept = [gold for gold in golds if normalize_answer(gold, "unicode")]
    dropped.extend(f"{where}: {gold!r}" for gold in golds if gold not in kept)
    if not kept:
        raise ValueError(
            f"{where}: every gold answer ({golds}) is empty once normalised (articles and punctuation removed)"
        )
    qid = row.get("id")
    if qid is None:
        qid = (row.get("extra_info") or {}).get("index", index)
    meta = row.get("metadata")
    queries = _strings(meta.get("expert_queries")) if isinstance(meta, dict) and "expert_queries" in meta else None
    source = row.get("data_source") or default_source
    return Question(str(qid), text, tuple(kept), str(source), tuple(queries or ()))


def load_questions(path: str | os.PathLike, split: str) -> list[Question]:
    """Read the questions of ``split`` (see :func:`resolve_questions`).

    A row without ``data_source`` gets the name of the file's directory (FlashRAG keeps ``nq/test.jsonl``).
    Task ids are the rows' ``id`` (else ``extra_info.index``, else the row number); where ids repeat, as when
    several datasets are merged into one file, they become ``<data_source>/<id>``.

    Raises:
        FileNotFoundError: no such file or split.
        ValueError: a malformed row, ids that are not unique, or no questions.
    """
    path = resolve_questions(path, split)
    dropped: list[str] = []
    questions = [_question(row, where, path.parent.name, i, dropped) for i, (where, row) in enumerate(_rows(path))]
    if dropped:
        logger.warning(
            "Search-QA: dropped %d gold answers that are empty once normalised (their rows keep their other gold "
            "answers): %s%s",
            len(dropped),
            "; ".join(dropped[:5]),
            " ..." if len(dropped) > 5 else "",
        )
    if not questions:
        raise ValueError(f"questions file {path} holds no questions")
    if len({q.qid for q in questions}) < len(questions):
        questions = [dataclasses.replace(q, qid=f"{q.data_source}/{q.qid}") for q in questions]
        seen: set[str] = set()
        for q in questions:
            if q.qid in seen:
                raise ValueError(f"questions file {path}: duplicate question id {q.qid!r}")
            seen.add(q.qid)
    return questions


def prepare_command(corpus_path: str | os.PathLike, out_dir: str | os.PathLike) -> str:
    """The command line that prepares ``corpus_path`` into ``out_dir`` (:mod:`envs.searchqa.prepare`)."""
    return f"python -m envs.searchqa.prepare --corpus-path {corpus_path} --out {out_dir} --threads N"


def prepare_index(
    corpus_path: str | os.PathLike, out_dir: str | os.PathLike, threads: int = 0, store_raw: bool = True
) -> dict:
    """Index ``corpus_path`` into a store at ``out_dir`` (:func:`envs.store.build`) with ``threads`` threads (0: one
    per CPU), reading the corpus one line at a time.

    Args:
        corpus_path: The JSONL corpus.
        out_dir: The index directory to create.
        threads: Indexing threads.
        store_raw: Store each passage (id, title, text) in the index: how env processes read passages without a
            corpus in memory. False for an index whose passages come from the corpus in memory.

    Returns:
        ``{"passages", "seconds", "threads", "index_dir"}``.

    Raises:
        FileNotFoundError: no corpus file.
        FileExistsError: ``out_dir`` exists and is not empty.
        ValueError: a malformed corpus line or a duplicate id (named by file and line).
    """
    corpus_path = Path(corpus_path).expanduser().resolve()
    if not corpus_path.is_file():
        raise FileNotFoundError(f"corpus file {corpus_path} not found")

    def fill(builder: store.StoreBuilder) -> None:
        seen: set[str] = set()
        for lineno, row in _read_jsonl(corpus_path):
            p = _passage(row, f"{corpus_path}:{lineno}")
            if p.docid in seen:
                raise ValueError(f"{corpus_path}:{lineno}: duplicate passage id {p.docid!r}")
            seen.add(p.docid)
            # "contents" is what BM25 indexes; title and text come back from the stored raw document
            doc = {"id": p.docid, "contents": p.index_text()}
            builder.add_doc({**doc, "title": p.title, "text": p.text} if store_raw else doc)
        if not seen:
            raise ValueError(f"corpus file {corpus_path} holds no passages")

    out = store.build(out_dir, "searchqa", INDEX_FORMAT, fill, {"corpus": str(corpus_path)}, threads, None, store_raw)
    manifest = json.loads((out / store.MANIFEST).read_text())
    return {
        "passages": manifest["num_docs"],
        "seconds": manifest["build_seconds"],
        "threads": manifest["threads"],
        "index_dir": str(out),
    }


def cached_index(corpus_path: Path, corpus_digest: str, cache_dir: Path) -> Path:
    """The BM25 index of a small corpus in ``cache_dir/<hash of the corpus>``, prepared on first use
    (:func:`envs.store.cached`); its passages are read from the corpus in memory."""
    key = hashlib.sha256(f"{INDEX_FORMAT}:{corpus_digest}".encode()).hexdigest()[:24]
    out = cache_dir / key
    size = corpus_path.stat().st_size
    build = lambda: prepare_index(corpus_path, out, threads=1, store_raw=False)  # noqa: E731
    return store.cached(out, size, prepare_command(corpus_path, out), build, "searchqa", INDEX_FORMAT).index_dir


def _raw_passage(docid: str, raw: str) -> Passage | None:
    """The passage in a stored ``raw`` document: its JSON's text (or contents), or the raw text itself if it is no
    JSON; None for JSON without either."""
    try:
        row = json.loads(raw)
    except json.JSONDecodeError:
        return Passage(docid, *split_contents(raw))
    if isinstance(row, dict) and isinstance(row.get("text", row.get("contents")), str):
        return _passage({**row, "id": docid}, "stored document")
    return None


def _stored_passage(doc) -> Passage | None:
    """The passage text an index stores for ``doc`` (its ``raw`` JSON or its ``contents`` field), if any."""
    raw = doc.raw()
    passage = _raw_passage(doc.docid(), raw) if raw else None
    if passage is not None:
        return passage
    contents = doc.contents()
    if contents:
        return Passage(doc.docid(), *split_contents(contents))
    return None


class Retriever:
    """BM25 over a Lucene index; passage text from a corpus in memory, or from the index's stored documents.

    Args:
        index_dir: The Lucene index.
        passages: The corpus the index was built from, or None to read the text the index stores.
        corpus_path: Where ``passages`` came from (for error messages).
        corpus_digest: :func:`file_digest` of ``corpus_path`` (part of :attr:`fingerprint`).
        built_from_corpus: The index was built here from the corpus, so the corpus alone identifies it (index
            files built on different machines need not be byte-identical).

    Attributes:
        fingerprint: Identifies the index and corpus: equal in every process that opened the same data.

    Raises:
        FileNotFoundError: ``index_dir`` is no Lucene index.
        ValueError: the index stores no text and no corpus is given, or index and corpus do not match.
    """

    def __init__(
        self,
        index_dir: Path,
        passages: dict[str, Passage] | None = None,
        corpus_path: Path | None = None,
        corpus_digest: str = "",
        built_from_corpus: bool = False,
    ):
        self.index_dir = index_dir
        self.passages = passages
        self.corpus_path = corpus_path
        self.searcher = _lucene.open_searcher(index_dir)
        num_docs = self.searcher.num_docs
        if num_docs == 0:
            raise ValueError(f"Lucene index {index_dir} is empty")
        samples = sorted({0, num_docs // 2, num_docs - 1})
        stored = [_stored_passage(self.searcher.doc(i)) for i in samples]
        if passages is None:
            if any(p is None for p in stored):
                raise ValueError(
                    f"Lucene index {index_dir} stores no passage text (neither raw nor contents); "
                    "pass corpus_path= the JSONL corpus it was built from"
                )
        else:
            if num_docs != len(passages):
                raise ValueError(
                    f"Lucene index {index_dir} has {num_docs} documents, corpus {corpus_path} {len(passages)}"
                )
            for i, p in zip(samples, stored, strict=True):
                docid = self.searcher.doc(i).docid()
                if docid not in passages:
                    raise ValueError(f"document {docid!r} of Lucene index {index_dir} is not in corpus {corpus_path}")
                if p is not None and p.text != passages[docid].text:
                    raise ValueError(f"document {docid!r} differs between Lucene index {index_dir} and {corpus_path}")
        if built_from_corpus:
            index_id = INDEX_FORMAT
        elif store.is_store(index_dir):  # prepared: its content fingerprint, equal wherever it was prepared
            index_id = store.open_store(index_dir, "searchqa", INDEX_FORMAT, "").fingerprint
        else:  # a prebuilt index from elsewhere
            index_id = store.directory_digest(index_dir)
        self.fingerprint = hashlib.sha256(f"{index_id}:{corpus_digest}".encode()).hexdigest()

    remote = False  # passages come from this process's index: a fork searches again, with the same result

    def search(self, query: str, k: int) -> list[Passage]:
        """The top-``k`` passages for ``query`` (fewer if fewer documents match)."""
        return [passage for passage, _ in self.scored(query, k)]

    def scored(self, query: str, k: int) -> list[tuple[Passage, float]]:
        """The top-``k`` passages for ``query`` with their BM25 scores, best first."""
        return [(self._hit_passage(hit), float(hit.score)) for hit in self.searcher.search(query, k=k)]

    def _hit_passage(self, hit) -> Passage:
        # Without a corpus in memory, read the passage from the hit's own stored document: looking it up again by
        # its id (a term query per passage) made a search on a 200 k-passage index tens of times slower.
        stored = None if self.passages is not None else hit.lucene_document
        raw = stored.get("raw") if stored is not None else None
        passage = _raw_passage(hit.docid, raw) if raw else None
        return passage if passage is not None else self._passage(hit.docid)

    def _passage(self, docid: str) -> Passage:
        if self.passages is not None:
            if docid not in self.passages:
                raise KeyError(f"document {docid!r} of Lucene index {self.index_dir} is not in {self.corpus_path}")
            return self.passages[docid]
        passage = _stored_passage(self.searcher.doc(docid))
        if passage is None:
            raise ValueError(f"document {docid!r} of Lucene index {self.index_dir} has no stored text")
        return passage


def open_retriever(
    corpus_path: str | os.PathLike | None = None,
    index_dir: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> Retriever:
    """Open BM25 retrieval over a corpus, an index, or both (neither: the shipped corpus).

    Args:
        corpus_path: JSONL corpus; without ``index_dir`` its index is built once into ``cache_dir``.
        index_dir: A prebuilt Lucene index; without ``corpus_path`` it must store the passage text.
        cache_dir: Where built indexes are kept (default ``_lucene.default_cache_dir("searchqa")``).
    """
    if corpus_path is None and index_dir is None:
        corpus_path = DEFAULT_CORPUS
    if index_dir is not None and not any(Path(index_dir).expanduser().glob("segments_*")):
        raise store.StoreMissingError(
            f"no Lucene index at {index_dir}: build it once, outside the env workers, with "
            f"{prepare_command(corpus_path or 'CORPUS.jsonl', index_dir)}"
        )
    if index_dir is not None and store.is_store(index_dir):  # another env's store, or an old format, fails here
        store.open_store(index_dir, "searchqa", INDEX_FORMAT, prepare_command(corpus_path or "CORPUS.jsonl", index_dir))
    passages, digest = None, ""
    if corpus_path is not None:
        corpus_path = Path(corpus_path).expanduser().resolve()
        if corpus_path.is_file() and corpus_path.stat().st_size > store.AUTO_PREPARE_BYTES:
            # every env process would hold the whole corpus (2.1 GB per 2 M passages) and build its index
            out = index_dir or "INDEX_DIR"
            raise ValueError(
                f"corpus {corpus_path} is {corpus_path.stat().st_size / 2**20:.0f} MiB, too big to hold in every env "
                f"process: prepare it once with\n  {prepare_command(corpus_path, out)}\nand give index_dir={out} "
                "alone (passages are then read from the index, shared through the page cache)"
            )
        passages = load_corpus(corpus_path)
        digest = file_digest(corpus_path)
    built = index_dir is None
    if built:
        cache = Path(cache_dir).expanduser() if cache_dir is not None else _lucene.default_cache_dir("searchqa")
        index_dir = cached_index(corpus_path, digest, cache)
    return Retriever(Path(index_dir).expanduser(), passages, corpus_path, digest, built_from_corpus=built)
