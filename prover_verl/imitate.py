"""A few seconds of imitation of an env's expert, so a tiny model succeeds on some episodes and fails on others.

A random model never wins an ALFWorld, WebShop or Search-QA episode, so a CPU smoke run with it has no group
with both a success and a failure, and ProVer's judge, verifier and credit never run. ``python -m
prover_verl.imitate --model DIR --env alfworld --data-dir DATA`` trains the model of ``DIR`` in place on the
expert trajectories of the first tasks of the training data (``envs``' own ``expert_actions``), rendered as
the agent loop renders them: the same system prompt, observation messages and chat template; the loss is on
the assistant tokens only. Sampled at temperature 1 afterwards, the model plays the expert's actions with some
noise. It is a smoke-test device and says nothing about the method.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pandas as pd
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import envs
from prover_verl.agent.adapters import make_adapter


def expert_conversation(env_name: str, env_kwargs: dict, task_id: str, split: str) -> list[dict]:
    """The agent loop's messages of one expert episode (system, observation, action, observation, ...)."""
    env = envs.make(env_name, split=split, **env_kwargs)
    adapter = make_adapter(env_name)
    obs, info = env.reset(options={"task_id": task_id})
    messages = [
        {"role": "system", "content": adapter.system},
        {"role": "user", "content": adapter.observation_message(obs, info)},
    ]
    for action in env.expert_actions():
        reply = f"<action>{action}</action>" if adapter.tagged_action else action
        messages.append({"role": "assistant", "content": reply})
        obs, _reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
        messages.append({"role": "user", "content": adapter.observation_message(obs, info)})
    return messages


def assistant_labels(tokenizer, messages: list[dict]) -> tuple[list[int], list[int]]:
    """Token ids of the whole conversation and labels that keep only the assistant replies (others -100)."""
    ids: list[int] = []
    labels: list[int] = []
    for i, message in enumerate(messages):
        before = tokenizer.apply_chat_template(messages[:i], tokenize=False) if i else ""
        after = tokenizer.apply_chat_template(messages[: i + 1], tokenize=False)
        piece = tokenizer(after[len(before) :], add_special_tokens=False)["input_ids"]
        ids += piece
        labels += piece if message["role"] == "assistant" else [-100] * len(piece)
    return ids, labels


def imitate(
    model_dir: str | Path, env_name: str, data_dir: str | Path, env_kwargs: dict, steps: int = 60, lr: float = 3e-3
) -> dict:
    """Train the model in ``model_dir`` in place on expert episodes of the train parquet's tasks."""
    rows = pd.read_parquet(Path(data_dir) / "train.parquet")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    batch = []
    for info in rows["extra_info"]:
        messages = expert_conversation(env_name, env_kwargs, info["task_id"], info["split"])
        batch.append(assistant_labels(tokenizer, messages))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(steps):
        total = 0.0
        optimizer.zero_grad()
        for ids, labels in batch:
            loss = model(input_ids=torch.tensor([ids]), labels=torch.tensor([labels])).loss / len(batch)
            loss.backward()
            total += float(loss)
        optimizer.step()
        losses.append(total)
    model.save_pretrained(model_dir)
    return {"episodes": len(batch), "loss_first": round(losses[0], 3), "loss_last": round(losses[-1], 3)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="model directory, trained in place")
    parser.add_argument("--env", required=True, choices=envs.env_names())
    parser.add_argument("--data-dir", required=True, help="directory of train.parquet from prover_verl.data")
    parser.add_argument("--env-kwargs", default="{}", help="JSON constructor arguments of the env")
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    result = imitate(args.model, args.env, args.data_dir, json.loads(args.env_kwargs), args.steps)
    print(json.dumps({**result, "seconds": round(time.perf_counter() - start, 1)}))


if __name__ == "__main__":
    main()
