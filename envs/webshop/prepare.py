"""Prepare a WebShop catalog's store once, with several index threads, into a directory the user names; env
processes then open it read-only (``store_dir``) and none of them parses or holds the catalog.

    python -m envs.webshop.prepare --data-dir WebShop/data --out /data/webshop/store --threads 16
    python -m envs.webshop.prepare --data-dir WebShop/data --index-dir WebShop/search_engine/indexes --out ...

then ``+env.kwargs.store_dir=/data/webshop/store`` (a directory every node may mount). Products are parsed one at
a time into SQLite (with the price each sells at) beside the goals, and indexed by Anserini's ``IndexCollection``
in a JVM of its own (:func:`envs.store.build`); with ``--index-dir`` the original repo's prebuilt index is searched
instead (its document ids are asins). ``items_shuffle.json`` is used over ``items_shuffle_1000.json`` where a
folder has both; name a file to choose.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from envs import store
from envs.webshop.catalog import prepare, resolve_sources


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(prog="python -m envs.webshop.prepare", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="folder of the WebShop files (the original repo's data/)")
    for role in ("products", "attributes", "human", "reviews"):
        parser.add_argument(f"--{role}-file", type=Path, help=f"the {role} file (overrides the one in --data-dir)")
    parser.add_argument("--num-products", type=int, help="keep only the first N products")
    parser.add_argument("--synthetic-goals", action="store_true", help="synthetic goals instead of the human ones")
    parser.add_argument("--index-dir", type=Path, help="a prebuilt Lucene index of the products to search")
    parser.add_argument("--out", type=Path, required=True, help="the store directory to create")
    parser.add_argument("--threads", type=int, default=0, help="index build threads (default: one per CPU)")
    args = parser.parse_args(argv)
    if args.data_dir is None and args.products_file is None:
        parser.error("give --data-dir or --products-file")
    sources = resolve_sources(
        args.data_dir or args.products_file.parent,
        args.products_file,
        args.attributes_file,
        args.human_file,
        args.reviews_file,
        args.num_products,
        not args.synthetic_goals,
        args.index_dir,
    )
    print(f"preparing a WebShop store from {', '.join(map(str, sources.files.values()))}", file=sys.stderr)
    start = time.perf_counter()
    out = prepare(sources, args.out, args.threads)
    manifest = json.loads((out / store.MANIFEST).read_text())
    print(f"store {out}: {manifest['counts']}, {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return out


if __name__ == "__main__":
    main()
