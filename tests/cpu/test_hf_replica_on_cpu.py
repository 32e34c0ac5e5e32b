"""The transformers rollout server: verl's token-in/token-out contract, log-probs and weight updates."""

import asyncio
import random
from types import SimpleNamespace

import pytest
import torch
from verl.utils import hf_tokenizer

from prover_verl import tiny_model
from prover_verl.cpu.hf_replica import HFServer, _StopOnStrings, banned_token_mask, sample_kwargs


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_model.build(tmp_path_factory.mktemp("tiny"), arch="qwen3")


def _server(model_dir, response_length=16):
    config = SimpleNamespace(max_model_len=None, response_length=response_length, prompt_length=64)
    return HFServer(config, SimpleNamespace(local_path=str(model_dir)), replica_rank=0)


def _forward_log_probs(model, prompt, response):
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(response).unsqueeze(-1)).squeeze(-1)


async def test_generate_returns_tokens_and_the_models_log_probs(model_dir):
    server = _server(model_dir)
    prompt = [5, 6, 7, 8]
    out = await server.generate(prompt, {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": True}, "r1")
    assert 1 <= len(out.token_ids) <= 16 and out.stop_reason == "completed"
    assert len(out.log_probs) == len(out.token_ids)
    expected = _forward_log_probs(server.model, prompt, out.token_ids)
    torch.testing.assert_close(torch.tensor(out.log_probs), expected, atol=1e-4, rtol=1e-4)
    no_logprobs = await server.generate(prompt, {"temperature": 1.0, "logprobs": False}, "r2")
    assert no_logprobs.log_probs is None


async def test_budget_greedy_and_eos(model_dir):
    server = _server(model_dir, response_length=32)
    greedy = {"temperature": 0.0, "logprobs": True, "max_tokens": 5}
    first = await server.generate([1, 2, 3], dict(greedy), "a")
    second = await server.generate([1, 2, 3], dict(greedy), "b")
    assert first.token_ids == second.token_ids and len(first.token_ids) <= 5
    forced = await server.generate([1, 2, 3], {"temperature": 1.0, "max_tokens": 7, "ignore_eos": True}, "c")
    assert len(forced.token_ids) == 7
    eos = server.eos_token_id
    for _ in range(5):
        out = await server.generate([1, 2, 3], {"temperature": 1.0}, "d")
        assert eos not in out.token_ids[:-1], "generation must stop at the first EOS"


async def test_stop_strings_end_generation_at_the_token_that_completes_one_as_vllm_does(model_dir):
    """A protocol's stop strings (Search-R1's ``</search>``) end the reply where its text first holds one, that token
    the last returned; the CPU twin ignored them once and replied past them."""
    server = _server(model_dir, response_length=32)
    greedy = {"temperature": 0.0, "max_tokens": 32, "ignore_eos": True}
    full = (await server.generate([1, 2, 3], dict(greedy), "full")).token_ids
    tok = hf_tokenizer(str(model_dir))
    texts = [tok.decode(full[: i + 1]) for i in range(len(full))]
    cut = next(i for i in range(4, len(full)) if texts[i] != texts[i - 1] and len(texts[i]) > len(texts[3]))
    stop = texts[cut][len(texts[cut - 1]) - 1 :]  # spans the boundary of tokens cut-1 and cut
    first = next(i for i, text in enumerate(texts) if stop in text)
    out = await server.generate([1, 2, 3], {**greedy, "stop": [stop], "include_stop_str_in_output": True}, "stop")
    assert out.token_ids == full[: first + 1] and len(out.token_ids) < len(full)


def test_stop_check_decodes_only_the_tail_yet_stops_where_the_whole_reply_first_holds_a_stop(model_dir):
    """The check decodes the last (longest stop's bytes + 1) tokens, not the whole reply at every token: on random
    replies with planted stops (ASCII, multi-byte, spanning tokens) it ends at the same token as decoding it all."""
    tok = hf_tokenizer(str(model_dir))
    stops = ["</search>", "</answer>", "é!", "\n\n"]
    rng = random.Random(0)
    prompt_len, ends = 3, set()
    for trial in range(200):
        ids = [rng.randrange(len(tok)) for _ in range(40)]
        if trial % 2:
            ids[20:20] = tok.encode(rng.choice(stops) + "x", add_special_tokens=False)
        chosen = rng.sample(stops, 2)
        check = _StopOnStrings(tok, chosen, prompt_len)
        whole = next(
            (n for n in range(prompt_len + 1, len(ids) + 1) if any(s in tok.decode(ids[prompt_len:n]) for s in chosen)),
            None,
        )
        tail = next((n for n in range(prompt_len + 1, len(ids) + 1) if check(torch.tensor([ids[:n]]), None)[0]), None)
        assert tail == whole, (ids, chosen)
        ends.add(whole is not None and whole - prompt_len > check.window)
    assert ends == {True, False}  # stops found beyond the window, and replies without one


async def test_update_weights_loads_the_actors_tensors_and_rejects_a_mismatch(model_dir):
    server = _server(model_dir)
    # named_parameters lists a tied weight once, as the actor's per-tensor export may
    new = {name: torch.randn_like(p) for name, p in server.model.named_parameters()}
    await server.update_weights(new, global_steps=3)
    state = server.model.state_dict()
    for name, tensor in new.items():
        torch.testing.assert_close(state[name], tensor)
    out = await server.generate([1, 2], {"temperature": 1.0}, "x")
    assert out.extra_fields["global_steps"] == 3
    with pytest.raises(ValueError, match="unexpected"):
        await server.update_weights({"not.a.weight": torch.zeros(1)})


def test_sampling_params_map_to_generate_keywords():
    assert sample_kwargs({"temperature": 0}) == {"do_sample": False}
    kw = sample_kwargs({"temperature": 0.7, "top_p": 0.9, "top_k": -1})
    assert kw == {"do_sample": True, "temperature": 0.7, "top_p": 0.9, "top_k": 0, "repetition_penalty": 1.0}


class _Favour(torch.nn.Module):
    """The model's output layer with ``bonus`` added to the logits of ``tokens`` (so sampling would pick them)."""

    def __init__(self, head: torch.nn.Module, tokens: list[int], bonus: float = 50.0):
        super().__init__()
        self.head = head
        self.register_buffer("offset", torch.zeros(head.weight.shape[0]).index_fill_(0, torch.tensor(tokens), bonus))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.head(hidden) + self.offset


async def test_vision_placeholders_are_never_sampled_as_vllm_masks_them(tmp_path):
    """A sampled ``<|image_pad|>`` has no image behind it: verl's agent loop then fails the session computing its
    multimodal positions (seen in CI, a ProVer group trained one row short). vLLM's server masks the placeholders;
    the CPU replica must too, and its log-probs are those of the masked distribution."""
    server = _server(tiny_model.build(tmp_path, arch="qwen3_5_vl"), response_length=24)
    banned = torch.nonzero(server.banned).flatten().tolist()
    from verl.utils import hf_processor

    processor = hf_processor(str(tmp_path))  # the banned ids are the processor's own placeholders
    assert banned == sorted({processor.image_token_id, processor.video_token_id})
    server.model.lm_head = _Favour(server.model.lm_head, banned)
    prompt = [5, 6, 7, 8]
    for request in range(3):
        out = await server.generate(prompt, {"temperature": 1.0, "logprobs": True, "ignore_eos": True}, str(request))
        assert len(out.token_ids) == 24 and not set(out.token_ids) & set(banned), out.token_ids
        ids = torch.tensor([prompt + out.token_ids])
        with torch.no_grad():
            logits = server.model(ids).logits[0, len(prompt) - 1 : -1].float()
        expected = torch.log_softmax(logits.masked_fill(server.banned, float("-inf")), -1)
        expected = expected.gather(-1, torch.tensor(out.token_ids).unsqueeze(-1)).squeeze(-1)
        torch.testing.assert_close(torch.tensor(out.log_probs), expected, atol=1e-4, rtol=1e-4)


def test_banned_mask_covers_the_logits_past_the_tokenizer(model_dir):
    """A text model bans nothing inside its tokenizer; the embedding's padded tail (no token) is banned."""
    from verl.utils import hf_tokenizer

    tokenizer = hf_tokenizer(str(model_dir))
    config = SimpleNamespace(tokenizer=tokenizer, processor=None, local_path=str(model_dir))
    mask = banned_token_mask(config, len(tokenizer) + 8)
    assert not mask[: len(tokenizer)].any() and mask[len(tokenizer) :].all()


ENDLESS = {"temperature": 1.0, "ignore_eos": True, "max_tokens": 10**6}  # a turn that ends only when aborted


async def _until_held(server, *request_ids):
    while not all(r in server._requests for r in request_ids):
        await asyncio.sleep(0.01)


@pytest.mark.timeout(60)
async def test_abort_ends_a_queued_and_a_running_request_as_vllm_does(model_dir):
    server = _server(model_dir)
    running = asyncio.ensure_future(server.generate([1, 2, 3], dict(ENDLESS), "run"))
    queued = asyncio.ensure_future(server.generate([1, 2, 3], dict(ENDLESS), "queued"))
    await _until_held(server, "run", "queued")
    await asyncio.sleep(0.2)
    # a queued request ends at once, with nothing generated, while the running one goes on
    assert await server.abort_request("queued") == {"aborted": True, "request_id": "queued"}
    out = await asyncio.wait_for(queued, 5)
    assert (out.token_ids, out.stop_reason) == ([], "aborted") and not running.done()
    # a running one ends at its next token, returning what it generated so far
    assert (await server.abort_request("run", reset_prefix_cache=False))["aborted"]
    out = await asyncio.wait_for(running, 5)
    assert out.stop_reason == "aborted" and len(out.token_ids) < 10**6 and not server._requests
    assert not (await server.abort_request("run"))["aborted"]  # finished: not found, as vLLM answers
    # abort_all ends every request the server holds; the server serves on afterwards
    calls = [asyncio.ensure_future(server.generate([4, 5], dict(ENDLESS), r)) for r in ("a", "b")]
    await _until_held(server, "a", "b")
    assert await server.abort_all_requests() == {"aborted_count": 2, "request_ids": ["a", "b"]}
    assert [o.stop_reason for o in await asyncio.wait_for(asyncio.gather(*calls), 5)] == ["aborted", "aborted"]
    out = await server.generate([1, 2, 3], {"temperature": 1.0, "max_tokens": 3}, "after")
    assert out.stop_reason == "completed" and 1 <= len(out.token_ids) <= 3
