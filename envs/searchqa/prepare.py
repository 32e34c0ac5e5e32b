"""Build Search-QA's BM25 index once, with several threads, into a directory the user names; env processes then
open it read-only and hold no corpus in memory.

    python -m envs.searchqa.prepare --corpus-path wiki-18.jsonl --out /data/searchqa/wiki18-bm25 --threads 16

then ``ENV_KWARGS='{"index_dir": "/data/searchqa/wiki18-bm25", ...}'`` (no ``corpus_path``). The index stores each
passage (id, title, text) beside its BM25 terms, so every env process reads passages from the memory-mapped index,
which the page cache shares between processes, instead of each loading the corpus into a dict (2.1 GB per 2 M
passages). The build is :func:`envs.store.build`: Anserini's ``IndexCollection`` over JSONL shards, one per thread,
in a JVM of its own, into a temporary directory renamed into place once complete.
"""

from __future__ import annotations

import argparse
import json

from envs.searchqa.corpus import prepare_index

__all__ = ["main", "prepare_index"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus-path", required=True, help="JSONL corpus (Search-R1's wiki-18 format)")
    parser.add_argument("--out", required=True, help="index directory to create")
    parser.add_argument("--threads", type=int, default=0, help="indexing threads (default: one per CPU)")
    args = parser.parse_args(argv)
    print(json.dumps(prepare_index(args.corpus_path, args.out, args.threads)))


if __name__ == "__main__":
    main()
