"""``actor_rollout_ref.rollout.name=vllm``: verl's own vLLM replica, with an ``abort_request`` that reaches the engine.

verl 0.9.1's :meth:`vLLMHttpServer.abort_request` finds the request in ``engine.output_processor.request_states`` by
the id it was given. vLLM 0.24 keys that dict by an internal id (``InputProcessor.assign_request_id`` appends a
random suffix to every request's id), so the lookup never matches: the server answers "not found", the request runs
on to ``max_tokens``, and a replica that is put to sleep waits for it. :class:`ProverVLLMHttpServer` aborts through
``AsyncLLM.abort``, which maps the caller's id to vLLM's; everything else is verl's. The replica
(:class:`ProverVLLMReplica`) only swaps in that server class. On the ``cpu`` platform
(:mod:`prover_verl.cpu.vllm_replica`) its servers are launched without Ray accelerator ids.
"""

from __future__ import annotations

from typing import Any

import ray
from verl.workers.rollout.vllm_rollout.vllm_async_server import vLLMHttpServer, vLLMReplica


class ProverVLLMHttpServer(vLLMHttpServer):
    """verl's vLLM server whose ``abort_request`` takes the id the request was sent with, as vLLM now names it."""

    async def abort_request(self, request_id: str, reset_prefix_cache: bool = True) -> dict[str, Any]:
        """Abort the request sent as ``request_id`` (verl's reply: ``aborted`` True, or False with an ``error``).

        The request's ``generate`` call ends at once with stop reason ``aborted`` and the tokens so far.
        """
        if self.node_rank != 0:
            return {"aborted": False, "request_id": request_id}
        # caller's id -> vLLM's internal ids (vLLM >= 0.2x); a vLLM without the map keys requests by the caller's id
        # and verl's own lookup finds them
        names = getattr(self.engine.output_processor, "external_req_ids", None)
        if names is None:
            return await super().abort_request(request_id, reset_prefix_cache)
        if request_id not in names:
            return {"aborted": False, "request_id": request_id, "error": f"Request {request_id} not found"}
        await self.engine.abort(request_id)  # the final output (finish reason abort) ends the request's generate
        if reset_prefix_cache:
            await self.clear_kv_cache()
        return {"aborted": True, "request_id": request_id}


class ProverVLLMReplica(vLLMReplica):
    """verl's :class:`vLLMReplica` serving through :class:`ProverVLLMHttpServer`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.server_class = ray.remote(ProverVLLMHttpServer)
