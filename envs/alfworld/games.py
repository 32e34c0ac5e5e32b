"""Where ALFWorld games are and which of them are played: the data root and ALFWorld's own game discovery.

The data root is what ``ALFWORLD_DATA`` names in ALFWorld: it holds ``json_2.1.1/<split>/`` with one folder per
trial, each with ``traj_data.json`` and ``game.tw-pddl``. Games are collected the way ALFWorld's
``AlfredTWEnv.collect_game_files`` collects them: movable-receptacle and sliced trials, unknown task types,
trials without a game file and games not marked solvable are skipped.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from pathlib import Path

from envs._shared import load_once

logger = logging.getLogger(__name__)

# ALFWorld's task types (alfworld.agents.environment.alfred_tw_env.TASK_TYPES), in its numbering order.
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
SPLITS = ("train", "valid_seen", "valid_unseen")
SHIPPED_DATA = Path(__file__).resolve().parent / "data"
JSON_DIR = "json_2.1.1"
# Importing alfworld sets ALFWORLD_DATA to this folder when it is unset (alfworld/info.py).
_ALFWORLD_DEFAULT = os.path.expanduser("~/.cache/alfworld")
_GAME_KEYS = ("pddl_domain", "grammar", "pddl_problem")


@dataclasses.dataclass(frozen=True)
class GameInfo:
    """One playable game.

    Attributes:
        task_id: The trial folder relative to the split folder (``<task>-<obj>-...-<scene>/trial_T...``).
        path: Absolute path of its ``game.tw-pddl``.
        task_type: One of :data:`TASK_TYPES`.
    """

    task_id: str
    path: str
    task_type: str


def resolve_data_dir(data_dir: str | os.PathLike | None) -> Path:
    """The data root: ``data_dir``, else ``$ALFWORLD_DATA``, else where ``alfworld-download`` puts the data
    (``~/.cache/alfworld``) if it holds ``json_2.1.1``, else the small set shipped with this package, with a
    warning that names the places looked at (a training run on 12 generated games must not pass for ALFWorld).

    ``$ALFWORLD_DATA`` equal to ALFWorld's default (which importing alfworld sets when the variable is unset)
    counts only if it holds ``json_2.1.1``.
    """
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = os.environ.get("ALFWORLD_DATA")
    if env and not (os.path.abspath(os.path.expanduser(env)) == _ALFWORLD_DEFAULT and not _has_json(env)):
        return Path(env).expanduser()
    if _has_json(_ALFWORLD_DEFAULT):
        return Path(_ALFWORLD_DEFAULT)
    if not _warned_shipped:
        _warned_shipped.append(True)
        logger.warning(
            "ALFWorld: no official data (data_dir not given, $ALFWORLD_DATA unset, no %s): using the small "
            "generated set shipped in %s",
            os.path.join(_ALFWORLD_DEFAULT, JSON_DIR),
            SHIPPED_DATA,
        )
    return SHIPPED_DATA


_warned_shipped: list[bool] = []  # once per process


def _has_json(root: str) -> bool:
    return os.path.isdir(os.path.join(os.path.expanduser(root), JSON_DIR))


def _read_json(path: str) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read ALFWorld file {path}: {err}") from None
    if not isinstance(data, dict):
        raise ValueError(f"ALFWorld file {path} does not hold a JSON object")
    return data


def discover_games(data_dir: str | os.PathLike, split: str) -> dict[str, GameInfo]:
    """The games of ``split`` under the data root ``data_dir``, by task id (sorted).

    Raises:
        FileNotFoundError: the data root or its ``json_2.1.1/<split>`` folder does not exist.
        ValueError: a ``traj_data.json`` or ``game.tw-pddl`` is malformed, or the split has no playable game.
    """
    root = str(Path(data_dir).expanduser().resolve())
    # Cached per process (every env of a pool worker lists the same split, which reads every game file) until a
    # file of the split folder changes, is added or removed.
    split_dir = os.path.join(root, JSON_DIR, split)
    return dict(load_once(("alfworld games", root, split), lambda: _discover(root, split), (split_dir,)))


def _discover(root: str, split: str) -> tuple[tuple[str, GameInfo], ...]:
    if not os.path.isdir(root):
        raise FileNotFoundError(f"ALFWorld data directory {root} does not exist")
    split_dir = os.path.join(root, JSON_DIR, split)
    if not os.path.isdir(split_dir):
        raise FileNotFoundError(
            f"ALFWorld data directory {root} has no split folder {split_dir} (expected {JSON_DIR}/<split>/, "
            f"splits {', '.join(SPLITS)})"
        )
    games = []
    skipped: dict[str, list[str]] = {}  # why -> trial folders, for the error when nothing is playable
    for folder, _, files in os.walk(split_dir):
        if "traj_data.json" not in files:
            continue
        task_id = Path(folder).relative_to(split_dir).as_posix()
        if "movable" in task_id or "Sliced" in task_id:
            skipped.setdefault("movable or sliced (not supported by ALFWorld's text engine)", []).append(folder)
            continue
        traj_data = _read_json(os.path.join(folder, "traj_data.json"))
        task_type = traj_data.get("task_type")
        if not isinstance(task_type, str):
            raise ValueError(f"ALFWorld file {os.path.join(folder, 'traj_data.json')} has no 'task_type'")
        if task_type not in TASK_TYPES:
            skipped.setdefault("of a task type not in ALFWorld's six", []).append(folder)
            continue
        game_path = os.path.join(folder, "game.tw-pddl")
        if not os.path.exists(game_path):
            skipped.setdefault("without game.tw-pddl", []).append(folder)
            continue
        game_data = _read_json(game_path)
        missing = [key for key in _GAME_KEYS if not isinstance(game_data.get(key), str)]
        if missing:
            raise ValueError(f"ALFWorld game {game_path} lacks {', '.join(missing)}")
        if not game_data.get("solvable"):  # ALFWorld skips games whose 'solvable' is missing or false
            skipped.setdefault("whose game is not marked 'solvable': true", []).append(folder)
            continue
        games.append((task_id, GameInfo(task_id, game_path, task_type)))
    if not games:
        raise ValueError(f"ALFWorld split folder {split_dir} has no playable game: {_skipped_text(skipped)}")
    return tuple(sorted(games))


def _skipped_text(skipped: dict[str, list[str]], shown: int = 3) -> str:
    if not skipped:
        return "it holds no trial folder (with a traj_data.json)"
    parts = []
    for why, folders in skipped.items():
        first = ", ".join(sorted(folders)[:shown]) + (", ..." if len(folders) > shown else "")
        parts.append(f"{len(folders)} {why} ({first})")
    return f"{sum(map(len, skipped.values()))} trials skipped: " + "; ".join(parts)


# Words that open a parenthesised PDDL form of a problem but are no predicate.
_PDDL_WORDS = frozenset(
    {"define", "problem", "domain", "and", "or", "not", "imply", "exists", "forall", "when", "=", "either", "minimize",
     "maximize", "+", "-", "*", "/", "<", ">", "<=", ">=", "increase", "decrease", "total-time"}
)  # fmt: skip
_OPEN = re.compile(r"\(\s*([^\s()]+)")


def _section(text: str, keyword: str) -> str:
    """The text of every ``(keyword ...)`` form of ``text`` (the balanced parentheses), joined."""
    out = []
    for match in re.finditer(rf"\(\s*{re.escape(keyword)}\b", text, re.IGNORECASE):
        depth, end = 0, match.start()
        for end in range(match.start(), len(text)):
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            if depth == 0:
                break
        out.append(text[match.end() : end])
    return "\n".join(out)


def undeclared_predicates(domain: str, problem: str) -> list[str]:
    """Predicates a PDDL problem uses that its domain's ``(:predicates ...)`` (or ``(:functions ...)``) does not
    declare, in order of first use (PDDL names are case-insensitive).

    fast-downward's translator meets such a predicate in a goal with ``sys.exit`` (the process ends, no exception),
    and in the initial state ignores it: the game plays as if the fact were not there.
    """
    domain, problem = (re.sub(r";[^\n]*", "", text) for text in (domain, problem))
    declared = {
        name.lower()
        for keyword in (":predicates", ":functions", ":derived")
        for name in _OPEN.findall(_section(domain, keyword))
    }
    used = [n for n in _OPEN.findall(problem) if not n.startswith((":", "?")) and n.lower() not in _PDDL_WORDS]
    return list(dict.fromkeys(n for n in used if n.lower() not in declared))


def check_predicates(game_file: str) -> None:
    """Fail naming ``game_file`` and the predicate when its problem uses a predicate its domain does not declare.

    Raises:
        ValueError: an undeclared predicate, or an unreadable game file.
    """
    game = _read_json(game_file)
    missing = undeclared_predicates(str(game.get("pddl_domain", "")), str(game.get("pddl_problem", "")))
    if missing:
        raise ValueError(
            f"ALFWorld game {game_file}: its pddl_problem uses the predicate(s) {', '.join(map(repr, missing))}, "
            "which its pddl_domain's (:predicates ...) does not declare"
        )
