"""A scripted OpenAI-compatible chat server: a real process on 127.0.0.1 for the judge's fault and protocol tests.

    python tests/judge/scripted_openai_server.py --script STEPS.json [--log REQUESTS.jsonl]
    python tests/judge/scripted_openai_server.py --policy FILE.py:FUNCTION [--log REQUESTS.jsonl]

It prints the port it listens on as its first line of stdout. Each ``POST /v1/chat/completions`` takes the next
step of the script (the last step repeats), or with ``--policy`` the step that ``FUNCTION(request_body)`` returns.
``POST /script`` with a JSON list of steps replaces the script and starts it over (one process serves many tests).
A step is a JSON object; every key is optional:

* ``content`` (text or null) and ``tool_calls`` (``[{"name": ..., "arguments": text or object}]``): the reply;
* ``delay_s``: seconds to wait before answering;
* ``status`` with ``headers``: answer with this HTTP status (e.g. 429 with ``{"Retry-After": "1"}``);
* ``body``: send this text as the whole response body (status 200 unless ``status`` says), e.g. an HTML page;
* ``trickle_s``: send the reply one byte every 0.1 s, padded with leading spaces to last this long;
* ``die``: the process exits on receiving the request, without answering;
* ``usage``: false to leave the token usage out of the reply.

Token usage is counted as word pieces (``\\w+`` runs and single punctuation marks) of the messages' and the reply's
text: a stand-in for a tokenizer, the same for every request. ``--log`` appends each request body as a JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

PIECE = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """Word pieces of ``text``: the server's stand-in for a tokenizer."""
    return len(PIECE.findall(text))


def request_tokens(body: dict[str, Any]) -> int:
    """Word pieces of a request's messages (their text and their tool calls) and of its tool definitions."""
    total = count_tokens(json.dumps(body.get("tools") or []))
    for message in body.get("messages", []):
        total += 4 + count_tokens(str(message.get("content") or ""))  # 4: the role and the turn's markers
        for call in message.get("tool_calls") or []:
            total += count_tokens(call["function"]["name"]) + count_tokens(call["function"]["arguments"])
    return total


def completion(step: dict[str, Any], body: dict[str, Any], index: int) -> dict[str, Any]:
    """The chat completion object of a step's reply."""
    calls = [
        {
            "id": f"call_{index}_{i}",
            "type": "function",
            "function": {
                "name": c["name"],
                "arguments": c["arguments"] if isinstance(c["arguments"], str) else json.dumps(c["arguments"]),
            },
        }
        for i, c in enumerate(step.get("tool_calls") or [])
    ]
    message = {"role": "assistant", "content": step.get("content"), "tool_calls": calls or None}
    reply = {
        "id": f"chatcmpl-{index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "scripted"),
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
    }
    if step.get("usage", True):
        prompt = request_tokens(body)
        done = count_tokens(step.get("content") or "") + sum(
            count_tokens(c["function"]["name"] + c["function"]["arguments"]) for c in calls
        )
        reply["usage"] = {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}
    return reply


def load_policy(spec: str):
    """``FILE.py:FUNCTION`` -> the function."""
    path, _, name = spec.rpartition(":")
    module_spec = importlib.util.spec_from_file_location("scripted_policy", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return getattr(module, name)


class Script:
    """The steps in order, the last repeating; :meth:`__call__` is the next one."""

    def __init__(self, steps: list[dict]):
        self.steps, self.taken = steps, 0

    def __call__(self, body: dict) -> dict:
        step = self.steps[min(self.taken, len(self.steps) - 1)]
        self.taken += 1
        return step


def make_app(next_step, log: Path | None):
    """The FastAPI app answering each request with ``next_step(body)``."""
    app = FastAPI()
    count = [0]

    @app.get("/health")
    async def health():
        return {"ok": True}

    @app.post("/script")
    async def script(request: Request):
        if not isinstance(next_step, Script):
            return JSONResponse({"error": "this server runs a policy"}, status_code=400)
        next_step.steps, next_step.taken = await request.json(), 0
        return {"ok": True}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        index = count[0]
        count[0] += 1
        if log is not None:
            with open(log, "a") as f:
                f.write(json.dumps(body) + "\n")
        step = next_step(body)
        if step.get("die"):
            os._exit(0)  # mid-request, as a crashed or killed server: the connection closes unanswered
        await asyncio.sleep(step.get("delay_s", 0))
        if "body" in step:
            return Response(step["body"], status_code=step.get("status", 200), media_type="text/html")
        if step.get("status", 200) != 200:
            error = {"error": {"message": f"scripted status {step['status']}", "type": "scripted", "code": None}}
            return JSONResponse(error, status_code=step["status"], headers=step.get("headers"))
        payload = json.dumps(completion(step, body, index)).encode()
        if step.get("trickle_s"):
            pad = max(0, int(step["trickle_s"] / 0.1))

            async def trickle():
                for piece in [b" "] * pad + [payload]:
                    yield piece
                    await asyncio.sleep(0.1)

            return StreamingResponse(trickle(), media_type="application/json")
        return Response(payload, media_type="application/json")

    return app


def serve(script: list[dict] | None = None, policy: str | None = None, log: Path | None = None, timeout_s=30.0):
    """Start the server as a subprocess; returns ``(process, base_url)`` once ``/health`` answers.

    Args:
        script: The steps, in order (the last repeats).
        policy: ``FILE.py:FUNCTION`` choosing each step from the request instead.
        log: Where to append each request body.
        timeout_s: How long the server may take to start.
    """
    args = [sys.executable, str(Path(__file__).resolve())]
    if script is not None:
        args += ["--script", json.dumps(script)]
    if policy is not None:
        args += ["--policy", policy]
    if log is not None:
        args += ["--log", str(log)]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    port = process.stdout.readline().strip()
    if not port.isdigit():
        process.kill()
        raise RuntimeError(f"the scripted server did not start (exit {process.wait()})")
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(f"{base}/health", timeout=1).read()
            return process, f"{base}/v1"
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError(f"the scripted server at {base} did not answer /health") from None
            time.sleep(0.05)


def free_port() -> int:
    """A port nothing listens on now (for "the endpoint is down")."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--script", help="the steps, a JSON list")
    parser.add_argument("--policy", help="FILE.py:FUNCTION(request_body) -> step")
    parser.add_argument("--log", type=Path, help="append each request body to this file")
    args = parser.parse_args()
    if (args.script is None) == (args.policy is None):
        parser.error("give one of --script and --policy")
    next_step = load_policy(args.policy) if args.policy else Script(json.loads(args.script))
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(make_app(next_step, args.log), log_level="warning", timeout_keep_alive=30)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
