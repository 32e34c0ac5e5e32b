"""How an observation joins the token stream after a reply: a closed chat turn, or Search-R1's inline text.

A reply that a stop string ended (``</search>``) has no end-of-turn token. Under the chat layout the loop closes the
turn (response mask 0) before the observation's user turn; under Search-R1's layout the observation's text continues
the same assistant turn, token for token, with no chat-template tokens around it.
"""

import pytest

from prover_verl.agent import layout
from prover_verl.agent.episode import Conversation

OBS = "\n\n<information>Doc 1(Title: go) open the chest</information>\n\n"


async def _after_reply(make_loop, make_config, scripted_server, tokenizer, reply_ids, inline):
    loop = make_loop(make_config(), scripted_server())
    messages = [{"role": "user", "content": "go"}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    conv = Conversation(messages, list(prompt), len(prompt), [], [])
    output = type("Out", (), {"token_ids": reply_ids, "log_probs": [-0.5] * len(reply_ids)})()
    await loop._append_assistant(conv, output)
    conv.messages.append({"role": "assistant", "content": tokenizer.decode(reply_ids)})
    await loop._append_observation(conv, OBS, inline)
    return loop, conv, len(prompt)


@pytest.mark.parametrize("ended_by", ["stop_string", "eos"])
async def test_chat_layout_closes_a_turn_that_a_stop_string_ended(
    make_loop, make_config, scripted_server, tokenizer, ended_by
):
    reply = tokenizer.encode("<action>go left</action>") + ([tokenizer.eos_token_id] if ended_by == "eos" else [])
    loop, conv, prompt_len = await _after_reply(make_loop, make_config, scripted_server, tokenizer, reply, False)
    user_turn = tokenizer.encode(f"<|user|>{OBS}<|end|><|assistant|>")
    # the test tokenizer's chat template ends a turn with its EOS: exactly one closes the reply, whatever ended it
    closed = [*reply, tokenizer.eos_token_id] if ended_by == "stop_string" else reply
    assert layout.turn_end_id(tokenizer) == tokenizer.eos_token_id
    assert conv.token_ids[prompt_len:] == [*closed, *user_turn]
    assert conv.response_mask == [1] * len(reply) + [0] * (len(closed) - len(reply) + len(user_turn))
    assert conv.response_logprobs == [-0.5] * len(reply) + [0.0] * (len(closed) - len(reply) + len(user_turn))


async def test_inline_layout_continues_the_assistant_turn_with_the_observation_text(
    make_loop, make_config, scripted_server, tokenizer
):
    reply = tokenizer.encode("<search>go left</search>")
    _, conv, prompt_len = await _after_reply(make_loop, make_config, scripted_server, tokenizer, reply, True)
    assert conv.token_ids[prompt_len:] == [*reply, *tokenizer.encode(OBS, add_special_tokens=False)]
    assert tokenizer.decode(conv.token_ids[prompt_len:]) == "<search>go left</search>" + OBS
    assert conv.response_mask == [1] * len(reply) + [0] * (len(conv.token_ids) - prompt_len - len(reply))
    assert conv.messages[-1] == {"role": "user", "content": OBS}  # the record still says who said what


def test_search_r1_is_the_one_shipped_protocol_laid_out_inline():
    from envs import protocol

    inline = {
        (env, name)
        for env in ("alfworld", "webshop", "searchqa", "keydoor")
        for name, p in (protocol.protocols(env) or {}).items()
        if p.inline_observations
    }
    assert inline == {("searchqa", "search_r1")}
