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
7 products per type. Run ``python -m envs.webshop.make_data`` to rewrite the files (deterministic), ``--check``
to also measure how often the expert query finds the goal product on the first results page.
"""

from __future__ import annotations

import argparse
import json
import random
import string
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
SEED = 20261203
PER_TYPE = 7

# category -> product types: (query, title noun phrase, product_category, features, options, price range)
TYPES: dict[str, list[dict]] = {
    "fashion": [
        {
            "query": "men's t-shirt",
            "noun": "Men's T-Shirt",
            "path": "Clothing, Shoes & Jewelry › Men › Clothing › Shirts › T-Shirts",
            "features": [
                "short sleeve",
                "100% cotton",
                "slim fit",
                "crew neck",
                "v-neck",
                "machine wash",
                "moisture wicking",
                "relaxed fit",
                "tagless",
            ],
            "options": {
                "Color": ["Black", "White", "Navy Blue", "Heather Grey", "Olive Green", "Burgundy", "Royal Blue"],
                "Size": ["Small", "Medium", "Large", "X-Large", "XX-Large"],
            },
            "price": (9, 29),
        },
        {
            "query": "women's running shoes",
            "noun": "Women's Running Shoes",
            "path": "Clothing, Shoes & Jewelry › Women › Shoes › Athletic › Running › Road Running",
            "features": [
                "lightweight",
                "breathable mesh",
                "non slip",
                "rubber sole",
                "memory foam",
                "arch support",
                "lace up",
                "cushioned",
            ],
            "options": {
                "Color": ["Black White", "Pink", "Grey", "Light Blue", "Purple", "All Black"],
                "Size": ["6", "6.5", "7", "7.5", "8", "8.5", "9", "10"],
            },
            "price": (29, 89),
        },
        {
            "query": "women's dress",
            "noun": "Women's Casual Dress",
            "path": "Clothing, Shoes & Jewelry › Women › Clothing › Dresses › Casual",
            "features": [
                "floral print",
                "sleeveless",
                "high waist",
                "midi length",
                "wrap style",
                "machine washable",
                "side pockets",
                "flowy",
            ],
            "options": {
                "Color": ["Floral Blue", "Black", "Wine Red", "Green", "Apricot", "White"],
                "Size": ["X-Small", "Small", "Medium", "Large", "X-Large"],
            },
            "price": (19, 49),
        },
        {
            "query": "men's jeans",
            "noun": "Men's Jeans",
            "path": "Clothing, Shoes & Jewelry › Men › Clothing › Jeans",
            "features": [
                "straight leg",
                "stretch denim",
                "classic fit",
                "button closure",
                "five pocket",
                "machine wash",
                "tapered leg",
                "regular fit",
            ],
            "options": {
                "Color": ["Dark Wash", "Light Wash", "Black", "Medium Stone", "Indigo"],
                "Size": ["30W x 30L", "32W x 30L", "32W x 32L", "34W x 32L", "36W x 32L"],
            },
            "price": (24, 59),
        },
        {
            "query": "hoodie",
            "noun": "Pullover Hoodie",
            "path": "Clothing, Shoes & Jewelry › Women › Clothing › Fashion Hoodies & Sweatshirts",
            "features": [
                "fleece lined",
                "kangaroo pocket",
                "drawstring hood",
                "long sleeve",
                "oversized fit",
                "soft fabric",
                "ribbed cuffs",
                "machine wash",
            ],
            "options": {
                "Color": ["Black", "Grey", "Pink", "Navy", "Sage Green", "Cream"],
                "Size": ["Small", "Medium", "Large", "X-Large", "XX-Large"],
            },
            "price": (18, 45),
        },
    ],
    "beauty": [
        {
            "query": "shampoo",
            "noun": "Shampoo",
            "path": "Beauty & Personal Care › Hair Care › Shampoo & Conditioner › Shampoos",
            "features": [
                "sulfate free",
                "paraben free",
                "tea tree",
                "argan oil",
                "natural ingredients",
                "color safe",
                "dry scalp",
                "cruelty free",
                "hair growth",
            ],
            "options": {
                "Size": ["8 Fl Oz (Pack of 1)", "16 Fl Oz (Pack of 1)", "16 Fl Oz (Pack of 2)"],
                "Scent": ["Tea Tree Mint", "Coconut", "Lavender", "Unscented"],
            },
            "price": (7, 29),
        },
        {
            "query": "lipstick",
            "noun": "Matte Lipstick",
            "path": "Beauty & Personal Care › Makeup › Lips › Lipstick",
            "features": [
                "long lasting",
                "waterproof",
                "moisturizing",
                "vegan",
                "cruelty free",
                "highly pigmented",
                "non sticky",
                "smudge proof",
            ],
            "options": {
                "Color": ["Ruby Red", "Nude Pink", "Berry", "Coral", "Mauve", "Classic Red"],
                "Size": ["1 Count", "3 Count"],
            },
            "price": (5, 24),
        },
        {
            "query": "face moisturizer",
            "noun": "Face Moisturizer Cream",
            "path": "Beauty & Personal Care › Skin Care › Face › Creams & Moisturizers › Face Moisturizers",
            "features": [
                "hyaluronic acid",
                "fragrance free",
                "oil free",
                "sensitive skin",
                "spf 30",
                "anti aging",
                "vitamin c",
                "dermatologist tested",
                "non comedogenic",
            ],
            "options": {"Size": ["1.7 Fl Oz", "3.4 Fl Oz"]},
            "price": (9, 45),
        },
        {
            "query": "hair extensions",
            "noun": "Hair Extensions",
            "path": "Beauty & Personal Care › Hair Care › Hair Extensions, Wigs & Accessories › Hair Extensions",
            "features": [
                "clip in",
                "natural looking",
                "human hair",
                "heat resistant",
                "straight",
                "body wave",
                "seamless",
                "easy to apply",
            ],
            "options": {
                "Color": ["Natural Black", "Dark Brown", "Ash Blonde", "Ombre Brown", "Auburn"],
                "Size": ["16 Inch", "18 Inch", "20 Inch", "22 Inch"],
            },
            "price": (19, 79),
        },
        {
            "query": "nail polish",
            "noun": "Nail Polish",
            "path": "Beauty & Personal Care › Foot, Hand & Nail Care › Nail Art & Polish › Nail Polish",
            "features": [
                "quick dry",
                "long lasting",
                "non toxic",
                "gel effect",
                "chip resistant",
                "vegan",
                "glossy finish",
            ],
            "options": {
                "Color": ["Cherry Red", "Pink", "Nude", "Lilac", "Navy", "Glitter Silver"],
                "Size": ["0.5 Fl Oz (Pack of 1)", "0.5 Fl Oz (Pack of 6)"],
            },
            "price": (5, 22),
        },
    ],
    "electronics": [
        {
            "query": "bluetooth headphones",
            "noun": "Over Ear Bluetooth Headphones",
            "path": "Electronics › Headphones, Earbuds & Accessories › Headphones › Over-Ear Headphones",
            "features": [
                "noise cancelling",
                "wireless bluetooth",
                "long battery life",
                "built-in microphone",
                "foldable",
                "hi-fi stereo",
                "fast charging",
                "memory foam ear cushions",
            ],
            "options": {"Color": ["Black", "White", "Silver", "Rose Gold", "Blue"]},
            "price": (25, 129),
        },
        {
            "query": "phone charger",
            "noun": "USB Wall Charger",
            "path": "Electronics › Cell Phones & Accessories › Accessories › Chargers & Power Adapters › Wall Chargers",
            "features": [
                "fast charging",
                "usb c",
                "dual port",
                "compact size",
                "20w",
                "overheat protection",
                "foldable plug",
            ],
            "options": {"Color": ["White", "Black"], "Size": ["1 Pack", "2 Pack", "3 Pack"]},
            "price": (9, 29),
        },
        {
            "query": "hdmi cable",
            "noun": "HDMI Cable",
            "path": "Electronics › Television & Video › Accessories › Cables › HDMI Cables",
            "features": ["4k", "high speed", "braided nylon", "gold plated", "ethernet", "8k", "60hz", "hdr"],
            "options": {"Size": ["3 Ft", "6 Ft", "10 Ft", "15 Ft"], "Color": ["Black", "Grey"]},
            "price": (6, 25),
        },
        {
            "query": "wireless mouse",
            "noun": "Wireless Mouse",
            "path": "Electronics › Computers & Accessories › Computer Accessories & Peripherals › Mice",
            "features": [
                "ergonomic design",
                "rechargeable",
                "silent click",
                "2.4g wireless",
                "adjustable dpi",
                "usb receiver",
                "long battery life",
                "bluetooth",
            ],
            "options": {"Color": ["Black", "Grey", "White", "Pink", "Blue"]},
            "price": (9, 39),
        },
        {
            "query": "portable speaker",
            "noun": "Portable Bluetooth Speaker",
            "path": "Electronics › Portable Audio & Video › Portable Speakers & Docks › Portable Bluetooth Speakers",
            "features": [
                "waterproof",
                "bluetooth 5.0",
                "loud sound",
                "deep bass",
                "24 hour playtime",
                "built-in microphone",
                "usb charging",
                "outdoor",
            ],
            "options": {"Color": ["Black", "Blue", "Red", "Camo", "Teal"]},
            "price": (19, 99),
        },
    ],
    "furniture": [
        {
            "query": "office chair",
            "noun": "Office Desk Chair",
            "path": "Home & Kitchen › Furniture › Home Office Furniture › Home Office Chairs › Desk Chairs",
            "features": [
                "lumbar support",
                "adjustable height",
                "ergonomic design",
                "mesh back",
                "swivel",
                "padded armrests",
                "high back",
                "easy assembly",
                "padded seat",
            ],
            "options": {"Color": ["Black", "Grey", "White", "Blue"]},
            "price": (59, 229),
        },
        {
            "query": "bookshelf",
            "noun": "Bookshelf",
            "path": "Home & Kitchen › Furniture › Living Room Furniture › Bookcases",
            "features": [
                "solid wood",
                "easy assembly",
                "industrial style",
                "space saving",
                "metal frame",
                "open shelf",
                "storage space",
                "anti tip",
            ],
            "options": {
                "Color": ["Rustic Brown", "White", "Black", "Espresso", "Natural Oak"],
                "Size": ["3-Tier", "4-Tier", "5-Tier"],
            },
            "price": (39, 159),
        },
        {
            "query": "coffee table",
            "noun": "Coffee Table",
            "path": "Home & Kitchen › Furniture › Living Room Furniture › Tables › Coffee Tables",
            "features": [
                "storage shelf",
                "lift top",
                "mid century",
                "solid wood",
                "tempered glass",
                "easy assembly",
                "round",
                "living room",
            ],
            "options": {"Color": ["Walnut", "White", "Black", "Grey Wash", "Natural"]},
            "price": (49, 199),
        },
        {
            "query": "bed frame",
            "noun": "Platform Bed Frame",
            "path": "Home & Kitchen › Furniture › Bedroom Furniture › Beds, Frames & Bases › Beds",
            "features": [
                "metal platform",
                "no box spring needed",
                "upholstered headboard",
                "under bed storage",
                "noise free",
                "easy assembly",
                "wood slats",
                "heavy duty",
            ],
            "options": {"Color": ["Black", "Grey", "White", "Beige"], "Size": ["Twin", "Full", "Queen", "King"]},
            "price": (89, 329),
        },
        {
            "query": "bar stools",
            "noun": "Bar Stools",
            "path": "Home & Kitchen › Furniture › Kitchen & Dining Room Furniture › Stools & Bar Stools",
            "features": [
                "set of 2",
                "adjustable height",
                "swivel",
                "faux leather",
                "backrest",
                "footrest",
                "counter height",
                "metal legs",
            ],
            "options": {"Color": ["Black", "White", "Grey", "Brown", "Green"]},
            "price": (49, 179),
        },
    ],
    "food": [
        {
            "query": "green tea",
            "noun": "Green Tea Bags",
            "path": "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Tea › Green",
            "features": [
                "organic",
                "decaf",
                "non gmo",
                "gluten free",
                "natural flavor",
                "individually wrapped",
                "antioxidant",
                "kosher",
            ],
            "options": {
                "Flavor Name": ["Jasmine", "Mint", "Honey Ginger", "Lemon", "Matcha"],
                "Size": ["20 Count (Pack of 1)", "20 Count (Pack of 6)", "100 Count"],
            },
            "price": (4, 24),
        },
        {
            "query": "protein bars",
            "noun": "Protein Bars",
            "path": "Grocery & Gourmet Food › Snacks & Sweets › Snack Foods › Bars › Protein",
            "features": [
                "gluten free",
                "high protein",
                "low sugar",
                "keto friendly",
                "plant based",
                "non gmo",
                "low carb",
                "dairy free",
            ],
            "options": {
                "Flavor Name": [
                    "Chocolate Peanut Butter",
                    "Cookies and Cream",
                    "Almond",
                    "Birthday Cake",
                    "Salted Caramel",
                ],
                "Size": ["12 Count", "24 Count"],
            },
            "price": (14, 39),
        },
        {
            "query": "coffee beans",
            "noun": "Whole Bean Coffee",
            "path": "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Coffee › Whole Coffee Beans",
            "features": [
                "medium roast",
                "dark roast",
                "single origin",
                "fair trade",
                "organic",
                "arabica",
                "low acid",
                "kosher",
            ],
            "options": {"Size": ["12 Ounce", "2 Pound", "5 Pound"], "Flavor Name": ["Original", "Vanilla", "Hazelnut"]},
            "price": (9, 49),
        },
        {
            "query": "dark chocolate",
            "noun": "Dark Chocolate Bars",
            "path": "Grocery & Gourmet Food › Snacks & Sweets › Candy & Chocolate › Chocolate › Chocolate Bars",
            "features": [
                "70% cacao",
                "sugar free",
                "vegan",
                "dairy free",
                "fair trade",
                "gift box",
                "individually wrapped",
                "keto",
            ],
            "options": {
                "Flavor Name": ["Sea Salt", "Orange", "Raspberry", "Mint", "Almond"],
                "Size": ["3.5 Ounce (Pack of 4)", "3.5 Ounce (Pack of 12)"],
            },
            "price": (8, 34),
        },
        {
            "query": "trail mix",
            "noun": "Trail Mix",
            "path": "Grocery & Gourmet Food › Snacks & Sweets › Snack Foods › Nuts & Seeds › Trail Mix",
            "features": [
                "gluten free",
                "resealable bag",
                "high protein",
                "no artificial flavors",
                "roasted",
                "unsalted",
                "kosher",
                "non gmo",
            ],
            "options": {
                "Flavor Name": ["Classic", "Tropical", "Sweet and Salty", "Chocolate"],
                "Size": ["1 Pound", "2 Pound", "6 Pack"],
            },
            "price": (6, 28),
        },
    ],
}

BRAND_PARTS = (
    ["nor", "vel", "aster", "bri", "cal", "dun", "elo", "fen", "gal", "hol", "ix", "jun", "kes", "lum"],
    ["vik", "ora", "ton", "ley", "mar", "ex", "ia", "ford", "ix", "wood", "line", "co", "berg", "io"],
)
STYLES = ["Premium", "Classic", "Everyday", "Essential", "Deluxe", "Signature", "Original", "Pro", "Basic", "Lux"]
BULLET_ENDINGS = [
    "one of the reasons customers choose this {noun}.",
    "designed and tested for quality and comfort.",
    "built to last through daily use.",
    "a detail our {noun} gets right.",
]
OPENERS = [
    "i'm looking for {a} {query} that is {attrs}",
    "i need {a} {query} which is {attrs}",
    "i want to buy {a} {query} that is {attrs}",
    "find me {a} {query} that is {attrs}",
    "i am looking for {a} {attrs} {query}",
    "please help me find {a} {query} that is {attrs}",
]
REVIEW_TITLES = {
    5: ["Love it", "Exactly as described", "Great value"],
    4: ["Pretty good", "Works well"],
    3: ["It's okay", "Average"],
    2: ["Not great", "Disappointed"],
    1: ["Would not buy again"],
}
REVIEW_BODIES = {
    5: "Really happy with this {noun}. The {feat} is just what I wanted.",
    4: "Good {noun} overall. The {feat} works, shipping was a bit slow.",
    3: "The {noun} is fine for the price, but the {feat} could be better.",
    2: "The {noun} arrived late and the {feat} is not as advertised.",
    1: "Returned the {noun}. It did not feel {feat} at all.",
}


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DATA_DIR)
    parser.add_argument("--check", action="store_true", help="measure expert-query retrievability of all goals")
    args = parser.parse_args(argv)
    for name, path in write(args.out).items():
        print(f"{name}: {path.stat().st_size} bytes -> {path}")
    if args.check:
        from envs.webshop.env import WebShopEnv, retrievability

        env = WebShopEnv(data_dir=args.out, split="all")
        print(json.dumps(retrievability(env), indent=1))


if __name__ == "__main__":
    main()
