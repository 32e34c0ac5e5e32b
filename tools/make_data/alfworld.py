"""Offline generator of small, real ALFWorld games.

Each game is a PDDL problem over ALFWorld's own domain (``alfworld/data/alfred.pddl``) with ALFWorld's goal for
its task type (``alfworld.gen.goal_library``), written in the official layout that ALFWorld's loader reads::

    OUT/json_2.1.1/<split>/<task_type>-<Object>-<MovableRecep|None>-<Receptacle|Toggle>-<scene>/trial_<id>/
        game.tw-pddl     # {"pddl_domain", "grammar", "pddl_problem", "solvable", "walkthrough"}
        traj_data.json   # {"task_type", "pddl_params", "task_id", "scene"}

The grammar is ALFWorld's ``alfred.twl2`` with the goal sentence put in (ALFWorld's templated goal
descriptions). Rooms are small (7-9 receptacles, one per location) but objects of the target class sit in
several receptacles, some of them closed, so an agent must decide where to look and what to take. Every game is
checked in generation: it loads through TextWorld's ``PddlEnv`` with ALFWorld's wrappers, is not won at start,
and the planner's plan (stored as the walkthrough) wins it.

``python -m tools.make_data.alfworld --out DIR --num N --split train --seed 0`` writes ``N`` games cycling over the
six task types (run from a source checkout: ``tools/`` is not installed). The set shipped in
``envs/alfworld/data`` was written by::

    python -m tools.make_data.alfworld --out envs/alfworld/data --num 12 --split train --seed 0
    python -m tools.make_data.alfworld --out envs/alfworld/data --num 6 --split valid_unseen --seed 1000
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import alfworld.gen.constants as constants
import alfworld.gen.goal_library as goal_library
from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

from envs.alfworld.games import JSON_DIR, TASK_TYPES

# The seed literals are data (alfworld_seed.json next to this): per room, its scene numbers (first and last, as
# ALFRED's: kitchens 1-30, bedrooms 301-330), receptacle class -> (min, max) instances and objects; per task type,
# the rooms it is set in, and the receptacle (tool) and object property its action needs.
_SEED = json.loads(Path(__file__).with_name("alfworld_seed.json").read_text(encoding="utf-8"))
_ROOMS: dict[str, dict[str, Any]] = {
    name: {**room, "scenes": range(room["scenes"][0], room["scenes"][1] + 1)} for name, room in _SEED["rooms"].items()
}
_TASKS: dict[str, dict[str, Any]] = _SEED["tasks"]

# Classes the domain names as constants (CleanObject, HeatObject, CoolObject, SliceObject): always declared.
_DOMAIN_RTYPES = ("SinkBasin", "Microwave", "Fridge")
_DOMAIN_OTYPES = ("Knife", "ButterKnife")
_LAMP_HOSTS = ("Desk", "SideTable")
_TOGGLE = "DeskLamp"


@dataclasses.dataclass
class _Thing:
    """An object or receptacle instance of the scene."""

    cls: str
    name: str  # PDDL name, mangled the way ALFRED mangles ``Class|+x.xx|+y.yy|+z.zz``
    location: str = ""  # PDDL location of a receptacle
    receptacle: _Thing | None = None  # where an object lies


@dataclasses.dataclass(frozen=True)
class GeneratedGame:
    """One generated game, ready to write.

    Attributes:
        task_type: One of :data:`TASK_TYPES`.
        dirname: The task directory name (``<task_type>-<Object>-None-<Receptacle>-<scene>``).
        trial: The trial directory name (``trial_T<id>``).
        game_data: Content of ``game.tw-pddl``.
        traj_data: Content of ``traj_data.json``.
    """

    task_type: str
    dirname: str
    trial: str
    game_data: dict[str, Any]
    traj_data: dict[str, Any]


def _mangle(text: str) -> str:
    # ALFRED's PDDL name mangling (alfworld.gen.game_states.planned_game_state.fix_pddl_str_chars).
    for old, new in (("-", "_minus_"), ("|", "_bar_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_")):
        text = text.replace(old, new)
    return text


def _coord(rng: random.Random) -> str:
    value = rng.uniform(-3.0, 3.0)
    return f"{'+' if value >= 0 else '-'}{abs(value):05.2f}"


class _Scene:
    """Builds the objects, receptacles and locations of one room."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.receptacles: list[_Thing] = []
        self.objects: list[_Thing] = []
        self._names: set[str] = set()
        self._locations: set[str] = set()

    def _unique_name(self, cls: str, suffix: str = "") -> str:
        while True:
            name = _mangle(f"{cls}|{_coord(self.rng)}|{_coord(self.rng)}|{_coord(self.rng)}{suffix}")
            if name not in self._names:
                self._names.add(name)
                return name

    def new_location(self) -> str:
        while True:
            x, z = self.rng.randint(-12, 12), self.rng.randint(-12, 12)
            rotation, horizon = self.rng.randrange(4), self.rng.choice((0, 15, 30, 45, 60))
            name = _mangle(f"loc|{x}|{z}|{rotation}|{horizon}")
            if name not in self._locations:
                self._locations.add(name)
                return name

    def add_receptacle(self, cls: str) -> _Thing:
        # Sink basins are named after their sink (Sink|x|y|z|SinkBasin); ALFWorld's demangler relies on it.
        name = self._unique_name("Sink", "|SinkBasin") if cls == "SinkBasin" else self._unique_name(cls)
        thing = _Thing(cls, name, location=self.new_location())
        self.receptacles.append(thing)
        return thing

    def add_object(self, cls: str, receptacle: _Thing) -> _Thing:
        # ALFRED's lamps stand on desks and side tables although no receptacle lists them as content.
        if cls != _TOGGLE and cls not in constants.VAL_RECEPTACLE_OBJECTS[receptacle.cls]:
            raise ValueError(f"a {cls} cannot be in a {receptacle.cls}")
        thing = _Thing(cls, self._unique_name(cls), receptacle=receptacle)
        self.objects.append(thing)
        return thing

    def hosts(self, cls: str, exclude: tuple[str, ...] = ()) -> list[_Thing]:
        """Receptacles that can hold a ``cls``, except those of the classes in ``exclude``."""
        return [r for r in self.receptacles if cls in constants.VAL_RECEPTACLE_OBJECTS[r.cls] and r.cls not in exclude]


def _is_openable(cls: str) -> bool:
    return cls in constants.OPENABLE_CLASS_SET


def _choose_task(task_type: str, rng: random.Random) -> tuple[str, _Scene, dict[str, Any]]:
    """Lay out a room for ``task_type``; returns the room, the scene and ALFRED's ``pddl_params``."""
    spec = _TASKS[task_type]
    for _ in range(200):
        room = rng.choice(spec["rooms"])
        layout = _ROOMS[room]
        scene = _Scene(rng)
        for cls, (low, high) in layout["receptacles"].items():
            for _ in range(rng.randint(low, high)):
                scene.add_receptacle(cls)
        candidates = [c for c in layout["objects"] if c != _TOGGLE]
        if spec["property"]:
            candidates = [c for c in candidates if c in constants.VAL_ACTION_OBJECTS[spec["property"]]]
        obj = rng.choice(candidates)
        tool = spec["tool"]
        if task_type == "look_at_obj_in_light":
            parent = _TOGGLE
            sources = scene.hosts(obj)
        else:
            # The goal receptacle is another class than the tool's and than where the object starts.
            goal_classes = sorted({r.cls for r in scene.hosts(obj, exclude=(tool,) if tool else ())})
            if not goal_classes:
                continue
            parent = rng.choice(goal_classes)
            sources = scene.hosts(obj, exclude=(parent, tool) if tool else (parent,))
        closed = [r for r in sources if _is_openable(r.cls)]
        if len(sources) < 3 or not closed:
            continue
        # Instances of the target in several receptacles, at least one of them closed: where to look matters.
        count = rng.randint(2, 3) if task_type == "pick_two_obj_and_place" else rng.randint(1, 2)
        chosen = [rng.choice(closed)] + rng.sample(sources, count - 1)
        for receptacle in chosen:
            scene.add_object(obj, receptacle)
        if task_type == "look_at_obj_in_light":
            lamp_hosts = [r for r in scene.receptacles if r.cls in _LAMP_HOSTS]
            scene.add_object(_TOGGLE, rng.choice(lamp_hosts))
        # Distractors: other classes, anywhere they fit.
        others = [c for c in layout["objects"] if c not in (obj, _TOGGLE)]
        for cls in rng.sample(others, rng.randint(2, 4)):
            hosts = scene.hosts(cls)
            if hosts:
                scene.add_object(cls, rng.choice(hosts))
        params = {
            "object_target": obj,
            "parent_target": "" if task_type == "look_at_obj_in_light" else parent,
            "toggle_target": _TOGGLE if task_type == "look_at_obj_in_light" else "",
            "mrecep_target": "",
            "object_sliced": False,
        }
        return room, scene, params
    raise RuntimeError(f"could not lay out a room for {task_type}")


def _problem(trial: str, task_type: str, scene: _Scene, params: dict[str, Any], agent_location: str) -> str:
    """The PDDL problem, laid out like ALFWorld's ``initial_state.pddl``."""
    otypes = sorted({o.cls for o in scene.objects} | set(_DOMAIN_OTYPES))
    rtypes = sorted({r.cls for r in scene.receptacles} | set(_DOMAIN_RTYPES))
    locations = [r.location for r in scene.receptacles] + [agent_location]
    objects = ["agent1 - agent"]
    objects += [f"{c}Type - otype" for c in otypes] + [f"{c}Type - rtype" for c in rtypes]
    objects += [f"{o.name} - object" for o in scene.objects] + [f"{r.name} - receptacle" for r in scene.receptacles]
    objects += [f"{loc} - location" for loc in locations]

    init = [f"(receptacleType {r.name} {r.cls}Type)" for r in scene.receptacles]
    init += [f"(objectType {o.name} {o.cls}Type)" for o in scene.objects]
    for rtype in sorted({r.cls for r in scene.receptacles}):
        init += [f"(canContain {rtype}Type {o}Type)" for o in otypes if o in constants.VAL_RECEPTACLE_OBJECTS[rtype]]
    init += [f"(pickupable {o.name})" for o in scene.objects if o.cls != _TOGGLE]
    init += [f"(isReceptacleObject {o.name})" for o in scene.objects if o.cls in constants.MOVABLE_RECEPTACLES_SET]
    init += [f"(openable {r.name})" for r in scene.receptacles if _is_openable(r.cls)]
    init.append(f"(atLocation agent1 {agent_location})")
    for predicate, prop in (
        ("cleanable", "Cleanable"),
        ("heatable", "Heatable"),
        ("coolable", "Coolable"),
        ("toggleable", "Toggleable"),
        ("sliceable", "Sliceable"),
    ):
        init += [f"({predicate} {o.name})" for o in scene.objects if o.cls in constants.VAL_ACTION_OBJECTS[prop]]
    init += [f"(inReceptacle {o.name} {o.receptacle.name})" for o in scene.objects]
    init += [f"(receptacleAtLocation {r.name} {r.location})" for r in scene.receptacles]
    init += [f"(objectAtLocation {o.name} {o.receptacle.location})" for o in scene.objects]

    goal = goal_library.gdict[task_type]["pddl"].format(
        obj=params["object_target"],
        recep=params["parent_target"],
        toggle=params["toggle_target"],
        mrecep=params["mrecep_target"],
    )
    goal = goal.replace("#", "-")  # goal_library writes PDDL's '-' as '#'
    sep = "\n        "
    return (
        f"\n(define (problem plan_{trial})\n(:domain alfred)\n(:objects\n        {sep.join(objects)}\n        )\n"
        f"\n(:init\n        {sep.join(init)}\n        )\n{goal}"
    )


def task_description(task_type: str, params: dict[str, Any], rng: random.Random) -> str:
    """ALFWorld's templated goal sentence (``alfworld.agents.utils.misc.get_templated_task_desc``) with ``rng``."""
    template = rng.choice(goal_library.gdict[task_type]["templates"])
    return template.format(
        obj=params["object_target"].lower(),
        recep=params["parent_target"].lower(),
        toggle=params["toggle_target"].lower(),
        mrecep=params["mrecep_target"].lower(),
    )


def generate_game(task_type: str, seed: int) -> GeneratedGame:
    """Generate one game of ``task_type``, deterministically from ``seed``, and check it is solvable.

    Raises:
        ValueError: ``task_type`` is not one of :data:`TASK_TYPES`.
        RuntimeError: the generated game failed its check (a bug).
    """
    if task_type not in TASK_TYPES:
        raise ValueError(f"unknown ALFWorld task type '{task_type}'; expected one of {', '.join(TASK_TYPES)}")
    rng = random.Random(f"{task_type}:{seed}")
    room, scene, params = _choose_task(task_type, rng)
    agent_location = scene.new_location()  # in the middle of the room, at no receptacle
    scene_number = rng.choice(_ROOMS[room]["scenes"])
    trial = f"trial_T{20240000 + seed:08d}_{rng.randrange(10**6):06d}_{rng.randrange(10**6):06d}"
    target = params["toggle_target"] or params["parent_target"]
    dirname = f"{task_type}-{params['object_target']}-None-{target}-{scene_number}"

    with open(ALFRED_PDDL_PATH) as f:
        domain = f.read()
    with open(ALFRED_TWL2_PATH) as f:
        grammar = f.read().replace("UNKNOWN GOAL", task_description(task_type, params, rng))
    game_data = {
        "pddl_domain": domain,
        "grammar": grammar,
        "pddl_problem": _problem(trial, task_type, scene, params, agent_location),
        "solvable": None,
        "walkthrough": None,
    }
    walkthrough = solve(game_data)
    game_data.update(solvable=True, walkthrough=walkthrough)
    traj_data = {
        "task_type": task_type,
        "task_id": trial,
        "pddl_params": params,
        "scene": {"scene_num": scene_number, "room": room, "random_seed": seed},
    }
    return GeneratedGame(task_type, dirname, trial, game_data, traj_data)


_SOLVER: list = []  # one TextWorld engine, built on first use and reused (each holds a copy of fast-downward)


def solve(game_data: dict[str, Any]) -> list[str]:
    """Plan ``game_data`` with TextWorld's planner and check that the plan wins from the start.

    Raises:
        RuntimeError: the game is won at start, has no plan, or its plan does not win.
    """
    if not _SOLVER:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
        from textworld.envs import PddlEnv

        infos = textworld.EnvInfos(won=True, admissible_commands=True, policy_commands=True)
        _SOLVER.append(AlfredInfos(AlfredDemangler(PddlEnv(infos), shuffle=False)))
    env = _SOLVER[0]
    env.load(game_data)
    state = env.reset()
    plan = list(state["policy_commands"])
    if state["won"] or not plan:
        raise RuntimeError(f"generated game is {'won at start' if state['won'] else 'unsolvable'}")
    for i, command in enumerate(plan):
        if command not in state["admissible_commands"]:
            raise RuntimeError(f"plan step {i} '{command}' is not admissible")
        state, _, done = env.step(command)
        if done and i < len(plan) - 1:
            raise RuntimeError(f"generated game ended after {i + 1} of {len(plan)} plan steps")
    if not state["won"]:
        raise RuntimeError("the planner's plan does not win the generated game")
    return plan


def write_game(game: GeneratedGame, out_dir: str | Path, split: str) -> Path:
    """Write ``game`` under ``out_dir/json_2.1.1/<split>/``; returns its ``game.tw-pddl`` path."""
    trial_dir = Path(out_dir) / JSON_DIR / split / game.dirname / game.trial
    trial_dir.mkdir(parents=True, exist_ok=True)
    with open(trial_dir / "traj_data.json", "w") as f:
        json.dump(game.traj_data, f, indent=1)
    with open(trial_dir / "game.tw-pddl", "w") as f:
        json.dump(game.game_data, f)
    return trial_dir / "game.tw-pddl"


def generate(out_dir: str | Path, num: int, split: str = "train", seed: int = 0) -> list[Path]:
    """Write ``num`` games cycling over :data:`TASK_TYPES`, the ``i``-th from seed ``seed + i``."""
    if num < 1:
        raise ValueError(f"num must be >= 1, got {num}")
    return [write_game(generate_game(TASK_TYPES[i % len(TASK_TYPES)], seed + i), out_dir, split) for i in range(num)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="data root; games go to OUT/json_2.1.1/SPLIT/")
    parser.add_argument("--num", type=int, required=True, help="number of games (cycling over the 6 task types)")
    parser.add_argument("--split", default="train", help="split directory name (train, valid_seen, valid_unseen)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first game; game i uses seed + i")
    args = parser.parse_args(argv)
    for path in generate(args.out, args.num, args.split, args.seed):
        print(path)


if __name__ == "__main__":
    main()
