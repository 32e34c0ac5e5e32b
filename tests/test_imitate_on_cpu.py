"""``python -m prover_verl.imitate``: the smoke's expert warm start stops at a replay probability."""

import math

import pandas as pd
import pytest
import torch

from prover_verl import imitate, tiny_model
from prover_verl.data import write_dataset
from prover_verl.hf_model import load_policy_model

SYSTEM = {"role": "system", "content": "You are an agent."}


def chat(*texts: str, system: bool = False) -> list[dict]:
    """A conversation of ``texts``, user and assistant in turn (the first a user's), after ``SYSTEM`` if ``system``."""
    turns = [{"role": ("user", "assistant")[i % 2], "content": text} for i, text in enumerate(texts)]
    return [SYSTEM, *turns] if system else turns


@pytest.mark.parametrize("system", [True, False], ids=["system", "no_system"])
@pytest.mark.parametrize("arch", ["qwen3", tiny_model.VL_ARCH])
def test_labels_are_the_agent_loops_policy_tokens(tmp_path, arch, system):
    """The episode is tokenized as the env agent loop tokenizes it (verl's Continuous Token builder), labels on the
    tokens the policy generates: each reply and its end-of-turn token, nothing of the chat scaffold; also where the
    first prompt has no system message (Search-R1's protocol), whose first reply was once taken for prompt."""
    builder = imitate.token_builder(tiny_model.build(tmp_path / arch, arch=arch))
    tok = builder.tokenizer
    conv = chat("go", "<action>look</action>", "You see a desk.", "<action>open desk</action>", system=system)
    ids, labels = imitate.assistant_labels(builder, conv)
    generated = [t for t, label in zip(ids, labels, strict=True) if label != -100]
    replies = [tok.encode(m["content"], add_special_tokens=False) + [tok.eos_token_id] for m in conv[-3::2]]
    assert generated == replies[0] + replies[1]
    # the first prompt is what the agent loop sends for the first reply
    first = builder.build_initial_tokens(conv[: len(conv) - 3])
    assert ids[: len(first)] == first and all(label == -100 for label in labels[: len(first)])
    # the context is the chat template's own rendering, with the recipes' enable_thinking=false
    expected = tok.apply_chat_template(conv[:-1], add_generation_prompt=True, tokenize=False, enable_thinking=False)
    prefix = tok.decode(ids[: len(ids) - len(replies[1])])
    if arch == tiny_model.VL_ARCH:  # Qwen3.5 keeps the generated (empty) thinking block of the earlier reply
        expected = expected.replace("assistant\n<action>look", "assistant\n<think>\n\n</think>\n\n<action>look")
    assert prefix == expected


@pytest.mark.parametrize("inline", [False, True], ids=["chat", "inline"])
def test_a_reply_ended_by_a_stop_string_is_laid_out_as_in_the_loop(tmp_path, inline):
    """Search-R1's protocol stops generation at ``</search>`` (vLLM's ``stop``): the policy never samples the
    end-of-turn token there. In the chat layout the turn is closed (``<|im_end|>``, not learnt) before the
    observation's user turn; in the inline layout (Search-R1's) the observation's text follows the stop string in the
    same assistant turn. The imitation learns only the replies, in the layout the loop rolls them out in."""
    builder = imitate.token_builder(tiny_model.build(tmp_path / "m"))
    tok = builder.tokenizer
    conv = chat("question", "<search>q</search>", "<information>doc</information>", "<answer>a</answer>")
    ids, labels = imitate.assistant_labels(builder, conv, stop=("</search>", "</answer>"), inline=inline)
    search = tok.encode("<search>q</search>", add_special_tokens=False)
    answer = tok.encode("<answer>a</answer>", add_special_tokens=False)
    assert [t for t, label in zip(ids, labels, strict=True) if label != -100] == search + answer
    start = builder.build_initial_tokens(conv[:1])
    assert ids[: len(start)] == start
    between = "<information>doc</information>"
    if not inline:
        between = f"<|im_end|>\n<|im_start|>user\n{between}<|im_end|>\n<|im_start|>assistant\n"
    assert tok.decode(ids[len(start) :]) == f"<search>q</search>{between}<answer>a</answer>"


def test_replay_log_probs_are_the_models_probability_of_the_expert_replies(tmp_path):
    model_dir = tiny_model.build(tmp_path / "model")
    builder = imitate.token_builder(model_dir)
    model = load_policy_model(model_dir).eval()
    convs = [
        chat("go", "<action>look</action>", system=True),
        chat("a much longer observation to pad the other row", "<action>open door</action>", "done", system=True),
    ]
    batch = [imitate.assistant_labels(builder, c) for c in convs]
    with torch.no_grad():
        batched = imitate.replay_log_probs(model, batch)
        for (ids, labels), got in zip(batch, batched, strict=True):
            # by hand, one row, no padding: sum of log p(token | prefix) over the assistant tokens only
            logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
            expected = sum(logp[t - 1, ids[t]] for t in range(1, len(ids)) if labels[t] != -100)
            assert any(label == -100 for label in labels) and any(label != -100 for label in labels)
            torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


def test_imitation_stops_at_the_target_replay_probability(tmp_path):
    model_dir = tiny_model.build(tmp_path / "model")
    write_dataset("searchqa", tmp_path / "data", "train", "test", max_train=2, max_val=1)
    target = 0.05
    result = imitate.imitate(model_dir, "searchqa", tmp_path / "data", {}, target_replay=target, max_steps=300)
    assert result["episodes"] == 2 and 0 < result["steps"] < 300
    assert result["replay_probability"] >= target
    # the saved model is the one that reached it
    builder = imitate.token_builder(model_dir)
    model = load_policy_model(model_dir)
    rows = pd.read_parquet(tmp_path / "data" / "train.parquet")["extra_info"]
    batch = [
        imitate.assistant_labels(builder, imitate.expert_conversation("searchqa", {}, r["task_id"], r["split"]))
        for r in rows
    ]
    with torch.no_grad():
        replay = float(imitate.replay_log_probs(model, batch).exp().mean())
    assert math.isclose(replay, result["replay_probability"], abs_tol=2e-3)


def test_max_episodes_imitates_the_first_tasks_only(tmp_path):
    model_dir = tiny_model.build(tmp_path / "model")
    write_dataset("searchqa", tmp_path / "data", "train", "test", max_train=3, max_val=1)
    result = imitate.imitate(
        model_dir, "searchqa", tmp_path / "data", {}, target_replay=0.5, max_steps=0, max_episodes=2
    )
    assert result == {"episodes": 2, "steps": 0, "replay_probability": result["replay_probability"]}
    with pytest.raises(ValueError, match="max_episodes"):
        imitate.imitate(model_dir, "searchqa", tmp_path / "data", {}, max_episodes=0)


def test_the_command_line_passes_the_learning_rate_to_the_imitation(monkeypatch, capsys):
    seen = {}
    monkeypatch.setattr(imitate, "imitate", lambda *a, **kw: seen.update(kw) or {"steps": 0})
    imitate.main(["--model", "m", "--env", "keydoor", "--data-dir", "d", "--lr", "0.001"])
    assert seen["lr"] == 0.001 and '"steps": 0' in capsys.readouterr().out
