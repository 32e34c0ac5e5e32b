"""Generate calls that, when cancelled (a verify timeout), abort their request on the rollout server that holds it.

Cancelling a coroutine that awaits a Ray actor call does not cancel the call: the replica would keep generating
the turn to its end. verl 0.9.1's ``LLMServerClient.generate`` keeps the server handle and the server-side request
id (a fresh one per turn unless ``rollout.full_determinism``) to itself, so :func:`generate` makes the same call
through the client's own routing (the sticky-session load balancer) and, if cancelled while the server holds the
request, sends verl's ``abort_request`` for it to that server: the request ends there at once with stop reason
``aborted``, as in the trainer's own aborts.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from typing import Any

from verl.workers.rollout.llm_server import LLMServerClient
from verl.workers.rollout.replica import TokenOutput

logger = logging.getLogger(__name__)

# how long a cancelled call waits for its request to end on the server (aborting it, until it is found there)
ABORT_WAIT_S = 10.0
_RETRY_S = 0.05


@dataclasses.dataclass
class AbortCount:
    """Requests aborted on the servers by cancelled :func:`generate` calls (``prover/verify_aborted_requests``)."""

    requests: int = 0


async def generate(
    client: Any,
    request_id: str,
    *,
    prompt_ids: list[int],
    sampling_params: dict[str, Any],
    aborts: AbortCount | None = None,
) -> TokenOutput:
    """``client.generate(request_id, ...)``; if cancelled, the request is aborted on its server first.

    With ``aborts`` None, or a client whose ``generate`` is not verl's :class:`LLMServerClient`'s own (a test
    double, or a subclass such as the fully-async client, whose resume loop this must not bypass), this is the
    client's ``generate`` unchanged.

    Args:
        client: The agent loop's ``server_manager``.
        request_id: The sticky-session key (which replica serves the turn).
        prompt_ids: The prompt tokens.
        sampling_params: The turn's sampling params.
        aborts: Counts the requests this call aborted.
    """
    if aborts is None or type(client).generate is not LLMServerClient.generate:
        return await client.generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params)
    # the steps of LLMServerClient.generate for a text prompt, keeping the server and its request id
    acquire = asyncio.ensure_future(
        client._acquire_server(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params)
    )
    try:
        server_id, server = await asyncio.shield(acquire)
    except asyncio.CancelledError:
        # the balancer counts the request in flight once its acquire lands, cancelled caller or not: release it then
        acquire.add_done_callback(lambda done: _release_acquired(client, done, request_id))
        raise
    try:
        server_request_id = client._vllm_request_id(request_id)
        call = server.generate.remote(
            request_id=server_request_id, prompt_ids=prompt_ids, sampling_params=sampling_params
        )
        try:
            output: TokenOutput = await call
        except asyncio.CancelledError:
            if await _abort(server, server_request_id, call):
                aborts.requests += 1
            raise
    finally:
        client._release_server(server_id, request_id=request_id)
    steps = output.extra_fields.get("global_steps")
    output.extra_fields.setdefault("min_global_steps", steps)
    output.extra_fields.setdefault("max_global_steps", steps)
    return output


def _release_acquired(client: Any, acquire: asyncio.Future, request_id: str) -> None:
    """Give back the server an acquire got for a caller that was cancelled while it was in flight."""
    if not acquire.cancelled() and acquire.exception() is None:
        client._release_server(acquire.result()[0], request_id=request_id)


async def _abort(server: Any, request_id: str, call: Any) -> bool:
    """Abort ``request_id`` on ``server`` (whose ``generate`` is ``call``); True if the server aborted it.

    Returns once the call has ended (an aborted one ends at once), at most :data:`ABORT_WAIT_S` later. The call
    may not have reached the server's engine yet (the server then answers "not found"): the abort is tried again
    until the call ends on its own. The prefix cache is kept: it serves the other groups' continuations.
    """
    done = asyncio.ensure_future(_settle(call))
    deadline = asyncio.get_running_loop().time() + ABORT_WAIT_S
    try:
        while True:
            reply = await server.abort_request.remote(request_id, reset_prefix_cache=False)
            if reply.get("aborted"):
                await asyncio.wait({done}, timeout=max(0.0, deadline - asyncio.get_running_loop().time()))
                return True
            finished, _ = await asyncio.wait({done}, timeout=_RETRY_S)
            if finished:
                return False
            if asyncio.get_running_loop().time() > deadline:
                logger.warning("could not abort request %s on its rollout server: %s", request_id, reply)
                return False
    finally:
        done.cancel()


async def _settle(call: Any) -> None:
    """Wait for ``call`` to end, however it ends."""
    with contextlib.suppress(Exception):  # its failure belongs to nobody now: the caller was cancelled
        await call
