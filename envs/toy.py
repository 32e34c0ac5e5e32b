"""A tiny deterministic keypad game for testing environment pools (no data, instant to build).

Each task hides a code of digits. ``press D`` types a digit: the right next digit extends the display, a wrong
one clears it. Typing the whole code wins. Every observation carries a checksum of all actions so far, so a
replay that differs by one action shows in the very next observation. Two actions exist only to test fault
handling in a pool worker: ``crash`` kills the process (``os._exit``), ``hang`` sleeps for ``hang_s``.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from envs.base import EnvState, StepReturn, TextEnv

_PRIME = 1_000_003


class ToyEnv(TextEnv):
    """Keypad game: find the code of the task by pressing digits.

    Args:
        num_tasks: Tasks ``code-0`` ... ``code-{num_tasks-1}``.
        code_length: Digits per code.
        max_steps: Steps before truncation.
        hang_s: How long the ``hang`` action sleeps.
    """

    name = "toy"

    def __init__(self, num_tasks: int = 8, code_length: int = 4, max_steps: int = 20, hang_s: float = 3600.0):
        super().__init__(max_steps)
        if num_tasks < 1 or code_length < 1:
            raise ValueError(f"num_tasks and code_length must be >= 1, got {num_tasks} and {code_length}")
        self.code_length = code_length
        self.hang_s = hang_s
        self._codes = {
            f"code-{i}": "".join(random.Random(i).choice("0123456789") for _ in range(code_length))
            for i in range(num_tasks)
        }
        self._task_id: str | None = None
        self._entered = ""
        self._steps = 0
        self._checksum = 0
        self._feedback = ""
        self._done = False

    def task_ids(self) -> list[str]:
        return list(self._codes)

    def has_task(self, task_id: str) -> bool:
        return task_id in self._codes

    def _start(self, task_id: str) -> tuple[str, dict[str, Any]]:
        self._task_id, self._entered, self._steps, self._checksum, self._done = task_id, "", 0, 0, False
        self._feedback = "The keypad is dark."
        return self._obs(), self._info()

    def _step(self, action: str) -> StepReturn:
        if self._task_id is None:
            raise RuntimeError("call reset before step")
        if action == "crash":
            os._exit(1)
        if action == "hang":
            time.sleep(self.hang_s)
        before = (self._steps, self._checksum, self._entered, self._feedback, self._done)
        try:
            return self._advance(action)
        except BaseException:
            self._steps, self._checksum, self._entered, self._feedback, self._done = before  # did not happen
            raise

    def _advance(self, action: str) -> StepReturn:
        self._steps += 1
        self._checksum = (self._checksum * 31 + sum(map(ord, action)) + 7) % _PRIME
        code = self._codes[self._task_id]
        reward = 0.0
        if self._done:
            self._feedback = "The door is already open."
        elif action.startswith("press ") and action[6:] in tuple("0123456789"):
            if code[len(self._entered)] == action[6:]:
                self._entered += action[6:]
                self._feedback = "Beep."
            else:
                self._entered = ""
                self._feedback = "Buzz! The display clears."
            if self._entered == code:
                self._done, reward, self._feedback = True, 1.0, "Click. The door opens."
        else:
            self._feedback = f"Nothing happens when you '{action}'."
        truncated = not self._done and self._steps >= self.max_steps
        return self._obs(), reward, self._done, truncated, self._info()

    def snapshot(self) -> EnvState:
        if self._task_id is None:
            raise RuntimeError("call reset before snapshot")
        payload = (self._entered, self._checksum, self._feedback, self._done)
        return EnvState(self.name, self._task_id, self._steps, payload)

    def restore(self, state: EnvState) -> tuple[str, dict[str, Any]]:
        self._check_state(state)
        self._task_id, self._steps = self.check_task(state.task_id), state.step_count
        self._entered, self._checksum, self._feedback, self._done = state.payload
        return self._obs(), self._info()

    def expert_actions(self) -> list[str]:
        if self._task_id is None:
            raise RuntimeError("call reset before expert_actions")
        return [f"press {digit}" for digit in self._codes[self._task_id]]

    def _obs(self) -> str:
        display = self._entered + "_" * (self.code_length - len(self._entered))
        return f"{self._feedback} Display: {display}. Checksum {self._checksum}."

    def _info(self) -> dict[str, Any]:
        return {
            "won": self._done,
            "admissible_actions": [f"press {d}" for d in "0123456789"],
            "task": f"Open the door of {self._task_id}.",
            "step": self._steps,
        }
