"""Generate the small offline WebShop catalog shipped with the project, in the original WebShop file formats.

Products, brands, texts and instructions are invented here from templates and a seeded RNG (nothing is copied
from the WebShop data set), but every file has the layout of its WebShop counterpart, so the official files drop
in by path:

* ``items_shuffle_1000.json``: a list of raw products (``asin``, ``name``, ``category``, ``query``,
  ``product_category``, ``full_description``, ``small_description``, ``pricing`` as a ``"$12.99"`` or
  ``"$10.99 - $15.99"`` string, ``customization_options`` {option type: [{"value", "image"}]}, ``images``, ...);
* ``items_ins_v2_1000.json``: {asin: {"attributes", "instruction", "instruction_attributes"}} (the product's
  attributes and one synthetic instruction);
* ``items_human_ins.json``: {asin: [{"asin", "instruction", "instruction_attributes", "instruction_options"}]}
  (the "human" instructions that the default goals come from);
* ``reviews.json``: [{"asin", "average_rating", "reviews": [{"title", "stars", "review"}]}].

The catalog has 5 categories (as WebShop: beauty, electronics, fashion, food, furniture) of 5 product types each,
7 products per type. Run ``python -m tools.make_data.webshop`` to rewrite the files (deterministic), ``--check``
to also measure how often the expert query finds the goal product on the first results page.
"""

from __future__ import annotations

import argparse
import json
import random
import string
from pathlib import Path

from envs.webshop.catalog import DATA_DIR
from envs.webshop.env import PRODUCTS_PER_PAGE, WebShopEnv, expert_query

SEED = 20261203
PER_TYPE = 7

# The seed literals (product types, brand syllables, sentence templates) are data: webshop_seed.json next to this.
_SEED = json.loads(Path(__file__).with_name("webshop_seed.json").read_text(encoding="utf-8"))
# category -> product types: (query, title noun phrase, product_category, features, options, price range)
TYPES: dict[str, list[dict]] = _SEED["types"]
BRAND_PARTS: list[list[str]] = _SEED["brand_parts"]
STYLES: list[str] = _SEED["styles"]
BULLET_ENDINGS: list[str] = _SEED["bullet_endings"]
OPENERS: list[str] = _SEED["openers"]
REVIEW_TITLES: dict[int, list[str]] = {int(stars): titles for stars, titles in _SEED["review_titles"].items()}
REVIEW_BODIES: dict[int, str] = {int(stars): body for stars, body in _SEED["review_bodies"].items()}


def _article(phrase: str) -> str:
    return "an" if phrase[0] in "aeiou" else "a"


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _price_tag(rng: random.Random, low: int, high: int) -> str:
    price = rng.randint(low, high) + rng.choice([0.99, 0.49, 0.95, 0.0])
    if rng.random() < 0.2:  # a price range, as for products whose options change the price
        return f"${price:.2f} - ${price + rng.randint(3, 15):.2f}"
    return f"${price:.2f}"


def _option_phrase(name: str, value: str, rng: random.Random) -> str:
    name = name.lower()
    if name == "color":
        return rng.choice([f"in {value} color", f"in the color {value}", f"colored {value}"])
    if name == "size":
        return rng.choice([f"in size {value}", f"{value} in size", f"with size {value}"])
    return f"with {name} {value}"


class Generator:
    """Builds the catalog with one seeded RNG; the same seed gives the same files."""

    def __init__(self, seed: int = SEED):
        self.rng = random.Random(seed)
        self.asins: set[str] = set()
        self.products: list[dict] = []
        self.ins: dict[str, dict] = {}
        self.human: dict[str, list[dict]] = {}
        self.reviews: list[dict] = []
        for category, types in TYPES.items():
            for spec in types:
                for _ in range(PER_TYPE):
                    self._product(category, spec)
        self.rng.shuffle(self.products)  # "items_shuffle": products in random order, as the original files

    def _asin(self) -> str:
        while True:
            asin = "B0" + "".join(self.rng.choices(string.ascii_uppercase + string.digits, k=8))
            if asin not in self.asins:
                self.asins.add(asin)
                return asin

    def _brand(self) -> str:
        return (self.rng.choice(BRAND_PARTS[0]) + self.rng.choice(BRAND_PARTS[1])).capitalize()

    def _product(self, category: str, spec: dict) -> None:
        rng = self.rng
        asin, brand = self._asin(), self._brand()
        features = rng.sample(spec["features"], k=rng.randint(3, min(5, len(spec["features"]))))
        title_feats = " ".join(f.title() for f in features[:2])
        name = f"{brand} {rng.choice(STYLES)} {title_feats} {spec['noun']}"
        options = {}
        for opt_name, values in spec["options"].items():
            k = rng.randint(min(2, len(values)), min(5, len(values)))
            chosen = set(rng.sample(values, k=k))
            options[opt_name] = [v for v in values if v in chosen]
        noun = spec["noun"].lower()
        description = (
            f"The {brand} {noun} is made for everyday use. Highlights: {_join(features[:3])}. Every order is "
            f"backed by our 30-day satisfaction promise. {brand} designs each {spec['query']} with care."
        )
        bullets = [f"{f.upper()}: {rng.choice(BULLET_ENDINGS).format(noun=noun)}" for f in features]
        self.products.append(
            {
                "asin": asin,
                "name": name,
                "category": category,
                "query": spec["query"],
                "product_category": spec["path"],
                "full_description": description,
                "small_description": bullets,
                "pricing": _price_tag(rng, *spec["price"]),
                "customization_options": {
                    n: [{"value": v, "image": None} for v in vals] for n, vals in options.items()
                },
                "images": [f"https://example.invalid/images/{asin}.jpg"],
                "brand": brand,
            }
        )
        attributes = features + (["quality materials"] if rng.random() < 0.3 else [])
        ins_attrs = rng.sample(features, k=min(2, len(features)))
        self.ins[asin] = {
            "attributes": attributes,
            "instruction": f"i need {_article(spec['query'])} {spec['query']} that is {_join(ins_attrs)}",
            "instruction_attributes": ins_attrs,
        }
        self.human[asin] = [self._human(asin, spec, features, options) for _ in range(rng.choice([1, 1, 2]))]
        self._reviews(asin, noun, features)

    def _human(self, asin: str, spec: dict, features: list[str], options: dict[str, list[str]]) -> dict:
        rng = self.rng
        attrs = rng.sample(features, k=rng.randint(1, min(3, len(features))))
        chosen = {n: rng.choice(vals).lower() for n, vals in options.items()}
        opener = rng.choice(OPENERS)
        first = attrs[0] if "{a} {attrs}" in opener else spec["query"]
        text = opener.format(a=_article(first), query=spec["query"], attrs=_join(attrs))
        phrases = [_option_phrase(n, v, rng) for n, v in chosen.items()]
        if phrases:
            text += ", " + " and ".join(phrases)
        return {
            "asin": asin,
            "instruction": text + ".",
            "instruction_attributes": attrs,
            "instruction_options": list(chosen.values()),
        }

    def _reviews(self, asin: str, noun: str, features: list[str]) -> None:
        rng = self.rng
        reviews = []
        for _ in range(rng.randint(0, 3)):
            stars = rng.choices([5, 4, 3, 2, 1], weights=[5, 4, 2, 1, 1])[0]
            feat = rng.choice(features)
            reviews.append(
                {
                    "title": rng.choice(REVIEW_TITLES[stars]),
                    "stars": stars,
                    "review": REVIEW_BODIES[stars].format(noun=noun, feat=feat),
                }
            )
        rating = round(sum(r["stars"] for r in reviews) / len(reviews), 1) if reviews else "N.A."
        self.reviews.append({"asin": asin, "average_rating": rating, "reviews": reviews})


FILES = ("items_shuffle_1000.json", "items_ins_v2_1000.json", "items_human_ins.json", "reviews.json")


def write(out_dir: Path = DATA_DIR) -> dict[str, Path]:
    """Write the four catalog files under ``out_dir``; returns their paths by file name."""
    gen = Generator()
    out_dir.mkdir(parents=True, exist_ok=True)
    contents = dict(zip(FILES, (gen.products, gen.ins, gen.human, gen.reviews), strict=True))
    paths = {}
    for name, obj in contents.items():
        paths[name] = out_dir / name
        paths[name].write_text(json.dumps(obj, ensure_ascii=False, indent=None) + "\n", encoding="utf-8")
    return paths


def retrievability(env: WebShopEnv, task_ids: list[str] | None = None) -> dict[str, float]:
    """How findable the goal products are with :func:`expert_query`, and how often the expert wins.

    Returns:
        ``n``; ``first_page``: share of goals whose product is on the first results page; ``top50``: in the 50
        results; ``expert_won``: share of expert episodes with reward 1.0.
    """
    ids = env.task_ids() if task_ids is None else task_ids
    first = top = won = 0
    for task_id in ids:
        goal = env.goal(task_id)
        ranked = env.catalog.search(expert_query(goal))
        first += goal.asin in ranked[:PRODUCTS_PER_PAGE]
        top += goal.asin in ranked
        env.reset(options={"task_id": task_id})
        result = None
        for action in env.expert_actions():
            result = env.step(action)
        won += bool(result and result[4]["won"])
    n = len(ids)
    return {"n": n, "first_page": first / n, "top50": top / n, "expert_won": won / n}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DATA_DIR)
    parser.add_argument("--check", action="store_true", help="measure expert-query retrievability of all goals")
    args = parser.parse_args(argv)
    for name, path in write(args.out).items():
        print(f"{name}: {path.stat().st_size} bytes -> {path}")
    if args.check:
        env = WebShopEnv(data_dir=args.out, split="all")
        print(json.dumps(retrievability(env), indent=1))


if __name__ == "__main__":
    main()
