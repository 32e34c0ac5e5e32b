"""A full ProVer step on CPU: rollouts, judge proposal, forks, continuations, credit in verl's advantages."""

import asyncio
import json

import numpy as np
import pytest
import torch
from verl import DataProto
from verl.trainer.ppo.ray_trainer import compute_advantage

from prover_verl.agent import budget, env_agent_loop
from prover_verl.credit_channel import CREDIT_FIELD, bind_credit
from prover_verl.metrics import FIELD_PREFIX, STAT_KEYS, summarize


async def run_group(make_loop, config, server, uid="task-0", n=4, verify=True):
    loops = [make_loop(config, server) for _ in range(n)]
    extra = {"env": "forkroad", "task_id": "road-0"}
    if verify is not None:
        extra["verify"] = verify
    return await asyncio.gather(
        *(
            loop.run({"temperature": 1.0}, uid=uid, session_id=i, global_steps=1, extra_info=extra)
            for i, loop in enumerate(loops)
        )
    )


def to_batch(outputs):
    rows = [o.as_dict() for o in outputs]
    width = max(r["responses"].size(0) for r in rows)

    def pad(key):
        return torch.stack([torch.nn.functional.pad(r[key], (0, width - r[key].size(0))) for r in rows])

    tensors = {"responses": pad("responses"), "response_mask": pad("response_mask"), CREDIT_FIELD: pad(CREDIT_FIELD)}
    tensors["token_level_rewards"] = pad("rm_scores")
    for key in STAT_KEYS:
        tensors[FIELD_PREFIX + key] = torch.stack([r[FIELD_PREFIX + key] for r in rows])
    return DataProto.from_dict(tensors=tensors, non_tensors={"uid": np.array(["task-0"] * len(rows), dtype=object)})


def batch_stats(batch):
    """The ``prover/*`` metrics the trainer logs for ``batch``."""
    return summarize({FIELD_PREFIX + k: batch.batch[FIELD_PREFIX + k] for k in STAT_KEYS})


def policy_runs(mask):
    runs, start = [], None
    for i, m in enumerate([*mask.tolist(), 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append((start, i))
            start = None
    return runs


async def test_full_prover_step_matches_hand_computation(make_loop, make_config, scripted_server):
    server = scripted_server()
    outputs = await run_group(make_loop, make_config(k=4), server)
    rewards = [o.reward_score for o in outputs]
    assert sorted(rewards) == [0.0, 0.0, 1.0, 1.0]  # the fork alternates right/left over identical prompts
    assert len(server.judge_prompts) == 1  # one judge call for the group, on the policy's own server

    # verification: before turn 0 the K=4 continuations alternate again -> 2/4; after turn 0 (went right) -> 4/4
    batch = to_batch(outputs)
    stats = batch_stats(batch)
    assert stats["prover/groups"] == 1 and stats["prover/groups_with_proposal"] == 1
    assert stats["prover/verified_positive_rate"] == 1 and stats["prover/mean_estimate"] == pytest.approx(0.5)
    # main rollouts: 2 successes x 3 steps + 2 failures x 3 steps = 12; continuations: 4 from turn 0 (3 steps
    # each) + 4 from turn 1 (2 steps each) = 20
    assert batch.batch[FIELD_PREFIX + "env_steps"].sum() == 12
    assert stats["prover/verify_env_steps_frac"] == pytest.approx(20 / 12)
    # the phases' own clocks (verl's timing_s/gen holds rollout, judge and verification together)
    assert 0 < stats["prover/judge_seconds"] < 60 and 0 < stats["prover/verify_seconds"] < 60

    credited = [i for i, o in enumerate(outputs) if any(o.prover_credit)]
    assert len(credited) == 1 and rewards[credited[0]] == 1.0
    row = credited[0]
    mask = batch.batch["response_mask"][row]
    first_turn = policy_runs(mask)[0]
    expected_credit = torch.zeros_like(mask, dtype=torch.float32)
    expected_credit[first_turn[0] : first_turn[1]] = 0.5  # only the policy tokens of turn 0
    torch.testing.assert_close(batch.batch[CREDIT_FIELD][row], expected_credit)

    config = make_config()
    with bind_credit(batch.batch[CREDIT_FIELD]):
        out = compute_advantage(batch, adv_estimator="prover", config=config.algorithm)
    std = (4 * 0.25 / 3) ** 0.5  # outcomes (1, 1, 0, 0): unbiased std
    grpo = torch.tensor([(r - 0.5) / (std + 1e-6) for r in rewards])
    expected = grpo.unsqueeze(-1) * batch.batch["response_mask"]
    expected[row] += expected_credit / (std + 1e-6)
    torch.testing.assert_close(out.batch["advantages"], expected, rtol=1e-5, atol=1e-5)
    assert (out.batch["advantages"][batch.batch["response_mask"] == 0] == 0).all()


async def test_grpo_mode_and_validation_rows_do_not_verify(make_loop, make_config, scripted_server):
    for config, verify in [(make_config(adv_estimator="grpo"), True), (make_config(), False)]:
        server = scripted_server()
        outputs = await run_group(make_loop, config, server, uid=f"plain-{verify}", verify=verify)
        assert not server.judge_prompts and all(o.prover_credit is None for o in outputs)
        assert sorted(o.reward_score for o in outputs) == [0.0, 0.0, 1.0, 1.0]
    assert env_agent_loop._rendezvous().pending() == 0, env_agent_loop._rendezvous()._groups


async def test_uniform_group_gets_no_proposal(make_loop, make_config, scripted_server):
    server = scripted_server(always_right=True)
    outputs = await run_group(make_loop, make_config(), server, uid="uniform")
    assert all(o.reward_score == 1.0 for o in outputs)
    assert outputs[0].prover_stats["judge_no_pair"] == 1 and not server.judge_prompts


async def test_heuristic_judge_and_budget(make_loop, make_config, scripted_server):
    server = scripted_server()
    outputs = await run_group(make_loop, make_config(judge="heuristic"), server, uid="heur")
    assert outputs[0].prover_stats["positive"] == 1 and not server.judge_prompts
    budget._LOCAL.clear()
    config = make_config(max_segments_per_step=1)
    first = await run_group(make_loop, config, scripted_server(), uid="b1")
    second = await run_group(make_loop, config, scripted_server(), uid="b2")
    assert first[0].prover_stats.get("skipped_budget", 0) == 0
    assert second[0].prover_stats["skipped_budget"] == 1


async def test_continuations_go_to_the_replica_holding_their_trajectory(make_loop, make_config, scripted_server):
    server = scripted_server()
    outputs = await run_group(make_loop, make_config(k=4), server, uid="sticky")
    main_ids = {rid for rid, _, params in server.requests[:12]}  # 4 episodes x 3 turns come first
    assert len(main_ids) == 4  # one sticky key per episode
    judge, *continuations = server.requests[12:]
    assert judge[0] not in main_ids  # the judge's prompt shares no prefix with a trajectory
    # the 8 continuations (4 from turn 0, 4 from turn 1) of the success named by the judge use its key
    assert len({rid for rid, _, _ in continuations}) == 1 and continuations[0][0] in main_ids
    # the judge named turn 0: the forks are the trajectory's prompts before its turns 0 and 1, 4 continuations each
    trajectory_prompts = [length for rid, length, _ in server.requests[:12] if rid == continuations[0][0]]
    stats = batch_stats(to_batch(outputs))
    # what the server reported for each continuation's first turn (its fork prefix), not the prefix assumed cached:
    # the server caches whole blocks of 16 tokens, and the prompts are no multiples of 16
    assert [p % 16 for p in trajectory_prompts[:2]] != [0, 0]
    reported = 4 * (trajectory_prompts[0] // 16 * 16 + trajectory_prompts[1] // 16 * 16)
    assert stats["prover/verify_cached_prefix_tokens"] == reported > 0
    assert stats["prover/verify_stale"] == 0  # one policy version for the whole step


async def test_continuations_on_other_weights_than_their_trajectory_are_counted(
    make_loop, make_config, scripted_server
):
    server = scripted_server()
    server.version = lambda: 1 if server.generations < 13 else 2  # a sync after the rollouts and the judge
    outputs = await run_group(make_loop, make_config(k=4), server, uid="stale")
    assert batch_stats(to_batch(outputs))["prover/verify_stale"] == 8  # every continuation


async def test_full_determinism_gives_each_continuation_its_own_request_id(make_loop, make_config, scripted_server):
    # verl then passes the key to vLLM as the request id, which must be unique among requests in flight
    server = scripted_server()
    config = make_config(k=4)
    config.actor_rollout_ref.rollout.full_determinism = True
    outputs = await run_group(make_loop, config, server, uid="determ")
    continuations = server.requests[13:]
    starts = [rid for rid, length, _ in continuations]
    assert len(set(starts)) == 8  # 4 from each of the 2 fork points
    assert batch_stats(to_batch(outputs))["prover/verify_cached_prefix_tokens"] == 0


async def test_full_determinism_seeds_each_generation_by_what_it_is(make_loop, make_config, scripted_server):
    # the replicas see requests in arrival order; a seed from the play's identity makes a rerun sample the same
    config = make_config(k=4)
    config.actor_rollout_ref.rollout.full_determinism = True
    config.actor_rollout_ref.rollout.seed = 7
    first, second = scripted_server(), scripted_server()
    for server, uid in ((first, "one"), (second, "two")):
        budget._LOCAL.clear()  # each run is a fresh job: the per-step segment budget starts full
        await run_group(make_loop, config, server, uid=uid)  # verl's uid is random per run: it must not matter
    # the scripted server ignores seeds (its replies follow arrival order), so only each play's first seed, which
    # depends on nothing sampled, is compared across the runs
    first_turns = {env_agent_loop.request_seed(7, f"1|road-0|{session}", 0) for session in range(4)}
    for server in (first, second):
        seeds = [params["seed"] for _rid, _length, params in server.requests if "seed" in params]
        assert len(server.requests) - len(seeds) == len(server.judge_prompts)  # only the judge, which is greedy
        assert first_turns <= set(seeds) and len(set(seeds)) == len(seeds)  # one seed per generation, none shared
    unseeded = scripted_server()
    await run_group(make_loop, make_config(k=4), unseeded, uid="three")
    assert not any("seed" in params for _rid, _length, params in unseeded.requests)


async def test_a_turn_never_runs_past_the_response_budget(make_loop, make_config, scripted_server):
    # the server's default cap also counts the first prompt's unused room: the last turn would run past
    # response_length and the row would lose the tail of an action the env was given
    server = scripted_server(always_right=True)
    (output,) = await run_group(make_loop, make_config(response_length=40), server, uid="cap", n=1, verify=False)
    first_prompt = server.requests[0][1]
    for _rid, prompt_length, params in server.requests:
        assert params["max_tokens"] == 40 - (prompt_length - first_prompt)  # what is left of the response budget
    assert sum(output.response_mask) == sum(server.reply_lengths)  # every generated token is in the row
    assert len(output.response_ids) <= 40


async def test_one_failed_episode_under_prover_loses_only_its_row(make_loop, make_config, scripted_server):
    # as under GRPO, where verl keeps the n - 1 rows that were written: the group trains on plain GRPO without it
    server = scripted_server()
    loops = [make_loop(make_config(), server) for _ in range(4)]
    good = {"env": "forkroad", "task_id": "road-0", "verify": True}
    broken = {"env": "forkroad", "verify": True}  # no task_id
    calls = [
        loop.run({}, uid="broken", session_id=i, global_steps=1, extra_info=good if i else broken)
        for i, loop in enumerate(loops)
    ]
    results = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), timeout=30)
    assert isinstance(results[0], ValueError) and "task_id" in str(results[0])
    survivors = results[1:]
    assert all(isinstance(r, env_agent_loop.ProverAgentLoopOutput) for r in survivors), survivors
    assert not server.judge_prompts and all(not any(r.prover_credit) for r in survivors)  # no ProVer on the group
    # counted once, on the lowest surviving session's row
    assert [r.prover_stats.get("session_failed", 0) for r in survivors] == [1, 0, 0]
    assert [r.prover_stats.get("groups", 0) for r in survivors] == [1, 0, 0]
    batch = to_batch(survivors)
    assert batch_stats(batch)["prover/session_failed"] == 1
    config = make_config()
    with bind_credit(batch.batch[CREDIT_FIELD]):
        prover = compute_advantage(batch, adv_estimator="prover", config=config.algorithm)
    grpo = compute_advantage(to_batch(survivors), adv_estimator="grpo", config=config.algorithm)
    torch.testing.assert_close(prover.batch["advantages"], grpo.batch["advantages"])
    assert env_agent_loop._rendezvous().pending() == 0, env_agent_loop._rendezvous()._groups


async def test_rows_must_say_whether_they_train(make_loop, make_config, scripted_server):
    # verl does not tell the agent loop whether it validates: a prover row without the flag would wait for
    # rollout.n sessions in a validation group of val_kwargs.n
    with pytest.raises(ValueError, match="extra_info.verify"):
        await run_group(make_loop, make_config(), scripted_server(), uid="unflagged", n=1, verify=None)
    outputs = await run_group(make_loop, make_config(adv_estimator="grpo"), scripted_server(), uid="g", verify=None)
    assert len(outputs) == 4  # GRPO does not need it
    assert env_agent_loop._rendezvous().pending() == 0, env_agent_loop._rendezvous()._groups


@pytest.mark.parametrize("extra", [[["task_id", "road-0"]], "road-0", ("env", "task_id")])
async def test_extra_info_that_is_not_a_mapping_is_refused_naming_the_field(
    make_loop, make_config, scripted_server, extra
):
    loop = make_loop(make_config(adv_estimator="grpo"), scripted_server())
    with pytest.raises(TypeError, match="extra_info must be a mapping"):
        await loop.run({}, uid="g", session_id=0, global_steps=1, extra_info=extra)


async def test_outputs_carry_the_policy_versions_verl_tags_need(make_loop, make_config, scripted_server):
    server = scripted_server()
    server.version = lambda: 10 + server.generations  # the weights change between turns
    (output,) = await run_group(make_loop, make_config(n=1), server, uid="versions", n=1, verify=False)
    turns = server.generations
    assert turns >= 2
    assert output.extra_fields["min_global_steps"] == 11 and output.extra_fields["max_global_steps"] == 10 + turns
    assert "won" in output.extra_fields["reward_extra_info"]


async def test_only_validation_rows_are_logged_for_evaluation(make_loop, make_config, scripted_server, tmp_path):
    env = {"name": "forkroad", "max_turns": 6, "eval_log_dir": str(tmp_path)}
    for estimator in ("grpo", "prover"):
        config = make_config(adv_estimator=estimator, env=env)
        await run_group(make_loop, config, scripted_server(), uid=f"train-{estimator}", verify=True)
        assert not list(tmp_path.iterdir()), estimator  # training episodes are not evaluation episodes
    await run_group(make_loop, make_config(adv_estimator="grpo", env=env), scripted_server(), uid="v", verify=False)
    (log,) = tmp_path.iterdir()
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == 4 and sorted(r["won"] for r in records) == [0.0, 0.0, 1.0, 1.0]
    assert {r["task_id"] for r in records} == {"road-0"} and all(r["step"] == 1 for r in records)


async def test_a_first_prompt_over_budget_fails_instead_of_being_cut(make_loop, make_config, scripted_server):
    with pytest.raises(ValueError, match="rollout.prompt_length=8"):
        await run_group(make_loop, make_config(prompt_length=8), scripted_server(), uid="long", n=1, verify=False)


async def test_ablation_judge_only_credits_the_proposal_unverified(make_loop, make_config, scripted_server):
    server = scripted_server()
    outputs = await run_group(make_loop, make_config(k=4, ablation="judge_only", judge_only_estimate=0.7), server)
    assert len(server.judge_prompts) == 1 and server.generations == 12 + 1  # main turns + the judge, no forks
    batch = to_batch(outputs)
    stats = batch_stats(batch)
    assert stats["prover/verify_env_steps_frac"] == 0 and stats["prover/mean_credit"] == pytest.approx(0.7)
    (row,) = [i for i, o in enumerate(outputs) if any(o.prover_credit)]
    mask = batch.batch["response_mask"][row]
    start, end = policy_runs(mask)[0]  # the judge named turn 0 of the success
    expected = torch.zeros_like(mask, dtype=torch.float32)
    expected[start:end] = 0.7
    torch.testing.assert_close(batch.batch[CREDIT_FIELD][row], expected)


async def test_ablation_every_turn_verifies_each_turn_once(make_loop, make_config, scripted_server):
    server = scripted_server()
    outputs = await run_group(make_loop, make_config(k=4, ablation="every_turn"), server)
    assert not server.judge_prompts  # no judge
    batch = to_batch(outputs)
    stats = batch_stats(batch)
    # a success's fork points 0, 1, 2: V = 2/4 (the fork alternates), 4/4, 4/4, then its own outcome 1, so the
    # estimates are 0.5, 0, 0; continuations 4 x (3 + 2 + 1) = 24 env steps against 12 of the main rollouts
    assert stats["prover/verified_positive_rate"] == pytest.approx(1 / 3)
    assert stats["prover/mean_estimate"] == pytest.approx(0.5 / 3)
    assert stats["prover/verify_env_steps_frac"] == pytest.approx(24 / 12)
    (row,) = [i for i, o in enumerate(outputs) if any(o.prover_credit)]
    assert outputs[row].reward_score == 1.0
    mask = batch.batch["response_mask"][row]
    start, end = policy_runs(mask)[0]
    expected = torch.zeros_like(mask, dtype=torch.float32)
    expected[start:end] = 0.5
    torch.testing.assert_close(batch.batch[CREDIT_FIELD][row], expected)


async def test_ablation_random_segment_is_verified_without_a_judge(make_loop, make_config, scripted_server):
    server = scripted_server()
    outputs = await run_group(make_loop, make_config(k=4, ablation="random_segment"), server)
    assert not server.judge_prompts
    batch = to_batch(outputs)
    stats = batch_stats(batch)
    assert stats["prover/groups_with_proposal"] == 1 and batch.batch[FIELD_PREFIX + "verified"].sum() == 1
    # only a segment starting at the fork (turn 0) gains: 2/4 -> 4/4 (or the success itself); any later one is 0
    credited = [i for i, o in enumerate(outputs) if any(o.prover_credit)]
    assert stats["prover/mean_estimate"] in (0.0, 0.5) and len(credited) == (stats["prover/mean_estimate"] > 0)
    for row in credited:
        first = policy_runs(batch.batch["response_mask"][row])[0]
        assert batch.batch[CREDIT_FIELD][row][first[0]] == 0.5


async def test_a_row_written_from_other_data_fails_at_its_first_reset_naming_both(
    make_loop, make_config, scripted_server
):
    # nodes can hold different stores at the same path: before, task "road-0" was played on whatever this node held
    loop = make_loop(make_config(adv_estimator="grpo"), scripted_server())
    extra = {"env": "forkroad", "task_id": "road-0", "verify": False, "data_fingerprint": "0123abcd"}
    with pytest.raises(ValueError, match=r"written from data 0123abcd, but the env on node .* holds data None"):
        await loop.run({}, uid="other-data", session_id=0, global_steps=1, extra_info=extra)


def test_training_on_continuations_is_refused_naming_the_key(make_loop, make_config, scripted_server):
    # the CPU demo trains on them; this loop does not return them yet (issue 39, item 4)
    with pytest.raises(ValueError, match=r"algorithm.prover.train_on_continuations=true is implemented in the CPU"):
        make_loop(make_config(train_on_continuations=True), scripted_server())
    make_loop(make_config(adv_estimator="grpo", train_on_continuations=True), scripted_server())  # unused by GRPO
