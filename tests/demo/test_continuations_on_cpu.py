"""The demo's ``train_on_continuations``: the verifier's continuations recorded, replayed and given fork-group
advantages recomputed from the recorded outcomes; the main advantages and env steps unchanged."""

import asyncio
import dataclasses

import numpy as np
import pytest
import torch

from envs.keydoor import env as kd
from prover_verl.config import ProverConfig
from prover_verl.demo.methods import ContinuationBatch, prover_advantages
from prover_verl.demo.policy import MLPPolicy
from prover_verl.demo.rollout import Simulator, task_text
from prover_verl.demo.train import MethodSpec, RunConfig, train
from prover_verl.judge import make_judge


def _batch(seed=0, groups=2):
    table = kd.TaskTable(kd.task_family("train", 8, seed=0))
    sim = Simulator(table, MLPPolicy(seed=seed))
    rng = np.random.default_rng(seed)
    rollouts = sim.rollouts(np.repeat(np.arange(groups), 8), np.repeat(np.arange(groups), 8), rng)
    return table, sim, rollouts


def test_recorded_continuations_replay_to_their_outcomes_and_get_outcome_minus_fork_mean():
    table, sim, rollouts = _batch()
    batch = ContinuationBatch(rollouts, sim, np.random.default_rng(1), record=True)
    # (group step, its rows, traj_id, fork turn): the batch names each group step by its index
    asks = [(0, [0, 1, 2, 3], 0, 2), (1, [0, 1, 2, 3], 2, 3), (2, [8, 9, 10, 11], 1, 1)]

    async def ask(group, rows, traj, turn):
        play = batch.fork(group, rows)
        return await asyncio.gather(*(play(traj, turn, i) for i in range(4)))

    loop = asyncio.new_event_loop()
    try:
        results = loop.run_until_complete(batch.run([ask(*a) for a in asks]))
    finally:
        loop.close()
    assert len(batch.played) == 12
    outcomes = {}
    for played in batch.played:
        group, row, turn = played.fork
        task = np.array([rollouts.task[row]])
        state = rollouts.states[row, turn][None].copy()
        assert len(played.actions) == table.num_turns[task[0]] - turn
        for features, action in zip(played.features, played.actions, strict=True):
            np.testing.assert_array_equal(features, kd.features_batch(table, task, state)[0])
            state = kd.step_batch(table, task, state, np.array([action]))
        assert bool(kd.won_batch(table, task, state)[0]) == played.won  # the record replays to its outcome
        outcomes.setdefault(played.fork, []).append(played.won)
    assert [[c.won for c in r] for r in results] == [outcomes[(g, rows[t], turn)] for g, rows, t, turn in asks]
    tokens = batch.training_tokens()
    expected = [
        float(p.won) - np.mean(outcomes[p.fork]) for p in batch.played for _ in range(len(p.actions))
    ]  # outcome minus its fork point's mean, on every action after the fork
    torch.testing.assert_close(tokens.advantages, torch.tensor(expected, dtype=torch.float32))
    assert tokens.continuations == 12 and len(tokens.actions) == len(tokens.features) == len(expected)


def test_the_option_changes_neither_the_main_advantages_nor_the_env_steps():
    table, sim, rollouts = _batch(groups=8)
    assert any(0 < rollouts.won[rollouts.group == g].sum() < 8 for g in range(8))  # a pair to verify
    pivots = {task_text(t.task_id): t.pivot_turn for t in table.tasks}
    out = {}
    for on in (False, True):
        config = ProverConfig(k=4, train_on_continuations=on)
        judge = make_judge("noisy", config.segment_side, seed=0, accuracy=1.0, pivots=pivots)
        tokens = [] if on else None
        loop = asyncio.new_event_loop()
        try:
            adv, stats, _ = prover_advantages(rollouts, sim, judge, config, np.random.default_rng(3), loop,
                                              continuation_tokens=tokens)  # fmt: skip
        finally:
            loop.close()
        out[on] = adv, stats, tokens
    torch.testing.assert_close(out[True][0], out[False][0])
    assert out[True][1] == out[False][1]
    (tokens,) = out[True][2]
    assert len(tokens.actions) == out[True][1].verify_env_steps > 0  # one token per continuation step
    with pytest.raises(ValueError, match="continuation_tokens"):
        prover_advantages(rollouts, sim, judge, ProverConfig(train_on_continuations=True), np.random.default_rng(3),
                          asyncio.new_event_loop())  # fmt: skip


def test_a_run_with_the_option_trains_on_its_continuations_at_the_same_first_cost():
    prover = ProverConfig(train_on_continuations=True)
    method = MethodSpec("ProVer + continuations", "prover", judge="noisy", accuracy=1.0, prover=prover)
    config = RunConfig(method, updates=1, groups=4, train_tasks=8, eval_tasks=4, eval_samples=1)
    with_tokens = train(config)
    plain = train(dataclasses.replace(config, method=dataclasses.replace(method, prover=ProverConfig())))
    assert with_tokens["continuation_tokens"] == with_tokens["extra_steps"] > 0
    assert plain["continuation_tokens"] == 0 and plain["env_steps"] == with_tokens["env_steps"]


def test_a_run_trains_on_the_keydoor_variant_it_names():
    from prover_verl.demo.__main__ import keydoor_variant

    variant = keydoor_variant('{"guard": true, "doors": 2, "early_pivot": true}')
    assert variant == (("doors", 2), ("early_pivot", True), ("guard", True))
    with pytest.raises(Exception, match="dors"):
        keydoor_variant('{"dors": 2}')
    config = RunConfig(MethodSpec("GRPO", "grpo"), updates=1, groups=2, train_tasks=4, eval_tasks=4, eval_samples=1)
    plain, guarded = train(config), train(dataclasses.replace(config, keydoor=variant))
    # every episode of a variant's corridor is ten rooms long: 2 groups x 8 episodes x 10 steps
    assert guarded["main_steps"] == 160 and plain["main_steps"] != 160


def test_ceiling_gaps_pair_runs_by_seed_against_grpo():
    from benchmarks import credit_assignment

    def run(seed, successes):
        return {"seed": seed, "curve": [{"update": 5 * i, "success": s} for i, s in enumerate(successes)]}

    report = {
        "settings": {"run": {"keydoor": [["doors", 2], ["early_pivot", True], ["note_at_keys", True]]}},
        "runs": {
            "GRPO": [run(1, [0.0, 0.2, 0.9]), run(0, [0.0, 0.4, 1.0])],
            "ProVer": [run(0, [0.0, 0.6, 1.0]), run(1, [0.0, 0.2, 0.9])],  # +0.2 at update 5 on seed 0 only
        },
    }
    table = credit_assignment.render(report, "gaps").splitlines()
    # seed 0: mean diff 0.2 / 3, seed 1: 0 -> AUC +0.033 (sem 0.033); mean gap at update 5: +0.1
    assert table[2] == "| hard | ProVer | GRPO | 2 | +0.033 (0.033) | +0.100 (5) |"
    report["runs"]["ProVer + x"] = [run(0, [0.0, 0.6, 0.8]), run(1, [0.0, 0.2, 0.9])]
    base = credit_assignment.render(report, "gaps_base").splitlines()  # against ProVer, the second method
    assert base[2:] == ["| hard | ProVer + x | ProVer | 2 | -0.033 (0.033) | +0.000 (0) |"]
