"""The prompt adapter: the env's protocol reaches the agent loop's prompts and sampling; linear-time parsing."""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import envs
from prover_verl.agent.adapters import make_adapter
from prover_verl.config import EnvConfig
from tests.conftest import ScriptedServer

TASK = "nq_mini-test-0000"  # "Who won the Battle of Greilplath?", gold "Pluldrunara"


class AnsweringServer(ScriptedServer):
    """Answers at once; keeps the prompts it saw."""

    def act(self, text, key):
        self.prompts = [*getattr(self, "prompts", []), text]
        return "<think>I know it.</think><answer>Pluldrunara</answer> and more"


@pytest.fixture
def retriever_url():
    """A retrieval server that has no ``/fingerprint`` route (as Search-R1's) and is never asked to search here."""

    class NotFound(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_error(404)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/retrieve"
    server.shutdown()
    server.server_close()


async def test_search_r1_reaches_the_agent_loop(make_loop, make_config, tokenizer, retriever_url):
    kwargs = {"retriever_url": retriever_url, "split": "test"}
    env = {"name": "searchqa", "protocol": "search_r1", "kwargs": kwargs, "max_turns": 5}
    config = make_config(adv_estimator="grpo", env=env, prompt_length=4096)
    server = AnsweringServer(tokenizer)
    extra = {"env": "searchqa", "task_id": TASK, "split": "test", "verify": False}
    output = await make_loop(config, server).run({"temperature": 1.0}, uid="u", session_id=0, extra_info=extra)
    # vLLM stops each generation at Search-R1's closing tags, which stay in the reply
    assert server.requests[0][2]["stop"] == ["</search>", "</answer>"]
    assert server.requests[0][2]["include_stop_str_in_output"] is True
    assert "<|system|>" not in server.prompts[0] and "Question: Who won the Battle of Greilplath?" in server.prompts[0]
    assert output.reward_score == 1.0  # the thought stays in the reply; the env parses the answer after it


def test_env_protocol_is_put_into_the_env_kwargs():
    assert EnvConfig.from_mapping({"name": "searchqa", "protocol": "verl_agent"}).kwargs == {"protocol": "verl_agent"}
    same = {"name": "searchqa", "protocol": "search_r1", "kwargs": {"protocol": "search_r1"}}
    assert EnvConfig.from_mapping(same).kwargs == {"protocol": "search_r1"}
    with pytest.raises(ValueError, match="env.protocol='search_r1' and env.kwargs.protocol='default' disagree"):
        EnvConfig.from_mapping({"name": "searchqa", "protocol": "search_r1", "kwargs": {"protocol": "default"}})


@pytest.mark.parametrize(
    ("env_name", "names"), [("webshop", ["default", "original", "verl_agent"]), ("alfworld", ["default", "verl_agent"])]
)
def test_webshop_and_alfworld_protocols_reach_the_adapter(env_name, names):
    # their presets are envs.protocol.Protocol: before, any of them (the default too) failed to build an adapter
    for name in [None, *names]:
        adapter = make_adapter(env_name, env_kwargs=None if name is None else {"protocol": name})
        # verl-agent's prompt side is not carried: every preset plays the chat adapter of the env spec
        assert adapter.system == envs.spec(env_name).system_prompt and adapter.sampling_params() == {}
        assert adapter.parse_action("<think>x</think><action>look</action>") == "look"
    with pytest.raises(ValueError, match=f"unknown {env_name} protocol 'search_r1'; known: {', '.join(names)}"):
        make_adapter(env_name, env_kwargs={"protocol": "search_r1"})


def test_unknown_protocols_fail_naming_the_known_ones():
    with pytest.raises(ValueError, match="unknown searchqa protocol 'searchr1'; known: default, search_r1, verl_agent"):
        make_adapter("searchqa", env_kwargs={"protocol": "searchr1"})
    with pytest.raises(ValueError, match="env 'keydoor' has no protocols"):
        make_adapter("keydoor", env_kwargs={"protocol": "search_r1"})


@pytest.mark.parametrize("reply", ["<think>" * 149796, "<action>" * 131072, "<action>a</action>" * 58254])
def test_a_megabyte_reply_parses_within_a_second(reply):
    adapter = make_adapter("keydoor")  # a tagged-action env: thoughts stripped, the last <action> taken
    start = time.process_time()
    adapter.parse_action(reply)
    assert time.process_time() - start < 1.0
    assert adapter.parse_action("<think>a</think> x <action>left</action><action> right </action>") == "right"
