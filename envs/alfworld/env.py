"""ALFWorld's text environment (TextWorld engine, ALFWorld's PDDL domain and grammar) as a ProVer :class:`TextEnv`.

Observations are ALFWorld's own text: the first one is ALFWorld's intro (what the agent sees, then
``Your task is to: ...``), later ones the feedback of each command. ``info["admissible_actions"]`` are
ALFWorld's admissible commands; a command that is not admissible gets ALFWorld's "Nothing happens." and counts
as a step. The reward is the protocol's ``win_reward`` (1.0; verl-agent's 10.0) on the step that wins (ALFWorld's
``won``), else 0.0; episodes are truncated after ``max_steps`` steps, and a finished episode takes no more steps.

A snapshot names its game (the game file's path and the SHA-256 of its content) and its state by the commands
since reset, with the index of each one's operator, the digest of the game's translation and the last
observation; :meth:`AlfWorldEnv.restore` refuses a state of another game (another file under the same task id,
or the same file edited since), then rebuilds it natively (see :mod:`envs.alfworld.engine`) when the
translation's digest matches, else by replaying the commands (``restore_method`` "replay" forces that).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from envs import protocol as protocols
from envs._shared import file_digest, load_once
from envs.alfworld.games import TASK_TYPES, GameInfo, discover_games, resolve_data_dir
from envs.alfworld.protocol import PROTOCOLS
from envs.base import EnvState, StepReturn, TextEnv, UnknownTaskError

_TASK_MARK = "Your task is to: "
RESTORE_METHODS = ("native", "replay")


class AlfWorldEnv(TextEnv):
    """ALFWorld games played through TextWorld's PDDL engine, with exact snapshot/restore.

    Args:
        data_dir: ALFWorld data root (holding ``json_2.1.1/<split>/``); default ``$ALFWORLD_DATA``, else the
            small generated set shipped in ``envs/alfworld/data``.
        split: ``train``, ``valid_seen`` or ``valid_unseen`` (the shipped set has ``train`` and
            ``valid_unseen``).
        max_steps: Steps before truncation; None: the protocol's (50 in every preset).
        restore_method: ``native`` (default) or ``replay``; both are exact, native is faster.
        win_reward: The reward of the winning step; None: the protocol's (1, or verl-agent's 10).
        protocol: A preset of :data:`envs.alfworld.protocol.PROTOCOLS`: the defaults of ``max_steps`` and
            ``win_reward`` (:func:`envs.protocol.settings`); its validation splits are read by the data writer.

    Raises:
        FileNotFoundError: the data root or its split folder is missing (the message names the path).
        ValueError: a game or trajectory file is malformed or the split has no playable game.
    """

    name = "alfworld"

    def __init__(
        self,
        data_dir: str | os.PathLike | None = None,
        split: str = "train",
        max_steps: int | None = None,
        restore_method: str = "native",
        win_reward: float | None = None,
        protocol: str = protocols.DEFAULT,
    ):
        given = {"max_steps": max_steps, "win_reward": win_reward}
        settings = protocols.settings(self.name, PROTOCOLS, protocol, given)
        super().__init__(settings["max_steps"])
        self.protocol = protocol
        if not isinstance(settings["win_reward"], int | float) or settings["win_reward"] <= 0:
            raise ValueError(f"win_reward must be a number > 0, got {settings['win_reward']!r}")
        self.win_reward = float(settings["win_reward"])
        if restore_method not in RESTORE_METHODS:
            raise ValueError(f"restore_method must be one of {RESTORE_METHODS}, got '{restore_method}'")
        self.data_dir = resolve_data_dir(data_dir)
        self.split = split
        self.restore_method = restore_method
        self._games: dict[str, GameInfo] = discover_games(self.data_dir, split)
        self._data_fingerprint: str | None = None
        self._engine = None  # built on first use: TextWorld is imported and fast-downward loaded only then
        self._task_id: str | None = None
        self._game_id: tuple[str, str] = ("", "")  # (path, content digest) of the game being played
        self._actions: list[str] = []
        self._ops: list[int] = []
        self._obs = ""
        self._task = ""
        self._won = False

    # ----------------------------------------------------------------------------------------------- tasks

    def task_ids(self) -> list[str]:
        return list(self._games)

    def data_source(self) -> str:
        return str(self.data_dir / "json_2.1.1" / self.split)

    def data_fingerprint(self) -> str:
        """The split's games: each task id with the content of its game file (read once, when first asked)."""
        if self._data_fingerprint is None:
            digests = "".join(
                f"{task_id}\x1f{file_digest(game.path)}\x1e" for task_id, game in sorted(self._games.items())
            )
            self._data_fingerprint = hashlib.sha256(digests.encode()).hexdigest()[:24]
        return self._data_fingerprint

    def task_type(self, task_id: str) -> str:
        """The ALFWorld task type of ``task_id``, one of :data:`envs.alfworld.games.TASK_TYPES`."""
        return self._game(task_id).task_type

    def task_category(self, task_id: str) -> str:
        return self.task_type(task_id)

    def game_file(self, task_id: str) -> str:
        """Path of the ``game.tw-pddl`` of ``task_id``."""
        return self._game(task_id).path

    def has_task(self, task_id: str) -> bool:
        return task_id in self._games

    def unknown_task(self, task_id: str) -> UnknownTaskError:
        return UnknownTaskError(f"unknown ALFWorld task '{task_id}' in split '{self.split}' of {self.data_dir}")

    def _game(self, task_id: str) -> GameInfo:
        return self._games[self.check_task(task_id)]

    # ---------------------------------------------------------------------------------------------- episode

    def _start(self, task_id: str) -> tuple[str, dict[str, Any]]:
        game = self._game(task_id)
        game_id = self._game_identity(game)
        state = self._engine_for(game.path).start(game.path, fresh=self.restore_method == "replay")
        self._begin(task_id, state.feedback)
        self._game_id = game_id
        return self._obs, self._info()

    @staticmethod
    def _game_identity(game: GameInfo) -> tuple[str, str]:
        # hashed once per process and file version (path, size, mtime), not per reset
        digest = load_once(("alfworld-game-digest", game.path), lambda: file_digest(game.path), files=(game.path,))
        return game.path, digest

    def _begin(self, task_id: str, intro: str) -> None:
        if _TASK_MARK not in intro:
            raise ValueError(f"ALFWorld game {self._game(task_id).path} shows no '{_TASK_MARK.strip()}' at start")
        self._task_id, self._actions, self._ops, self._won = task_id, [], [], False
        self._obs = intro
        self._task = intro.split(_TASK_MARK, 1)[1].strip()

    def _step(self, action: str) -> StepReturn:
        if self._task_id is None:
            raise RuntimeError("call reset before step")
        if self._won or len(self._actions) >= self.max_steps:
            raise RuntimeError(f"the episode of '{self._task_id}' is over; call reset or restore")
        try:
            state, index = self._engine.step(action)
            won, info = bool(state["won"]), self._info(len(self._actions) + 1)
        except BaseException:
            # the engine may be half-stepped: put it back to the state this env's fields still name
            self.restore(self.snapshot())
            raise
        self._actions.append(action)
        self._ops.append(index)
        self._obs, self._won = state.feedback, won
        info["won"] = won
        truncated = not self._won and len(self._actions) >= self.max_steps
        return self._obs, self.win_reward if self._won else 0.0, self._won, truncated, info

    def _info(self, step: int | None = None) -> dict[str, Any]:
        return {
            "won": self._won,
            "admissible_actions": list(self._engine.state["admissible_commands"]),
            "task": self._task,
            "step": len(self._actions) if step is None else step,
        }

    def expert_actions(self) -> list[str]:
        """The expert plan from reset: the game's walkthrough, else the planner's plan (``policy_commands``).

        Every game's plan was played once when the game was loaded: it is admissible and wins (empty only for a
        game won at start).
        """
        if self._task_id is None:
            raise RuntimeError("call reset before expert_actions")
        return self._engine.walkthrough

    # -------------------------------------------------------------------------------------- snapshot/restore

    def snapshot(self) -> EnvState:
        if self._task_id is None:
            raise RuntimeError("call reset before snapshot")
        payload = {
            "game": self._game_id,
            "actions": tuple(self._actions),
            "ops": tuple(self._ops),
            "digest": self._engine.digest,
            "obs": self._obs,
        }
        return EnvState(self.name, self._task_id, len(self._actions), payload)

    def restore(self, state: EnvState) -> tuple[str, dict[str, Any]]:
        self._check_state(state)
        game = self._game(state.task_id)
        (path, content), actions, ops, digest, obs = self._check_payload(state)
        game_id = self._game_identity(game)
        if content != game_id[1]:
            # a replay into another game can end on the same text: only the file's content tells them apart
            raise ValueError(
                f"ALFWorld state of '{state.task_id}' was taken in the game file {path} (sha256 {content[:12]}), "
                f"not in this env's {game.path} (sha256 {game_id[1][:12]}): another game, or the file was edited"
            )
        engine = self._engine_for(game.path)
        self._task_id = None  # until the restore succeeds
        intro = engine.start(game.path, fresh=self.restore_method == "replay").feedback
        if self.restore_method == "native" and digest == engine.digest:
            for index in ops:
                engine.apply(index)
            if actions:
                engine.render(actions[-1], obs)
        else:
            replayed = []
            for i, action in enumerate(actions):
                replayed.append(engine.step(action)[1])
                if replayed[-1] != ops[i] and digest == engine.digest:
                    raise RuntimeError(f"replay of '{state.task_id}' diverged at step {i + 1} ('{action}')")
            if actions and engine.state.feedback != obs:
                raise RuntimeError(f"replay of '{state.task_id}' ended on another observation than its snapshot")
            ops = tuple(replayed)  # this translation's operator indices
        self._begin(state.task_id, intro)
        self._game_id = game_id
        self._actions, self._ops = list(actions), list(ops)
        self._obs = obs if actions else intro
        self._won = bool(engine.state["won"])
        return self._obs, self._info()

    def _check_payload(self, state: EnvState) -> tuple[tuple[str, str], tuple[str, ...], tuple[int, ...], str, str]:
        payload = state.payload
        try:
            game, actions, ops, digest, obs = (payload[k] for k in ("game", "actions", "ops", "digest", "obs"))
            path, content = (str(part) for part in game)
        except (TypeError, KeyError, ValueError):
            raise ValueError(
                "malformed ALFWorld EnvState payload: expected game (path, sha256), actions, ops, digest and obs"
            ) from None
        if not (len(actions) == len(ops) == state.step_count):
            raise ValueError(f"malformed ALFWorld EnvState: {len(actions)} actions for step {state.step_count}")
        if state.step_count > self.max_steps:
            raise ValueError(f"cannot restore step {state.step_count} into an env with max_steps={self.max_steps}")
        return (path, content), tuple(actions), tuple(int(i) for i in ops), str(digest), str(obs)

    # ----------------------------------------------------------------------------------------------- engine

    def _engine_for(self, game_file: str):
        # Keep the engine while the game stays; else swap it for an idle one of the process that has the game.
        from envs.alfworld.engine import ENGINES

        if self._engine is None or self._engine.game_file != game_file:
            if self._engine is not None:
                ENGINES.release(self._engine)
            self._engine = None
            self._engine = ENGINES.acquire(game_file)
        return self._engine

    def close(self) -> None:
        """Give the game engine back to the process's idle engines; the env takes one again if used again."""
        if self._engine is not None:
            from envs.alfworld.engine import ENGINES

            ENGINES.release(self._engine)
            self._engine = None
        self._task_id = None

    def __del__(self):
        try:  # noqa: SIM105  (contextlib may already be torn down at interpreter shutdown)
            self.close()
        except Exception:
            pass


__all__ = ["AlfWorldEnv", "RESTORE_METHODS", "TASK_TYPES"]
