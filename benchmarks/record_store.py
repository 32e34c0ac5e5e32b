"""Where WebShop's product records live: SQLite beside an id-only Lucene index, or Lucene's stored fields.

    python benchmarks/record_store.py --products 100000 --work-dir /scratch/record_store

Both stores are built from the same synthetic ``items_shuffle.json`` (``data_synth.py``) by :func:`envs.store.build`
with the same threads: (a) ``sqlite``: products keyed by asin in ``records.sqlite``, the index storing ids only
(what ``envs/webshop`` uses); (b) ``lucene``: the product record inside each indexed document (``-storeRaw``, as
Search-QA stores its passages). A fresh process per store then opens it and times, with nothing cached in Python:
a product read by asin (the item page, a restore), a results page (the 50-hit query and the 10 records it shows,
by the hits' ids for ``sqlite``, from the hits' own stored documents for ``lucene``), and reports its USS after
(which counts the pages of a memory-mapped file that no other process maps), its anonymous memory (heaps alone)
and the store's size on disk. Ratios are lucene / sqlite of the same run. Table to stdout, JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import data_synth  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, random, statistics, sys, time
from pathlib import Path
from envs import _lucene, store
from envs.webshop.catalog import _decode_product
mode, root, asins, queries = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
t = time.perf_counter()
st = store.Store(root, json.loads((root / store.MANIFEST).read_text()))
_lucene.start_jvm()
searcher = _lucene.open_searcher(st.index_dir)
open_s = time.perf_counter() - t
if mode == "sqlite":
    read = lambda asin: _decode_product(st.get("products", asin)[0])
    page = lambda hits: [read(h.docid) for h in hits[:10]]
else:
    read = lambda asin: _decode_product(json.loads(searcher.doc(asin).raw())["record"])
    page = lambda hits: [_decode_product(json.loads(h.lucene_document.get("raw"))["record"]) for h in hits[:10]]
for asin in asins[:50]:  # warm the JIT and the page cache alike for both
    read(asin)
reads = []
for asin in asins[50:]:
    t = time.perf_counter(); read(asin); reads.append(time.perf_counter() - t)
pages = []
for q in queries:
    t = time.perf_counter(); page(searcher.search(q, 50)); pages.append(time.perf_counter() - t)
fields = {}
for line in Path("/proc/self/smaps_rollup").read_text().splitlines()[1:]:
    name, value = line.split(":", 1)
    fields[name] = int(value.split()[0]) / 1024
print("RESULT " + json.dumps({"open_s": open_s, "read_ms": 1e3 * statistics.median(reads),
      "page_ms": 1e3 * statistics.median(pages), "uss_mb": fields["Private_Clean"] + fields["Private_Dirty"],
      "anon_mb": fields["Anonymous"]}))
"""


def build(mode: str, products: Path, out: Path, threads: int) -> float:
    """Build the ``mode`` store of ``products`` at ``out`` (if missing); returns its build seconds."""
    from envs import store
    from envs.webshop.catalog import _encode_product, iter_products

    if not (out / store.MANIFEST).is_file():

        def fill(builder: store.StoreBuilder) -> None:
            for product in iter_products(products, {}, None):
                doc = {"id": product.asin, "contents": product.search_text()}
                if mode == "sqlite":
                    builder.add("products", product.asin, _encode_product(product))
                    builder.add_doc(doc)
                else:
                    builder.add_doc({**doc, "record": _encode_product(product)})

        tables = {"products": ("record TEXT",)} if mode == "sqlite" else None
        store.build(out, "record_store", mode, fill, {}, threads, tables, store_raw=mode == "lucene")
    return json.loads((out / store.MANIFEST).read_text())["build_seconds"]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--products", type=int, default=100_000)
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("record_store.json"))
    args = parser.parse_args(argv)
    data = args.work_dir / f"webshop_{args.products}"
    if not (data / "items_shuffle.json").is_file():
        data_synth.webshop(data, args.products)
    rng = random.Random(0)
    asins = [f"S{rng.randrange(1000, args.products):09d}" for _ in range(args.reads + 50)]
    queries = [" ".join(data_synth.words(rng, 4)) for _ in range(200)]
    rows = {}
    for mode in ("sqlite", "lucene"):
        root = args.work_dir / f"{mode}_{args.products}"
        build_s = build(mode, data / "items_shuffle.json", root, args.threads)
        cmd = [sys.executable, "-c", CHILD, mode, str(root), json.dumps(asins), json.dumps(queries)]
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=True)
        result = json.loads(next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))[7:])
        disk = sum(p.stat().st_size for p in root.iterdir() if p.is_file()) / 1e9
        rows[mode] = {"build_s": build_s, "disk_gb": round(disk, 3), **{k: round(v, 3) for k, v in result.items()}}
    ratios = {k: round(rows["lucene"][k] / rows["sqlite"][k], 2) for k in rows["sqlite"] if rows["sqlite"][k]}
    cols = list(rows["sqlite"])
    print(f"{args.products} products\n| store | " + " | ".join(cols) + " |\n|" + "---|" * (len(cols) + 1))
    for name, row in [*rows.items(), ("lucene / sqlite", ratios)]:
        print(f"| {name} | " + " | ".join(str(row[c]) for c in cols) + " |")
    result = {"products": args.products, "reads": args.reads, "rows": rows, "lucene_over_sqlite": ratios}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
