"""Official-format data at a chosen size, for ``benchmarks/data_scale.py`` (synthetic records of the real size).

* WebShop: ``items_shuffle.json`` (a JSON list of products, about 3.4 KB each as in the original), ``items_ins_v2.json``
  and ``items_human_ins.json`` (an instruction for 1 product in 100, as the original's ~12k over 1.18M). The shipped
  products come first, so the shipped goals stay playable.
* ALFWorld: a data root with the shipped games copied into as many trial folders as asked.
* Search-QA: a wiki-18 JSONL corpus (``{"id", "contents": "\\"Title\\"\\ntext"}``, ~650 bytes a line as Search-R1's
  ``wiki-18.jsonl``) that starts with the shipped passages, so the shipped questions stay answerable.

Records are written one at a time (nothing holds the whole set) from a seeded generator: the same size and seed
give the same bytes.
"""

from __future__ import annotations

import itertools
import json
import random
import shutil
from pathlib import Path

from envs.alfworld.games import SHIPPED_DATA as ALFWORLD_DATA
from envs.searchqa.corpus import DEFAULT_CORPUS
from envs.webshop.catalog import DATA_DIR as WEBSHOP_DATA

# A Zipf-distributed vocabulary of 50,000 words, as natural text has: frequent words with long posting lists, rare
# ones with short lists, so that BM25 queries cost what they cost on real text (a tiny vocabulary would make every
# query term match most documents).
VOCABULARY = [f"w{i}" for i in range(50_000)]
_CUM_WEIGHTS = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(VOCABULARY))))
PRODUCT_BYTES = 3400  # items_shuffle.json: ~4 GB for 1.18 M products
PASSAGE_CHARS = 600  # wiki-18.jsonl: 100-word passages, ~14 GB for 21 M lines


def words(rng: random.Random, n: int) -> list[str]:
    """``n`` words drawn from the Zipf vocabulary."""
    return rng.choices(VOCABULARY, cum_weights=_CUM_WEIGHTS, k=n)


def _text(rng: random.Random, n: int) -> str:
    return " ".join(words(rng, n))


def _chars(rng: random.Random, n: int) -> str:
    """About ``n`` characters of words (a vocabulary word is 4.8 characters on average, its space included)."""
    return _text(rng, n // 4 + 1)[:n].rsplit(" ", 1)[0]


def webshop(out: Path, num_products: int, seed: int = 0) -> dict[str, Path]:
    """Write the three WebShop files with ``num_products`` products (shipped ones first) into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    shipped = json.loads((WEBSHOP_DATA / "items_shuffle_1000.json").read_text())
    attributes = json.loads((WEBSHOP_DATA / "items_ins_v2_1000.json").read_text())
    human = json.loads((WEBSHOP_DATA / "items_human_ins.json").read_text())
    rng = random.Random(seed)
    paths = {"products": out / "items_shuffle.json", "attributes": out / "items_ins_v2.json"}
    paths["human"] = out / "items_human_ins.json"
    with open(paths["products"], "w", encoding="utf-8") as f:
        f.write("[")
        for i in range(num_products):
            if i < len(shipped):
                row = shipped[i]
            else:
                template = shipped[i % len(shipped)]
                asin = f"S{i:09d}"
                row = {**template, "asin": asin, "name": f"{_text(rng, 3).title()} {template['name']}"}
                row["images"] = [f"https://example.invalid/images/{asin}.jpg"]
                size = len(json.dumps(row))
                padding = _chars(rng, max(0, PRODUCT_BYTES - size))
                row["full_description"] = f"{template['full_description']} {padding}"
                if i % 100 == 0:
                    base = attributes[template["asin"]]
                    attributes[asin] = base
                    human[asin] = [{**h, "asin": asin} for h in human.get(template["asin"], [])]
            f.write(("," if i else "") + json.dumps(row))
        f.write("]")
    paths["attributes"].write_text(json.dumps(attributes))
    paths["human"].write_text(json.dumps(human))
    return paths


def wiki(out: Path, num_passages: int, seed: int = 0) -> Path:
    """Write a wiki-18 style JSONL corpus of ``num_passages`` passages (shipped ones first) into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    shipped = [json.loads(line) for line in DEFAULT_CORPUS.read_text().splitlines() if line.strip()]
    rng = random.Random(seed)
    path = out / "wiki-18.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for i in range(num_passages):
            if i < len(shipped):
                row = shipped[i]
                contents = f'"{row["title"]}"\n{row["contents"]}'
            else:
                contents = f'"{_text(rng, 2).title()}"\n{_chars(rng, PASSAGE_CHARS)}'
            f.write(json.dumps({"id": str(i), "contents": contents}) + "\n")
    return path


def alfworld(out: Path, num_games: int) -> Path:
    """Write an ALFWorld data root (``json_2.1.1/train/<task>/<trial>/``, ``traj_data.json`` + ``game.tw-pddl``)
    holding ``num_games`` games: copies of the shipped games, each in a trial folder of its own (the official
    train split has 3,553)."""
    games = sorted(p.parent for p in (ALFWORLD_DATA / "json_2.1.1").glob("*/*/*/game.tw-pddl"))
    for i in range(num_games):
        source = games[i % len(games)]
        trial = out / "json_2.1.1" / "train" / source.parent.name / f"{source.name}_{i:06d}"
        trial.mkdir(parents=True, exist_ok=True)
        for name in ("traj_data.json", "game.tw-pddl"):
            shutil.copyfile(source / name, trial / name)
    return out
