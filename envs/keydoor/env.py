"""KeyDoor: a family of tiny multi-turn text tasks with one known pivotal decision.

An episode walks a corridor of ``num_turns`` rooms, one room per turn, and always lasts exactly ``num_turns``
turns. A note in room ``note_turn`` names the colour of the key that opens the door at the end; room
``pivot_turn`` (after the note) holds keys of every colour and the agent must take the one the note named. Every
other room is filler: a corridor with a carpet of some colour (a distractor), where most actions do nothing.
With six key colours and nine actions, a uniform policy takes the right key one time in nine. The one detour is
``drop key``: it moves the held key into the agent's pocket, from which ``take <colour> key`` brings it back
(recoverable while turns remain). The episode succeeds iff the agent holds the right key when it leaves the door
room (the last turn).

So the outcome hinges on one decision (the key room), with a little noise from drops after it, and the turns
before the key room do not matter at all: the setting in which an outcome advantage smeared over every turn is
mostly noise. Two knobs of :func:`task_family` shape that credit problem (issue 39): ``distractors``, the number of
filler rooms before the key room (each a choice among nine actions that leave the outcome as it was), and
``guard``, a guard room after the key room who takes any key held as the agent leaves it, so that winning needs a
second decision (pocket the key before leaving the guard room, take it back after), and a failure's cause differs
between episodes.

Two views of the same transition function:

* :class:`KeyDoorEnv`, a :class:`~envs.base.TextEnv` (text observations, text actions, exact
  ``snapshot``/``restore``), registered as ``keydoor`` so verl's loop can train on it like on ALFWorld — the
  reference, used by the tests and for rendering trajectories for judges; its ``info["pivot_turn"]`` names the
  turn that decides the episode, so a benchmark can score where a judge pointed;
* :class:`TaskTable` with :func:`step_batch` / :func:`features_batch`, the numpy-vectorised core the training
  loop runs thousands of episodes with. A state is four small integers (:data:`STATE_FIELDS`), so forking an
  episode is copying its row.

The policy sees :func:`features_batch`, which encodes exactly what the text history shows (turn counter, room,
the note's colour once read, the inventory line, the carpet colour); :func:`features_from_text` recomputes it
from the observation texts, and the tests check that the two agree.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from envs.base import EnvState, StepReturn, TextEnv

COLOURS = ("red", "blue", "green", "yellow", "white", "black")
# Six colours: with four the right key is drawn by chance so often that credit assignment mattered about half as
# much (ProVer's gain over GRPO in success-curve area was ~0.07 instead of ~0.13 with an exact judge).
ACTIONS = tuple(f"take {c} key" for c in COLOURS) + ("walk on", "look around", "drop key")
NUM_ACTIONS = len(ACTIONS)
DROP = ACTIONS.index("drop key")
MIN_TURNS, MAX_TURNS = 6, 10
NONE = -1

# Rooms. GUARD (the second pivot of the ``guard`` variant) is a corridor without a carpet in the policy's features.
CORRIDOR, NOTE, KEYS, DOOR, GUARD = range(5)
# Events: what the last action did (shown at the start of the next observation).
EV_START, EV_TOOK, EV_LEFT_KEYS, EV_DROPPED, EV_TOOK_BACK, EV_NO_KEY, EV_NOTHING, EV_EMPTY_DROP = range(8)
EV_CONFISCATED = 8
STATE_FIELDS = ("turn", "held", "pocket", "event")
NUM_FEATURES = MAX_TURNS + 4 + 4 * (len(COLOURS) + 1)

TASK_TEXT = "Walk to the end of the corridor and open the door. Find out which key opens it and take that key."


@dataclasses.dataclass(frozen=True)
class KeyDoorTask:
    """One task of the family.

    Attributes:
        task_id: Unique id, e.g. ``keydoor-train-007``.
        num_turns: Rooms (and turns) in the corridor.
        note_turn: Room with the note naming the door's key colour.
        pivot_turn: Room with the keys (the pivotal decision), after the note and before the door.
        door: Colour index (into :data:`COLOURS`) of the key that opens the door.
        carpets: Carpet colour of each room (``-1`` in the note, key, guard and door rooms).
        guard_turn: Room with a guard who takes any key held as the agent leaves it (``-1``: none), after the key
            room and before the door: the key must be pocketed before it and taken back after it (a second
            necessary decision). Out of the repr, so that a task without a guard has the repr it always had.
    """

    task_id: str
    num_turns: int
    note_turn: int
    pivot_turn: int
    door: int
    carpets: tuple[int, ...]
    guard_turn: int = dataclasses.field(default=NONE, repr=False)

    def __post_init__(self):
        if not MIN_TURNS <= self.num_turns <= MAX_TURNS:
            raise ValueError(f"{self.task_id}: num_turns must lie in [{MIN_TURNS}, {MAX_TURNS}], got {self.num_turns}")
        if not 0 <= self.note_turn <= self.pivot_turn <= self.num_turns - 2:
            raise ValueError(
                f"{self.task_id}: need 0 <= note_turn <= pivot_turn <= num_turns - 2, got note {self.note_turn}, "
                f"pivot {self.pivot_turn}, {self.num_turns} turns"
            )
        if not 0 <= self.door < len(COLOURS) or len(self.carpets) != self.num_turns:
            raise ValueError(f"{self.task_id}: bad door colour {self.door} or {len(self.carpets)} carpets")
        if self.guard_turn != NONE and not self.pivot_turn < self.guard_turn <= self.num_turns - 2:
            raise ValueError(
                f"{self.task_id}: need pivot_turn < guard_turn <= num_turns - 2, got guard {self.guard_turn}, "
                f"pivot {self.pivot_turn}, {self.num_turns} turns"
            )

    def room(self, turn: int) -> int:
        """Room type at ``turn`` (a note hung in the key room leaves it the key room)."""
        if turn == self.pivot_turn:
            return KEYS
        if turn == self.guard_turn:
            return GUARD
        if turn == self.note_turn:
            return NOTE
        if turn == self.num_turns - 1:
            return DOOR
        return CORRIDOR


def make_task(
    task_id: str,
    rng: np.random.Generator,
    doors: int = len(COLOURS),
    note_at_keys: bool = False,
    early_pivot: bool = False,
    distractors: int | None = None,
    guard_rng: np.random.Generator | None = None,
) -> KeyDoorTask:
    """Draw one task: length, note and key-room positions, door colour (one of the first ``doors`` colours) and
    carpets.

    ``early_pivot`` fixes the longest corridor with the key room second, so eight filler rooms follow the decision
    before the outcome; ``note_at_keys`` hangs the note in the key room, so the right key is read in the same
    observation as it is taken (see :func:`task_family`). ``distractors`` fixes the longest corridor with that many
    filler rooms before the key room (``early_pivot`` is ``distractors=1``): rooms whose every action leaves the
    outcome as it was, where a policy samples among nine equivalent choices. ``guard_rng`` adds a guard room after
    the key room, drawn from its own stream so that the other draws are those of the family without it.
    """
    if distractors is not None:
        num_turns, pivot = MAX_TURNS, distractors
    elif early_pivot:
        num_turns, pivot = MAX_TURNS, 1
    else:
        num_turns = int(rng.integers(MIN_TURNS, MAX_TURNS + 1))
        pivot = int(rng.integers(1, num_turns - 1))
    note = pivot if note_at_keys else int(rng.integers(0, pivot))
    special = {note, pivot, num_turns - 1}
    carpets = tuple(NONE if t in special else int(rng.integers(len(COLOURS))) for t in range(num_turns))
    door = int(rng.integers(doors))
    if guard_rng is None:
        return KeyDoorTask(task_id, num_turns, note, pivot, door, carpets)
    guard_turn = int(guard_rng.integers(pivot + 1, num_turns - 1))
    carpets = tuple(NONE if t == guard_turn else c for t, c in enumerate(carpets))
    return KeyDoorTask(task_id, num_turns, note, pivot, door, carpets, guard_turn)


def task_family(
    split: str,
    count: int,
    seed: int = 0,
    doors: int = len(COLOURS),
    note_at_keys: bool = False,
    early_pivot: bool = False,
    distractors: int | None = None,
    guard: bool = False,
) -> list[KeyDoorTask]:
    """Return ``count`` tasks of a split (``train`` or ``eval``); the splits draw from disjoint random streams.

    ``doors`` < 6 draws each door's colour from the first ``doors`` colours only. ``doors=1`` makes the pivot
    unconditional (every door opens with the red key): a policy learns it without learning to copy the note's
    colour, which the 2-layer tiny model of the CPU loop does not learn in minutes (docs/method.md, "Learning in
    verl's real loop"). ``note_at_keys`` and ``early_pivot`` (:func:`make_task`) make the conditional task that
    tiny model can read: the note beside the keys, the decision early and the outcome eight rooms later.
    ``distractors`` (filler rooms before the key room, in [1, MAX_TURNS - 2], or MAX_TURNS - 3 with ``guard``) and
    ``guard`` (a second necessary decision) are the knobs of issue 39's credit-assignment variants.
    """
    if not 1 <= doors <= len(COLOURS):
        raise ValueError(f"doors must lie in [1, {len(COLOURS)}], got {doors}")
    if distractors is not None and not 1 <= distractors <= MAX_TURNS - 2 - int(guard):
        raise ValueError(f"distractors must be null or lie in [1, {MAX_TURNS - 2 - int(guard)}], got {distractors}")
    if distractors is not None and early_pivot:
        raise ValueError("distractors and early_pivot both place the key room: set one")
    if split not in ("train", "eval"):
        raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    stream = 0 if split == "train" else 1
    rng = np.random.default_rng([seed, stream])
    guard_rng = np.random.default_rng([seed, stream, 1]) if guard else None
    return [
        make_task(f"keydoor-{split}-{i:03d}", rng, doors, note_at_keys, early_pivot, distractors, guard_rng)
        for i in range(count)
    ]


class TaskTable:
    """Tasks as padded numpy arrays, for :func:`step_batch` and :func:`features_batch`."""

    def __init__(self, tasks: Sequence[KeyDoorTask]):
        if not tasks:
            raise ValueError("a task table needs at least one task")
        self.tasks = list(tasks)
        self.num_turns = np.array([t.num_turns for t in tasks], dtype=np.int64)
        self.note_turn = np.array([t.note_turn for t in tasks], dtype=np.int64)
        self.pivot_turn = np.array([t.pivot_turn for t in tasks], dtype=np.int64)
        self.door = np.array([t.door for t in tasks], dtype=np.int64)
        self.guard_turn = np.array([t.guard_turn for t in tasks], dtype=np.int64)
        self.carpets = np.full((len(tasks), MAX_TURNS), NONE, dtype=np.int64)
        for i, t in enumerate(tasks):
            self.carpets[i, : t.num_turns] = t.carpets

    def __len__(self) -> int:
        return len(self.tasks)

    def rooms(self, task: np.ndarray, turn: np.ndarray) -> np.ndarray:
        """Room type per row (turns past the end count as the door room; a guard room counts as a corridor, which
        the features tell apart by its missing carpet)."""
        room = np.full(task.shape, CORRIDOR, dtype=np.int64)
        room[turn >= self.num_turns[task] - 1] = DOOR
        room[turn == self.note_turn[task]] = NOTE
        room[turn == self.pivot_turn[task]] = KEYS  # after NOTE: a note in the key room leaves it the key room
        return room


def initial_state(size: int) -> np.ndarray:
    """``size`` start states, shape ``(size, 4)`` (see :data:`STATE_FIELDS`)."""
    state = np.full((size, len(STATE_FIELDS)), NONE, dtype=np.int64)
    state[:, 0] = 0
    state[:, 3] = EV_START
    return state


def step_batch(table: TaskTable, task: np.ndarray, state: np.ndarray, action: np.ndarray) -> np.ndarray:
    """Apply one action per row; return the new states (the input is not modified).

    Rows must not be finished (``turn < num_turns``). Taking a key works in the key room (any colour) or, outside
    it, for the colour in the pocket; ``drop key`` pockets the held key; everything else does nothing. Leaving a
    guard room with a key in hand loses it.
    """
    turn, held, pocket = state[:, 0], state[:, 1], state[:, 2]
    if (turn >= table.num_turns[task]).any():
        raise ValueError("step_batch called on a finished episode")
    take = action < len(COLOURS)
    in_keys = turn == table.pivot_turn[task]
    out = state.copy()
    out[:, 0] = turn + 1
    event = np.full(task.shape, EV_NOTHING, dtype=np.int64)

    took = take & in_keys
    out[took, 1] = action[took]
    event[took] = EV_TOOK
    event[in_keys & ~take & (action != DROP)] = EV_LEFT_KEYS

    back = take & ~in_keys & (pocket == action)
    out[back, 1] = action[back]
    out[back, 2] = NONE
    event[back] = EV_TOOK_BACK
    event[take & ~in_keys & ~back] = EV_NO_KEY

    drop = (action == DROP) & (held != NONE)
    # Dropping into a full pocket swaps: the pocketed key falls out of the story (only one pocket).
    out[drop, 2] = held[drop]
    out[drop, 1] = NONE
    event[drop] = EV_DROPPED
    event[(action == DROP) & (held == NONE)] = EV_EMPTY_DROP
    seized = (turn == table.guard_turn[task]) & (out[:, 1] != NONE)
    out[seized, 1] = NONE
    event[seized] = EV_CONFISCATED
    out[:, 3] = event
    return out


def won_batch(table: TaskTable, task: np.ndarray, state: np.ndarray) -> np.ndarray:
    """Whether each finished episode succeeded (holds the door's key)."""
    return state[:, 1] == table.door[task]


def _one_hot(values: np.ndarray, width: int) -> np.ndarray:
    out = np.zeros((values.shape[0], width), dtype=np.float32)
    out[np.arange(values.shape[0]), values] = 1.0
    return out


def features_batch(table: TaskTable, task: np.ndarray, state: np.ndarray) -> np.ndarray:
    """The policy's input for each row's current observation history, ``(rows, NUM_FEATURES)`` float32.

    Blocks: turn counter (one-hot), room type, the note's colour if it has been read (or none), the held key,
    the pocketed key, the carpet colour of this room (each colour block has a "none" slot).
    """
    turn, held, pocket = state[:, 0], state[:, 1], state[:, 2]
    none = len(COLOURS)
    note_seen = turn >= table.note_turn[task]
    note = np.where(note_seen, table.door[task], none)
    carpet = table.carpets[task, np.minimum(turn, MAX_TURNS - 1)]
    blocks = [
        _one_hot(np.minimum(turn, MAX_TURNS - 1), MAX_TURNS),
        _one_hot(table.rooms(task, turn), 4),
        _one_hot(note, none + 1),
        _one_hot(np.where(held == NONE, none, held), none + 1),
        _one_hot(np.where(pocket == NONE, none, pocket), none + 1),
        _one_hot(np.where(carpet == NONE, none, carpet), none + 1),
    ]
    return np.concatenate(blocks, axis=1)


# ----------------------------------------------------------------------------------------------------------------
# Text rendering and the TextEnv view.

_EVENT_TEXT = {
    EV_START: "You enter the corridor.",
    EV_TOOK: "You take the {held} key.",
    EV_LEFT_KEYS: "You leave the keys on the wall.",
    EV_DROPPED: "The {pocket} key slips into your pocket.",
    EV_TOOK_BACK: "You take the {held} key out of your pocket.",
    EV_NO_KEY: "There is no such key here.",
    EV_NOTHING: "You walk on.",
    EV_EMPTY_DROP: "You have nothing to drop.",
    EV_CONFISCATED: "The guard takes the key from your hands.",
}


def render_observation(task: KeyDoorTask, state: Sequence[int]) -> str:
    """The observation text at ``state`` (before the action of turn ``state[0]``, or the final message)."""
    turn, held, pocket, event = (int(v) for v in state)
    colour = {"held": COLOURS[held] if held != NONE else "", "pocket": COLOURS[pocket] if pocket != NONE else ""}
    feedback = _EVENT_TEXT[event].format(**colour)
    if turn >= task.num_turns:
        result = "The door opens. You win." if held == task.door else "The door stays locked. You lose."
        return f"{feedback} {result}"
    room = task.room(turn)
    if room == NOTE:
        where = f"A note on the wall reads: the door opens with the {COLOURS[task.door]} key."
    elif room == KEYS:
        where = f"Keys hang on the wall: {', '.join(COLOURS)}."
        if task.note_turn == turn:
            where += f" A note beside them reads: the door opens with the {COLOURS[task.door]} key."
    elif room == DOOR:
        where = "A locked door blocks the way."
    elif room == GUARD:
        where = "A guard stands here: he takes any key in your hands as you leave."
    else:
        where = f"A corridor with a {COLOURS[task.carpets[turn]]} carpet."
    inventory = f"You hold the {COLOURS[held]} key." if held != NONE else "Your hands are empty."
    if pocket != NONE:
        inventory += f" A {COLOURS[pocket]} key is in your pocket."
    return f"[room {turn + 1}/{task.num_turns}] {feedback} {where} {inventory}"


_TURN_RE = re.compile(r"^\[room (\d+)/(\d+)\]")
_COLOUR_RE = "|".join(COLOURS)


def features_from_text(observations: Sequence[str]) -> np.ndarray:
    """Recompute :func:`features_batch` for the last observation of a history from the texts alone."""
    if not observations:
        raise ValueError("features_from_text needs at least one observation")
    text = observations[-1]
    match = _TURN_RE.match(text)
    if match is None:
        raise ValueError(f"not a KeyDoor room observation: {text!r:.80}")
    turn = int(match.group(1)) - 1
    none = len(COLOURS)

    def colour_of(pattern: str, body: str) -> int:
        found = re.search(pattern, body)
        return COLOURS.index(found.group(1)) if found else none

    note = none
    for past in observations:
        found = colour_of(rf"the door opens with the ({_COLOUR_RE}) key", past)
        note = found if found != none else note
    if "Keys hang on the wall" in text:
        room = KEYS
    elif "A note on the wall" in text:
        room = NOTE
    elif "A locked door" in text:
        room = DOOR
    else:
        room = CORRIDOR
    values = [
        (turn, MAX_TURNS),
        (room, 4),
        (note, none + 1),
        (colour_of(rf"You hold the ({_COLOUR_RE}) key", text), none + 1),
        (colour_of(rf"A ({_COLOUR_RE}) key is in your pocket", text), none + 1),
        (colour_of(rf"a ({_COLOUR_RE}) carpet", text), none + 1),
    ]
    return np.concatenate([_one_hot(np.array([v]), w)[0] for v, w in values])


class KeyDoorEnv(TextEnv):
    """The text view of a KeyDoor task family (one episode at a time), on the same transition as the batch core.

    Args:
        tasks: The tasks (default: ``num_tasks`` tasks of ``split`` drawn by :func:`task_family` with ``family_seed``).
        seed: Seeds the task choice of ``reset`` calls that name no task.
        split: ``train`` or ``eval`` (disjoint task streams).
        num_tasks: Tasks of the split.
        family_seed: Seed of the task family (the same in every process, so a state restores anywhere).
        doors: Door colours the family draws from (:func:`task_family`; 1: every door opens with the red key).
        note_at_keys: The note hangs beside the keys (:func:`make_task`).
        early_pivot: The key room is the second of ten, eight filler rooms before the door (:func:`make_task`).
        distractors: Filler rooms before the key room in a corridor of ten (:func:`make_task`; None: drawn).
        guard: A guard room after the key room (:func:`make_task`).
        max_steps: Turns before an episode is truncated (default: the longest task's; an episode ends at the door).
    """

    name = "keydoor"

    def __init__(
        self,
        tasks: Sequence[KeyDoorTask] | None = None,
        seed: int = 0,
        split: str = "train",
        num_tasks: int = 64,
        family_seed: int = 0,
        max_steps: int | None = None,
        doors: int = len(COLOURS),
        note_at_keys: bool = False,
        early_pivot: bool = False,
        distractors: int | None = None,
        guard: bool = False,
    ):
        family = (
            None
            if tasks is not None
            else task_family(split, num_tasks, family_seed, doors, note_at_keys, early_pivot, distractors, guard)
        )
        self.table = TaskTable(tasks if tasks is not None else family)
        super().__init__(max_steps or int(self.table.num_turns.max()))
        narrowed = f", doors={doors}" if doors != len(COLOURS) else ""
        narrowed += ", note at keys" if note_at_keys else ""
        narrowed += ", early pivot" if early_pivot else ""
        narrowed += f", {distractors} distractor rooms" if distractors is not None else ""
        narrowed += ", guard" if guard else ""
        self._source = (
            "given tasks" if tasks is not None else f"generated ({split}, family seed {family_seed}{narrowed})"
        )
        self._index = {t.task_id: i for i, t in enumerate(self.table.tasks)}
        self._rng = np.random.default_rng(seed)
        self._task: int | None = None
        self._state: np.ndarray | None = None

    def data_fingerprint(self) -> str:
        """The task table's: every task's id and layout."""
        guards = [t.guard_turn for t in self.table.tasks if t.guard_turn != NONE]  # out of the tasks' repr
        layout = repr(self.table.tasks) + (repr([t.guard_turn for t in self.table.tasks]) if guards else "")
        return hashlib.sha256(layout.encode()).hexdigest()[:24]

    def task_ids(self) -> list[str]:
        return list(self._index)

    @property
    def task(self) -> KeyDoorTask:
        """The current episode's task."""
        if self._task is None:
            raise RuntimeError("call reset first")
        return self.table.tasks[self._task]

    @property
    def pivotal_turn(self) -> int:
        """The turn whose action decides the episode (the key room)."""
        return self.task.pivot_turn

    def _info(self) -> dict[str, Any]:
        turn = int(self._state[0])
        done = turn >= self.task.num_turns
        won = bool(done and self._state[1] == self.task.door)
        info = {"won": won, "admissible_actions": list(ACTIONS), "task": TASK_TEXT, "step": turn}
        return info | {"pivot_turn": self.task.pivot_turn}  # 0-based: the action of turn pivot_turn + 1 decides

    def has_task(self, task_id: str) -> bool:
        return task_id in self._index

    def data_source(self) -> str:
        return self._source

    def _observe(self) -> tuple[str, dict[str, Any]]:
        return render_observation(self.task, self._state), self._info()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        if options and "task_id" in options:
            self._task = self._index[self.check_task(str(options["task_id"]))]
        else:
            rng = np.random.default_rng(seed) if seed is not None else self._rng
            self._task = int(rng.integers(len(self.table)))
        self._state = initial_state(1)[0]
        return self._observe()

    def _step(self, action: str) -> StepReturn:
        if self._state is None:
            raise RuntimeError("call reset first")
        if self._state[0] >= min(self.task.num_turns, self.max_steps):
            raise RuntimeError("the episode is over; call reset")
        code = ACTIONS.index(action.strip()) if action.strip() in ACTIONS else len(ACTIONS)
        if code == len(ACTIONS):
            # An unknown action wastes the turn like "look around" (feedback, no exception).
            code = ACTIONS.index("look around")
        task = np.array([self._task])
        before = self._state
        self._state = step_batch(self.table, task, before[None], np.array([code]))[0]
        try:
            obs, info = self._observe()
        except BaseException:
            self._state = before  # a step that raised did not happen
            raise
        terminated = int(self._state[0]) >= self.task.num_turns
        truncated = not terminated and int(self._state[0]) >= self.max_steps
        return obs, float(info["won"]), terminated, truncated, info

    def snapshot(self) -> EnvState:
        if self._state is None:
            raise RuntimeError("call reset first")
        return EnvState(self.name, self.task.task_id, int(self._state[0]), tuple(int(v) for v in self._state))

    def restore(self, state: EnvState) -> tuple[str, dict[str, Any]]:
        self._check_state(state)
        self.check_task(state.task_id)
        payload = tuple(state.payload)
        if len(payload) != len(STATE_FIELDS) or payload[0] != state.step_count or state.step_count > self.max_steps:
            raise ValueError(f"malformed keydoor state payload {state.payload!r}")
        self._task = self._index[state.task_id]
        self._state = np.array(payload, dtype=np.int64)
        return self._observe()

    def expert_actions(self) -> list[str]:
        task = self.task
        actions = ["walk on"] * task.num_turns
        actions[task.pivot_turn] = f"take {COLOURS[task.door]} key"
        if task.guard_turn != NONE:  # pocket the key past the guard, then take it back
            actions[task.guard_turn] = "drop key"
            actions[task.guard_turn + 1] = f"take {COLOURS[task.door]} key"
        return actions
