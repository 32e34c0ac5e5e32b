"""The agent loop's verification failures: a timeout or failed continuations leave the group on plain GRPO."""

import asyncio

import pytest

from prover_verl.agent import env_agent_loop
from prover_verl.metrics import STAT_KEYS


def broken_forks(mode, calls):
    """A stand-in for ``EnvAgentLoop._continue_from``: every continuation raises, or outlasts any verify timeout."""

    async def continue_from(self, episode, turn, index, pool, adapter, sampling_params, aborts=None):
        calls.append(turn)
        if mode == "raise":
            raise RuntimeError("the env worker died")
        await asyncio.sleep(3600)

    return continue_from


async def run_group(make_loop, config, server, uid, n=4):
    loops = [make_loop(config, server) for _ in range(n)]
    extra = {"env": "forkroad", "task_id": "road-0", "verify": True}
    return await asyncio.wait_for(
        asyncio.gather(
            *(
                loop.run({"temperature": 1.0}, uid=uid, session_id=i, global_steps=1, extra_info=extra)
                for i, loop in enumerate(loops)
            )
        ),
        timeout=30,
    )


@pytest.mark.parametrize(
    "mode,prover,counter",
    [("raise", {}, "verify_failed"), ("sleep", {"verify_timeout_s": 0.2}, "verify_timeout")],
)
async def test_verification_failure_keeps_grpo_and_is_counted(
    make_loop, make_config, scripted_server, monkeypatch, mode, prover, counter
):
    calls = []
    monkeypatch.setattr(env_agent_loop.EnvAgentLoop, "_continue_from", broken_forks(mode, calls))
    server = scripted_server()
    outputs = await run_group(make_loop, make_config(k=2, **prover), server, uid=f"broken-{mode}")
    assert sorted(o.reward_score for o in outputs) == [0.0, 0.0, 1.0, 1.0]
    assert len(server.judge_prompts) == 1 and sorted(calls) == [0, 0, 1, 1]  # judged; K from each fork point
    assert all(o.prover_credit is not None and not any(o.prover_credit) for o in outputs)  # GRPO: zero credit
    leader = outputs[0].prover_stats
    assert set(leader) == set(STAT_KEYS)
    assert (leader[counter], leader["judge_ok"], leader["verified"], leader["positive"]) == (1, 1, 0, 0)
    assert all(o.prover_stats[counter] == 0 for o in outputs[1:])  # a group counter sits on one row
    assert env_agent_loop._rendezvous().pending() == 0
