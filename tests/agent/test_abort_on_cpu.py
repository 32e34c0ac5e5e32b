"""A verify timeout aborts its continuations' requests on the rollout server that holds them.

The whole path runs on CPU without Ray: verl's own ``LLMServerClient`` routes through a load balancer and server
handles that answer ``.remote`` as Ray's do (the awaited call runs on when its caller is cancelled); the
continuations reach a real transformers server (:class:`HFServer`) and run there until aborted.
"""

import asyncio

import pytest
from omegaconf import OmegaConf
from verl.workers.rollout.llm_server import LLMServerClient

from prover_verl import tiny_model
from prover_verl.agent import abort
from prover_verl.cpu.hf_replica import HFServer
from tests.cpu.test_hf_replica_on_cpu import ENDLESS, _server


class Call:
    """What ``handle.method.remote(...)`` returns: awaitable any number of times; cancelling a caller that
    awaits it leaves it running, as with a Ray actor call."""

    def __init__(self, result):
        self.task = asyncio.ensure_future(result) if asyncio.iscoroutine(result) else None
        self.result = result

    def __await__(self):
        if self.task is None:
            return asyncio.sleep(0, self.result).__await__()
        return asyncio.shield(self.task).__await__()


class Handle:
    """A stand-in for a Ray actor handle on ``target``."""

    def __init__(self, target):
        self.target = target

    def __getattr__(self, name):
        method = getattr(self.target, name)
        return type("Method", (), {"remote": staticmethod(lambda *a, **kw: Call(method(*a, **kw)))})


class EndlessTurns:
    """The HF server as the continuations see it: every turn runs until it is aborted."""

    def __init__(self, server: HFServer):
        self.server = server
        self.outputs = []

    async def generate(self, *, prompt_ids, sampling_params, request_id, **kwargs):
        output = await self.server.generate(prompt_ids, {**sampling_params, **ENDLESS}, request_id)
        self.outputs.append(output)
        return output

    async def abort_request(self, request_id, reset_prefix_cache=True):
        return await self.server.abort_request(request_id, reset_prefix_cache)


class Balancer:
    """verl's load-balancer interface: the scripted server plays the episodes and the judge; once the judge
    has answered, the continuations go to the HF server."""

    def __init__(self, scripted, hf):
        self.scripted, self.hf = scripted, hf

    def require_acquire_fields(self):
        return []

    def require_release_fields(self):
        return []

    def acquire_server(self, request_id):
        return ("hf", Handle(self.hf)) if self.scripted.judge_prompts else ("scripted", Handle(self.scripted))

    def release_server(self, server_id, request_id=None):
        return None


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_model.build(tmp_path_factory.mktemp("tiny"), arch="qwen3")


@pytest.mark.timeout(120)
async def test_verify_timeout_aborts_the_continuations_on_their_server(
    make_loop, make_config, scripted_server, play_group, model_dir
):
    scripted, hf = scripted_server(), EndlessTurns(_server(model_dir))
    config = make_config(k=2, verify_timeout_s=1.0)
    OmegaConf.update(config, "actor_rollout_ref.rollout.name", "hf", force_add=True)  # the client reads it
    client = LLMServerClient(config, load_balancer_handle=Handle(Balancer(scripted, hf)))
    try:
        outputs = await asyncio.wait_for(play_group(config, client, uid="aborted"), 60)
        # right after the timeout the server holds none of the continuations' requests: each ended aborted
        assert not hf.server._requests
        leader = outputs[0].prover_stats
        assert (leader["verify_timeout"], leader["verified"]) == (1, 0)
        assert [o.stop_reason for o in hf.outputs] == ["aborted"] * 4  # K=2 from each of the 2 fork points
        assert leader["verify_aborted_requests"] == 4
        assert all(o.prover_stats["verify_aborted_requests"] == 0 for o in outputs[1:])
    finally:
        await hf.server.abort_all_requests()  # a failing run must not leave the server generating


async def test_plain_calls_and_other_clients_go_through_the_clients_generate(scripted_server):
    server = scripted_server()
    output = await abort.generate(server, "key", prompt_ids=[1, 2], sampling_params={}, aborts=abort.AbortCount())
    assert server.requests == [("key", 2, {})] and output.extra_fields["max_global_steps"] == 1


class SlowBalancer:
    """A load balancer that counts requests in flight, whose acquire lands after its caller may be cancelled."""

    def __init__(self, server):
        self.server, self.in_flight = server, 0

    def require_acquire_fields(self):
        return []

    def require_release_fields(self):
        return []

    async def acquire_server(self, request_id):
        await asyncio.sleep(0.2)
        self.in_flight += 1
        return "s", Handle(self.server)

    def release_server(self, server_id, request_id=None):
        self.in_flight -= 1


async def test_a_call_cancelled_while_acquiring_its_server_releases_it_once_acquired(scripted_server):
    balancer = SlowBalancer(scripted_server())
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"name": "hf"}}})
    client = LLMServerClient(config, load_balancer_handle=Handle(balancer))
    call = asyncio.ensure_future(
        abort.generate(client, "key", prompt_ids=[1], sampling_params={}, aborts=abort.AbortCount())
    )
    await asyncio.sleep(0.05)  # inside the acquire
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await asyncio.sleep(0.4)  # the acquire lands on the balancer after the caller is gone
    assert balancer.in_flight == 0
    # a call that is not cancelled also leaves nothing in flight
    await abort.generate(client, "key", prompt_ids=[1], sampling_params={}, aborts=abort.AbortCount())
    assert balancer.in_flight == 0
