"""``python -m prover_verl.tiny_model``: a loadable random model with a chat template, offline."""

import json

import pytest
import torch
from transformers import AutoConfig, AutoTokenizer, GenerationConfig

import prover_verl.cpu.register  # noqa: F401  (as in every verl process: Qwen3.5's processor loads without torchvision)
from prover_verl import tiny_model
from prover_verl.hf_model import load_policy_model, policy_model_class


@pytest.mark.parametrize("arch", tiny_model.ARCHS)
def test_tiny_model_loads_and_chats(tmp_path, arch):
    out = tiny_model.build(tmp_path / arch, arch=arch)
    tok = AutoTokenizer.from_pretrained(out)
    model = load_policy_model(out)
    model_type = {"qwen3": "qwen3", "qwen3_5": "qwen3_5_text", "qwen3_5_vl": "qwen3_5"}[arch]
    assert AutoConfig.from_pretrained(out).model_type == model_type
    assert model.config.get_text_config().vocab_size == len(tok)
    text = tok.apply_chat_template(
        [{"role": "user", "content": "go to desk 1"}], add_generation_prompt=True, tokenize=False, enable_thinking=False
    )
    scaffold = "<think>\n\n</think>\n\n" if arch == tiny_model.VL_ARCH else ""
    assert text == "<|im_start|>user\ngo to desk 1<|im_end|>\n<|im_start|>assistant\n" + scaffold
    assert tok.eos_token_id == model.generation_config.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
    text_params = sum(p.numel() for name, p in model.named_parameters() if ".visual." not in name)
    assert text_params < 200_000


# What the real Qwen/Qwen3.5-2B repository's files say (its config.json, tokenizer_config.json,
# preprocessor_config.json and video_preprocessor_config.json as published on the Hub; nothing is downloaded here):
# the tiny vision-language model must load as the same classes, through the same Auto classes.
REAL_QWEN3_5_2B = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5",
    "tokenizer_class": "Qwen2Tokenizer",
    "processor_class": "Qwen3VLProcessor",
    "image_processor_type": "Qwen2VLImageProcessorFast",
    "video_processor_type": "Qwen3VLVideoProcessor",
    "patch_size": 16,
    "merge_size": 2,
    "temporal_patch_size": 2,
}
# Qwen3.5's chat template: the generation prompt opens a thinking block, or shows an empty one with
# enable_thinking=false; the assistant turn after the last user message is shown with its thinking block
REAL_GENERATION_PROMPT = {
    False: "<|im_start|>assistant\n<think>\n\n</think>\n\n",
    True: "<|im_start|>assistant\n<think>\n",
}


@pytest.fixture(scope="module")
def vl_dir(tmp_path_factory):
    return tiny_model.build(tmp_path_factory.mktemp("vl"), arch=tiny_model.VL_ARCH)


def test_vl_model_has_the_real_checkpoints_classes(vl_dir):
    from transformers import AutoProcessor, Qwen3_5ForConditionalGeneration
    from verl.utils.tokenizer import hf_processor

    files = {name: json.loads((vl_dir / name).read_text()) for name in ("config.json", "tokenizer_config.json")}
    image = json.loads((vl_dir / "preprocessor_config.json").read_text())
    video = json.loads((vl_dir / "video_preprocessor_config.json").read_text())
    assert files["config.json"]["architectures"] == REAL_QWEN3_5_2B["architectures"]
    assert files["config.json"]["model_type"] == REAL_QWEN3_5_2B["model_type"]
    assert files["tokenizer_config.json"]["tokenizer_class"] == REAL_QWEN3_5_2B["tokenizer_class"]
    assert image["processor_class"] == video["processor_class"] == REAL_QWEN3_5_2B["processor_class"]
    assert image["image_processor_type"] == REAL_QWEN3_5_2B["image_processor_type"]
    assert video["video_processor_type"] == REAL_QWEN3_5_2B["video_processor_type"]
    for key in ("patch_size", "merge_size", "temporal_patch_size"):
        assert image[key] == video[key] == REAL_QWEN3_5_2B[key]

    config = AutoConfig.from_pretrained(vl_dir)
    assert type(config).__name__ == "Qwen3_5Config" and config.vision_config.depth >= 1
    processor = AutoProcessor.from_pretrained(vl_dir)
    assert type(processor).__name__ == REAL_QWEN3_5_2B["processor_class"]
    assert type(processor.tokenizer).__name__ == REAL_QWEN3_5_2B["tokenizer_class"]
    assert type(processor.video_processor).__name__ == REAL_QWEN3_5_2B["video_processor_type"]
    # verl's own loading: a multimodal processor with the model's rotary index bound (its VL token path)
    verl_processor = hf_processor(str(vl_dir))
    assert type(verl_processor).__name__ == "Qwen3VLProcessor" and hasattr(verl_processor, "get_rope_index")
    # the class verl's actor builds, the replica serves and imitation trains: with the vision tower
    model = load_policy_model(vl_dir)
    assert type(model) is Qwen3_5ForConditionalGeneration
    assert policy_model_class(config)._model_mapping[type(config)] is Qwen3_5ForConditionalGeneration
    assert sum(p.numel() for p in model.model.visual.parameters()) > 0
    assert sum(p.numel() for p in model.parameters()) < 400_000


def test_vl_chat_template_is_qwen3_5s_kind(vl_dir):
    tok = AutoTokenizer.from_pretrained(vl_dir)
    conv = [{"role": "system", "content": "S"}, {"role": "user", "content": "go to desk 1"}]
    for thinking, prompt in REAL_GENERATION_PROMPT.items():
        text = tok.apply_chat_template(conv, add_generation_prompt=True, tokenize=False, enable_thinking=thinking)
        assert text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\ngo to desk 1<|im_end|>\n" + prompt
    history = [
        *conv,
        {"role": "assistant", "content": "<action>look</action>", "reasoning_content": "why"},
        {"role": "user", "content": "ok"},
        {"role": "assistant", "content": "<think>\nmore\n</think>\n\n<action>go</action>"},
    ]
    text = tok.apply_chat_template(history, tokenize=False)
    # earlier turns without their thinking, the turn after the last user message with it
    assert "<|im_start|>assistant\n<action>look</action><|im_end|>\n" in text
    assert text.endswith("<|im_start|>assistant\n<think>\nmore\n</think>\n\n<action>go</action><|im_end|>\n")
    assert tok.eos_token == "<|im_end|>" and tok.eos_token_id == GenerationConfig.from_pretrained(vl_dir).eos_token_id


def test_vl_processor_and_vision_tower_run_an_image(vl_dir):
    """An image goes through the processor (one placeholder per merged patch) and the tiny vision tower."""
    from PIL import Image
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(vl_dir)
    conv = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "what is it?"}]}]
    text = processor.apply_chat_template(conv, add_generation_prompt=True, enable_thinking=False)
    assert "<|vision_start|><|image_pad|><|vision_end|>what is it?" in text
    inputs = processor(text=[text], images=[Image.new("RGB", (64, 64), "red")], return_tensors="pt")
    grid = inputs["image_grid_thw"][0]
    assert int((inputs["input_ids"] == processor.image_token_id).sum()) == int(grid.prod()) // 4
    model = load_policy_model(vl_dir).eval()
    with torch.no_grad():
        logits = model(**inputs).logits
    assert logits.shape[:2] == inputs["input_ids"].shape and torch.isfinite(logits).all()


def test_verl_fsdp2_wraps_the_vision_blocks(vl_dir, tmp_path):
    """verl's FSDP2 wrapping (apply_fsdp2, by the model's _no_split_modules) shards every vision block and every
    decoder layer of the tiny VL model as units of their own, as it does the real checkpoint's."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule
    from verl.utils.fsdp_utils import apply_fsdp2

    model = load_policy_model(vl_dir)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        apply_fsdp2(model, {"mesh": init_device_mesh("cpu", (1,))}, {})
        units = [*model.model.visual.blocks, *model.model.language_model.layers, model]
        assert all(isinstance(unit, FSDPModule) for unit in units)
        assert not isinstance(model.model.visual.patch_embed, FSDPModule)
    finally:
        dist.destroy_process_group()


def test_corpus_env_teaches_the_tokenizer_that_envs_words(tmp_path):
    import envs

    env = envs.make("keydoor")
    obs, _ = env.reset(options={"task_id": env.task_ids()[0]})
    base = AutoTokenizer.from_pretrained(tiny_model.build(tmp_path / "base"))
    taught = AutoTokenizer.from_pretrained(tiny_model.build(tmp_path / "keydoor", corpus_env="keydoor"))
    assert taught.decode(taught(obs)["input_ids"]) == obs
    # keydoor's rooms are words the base corpus lacks: far fewer tokens once its texts are in the corpus
    assert len(taught(obs)["input_ids"]) < 0.7 * len(base(obs)["input_ids"])


def test_family_sizes_of_2x64_are_the_default_tiny_model_and_bad_sizes_are_refused():
    tokenizer = tiny_model.build_tokenizer(300)
    default, sized = (
        tiny_model.model_config("qwen3", tokenizer),
        tiny_model.model_config("qwen3", tokenizer, **tiny_model.family_sizes(2, 64)),
    )
    assert default.to_dict() == sized.to_dict()
    wider = tiny_model.model_config("qwen3", tokenizer, **tiny_model.family_sizes(4, 128))
    assert (wider.num_hidden_layers, wider.hidden_size, wider.intermediate_size, wider.head_dim) == (4, 128, 256, 32)
    with pytest.raises(ValueError, match="multiple of 4"):
        tiny_model.family_sizes(2, 66)
