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

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import logging
import math
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from envs import _lucene, store
from envs._shared import file_digest, load_once
from envs.searchqa.answer import normalize_answer

DATA_DIR = Path(__file__).resolve().parent / "data"
DEFAULT_CORPUS = DATA_DIR / "corpus.jsonl"
DEFAULT_QUESTIONS = DATA_DIR / "questions"
# Bump when what goes into a cached index changes, so that old caches are not reused.
INDEX_FORMAT = "searchqa-bm25-v2"
PASSAGES_FORMAT = "searchqa-passages-v1"  # a corpus's rows by id, beside a prebuilt index (Search-R1's BM25)
QUESTIONS_FORMAT = "searchqa-questions-v1"
# Questions files up to this size are parsed in each env process (a few MB of objects); bigger ones (Search-R1's
# NQ + HotpotQA train split: ~300 MB of question objects) are read by task id from a store built once per node.
QUESTIONS_IN_MEMORY_BYTES = 4 << 20
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

    def contents(self) -> str:
        """The passage as a wiki-18 corpus line's ``contents``: ``'"Title"\\ntext'``."""
        return f'"{self.title}"\n{self.text}'


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


# ---------------------------------------------------------------- stores built once per node (envs/store.py)
def _build_args(kind: str, **flags: Any) -> list[str]:
    """The arguments of ``python`` that build a ``kind`` store (``passages``, ``questions``) with
    :mod:`envs.searchqa.build_store`."""
    return ["-m", "envs.searchqa.build_store", kind, *(f"--{k.replace('_', '-')}={v}" for k, v in flags.items())]


@contextlib.contextmanager
def _build_lock(out: Path) -> Iterator[None]:
    """Held while one process builds (or checks for) the store at ``out``: the env processes of a node that start
    together build it once, the others wait for it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _file_key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).hexdigest()[:24]


def _stamp(path: Path) -> tuple[str, int, int]:
    """A file's identity without reading it (a 14 GB corpus takes a minute to hash): path, size, mtime."""
    stat = path.stat()
    return str(path), stat.st_size, stat.st_mtime_ns


def _parser_digest() -> str:
    """Digest of the code that parses questions (this module and answer normalisation): a questions store written by
    another version of it is not reused."""
    from envs.searchqa import answer

    digest = hashlib.sha256()
    for module in (__file__, answer.__file__):
        digest.update(Path(module).read_bytes())
    return digest.hexdigest()[:16]


class _StoreTable(Mapping):
    """One table of a store as a read-only mapping by key, rows read through the page cache; iteration yields the
    keys in insertion (file) order. Subclasses name the table and build their values from its rows.

    Attributes:
        fingerprint: The store's content fingerprint.
    """

    _table: str

    def __init__(self, opened: store.Store):
        self._store, self.fingerprint = opened, opened.fingerprint

    def _row(self, key: object) -> tuple | None:
        return self._store.get(self._table, key) if isinstance(key, str) else None

    def __contains__(self, key: object) -> bool:
        return self._row(key) is not None

    def __len__(self) -> int:
        return self._store.count(self._table)

    def __iter__(self) -> Iterator[str]:
        return iter(self._store.column(self._table, "key", order_by="rowid"))


class QuestionStore(_StoreTable):
    """The questions of one split, read by task id from a store (:func:`open_questions`), none held in memory;
    iteration yields the task ids in file order.

    Attributes:
        path: The questions file the store was built from.
        fingerprint: The store's content fingerprint.
    """

    _table = "questions"

    def __init__(self, opened: store.Store, path: Path):
        super().__init__(opened)
        self.path = path

    def __getitem__(self, qid: str) -> Question:
        row = self._row(qid)
        if row is None:
            raise KeyError(qid)
        question, golds, source, queries = row
        return Question(qid, question, tuple(json.loads(golds)), source, tuple(json.loads(queries)))


def questions_store_dir(path: Path, split: str, cache_dir: Path) -> Path:
    """Where the questions store of ``path``'s ``split`` is kept under ``cache_dir``."""
    return cache_dir / "questions" / _file_key(QUESTIONS_FORMAT, _parser_digest(), split, *_stamp(path))


def open_questions(
    path: str | os.PathLike, split: str, cache_dir: str | os.PathLike | None = None
) -> Mapping[str, Question]:
    """The questions of ``split`` (see :func:`resolve_questions`) by task id, in file order.

    A file of at most :data:`QUESTIONS_IN_MEMORY_BYTES` is parsed in this process (once per process). A bigger one
    is parsed once per node, in a child process (its peak memory is not left in this one's heap), into a SQLite
    store under ``cache_dir`` that every env process reads by task id through the page cache
    (:class:`QuestionStore`).

    Raises:
        FileNotFoundError: no such file or split.
        ValueError: a malformed row, ids that are not unique, or no questions (the message names the file).
    """
    qfile = resolve_questions(path, split).resolve()
    if qfile.stat().st_size <= QUESTIONS_IN_MEMORY_BYTES:
        key = ("searchqa questions", str(qfile), split)
        return load_once(key, lambda: {q.qid: q for q in load_questions(qfile, split)}, (qfile,))
    cache = Path(cache_dir).expanduser() if cache_dir is not None else _lucene.default_cache_dir("searchqa")
    out = questions_store_dir(qfile, split, cache)
    args = _build_args("questions", questions_path=qfile, split=split, out=out)
    with _build_lock(out):
        if not store.is_store(out):
            root = str(Path(__file__).resolve().parents[2])  # the child imports this checkout's envs
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
            done = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env)
            if done.returncode != 0:
                lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
                raise ValueError(f"building the questions store of {qfile} failed: {lines[-1]}")
    opened = store.open_store(out, "searchqa-questions", QUESTIONS_FORMAT, " ".join(["python", *args]))
    return QuestionStore(opened, qfile)


class PassageStore(_StoreTable):
    """A corpus's passages by id, from a SQLite store built once beside a prebuilt index that stores no text
    (Search-R1's BM25 index: pyserini ``JsonCollection``, ids only), read through the page cache.

    Attributes:
        root: The store.
        fingerprint: Its content fingerprint (the corpus's rows in file order).
    """

    _table = "passages"

    def __init__(self, opened: store.Store):
        super().__init__(opened)
        self.root = opened.root

    def document(self, docid: str) -> dict | None:
        """The corpus row of ``docid`` as the corpus has it (``{"id", "contents", ...}``), or None."""
        row = self._row(docid)
        return None if row is None else json.loads(row[0])

    def __getitem__(self, docid: str) -> Passage:
        row = self.document(docid)
        if row is None:
            raise KeyError(docid)
        return _passage(row, f"passage store {self.root}")


def passage_store_dir(corpus_path: Path, index_dir: Path, cache_dir: Path) -> Path:
    """Where the passage store of ``corpus_path`` beside ``index_dir`` is kept under ``cache_dir``."""
    index = (str(index_dir.resolve()), store.directory_digest(index_dir))
    return cache_dir / "passages" / _file_key(PASSAGES_FORMAT, *_stamp(corpus_path), *index)


def passages_command(corpus_path: Path, index_dir: Path, out: Path) -> str:
    """The command line that builds the passage store of ``corpus_path`` beside ``index_dir`` into ``out``."""
    return " ".join(["python", *_build_args("passages", corpus_path=corpus_path, index_dir=index_dir, out=out)])


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
    """BM25 over a Lucene index; passage text from a corpus in memory, a passage store, or the index's stored
    documents.

    Args:
        index_dir: The Lucene index.
        passages: The corpus the index was built from (a dict in memory or a :class:`PassageStore`), or None to read
            the text the index stores.
        corpus_path: Where ``passages`` came from (for error messages).
        corpus_digest: :func:`file_digest` of ``corpus_path`` (part of :attr:`fingerprint`).
        built_from_corpus: The index was built here from the corpus, so the corpus alone identifies it (index
            files built on different machines need not be byte-identical).
        full_check: Check every byte of the index against Lucene's checksums (None: where it is small; see
            :func:`envs._lucene.open_searcher`).
        rebuild: How to rebuild the index, for the error a corrupt one raises.

    Attributes:
        fingerprint: Identifies the index and corpus: equal in every process that opened the same data.

    Raises:
        FileNotFoundError: ``index_dir`` is no Lucene index.
        envs._lucene.CorruptIndexError: the index fails its checksums or cannot be read.
        ValueError: the index stores no text and no corpus is given, or index and corpus do not match.
    """

    def __init__(
        self,
        index_dir: Path,
        passages: Mapping[str, Passage] | None = None,
        corpus_path: Path | None = None,
        corpus_digest: str = "",
        built_from_corpus: bool = False,
        full_check: bool | None = None,
        rebuild: str = "the command that built it",
    ):
        self.index_dir = index_dir
        self.passages = passages
        self.corpus_path = corpus_path
        self.searcher = _lucene.open_searcher(index_dir, full_check, rebuild)
        from jnius import JavaException

        try:
            num_docs = self.searcher.num_docs
            samples = sorted({0, num_docs // 2, num_docs - 1}) if num_docs else []
            docs = [self.searcher.doc(i) for i in samples]
            stored = [_stored_passage(doc) for doc in docs]
        except JavaException as err:  # the footers were sound, what they close is not
            raise _lucene.CorruptIndexError(
                f"Lucene index {index_dir} cannot be read ({str(err).splitlines()[0][:300]}); it is corrupt, "
                f"rebuild it with:\n  {rebuild}"
            ) from None
        if num_docs == 0:
            raise ValueError(f"Lucene index {index_dir} is empty")
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
            for doc, p in zip(docs, stored, strict=True):
                docid = doc.docid()
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

    def documents(self, query: str, k: int) -> list[tuple[dict, float]]:
        """The top-``k`` documents for ``query`` as Search-R1's server returns them, with their BM25 scores: the
        corpus row itself where passages come from a :class:`PassageStore` (``{"id", "contents", ...}`` as the
        corpus has it), else ``{"id", "contents": '"Title"\\ntext'}``."""
        if not isinstance(self.passages, PassageStore):
            return [({"id": p.docid, "contents": p.contents()}, score) for p, score in self.scored(query, k)]
        found = []
        for hit in self.searcher.search(query, k=k):
            row = self.passages.document(hit.docid)
            if row is None:
                raise KeyError(f"document {hit.docid!r} of Lucene index {self.index_dir} is not in {self.corpus_path}")
            found.append((row, float(hit.score)))
        return found

    def _hit_passage(self, hit) -> Passage:
        # Without a corpus in memory, read the passage from the hit's own stored document: looking it up again by
        # its id (a term query per passage) made a search on a 200 k-passage index tens of times slower.
        stored = None if self.passages is not None else hit.lucene_document
        raw = stored.get("raw") if stored is not None else None
        passage = _raw_passage(hit.docid, raw) if raw else None
        return passage if passage is not None else self._passage(hit.docid)

    def _passage(self, docid: str) -> Passage:
        if self.passages is not None:
            try:
                return self.passages[docid]
            except KeyError:
                where = f"Lucene index {self.index_dir} is not in {self.corpus_path}"
                raise KeyError(f"document {docid!r} of {where}") from None
        passage = _stored_passage(self.searcher.doc(docid))
        if passage is None:
            raise ValueError(f"document {docid!r} of Lucene index {self.index_dir} has no stored text")
        return passage


def open_retriever(
    corpus_path: str | os.PathLike | None = None,
    index_dir: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    passage_store: bool | None = None,
    full_check: bool | None = None,
) -> Retriever:
    """Open BM25 retrieval over a corpus, an index, or both (neither: the shipped corpus).

    Args:
        corpus_path: JSONL corpus; without ``index_dir`` its index is built once into ``cache_dir``.
        index_dir: A prebuilt Lucene index; without ``corpus_path`` it must store the passage text.
        cache_dir: Where built indexes and passage stores are kept (default
            ``_lucene.default_cache_dir("searchqa")``).
        passage_store: With both ``corpus_path`` and ``index_dir`` (e.g. Search-R1's BM25 index, which stores only
            ids, and ``wiki-18.jsonl``), read the passages from the corpus's passage store under ``cache_dir``
            (built once by :mod:`envs.searchqa.build_store`) instead of holding the corpus in this process.
            None: where the corpus is over :data:`envs.store.AUTO_PREPARE_BYTES`.
        full_check: Check every byte of the index (see :func:`envs._lucene.open_searcher`).

    Raises:
        envs.store.StoreMissingError: no index at ``index_dir``, or its passage store is not built yet (the message
            gives the command that builds it).
        envs._lucene.CorruptIndexError: the index fails Lucene's checksums.
        ValueError: a corpus too big to hold in memory without ``index_dir``, or data that do not match.
    """
    if corpus_path is None and index_dir is None:
        corpus_path = DEFAULT_CORPUS
    if index_dir is not None and not any(Path(index_dir).expanduser().glob("segments_*")):
        raise store.StoreMissingError(
            f"no Lucene index at {index_dir}: build it once, outside the env workers, with "
            f"{prepare_command(corpus_path or 'CORPUS.jsonl', index_dir)}"
        )
    rebuild = prepare_command(corpus_path or "CORPUS.jsonl", index_dir or "INDEX_DIR")
    if index_dir is not None and store.is_store(index_dir):  # another env's store, or an old format, fails here
        store.open_store(index_dir, "searchqa", INDEX_FORMAT, rebuild)
    cache = Path(cache_dir).expanduser() if cache_dir is not None else _lucene.default_cache_dir("searchqa")
    passages, digest = None, ""
    if corpus_path is not None:
        corpus_path = Path(corpus_path).expanduser().resolve()
        if not corpus_path.is_file():
            raise FileNotFoundError(f"corpus file {corpus_path} not found")
        big = corpus_path.stat().st_size > store.AUTO_PREPARE_BYTES
        if index_dir is not None and (passage_store or (passage_store is None and big)):
            index_dir = Path(index_dir).expanduser().resolve()
            out = passage_store_dir(corpus_path, index_dir, cache)
            command = passages_command(corpus_path, index_dir, out)
            opened = PassageStore(store.open_store(out, "searchqa-passages", PASSAGES_FORMAT, command))
            return Retriever(index_dir, opened, corpus_path, opened.fingerprint, False, full_check, rebuild)
        if big:
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
        index_dir = cached_index(corpus_path, digest, cache)
        rebuild = f"rm -r {index_dir} (it is built again on next use)"
    return Retriever(Path(index_dir).expanduser(), passages, corpus_path, digest, built, full_check, rebuild)
