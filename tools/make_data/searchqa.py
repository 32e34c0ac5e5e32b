"""Generate the small offline Search-QA data shipped with the project: a fictional world, its passages and questions.

Everything is invented here (names from a syllable generator, facts drawn from a seeded RNG), so no dataset is
copied and an LLM cannot answer from memory: it has to search. The output is deterministic:

* ``data/corpus.jsonl``: ``{"id", "title", "contents"}``, one encyclopedia-style passage per entity;
* ``data/questions/{train,test}.jsonl``: ``{"id", "question", "golden_answers", "data_source", "metadata"}`` in the
  FlashRAG / Search-R1 format. ``data_source`` is ``nq_mini`` (single-hop: one passage answers it) or
  ``hotpot_mini`` (multi-hop: a bridge entity or a comparison of two passages, so two searches).
  ``metadata.expert_queries`` holds the searches that find the supporting passages.

Run ``python -m tools.make_data.searchqa`` to rewrite the files, ``--check`` to also measure how often BM25 finds a
passage containing the gold answer (with the question text, and with the expert queries).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
from collections import defaultdict
from pathlib import Path

from envs.searchqa.answer import normalize_answer
from envs.searchqa.corpus import DATA_DIR
from envs.searchqa.env import SearchQAEnv

SEED = 20261202
NUM_SINGLE_HOP = 100
NUM_MULTI_HOP = 80
TEST_FRACTION = 0.25

# The seed literals (syllables, professions, titles, places, ...) are data: searchqa_seed.json next to this.
_SEED = json.loads(Path(__file__).with_name("searchqa_seed.json").read_text(encoding="utf-8"))
ONSETS: list[str] = _SEED["onsets"]
VOWELS: list[str] = _SEED["vowels"]
MIDDLE_CODAS: list[str] = _SEED["middle_codas"]
FINAL_CODAS: list[str] = _SEED["final_codas"]
PROFESSIONS: dict[str, int] = _SEED["professions"]
WORK_KIND: dict[str, str] = _SEED["work_kind"]
WORK_VERB: dict[str, str] = _SEED["work_verb"]
WORK_PARTICIPLE: dict[str, str] = _SEED["work_participle"]
WORKS_PER: dict[str, int] = _SEED["works_per"]
TITLE_ADJ: list[str] = _SEED["title_adj"]
TITLE_NOUN: list[str] = _SEED["title_noun"]
SUBJECTS: list[str] = _SEED["subjects"]
DEVICE_PREFIX: list[str] = _SEED["device_prefix"]
DEVICES: list[str] = _SEED["devices"]
PURPOSES: list[str] = _SEED["purposes"]
PRODUCTS: list[str] = _SEED["products"]
COMPANY_SUFFIX: list[str] = _SEED["company_suffix"]
ANIMALS: list[str] = _SEED["animals"]
GOVERNMENTS: list[str] = _SEED["governments"]
SPORTS: list[str] = _SEED["sports"]
CLUB_SUFFIX: list[str] = _SEED["club_suffix"]
STADIUM_SUFFIX: list[str] = _SEED["stadium_suffix"]
MONTHS: list[str] = _SEED["months"]
CELEBRATIONS: list[str] = _SEED["celebrations"]
INDUSTRIES: list[str] = _SEED["industries"]
LATER_LIFE: list[str] = _SEED["later_life"]
RANGES = 4
SEAS = 4


class Names:
    """Unique invented words; two names never share a crude stem, so BM25 cannot confuse them."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()

    def word(self, syllables: int, suffix: str = "") -> str:
        while True:
            parts = []
            for i in range(syllables):
                coda = self.rng.choice(FINAL_CODAS if i == syllables - 1 and not suffix else MIDDLE_CODAS)
                parts.append(self.rng.choice(ONSETS) + self.rng.choice(VOWELS) + coda)
            stem = "".join(parts)
            if suffix and stem[-1] in "aeiou" and suffix[0] in "aeiou":
                stem += "n"  # no vowel clusters such as "eiia"
            word = (stem + suffix).capitalize()
            key = word.lower().rstrip("s")
            if 4 <= len(word) <= 11 and key not in self.used:
                self.used.add(key)
                return word


@dataclasses.dataclass
class Person:
    name: str
    profession: str
    born: int
    birthplace: str
    mentor: str | None = None


class World:
    """The entities and their facts; each ``*_passage`` method writes one passage."""

    def __init__(self, seed: int = SEED):
        self.rng = random.Random(seed)
        rng, names = self.rng, Names(self.rng)
        self.seas = ["Amber Sea", f"Sea of {names.word(2)}", f"Lake {names.word(2)}", f"{names.word(2)} Gulf"]
        self.ranges = [f"{names.word(2)} Mountains" for _ in range(RANGES)]
        self.countries: dict[str, dict] = {}
        for suffix, animal in zip(["ia", "ara", "esh", "ovar", "und"] * 2, ANIMALS, strict=True):
            name = names.word(2, suffix)
            self.countries[name] = {
                "currency": names.word(1).lower(),
                "animal": animal,
                "founded": rng.randrange(820, 1480),
                "government": rng.choice(GOVERNMENTS),
                "language": names.word(2, "ic"),
                "sea": rng.choice(self.seas),
                "cities": [],
            }
        self.cities: dict[str, dict] = {}
        city_suffixes = ["", "", "holm", "ford", "gate", "mere", "wick", "by"]
        for country, info in self.countries.items():
            for _ in range(4):
                name = names.word(rng.choice([2, 2, 3]), rng.choice(city_suffixes))
                self.cities[name] = {"country": country, "founded": rng.randrange(900, 1650)}
                self.cities[name]["industry"] = rng.choice(INDUSTRIES)
                self.cities[name]["population"] = rng.randrange(8, 900) * 1000
                info["cities"].append(name)
            info["capital"] = info["cities"][0]
        self.mountains: dict[str, dict] = {}
        for _ in range(15):
            name = f"Mount {names.word(2)}"
            country = rng.choice(list(self.countries))
            height = rng.randrange(1800, 6200)
            self.mountains[name] = {"country": country, "height": height, "range": rng.choice(self.ranges)}
        self.rivers: dict[str, dict] = {}
        city_list = list(self.cities)
        rng.shuffle(city_list)
        for mountain in self.mountains:
            name = f"{names.word(2)} River"
            self.rivers[name] = {"source": mountain, "mouth": rng.choice(self.seas), "cities": []}
            self.rivers[name]["length"] = rng.randrange(60, 1400)
            self.mountains[mountain]["river"] = name
        for i, city in enumerate(city_list):
            river = list(self.rivers)[i % len(self.rivers)]
            self.rivers[river]["cities"].append(city)
            self.cities[city]["river"] = river
        self._people(names)
        self._things(names)

    # ------------------------------------------------------------------ entities
    def _people(self, names: Names) -> None:
        rng = self.rng
        self.people: dict[str, Person] = {}
        for profession, count in PROFESSIONS.items():
            for _ in range(count):
                name = f"{names.word(2)} {names.word(rng.choice([2, 3]))}"
                born = rng.randrange(1650, 1880)
                self.people[name] = Person(name, profession, born, rng.choice(list(self.cities)))
        for person in self.people.values():
            elders = [
                p.name
                for p in self.people.values()
                if p.profession == person.profession and 15 <= person.born - p.born <= 45
            ]
            if elders and rng.random() < 0.7:
                person.mentor = rng.choice(sorted(elders))

    def _of(self, *professions: str) -> list[Person]:
        return [p for p in self.people.values() if p.profession in professions]

    def _things(self, names: Names) -> None:
        rng = self.rng
        titles = [f"The {a} {n}" for a in TITLE_ADJ for n in TITLE_NOUN]
        rng.shuffle(titles)
        self.works: dict[str, dict] = {}
        for person in self._of(*WORKS_PER):
            for _ in range(WORKS_PER[person.profession]):
                title = titles.pop()
                year = person.born + rng.randrange(22, 55)
                self.works[title] = {"creator": person.name, "year": year, "subject": rng.choice(SUBJECTS)}
        devices = [f"{p} {d}" for p in DEVICE_PREFIX for d in DEVICES]
        rng.shuffle(devices)
        self.inventions: dict[str, dict] = {}
        for person in self._of("engineer", "physician"):
            device = devices.pop()
            year = person.born + rng.randrange(24, 50)
            self.inventions[device] = {"inventor": person.name, "year": year, "purpose": rng.choice(PURPOSES)}
        products = list(PRODUCTS)
        rng.shuffle(products)
        founders = [p for p in self._of("merchant") for _ in range(2)] + self._of("engineer")[:10]
        self.companies: dict[str, dict] = {}
        for founder, product in zip(founders, products, strict=True):
            name = f"{names.word(2)} {rng.choice(COMPANY_SUFFIX)}"
            city = rng.choice(list(self.cities))
            year = founder.born + rng.randrange(25, 45)
            self.companies[name] = {"founder": founder.name, "year": year, "city": city, "product": product}
        explorers = self._of("explorer")
        for i, info in enumerate(self.mountains.values()):
            climber = explorers[i % len(explorers)]
            info["climber"], info["ascent"] = climber.name, climber.born + rng.randrange(20, 40)
        self.clubs: dict[str, dict] = {}
        for city in rng.sample(list(self.cities), 15):
            name = f"{names.word(2)} {rng.choice(CLUB_SUFFIX)}"
            stadium = f"{names.word(2)} {rng.choice(STADIUM_SUFFIX)}"
            self.clubs[name] = {"city": city, "sport": rng.choice(SPORTS), "stadium": stadium}
            self.clubs[name]["founded"] = rng.randrange(1850, 1990)
        self.festivals: dict[str, dict] = {}
        for city in rng.sample(list(self.cities), 15):
            name = f"{names.word(2)} Festival"
            self.festivals[name] = {"city": city, "month": rng.choice(MONTHS), "celebrates": rng.choice(CELEBRATIONS)}
        self.battles: dict[str, dict] = {}
        generals, countries = self._of("general"), list(self.countries)
        for i in range(15):
            general = generals[i % len(generals)]
            victor, loser = rng.sample(countries, 2)
            year = general.born + rng.randrange(25, 50)
            near = rng.choice(self.countries[loser]["cities"])
            name = f"Battle of {names.word(2)}"
            self.battles[name] = {"commander": general.name, "victor": victor, "loser": loser, "year": year}
            self.battles[name]["near"] = near
        self.colleges: dict[str, dict] = {}
        builders = self._of("architect")
        for i, founder in enumerate(self._of("physician", "astronomer")[:12]):
            name = f"{names.word(2)} {rng.choice(['College', 'Academy', 'Institute'])}"
            architect = builders[i % len(builders)]
            city = rng.choice(list(self.cities))
            year = founder.born + rng.randrange(30, 55)
            self.colleges[name] = {"founder": founder.name, "architect": architect.name, "city": city, "year": year}

    # ------------------------------------------------------------------ passages
    def passages(self) -> list[dict]:
        out: list[tuple[str, str]] = []
        out += [(sea, self.sea_passage(sea)) for sea in self.seas]
        out += [(rng_name, self.range_passage(rng_name)) for rng_name in self.ranges]
        out += [(c, self.country_passage(c)) for c in self.countries]
        out += [(c, self.city_passage(c)) for c in self.cities]
        out += [(m, self.mountain_passage(m)) for m in self.mountains]
        out += [(r, self.river_passage(r)) for r in self.rivers]
        out += [(p, self.person_passage(p)) for p in self.people]
        out += [(w, self.work_passage(w)) for w in self.works]
        out += [(i.capitalize(), self.invention_passage(i)) for i in self.inventions]
        out += [(c, self.company_passage(c)) for c in self.companies]
        out += [(c, self.club_passage(c)) for c in self.clubs]
        out += [(f, self.festival_passage(f)) for f in self.festivals]
        out += [(b, self.battle_passage(b)) for b in self.battles]
        out += [(c, self.college_passage(c)) for c in self.colleges]
        return [{"id": f"doc{i:04d}", "title": t, "contents": text} for i, (t, text) in enumerate(out)]

    def sea_passage(self, sea: str) -> str:
        rivers = [r for r, info in self.rivers.items() if info["mouth"] == sea]
        coast = [c for c, info in self.countries.items() if info["sea"] == sea]
        named = _the(sea)
        text = f"{named[0].upper()}{named[1:]} is a body of water in the south of the region."
        if rivers:
            text += f" Rivers that empty into it include the {', the '.join(rivers)}."
        if coast:
            text += f" Its shores are shared by {', '.join(coast)}."
        return text

    def range_passage(self, name: str) -> str:
        peaks = [m for m, info in self.mountains.items() if info["range"] == name]
        text = f"The {name} are a chain of peaks running across the interior of the region."
        if peaks:
            highest = max(peaks, key=lambda m: self.mountains[m]["height"])
            text += f" The range includes {', '.join(peaks)}; the highest of them is {highest}."
        return text

    def country_passage(self, name: str) -> str:
        info = self.countries[name]
        variants = [
            f"{name} is a country on the shore of {_the(info['sea'])}. Its capital and largest city is "
            f"{info['capital']}. The country was unified in {info['founded']} and is governed by "
            f"{info['government']}.",
            f"{name} is a state founded in {info['founded']}, governed by {info['government']}. The capital of "
            f"{name} is {info['capital']}, and the country borders {_the(info['sea'])}.",
        ]
        text = self.rng.choice(variants)
        text += (
            f" The official language is {info['language']} and the currency is the {info['currency']}. The "
            f"national animal of {name} is the {info['animal']}."
        )
        return text

    def city_passage(self, name: str) -> str:
        info = self.cities[name]
        capital = self.countries[info["country"]]["capital"] == name
        role = f"the capital of {info['country']}" if capital else f"a city in {info['country']}"
        text = self.rng.choice(
            [
                f"{name} is {role}, on the banks of the {info['river']}. It was founded in {info['founded']}.",
                f"{name}, founded in {info['founded']}, is {role}. The {info['river']} flows through the city.",
            ]
        )
        text += f" It has about {info['population']:,} inhabitants and is known for its {info['industry']}."
        return text

    def mountain_passage(self, name: str) -> str:
        info = self.mountains[name]
        return (
            f"{name} is a mountain in the {info['range']} in {info['country']}, rising to {info['height']:,} metres. "
            f"The first ascent of {name} was made in {info['ascent']} by "
            f"the explorer {info['climber']}."
        )

    def river_passage(self, name: str) -> str:
        info = self.rivers[name]
        cities = info["cities"]
        through = cities[0] if len(cities) == 1 else ", ".join(cities[:-1]) + " and " + cities[-1]
        return (
            f"The {name} is a river about {info['length']} kilometres long. It rises on {info['source']} and flows "
            f"through {through} before emptying into {_the(info['mouth'])}."
        )

    def person_passage(self, name: str) -> str:
        p = self.people[name]
        text = self.rng.choice(
            [
                f"{name} (born {p.born}) was a {p.profession} born in {p.birthplace}.",
                f"{name} was a {p.profession}, born in {p.birthplace} in {p.born}.",
            ]
        )
        first = name.split()[0]
        if p.mentor:
            text += f" {first} trained under the {p.profession} {p.mentor}."
        text += f" {first} later settled in {self.rng.choice(list(self.cities))}"
        text += f" and {self.rng.choice(LATER_LIFE)}."
        return text

    def work_passage(self, title: str) -> str:
        info = self.works[title]
        creator = self.people[info["creator"]]
        kind, verb = WORK_KIND[creator.profession], WORK_PARTICIPLE[creator.profession]
        return self.rng.choice(
            [
                f"{title} is a {kind} {verb} by the {creator.profession} {creator.name} in {info['year']}. It "
                f"depicts {info['subject']}.",
                f"{title} ({info['year']}) is a {kind} about {info['subject']}. It was {verb} by {creator.name}.",
            ]
        )

    def invention_passage(self, device: str) -> str:
        info = self.inventions[device]
        return (
            f"The {device} is a device built to {info['purpose']}. It was invented in {info['year']} by "
            f"{info['inventor']}."
        )

    def company_passage(self, name: str) -> str:
        info = self.companies[name]
        return self.rng.choice(
            [
                f"{name} is a maker of {info['product']} based in {info['city']}. It was founded in {info['year']} "
                f"by {info['founder']}.",
                f"{name} was founded by {info['founder']} in {info['year']}. The firm, headquartered in "
                f"{info['city']}, makes {info['product']}.",
            ]
        )

    def club_passage(self, name: str) -> str:
        info = self.clubs[name]
        return (
            f"{name} is a {info['sport']} club based in {info['city']}, founded in {info['founded']}. The club "
            f"plays its home matches at {info['stadium']}."
        )

    def festival_passage(self, name: str) -> str:
        info = self.festivals[name]
        return (
            f"The {name} is held every {info['month']} in {info['city']}. It celebrates {info['celebrates']} with "
            f"music, markets and a procession."
        )

    def battle_passage(self, name: str) -> str:
        info = self.battles[name]
        return (
            f"The {name} was fought in {info['year']} near {info['near']} between {info['victor']} and "
            f"{info['loser']}. The army of {info['victor']}, commanded by {info['commander']}, won the battle."
        )

    def college_passage(self, name: str) -> str:
        info = self.colleges[name]
        return (
            f"{name} is a school of higher learning in {info['city']}, founded in {info['year']} by "
            f"{info['founder']}. Its main hall was designed by the architect {info['architect']}."
        )


def _the(water: str) -> str:
    """A body of water with its article: "the Amber Sea", but "Lake Orn"."""
    return water if water.startswith("Lake ") else f"the {water}"


def _variants(name: str) -> list[str]:
    """Gold answers of an entity: its name, and the bare name for "Mount X" / "X River"."""
    if name.startswith("Mount "):
        return [name, name[len("Mount ") :]]
    if name.endswith(" River"):
        return [name, name[: -len(" River")]]
    return [name]


def single_hop(world: World) -> dict[str, list[tuple[str, list[str], str]]]:
    """Single-hop candidates per template: ``(question, golden_answers, expert query)``."""
    w = world
    t: dict[str, list] = {}
    t["capital"] = [(f"What is the capital of {c}?", [i["capital"]], f"{c} capital") for c, i in w.countries.items()]
    t["currency"] = [
        (f"What is the currency of {c}?", [i["currency"]], f"{c} currency") for c, i in w.countries.items()
    ]
    t["animal"] = [
        (f"What is the national animal of {c}?", [i["animal"]], f"{c} national animal") for c, i in w.countries.items()
    ]
    t["city_country"] = [
        (f"In which country is the city of {c}?", [i["country"]], f"{c} city") for c, i in w.cities.items()
    ]
    t["city_river"] = [
        (f"Which river flows through {c}?", _variants(i["river"]), f"{c} river") for c, i in w.cities.items()
    ]
    t["height"] = [
        (f"How high is {m}?", [f"{i['height']:,} metres", f"{i['height']:,} m"], f"{m} metres")
        for m, i in w.mountains.items()
    ]
    t["climber"] = [
        (f"Who made the first ascent of {m}?", [i["climber"]], f"{m} first ascent") for m, i in w.mountains.items()
    ]
    t["river_mouth"] = [
        (f"Into which body of water does the {r} empty?", [i["mouth"]], f"{r} emptying") for r, i in w.rivers.items()
    ]
    t["river_source"] = [
        (f"On which mountain does the {r} rise?", _variants(i["source"]), f"{r} rises") for r, i in w.rivers.items()
    ]
    t["birthplace"] = [(f"Where was {p} born?", [i.birthplace], f"{p} born") for p, i in w.people.items()]
    t["profession"] = [(f"What was the profession of {p}?", [i.profession], p) for p, i in w.people.items()]
    t["creator"] = [
        (f"Who {WORK_VERB[w.people[i['creator']].profession]} {title}?", [i["creator"]], title)
        for title, i in w.works.items()
    ]
    t["work_year"] = [(f"In what year was {title} completed?", [str(i["year"])], title) for title, i in w.works.items()]
    t["inventor"] = [(f"Who invented the {d}?", [i["inventor"]], f"{d} invented") for d, i in w.inventions.items()]
    t["company_founder"] = [(f"Who founded {c}?", [i["founder"]], f"{c} founded") for c, i in w.companies.items()]
    t["product"] = [
        (f"Which company makes {i['product']}?", [c], f"maker of {i['product']}") for c, i in w.companies.items()
    ]
    t["stadium"] = [
        (f"Where does {c} play its home matches?", [i["stadium"]], f"{c} home matches") for c, i in w.clubs.items()
    ]
    t["festival_month"] = [
        (f"In which month is the {f} held?", [i["month"]], f"{f} held") for f, i in w.festivals.items()
    ]
    t["battle_victor"] = [(f"Who won the {b}?", [i["victor"]], f"{b} won") for b, i in w.battles.items()]
    t["college_architect"] = [
        (f"Who designed the main hall of {c}?", [i["architect"]], f"{c} main hall architect")
        for c, i in w.colleges.items()
    ]
    return t


def multi_hop(world: World) -> dict[str, list[tuple[str, list[str], list[str]]]]:
    """Multi-hop candidates per template: ``(question, golden_answers, expert queries)``."""
    w = world
    t: dict[str, list] = {}
    t["founder_birthplace"] = [
        (
            f"In which city was the founder of {c} born?",
            [w.people[i["founder"]].birthplace],
            [f"{c} founded", f"{i['founder']} born"],
        )
        for c, i in w.companies.items()
    ]
    t["city_capital"] = [
        (
            f"What is the capital of the country in which {c} lies?",
            [w.countries[i["country"]]["capital"]],
            [f"{c} city", f"{i['country']} capital"],
        )
        for c, i in w.cities.items()
        if w.countries[i["country"]]["capital"] != c
    ]
    t["inventor_mentor"] = [
        (
            f"Who trained the inventor of the {d}?",
            [w.people[i["inventor"]].mentor],
            [f"{d} invented", f"{i['inventor']} trained"],
        )
        for d, i in w.inventions.items()
        if w.people[i["inventor"]].mentor
    ]
    t["creator_born"] = [
        (
            f"In what year was the creator of {title} born?",
            [str(w.people[i["creator"]].born)],
            [title, f"{i['creator']} born"],
        )
        for title, i in w.works.items()
    ]
    t["birthplace_river"] = [
        (
            f"Which river flows through the birthplace of {p}?",
            _variants(w.cities[i.birthplace]["river"]),
            [f"{p} born", f"{i.birthplace} river"],
        )
        for p, i in w.people.items()
    ]
    t["source_climber"] = [
        (
            f"Who made the first ascent of the mountain where the {r} rises?",
            [w.mountains[i["source"]]["climber"]],
            [f"{r} rises", f"{i['source']} first ascent"],
        )
        for r, i in w.rivers.items()
    ]
    t["company_country"] = [
        (
            f"In which country is the company {c} headquartered?",
            [w.cities[i["city"]]["country"]],
            [f"{c} based", f"{i['city']} city"],
        )
        for c, i in w.companies.items()
    ]
    t["club_country"] = [
        (
            f"In which country does the {i['sport']} club {c} play?",
            [w.cities[i["city"]]["country"]],
            [f"{c} club", f"{i['city']} city"],
        )
        for c, i in w.clubs.items()
    ]
    t["commander_birthplace"] = [
        (
            f"Where was the commander of the winning army at the {b} born?",
            [w.people[i["commander"]].birthplace],
            [f"{b} commanded", f"{i['commander']} born"],
        )
        for b, i in w.battles.items()
    ]
    rng = random.Random(SEED + 1)
    companies = list(w.companies)
    pairs = [tuple(rng.sample(companies, 2)) for _ in range(20)]
    t["older_company"] = [
        (
            f"Which was founded earlier, {a} or {b}?",
            [min((a, b), key=lambda c: w.companies[c]["year"])],
            [f"{a} founded", f"{b} founded"],
        )
        for a, b in pairs
        if w.companies[a]["year"] != w.companies[b]["year"]
    ]
    people = list(w.people)
    pairs = [tuple(rng.sample(people, 2)) for _ in range(20)]
    t["older_person"] = [
        (f"Who was born first, {a} or {b}?", [min((a, b), key=lambda p: w.people[p].born)], [f"{a} born", f"{b} born"])
        for a, b in pairs
        if w.people[a].born != w.people[b].born
    ]
    return t


def _round_robin(templates: dict[str, list], count: int, rng: random.Random) -> list[tuple[str, tuple]]:
    """``count`` candidates spread evenly over the templates, each question at most once."""
    pools = {name: rng.sample(cands, len(cands)) for name, cands in templates.items()}
    chosen, seen = [], set()
    while len(chosen) < count and any(pools.values()):
        for name in templates:
            while pools[name] and len(chosen) < count:
                cand = pools[name].pop()
                if cand[0] not in seen:
                    seen.add(cand[0])
                    chosen.append((name, cand))
                    break
    if len(chosen) < count:
        raise RuntimeError(f"only {len(chosen)} distinct questions, {count} asked")
    return chosen


def questions(world: World) -> dict[str, list[dict]]:
    """The questions, split into ``train`` and ``test`` (the same share of each data source in both)."""
    rng = random.Random(SEED + 2)
    rows = {"train": [], "test": []}
    singles = [(n, (q, a, [k])) for n, (q, a, k) in _round_robin(single_hop(world), NUM_SINGLE_HOP, rng)]
    multis = _round_robin(multi_hop(world), NUM_MULTI_HOP, rng)
    for source, chosen in [("nq_mini", singles), ("hotpot_mini", multis)]:
        rng.shuffle(chosen)
        num_test = round(len(chosen) * TEST_FRACTION)
        for i, (template, (question, answers, queries)) in enumerate(chosen):
            split = "test" if i < num_test else "train"
            rows[split].append(
                {
                    "id": f"{source}-{split}-{len(rows[split]):04d}",
                    "question": question,
                    "golden_answers": answers,
                    "data_source": source,
                    "metadata": {"template": template, "expert_queries": queries},
                }
            )
    return rows


def write(out_dir: Path = DATA_DIR) -> dict[str, Path]:
    """Write the corpus and the question splits under ``out_dir``; returns the paths."""
    world = World()
    paths = {"corpus": out_dir / "corpus.jsonl"}
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_jsonl(paths["corpus"], world.passages())
    for split, rows in questions(world).items():
        paths[split] = out_dir / "questions" / f"{split}.jsonl"
        paths[split].parent.mkdir(parents=True, exist_ok=True)
        _write_jsonl(paths[split], rows)
    return paths


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def _contains_gold(passages_text: str, golds: tuple[str, ...]) -> bool:
    text = f" {normalize_answer(passages_text)} "
    return any(f" {normalize_answer(g)} " in text for g in golds if normalize_answer(g))


def answerability(env: SearchQAEnv) -> dict[str, dict[str, float]]:
    """How often BM25 puts a passage containing a gold answer in the top-k, per data source and overall.

    ``question``: searching the question text; ``expert``: any of the expert searches (:meth:`expert_actions`).
    """
    hits: dict[str, dict[str, list[bool]]] = defaultdict(lambda: {"question": [], "expert": []})
    for task_id in env.task_ids():
        q = env.question(task_id)
        queries = q.expert_queries or (q.question,)
        for source in (q.data_source, "all"):
            hits[source]["question"].append(_contains_gold(env.search(q.question), q.golden_answers))
            hits[source]["expert"].append(any(_contains_gold(env.search(s), q.golden_answers) for s in queries))
    return {
        source: {"n": len(v["question"]), **{k: sum(x) / len(x) for k, x in v.items()}} for source, v in hits.items()
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DATA_DIR)
    parser.add_argument("--check", action="store_true", help="measure BM25 answerability of the written questions")
    args = parser.parse_args(argv)
    paths = write(args.out)
    for name, path in paths.items():
        print(f"{name}: {len(path.read_text().splitlines())} rows -> {path}")
    if args.check:
        for split in ("train", "test"):
            env = SearchQAEnv(corpus_path=paths["corpus"], questions_path=args.out / "questions", split=split)
            print(split, json.dumps(answerability(env), indent=1))


if __name__ == "__main__":
    main()
