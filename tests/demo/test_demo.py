"""CPU demo: KeyDoor env, noisy judge, ProVer / Monte-Carlo credit against hand computations, and a tiny run."""

import asyncio
import dataclasses
import importlib.util
import json
import pickle
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from envs.base import EnvState, UnknownTaskError
from envs.keydoor import env as kd
from prover_verl.config import ProverConfig
from prover_verl.demo.__main__ import main as demo_main
from prover_verl.demo.methods import (
    EPSILON,
    grpo_advantages,
    mc_advantages,
    mc_steps_formula,
    prover_advantages,
)
from prover_verl.demo.policy import MLPPolicy
from prover_verl.demo.rollout import RESPONSE_LENGTH, Rollouts, Simulator, action_position, task_text
from prover_verl.demo.train import MethodSpec, RunConfig, train
from prover_verl.judge import Proposal
from prover_verl.judge.base import Judge

REPO = Path(__file__).resolve().parents[2]


def _random_episode(env, rng, task_id):
    obs, info = env.reset(options={"task_id": task_id})
    trace = [(obs, info)]
    done = False
    while not done:
        obs, reward, done, truncated, info = env.step(rng.choice(kd.ACTIONS))
        trace.append((obs, info))
    return trace


# ---------------------------------------------------------------------------------------------------------------
# KeyDoor


def test_snapshot_restore_is_exact_and_portable():
    env = kd.KeyDoorEnv()
    rng = random.Random(0)
    for task_id in env.task_ids()[:20]:
        env.reset(options={"task_id": task_id})
        cut = rng.randrange(env.task.num_turns)
        for _ in range(cut):
            env.step(rng.choice(kd.ACTIONS))
        state = env.snapshot()
        at_snapshot = env.restore(state)
        tail = [rng.choice(kd.ACTIONS) for _ in range(env.task.num_turns - cut)]
        first = [env.step(a) for a in tail]
        # Restore into the same env after the episode ended, and into a fresh env from a pickled state.
        assert env.restore(state) == at_snapshot
        assert [env.step(a) for a in tail] == first
        other = kd.KeyDoorEnv(seed=123)
        assert other.restore(pickle.loads(pickle.dumps(state))) == at_snapshot
        assert [other.step(a) for a in tail] == first
        assert first[-1][2] is True and first[-1][4]["step"] == env.task.num_turns


def test_restore_rejects_bad_states():
    env = kd.KeyDoorEnv()
    env.reset(options={"task_id": env.task_ids()[0]})
    good = env.snapshot()
    with pytest.raises(ValueError, match="cannot restore"):
        env.restore(EnvState("alfworld", good.task_id, 0, good.payload))
    with pytest.raises(UnknownTaskError, match="unknown keydoor task"):
        env.restore(EnvState("keydoor", "nope", 0, good.payload))
    with pytest.raises(ValueError, match="malformed"):
        env.restore(EnvState("keydoor", good.task_id, 3, good.payload))


def test_outcome_hinges_on_the_key_room():
    env = kd.KeyDoorEnv()
    for task_id in env.task_ids()[:30]:
        env.reset(options={"task_id": task_id})
        expert = env.expert_actions()
        results = [env.step(a) for a in expert]
        assert results[-1][4]["won"] and results[-1][1] == 1.0
        pivot = env.pivotal_turn
        wrong = list(expert)
        wrong[pivot] = f"take {kd.COLOURS[(env.task.door + 1) % len(kd.COLOURS)]} key"
        env.reset(options={"task_id": task_id})
        assert not [env.step(a) for a in wrong][-1][4]["won"]
        # A drop after the key room is recoverable by taking the key back out of the pocket...
        detour = list(expert)
        detour[pivot + 1] = "drop key"
        env.reset(options={"task_id": task_id})
        if pivot + 2 < env.task.num_turns:
            detour[pivot + 2] = expert[pivot]
            assert [env.step(a) for a in detour][-1][4]["won"]
        # ...but not when it is the last action.
        late = list(expert)
        late[-1] = "drop key"
        env.reset(options={"task_id": task_id})
        assert not [env.step(a) for a in late][-1][4]["won"]


def test_hard_variant_puts_the_note_by_the_keys_early_with_eight_filler_rooms_after():
    env = kd.KeyDoorEnv(split="eval", doors=2, note_at_keys=True, early_pivot=True)
    tasks = env.table.tasks
    assert {(t.num_turns, t.note_turn, t.pivot_turn) for t in tasks} == {(kd.MAX_TURNS, 1, 1)}
    assert {kd.COLOURS[t.door] for t in tasks} == {"red", "blue"}  # the key depends on the note, not one colour
    for task in tasks[:8]:
        assert task.room(1) == kd.KEYS
        env.reset(options={"task_id": task.task_id})
        obs, *_ = env.step("walk on")
        assert (
            f"Keys hang on the wall: {', '.join(kd.COLOURS)}. A note beside them reads: the door opens with the "
            f"{kd.COLOURS[task.door]} key." in obs
        )
    # the default family draws as it always did (recorded before the variants existed)
    task = kd.task_family("eval", 4)[3]
    assert (task.num_turns, task.note_turn, task.pivot_turn, task.door, task.carpets) == (
        6,
        0,
        4,
        4,
        (-1, 0, 0, 1, -1, -1),
    )


@pytest.mark.parametrize(
    "variant",
    [
        {},
        {"doors": 2, "note_at_keys": True, "early_pivot": True},
        # the knobs of issue 39 (tests/envs/test_keydoor_variants_on_cpu.py)
        {"doors": 2, "note_at_keys": True, "early_pivot": True, "guard": True},
        {"doors": 2, "note_at_keys": True, "distractors": 7},
    ],
)
def test_batch_features_match_the_text(variant):
    env = kd.KeyDoorEnv(**variant)
    rng = random.Random(1)
    table = env.table
    for i, task_id in enumerate(env.task_ids()[:25]):
        obs, _ = env.reset(options={"task_id": task_id})
        observations, state, done = [obs], kd.initial_state(1), False
        while not done:
            expected = kd.features_batch(table, np.array([i]), state)[0]
            np.testing.assert_array_equal(kd.features_from_text(observations), expected)
            assert kd.render_observation(table.tasks[i], state[0]) == observations[-1]
            action = kd.ACTIONS.index(rng.choice(kd.ACTIONS))
            state = kd.step_batch(table, np.array([i]), state, np.array([action]))
            obs, _, done, _, info = env.step(kd.ACTIONS[action])
            observations.append(obs)
            assert np.array_equal(state[0], env.snapshot().payload)
        assert info["won"] == kd.won_batch(table, np.array([i]), state)[0]


def test_task_family_splits_are_deterministic_and_disjoint():
    assert kd.task_family("train", 8, seed=0) == kd.task_family("train", 8, seed=0)
    train_ids = {t.carpets + (t.door, t.pivot_turn) for t in kd.task_family("train", 64)}
    eval_ids = {t.carpets + (t.door, t.pivot_turn) for t in kd.task_family("eval", 64)}
    assert len(train_ids & eval_ids) < 4
    with pytest.raises(ValueError, match="split"):
        kd.task_family("test", 4)


def test_task_family_doors_limits_the_door_colours_and_the_env_takes_it():
    """``doors=1``: every door opens with the red key (the note says so), in the family and in the registered env's
    episodes; the six-door default draws all six colours; out of range raises naming the argument."""
    assert {t.door for t in kd.task_family("eval", 64)} == set(range(len(kd.COLOURS)))
    assert {t.door for t in kd.task_family("eval", 64, doors=2)} == {0, 1}
    env = kd.KeyDoorEnv(split="eval", num_tasks=16, doors=1)
    for task_id in env.task_ids():
        env.reset(options={"task_id": task_id})
        assert env.expert_actions()[env.task.pivot_turn] == "take red key"
        reward = 0.0
        for action in env.expert_actions():
            _, reward, *_ = env.step(action)
        assert reward == 1.0
    with pytest.raises(ValueError, match="doors"):
        kd.task_family("train", 4, doors=7)


# ---------------------------------------------------------------------------------------------------------------
# Noisy judge


# ---------------------------------------------------------------------------------------------------------------
# ProVer and Monte-Carlo credit against hand computations


def _tiny_task():
    task = kd.KeyDoorTask("keydoor-tiny", 6, note_turn=0, pivot_turn=2, door=1, carpets=(-1, 0, -1, 2, 3, -1))
    return kd.TaskTable([task])


def _hand_rollouts(table, won):
    """One group of len(won) rows on the tiny task: expert actions, the key taken only by winners."""
    rows = len(won)
    task = np.zeros(rows, dtype=np.int64)
    states = np.zeros((rows, kd.MAX_TURNS + 1, 4), dtype=np.int64)
    actions = np.full((rows, kd.MAX_TURNS), -1, dtype=np.int64)
    features = np.zeros((rows, kd.MAX_TURNS, kd.NUM_FEATURES), dtype=np.float32)
    for r, ok in enumerate(won):
        state = kd.initial_state(1)
        states[r, 0] = state[0]
        for t in range(6):
            action = (1 if ok else 0) if t == 2 else kd.ACTIONS.index("walk on")
            features[r, t] = kd.features_batch(table, task[:1], state)[0]
            state = kd.step_batch(table, task[:1], state, np.array([action]))
            actions[r, t] = action
            states[r, t + 1] = state[0]
        assert kd.won_batch(table, task[:1], state)[0] == ok
    return Rollouts(task, np.zeros(rows, dtype=np.int64), states, features, actions, np.full(rows, 6), np.array(won))


class FixedJudge(Judge):
    def __init__(self, proposal):
        self.proposal = proposal

    async def propose(self, group):
        return self.proposal, "ok"


class ScriptedSim:
    """Continuations with known outcomes: ``wins[turn]`` successes in each block of ``k`` forked from that turn."""

    def __init__(self, table, wins, k):
        self.table, self.wins, self.k, self.env_steps, self.calls = table, wins, k, 0, []

    def continue_from(self, task, state, rng):
        out = np.zeros(len(task), dtype=bool)
        for turn in np.unique(state[:, 0]):
            rows = np.nonzero(state[:, 0] == turn)[0]
            for block in range(0, len(rows), self.k):
                out[rows[block : block + self.wins[int(turn)]]] = True
            self.calls.append((int(turn), len(rows)))
        self.env_steps += int((6 - state[:, 0]).sum())
        return out


def test_prover_credit_matches_hand_computation():
    table = _tiny_task()
    rollouts = _hand_rollouts(table, [True, False, False, True])
    # Before the key room 1 of 4 continuations succeed, after it 3 of 4: estimate 0.5 on turn 2 of row 3.
    sim = ScriptedSim(table, {2: 1, 3: 3}, k=4)
    config = ProverConfig(k=4, coef=1.5)
    loop = asyncio.new_event_loop()
    try:
        adv, stats, hits = prover_advantages(
            rollouts, sim, FixedJudge(Proposal(3, 2, 2)), config, np.random.default_rng(0), loop
        )
    finally:
        loop.close()
    scores = np.array([1.0, 0.0, 0.0, 1.0])
    std = scores.std(ddof=1)
    grpo = (scores - scores.mean()) / (std + EPSILON)
    expected = torch.zeros(4, RESPONSE_LENGTH)
    for r in range(4):
        for t in range(6):
            expected[r, action_position(t)] = grpo[r]
    expected[3, action_position(2)] += 1.5 * 0.5 / (std + EPSILON)
    torch.testing.assert_close(adv, expected)
    assert sorted(sim.calls) == [(2, 4), (3, 4)]
    assert stats.verify_env_steps == 4 * (6 - 2) + 4 * (6 - 3)
    assert (stats.verified, hits, stats.positive) == (1, 1, 1)
    assert stats.credit_sum == pytest.approx(0.5)


def test_prover_credit_spans_a_multi_turn_segment_and_skips_bad_estimates():
    table = _tiny_task()
    rollouts = _hand_rollouts(table, [True, False])
    base, _ = grpo_advantages(rollouts)
    config = ProverConfig(k=2, coef=1.0)
    loop = asyncio.new_event_loop()
    try:
        # Turns 1..3: fork before turn 1 (0 of 2 succeed) and after turn 3 (2 of 2): estimate 1 on turns 1-3 only.
        sim = ScriptedSim(table, {1: 0, 4: 2}, k=2)
        adv, _, _ = prover_advantages(rollouts, sim, FixedJudge(Proposal(0, 1, 3)), config, None, loop)
        delta = adv - base
        credited = {action_position(t) for t in (1, 2, 3)}
        std = np.std([1.0, 0.0], ddof=1)
        for pos in range(RESPONSE_LENGTH):
            want = 1.0 / (std + EPSILON) if pos in credited else 0.0
            assert delta[0, pos].item() == pytest.approx(want, rel=1e-5), pos
        assert torch.all(delta[1] == 0)
        # A segment ending the episode uses the trajectory's own outcome after it: no continuations after it.
        sim = ScriptedSim(table, {5: 2}, k=2)
        adv, stats, _ = prover_advantages(rollouts, sim, FixedJudge(Proposal(0, 5, 5)), config, None, loop)
        assert torch.equal(adv, base) and stats.positive == 0 and stats.estimate_sum == 0.0
        assert sim.calls == [(5, 2)] and stats.verify_env_steps == 2
        # On the failure side: after = its own failure, before = 2/2, so the estimate is -1 and adds nothing.
        failure = dataclasses.replace(config, segment_side="failure")
        adv, stats, _ = prover_advantages(rollouts, sim, FixedJudge(Proposal(1, 5, 5)), failure, None, loop)
        assert torch.equal(adv, base) and stats.positive == 0 and stats.estimate_sum == -1.0
        # A proposal on the wrong side of the pair is rejected (success side by default).
        adv, stats, _ = prover_advantages(rollouts, sim, FixedJudge(Proposal(1, 2, 2)), config, None, loop)
        assert torch.equal(adv, base) and stats.judge_out_of_range == 1 and stats.verified == 0
    finally:
        loop.close()


def test_gigpo_on_keydoor_adds_the_shared_start_state_step_advantage():
    from prover_verl.config import GiGPOConfig
    from prover_verl.demo.methods import gigpo_advantages, grpo_advantages

    table = _tiny_task()
    rollouts = _hand_rollouts(table, [True, False, False, True])
    grpo, _ = grpo_advantages(rollouts)
    same, stats = gigpo_advantages(rollouts, GiGPOConfig(step_weight=0.0))
    torch.testing.assert_close(same, grpo)
    assert stats.verify_env_steps == 0
    gigpo, _ = gigpo_advantages(rollouts, GiGPOConfig())
    # every row of the group acts first in the task's start state, and KeyDoor episodes all last T turns: that
    # anchor's returns are gamma^(T-1) R, whose std-normalised advantage is GRPO's again, so turn 0 gets twice it
    first = action_position(0)
    torch.testing.assert_close(gigpo[:, first], 2 * grpo[:, first])


def test_exhaustive_mc_steps_equal_the_formula_and_advantages_telescope():
    table = kd.TaskTable(kd.task_family("train", 6))
    sim = Simulator(table, MLPPolicy(seed=0))
    rng = np.random.default_rng(0)
    task = np.repeat(np.arange(6), 3)
    group = np.repeat(np.arange(6), 3)
    rollouts = sim.rollouts(task, group, rng)
    before = sim.env_steps
    adv, stats = mc_advantages(rollouts, sim, k=3, rng=rng)
    assert stats.verify_env_steps == sim.env_steps - before == mc_steps_formula(rollouts.num_turns, group, 3)
    turns = table.num_turns[task]
    assert stats.verify_env_steps == 3 * (table.num_turns.sum() + (turns * (turns - 1) // 2).sum())
    assert mc_steps_formula(np.array([6, 6]), np.array([0, 0]), 2) == 2 * (6 + 15 + 15)
    mask = rollouts.response_mask().bool()
    assert torch.all(adv[~mask] == 0)


def test_exhaustive_mc_advantages_match_hand_computation():
    table = _tiny_task()
    rollouts = _hand_rollouts(table, [True, False])
    wins = {0: 1, 1: 1, 2: 2, 3: 3, 4: 4, 5: 2}  # of k=4 continuations from each turn
    sim = ScriptedSim(table, wins, k=4)
    adv, stats = mc_advantages(rollouts, sim, k=4, rng=None)
    for row, won in enumerate((1.0, 0.0)):
        values = [wins[t] / 4 for t in range(6)] + [won]
        for t in range(6):
            assert adv[row, action_position(t)].item() == pytest.approx(values[t + 1] - values[t])
    # V(s_0) once for the group (4 episodes of 6 steps), then turns 1..5 of both rows.
    assert sorted(sim.calls) == [(0, 4)] + [(t, 8) for t in range(1, 6)]
    assert stats.verify_env_steps == mc_steps_formula(np.array([6, 6]), np.array([0, 0]), 4) == 4 * (6 + 15 + 15)


# ---------------------------------------------------------------------------------------------------------------
# Training runs


def test_training_is_deterministic_given_a_seed():
    spec = MethodSpec("p", "prover", judge="noisy", accuracy=0.5)
    config = RunConfig(spec, seed=3, updates=4, eval_every=2, train_tasks=32, eval_tasks=8)
    first, second = train(config), train(config)
    for result in (first, second):
        result.pop("wall_s")
    assert first == second
    other = train(RunConfig(spec, seed=4, updates=4, eval_every=2, train_tasks=32, eval_tasks=8))
    assert other["curve"] != first["curve"]
    assert first["extra_steps"] > 0 and first["env_steps"] == first["main_steps"] + first["extra_steps"]
    assert [p["update"] for p in first["curve"]] == [0, 2, 4]


def test_tiny_demo_run_writes_the_report(tmp_path, capsys):
    out = tmp_path / "demo"
    report = demo_main(["--out", str(out), "--seeds", "2", "--updates", "3", "--eval-every", "1", "--workers", "1"])
    assert {p.name for p in out.iterdir()} == {"results.json", "results.md", "success_vs_env_steps.png"}
    assert (out / "success_vs_env_steps.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads((out / "results.json").read_text())
    assert set(data) == {"header", "settings", "target", "summary", "comparisons", "table", "runs"}
    assert "CPU TOY" in data["header"] and "not the paper's LLM setting" in data["header"]
    names = list(data["summary"])
    assert names[0] == "GRPO" and any(n.startswith("Exhaustive MC") for n in names) and len(names) == 7
    assert names[-1] == "GiGPO" and data["summary"]["GiGPO"]["extra_over_own_main"] == 0
    for summary in data["summary"].values():
        assert {"final_success", "steps_to_target", "env_steps", "extra_over_own_main", "judge_accuracy"} <= set(
            summary
        )
    assert all(len(runs) == 2 and len(runs[0]["curve"]) == 4 for runs in data["runs"].values())
    random_judge = data["comparisons"]["prover"]["ProVer (judge acc 0.0, random)"]
    assert {"extra_over_grpo_sampling", "extra_over_exhaustive_extra", "minus_grpo"} <= set(random_judge)
    printed = capsys.readouterr()
    assert str(out.resolve()) in printed.out and "[14/14]" in printed.err
    assert report["table"] in printed.out


def test_benchmark_ablations_change_one_knob_each():
    spec = importlib.util.spec_from_file_location("credit_assignment", REPO / "benchmarks" / "credit_assignment.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    methods = bench.ablation_methods(list(bench.ABLATIONS), ("noisy", 0.5))
    default = ProverConfig()
    assert methods[0].kind == "grpo" and methods[1].prover == default
    changed = {m.name: m.prover for m in methods[2:]}
    # the default's own value of each knob is not run twice
    assert sorted(changed) == sorted(
        ["ProVer k=4", "ProVer k=8", "ProVer coef=0.5", "ProVer coef=1.0", "ProVer coef=4.0"]
        + ["ProVer segment_side=failure", "ProVer segment_side=any", "ProVer min_estimate=0.5"]
        + ["ProVer train_on_continuations=True", "ProVer ablation=every_turn"]
    )
    assert changed["ProVer train_on_continuations=True"] == dataclasses.replace(default, train_on_continuations=True)
    assert changed["ProVer k=4"] == dataclasses.replace(default, k=4)
    assert changed["ProVer segment_side=any"] == dataclasses.replace(default, segment_side="any")
    based = bench.ablation_methods(["k"], ("heuristic", None), bench.parse_base("k=4,coef=1.0"))
    assert based[1].prover == dataclasses.replace(default, k=4, coef=1.0) and based[1].judge == "heuristic"
    assert [m.prover.k for m in based[2:]] == [2, 8] and all(m.prover.coef == 1.0 for m in based[2:])
    with pytest.raises(Exception, match="field=value"):
        bench.parse_base("judge=3")
    with pytest.raises(Exception, match="noisy"):
        bench.parse_judge("noisy:2")
    assert task_text("x") != task_text("y")
