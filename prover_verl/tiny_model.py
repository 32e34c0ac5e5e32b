"""A tiny random-init model with its own tokenizer and chat template, built offline in seconds.

``python -m prover_verl.tiny_model --out DIR`` writes a Hugging Face model directory (config, weights,
tokenizer, chat template, generation config) that verl loads like any hub model. It exists to run the whole
training loop on CPU (docs/cpu_loop.md): it is random, so it learns nothing worth measuring.

``--arch qwen3`` (default) is a dense Qwen3; ``--arch qwen3_5`` is the recipes' own Qwen3.5 family (linear and
full attention). Both have 2 layers and hidden size 64; docs/cpu_loop.md gives the measured generation speed
that made the dense model the default (Qwen3.5's linear attention runs a slow torch fallback on CPU).

The tokenizer is a byte-level BPE trained here on the envs' prompts, so env text takes few tokens; its chat
template is ChatML (Qwen's), ignoring ``enable_thinking``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, GenerationConfig, PreTrainedTokenizerFast

import envs

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
EOS = "<|im_end|>"
PAD = "<|endoftext|>"
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# text the BPE merges are learnt from: the envs' system prompts and the words of their actions
CORPUS = [
    *(envs.spec(name).system_prompt for name in ("alfworld", "webshop", "searchqa")),
    "<action>look</action> <action>inventory</action> go to take from put in open close use examine",
    "<action>search[query]</action> <action>click[buy now]</action> <action>click[back to search]</action>",
    "<search>query</search> <information>result</information> <answer>answer</answer> <think>thought</think>",
]
ARCHS = ("qwen3", "qwen3_5")


def build_tokenizer(vocab_size: int = 512) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer with ChatML special tokens and chat template (no download)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS * 4, trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=PAD)
    hf.chat_template = CHAT_TEMPLATE
    return hf


def model_config(arch: str, vocab_size: int, eos_id: int, pad_id: int):
    """Config of the tiny model: 2 layers, hidden 64, 4 heads (2 key/value), tied embeddings."""
    common = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        bos_token_id=None,
    )
    if arch == "qwen3":
        from transformers import Qwen3Config

        return Qwen3Config(**common)
    if arch == "qwen3_5":
        from transformers import Qwen3_5TextConfig

        # one linear-attention and one full-attention layer, as the family alternates them
        return Qwen3_5TextConfig(
            **common,
            layer_types=["linear_attention", "full_attention"],
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            linear_key_head_dim=16,
            linear_value_head_dim=16,
        )
    raise ValueError(f"--arch must be one of {ARCHS}, got {arch!r}")


def build(out: str | Path, arch: str = "qwen3", seed: int = 0, vocab_size: int = 512) -> Path:
    """Write the tiny model, tokenizer and generation config to ``out`` and return it."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(vocab_size)
    eos_id, pad_id = tokenizer.convert_tokens_to_ids(EOS), tokenizer.convert_tokens_to_ids(PAD)
    config = model_config(arch, len(tokenizer), eos_id, pad_id)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config = GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output model directory")
    parser.add_argument("--arch", default="qwen3", choices=ARCHS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vocab-size", type=int, default=512)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    out = build(args.out, args.arch, args.seed, args.vocab_size)
    print(json.dumps({"out": str(out), "arch": args.arch, "seconds": round(time.perf_counter() - start, 2)}))


if __name__ == "__main__":
    main()
