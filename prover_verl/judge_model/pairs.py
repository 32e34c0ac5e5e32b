"""Success/failure pairs played in an env that knows its pivotal turn, the judge model's training and test data.

A behaviour policy follows the env's expert but deviates: per episode it draws a deviation rate, and at each turn
it then takes a random admissible action (or, more rarely, a reply an untrained policy might write, which the env
treats as a wasted turn) instead of the expert's. Episodes of one task are played until one succeeds and one
fails; the pair keeps the env's ``info["pivot_turn"]``, which only labels the data (the judge never sees it).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import envs
from envs.base import TextEnv
from prover_verl.eval.group_log import PIVOT_KEY
from prover_verl.judge.base import Trajectory

# replies of a barely trained policy that name no admissible action (the agent loop passes them to the env as is)
JUNK_ACTIONS = ("", "walk", "take key", "open the door", "<action>", "I take the key", "look at the note")


@dataclasses.dataclass(frozen=True)
class Pair:
    """One success and one failure of the same task.

    Attributes:
        task_id: The env's task.
        success: The successful trajectory (``traj_id`` 0).
        failure: The failed trajectory (``traj_id`` 1).
    """

    task_id: str
    success: Trajectory
    failure: Trajectory

    @property
    def group(self) -> list[Trajectory]:
        """The pair as a rollout group: a judge given it draws exactly this success and this failure."""
        return [self.success, self.failure]


def play(env: TextEnv, task_id: str, rng: random.Random, deviate: float, junk: float, traj_id: int) -> Trajectory:
    """Play one episode of ``task_id``: the expert's action, or with probability ``deviate`` a random admissible one
    (with probability ``junk`` of those, a reply naming no admissible action).

    Raises:
        ValueError: the env reports no ``info["pivot_turn"]`` or no admissible actions.
    """
    obs, info = env.reset(options={"task_id": task_id})
    expert = env.expert_actions()
    observations, actions = [], []
    for turn in range(env.max_steps):
        if rng.random() >= deviate and turn < len(expert):
            action = expert[turn]
        elif rng.random() < junk:
            action = rng.choice(JUNK_ACTIONS)
        else:
            admissible = info.get("admissible_actions")
            if not admissible:
                raise ValueError(f"env {env.name} lists no info['admissible_actions'] to deviate with")
            action = rng.choice(admissible)
        observations.append(obs)
        actions.append(action)
        obs, _reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    if info.get(PIVOT_KEY) is None:
        raise ValueError(f"env {env.name} reports no info[{PIVOT_KEY!r}]: judge-model data needs an env that knows it")
    return Trajectory(traj_id, info["task"], tuple(observations), tuple(actions), bool(info["won"]), info[PIVOT_KEY])


def task_pair(
    env: TextEnv, task_id: str, rng: random.Random, max_deviate: float, junk: float, max_episodes: int
) -> Pair | None:
    """A success and a failure of ``task_id``, each episode with a deviation rate drawn in ``[0, max_deviate]``
    (None if ``max_episodes`` episodes did not give both)."""
    found: dict[bool, Trajectory] = {}
    for _ in range(max_episodes):
        traj = play(env, task_id, rng, rng.uniform(0.0, max_deviate), junk, traj_id=0)
        found.setdefault(traj.success, traj)
        if len(found) == 2:
            return Pair(task_id, found[True], dataclasses.replace(found[False], traj_id=1))
    return None


def make_pairs(
    env_name: str,
    env_kwargs: dict[str, Any],
    split: str,
    count: int,
    seed: int,
    max_deviate: float = 0.6,
    junk: float = 0.2,
    max_episodes: int = 64,
) -> list[Pair]:
    """``count`` pairs on the tasks of ``split`` (cycling through them in order), drawn with ``seed``.

    Args:
        env_name: A registered env whose info names the pivotal turn (``keydoor``).
        env_kwargs: Its constructor arguments (as ``env.kwargs`` of the loop), without ``split``.
        split: The split whose tasks are played.
        count: Pairs to return.
        seed: Seeds the behaviour policy.
        max_deviate: Upper end of the per-episode deviation rate.
        junk: Share of the deviations that are not an admissible action.
        max_episodes: Episodes tried per task for a pair before the task is passed over.

    Raises:
        ValueError: ``split`` has no task, or no task gave a pair in a whole pass.
    """
    if "split" in env_kwargs:
        raise ValueError("env_kwargs must not name 'split': the train and held-out splits are chosen here")
    env = envs.make(env_name, split=split, **env_kwargs)
    task_ids = env.task_ids()
    if not task_ids:
        raise ValueError(f"env {env_name} ({env_kwargs}) has no task in split {split!r}")
    rng = random.Random(f"{seed}|{split}")
    pairs: list[Pair] = []
    attempt = 0
    while len(pairs) < count:
        pair = task_pair(env, task_ids[attempt % len(task_ids)], rng, max_deviate, junk, max_episodes)
        attempt += 1
        if pair is not None:
            pairs.append(pair)
        elif attempt >= len(task_ids) and not pairs:
            raise ValueError(f"no success/failure pair in {max_episodes} episodes of any {split} task")
    return pairs
