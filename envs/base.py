"""The interface every ProVer text environment implements.

ProVer's verifier restarts an episode from the state before and after a proposed segment, so besides the
gymnasium ``reset``/``step`` pair each environment can ``snapshot`` its state into a small picklable
:class:`EnvState` and ``restore`` it, in the same process or in any other process that built the same
environment from the same data.
"""

from __future__ import annotations

import abc
import dataclasses
import hashlib
from typing import Any

import gymnasium as gym

StepReturn = tuple[str, float, bool, bool, dict[str, Any]]


def clean_text(text: str) -> str:
    """``text`` as UTF-8 can carry it: each lone UTF-16 surrogate (the only code points of a Python ``str`` that
    cannot be encoded, e.g. from a JSON ``"\\ud800"`` escape) becomes U+FFFD, and a high-low surrogate pair the
    character it stands for. Text without surrogates is returned as it is (one C-speed encode to tell).

    Every env's action passes through this at the env boundary (:meth:`TextEnv.step`): a surrogate reaching a
    search engine's JVM bridge raised ``UnicodeEncodeError`` in the middle of a step (issue 41).
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


class UnknownTaskError(ValueError):
    """A task id that the environment does not have (``reset``, ``restore`` or a task lookup).

    A ``ValueError``: an unknown id is a bad argument, like an unknown split or env name (both ``ValueError``
    here too), not a failed lookup the caller could expect; and a ``KeyError`` would print its message quoted.
    """


@dataclasses.dataclass(frozen=True)
class EnvState:
    """A restorable point of an episode.

    Attributes:
        env_name: Name of the environment family that took it (restore checks it).
        task_id: The task (game file, question id, instruction id) of the episode.
        step_count: Steps taken since ``reset`` when the snapshot was taken.
        payload: Environment-specific, picklable content (an action prefix, a dialogue, a session).
    """

    env_name: str
    task_id: str
    step_count: int
    payload: Any

    def fingerprint(self) -> str:
        """Identity of the state itself: equal for equal ``(env_name, task_id, payload)``, in any process.

        ``step_count`` is left out, so a state reached again later (a WebShop page revisited) is the same state;
        where the payload is a history (ALFWorld's actions, Search-QA's dialogue) equal fingerprints mean equal
        histories. Payloads are plain tuples/dicts/strings/numbers, whose ``repr`` is deterministic.
        """
        return hashlib.sha256(repr((self.env_name, self.task_id, self.payload)).encode()).hexdigest()


class TextEnv(gym.Env, abc.ABC):
    """A gymnasium environment whose observations and actions are strings.

    ``step`` returns ``(observation, reward, terminated, truncated, info)``. ``info`` always holds:

    * ``won`` (bool): the episode's outcome is a success (what ProVer's success rates count);
    * ``admissible_actions`` (list[str] | None): the valid actions now, where the environment has them;
    * ``task`` (str): the task instruction shown to the agent;
    * ``step`` (int): steps taken since ``reset``.

    An invalid action is not an exception: it gets the environment's normal feedback and counts as a step.
    Episodes are truncated after ``max_steps`` steps.

    ``step`` is atomic: a step that raises (a search engine or retrieval server that fails, a game engine error)
    leaves the env exactly as before it (step count, page, dialogue, what ``snapshot`` returns), so the caller may
    retry, snapshot or restore, and a pool that records only the steps that returned replays what the env holds.
    Each env implements :meth:`_step` so; :meth:`step` checks the action's type and cleans it (:func:`clean_text`).
    """

    name: str = "text"
    metadata = {"render_modes": []}

    def __init__(self, max_steps: int):
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.max_steps = max_steps

    def data_source(self) -> str:
        """Where this env's tasks come from (files or folders), for the logs of whoever lists them."""
        return ""

    def data_fingerprint(self) -> str | None:
        """A digest of the content this env's tasks are made of (goals, games, questions), equal on every machine
        that holds the same data, whatever its path. ``prover_verl.data`` writes it into each row, and the agent
        loop compares it with each node's env at its first reset there, so that a task id cannot silently name a
        different task on another node. None: the env names no data (nothing is checked)."""
        return None

    @abc.abstractmethod
    def task_ids(self) -> list[str]:
        """Return the ids of the tasks this environment can ``reset`` to."""

    def has_task(self, task_id: str) -> bool:
        """Whether ``reset``/``restore`` accept ``task_id`` (default: it is one of :meth:`task_ids`)."""
        return task_id in self.task_ids()

    def unknown_task(self, task_id: str) -> UnknownTaskError:
        """The error for a ``task_id`` this env does not have (envs add where they looked)."""
        return UnknownTaskError(f"unknown {self.name} task {task_id!r}")

    def check_task(self, task_id: str) -> str:
        """Return ``task_id`` if this env has it.

        Raises:
            UnknownTaskError: it does not.
        """
        if not self.has_task(task_id):
            raise self.unknown_task(task_id)
        return task_id

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode of the task ``options["task_id"]``, else of a task drawn with ``seed``.

        Seeds ``self.np_random`` (gymnasium), picks and checks the task, then calls :meth:`_start`.

        Args:
            seed: Seeds the choice of task when ``options`` names none.
            options: ``{"task_id": ...}`` picks the task.

        Returns:
            The first observation and the info dict.

        Raises:
            UnknownTaskError: the env has no task ``options["task_id"]``.
            RuntimeError: no task is named and the env has none to draw from.
        """
        super().reset(seed=seed)
        task_id = (options or {}).get("task_id")
        if task_id is None:
            ids = self.task_ids()
            if not ids:
                raise RuntimeError(f"{type(self).__name__} has no tasks to reset to")
            task_id = ids[int(self.np_random.integers(len(ids)))]
        return self._start(self.check_task(str(task_id)))

    def _start(self, task_id: str) -> tuple[str, dict[str, Any]]:
        """Start an episode of ``task_id`` (checked already); return the first observation and info.

        Every env implements this, unless it overrides :meth:`reset` whole (the demo's KeyDoor env seeds its own
        task choice); it is not an ``abc.abstractmethod`` so that such an env still instantiates.
        """
        raise NotImplementedError(f"{type(self).__name__} implements neither _start nor reset")

    def step(self, action: str) -> StepReturn:
        """Apply one text action, atomically (see the class docstring), with its lone surrogates replaced by
        U+FFFD (:func:`clean_text`): the same text in every env, which it parses, echoes and keeps in its state.

        Raises:
            TypeError: ``action`` is not a string.
        """
        if not isinstance(action, str):
            raise TypeError(f"a {self.name} action is a string, got {type(action).__name__}")
        return self._step(clean_text(action))

    def _step(self, action: str) -> StepReturn:
        """Apply one text action (a ``str`` without surrogates); leave the env unchanged where it raises.

        Every env implements this, unless it overrides :meth:`step` whole (then it cleans and checks its action
        itself); it is not an ``abc.abstractmethod`` so that such an env still instantiates.
        """
        raise NotImplementedError(f"{type(self).__name__} implements neither _step nor step")

    @abc.abstractmethod
    def snapshot(self) -> EnvState:
        """Return the current state of the episode as a picklable :class:`EnvState`."""

    @abc.abstractmethod
    def restore(self, state: EnvState) -> tuple[str, dict[str, Any]]:
        """Put the episode back into ``state``.

        Returns:
            The observation and info at that state, as ``step`` (or ``reset``) returned them then.
        """

    def task_category(self, task_id: str) -> str:
        """The category a task is reported under in result tables (ALFWorld task type, QA dataset, ...)."""
        return self.name

    def expert_actions(self) -> list[str]:
        """Return actions that solve the current task from ``reset`` (for scripted tests, demos and benchmarks).

        Raises:
            NotImplementedError: the environment has no expert.
        """
        raise NotImplementedError(f"{type(self).__name__} has no expert")

    def _check_state(self, state: EnvState) -> None:
        if not isinstance(state, EnvState):
            raise TypeError(f"{type(self).__name__}.restore expects an EnvState, got {type(state).__name__}")
        if state.env_name != self.name:
            raise ValueError(f"cannot restore a '{state.env_name}' state into a '{self.name}' environment")
