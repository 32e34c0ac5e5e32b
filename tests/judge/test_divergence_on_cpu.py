import asyncio

import pytest

from envs.keydoor.env import KeyDoorEnv
from prover_verl.judge import Proposal, Trajectory, first_divergence, make_judge
from prover_verl.judge.divergence import lasting_divergence


def traj(tid, obs, success, actions=None):
    actions = actions or [f"act {tid}.{t}" for t in range(len(obs))]
    return Trajectory(tid, "task", tuple(obs), tuple(actions), success)


def test_lasting_divergence_skips_differences_that_heal():
    # observations differ at turn 1 (healed at 2) and for good from turn 3: the action of turn 2 split them
    win = traj(0, ["s", "a", "same", "holds red", "holds red"], True)
    lose = traj(1, ["s", "b", "same", "holds blue", "holds blue"], False)
    assert lasting_divergence(win, lose) == Proposal(0, 2, 2, "observations differ for good from turn 3")
    assert lasting_divergence(win, lose, side="failure").traj_id == 1
    # the actions differ first at turn 0: the heuristic judge points there
    assert first_divergence(win, lose).start_turn == 0


def test_lasting_divergence_edges():
    # equal observations on every shared turn: the pair parts at its last shared action
    win, lose = traj(0, ["s", "t", "u"], True), traj(1, ["s", "t"], False)
    assert lasting_divergence(win, lose).start_turn == 1
    # different from the first observation on: turn 0
    assert lasting_divergence(traj(0, ["x", "y"], True), traj(1, ["z", "w"], False)).start_turn == 0
    # the turn does not exist in the shorter failure's side: none
    assert lasting_divergence(traj(0, ["s", "t", "u"], True), traj(1, [], False), side="failure") is None
    with pytest.raises(ValueError, match="side"):
        lasting_divergence(win, lose, side="any")


def play(env, task_id, actions):
    obs, info = env.reset(options={"task_id": task_id})
    observations = []
    for action in actions:
        observations.append(obs)
        obs, reward, *_ = env.step(action)
    return observations, reward > 0, info["pivot_turn"]


def test_divergence_judge_finds_the_keydoor_pivot_where_the_heuristic_does_not():
    env = KeyDoorEnv(split="eval", doors=2, note_at_keys=True, early_pivot=True)
    task = env.task_ids()[0]
    env.reset(options={"task_id": task})
    expert = env.expert_actions()
    wrong = next(f"take {c} key" for c in ("red", "blue") if f"take {c} key" != expert[env.pivotal_turn])
    filler = ["look around", *expert[1:]]  # a harmless filler difference before the key room
    loser = list(expert)
    loser[env.pivotal_turn] = wrong
    obs_w, won, pivot = play(env, task, filler)
    obs_l, lost, _ = play(env, task, loser)
    assert (won, lost, pivot) == (True, False, 1)
    group = [
        Trajectory(0, "t", tuple(obs_w), tuple(filler), True),
        Trajectory(1, "t", tuple(obs_l), tuple(loser), False),
    ]
    divergence = make_judge("divergence", "success", seed=0)
    heuristic = make_judge("heuristic", "success", seed=0)
    assert asyncio.run(divergence.propose(group))[0].start_turn == pivot
    assert asyncio.run(heuristic.propose(group))[0].start_turn == 0
