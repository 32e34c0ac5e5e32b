"""WebShop data: products, goals (instructions) and the BM25 product search, read from the original file formats.

The files and how they are read follow the original WebShop loader:

* products (``items_shuffle.json``, else ``items_shuffle_1000.json``): a JSON list of products with ``asin``,
  ``name``, ``category``, ``query``, ``product_category``, ``full_description``, ``small_description`` (a string
  or a list: the features), ``pricing`` (``"$12.99"``, ``"$10.99 - $15.99"``; absent: $100) and
  ``customization_options`` ({option type: [{"value": ...}, ...]}). Products already in the loader's output
  form (``Title``, ``Description``, ``BulletPoints``, ``pricing`` as numbers, ``options``) are read as well.
  Option types and values are lowercased and ``/`` in a value becomes ``" | "``; products whose asin is
  ``"nan"`` or longer than 10 characters, and repeated asins, are skipped. ``num_products`` keeps the first N;
* attributes (``items_ins_v2.json``, else ``items_ins_v2_1000.json``): {asin: {"attributes", "instruction",
  "instruction_attributes"}}; a product without attributes gets ``["DUMMY_ATTR"]``;
* human instructions (``items_human_ins.json``): {asin: [{"instruction", "instruction_attributes",
  "instruction_options"}]}; instructions without attributes are skipped;
* reviews (``reviews.json``, optional): [{"asin", "average_rating", "reviews": [{"title", "score"|"stars",
  "body"|"review"}]}].

Goals are built as the original does. A product's price is its single price, a uniform draw from its price range,
or $100. The price bound of a goal is the larger of two draws from the first four multiples of $10 above the price
(with ``", and price lower than X.00 dollars"`` appended to the instruction), or 1,000,000 when fewer than two
exist. Human goals: one per human instruction, its options the instruction's options. Synthetic goals: one per
product and combination of its option values, instruction ``"<instruction> with <type>: <value>, and ..."``. The
goal list is then shuffled with ``random.Random(233)`` as the original, so on the original files the goal indices
(and the test split, the first 500) are the original ones. Unlike the original, the prices and price bounds come
from a seeded generator too, so every process builds the same goals.

The search index holds, per product, ``"<title> <description> <first feature> <type>: <values>, and ..."``
lowercased (the original's document text); Lucene BM25 ranks. Products, prices and goals live in a prepared
store (:func:`prepare`, :mod:`envs.store`) that env processes read on demand: no process holds the catalog.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import logging
import os
import random
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from envs import _lucene, store
from envs._shared import fingerprint

logger = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parent / "data"
# the full catalog first: with both in one folder, the 1,000-product subset was picked without a word
PRODUCT_FILES = ("items_shuffle.json", "items_shuffle_1000.json")
ATTRIBUTE_FILES = ("items_ins_v2.json", "items_ins_v2_1000.json")
HUMAN_FILE = "items_human_ins.json"
REVIEW_FILE = "reviews.json"

SEARCH_RETURN_N = 50
GOAL_SHUFFLE_SEED = 233
PRICE_SEED = 20220701
PRICE_RANGE = [10.0 * i for i in range(1, 100)]
NO_PRICE_BOUND = 1_000_000.0


@dataclasses.dataclass(frozen=True)
class Review:
    """One customer review."""

    title: str
    score: Any
    body: str


@dataclasses.dataclass(frozen=True)
class Product:
    """A product as the shop shows it (the original loader's processed fields).

    Attributes:
        asin: Product id (upper case, as in the files).
        title: Product name.
        category: Top category (``fashion``, ``beauty``, ...).
        query: The search query the product was collected with (lowercased).
        product_category: ``a › b › c`` category path.
        description: Full description (the Description page).
        bullets: Features (the Features page).
        pricing: One price or a ``(low, high)`` range.
        price_tag: The price as shown (``$12.99`` or ``$10.99 to $15.99``).
        options: Option type -> values, lowercased, in file order.
        attributes: Attributes the reward matches goal attributes against.
        reviews: Customer reviews.
        rating: Average rating, or ``N.A.``.
    """

    asin: str
    title: str
    category: str = ""
    query: str = ""
    product_category: str = ""
    description: str = ""
    bullets: tuple[str, ...] = ()
    pricing: tuple[float, ...] = (100.0,)
    price_tag: str = "$100.0"
    options: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    attributes: tuple[str, ...] = ("DUMMY_ATTR",)
    reviews: tuple[Review, ...] = ()
    rating: Any = "N.A."

    def search_text(self) -> str:
        """The document BM25 indexes for this product."""
        option_text = ", and ".join(f"{name}: {', '.join(values)}" for name, values in self.options.items())
        first = self.bullets[0] if self.bullets else ""
        return " ".join([self.title, self.description, first, option_text]).lower()


@dataclasses.dataclass(frozen=True)
class Goal:
    """One task: an instruction and what the reward compares a purchase with.

    Attributes:
        goal_id: Position in the shuffled goal list (the task id).
        asin: The product the instruction was written for.
        category, query, product_category, name: That product's type fields (for the type reward).
        instruction: Instruction text shown to the agent (with the price bound).
        attributes: Goal attributes.
        options: Goal option values.
        price_upper: Price bound.
    """

    goal_id: str
    asin: str
    category: str
    query: str
    product_category: str
    name: str
    instruction: str
    attributes: tuple[str, ...]
    options: tuple[str, ...]
    price_upper: float


# ---------------------------------------------------------------- files
def read_json(path: Path, what: str) -> Any:
    """Parse a JSON file, failing with the path in the message."""
    if not path.is_file():
        raise FileNotFoundError(f"WebShop {what} file not found: {path}")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"WebShop {what} file {path} is not valid JSON: {e}") from None


def find_file(data_dir: Path, names: tuple[str, ...], what: str) -> Path:
    """The first of ``names`` that exists in ``data_dir``; says so where another of them is there too."""
    found = [data_dir / name for name in names if (data_dir / name).is_file()]
    if not found:
        raise FileNotFoundError(f"no WebShop {what} file in {data_dir} (looked for {', '.join(names)})")
    if len(found) > 1:
        logger.warning(
            "WebShop: %s in %s: using %s (also there: %s; pass the file to choose)",
            what,
            data_dir,
            found[0].name,
            ", ".join(p.name for p in found[1:]),
        )
    return found[0]


def _fail(path: Path, where: str, problem: str) -> ValueError:
    return ValueError(f"malformed WebShop file {path}: {where}: {problem}")


def _string(row: dict, keys: tuple[str, ...], path: Path, where: str, default: str | None = None) -> str:
    for key in keys:
        if key in row:
            if not isinstance(row[key], str):
                raise _fail(path, where, f"'{key}' must be a string, got {type(row[key]).__name__}")
            return row[key]
    if default is None:
        raise _fail(path, where, f"missing '{keys[0]}'")
    return default


def _string_list(value: Any, path: Path, where: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(path, where, "expected a string or a list of strings")
    return value


def parse_pricing(raw: Any, path: Path, where: str) -> tuple[tuple[float, ...], str]:
    """``"$12.99"`` / ``"$10.99 - $15.99"`` / ``[10.99, 15.99]`` -> prices and price tag; empty or None -> $100."""
    if raw is None or raw == "" or raw == []:
        return (100.0,), "$100.0"
    try:
        if isinstance(raw, str):
            prices = [float(Decimal(re.sub(r"[^\d.]", "", part))) for part in raw.split("$")[1:]]
        elif isinstance(raw, list) and all(isinstance(p, int | float) and not isinstance(p, bool) for p in raw):
            prices = [float(p) for p in raw]
        else:
            raise _fail(path, where, f"'pricing' must be a '$' price string or a list of numbers, got {raw!r}")
    except InvalidOperation:
        raise _fail(path, where, f"cannot read the price {raw!r}") from None
    if not prices:
        raise _fail(path, where, f"no '$' price in {raw!r}")
    if len(prices) == 1:
        return (prices[0],), f"${prices[0]}"
    return (prices[0], prices[1]), f"${prices[0]} to ${prices[1]}"


def _options(row: dict, path: Path, where: str) -> dict[str, tuple[str, ...]]:
    if "customization_options" not in row and isinstance(row.get("options"), dict):
        processed = row["options"]  # already the loader's output: type -> [values]
        if not all(isinstance(k, str) and isinstance(v, list) for k, v in processed.items()):
            raise _fail(path, where, "'options' must map option types to lists of values")
        return {
            k.lower(): tuple(v.lower() for v in _string_list(vals, path, f"{where}, option '{k}'"))
            for k, vals in processed.items()
        }
    raw = row.get("customization_options")
    if not raw:
        return {}
    if not isinstance(raw, dict):
        raise _fail(path, where, f"'customization_options' must be an object, got {type(raw).__name__}")
    options: dict[str, tuple[str, ...]] = {}
    for name, contents in raw.items():
        if contents is None:
            continue
        if not isinstance(contents, list):
            raise _fail(path, where, f"option '{name}' must be a list of {{'value': ...}} objects")
        values = []
        for content in contents:
            if not isinstance(content, dict) or not isinstance(content.get("value"), str):
                raise _fail(path, where, f"option '{name}' has an entry without a string 'value': {content!r}")
            values.append(content["value"].strip().replace("/", " | ").lower())
        options[name.lower()] = tuple(values)
    return options


def _reviews(raw: Any, path: Path, where: str) -> tuple[Review, ...]:
    if not isinstance(raw, list):
        raise _fail(path, where, "'reviews' must be a list")
    out = []
    for r in raw:
        if not isinstance(r, dict):
            raise _fail(path, where, f"a review must be an object, got {r!r}")
        body = r.get("body", r.get("review", ""))
        out.append(Review(str(r.get("title", "")), r.get("score", r.get("stars", "")), str(body)))
    return tuple(out)


def load_reviews(path: Path) -> dict[str, tuple[tuple[Review, ...], Any]]:
    """asin -> (reviews, average rating) from a ``reviews.json``."""
    rows = read_json(path, "reviews")
    if not isinstance(rows, list):
        raise _fail(path, "top level", "expected a list of {asin, reviews, average_rating}")
    out = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("asin"), str):
            raise _fail(path, f"entry #{i}", "expected an object with a string 'asin'")
        where = f"entry #{i} ({row['asin']})"
        out[row["asin"]] = (_reviews(row.get("reviews", []), path, where), row.get("average_rating", "N.A."))
    return out


def load_attributes(path: Path) -> dict[str, dict]:
    """asin -> {attributes, instruction, instruction_attributes} from an ``items_ins_v2`` file."""
    data = read_json(path, "attributes")
    if not isinstance(data, dict):
        raise _fail(path, "top level", "expected an object mapping asins to {attributes, instruction, ...}")
    for asin, entry in data.items():
        if not isinstance(entry, dict):
            raise _fail(path, f"asin {asin}", "expected an object")
        for key in ("attributes", "instruction_attributes"):
            if entry.get(key) is not None:
                _string_list(entry[key], path, f"asin {asin}, '{key}'")
        if entry.get("instruction") is not None and not isinstance(entry["instruction"], str):
            raise _fail(path, f"asin {asin}", "'instruction' must be a string")
    return data


def iter_products(
    path: Path,
    attributes: dict[str, dict],
    reviews: dict[str, tuple[tuple[Review, ...], Any]] | None,
    num_products: int | None = None,
) -> Iterator[Product]:
    """The products of a product file (see the module docstring), in file order, read one at a time."""
    if not path.is_file():
        raise FileNotFoundError(f"WebShop products file not found: {path}")
    seen: set[str] = set()
    try:
        rows = store.iter_json_array(path, "WebShop products")
        for i, row in rows:
            if num_products is not None and i >= num_products:
                break
            product = _product(row, i, path, attributes, reviews, seen)
            if product is not None:
                yield product
    except ValueError as err:
        if "is not a JSON list" in str(err):
            found = type(read_json(path, "products")).__name__
            raise _fail(path, "top level", f"expected a list of products, got {found}") from None
        raise


def _product(row: Any, i: int, path: Path, attributes: dict, reviews: dict | None, seen: set[str]) -> Product | None:
    if not isinstance(row, dict):
        raise _fail(path, f"product #{i}", f"expected an object, got {type(row).__name__}")
    asin = row.get("asin")
    if not isinstance(asin, str):
        raise _fail(path, f"product #{i}", "missing a string 'asin'")
    if asin == "nan" or len(asin) > 10 or asin in seen:
        return None
    seen.add(asin)
    where = f"product #{i} ({asin})"
    pricing, price_tag = parse_pricing(row.get("pricing"), path, where)
    if "BulletPoints" in row:
        bullets = _string_list(row["BulletPoints"], path, f"{where}, 'BulletPoints'")
    else:
        bullets = _string_list(row.get("small_description", []), path, f"{where}, 'small_description'")
    attrs = (attributes.get(asin) or {}).get("attributes") or row.get("Attributes") or ["DUMMY_ATTR"]
    if "Reviews" in row:
        product_reviews, rating = _reviews(row["Reviews"], path, where), row.get("Rating", "N.A.")
    elif reviews is not None and asin in reviews:
        product_reviews, rating = reviews[asin]
    else:
        product_reviews, rating = (), "N.A."
    return Product(
        asin=asin,
        title=_string(row, ("name", "Title"), path, where),
        category=_string(row, ("category",), path, where),
        query=_string(row, ("query",), path, where).lower().strip(),
        product_category=_string(row, ("product_category",), path, where),
        description=_string(row, ("full_description", "Description"), path, where, default=""),
        bullets=tuple(bullets),
        pricing=pricing,
        price_tag=price_tag,
        options=_options(row, path, where),
        attributes=tuple(_string_list(attrs, path, f"{where}, attributes")),
        reviews=tuple(product_reviews),
        rating=rating,
    )


def load_products(
    path: Path,
    attributes: dict[str, dict],
    reviews: dict[str, tuple[tuple[Review, ...], Any]] | None,
    num_products: int | None = None,
) -> list[Product]:
    """Read a product file (see the module docstring), in file order."""
    products = list(iter_products(path, attributes, reviews, num_products))
    if not products:
        raise _fail(path, "top level", "no usable product")
    return products


# ---------------------------------------------------------------- goals
def product_prices(products: list[Product], seed: int = PRICE_SEED) -> dict[str, float]:
    """The price each product sells at: its price, a seeded uniform draw in its range."""
    rng = random.Random(seed)
    return {p.asin: _price(p, rng) for p in products}


def _price(product: Product, rng: random.Random) -> float:
    """What ``product`` sells at: its price, or a draw from ``rng`` in its range (drawn in product order)."""
    return product.pricing[0] if len(product.pricing) == 1 else rng.uniform(*product.pricing[:2])


def _price_bound(price: float, rng: random.Random) -> tuple[float, str]:
    candidates = [p for p in PRICE_RANGE if p > price][:4]
    if len(candidates) < 2:
        return NO_PRICE_BOUND, ""
    _, upper = sorted(rng.sample(candidates, 2))
    return upper, f", and price lower than {upper:.2f} dollars"


def _goal(product: Product, instruction: str, attributes: list[str], options: list[str], upper: float) -> dict:
    return {
        "asin": product.asin,
        "category": product.category,
        "query": product.query,
        "product_category": product.product_category,
        "name": product.title,
        "instruction": instruction,
        "attributes": tuple(attributes),
        "options": tuple(options),
        "price_upper": upper,
    }


def human_goals(products: list[Product], prices: dict[str, float], path: Path, rng: random.Random) -> list[dict]:
    """One goal per instruction of ``items_human_ins.json`` that has attributes (unshuffled)."""
    data = read_json(path, "human instructions")
    if not isinstance(data, dict):
        raise _fail(path, "top level", "expected an object mapping asins to lists of instructions")
    goals, skipped = [], 0
    for product in products:
        entries = data.get(product.asin)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise _fail(path, f"asin {product.asin}", "expected a list of instructions")
        for j, entry in enumerate(entries):
            where = f"asin {product.asin}, instruction #{j}"
            if not isinstance(entry, dict) or not isinstance(entry.get("instruction"), str):
                raise _fail(path, where, "expected an object with a string 'instruction'")
            attributes = _string_list(entry.get("instruction_attributes", []), path, f"{where}, attributes")
            if not attributes:  # the original skips these too (they cannot be scored), and says how many
                skipped += 1
                continue
            raw_options = entry.get("instruction_options", [])
            if isinstance(raw_options, dict):
                raw_options = list(raw_options.values())
            options = _string_list(raw_options, path, f"{where}, 'instruction_options'")
            upper, price_text = _price_bound(prices[product.asin], rng)
            text = entry["instruction"].strip(".") + price_text
            goals.append(_goal(product, text, attributes, options, upper))
    if skipped:
        logger.warning("WebShop: skipped %d human goals without instruction_attributes in %s", skipped, path)
    return goals


def synthetic_goals(products: list[Product], prices: dict[str, float], attributes: dict[str, dict], rng) -> list[dict]:
    """One goal per product with a synthetic instruction and per combination of its option values."""
    goals = []
    for product in products:
        entry = attributes.get(product.asin) or {}
        if not entry.get("instruction") or not entry.get("instruction_attributes"):
            continue
        upper, price_text = _price_bound(prices[product.asin], rng)
        names = sorted(product.options)
        for combination in itertools.product(*(product.options[n] for n in names)):
            chosen = dict(zip(names, combination, strict=True))
            option_text = ", and ".join(f"{k}: {v}" for k, v in chosen.items())
            option_text = f" with {option_text}" if option_text else ""
            text = f"{entry['instruction']}{option_text}{price_text}"
            goals.append(_goal(product, text, list(entry["instruction_attributes"]), list(chosen.values()), upper))
    return goals


def build_goals(
    products: list[Product],
    prices: dict[str, float],
    attributes: dict[str, dict],
    human_path: Path | None,
    seed: int = PRICE_SEED,
) -> list[Goal]:
    """Human goals (``human_path``) or synthetic ones (None), shuffled as the original."""
    rng = random.Random(seed + 1)
    raw = (
        human_goals(products, prices, human_path, rng)
        if human_path
        else synthetic_goals(products, prices, attributes, rng)
    )
    random.Random(GOAL_SHUFFLE_SEED).shuffle(raw)
    return [Goal(goal_id=str(i), **g) for i, g in enumerate(raw)]


# ---------------------------------------------------------------- search
class SearchIndex:
    """Lucene BM25 over the product documents of a store. Searches are serialized (one JVM searcher per process)
    and memoized.

    Args:
        index_dir: The Lucene index (document ids are asins).
        memo_size: Searches memoized.
        rebuild: How to rebuild the index, for the error a damaged one raises.
    """

    def __init__(self, index_dir: Path, memo_size: int = 4096, rebuild: str = "the command that built it"):
        self.index_dir = index_dir
        self.searcher = _lucene.open_searcher(index_dir, rebuild=rebuild)
        self._lock = threading.Lock()
        self._memo: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self._memo_size = memo_size

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> tuple[str, ...]:
        """The asins of the top-``k`` documents for ``query``, best first."""
        query = _lucene.clip_query(query)[0]  # before the memo too: it keys on the query
        key = f"{k}\x1f{query}"
        with self._lock:
            if key in self._memo:
                self._memo.move_to_end(key)
                return self._memo[key]
            hits = tuple(hit.docid for hit in self.searcher.search(query, k=k)) if query.strip() else ()
            self._memo[key] = hits
            if len(self._memo) > self._memo_size:
                self._memo.popitem(last=False)
            return hits


# ---------------------------------------------------------------- store
# Bump when what goes into a store changes, so that old stores are not opened.
STORE_FORMAT = "webshop-store-v2"
_TABLES = {"products": ("pos INTEGER", "price REAL", "record TEXT"), "goals": ("record TEXT",)}
PREPARE = "python -m envs.webshop.prepare"


def _encode_product(product: Product) -> str:
    return json.dumps(dataclasses.asdict(product))


def _decode_product(text: str) -> Product:
    d = json.loads(text)
    for key in ("bullets", "pricing", "attributes"):
        d[key] = tuple(d[key])
    d["options"] = {k: tuple(v) for k, v in d["options"].items()}
    d["reviews"] = tuple(Review(**r) for r in d["reviews"])
    return Product(**d)


def _decode_goal(text: str) -> Goal:
    row = json.loads(text)
    row[7], row[8] = tuple(row[7]), tuple(row[8])
    return Goal(*row)


@dataclasses.dataclass(frozen=True)
class Sources:
    """The files and options a catalog is built from.

    Attributes:
        files: Role (``products``, ``attributes``, ``human``, ``reviews``) -> file.
        num_products: Keep only the first N products.
        human_goals: Goals from the human instructions, else synthetic ones.
        index_dir: A prebuilt Lucene index of the products (the original's ``search_engine/indexes``), or None
            to build one.
    """

    files: dict[str, Path]
    num_products: int | None
    human_goals: bool
    index_dir: Path | None = None

    def key(self) -> str:
        """Where a store of these sources is kept under a cache directory (paths, sizes, times, options)."""
        stamps = fingerprint(*self.files.values())
        options = json.dumps([STORE_FORMAT, self.num_products, self.human_goals, str(self.index_dir), stamps])
        return hashlib.sha256(options.encode()).hexdigest()[:24]

    def command(self, out: Path) -> str:
        """The ``prepare`` command line that builds a store of these sources at ``out``."""
        args = [f"--{role}-file {path}" for role, path in self.files.items()]
        if self.num_products is not None:
            args.append(f"--num-products {self.num_products}")
        if not self.human_goals:
            args.append("--synthetic-goals")
        if self.index_dir is not None:
            args.append(f"--index-dir {self.index_dir}")
        return f"{PREPARE} {' '.join(args)} --out {out} --threads N"


def resolve_sources(
    data_dir: Path,
    products_file: Path | None = None,
    attributes_file: Path | None = None,
    human_file: Path | None = None,
    reviews_file: Path | None = None,
    num_products: int | None = None,
    human_goals: bool = True,
    index_dir: Path | None = None,
) -> Sources:
    """The files of a catalog: those named, else the ones found in ``data_dir``.

    Args:
        data_dir: Folder of the WebShop files.
        products_file: Product file; None: the first of :data:`PRODUCT_FILES` in ``data_dir``.
        attributes_file: Attribute file; None: the first of :data:`ATTRIBUTE_FILES` in ``data_dir``.
        human_file: Human instructions; None: ``data_dir/items_human_ins.json`` (read only for human goals).
        reviews_file: Reviews; None: ``data_dir/reviews.json`` if it exists (the original data has none).
        num_products: Keep only the first N products of the product file.
        human_goals: Goals from the human instructions (the standard WebShop benchmark), else synthetic ones.
        index_dir: A prebuilt Lucene index of the products to search (the original's ``search_engine/indexes``).
    """
    products_path = Path(products_file) if products_file else find_file(data_dir, PRODUCT_FILES, "products")
    attributes_path = Path(attributes_file) if attributes_file else find_file(data_dir, ATTRIBUTE_FILES, "attributes")
    files = {"products": products_path, "attributes": attributes_path}
    if reviews_file is not None:
        files["reviews"] = Path(reviews_file)
    elif (data_dir / REVIEW_FILE).is_file():
        files["reviews"] = data_dir / REVIEW_FILE
    if human_goals:
        files["human"] = Path(human_file) if human_file else data_dir / HUMAN_FILE
    files = {role: path.expanduser().resolve() for role, path in files.items()}
    index = Path(index_dir).expanduser().resolve() if index_dir is not None else None
    return Sources(files, num_products, human_goals, index)


def prepare(sources: Sources, out: str | os.PathLike, threads: int = 1) -> Path:
    """Build the store of a catalog at ``out``: products (with the price each sells at) and goals in SQLite, the
    products' BM25 index (or ``sources.index_dir``). Products are read one at a time; the goals are built as
    :func:`build_goals` does.

    Raises:
        FileNotFoundError: a needed file is missing.
        ValueError: a malformed file, no usable product, or no goals.
    """
    files = sources.files

    def fill(builder: store.StoreBuilder) -> dict:
        reviews = load_reviews(files["reviews"]) if "reviews" in files else None
        attributes = load_attributes(files["attributes"])
        if sources.human_goals:
            human = read_json(files["human"], "human instructions")
            wanted = set(human) if isinstance(human, dict) else set()
        else:
            wanted = {a for a, e in attributes.items() if e.get("instruction") and e.get("instruction_attributes")}
        rng = random.Random(PRICE_SEED)
        kept, prices = [], {}
        for pos, product in enumerate(iter_products(files["products"], attributes, reviews, sources.num_products)):
            price = _price(product, rng)
            builder.add("products", product.asin, pos, price, _encode_product(product))
            builder.add_doc({"id": product.asin, "contents": product.search_text()})
            if product.asin in wanted:  # the goal builders skip every other product without drawing
                kept.append(product)
                prices[product.asin] = price
        if not builder.counts["products"]:
            raise _fail(files["products"], "top level", "no usable product")
        goals = build_goals(kept, prices, attributes, files.get("human"))
        if not goals:
            raise ValueError(f"the WebShop files {', '.join(map(str, files.values()))} give no goals")
        for goal in goals:
            builder.add("goals", goal.goal_id, json.dumps(dataclasses.astuple(goal)))
        return {}

    recorded = {"files": {k: str(v) for k, v in files.items()}, "num_products": sources.num_products}
    recorded["human_goals"] = sources.human_goals
    index = sources.index_dir
    return store.build(out, "webshop", STORE_FORMAT, fill, recorded, threads, _TABLES, external_index=index)


class _Products(Mapping):
    """asin -> :class:`Product`, read from the store on demand (the last few thousand decoded ones kept)."""

    def __init__(self, st: store.Store):
        self._store = st
        self._get = functools.lru_cache(maxsize=4096)(self._load)

    def _load(self, asin: str) -> tuple[Product, float] | None:
        row = self._store.get("products", asin)
        return None if row is None else (_decode_product(row[2]), row[1])

    def entry(self, asin: str) -> tuple[Product, float]:
        found = self._get(asin) if isinstance(asin, str) else None
        if found is None:
            raise KeyError(asin)
        return found

    def __getitem__(self, asin: str) -> Product:
        return self.entry(asin)[0]

    def __contains__(self, asin: object) -> bool:
        return isinstance(asin, str) and self._get(asin) is not None

    def __len__(self) -> int:
        return self._store.count("products")

    def __iter__(self) -> Iterator[str]:
        return iter(self._store.column("products", "key", order_by="pos"))


class _Prices(Mapping):
    """asin -> the price the product sells at."""

    def __init__(self, products: _Products):
        self._products = products

    def __getitem__(self, asin: str) -> float:
        return self._products.entry(asin)[1]

    def __len__(self) -> int:
        return len(self._products)

    def __iter__(self) -> Iterator[str]:
        return iter(self._products)


class _Goals(Sequence):
    """The shuffled goals, read from the store on demand."""

    def __init__(self, st: store.Store):
        self._store = st
        self._get = functools.lru_cache(maxsize=4096)(self._load)

    def _load(self, index: int) -> Goal:
        return _decode_goal(self._store.get("goals", str(index))[0])

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        return self._get(index % len(self))

    def __len__(self) -> int:
        return self._store.count("goals")


# ---------------------------------------------------------------- catalog
class Catalog:
    """Products, their prices, the goals and the search index of one prepared store, read on demand.

    Attributes:
        products: asin -> product (a read-only mapping over the store).
        prices: asin -> price paid when bought.
        goals: The shuffled goals; ``goals[i].goal_id == str(i)``.
        index: The BM25 index.
        fingerprint: Identifies products, prices and goals (and a prebuilt index): equal in every process that
            opened a store of the same data.
        files: The files the store was built from, by role.
        store: The store.
    """

    def __init__(self, st: store.Store):
        self.store = st
        self.products = _Products(st)
        self.prices = _Prices(self.products)
        self.goals = _Goals(st)
        rebuild = f"rm -r {st.root}, then prepare it again ({PREPARE}; a store under cache_dir: on next use)"
        self.index = SearchIndex(st.index_dir, rebuild=rebuild)
        self.files = {role: Path(path) for role, path in st.manifest["sources"]["files"].items()}
        # a prebuilt index is another search engine: its files (names, sizes) are part of what a state depends on
        self.prebuilt_index = "index_files" in st.manifest
        index_id = st.manifest.get("index_files", "built")
        self.fingerprint = hashlib.sha256(f"{st.fingerprint}:{index_id}".encode()).hexdigest()[:16]

    def search(self, query: str) -> tuple[str, ...]:
        """The top :data:`SEARCH_RETURN_N` asins for ``query`` (of a prebuilt index, those in the catalog)."""
        hits = self.index.search(query)
        return tuple(a for a in hits if a in self.products) if self.prebuilt_index else hits


def open_catalog(store_dir: str | os.PathLike, command: str | None = None) -> Catalog:
    """The catalog of a prepared store (see :func:`prepare`).

    Raises:
        StoreMissingError: no store at ``store_dir`` (the message gives ``command``, else the generic one).
    """
    command = command or f"{PREPARE} --data-dir WEBSHOP_DATA_DIR --out {store_dir} --threads N"
    return Catalog(store.open_store(store_dir, "webshop", STORE_FORMAT, command))


def load_catalog(sources: Sources, cache_dir: Path | None = None) -> Catalog:
    """Open the catalog of ``sources`` (:func:`resolve_sources`) from its store under ``cache_dir``: inputs up to
    :data:`envs.store.AUTO_PREPARE_BYTES` (the shipped catalog, test data) are prepared there on first use; larger
    ones must be prepared first, outside the env workers (``python -m envs.webshop.prepare``).

    Args:
        sources: The files and options.
        cache_dir: Where stores are kept (default ``_lucene.default_cache_dir("webshop")``).

    Raises:
        FileNotFoundError: a needed file is missing (the message names it).
        StoreMissingError: the data is large and has no store yet (the message gives the command).
        ValueError: a file is malformed (the message names it and the entry).
    """
    out = Path(cache_dir or _lucene.default_cache_dir("webshop")).expanduser() / sources.key()
    for path in sources.files.values():
        if not path.is_file():
            raise FileNotFoundError(f"WebShop {path.name} file not found: {path}")
    size = sum(path.stat().st_size for path in sources.files.values())
    command = sources.command(out)
    opened = store.cached(out, size, command, lambda: prepare(sources, out), "webshop", STORE_FORMAT)
    logger.info("WebShop catalog: products from %s (store %s)", sources.files["products"], out)
    return Catalog(opened)
