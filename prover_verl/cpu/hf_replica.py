"""``actor_rollout_ref.rollout.name=hf``: a transformers rollout server for verl, token-in/token-out on CPU.

It plays the part vLLM plays on GPUs, behind the same interfaces, so verl's agent loop, the trainer's
wake-up/sleep/weight sync, the judge and the verifier run unchanged:

* :class:`HFReplica` (verl's :class:`RolloutReplica`, registered in ``RolloutReplicaRegistry``) launches one
  :class:`HFServer` Ray actor per replica, named as verl's vLLM servers are (``hf_server_<replica>_0``);
* :class:`HFServer` answers ``generate`` (prompt ids + sampling params -> :class:`TokenOutput` with log-probs)
  and every control call verl makes on a replica's server (wake up, sleep, abort, resume, caches, global steps);
* :class:`HFServerAdapter` (verl's :class:`BaseRollout`, built inside the FSDP worker) forwards the actor's
  per-tensor weights to its server on verl's ``update_weights``.

Generation is ``transformers``' own ``generate``; requests are served one at a time in a thread, so the actor
keeps answering control calls meanwhile. ``abort_request``/``abort_all_requests`` end a request as vLLM's do: a
queued one at once, a running one at its next token, returning the tokens so far with stop reason ``aborted``.
Memory calls (sleep, caches) have nothing to free on CPU.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import threading
from collections.abc import Generator
from typing import Any

import ray
import torch
from transformers import StoppingCriteria, StoppingCriteriaList
from verl.utils import hf_processor, hf_tokenizer
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput
from verl.workers.rollout.utils import get_vision_placeholder_token_ids

from prover_verl.cpu import ROLLOUT_NAME
from prover_verl.hf_model import load_policy_model

logger = logging.getLogger(__name__)

NAME = ROLLOUT_NAME
# the replica's weights after each sync are written here (one file per global step) when set: the CPU smoke
# test compares them with the actor's checkpoint (tests/recipes/test_cpu_smoke_on_cpu.py)
DUMP_ENV = "PROVER_HF_REPLICA_DUMP_DIR"


def server_name(replica_rank: int) -> str:
    """Ray actor name of a replica's server; :class:`HFServerAdapter` looks it up by this name."""
    return f"{NAME}_server_{replica_rank}_0"


def sample_kwargs(sampling_params: dict[str, Any]) -> dict[str, Any]:
    """transformers ``generate`` keywords for verl's sampling params (temperature 0 is greedy, as in vLLM)."""
    temperature = float(sampling_params.get("temperature", 1.0))
    if temperature <= 0:
        return {"do_sample": False}
    top_k = int(sampling_params.get("top_k", -1) or -1)
    return {
        "do_sample": True,
        "temperature": temperature,
        "top_p": float(sampling_params.get("top_p", 1.0)),
        "top_k": top_k if top_k > 0 else 0,
        "repetition_penalty": float(sampling_params.get("repetition_penalty", 1.0)),
    }


def banned_token_mask(model_config: Any, num_logits: int) -> torch.Tensor:
    """``(num_logits,)`` bool: the tokens verl's vLLM server never lets the policy sample.

    vLLM's logits are masked (``monkey_patch_compute_logits``) past the tokenizer's length (the padded tail of the
    embedding) and at the vision placeholders (``<|image_pad|>``, ``<|video_pad|>``) of a vision-language
    processor: a sampled placeholder has no image behind it, and verl's agent loop then fails the whole session
    computing its multimodal positions. The CPU replica masks the same tokens, so its episodes are the job's.
    """
    tokenizer, processor = getattr(model_config, "tokenizer", None), getattr(model_config, "processor", None)
    if tokenizer is None:  # a config that did not load them (load_tokenizer=false, a bare path): load as verl does
        path = getattr(model_config, "local_tokenizer_path", None) or model_config.local_path
        tokenizer, processor = hf_tokenizer(path), hf_processor(path)
    banned = torch.zeros(num_logits, dtype=torch.bool)
    banned[len(tokenizer) :] = True
    banned[get_vision_placeholder_token_ids(processor)] = True
    return banned


@dataclasses.dataclass
class _Request:
    """A request the server holds (queued or running) and its abort flag, read by the generating thread."""

    stop: threading.Event = dataclasses.field(default_factory=threading.Event)
    aborted: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)

    def abort(self) -> None:
        self.stop.set()
        self.aborted.set()


class _StopOnAbort(StoppingCriteria):
    """Ends ``generate`` at the next token once its request is aborted."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any) -> torch.BoolTensor:
        return torch.full((input_ids.shape[0],), self.stop.is_set(), dtype=torch.bool)


class _StopOnStrings(StoppingCriteria):
    """Ends ``generate`` at the token whose text completes one of ``stops`` in the generated text (the prompt's is not
    searched), that token the last returned, as vLLM ends a request at a stop string (``include_stop_str_in_output``
    changes only the text, which verl's agent loop does not read)."""

    def __init__(self, tokenizer: Any, stops: list[str], prompt_len: int) -> None:
        self.tokenizer, self.stops, self.prompt_len = tokenizer, stops, prompt_len
        # generation ends at the first completed stop string, so a new one ends in the newest token: the last
        # (longest stop's bytes + 1) tokens hold it (a token is at least one byte), and the whole reply need not be
        # decoded again at every token
        self.window = max(len(stop.encode("utf-8")) for stop in stops) + 1

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any) -> torch.BoolTensor:
        start = max(self.prompt_len, input_ids.shape[1] - self.window)
        texts = self.tokenizer.batch_decode(input_ids[:, start:])
        return torch.tensor([any(stop in text for stop in self.stops) for text in texts], dtype=torch.bool)


class HFServer:
    """One transformers model answering verl's rollout-server calls (a Ray actor; see :class:`HFReplica`)."""

    def __init__(self, config, model_config, replica_rank: int) -> None:
        self.config = config
        self.replica_rank = replica_rank
        self.global_steps: int | None = None
        if not hasattr(model_config, "local_path"):  # verl hands replicas the model config as a DictConfig
            model_config = omega_conf_to_dataclass(model_config)
        # the actor's class (a vision-language checkpoint as Qwen3_5ForConditionalGeneration), so that its weight
        # names are those the actor syncs, as vLLM serves the checkpoint's own architecture
        self.model = load_policy_model(model_config.local_path).eval()
        generation = self.model.generation_config
        self.eos_token_id = generation.eos_token_id
        self.pad_token_id = generation.pad_token_id if generation.pad_token_id is not None else 0
        self.banned = banned_token_mask(model_config, self.model.get_output_embeddings().weight.shape[0])
        self.local_path = model_config.local_path
        self._tokenizer = None  # loaded for the first request with stop strings
        self._lock = asyncio.Lock()
        self._requests: dict[str, _Request] = {}  # request id -> the request, while queued or running
        self._dump(step=0)

    def _dump(self, step: int) -> None:
        out = os.environ.get(DUMP_ENV)
        if out:
            os.makedirs(out, exist_ok=True)
            state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            torch.save(state, os.path.join(out, f"replica{self.replica_rank}_step{step}.pt"))

    def _max_tokens(self, prompt_len: int, sampling_params: dict[str, Any]) -> int:
        # the same budget rule as verl's vLLM server (vllm_async_server.py, generate)
        max_possible = self.config.max_model_len - prompt_len if self.config.max_model_len else None
        if "max_tokens" in sampling_params:
            max_tokens = sampling_params["max_tokens"]
        elif "max_new_tokens" in sampling_params:
            max_tokens = sampling_params["max_new_tokens"]
        else:
            max_tokens = min(
                self.config.response_length, self.config.prompt_length + self.config.response_length - prompt_len
            )
        if max_possible is not None:
            if max_possible < 1:
                raise ValueError(f"prompt of {prompt_len} tokens leaves no room under max_model_len")
            max_tokens = min(max_tokens, max_possible)
        return max(1, int(max_tokens))

    def _stop_criteria(self, sampling_params: dict[str, Any], prompt_len: int) -> list[StoppingCriteria]:
        """vLLM's ``stop`` strings (a protocol's ``</search>``) as a stopping criterion, if any are asked for."""
        stop = sampling_params.get("stop")
        if not stop:
            return []
        if self._tokenizer is None:
            self._tokenizer = hf_tokenizer(self.local_path)
        return [_StopOnStrings(self._tokenizer, [stop] if isinstance(stop, str) else list(stop), prompt_len)]

    def _mask_banned(self, input_ids: torch.Tensor | None, scores: torch.Tensor) -> torch.Tensor:
        """``scores`` with the banned tokens at -inf (a ``generate`` logits processor, and the log-probs' mask)."""
        return scores.masked_fill(self.banned.to(scores.device), float("-inf"))

    @torch.no_grad()
    def _generate(
        self, prompt_ids: list[int], sampling_params: dict[str, Any], stop: threading.Event | None = None
    ) -> tuple[list[int], list[float]]:
        max_new = self._max_tokens(len(prompt_ids), sampling_params)
        seed = sampling_params.get("seed")
        if seed is not None:
            torch.manual_seed(int(seed))
        input_ids = torch.tensor([prompt_ids], dtype=torch.long)
        out = self.model.generate(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=max_new,
            min_new_tokens=max_new if sampling_params.get("ignore_eos") else None,
            eos_token_id=self.eos_token_id,
            pad_token_id=self.pad_token_id,
            return_dict_in_generate=True,
            output_logits=True,
            logits_processor=[self._mask_banned],
            stopping_criteria=StoppingCriteriaList(
                [_StopOnAbort(stop or threading.Event()), *self._stop_criteria(sampling_params, len(prompt_ids))]
            ),
            **sample_kwargs(sampling_params),
        )
        tokens = out.sequences[0, len(prompt_ids) :]
        # log-probs of the model's own distribution (vLLM's default "raw" log-probs, taken after its mask of the
        # banned tokens), one per generated token; output_logits are the logits before any processor
        logits = self._mask_banned(None, torch.stack(out.logits, dim=1)[0, : len(tokens)].float())
        log_probs = torch.log_softmax(logits, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        # generate pads a finished sequence only in batches; with one sequence, stop at the first EOS inclusive
        eos = self.eos_token_id if isinstance(self.eos_token_id, list) else [self.eos_token_id]
        ids = tokens.tolist()
        for i, token in enumerate(ids):
            if token in eos:
                ids, log_probs = ids[: i + 1], log_probs[: i + 1]
                break
        return ids, log_probs.tolist()

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: list[Any] | None = None,
        video_data: list[Any] | None = None,
        **kwargs: Any,
    ) -> TokenOutput:
        """Token-in/token-out generation, as verl's vLLM server's ``generate``; an aborted request returns the
        tokens generated so far (none if it was still queued) with stop reason ``aborted``."""
        if image_data is not None or video_data is not None:
            raise NotImplementedError("rollout.name=hf serves text prompts only (no images or videos)")
        if request_id in self._requests:
            raise ValueError(f"request id {request_id!r} is already in flight on this server")
        request = self._requests[request_id] = _Request()
        try:
            if not await self._acquire_unless_aborted(request):
                token_ids, log_probs = [], []
            else:
                try:
                    token_ids, log_probs = await asyncio.to_thread(
                        self._generate, list(prompt_ids), dict(sampling_params), request.stop
                    )
                finally:
                    self._lock.release()
        finally:
            del self._requests[request_id]
        return TokenOutput(
            token_ids=token_ids,
            log_probs=log_probs if sampling_params.get("logprobs") else None,
            stop_reason="aborted" if request.stop.is_set() else "completed",
            extra_fields={"global_steps": self.global_steps},
        )

    async def _acquire_unless_aborted(self, request: _Request) -> bool:
        """Wait for the generation lock; False (lock not held) if the request is aborted while it waits."""
        acquire = asyncio.ensure_future(self._lock.acquire())
        aborted = asyncio.ensure_future(request.aborted.wait())
        await asyncio.wait({acquire, aborted}, return_when=asyncio.FIRST_COMPLETED)
        aborted.cancel()
        if not acquire.done():
            acquire.cancel()
            try:
                await acquire
            except asyncio.CancelledError:
                return False
        if request.stop.is_set():  # aborted in the same turn as the lock came free
            self._lock.release()
            return False
        return True

    async def abort_request(self, request_id: str, reset_prefix_cache: bool = True) -> dict[str, Any]:
        """End one request, queued or running, as verl's vLLM server does (its ``generate`` then returns with stop
        reason ``aborted``); a request the server does not hold (unknown, finished) is reported not found."""
        request = self._requests.get(request_id)
        if request is None:
            return {"aborted": False, "error": f"Request {request_id} not found"}
        request.abort()
        return {"aborted": True, "request_id": request_id}

    async def update_weights(self, weights: dict[str, torch.Tensor], global_steps: int | None = None) -> None:
        """Load the actor's full (HF-named) weights; every parameter must be given, none unknown."""
        async with self._lock:
            missing, unexpected = self.model.load_state_dict(weights, strict=False)
            tied = set(getattr(self.model, "_tied_weights_keys", None) or [])
            if unexpected or set(missing) - tied:
                raise ValueError(f"weight update does not match the model: missing {missing}, unexpected {unexpected}")
            if tied and getattr(self.model.config, "tie_word_embeddings", False):
                self.model.tie_weights()
            if global_steps is not None:
                self.global_steps = global_steps
            self._dump(step=global_steps if global_steps is not None else -1)

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    # control calls verl makes on every replica's servers; on CPU there is no memory to free or engine to pause
    async def wake_up(self, tags: list[str] | None = None) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def abort_all_requests(self, reject_request: bool = False, **kwargs: Any) -> dict[str, Any]:
        """End every request the server holds (see :meth:`abort_request`)."""
        request_ids = list(self._requests)
        for request_id in request_ids:
            self._requests[request_id].abort()
        return {"aborted_count": len(request_ids), "request_ids": request_ids}

    async def resume_generation(self) -> None:
        return None

    async def start_profile(self, **kwargs: Any) -> None:
        return None

    async def stop_profile(self) -> None:
        return None

    async def wait_for_requests_to_drain(self) -> None:
        async with self._lock:
            return None


class HFReplica(RolloutReplica):
    """verl rollout replica served by one :class:`HFServer` (tensor/data/pipeline parallel size 1)."""

    async def launch_servers(self) -> None:
        if self.world_size != 1:
            raise ValueError(
                "actor_rollout_ref.rollout.name=hf serves one process per replica: set "
                "actor_rollout_ref.rollout.tensor_model_parallel_size=1 (and data/pipeline parallel size 1)"
            )
        options: dict[str, Any] = {"name": server_name(self.replica_rank), "max_concurrency": self.max_concurrency}
        if self.workers:
            node_id = await self.workers[0].__ray_call__.remote(lambda w: ray.get_runtime_context().get_node_id())
            options["scheduling_strategy"] = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                node_id=node_id, soft=False
            )
        # the server shares its node's CPUs with the FSDP worker it belongs to, as vLLM shares its GPU
        server = (
            ray.remote(HFServer)
            .options(num_cpus=0, **options)
            .remote(config=self.config, model_config=self.model_config, replica_rank=self.replica_rank)
        )
        await server.__ray_ready__.remote()
        self.servers = [server]
        self._server_handle = server
        self._server_address = server_name(self.replica_rank)

    def rollout_worker_use_gpu(self) -> bool:
        return False


class HFServerAdapter(BaseRollout):
    """verl's rollout object inside the FSDP worker: sends the actor's weights to its replica's server."""

    def __init__(self, config, model_config, device_mesh, replica_rank: int = -1) -> None:
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", "0"))
        self.replica_rank = rank if replica_rank == -1 else replica_rank
        self._server = None

    def _handle(self):
        if self._server is None:  # the server starts after the hybrid engine, so it is looked up lazily
            self._server = ray.get_actor(server_name(self.replica_rank))
        return self._server

    async def resume(self, tags: list[str]) -> None:
        await self._handle().wake_up.remote(tags=tags)

    async def release(self) -> None:
        await self._handle().sleep.remote()

    @torch.no_grad()
    async def update_weights(
        self,
        weights: Generator[tuple[str, torch.Tensor], None, None],
        global_steps: int | None = None,
        wire_format: str = "named_tensors",
        **kwargs: Any,
    ) -> None:
        if wire_format != "named_tensors":
            raise ValueError(f"rollout.name=hf takes wire_format='named_tensors', not {wire_format!r}")
        state = {}
        for name, tensor in weights:
            if hasattr(tensor, "full_tensor"):
                tensor = tensor.full_tensor()
            state[name] = tensor.detach().to("cpu", torch.float32).clone()
        await self._handle().update_weights.remote(state, global_steps=global_steps)
