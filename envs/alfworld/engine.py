"""One ALFWorld game engine: TextWorld's ``PddlEnv`` with ALFWorld's wrappers, plus native state restore.

The engine is built the way ALFWorld builds its text env (``alfworld.agents.environment.alfred_tw_env``):
``AlfredInfos(AlfredDemangler(PddlEnv(...)))``, one game loaded at a time. TextWorld's ``env.copy()`` is not
implemented and its state cannot be deep-copied (it lives in fast-downward's C library), so a state is named by
the actions that led to it. Two ways lead back to it:

* **replay**: ``reset`` (which re-translates the PDDL problem) and ``step`` through the actions;
* **native**: put fast-downward back to its initial state (``set_state_id``; every state it visited stays
  registered), put back the Python-side facts TextWorld keeps next to it, then apply each action's operator
  by its index among the applicable operators (recorded when it was stepped), and render the text once at the
  end. Applying an operator costs well under a millisecond; rendering (TextWorld's grammar) is what makes a
  step cost tens of milliseconds, so a native restore costs about one step whatever the depth.

Operator indices depend on fast-downward's translation of the game; :attr:`Engine.digest` names it, and a
native restore is only done for the same digest.

Loading a game (translating its PDDL) costs about ten steps, so idle engines are kept per process with the game
they have loaded (:class:`EngineCache`): an env that starts a game another env of the process played lately
borrows that engine and only rewinds it, unless the game file changed since (size or modification time).

This module reaches into ``textworld.envs.pddl`` internals (the ``PddlEnv`` state fields and the facts of its
``PddlState``), pinned by ``textworld==1.7.0``.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import re
import threading
from collections import Counter, OrderedDict, defaultdict
from typing import Any

import textworld
from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
from textworld.core import GameState
from textworld.envs import PddlEnv

from envs._shared import fingerprint
from envs.alfworld.games import check_predicates


def _copy_facts(pddl_state: Any) -> tuple:
    # A textworld.logic.State is its facts plus variable bookkeeping that facts removal updates (even for facts
    # that were absent), so all four structures are saved as they are, not rebuilt from the facts.
    return (
        {sig: set(facts) for sig, facts in pddl_state._facts.items()},
        dict(pddl_state._vars_by_name),
        {kind: set(variables) for kind, variables in pddl_state._vars_by_type.items()},
        Counter(pddl_state._var_counts),
    )


def _set_facts(pddl_state: Any, saved: tuple) -> None:
    facts, by_name, by_type, counts = saved
    pddl_state._facts = defaultdict(set, {sig: set(f) for sig, f in facts.items()})
    pddl_state._vars_by_name = dict(by_name)
    pddl_state._vars_by_type = defaultdict(set, {kind: set(v) for kind, v in by_type.items()})
    pddl_state._var_counts = Counter(counts)


def _explain(game_file: str, err: Exception) -> str:
    """The error's type and message, and what is wrong with the game in words where the error tells it.

    fast-downward's PDDL parser fails by assertion or ``StopIteration`` with no message, TextWorld by the
    ``KeyError`` of a name it looks up.
    """
    what = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
    try:
        with open(game_file) as f:
            data = json.load(f)
        domain, problem = str(data["pddl_domain"]), str(data["pddl_problem"])
    except Exception:  # read once already by TextWorld; if it cannot be read now there are no words to add
        return what
    why = None
    if isinstance(err, StopIteration):
        why = "its pddl_problem is empty or its parentheses do not close"
    elif isinstance(err, KeyError) and err.args and re.search(rf"\b{re.escape(str(err.args[0]))}\b", problem):
        why = f"its pddl_problem uses '{err.args[0]}', which its (:objects ...) does not declare"
    elif isinstance(err, AssertionError):
        named = re.search(r"\(\s*domain\s+([^\s()]+)", domain, re.IGNORECASE)
        used = re.search(r"\(:domain\s+([^\s()]+)\s*\)", problem, re.IGNORECASE)
        if named and used and named.group(1).lower() != used.group(1).lower():
            why = f"its pddl_problem's (:domain {used.group(1)}) is not the domain '{named.group(1)}' it defines"
    return f"{what} ({why})" if why else what


class _PlanError(ValueError):
    """A game's expert plan does not win it."""


_CHECKED: dict[str, tuple] = {}  # game file -> fingerprint of the version whose expert plan won, in this process
_CHECKED_LOCK = threading.Lock()


class Engine:
    """Plays ALFWorld games, one loaded at a time, through TextWorld's ``PddlEnv``.

    Each engine owns a private copy of fast-downward's library (``PddlEnv`` loads one), so engines are
    independent of each other.
    """

    def __init__(self):
        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile", "walkthrough"])
        self._pddl = PddlEnv(infos)
        self._env = AlfredInfos(AlfredDemangler(self._pddl, shuffle=False))
        lib = self._pddl.downward_lib
        lib.get_state_id.argtypes = []
        lib.get_state_id.restype = ctypes.c_int
        lib.set_state_id.argtypes = [ctypes.c_int]
        lib.set_state_id.restype = None
        self._lib = lib
        self.game_file: str | None = None
        self._stamp: tuple | None = None  # fingerprint of the game file when it was loaded
        self.digest = ""
        self._initial: tuple[int, tuple, GameState] | None = None

    @property
    def state(self) -> GameState:
        """TextWorld's current game state (``feedback``, ``admissible_commands``, ``won``, ...)."""
        return self._pddl.state

    @property
    def won_at_start(self) -> bool:
        """Whether the loaded game is won in its initial state (its expert plan is then empty)."""
        return bool(self._initial[2]["won"])

    @property
    def walkthrough(self) -> list[str]:
        """The expert plan from the start: the game's stored walkthrough, else the planner's plan at reset."""
        return list(self._initial[2]["extra.walkthrough"] or [])

    def start(self, game_file: str, fresh: bool = False) -> GameState:
        """Start ``game_file`` from its beginning: load and reset it, or rewind it if it is loaded already.

        Args:
            game_file: Path of a ``game.tw-pddl``.
            fresh: Reset through TextWorld (re-translating the problem) even if the game is loaded.

        Raises:
            ValueError: the game cannot be loaded (the message names the file).
        """
        stamp = fingerprint(game_file)  # a game file edited since it was loaded is loaded again
        if game_file == self.game_file and stamp == self._stamp and not fresh:
            self.rewind()
            return self.state
        loaded, self.game_file = self.game_file, None  # unknown state until the reset succeeds
        if loaded != game_file or stamp != self._stamp:
            check_predicates(game_file)  # before the translator, which exits the process on some of them
        try:
            if loaded != game_file or stamp != self._stamp:
                self._stamp = None
                self._env.load(game_file)
                self._reset()
                self._check_expert_plan(game_file, stamp)
                self._stamp = stamp
            else:
                self._reset()
        except Exception as err:
            raise ValueError(f"cannot load ALFWorld game {game_file}: {_explain(game_file, err)}") from err
        self.game_file = game_file
        return self.state

    def _check_expert_plan(self, game_file: str, stamp: tuple) -> None:
        """Play the expert plan once per game file version and process; it must be admissible and win.

        A game with an unknown predicate or an unreachable goal, or whose walkthrough holds a command that is not
        admissible, loads and plays without an error: only its plan tells. Such a game can never be won, so its
        groups would train on nothing but failures.
        """
        with _CHECKED_LOCK:
            if _CHECKED.get(game_file) == stamp:
                self.rewind()
                return
        if not self.won_at_start:
            plan = self.walkthrough
            if not plan:
                raise _PlanError(
                    "no expert plan: it stores no walkthrough and the planner finds none (goal unreachable?)"
                )
            for i, command in enumerate(plan, 1):
                if command not in self.state["admissible_commands"]:
                    raise _PlanError(f"expert plan step {i} '{command}' is not an admissible command there")
                self.step(command)
            if not self.state["won"]:
                raise _PlanError(f"its expert plan of {len(plan)} steps does not win (is the goal reachable?)")
            self.rewind()
        with _CHECKED_LOCK:
            _CHECKED[game_file] = stamp

    def _reset(self) -> None:
        state = self._env.reset()
        pddl_state = self._pddl._pddl_state
        self._initial = (self._lib.get_state_id(), _copy_facts(pddl_state), GameState(state))
        text = pddl_state.sas + "\0" + self._pddl._game_data["grammar"]
        self.digest = hashlib.sha1(text.encode()).hexdigest()[:16]

    def rewind(self) -> None:
        """Put the loaded game back to its initial state without re-translating it."""
        state_id, facts, state = self._initial
        pddl_state = self._pddl._pddl_state
        self._lib.set_state_id(state_id)
        _set_facts(pddl_state, facts)
        pddl_state.all_applicable_actions()  # refreshes the operators the initial state's actions point to
        self._pddl.state = GameState(state)
        self._pddl.prev_state = None
        self._pddl._last_action = None
        self._pddl._moves = 0

    def step(self, command: str) -> tuple[GameState, int]:
        """Play ``command``; return the new state and the index of its operator (-1: it was not admissible)."""
        before = self._pddl.state["_valid_actions"]
        state, _, _ = self._env.step(command)
        last = self._pddl._last_action
        index = -1 if last is None else next(i for i, action in enumerate(before) if action is last)
        return state, index

    def apply(self, index: int) -> None:
        """Apply the ``index``-th applicable operator (-1: none) without rendering any text."""
        if index < 0:
            self._pddl._last_action = None
            return
        pddl_state = self._pddl._pddl_state
        actions = pddl_state.all_applicable_actions()
        if index >= len(actions):
            raise RuntimeError(f"operator index {index} out of range ({len(actions)} applicable) in {self.game_file}")
        pddl_state.apply(actions[index])
        self._pddl._last_action = actions[index]
        self._pddl._moves += 1

    def render(self, command: str, feedback: str) -> GameState:
        """Build the game state after :meth:`apply`, as ``PddlEnv.step`` builds it, with the step's feedback."""
        state = GameState()
        state.last_command = command.strip()
        state.feedback = feedback
        state.raw = feedback
        self._pddl.prev_state = None
        self._pddl.state = state
        self._pddl._gather_infos()
        state["extra.walkthrough"] = self._initial[2]["extra.walkthrough"]
        state["score"] = 1 if state["won"] else 0
        state["done"] = state["won"] or state["lost"]
        return state

    def facts(self) -> list[str]:
        """The current Python-side facts, sorted (for tests)."""
        return sorted(map(str, self._pddl._pddl_state.facts))


class EngineCache:
    """The engines of one process, handed out by the game they have loaded.

    :meth:`acquire` prefers an idle engine that has the game loaded (it only rewinds); else it builds a new
    engine while the process has fewer than ``max_engines``, so that idle engines keep their games for later;
    else it takes the least recently released idle engine (which loads the game). Engines are never destroyed:
    fast-downward's ``cleanup``/``dlclose`` (``fast_downward.close_lib``) crashes the process's other copies of
    the library. So the process holds at most ``max_engines`` engines, or as many as it has in use at once.

    Args:
        max_engines: Engines built before idle ones are reused for other games (each holds its own copy of
            fast-downward's library and its loaded game, a few MB).
    """

    def __init__(self, max_engines: int = 32):
        self.max_engines = max_engines
        self.built = 0
        self._idle: OrderedDict[int, Engine] = OrderedDict()  # by id(engine), least recently released first
        self._lock = threading.Lock()

    def acquire(self, game_file: str) -> Engine:
        """An engine for ``game_file``, exclusively the caller's until :meth:`release`."""
        with self._lock:
            key = next((k for k, e in reversed(self._idle.items()) if e.game_file == game_file), None)
            if key is None and self._idle and self.built >= self.max_engines:
                key = next(iter(self._idle))
            if key is not None:
                return self._idle.pop(key)
            self.built += 1
        return Engine()

    def release(self, engine: Engine) -> None:
        """Give ``engine`` back; its owner must not use it any more."""
        with self._lock:
            self._idle[id(engine)] = engine

    def __len__(self) -> int:
        return len(self._idle)


ENGINES = EngineCache()
