"""``python -m prover_verl.tiny_model``: a loadable random model with a chat template, offline."""

import pytest
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from prover_verl import tiny_model


@pytest.mark.parametrize("arch", tiny_model.ARCHS)
def test_tiny_model_loads_and_chats(tmp_path, arch):
    out = tiny_model.build(tmp_path / arch, arch=arch)
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    assert AutoConfig.from_pretrained(out).model_type == {"qwen3": "qwen3", "qwen3_5": "qwen3_5_text"}[arch]
    assert model.config.vocab_size == len(tok)
    text = tok.apply_chat_template(
        [{"role": "user", "content": "go to desk 1"}], add_generation_prompt=True, tokenize=False, enable_thinking=False
    )
    assert text == "<|im_start|>user\ngo to desk 1<|im_end|>\n<|im_start|>assistant\n"
    assert tok.eos_token_id == model.generation_config.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
    assert sum(p.numel() for p in model.parameters()) < 200_000
