"""``python -m prover_verl.imitate``: the smoke's expert warm start stops at a replay probability."""

import math

import pandas as pd
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from prover_verl import imitate, tiny_model
from prover_verl.data import write_dataset


def test_replay_log_probs_are_the_models_probability_of_the_expert_replies(tmp_path):
    model_dir = tiny_model.build(tmp_path / "model")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa").eval()
    convs = [
        [{"role": "user", "content": "go"}, {"role": "assistant", "content": "<action>look</action>"}],
        [
            {"role": "user", "content": "a much longer observation to pad the other row"},
            {"role": "assistant", "content": "<action>open door</action>"},
            {"role": "user", "content": "done"},
        ],
    ]
    batch = [imitate.assistant_labels(tokenizer, c) for c in convs]
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
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    rows = pd.read_parquet(tmp_path / "data" / "train.parquet")["extra_info"]
    batch = [
        imitate.assistant_labels(tokenizer, imitate.expert_conversation("searchqa", {}, r["task_id"], r["split"]))
        for r in rows
    ]
    with torch.no_grad():
        replay = float(imitate.replay_log_probs(model, batch).exp().mean())
    assert math.isclose(replay, result["replay_probability"], abs_tol=2e-3)
