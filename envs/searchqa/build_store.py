"""Build Search-QA's per-node SQLite stores (:mod:`envs.store`), once, outside the env workers' heaps.

    python -m envs.searchqa.build_store passages --corpus-path wiki-18.jsonl --index-dir bm25 --out STORE
    python -m envs.searchqa.build_store questions --questions-path train.parquet --split train --out STORE

* ``passages``: the rows of a wiki-18 style JSONL corpus by id, beside a prebuilt index that stores no text
  (Search-R1's BM25 index, built by its ``index_builder.py``), so that nothing holds the corpus in memory: the
  retrieval server (``python -m envs.searchqa.server --index_path ... --corpus_path ...``) builds it on its first
  start, an env given ``corpus_path`` and ``index_dir`` opens it (:class:`~envs.searchqa.corpus.PassageStore`).
* ``questions``: a questions file's split, as :func:`~envs.searchqa.corpus.load_questions` parses it, by task id
  (:class:`~envs.searchqa.corpus.QuestionStore`); :func:`~envs.searchqa.corpus.open_questions` runs this in a
  child process for files too big to parse in every env process.

Both are read line by line / row by row into the store; a malformed row fails naming the file and line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from envs import store
from envs.searchqa.corpus import PASSAGES_FORMAT, QUESTIONS_FORMAT, _passage, _read_jsonl, load_questions


def build_passages(corpus_path: str | os.PathLike, index_dir: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Build the passage store of ``corpus_path`` (searched through ``index_dir``) at ``out``, atomically.

    Returns:
        ``out``, resolved.

    Raises:
        FileNotFoundError: no corpus file.
        FileExistsError: ``out`` exists and is not empty.
        ValueError: a malformed line or a duplicate id (named by file and line).
    """
    corpus_path = Path(corpus_path).expanduser().resolve()
    if not corpus_path.is_file():
        raise FileNotFoundError(f"corpus file {corpus_path} not found")

    def fill(builder: store.StoreBuilder) -> dict:
        for lineno, row in _read_jsonl(corpus_path):
            where = f"{corpus_path}:{lineno}"
            passage = _passage(row, where)  # validates the row; the row itself is kept, as the corpus has it
            builder.add("passages", passage.docid, json.dumps(row, ensure_ascii=False), where=where)
        if not builder.counts["passages"]:
            raise ValueError(f"corpus file {corpus_path} holds no passages")
        return {}

    sources = {"corpus": str(corpus_path), "index": str(Path(index_dir).expanduser().resolve())}
    tables = {"passages": ("row",)}
    return store.build(out, "searchqa-passages", PASSAGES_FORMAT, fill, sources, 1, tables, False, index_dir)


def build_questions(questions_path: str | os.PathLike, split: str, out: str | os.PathLike) -> Path:
    """Build the questions store of ``questions_path``'s ``split`` at ``out``, atomically (task ids in file order).

    Raises:
        FileNotFoundError: no such file or split.
        ValueError: what :func:`~envs.searchqa.corpus.load_questions` raises for the file.
    """
    questions_path = Path(questions_path).expanduser().resolve()

    def fill(builder: store.StoreBuilder) -> dict:
        for q in load_questions(questions_path, split):
            golds, queries = json.dumps(list(q.golden_answers)), json.dumps(list(q.expert_queries))
            builder.add("questions", q.qid, q.question, golds, q.data_source, queries)
        return {}

    tables = {"questions": ("question", "golden_answers", "data_source", "expert_queries")}
    sources = {"questions": str(questions_path), "split": split}
    return store.build(out, "searchqa-questions", QUESTIONS_FORMAT, fill, sources, 1, tables, records_only=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    kinds = parser.add_subparsers(dest="kind", required=True)
    passages = kinds.add_parser("passages", help="a corpus's rows by id, beside a prebuilt index")
    passages.add_argument("--corpus-path", required=True, help="wiki-18 style JSONL corpus")
    passages.add_argument("--index-dir", required=True, help="the Lucene index built from it (e.g. Search-R1's)")
    passages.add_argument("--out", required=True, help="store directory to create")
    questions = kinds.add_parser("questions", help="a questions file's split by task id")
    questions.add_argument("--questions-path", required=True)
    questions.add_argument("--split", required=True)
    questions.add_argument("--out", required=True, help="store directory to create")
    args = parser.parse_args(argv)
    try:
        if args.kind == "passages":
            done = build_passages(args.corpus_path, args.index_dir, args.out)
        else:
            done = build_questions(args.questions_path, args.split, Path(args.out))
    except (ValueError, FileNotFoundError, FileExistsError) as err:
        flat = str(err).replace("\n", " ")
        print(f"{type(err).__name__}: {flat}", file=sys.stderr)  # one line: what open_questions reports
        sys.exit(2)
    print(json.dumps(json.loads((done / store.MANIFEST).read_text())))


if __name__ == "__main__":
    main()
