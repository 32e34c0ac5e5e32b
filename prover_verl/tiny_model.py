"""A tiny random-init model with its own tokenizer and chat template, built offline in seconds.

``python -m prover_verl.tiny_model --out DIR`` writes a Hugging Face model directory (config, weights,
tokenizer, chat template, generation config) that verl loads like any hub model. It exists to run the whole
training loop on CPU (docs/cpu_loop.md): it is random, so it learns nothing worth measuring.

``--arch qwen3`` (default) is a dense Qwen3; ``--arch qwen3_5`` is the recipes' Qwen3.5 text stack (linear and
full attention); ``--arch qwen3_5_vl`` is what the real ``Qwen/Qwen3.5-2B`` checkpoint is: the vision-language
``Qwen3_5ForConditionalGeneration`` (a 1-block vision tower beside the same text stack), a ``Qwen3VLProcessor``
(image and video preprocessor files as the checkpoint ships them), a ``Qwen2Tokenizer`` with Qwen's special tokens
and a chat template of Qwen3.5's kind (thinking block, ``enable_thinking``, vision placeholders). Text stacks have 2
layers and hidden size 64; docs/cpu_loop.md gives the measured costs that made the dense model the default.

The tokenizers are byte-level BPEs trained here on the envs' prompts, so env text takes few tokens. The text-only
archs use a ChatML template that ignores ``enable_thinking``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    GenerationConfig,
    PreTrainedTokenizerFast,
    Qwen2Tokenizer,
)

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
ARCHS = ("qwen3", "qwen3_5", "qwen3_5_vl")
VL_ARCH = "qwen3_5_vl"

# Qwen3.5's special tokens (the vision ones are what Qwen3VLProcessor and the config's token ids refer to) and its
# thinking tags, which Qwen's tokenizers keep as added, non-special tokens
QWEN_SPECIAL = [*SPECIAL, "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
QWEN_ADDED = ["<think>", "</think>"]
# A chat template of Qwen3.5's kind, written for the tiny model: system first, user content as a string or as
# text/image/video blocks (vision placeholders), an assistant turn after the last user message shown with its
# thinking block (earlier ones without), and a generation prompt that opens a thinking block, or an empty one with
# enable_thinking=false (the recipes' setting). No tools: the envs' agents act in plain text.
QWEN3_5_CHAT_TEMPLATE = """\
{%- macro render(content, in_system=false) -%}
  {%- if content is string -%}
    {{- content -}}
  {%- elif content is iterable and content is not mapping -%}
    {%- for block in content -%}
      {%- if block.type == 'image' or 'image' in block or 'image_url' in block -%}
        {%- if in_system -%}{{- raise_exception('A system message cannot show an image.') -}}{%- endif -%}
        {{- '<|vision_start|><|image_pad|><|vision_end|>' -}}
      {%- elif block.type == 'video' or 'video' in block -%}
        {%- if in_system -%}{{- raise_exception('A system message cannot show a video.') -}}{%- endif -%}
        {{- '<|vision_start|><|video_pad|><|vision_end|>' -}}
      {%- elif 'text' in block -%}
        {{- block.text -}}
      {%- else -%}
        {{- raise_exception('Unknown content block.') -}}
      {%- endif -%}
    {%- endfor -%}
  {%- elif content is not none and content is defined -%}
    {{- raise_exception('Content must be a string or a list of blocks.') -}}
  {%- endif -%}
{%- endmacro -%}
{%- if tools -%}{{- raise_exception('The tiny model template takes no tools.') -}}{%- endif -%}
{%- if not messages -%}{{- raise_exception('No messages.') -}}{%- endif -%}
{%- set last = namespace(user=-1) -%}
{%- for message in messages -%}
  {%- if message.role == 'user' -%}{%- set last.user = loop.index0 -%}{%- endif -%}
{%- endfor -%}
{%- for message in messages -%}
  {%- set content = render(message.content, message.role == 'system')|trim -%}
  {%- if message.role == 'system' -%}
    {%- if not loop.first -%}{{- raise_exception('A system message must come first.') -}}{%- endif -%}
    {{- '<|im_start|>system\\n' + content + '<|im_end|>\\n' -}}
  {%- elif message.role == 'user' -%}
    {{- '<|im_start|>user\\n' + content + '<|im_end|>\\n' -}}
  {%- elif message.role == 'assistant' -%}
    {%- set thought = '' -%}
    {%- if message.reasoning_content is string -%}
      {%- set thought = message.reasoning_content -%}
    {%- elif '</think>' in content -%}
      {%- set thought = content.split('</think>')[0].split('<think>')[-1] -%}
      {%- set content = content.split('</think>')[-1]|trim -%}
    {%- endif -%}
    {%- if loop.index0 > last.user -%}
      {{- '<|im_start|>assistant\\n<think>\\n' + thought|trim + '\\n</think>\\n\\n' + content + '<|im_end|>\\n' -}}
    {%- else -%}
      {{- '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' -}}
    {%- endif -%}
  {%- else -%}
    {{- raise_exception('Unknown role: ' + message.role) -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|im_start|>assistant\\n' -}}
  {%- if enable_thinking is defined and enable_thinking is false -%}
    {{- '<think>\\n\\n</think>\\n\\n' -}}
  {%- else -%}
    {{- '<think>\\n' -}}
  {%- endif -%}
{%- endif -%}"""
# The image and video preprocessor files, with the values Qwen/Qwen3.5-2B ships (16-pixel patches, 2x2 merge,
# 2-frame temporal patches, mean and std 0.5): AutoProcessor builds its Qwen3VLProcessor from them
IMAGE_PREPROCESSOR = {
    "processor_class": "Qwen3VLProcessor",
    "image_processor_type": "Qwen2VLImageProcessorFast",
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "size": {"shortest_edge": 65536, "longest_edge": 16777216},
}
VIDEO_PREPROCESSOR = {
    **{k: v for k, v in IMAGE_PREPROCESSOR.items() if k not in ("image_processor_type", "size")},
    "video_processor_type": "Qwen3VLVideoProcessor",
    "size": {"shortest_edge": 4096, "longest_edge": 25165824},
    "fps": 2,
    "min_frames": 4,
    "max_frames": 768,
    "do_sample_frames": True,
}


def env_corpus(env_name: str, episodes: int = 8) -> list[str]:
    """An env's own text for the BPE merges: its system prompt and the observations and actions of its expert's
    episodes on the first ``episodes`` train tasks (what the base :data:`CORPUS` holds for the paper's envs)."""
    spec = envs.spec(env_name)
    env = envs.make(env_name, split=spec.train_split)
    texts = [spec.system_prompt]
    for task_id in env.task_ids()[:episodes]:
        obs, _ = env.reset(options={"task_id": task_id})
        texts.append(obs)
        for action in env.expert_actions():
            obs, _, terminated, truncated, _ = env.step(action)
            texts += [f"<action>{action}</action>", obs]
            if terminated or truncated:
                break
    return texts


def build_tokenizer(vocab_size: int = 512, extra: list[str] = ()) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer with ChatML special tokens and chat template (no download), its merges learnt
    from :data:`CORPUS` and ``extra``."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator((CORPUS + list(extra)) * 4, trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=PAD)
    hf.chat_template = CHAT_TEMPLATE
    return hf


def build_qwen_tokenizer(vocab_size: int = 512, extra: list[str] = ()) -> Qwen2Tokenizer:
    """Qwen's tokenizer class (``Qwen2Tokenizer``, as Qwen3.5's ``tokenizer_config.json`` names it) over a byte-level
    BPE trained here with that class's own pre-tokenizer, with Qwen3.5's special and thinking tokens and a chat
    template of Qwen3.5's kind (no download)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = Qwen2Tokenizer()._tokenizer.pre_tokenizer  # the merges must fit the class's pre-tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[PAD], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    scaffold = ["<|im_start|>system\nYou are\n\n<|im_end|>\n<|im_start|>user\n", "<think>\n\n</think>\n\n"]
    tok.train_from_iterator((CORPUS + scaffold + list(extra)) * 4, trainer)
    model = json.loads(tok.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    hf = Qwen2Tokenizer(vocab=model["vocab"], merges=merges, unk_token=None, eos_token=EOS, pad_token=PAD)
    hf.add_special_tokens({"additional_special_tokens": [t for t in QWEN_SPECIAL if t != PAD]})
    hf.add_tokens([AddedToken(t, special=False, normalized=False) for t in QWEN_ADDED])
    hf.chat_template = QWEN3_5_CHAT_TEMPLATE
    return hf


def family_sizes(layers: int, hidden: int) -> dict[str, int]:
    """Text-stack settings of a larger (or smaller) member of the tiny model family, as :func:`model_config` takes
    them: ``layers`` layers of width ``hidden``, the MLP twice as wide and 4 query heads, as the default (2 layers,
    hidden 64) has."""
    if layers < 1 or hidden < 4 or hidden % 4:
        raise ValueError(
            f"a tiny model needs layers >= 1 and a hidden size that is a multiple of 4, got {layers}x{hidden}"
        )
    return {
        "num_hidden_layers": layers,
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "head_dim": hidden // 4,
    }


def model_config(arch: str, tokenizer, **sizes):
    """Config of the tiny model: 2 text layers, hidden 64, 4 heads (2 key/value), tied embeddings; for
    ``qwen3_5_vl`` also a vision tower of 2 blocks (hidden 32) on Qwen3.5-2B's patch geometry. ``sizes`` (dense
    ``qwen3`` only) override the text stack's settings, e.g. ``hidden_size`` (a larger member of the family)."""
    if sizes and arch != "qwen3":
        raise ValueError(f"model sizes {sorted(sizes)} can be changed for --arch qwen3 only, not {arch!r}")
    eos_id, pad_id = tokenizer.convert_tokens_to_ids(EOS), tokenizer.convert_tokens_to_ids(PAD)
    common = dict(
        vocab_size=len(tokenizer),
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
    common.update(sizes)
    # one linear-attention and one full-attention layer, as the family alternates them
    linear = dict(
        layer_types=["linear_attention", "full_attention"],
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
    )
    if arch == "qwen3":
        from transformers import Qwen3Config

        return Qwen3Config(**common)
    if arch == "qwen3_5":
        from transformers import Qwen3_5TextConfig

        return Qwen3_5TextConfig(**common, **linear)
    if arch == VL_ARCH:
        from transformers import Qwen3_5Config, Qwen3_5TextConfig, Qwen3_5VisionConfig

        # Qwen3.5's multimodal rotary positions: a quarter of each head rotates, its frequencies interleaved over
        # (time, height, width) as the checkpoint's [11, 11, 10] sections are; here 8 of 32 dimensions, [2, 1, 1]
        rope = {
            "rope_type": "default",
            "rope_theta": 10_000_000,
            "partial_rotary_factor": 0.25,
            "mrope_section": [2, 1, 1],
            "mrope_interleaved": True,
        }
        # 2 value heads, not 4: transformers' torch fallback of the gated delta rule (no flash-linear-attention
        # kernels on CPU) costs about its value heads, and it is most of a training step here (1.4 s instead of
        # 2.5 s for 6 x 700 tokens, forward and backward, one thread)
        text = Qwen3_5TextConfig(
            **{**common, "head_dim": 32}, **{**linear, "linear_num_value_heads": 2}, rope_parameters=rope
        )
        vision = Qwen3_5VisionConfig(
            depth=2,
            hidden_size=32,
            intermediate_size=64,
            num_heads=2,
            patch_size=IMAGE_PREPROCESSOR["patch_size"],
            spatial_merge_size=IMAGE_PREPROCESSOR["merge_size"],
            temporal_patch_size=IMAGE_PREPROCESSOR["temporal_patch_size"],
            out_hidden_size=common["hidden_size"],
            num_position_embeddings=16,  # a 4 x 4 grid of learnt positions, interpolated to any image size
        )
        token = tokenizer.convert_tokens_to_ids
        return Qwen3_5Config(
            text_config=text,
            vision_config=vision,
            image_token_id=token("<|image_pad|>"),
            video_token_id=token("<|video_pad|>"),
            vision_start_token_id=token("<|vision_start|>"),
            vision_end_token_id=token("<|vision_end|>"),
            tie_word_embeddings=True,
        )
    raise ValueError(f"--arch must be one of {ARCHS}, got {arch!r}")


def build(
    out: str | Path,
    arch: str = "qwen3",
    seed: int = 0,
    vocab_size: int = 512,
    corpus_env: str | None = None,
    sizes: dict[str, int] | None = None,
) -> Path:
    """Write the tiny model, tokenizer, chat template and generation config (and for ``qwen3_5_vl`` the image and
    video preprocessor files) to ``out`` and return it. ``corpus_env`` adds that env's texts (:func:`env_corpus`)
    to the tokenizer's corpus; ``sizes`` (``qwen3`` only, e.g. :func:`family_sizes`) makes another member of the
    family."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    extra = env_corpus(corpus_env) if corpus_env else []
    tokenizer = build_qwen_tokenizer(vocab_size, extra) if arch == VL_ARCH else build_tokenizer(vocab_size, extra)
    config = model_config(arch, tokenizer, **(sizes or {}))
    torch.manual_seed(seed)
    # the class verl's actor builds for this config (prover_verl.hf_model.policy_model_class; importing verl here
    # would cost seconds)
    auto_class = AutoModelForImageTextToText if arch == VL_ARCH else AutoModelForCausalLM
    model = auto_class.from_config(config, dtype=torch.float32)
    eos_id, pad_id = tokenizer.convert_tokens_to_ids(EOS), tokenizer.convert_tokens_to_ids(PAD)
    model.generation_config = GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    if arch == VL_ARCH:
        (out / "preprocessor_config.json").write_text(json.dumps(IMAGE_PREPROCESSOR, indent=2) + "\n")
        (out / "video_preprocessor_config.json").write_text(json.dumps(VIDEO_PREPROCESSOR, indent=2) + "\n")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output model directory")
    parser.add_argument("--arch", default="qwen3", choices=ARCHS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vocab-size", type=int, default=512)
    parser.add_argument("--corpus-env", choices=envs.env_names(), help="also learn the merges from this env's texts")
    # vLLM's CPU attention refuses a head size of 16 (the family's default); 32 serves (rollout.name=vllm on CPU)
    parser.add_argument("--head-dim", type=int, help="attention head size (--arch qwen3; default: hidden size / 4)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    sizes = None if args.head_dim is None else {"head_dim": args.head_dim}
    out = build(args.out, args.arch, args.seed, args.vocab_size, args.corpus_env, sizes)
    print(json.dumps({"out": str(out), "arch": args.arch, "seconds": round(time.perf_counter() - start, 2)}))


if __name__ == "__main__":
    main()
